//! What the stateless era (2026-07-28) adds to the messages, read and built here and driven by
//! the connection: the `server/discover` result, `resultType` and the input rounds of
//! multi-round-trip requests, and the `subscriptions/listen` filter.

use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor,
};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::model::request::{Params, Request};
use crate::model::types::{Implementation, ServerCapabilities, ServerInfo};
use crate::wire::jsonrpc::Text;

/// The methods a server may answer with `input_required`.
pub(crate) const MULTI_ROUND_METHODS: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// The method that opens a subscription.
pub(crate) const LISTEN: &str = "subscriptions/listen";

/// The notification that acknowledges one.
pub(crate) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The `_meta` member naming the subscription a notification belongs to.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The `_meta` member of a result that names the server.
pub(crate) const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The newest of `ours` (newest first) that `theirs` lists.
pub(crate) fn mutual<S: AsRef<str>>(theirs: &[S], ours: &[&'static str]) -> Option<&'static str> {
    (ours.iter().copied()).find(|version| theirs.iter().any(|v| v.as_ref() == *version))
}

/// A result as the line is parsed: the members that describe the exchange rather than the
/// result (`resultType: "complete"`, `_meta`'s `serverInfo`) are read out on the way, so the
/// result handed on is what a handshake-era server would send, and they cost no values. An
/// answer of this era carries them on every result; built as values they made decoding a
/// call's answer cost twice the handshake era's.
pub(crate) struct ResultMembers {
    pub(crate) result: Value,
    /// `_meta`'s `io.modelcontextprotocol/serverInfo`, as JSON text, kept only for a result
    /// with `supportedVersions` (a `server/discover` result, the one that reads it): copying
    /// it out of every other answer cost an allocation per call.
    pub(crate) server_info: Option<String>,
}

impl ResultMembers {
    /// The same reading of a result already parsed into a value (a line parsed as it
    /// arrived): its members are moved, never copied.
    pub(crate) fn from_value(result: Value) -> Self {
        let Value::Object(mut members) = result else {
            return Self {
                result,
                server_info: None,
            };
        };
        // `retain`, not `remove`: with serde_json's `preserve_order` (which a dependency may
        // turn on), `remove` moves the last member into the gap.
        members.retain(|key, value| key != "resultType" || value != "complete");
        let discover = members.contains_key("supportedVersions");
        let mut server_info = None;
        if let Some(Value::Object(meta)) = members.get_mut("_meta")
            && let Some(info) = meta.get(SERVER_INFO)
        {
            server_info = discover.then(|| info.to_string());
            meta.retain(|key, _| key != SERVER_INFO);
            if meta.is_empty() {
                members.retain(|key, _| key != "_meta");
            }
        }
        Self {
            result: Value::Object(members),
            server_info,
        }
    }
}

impl<'de> Deserialize<'de> for ResultMembers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ResultVisitor)
    }
}

/// Reads a result member by member; anything that is not an object is read as the value it is.
struct ResultVisitor;

impl ResultVisitor {
    fn plain<E>(value: Value) -> Result<ResultMembers, E> {
        Ok(ResultMembers {
            result: value,
            server_info: None,
        })
    }
}

