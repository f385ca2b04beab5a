//! A request's result as the server sent it: its JSON text, read into the caller's type by
//! the caller. The connection only walks the result's members (their values stay text), and
//! the work of decoding (a value's maps and strings built, then dropped once the caller has its
//! own type) is the caller's, once, on the caller's task.

use serde::Deserialize as _;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::model::result_members::{self, Outcome, ResultMembers, SERVER_INFO};
use crate::wire::jsonrpc::{Member, Text};

/// The `result` member of an answer, unread, as [`Connection::poll_event`] hands it on.
/// [`FromResult::from_raw`] reads one as a request's type, [`into_value`](Self::into_value)
/// as a value, and [`json`](Self::json) is its text, to pass on.
///
/// [`Connection::poll_event`]: crate::Connection::poll_event
/// [`FromResult::from_raw`]: crate::FromResult::from_raw
#[derive(Debug, Clone)]
pub struct RawResult(Repr);

/// Two results are equal when they read as the same value: the same text, or a text and a
/// value that [`into_value`](RawResult::into_value) makes alike.
impl PartialEq for RawResult {
    fn eq(&self, other: &Self) -> bool {
        if let (Repr::Text { json: a, .. }, Repr::Text { json: b, .. }) = (&self.0, &other.0)
            && a == b
        {
            return true;
        }
        match (self.clone().into_value(), other.clone().into_value()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for RawResult {}

#[derive(Debug, Clone)]
enum Repr {
    /// The result object's members as they stood in the line, but for the era's (see
    /// [`ResultText`]).
    Text {
        json: String,
        /// The text of the `resultType` kept in `json`, if any: one other than `"complete"`.
        kind: Option<String>,
        /// Whether it has a `task` member (a handshake-era task may have been made).
        task: bool,
    },
    /// A result already read as a value (one that is not an object, a line parsed as it
    /// arrived, or a value a driver was handed), with the era's members read out as
    /// [`ResultMembers`] reads them.
    Value(Value),
}

impl From<Value> for RawResult {
    /// A result already read: [`into_value`](Self::into_value) gives it back as it is.
    fn from(value: Value) -> Self {
        Self(Repr::Value(value))
    }
}

impl RawResult {
    /// The result's JSON text, as a handshake-era server would send it: a stateless-era
    /// result's `resultType: "complete"` and `_meta` `serverInfo` are left out (and `_meta`
    /// with them when nothing else was in it), as in [`into_value`](Self::into_value). The
    /// other members' text is as the server sent it. A result that was read as a value (a line
    /// too long to hold whole, parsed as it arrived) is written out again.
    pub fn json(&self) -> std::borrow::Cow<'_, str> {
        match &self.0 {
            Repr::Text { json, .. } => std::borrow::Cow::Borrowed(json),
            Repr::Value(value) => std::borrow::Cow::Owned(value.to_string()),
        }
    }

    /// The result as a value, as [`Connection::poll_event`](crate::Connection::poll_event)
    /// hands it on. Fails only on a result nested deeper than a value may be (128 levels).
    pub fn into_value(self) -> Result<Value, String> {
        self.into_members().map(|members| members.result)
    }

    /// The result read as values, as [`ResultMembers`] reads it.
    pub(crate) fn into_members(self) -> Result<ResultMembers, String> {
        match self.0 {
            Repr::Text { json, .. } => {
                serde_json::from_str(&json).map_err(|error| error.to_string())
            }
            Repr::Value(result) => Ok(ResultMembers {
                result,
                server_info: None,
            }),
        }
    }

    /// What the result's `resultType` says, as [`result_members::outcome`] reads the value
    /// [`into_value`](Self::into_value) gives, with no value built.
    pub(crate) fn outcome(&self) -> Outcome {
        let kind = match &self.0 {
            Repr::Text { kind: None, .. } => return Outcome::Complete,
            Repr::Text {
                kind: Some(kind), ..
            } => kind,
            Repr::Value(value) => return result_members::outcome(value),
        };
        match serde_json::from_str::<Value>(kind) {
            // Written with escapes: still the value `into_value` keeps, and reads as complete.
            Ok(Value::String(kind)) if kind == "complete" => Outcome::Complete,
            Ok(Value::String(kind)) if kind == "input_required" => Outcome::InputRequired,
            Ok(Value::String(kind)) if kind == "task" => Outcome::Task,
            Ok(other) => Outcome::Unknown(other.to_string()),
            Err(error) => Outcome::Unknown(error.to_string()),
        }
    }

    /// Whether the result may say that a task was made for the request
    /// ([`Task::created_by`](crate::tasks::Task::created_by) tells): it has a `resultType` other
    /// than `"complete"` or a `task` member, or was read as a value. `false` says no task was made,
    /// with no value built to tell.
    pub fn may_name_a_task(&self) -> bool {
        match &self.0 {
            Repr::Text { kind, task, .. } => kind.is_some() || *task,
            Repr::Value(_) => true,
        }
    }

    /// The text to answer a host with: [`json`](Self::json)'s, with the `resultType: "complete"`
    /// every result of the stateless era carries (`stateless`) spliced in where it has none, as
    /// [`mark_complete`] adds it to a value. `None` for a result read as a value, which is answered
    /// as one.
    pub(crate) fn answer_text(&self, stateless: bool) -> Option<std::borrow::Cow<'_, str>> {
        let Repr::Text { json, kind, .. } = &self.0 else {
            return None;
        };
        if !stateless || kind.is_some() {
            return Some(std::borrow::Cow::Borrowed(json));
        }
        // Always an object here, written by [`Members`]: `{}` or `{...}`.
        let members = &json[1..json.len() - 1];
        let separator = if members.is_empty() { "" } else { "," };
        let marked = format!(r#"{{{members}{separator}"resultType":"complete"}}"#);
        Some(std::borrow::Cow::Owned(marked))
    }

    /// The text, when the result was kept as text.
    pub(crate) fn as_text(&self) -> Option<&str> {
        match &self.0 {
            Repr::Text { json, .. } => Some(json),
            Repr::Value(_) => None,
        }
    }
}

/// Gives a stateless-era result the `resultType` every result carries, unless the caller
/// set one (`input_required`).
pub(crate) fn mark_complete(result: &mut Value) {
    if let Value::Object(result) = result
        && !result.contains_key("resultType")
    {
        result.insert("resultType".to_owned(), json!("complete"));
    }
}

/// The usual line from a server, read the short way: one answer with a `result`, its id as
/// [`decode`](crate::wire::jsonrpc::decode) reads it, its result left as text (see
/// [`ResultText`]), and the `serverInfo` text of a `server/discover` result. `None` for
/// anything else (a request, a notification, an error, a batch, a line that is not JSON),
/// which `decode` then reads: the two agree on every line this one reads.
pub(crate) fn decode_result(line: &[u8]) -> Option<(Value, RawResult, Option<String>)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut parser = serde_json::Deserializer::from_str(text);
    let answer = parser.deserialize_map(ResultLineVisitor).ok()?;
    parser.end().ok()?;
    answer
}

/// Reads an answer with a `result`; gives up (an error, which ends the parse at once) at a
/// member only other messages have.
struct ResultLineVisitor;

impl<'de> Visitor<'de> for ResultLineVisitor {
    type Value = Option<(Value, RawResult, Option<String>)>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("an answer with a result")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut jsonrpc, mut id, mut result) = (None, None, None);
        while let Some(member) = map.next_key()? {
            match member {
                Member::Jsonrpc => jsonrpc = Some(map.next_value::<Text<'de>>()?.0),
                Member::Id => id = Some(map.next_value::<Value>()?),
                Member::Result => result = Some(map.next_value_seed(ResultText)?),
                Member::Method | Member::Error => {
                    return Err(serde::de::Error::custom("not an answer with a result"));
                }
                Member::Params | Member::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if jsonrpc.is_some_and(|version| version.as_deref() != Some("2.0")) {
            return Ok(None);
        }
        Ok(id
            .zip(result)
            .map(|(id, (result, info))| (id, result, info)))
    }
}

/// Reads a `result` member as [`ResultMembers`] does, but writes its members' text instead of
/// building values: `resultType: "complete"` and `_meta`'s `serverInfo` are left out (`_meta`
/// too, when that was all it held), so the stateless era's result is the handshake era's for
/// whoever reads it next. Also gives the `serverInfo` text of a result with
/// `supportedVersions` (a `server/discover` result, the one that reads it).
pub(crate) struct ResultText;

impl<'de> DeserializeSeed<'de> for ResultText {
    type Value = (RawResult, Option<String>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ResultText {
    type Value = (RawResult, Option<String>);

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Members::default();
        let (mut kind, mut server_info, mut discover) = (None, None, false);
        let mut task = false;
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            let key = key.unwrap_or_default();
            match key.as_ref() {
                "resultType" => {
                    let value: &'de RawValue = map.next_value()?;
                    if value.get() != "\"complete\"" {
                        kind = Some(value.get().to_owned());
                        members.push(&key, value.get());
                    }
                }
                "_meta" => {
                    let meta = map.next_value_seed(MetaText)?;
                    server_info = meta.server_info;
                    if let Some(rest) = meta.rest {
                        members.push(&key, &rest);
                    }
                }
                _ => {
                    discover |= key == "supportedVersions";
                    task |= key == "task";
                    let value: &'de RawValue = map.next_value()?;
                    members.push(&key, value.get());
                }
            }
        }
        let server_info = server_info
            .filter(|_| discover)
            .map(|info| info.get().to_owned());
        let json = members.finish();
        Ok((RawResult(Repr::Text { json, kind, task }), server_info))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let items = Vec::<Value>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
        Ok((RawResult::from(Value::Array(items)), None))
    }

    fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
        Ok((RawResult::from(Value::Bool(value)), None))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
        Ok((RawResult::from(Value::from(value)), None))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
        Ok((RawResult::from(Value::from(value)), None))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Self::Value, E> {
        Ok((RawResult::from(Value::from(value)), None))
    }

    fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
        Ok((RawResult::from(Value::from(value)), None))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok((RawResult::from(Value::Null), None))
    }
}

/// An object's text, written member by member.
#[derive(Default)]
struct Members {
    json: String,
    count: usize,
}

impl Members {
    fn push(&mut self, key: &str, value: &str) {
        if self.count == 0 {
            // Most results are one large member, or a few: growing from nothing cost a
            // reallocation for each doubling.
            self.json.reserve(key.len() + value.len() + 64);
        }
        self.json.push(if self.count == 0 { '{' } else { ',' });
        self.count += 1;
        // A key without escapes is its own JSON text; one with them is written again.
        if key
            .bytes()
            .any(|byte| byte == b'"' || byte == b'\\' || byte < 0x20)
        {
            self.json.push_str(&Value::from(key).to_string());
        } else {
            self.json.push('"');
            self.json.push_str(key);
            self.json.push('"');
        }
        self.json.push(':');
        self.json.push_str(value);
    }

