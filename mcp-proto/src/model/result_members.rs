//! The members of a stateless-era result that describe the exchange rather than the result
//! (`resultType`, `_meta`'s `io.modelcontextprotocol/serverInfo`): read out of a result as
//! its line is decoded ([`ResultMembers`], the reading the machines hand the wire's decoder),
//! and what its `resultType` says ([`Outcome`]).

use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor,
};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::wire::jsonrpc::{ResponseResult, Text};

/// The `_meta` member of a result that names the server.
pub(crate) const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// A result as the line is parsed: the members that describe the exchange rather than the
/// result (`resultType: "complete"`, `_meta`'s `serverInfo`) are read out on the way, so the
/// result handed on is what a handshake-era server would send, and they cost no values. An
/// answer of this era carries them on every result; built as values they made decoding a
/// call's answer cost twice the handshake era's.
#[derive(Debug, Clone, PartialEq)]
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

/// The wire's decoder reads every response's `result` this way for the machines.
impl ResponseResult for ResultMembers {
    fn from_value(result: Value) -> Self {
        Self::from_value(result)
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::wire::jsonrpc::{self, Message};

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
    fn a_line_parsed_as_it_arrives_reads_as_the_line_parsed_whole() {
        let lines: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","task":{"taskId":"t"}}}"#,
            br#"{"id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}},"a":1}}"#,
            br#"{"id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"},"k":2}}}"#,
            br#"{"id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}},"supportedVersions":[]}}"#,
            br#"{"id":1,"result":{"_meta":7}}"#,
            br#"{"id":1,"result":"text"}"#,
            br#"[{"id":1,"result":{"resultType":"complete"}},{"method":"n"}]"#,
        ];
        for line in lines {
            let whole: Vec<Result<Message<ResultMembers>, _>> = jsonrpc::decode(line).collect();
            let value = serde_json::from_slice(line).unwrap();
            let streamed: Vec<_> = jsonrpc::decode_value(value).collect();
            assert_eq!(streamed, whole, "{}", String::from_utf8_lossy(line));
        }
    }
}
