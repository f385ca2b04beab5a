//! What the stateless era (2026-07-28) adds to the messages, read and built here and driven by
//! the connection: the `server/discover` result, `resultType` and the input rounds of
//! multi-round-trip requests, and the `subscriptions/listen` filter.

use serde_json::{Map, Value, json};

use crate::model::capabilities::ServerCapabilities;
use crate::model::request::{Params, Request, RequestId};
use crate::model::types::{Implementation, Notification, ServerInfo};
use crate::wire::jsonrpc::read_id;

/// The methods a server may answer with `input_required`.
pub(crate) const MULTI_ROUND_METHODS: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// The method that opens a subscription.
pub(crate) const LISTEN: &str = "subscriptions/listen";

/// The notification that acknowledges one.
pub(crate) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The `_meta` member naming the subscription a notification belongs to.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The newest of `ours` (newest first) that `theirs` lists.
pub(crate) fn mutual<S: AsRef<str>>(theirs: &[S], ours: &[&'static str]) -> Option<&'static str> {
    (ours.iter().copied()).find(|version| theirs.iter().any(|v| v.as_ref() == *version))
}

/// Reads a `server/discover` result, and the `serverInfo` its `_meta` held (see
/// [`ResultMembers`](crate::model::result_members::ResultMembers)); `protocol_version` is left for
/// the caller to choose.
pub(crate) fn read_discover_result(
    result: Value,
    meta_info: Option<String>,
) -> Result<ServerInfo, String> {
    let Value::Object(mut result) = result else {
        return Err("not an object".to_owned());
    };
    let supported_versions = match result.remove("supportedVersions") {
        Some(Value::Array(versions)) => (versions.into_iter())
            .filter_map(|version| match version {
                Value::String(version) => Some(version),
                _ => None,
            })
            .collect(),
        _ => return Err("`supportedVersions` is missing or not an array".to_owned()),
    };
    // Where the revision puts it, or (leniently) where `initialize` did.
    let meta_info = match meta_info.map(|text| serde_json::from_str(&text)) {
        Some(Ok(info)) => Some(info),
        Some(Err(error)) => return Err(format!("serverInfo: {error}")),
        None => None,
    };
    let server = match meta_info.or_else(|| result.remove("serverInfo")) {
        None | Some(Value::Null) => Implementation::default(),
        Some(info) => {
            serde_json::from_value(info).map_err(|error| format!("serverInfo: {error}"))?
        }
    };
    let (capabilities, instructions) = capabilities_and_instructions(&mut result);
    Ok(ServerInfo {
        protocol_version: String::new(),
        supported_versions,
        server,
        capabilities,
        instructions,
        fallback: None,
    })
}

/// The `capabilities` and `instructions` of a handshake or discover result, as both eras
/// read them: capabilities of an odd shape declare nothing; instructions only as text.
pub(crate) fn capabilities_and_instructions(
    result: &mut Map<String, Value>,
) -> (ServerCapabilities, Option<String>) {
    let capabilities = (result.get("capabilities"))
        .map(ServerCapabilities::read)
        .unwrap_or_default();
    let instructions = match result.remove("instructions") {
        Some(Value::String(text)) => Some(text),
        _ => None,
    };
    (capabilities, instructions)
}

/// One request of the server's inside an `input_required` result, handed to the caller as a
/// [`ServerRequest`](crate::ServerRequest).
pub(crate) struct InputRequest {
    /// The server's key for it; the answer goes under the same key.
    pub(crate) key: String,
    /// `elicitation/create`, `roots/list` or `sampling/createMessage`.
    pub(crate) method: String,
    /// As sent; `None` when the server sent no `params`.
    pub(crate) params: Option<Value>,
}

/// The parts of an `input_required` result: its input requests (`None` when it sent none,
/// so the retry goes at once) and its `requestState`.
pub(crate) struct InputRound {
    pub(crate) requests: Option<Vec<InputRequest>>,
    pub(crate) state: Option<String>,
}

/// Reads an `input_required` result; `covers` says which methods we declared.
pub(crate) fn read_input_round(
    method: &str,
    mut result: Value,
    covers: impl Fn(&str) -> bool,
) -> Result<InputRound, String> {
    if !MULTI_ROUND_METHODS.contains(&method) {
        return Err(format!(
            "`input_required` answers `{method}`, which takes no input"
        ));
    }
    let Some(result) = result.as_object_mut() else {
        return Err("not an object".to_owned());
    };
    let state = match result.remove("requestState") {
        None => None,
        Some(Value::String(state)) => Some(state),
        Some(_) => return Err("`requestState` is not a string".to_owned()),
    };
    let requests = match result.remove("inputRequests") {
        None | Some(Value::Null) => None,
        Some(Value::Object(requests)) => Some(read_input_requests(requests, covers)?),
        Some(_) => return Err("`inputRequests` is not an object".to_owned()),
    };
    if requests.is_none() && state.is_none() {
        return Err("`input_required` with neither `inputRequests` nor `requestState`".to_owned());
    }
    Ok(InputRound { requests, state })
}

fn read_input_requests(
    requests: Map<String, Value>,
    covers: impl Fn(&str) -> bool,
) -> Result<Vec<InputRequest>, String> {
    const KNOWN: &[&str] = &["elicitation/create", "roots/list", "sampling/createMessage"];
    (requests.into_iter())
        .map(|(key, request)| {
            let Value::Object(mut request) = request else {
                return Err(format!("input request `{key}` is not an object"));
            };
            let method = match request.remove("method") {
                Some(Value::String(method)) => method,
                _ => return Err(format!("input request `{key}` has no string `method`")),
            };
            if !KNOWN.contains(&method.as_str()) {
                return Err(format!(
                    "input request `{key}` asks `{method}`, an unknown method"
                ));
            }
            if !covers(&method) {
                return Err(format!(
                    "input request `{key}` asks `{method}`, a capability we did not declare"
                ));
            }
            let params = request.remove("params");
            Ok(InputRequest {
                key,
                method,
                params,
            })
        })
        .collect()
}

/// What a `subscriptions/listen` asks to hear about: the spec's `notifications` filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenFilter {
    /// `notifications/tools/list_changed`.
    pub tools_list_changed: bool,
    /// `notifications/prompts/list_changed`.
    pub prompts_list_changed: bool,
    /// `notifications/resources/list_changed`.
    pub resources_list_changed: bool,
    /// `notifications/resources/updated` for these URIs.
    pub resource_uris: Vec<String>,
    /// Tasks extension: `notifications/tasks` for these task ids.
    pub task_ids: Vec<String>,
}

impl ListenFilter {
    /// The `notifications` object; a field left at its default is omitted.
    pub(crate) fn to_json(&self) -> Value {
        let mut filter = Map::new();
        let flags = [
            ("toolsListChanged", self.tools_list_changed),
            ("promptsListChanged", self.prompts_list_changed),
            ("resourcesListChanged", self.resources_list_changed),
        ];
        for (name, _) in flags.into_iter().filter(|(_, on)| *on) {
            filter.insert(name.to_owned(), Value::Bool(true));
        }
        if !self.resource_uris.is_empty() {
            filter.insert(
                "resourceSubscriptions".to_owned(),
                json!(self.resource_uris),
            );
        }
        if !self.task_ids.is_empty() {
            filter.insert("taskIds".to_owned(), json!(self.task_ids));
        }
        Value::Object(filter)
    }
}

impl ListenFilter {
    /// Reads a `notifications` filter: a flag counts only when it is `true`, and a URI only
    /// when it is a string.
    pub(crate) fn from_json(filter: &Value) -> Self {
        let flag = |name: &str| filter.get(name) == Some(&Value::Bool(true));
        let strings = |name: &str| match filter.get(name) {
            Some(Value::Array(items)) => (items.iter())
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        let resource_uris = strings("resourceSubscriptions");
        Self {
            tools_list_changed: flag("toolsListChanged"),
            prompts_list_changed: flag("promptsListChanged"),
            resources_list_changed: flag("resourcesListChanged"),
            resource_uris,
            task_ids: strings("taskIds"),
        }
    }
}

impl Notification {
    /// Stateless era: the subscription this notification belongs to, from its
    /// `_meta["io.modelcontextprotocol/subscriptionId"]`: the id of the
    /// [`Request::listen`] that opened it, as it went on the wire.
    pub fn subscription_id(&self) -> Option<RequestId> {
        let meta = self.params.as_ref()?.get("_meta")?;
        let id = read_id(meta.get(SUBSCRIPTION_ID)?)?;
        Some(RequestId(id))
    }

    /// Stateless era: what the server agreed to send on a subscription, if this is its
    /// acknowledgement (its [`subscription_id`](Self::subscription_id) names which); a
    /// missing filter agrees to nothing.
    pub fn acknowledged(&self) -> Option<ListenFilter> {
        if self.method != ACKNOWLEDGED {
            return None;
        }
        let filter = (self.params.as_ref()).and_then(|params| params.get("notifications"));
        Some(filter.map_or_else(ListenFilter::default, ListenFilter::from_json))
    }
}

impl Request<Value> {
    /// `subscriptions/listen` (stateless era): a long-lived request that waits for its
    /// acknowledgement within its timeout, then has no deadline; its notifications arrive as
    /// [`Event::Notification`](crate::Event::Notification)s whose
    /// [`subscription_id`](Notification::subscription_id) is its id. It ends when the
    /// server answers it, when it is cancelled, or when the connection closes.
    pub fn listen(filter: &ListenFilter) -> Self {
        let params = json!({ "notifications": filter.to_json() });
        Self::with(LISTEN.to_owned(), Params::Value(params))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_filter_is_the_spec_object() {
        let filter = ListenFilter {
            tools_list_changed: true,
            resource_uris: vec!["file:///a".to_owned()],
            ..ListenFilter::default()
        };
        let request = Request::listen(&filter);
        assert_eq!(request.method(), LISTEN);
        let expected = json!({"notifications": {
            "toolsListChanged": true, "resourceSubscriptions": ["file:///a"]}});
        assert_eq!(request.params, Params::Value(expected));
    }

    #[test]
    fn acknowledgement_tells_what_was_agreed() {
        let note = Notification {
            method: ACKNOWLEDGED.to_owned(),
            params: Some(json!({"_meta": {SUBSCRIPTION_ID: 3},
                "notifications": {"toolsListChanged": true, "promptsListChanged": "yes",
                                  "resourceSubscriptions": ["file:///a", 7]}})),
        };
        let agreed = ListenFilter {
            tools_list_changed: true,
            resource_uris: vec!["file:///a".to_owned()],
            ..ListenFilter::default()
        };
        assert_eq!(note.acknowledged(), Some(agreed));
        let bare = Notification {
            method: ACKNOWLEDGED.to_owned(),
            params: None,
        };
        assert_eq!(bare.acknowledged(), Some(ListenFilter::default()));
        let other = Notification {
            method: Notification::TOOLS_LIST_CHANGED.to_owned(),
            params: None,
        };
        assert_eq!(other.acknowledged(), None);
    }

    #[test]
    fn mutual_picks_our_newest() {
        let theirs = ["2025-06-18", "2026-07-28", "2099-01-01"];
        assert_eq!(
            mutual(&theirs, crate::model::versions::STATELESS_VERSIONS),
            Some("2026-07-28")
        );
        assert_eq!(
            mutual(&theirs, crate::model::versions::HANDSHAKE_VERSIONS),
            Some("2025-06-18")
        );
        assert_eq!(
            mutual(&["1999-01-01"], crate::model::versions::HANDSHAKE_VERSIONS),
            None
        );
    }
}