    fn finish(mut self) -> String {
        if self.count == 0 {
            self.json.push('{');
        }
        self.json.push('}');
        self.json
    }
}

/// A result's `_meta`, as [`ResultText`] keeps it.
struct MetaKept<'de> {
    /// The text of what is kept: `None` when `serverInfo` was all it held.
    rest: Option<String>,
    server_info: Option<&'de RawValue>,
}

/// Reads a result's `_meta` as [`ResultMembers`] does: an object loses its `serverInfo`;
/// anything else is kept as the value it is.
struct MetaText;

impl<'de> DeserializeSeed<'de> for MetaText {
    type Value = MetaKept<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaText {
    type Value = MetaKept<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Members::default();
        let mut server_info = None;
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            let key = key.unwrap_or_default();
            let value: &'de RawValue = map.next_value()?;
            if key == SERVER_INFO {
                server_info = Some(value);
            } else {
                members.push(&key, value.get());
            }
        }
        let emptied = server_info.is_some() && members.count == 0;
        Ok(MetaKept {
            rest: (!emptied).then(|| members.finish()),
            server_info,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let items = Vec::<Value>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
        Self::plain(&Value::Array(items))
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Self::Value, E> {
        Self::plain(&Value::Bool(value))
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Self::plain(&Value::from(value))
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Self::plain(&Value::from(value))
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Self::plain(&Value::from(value))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Self::plain(&Value::from(value))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Self::plain(&Value::Null)
    }
}

impl MetaText {
    /// A `_meta` that is not an object, kept as it is.
    fn plain<'de, E: serde::de::Error>(value: &Value) -> Result<MetaKept<'de>, E> {
        let rest = serde_json::to_string(value).map_err(E::custom)?;
        Ok(MetaKept {
            rest: Some(rest),
            server_info: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::request::FromResult;
    use crate::model::types::CallToolResult;
    use crate::wire::jsonrpc::{self, Message};

    /// Results of every shape the readers tell apart: the usual, the era's members, escapes,
    /// a member twice, members of unexpected types, and what is not an object.
    const RESULTS: &[&str] = &[
        r#"{"content":[{"type":"text","text":"hi"}]}"#,
        r#"{"content":[{"type":"text","text":"hi"}],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#,
        r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{},"other":1},"isError":true}"#,
        r#"{"resultType":"compl\u0065te","content":null,"isError":null,"structuredContent":null}"#,
        r#"{"resultType":"input_required","inputRequests":{},"requestState":"s"}"#,
        r#"{"resultType":"task","task":{"taskId":"t"}}"#,
        r#"{"resultType":"input_required","resultType":"complete"}"#,
        r#"{"resultType":"complete","resultType":"task"}"#,
        r#"{"resultType":{"a":[1, 2]},"content":[]}"#,
        r#"{"resultType":7}"#,
        r#"{"content":"text"}"#,
        r#"{"isError":"yes","content":[]}"#,
        r#"{"content":[],"content":[{"type":"text","text":"twice"}]}"#,
        r#"{"structuredContent":{"a":1},"content":[{"type":"image"}]}"#,
        r#"{ "content" : [ { "type" : "text", "text" : "spaced" } ] }"#,
        r#"[1,2]"#,
        r#""text""#,
        r#"null"#,
        r#"{}"#,
        r#"{"supportedVersions":["2026-07-28"],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"d","version":"2"}}}"#,
        r#"{"supportedVersions":[],"_meta":{"io.modelcontextprotocol/serverInfo":1,"io.modelcontextprotocol/serverInfo":{"name":"last"}}}"#,
        r#"{"_meta":{"io.modelcontextprotocol/serverInfo":{}},"_meta":{"x":1},"content":[]}"#,
        r#"{"_meta":{"x":1,"io.modelcontextprotocol/serverInfo":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{}}}"#,
        r#"{"_meta":"text","content":[]}"#,
        r#"{"_meta":[1.5e3,{"a":null}]}"#,
        r#"{"_meta":{}}"#,
        r#"{"content":[{"type":"text","text":"a","annotations":{"x":1}},{"type":"t\u0065xt","text":"b\n"},{"type":"text","text":1},{"type":"text","type":"image","text":"c"},"bare",{"type":"image","data":"d","mimeType":"m"},{"text":"no type"}]}"#,
        r#"{"\u0063ontent":[{"type":"text","text":"escaped key"}],"a\nb":1,"\u005fmeta":{"io.modelcontextprotocol/serverInfo":{}}}"#,
        r#"{"content":[{"text":"b","type":"text","extra":[[[{"x":null}]]]}],"isError":true}"#,
        r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b","text":"twice"}]}"#,
        r#"{"content":[{"type":"text","text":"a"}],"structuredContent":{"n":[1]},"isError":false}"#,
    ];

    fn raw(text: &str) -> RawResult {
        let mut parser = serde_json::Deserializer::from_str(text);
        ResultText.deserialize(&mut parser).unwrap().0
    }

    #[test]
    fn the_short_way_reads_a_line_as_decode_does() {
        for result in RESULTS {
            let line = format!(r#"{{"jsonrpc":"2.0","id":4,"result":{result}}}"#);
            let (id, short, info) = decode_result(line.as_bytes()).unwrap();
            let Some(Ok(Message::Response {
                id: decoded_id,
                result: Ok(decoded),
            })) = jsonrpc::decode::<ResultMembers>(line.as_bytes()).next()
            else {
                panic!("{line} is not a result");
            };
            let short = short.into_value().unwrap();
            assert_eq!(
                (id, short, info),
                (decoded_id, decoded.result, decoded.server_info),
                "{line}"
            );
        }
        // Everything else is left to `decode`.
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}} trailing"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"#,
        ] {
            assert!(decode_result(line.as_bytes()).is_none(), "{line}");
        }
    }

    #[test]
    fn the_scan_of_result_type_agrees_with_the_value() {
        for result in RESULTS {
            let value = raw(result).into_value().unwrap();
            let (scanned, read) = (raw(result).outcome(), result_members::outcome(&value));
            assert_eq!(format!("{scanned:?}"), format!("{read:?}"), "{result}");
        }
    }

    #[test]
    fn a_tool_result_read_from_text_is_the_one_read_from_its_value() {
        for result in RESULTS {
            let value = raw(result).into_value().unwrap();
            let (from_text, from_value) = (
                CallToolResult::from_raw(raw(result)),
                CallToolResult::from_result(value.clone()),
            );
            assert_eq!(from_text, from_value, "{result}");
            assert_eq!(CallToolResult::from_raw(RawResult::from(value)), from_value);
        }
    }

    #[test]
    fn the_text_is_the_members_as_sent_but_the_eras() {
        let sent = r#"{"content":[ 1 ],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}}}"#;
        assert_eq!(raw(sent).json(), r#"{"content":[ 1 ]}"#);
        assert_eq!(raw(sent).into_value().unwrap(), json!({"content": [1]}));
        let kept = r#"{"a\"b":{},"_meta":{"x":1,"io.modelcontextprotocol/serverInfo":{}}}"#;
        assert_eq!(raw(kept).json(), r#"{"a\"b":{},"_meta":{"x":1}}"#);
        assert_eq!(raw("{}").json(), "{}");
    }

    #[test]
    fn a_host_answered_from_the_text_gets_what_the_value_would_give() {
        let pretty = "{\n  \"content\": [\r\n    {\"type\": \"text\", \"text\": \"a\\nb\"}\n  ]\n}";
        let id = json!("host-7");
        for result in RESULTS.iter().copied().chain([pretty]) {
            for stateless in [false, true] {
                let kept = raw(result);
                let Some(text) = kept.answer_text(stateless) else {
                    continue;
                };
                let from_text = jsonrpc::response_text(&id, &text);
                let mut value = raw(result).into_value().unwrap();
                if stateless {
                    mark_complete(&mut value);
                }
                let from_value = jsonrpc::response(id.clone(), Ok(value));
                let one_line = |line: &[u8]| {
                    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
                    assert!(!line.contains(&b'\r'));
                    serde_json::from_slice::<Value>(line).unwrap()
                };
                let context = format!("{result} (stateless: {stateless})");
                assert_eq!(one_line(&from_text), one_line(&from_value), "{context}");
            }
        }
        // Results that are not objects are answered as values.
        assert!(raw("[1,2]").answer_text(true).is_none());
        assert!(raw("null").answer_text(false).is_none());
    }

    #[test]
    fn only_a_result_that_may_name_a_task_is_read_for_one() {
        let may = |text: &str| raw(text).may_name_a_task();
        assert!(!may(r#"{"content":[]}"#));
        assert!(!may(r#"{"content":[],"resultType":"complete"}"#));
        assert!(may(r#"{"task":{"taskId":"t"}}"#));
        assert!(may(r#"{"resultType":"task","task":{"taskId":"t"}}"#));
        assert!(may(r#"{"resultType":"input_required"}"#));
        assert!(may("[1]"));
        for result in RESULTS {
            let value = raw(result).into_value().unwrap();
            if crate::model::tasks::Task::created_by(&value).is_some() {
                assert!(may(result), "{result}");
            }
        }
    }
}