impl<'de> Visitor<'de> for ResultVisitor {
    type Value = ResultMembers;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResultMembers, A::Error> {
        let mut members = Map::new();
        let mut server_info = None;
        let mut discover = false;
        // Keys are borrowed from the line: only those kept in `members` are copied.
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            let key = key.unwrap_or_default();
            match key.as_ref() {
                "resultType" => {
                    let kind: &'de RawValue = map.next_value()?;
                    if kind.get() != "\"complete\"" {
                        let kind = serde_json::from_str(kind.get()).map_err(A::Error::custom)?;
                        members.insert(key.into_owned(), kind);
                    }
                }
                "_meta" => {
                    let meta = map.next_value_seed(MetaVisitor)?;
                    // Nothing else in it: no `_meta` at all, as from a handshake-era server.
                    let emptied = meta.server_info.is_some()
                        && meta.rest.as_object().is_some_and(Map::is_empty);
                    server_info = meta.server_info;
                    if !emptied {
                        members.insert(key.into_owned(), meta.rest);
                    }
                }
                _ => {
                    discover |= key == "supportedVersions";
                    let value = map.next_value()?;
                    members.insert(key.into_owned(), value);
                }
            }
        }
        let server_info = server_info
            .filter(|_| discover)
            .map(|info| info.get().to_owned());
        Ok(ResultMembers {
            result: Value::Object(members),
            server_info,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ResultMembers, A::Error> {
        let items = Vec::<Value>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
        Self::plain(Value::Array(items))
    }

    fn visit_bool<E>(self, value: bool) -> Result<ResultMembers, E> {
        Self::plain(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<ResultMembers, E> {
        Self::plain(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<ResultMembers, E> {
        Self::plain(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<ResultMembers, E> {
        Self::plain(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<ResultMembers, E> {
        Self::plain(Value::from(value))
    }

    fn visit_unit<E>(self) -> Result<ResultMembers, E> {
        Self::plain(Value::Null)
    }
}

/// A result's `_meta`: its `serverInfo` left as text in the line, and the rest.
struct MetaMembers<'de> {
    rest: Value,
    server_info: Option<&'de RawValue>,
}

/// Reads a result's `_meta`; anything that is not an object is read as the value it is.
struct MetaVisitor;

impl<'de> DeserializeSeed<'de> for MetaVisitor {
    type Value = MetaMembers<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaVisitor {
    type Value = MetaMembers<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Map::new();
        let mut server_info = None;
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            let key = key.unwrap_or_default();
            if key == SERVER_INFO {
                server_info = Some(map.next_value()?);
            } else {
                let value = map.next_value()?;
                members.insert(key.into_owned(), value);
            }
        }
        Ok(MetaMembers {
            rest: Value::Object(members),
            server_info,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        ResultVisitor.visit_seq(seq).map(Self::plain)
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Self::Value, E> {
        ResultVisitor.visit_bool(value).map(Self::plain)
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Self::Value, E> {
        ResultVisitor.visit_i64(value).map(Self::plain)
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Self::Value, E> {
        ResultVisitor.visit_u64(value).map(Self::plain)
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Self::Value, E> {
        ResultVisitor.visit_f64(value).map(Self::plain)
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        ResultVisitor.visit_str(value).map(Self::plain)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        ResultVisitor.visit_unit().map(Self::plain)
    }
}

impl MetaVisitor {
    fn plain(members: ResultMembers) -> MetaMembers<'static> {
        MetaMembers {
            rest: members.result,
            server_info: None,
        }
    }
}

/// Reads a `server/discover` result, and the `serverInfo` its `_meta` held (see
/// [`ResultMembers`]); `protocol_version` is left for the caller to choose.
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
    let (capabilities, instructions) =
        crate::model::stateless::capabilities_and_instructions(&mut result);
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

/// What a stateless-era result's `resultType` says.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Absent, or `"complete"`: the result.
    Complete,
    /// `"input_required"`: another round.
    InputRequired,
    /// `"task"`: the tasks extension's `CreateTaskResult`.
    Task,
    /// Anything else, as text for the error.
    Unknown(String),
}

pub(crate) fn outcome(result: &Value) -> Outcome {
    match result.get("resultType") {
        None => Outcome::Complete,
        Some(Value::String(kind)) if kind == "complete" => Outcome::Complete,
        Some(Value::String(kind)) if kind == "input_required" => Outcome::InputRequired,
        Some(Value::String(kind)) if kind == "task" => Outcome::Task,
        Some(other) => Outcome::Unknown(other.to_string()),
    }
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

impl crate::Notification {
    /// `notifications/subscriptions/acknowledged`.
    pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = ACKNOWLEDGED;

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
    /// [`subscription_id`](crate::Notification::subscription_id) is its id. It ends when the
    /// server answers it, when it is cancelled, or when the connection closes.
    pub fn listen(filter: &ListenFilter) -> Self {
        let params = json!({ "notifications": filter.to_json() });
        Self::with(LISTEN.to_owned(), Params::Value(params))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(text: &str) -> ResultMembers {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn server_info_is_kept_for_a_discover_result_wherever_its_meta_comes() {
        let info = r#"{"name":"s","version":"1"}"#;
        let meta = format!(r#""_meta":{{"{SERVER_INFO}":{info}}}"#);
        let versions = r#""supportedVersions":["2026-07-28"]"#;
        for text in [
            format!("{{{meta},{versions}}}"),
            format!("{{{versions},{meta}}}"),
        ] {
            let read = members(&text);
            assert_eq!(read.server_info.as_deref(), Some(info), "{text}");
            assert_eq!(read.result, json!({"supportedVersions": ["2026-07-28"]}));
        }
        // Any other result drops it, and reads as a handshake-era server would send it.
        let call = members(&format!(
            r#"{{"content":[],"resultType":"complete",{meta}}}"#
        ));
        assert_eq!(call.server_info, None);
        assert_eq!(call.result, json!({"content": []}));
    }

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
        let note = crate::Notification {
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
        let bare = crate::Notification {
            method: ACKNOWLEDGED.to_owned(),
            params: None,
        };
        assert_eq!(bare.acknowledged(), Some(ListenFilter::default()));
        let other = crate::Notification {
            method: crate::Notification::TOOLS_LIST_CHANGED.to_owned(),
            params: None,
        };
        assert_eq!(other.acknowledged(), None);
    }

    #[test]
    fn mutual_picks_our_newest() {
        let theirs = ["2025-06-18", "2026-07-28", "2099-01-01"];
        assert_eq!(
            mutual(&theirs, crate::STATELESS_VERSIONS),
            Some("2026-07-28")
        );
        assert_eq!(
            mutual(&theirs, crate::HANDSHAKE_VERSIONS),
            Some("2025-06-18")
        );
        assert_eq!(mutual(&["1999-01-01"], crate::HANDSHAKE_VERSIONS), None);
    }
}
