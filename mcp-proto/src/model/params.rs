//! A request's params as they go on the wire, written straight from their parts: a
//! `tools/call`'s with its progress token, a retry's answers (`inputResponses`,
//! `requestState`), and in the stateless era the `_meta` members every request carries
//! ([`StatelessMeta`], written once per connection and spliced into each request by the
//! wire's encoder).

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::wire::jsonrpc::RequestParams;

/// In the stateless era the params end with a `_meta` that takes the era's members.
impl<T: Serialize> RequestParams for CallToolParams<'_, T> {
    fn spliced(&self) -> Option<&str> {
        self.meta.era.map(StatelessMeta::members)
    }

    /// The bytes the derived `Serialize` writes, with the members' names written as they are
    /// rather than scanned for escapes by serde, one by one, on every call.
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(br#"{"name":"#);
        serde_json::to_writer(&mut *out, self.name)?;
        out.extend_from_slice(br#","arguments":"#);
        serde_json::to_writer(&mut *out, self.arguments)?;
        if let Some(responses) = self.input_responses {
            out.extend_from_slice(br#","inputResponses":"#);
            serde_json::to_writer(&mut *out, responses)?;
        }
        if let Some(state) = self.request_state {
            out.extend_from_slice(br#","requestState":"#);
            serde_json::to_writer(&mut *out, state)?;
        }
        if let Some(task) = self.task {
            out.extend_from_slice(br#","task":"#);
            serde_json::to_writer(&mut *out, task)?;
        }
        out.extend_from_slice(br#","_meta":"#);
        match &self.meta {
            // The usual `_meta`: the call's own progress token alone (the era's members, if
            // any, are spliced in after it).
            Meta {
                progress_token: Some(token),
                caller: None,
                era: _,
            } => {
                out.extend_from_slice(br#"{"progressToken":"#);
                serde_json::to_writer(&mut *out, token)?;
                out.push(b'}');
            }
            meta => serde_json::to_writer(&mut *out, meta)?,
        }
        out.push(b'}');
        Ok(())
    }
}

impl RequestParams for ObjectParams<'_> {
    fn spliced(&self) -> Option<&str> {
        self.era.map(StatelessMeta::members)
    }
}

/// The params of `tools/call`, with the progress token that lets progress extend its deadline
/// and, in the stateless era, what the era adds.
#[derive(Serialize)]
pub(crate) struct CallToolParams<'a, T> {
    pub(crate) name: &'a str,
    pub(crate) arguments: &'a Value,
    #[serde(rename = "inputResponses", skip_serializing_if = "Option::is_none")]
    pub(crate) input_responses: Option<&'a Map<String, Value>>,
    #[serde(rename = "requestState", skip_serializing_if = "Option::is_none")]
    pub(crate) request_state: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task: Option<&'a Value>,
    #[serde(rename = "_meta")]
    pub(crate) meta: Meta<'a, T>,
}

/// A retry's answers to the server's `inputRequests`, and its `requestState` echoed.
#[derive(Clone, Copy, Default)]
pub(crate) struct Input<'a> {
    pub(crate) responses: Option<&'a Map<String, Value>>,
    pub(crate) state: Option<&'a str>,
}

impl Input<'_> {
    fn is_empty(&self) -> bool {
        self.responses.is_none() && self.state.is_none()
    }
}

/// `_meta` as we send it: the progress token and the caller's own members, less those the stateless
/// era's members replace (which [`request`](crate::wire::jsonrpc::request) adds after them).
/// Written member by member: no map is built.
pub(crate) struct Meta<'a, T> {
    pub(crate) progress_token: Option<T>,
    pub(crate) caller: Option<&'a Map<String, Value>>,
    pub(crate) era: Option<&'a StatelessMeta>,
}

impl<T: Serialize> Serialize for Meta<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(token) = &self.progress_token {
            map.serialize_entry("progressToken", token)?;
        }
        for (key, value) in self.caller.into_iter().flatten() {
            let ours = self.era.is_some_and(|era| era.owns(key))
                || (key == "progressToken" && self.progress_token.is_some());
            if !ours {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// The `io.modelcontextprotocol/` members of `_meta` on every stateless-era request, written
/// once per connection (and again if the revision changes) and copied into each request:
/// serialising the capabilities and the client info again for every request, key by key,
/// was most of what the stateless era added to encoding a call.
#[derive(Debug, Clone)]
pub(crate) struct StatelessMeta {
    pub(crate) version: &'static str,
    has_log_level: bool,
    /// The members as JSON text: `"key":value` pairs joined by commas.
    members: String,
}

/// The `_meta` member that names a stateless-era request's revision.
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(crate) const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

impl StatelessMeta {
    pub(crate) fn new(
        version: &'static str,
        capabilities: Value,
        client_info: Value,
        log_level: Option<String>,
    ) -> Self {
        let has_log_level = log_level.is_some();
        let level = log_level.map(|level| (LOG_LEVEL, Value::from(level)));
        let members = [
            (PROTOCOL_VERSION, Value::from(version)),
            (CLIENT_CAPABILITIES, capabilities),
            (CLIENT_INFO, client_info),
        ];
        let members: Vec<String> = members
            .into_iter()
            .chain(level)
            .map(|(key, value)| format!("{}:{value}", Value::from(key)))
            .collect();
        Self {
            version,
            has_log_level,
            members: members.join(","),
        }
    }

    /// Whether `key` is one of the members we write (so the caller's copy gives way).
    fn owns(&self, key: &str) -> bool {
        matches!(key, PROTOCOL_VERSION | CLIENT_CAPABILITIES | CLIENT_INFO)
            || (key == LOG_LEVEL && self.has_log_level)
    }

    /// The members as JSON text, for [`RequestParams::spliced`]: the params that carry them
    /// (as [`CallToolParams`] and [`ObjectParams`] write them) end with their `_meta`.
    fn members(&self) -> &str {
        &self.members
    }
}

/// Object params (or none) with what the stateless era or a retry adds: the caller's members
/// as given, then the retry's `inputResponses` and `requestState` (replacing the caller's),
/// then `_meta` merged as [`Meta`] does.
pub(crate) struct ObjectParams<'a> {
    pub(crate) params: Option<&'a Map<String, Value>>,
    pub(crate) input: Input<'a>,
    pub(crate) era: Option<&'a StatelessMeta>,
}

impl Serialize for ObjectParams<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let mut caller_meta = None;
        for (key, value) in self.params.into_iter().flatten() {
            match key.as_str() {
                "_meta" => caller_meta = Some(value),
                "inputResponses" | "requestState" if !self.input.is_empty() => {}
                _ => map.serialize_entry(key, value)?,
            }
        }
        if let Some(responses) = self.input.responses {
            map.serialize_entry("inputResponses", responses)?;
        }
        if let Some(state) = self.input.state {
            map.serialize_entry("requestState", state)?;
        }
        match (caller_meta, self.era) {
            (Some(Value::Object(caller)), era) => {
                let meta = Meta::<()> {
                    progress_token: None,
                    caller: Some(caller),
                    era,
                };
                map.serialize_entry("_meta", &meta)?;
            }
            (Some(other), None) => map.serialize_entry("_meta", other)?,
            (_, Some(era)) => {
                let meta = Meta::<()> {
                    progress_token: None,
                    caller: None,
                    era: Some(era),
                };
                map.serialize_entry("_meta", &meta)?;
            }
            (None, None) => {}
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::wire::jsonrpc::request;

    /// The `tools/call` params as written by hand are the bytes serde writes, in every shape.
    #[test]
    fn tools_call_params_are_written_as_serde_writes_them() {
        let era = StatelessMeta::new("2026-07-28", json!({}), json!({"name": "c"}), None);
        let arguments = json!({"text": "a \"quoted\"\nline", "n": [1, 2.5, null]});
        let responses = json!({"k": {"action": "accept"}});
        let responses = responses.as_object();
        let caller = json!({"progressToken": "theirs", "x": "y", PROTOCOL_VERSION: "old"});
        let caller = caller.as_object();
        let task = json!({"ttl": 60});
        let tokens = [None, Some(json!(7)), Some(json!("tok\u{1}en"))];
        for token in &tokens {
            for (input_responses, request_state) in [(None, None), (responses, Some("st\"ate"))] {
                for task in [None, Some(&task)] {
                    for (caller, era) in [(None, None), (caller, None), (None, Some(&era))] {
                        let params = CallToolParams {
                            name: "na\\me",
                            arguments: &arguments,
                            input_responses,
                            request_state,
                            task,
                            meta: Meta {
                                progress_token: token.as_ref(),
                                caller,
                                era,
                            },
                        };
                        let mut written = Vec::new();
                        params.write(&mut written).unwrap();
                        let serialised = serde_json::to_vec(&params).unwrap();
                        assert_eq!(
                            String::from_utf8(written).unwrap(),
                            String::from_utf8(serialised).unwrap()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_eras_members_are_spliced_into_meta_once_and_escaped() {
        let client_info = json!({"name": "a \"quoted\"\nname", "version": "1"});
        let era = StatelessMeta::new("2026-07-28", json!({}), client_info, Some("info".into()));
        let caller = json!({"x": 1, "_meta": {"k": "v", PROTOCOL_VERSION: "1999-01-01"}});
        // `_meta` empty but for the era's members, and with the caller's own.
        for params in [None, caller.as_object()] {
            let input = Input::default();
            let era = Some(&era);
            let line = request(7, "m", Some(&ObjectParams { params, input, era }));
            assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            let text = String::from_utf8(line).unwrap();
            assert_eq!(text.matches(PROTOCOL_VERSION).count(), 1, "{text}");
            let sent: Value = serde_json::from_str(&text).unwrap();
            let meta = &sent["params"]["_meta"];
            assert_eq!(meta[PROTOCOL_VERSION], "2026-07-28");
            assert_eq!(meta[CLIENT_CAPABILITIES], json!({}));
            assert_eq!(meta[CLIENT_INFO]["name"], "a \"quoted\"\nname");
            assert_eq!(meta[LOG_LEVEL], "info");
            assert_eq!(
                meta["k"],
                if params.is_some() {
                    json!("v")
                } else {
                    Value::Null
                }
            );
        }
    }
}
