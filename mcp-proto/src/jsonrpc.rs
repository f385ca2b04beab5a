//! JSON-RPC 2.0 messages: classifying what the server sent, encoding what we send.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::error::RpcError;
use crate::framing::LineError;

/// One message from the server, classified by its fields.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    /// Has `method` and a usable `id`: the server wants an answer.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// Has `method` and no `id`.
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// Has `result` or `error`. `id` is kept as sent; matching it is the connection's job.
    Response {
        id: Value,
        result: Result<Value, ResponseError>,
    },
}

/// The `error` member of a response, or why it could not be read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ResponseError {
    Remote(RpcError),
    /// The response is recognisable but its `error` member is not a valid error object.
    Invalid(String),
}

/// Decodes one line into the messages it holds.
///
/// A line is usually one message. A JSON array (a JSON-RPC batch, which MCP revision 2025-03-26
/// allowed and later revisions dropped) yields each element in order, so old servers keep
/// working; an element that is not a message is reported on its own and the rest still count.
pub(crate) fn decode(line: &[u8]) -> Messages {
    // The usual line, one message object, is read member by member with no map built for the
    // envelope. Anything else (a batch, a broken line, a member of an odd type) takes the
    // general way through a `Value`, which also tells what is wrong with it.
    let first = line.iter().find(|byte| !byte.is_ascii_whitespace());
    if first == Some(&b'{')
        && let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(line)
    {
        return Messages::One(Some(classify_envelope(envelope)));
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(error) => return Messages::One(Some(Err(classify_parse_error(line, &error)))),
    };
    match value {
        Value::Array(items) if items.is_empty() => {
            Messages::One(Some(Err(not_jsonrpc("empty batch"))))
        }
        Value::Array(items) => Messages::Batch(items.into_iter()),
        single => Messages::One(Some(classify(single))),
    }
}

/// The members of a message that classification reads; the rest are skipped unread. A member
/// that is present holds `Some`, even when its value is `null`.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    method: Option<String>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
}

fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// The messages of one line, classified as they are taken: no list is built for the usual
/// single message.
pub(crate) enum Messages {
    One(Option<Result<Message, LineError>>),
    Batch(std::vec::IntoIter<Value>),
}

impl Iterator for Messages {
    type Item = Result<Message, LineError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::One(message) => message.take(),
            Self::Batch(items) => items.next().map(classify),
        }
    }
}

fn classify_parse_error(line: &[u8], error: &serde_json::Error) -> LineError {
    if std::str::from_utf8(line).is_err() {
        return LineError::NotUtf8;
    }
    LineError::NotJson {
        detail: format!("{error} in {:?}", preview(line)),
    }
}

/// The start of a line, for error messages about it.
fn preview(line: &[u8]) -> String {
    const MAX: usize = 60;
    let text = String::from_utf8_lossy(&line[..line.len().min(MAX)]);
    if line.len() > MAX {
        format!("{text}...")
    } else {
        text.into_owned()
    }
}

fn not_jsonrpc(detail: &str) -> LineError {
    LineError::NotJsonRpc {
        detail: detail.to_owned(),
    }
}

fn classify(value: Value) -> Result<Message, LineError> {
    let Value::Object(mut object) = value else {
        return Err(not_jsonrpc("not an object"));
    };
    let jsonrpc = match object.remove("jsonrpc") {
        None => None,
        Some(Value::String(version)) => Some(Cow::Owned(version)),
        Some(_) => return Err(not_jsonrpc("`jsonrpc` is not \"2.0\"")),
    };
    let method = match object.remove("method") {
        None => None,
        Some(Value::String(method)) => Some(method),
        Some(_) => return Err(not_jsonrpc("`method` is not a string")),
    };
    classify_envelope(Envelope {
        jsonrpc,
        id: object.remove("id"),
        method,
        params: object.remove("params"),
        result: object.remove("result"),
        error: object.remove("error"),
    })
}

fn classify_envelope(envelope: Envelope<'_>) -> Result<Message, LineError> {
    // A missing `jsonrpc` member is tolerated: it carries no information we need, and a
    // stricter check would only drop answers from sloppy servers.
    if envelope.jsonrpc.is_some_and(|version| version != "2.0") {
        return Err(not_jsonrpc("`jsonrpc` is not \"2.0\""));
    }
    match envelope.method {
        Some(method) => classify_call(envelope.id, method, envelope.params),
        None => classify_response(envelope.id, envelope.result, envelope.error),
    }
}

fn classify_call(
    id: Option<Value>,
    method: String,
    params: Option<Value>,
) -> Result<Message, LineError> {
    match id {
        None => Ok(Message::Notification { method, params }),
        Some(id @ (Value::String(_) | Value::Number(_))) => {
            Ok(Message::Request { id, method, params })
        }
        // A null id cannot be answered meaningfully (JSON-RPC reserves it for errors about
        // unreadable requests), so such a request is reported instead of refused.
        Some(Value::Null) => Err(not_jsonrpc("request with a null `id`")),
        Some(_) => Err(not_jsonrpc("`id` is neither a string nor a number")),
    }
}

fn classify_response(
    id: Option<Value>,
    result: Option<Value>,
    error: Option<Value>,
) -> Result<Message, LineError> {
    let Some(id) = id else {
        return Err(not_jsonrpc("neither `method` nor `id`"));
    };
    let result = match (result, error) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(decode_error(error)),
        (Some(_), Some(_)) => Err(ResponseError::Invalid(
            "response has both `result` and `error`".to_owned(),
        )),
        (None, None) => return Err(not_jsonrpc("response without `result` or `error`")),
    };
    Ok(Message::Response { id, result })
}

fn decode_error(error: Value) -> ResponseError {
    let invalid = || ResponseError::Invalid(format!("malformed error object: {error}"));
    let Value::Object(fields) = &error else {
        return invalid();
    };
    let code = fields.get("code").and_then(Value::as_i64);
    let message = fields.get("message").and_then(Value::as_str);
    match (code, message) {
        (Some(code), Some(message)) => ResponseError::Remote(RpcError {
            code,
            message: message.to_owned(),
            data: fields.get("data").cloned(),
        }),
        _ => invalid(),
    }
}

/// A request we send. `params` is omitted when `None`. Written straight from its parts: no map
/// is built just to be serialised and dropped.
pub(crate) fn request<P: Serialize>(id: u64, method: &str, params: Option<&P>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Request<'a, P> {
        jsonrpc: &'static str,
        id: u64,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a P>,
    }
    line(&Request {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// The params of `tools/call`, with the progress token that lets progress extend its deadline.
#[derive(Serialize)]
pub(crate) struct CallToolParams<'a, T> {
    pub(crate) name: &'a str,
    pub(crate) arguments: &'a Value,
    #[serde(rename = "_meta")]
    pub(crate) meta: ProgressMeta<T>,
}

/// `_meta.progressToken`: the call's own id, or a token the caller chose.
#[derive(Serialize)]
pub(crate) struct ProgressMeta<T> {
    #[serde(rename = "progressToken")]
    pub(crate) progress_token: T,
}

/// A notification we send.
pub(crate) fn notification(method: &str, params: Option<Value>) -> Vec<u8> {
    let mut message = json!({ "jsonrpc": "2.0", "method": method });
    if let Some(params) = params {
        message["params"] = params;
    }
    line(&message)
}

/// An answer to a server request, echoing its id exactly as the server wrote it.
pub(crate) fn response(id: Value, result: Result<Value, RpcError>) -> Vec<u8> {
    let message = match result {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }),
    };
    line(&message)
}

fn line(message: &impl Serialize) -> Vec<u8> {
    // Serialising these (string keys only) cannot fail, and JSON escapes every newline inside
    // strings, so the output is exactly one line.
    let mut bytes = serde_json::to_vec(message).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Result<Message, LineError> {
        let mut messages: Vec<_> = decode(line.as_bytes()).collect();
        assert_eq!(messages.len(), 1);
        messages.remove(0)
    }

    #[test]
    fn classifies_each_kind() {
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            Ok(Message::Request {
                id: json!("a"),
                method: "ping".into(),
                params: None
            })
        );
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","method":"x","params":{"k":1}}"#),
            Ok(Message::Notification {
                method: "x".into(),
                params: Some(json!({"k": 1}))
            })
        );
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Ok(Message::Response {
                id: json!(3),
                result: Ok(json!({}))
            })
        );
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#),
            Ok(Message::Response {
                id: json!(3),
                result: Err(ResponseError::Remote(RpcError {
                    code: -32601,
                    message: "no".into(),
                    data: None
                }))
            })
        );
    }

    #[test]
    fn rejects_what_is_not_a_message() {
        assert!(matches!(
            one("Starting server..."),
            Err(LineError::NotJson { .. })
        ));
        assert_eq!(
            decode(b"\xff\xfe{").collect::<Vec<_>>(),
            [Err(LineError::NotUtf8)]
        );
        assert!(matches!(one("42"), Err(LineError::NotJsonRpc { .. })));
        assert!(matches!(one("[]"), Err(LineError::NotJsonRpc { .. })));
        assert!(matches!(
            one(r#"{"jsonrpc":"1.0","id":1,"result":1}"#),
            Err(LineError::NotJsonRpc { .. })
        ));
        assert!(matches!(
            one(r#"{"id":null,"method":"ping"}"#),
            Err(LineError::NotJsonRpc { .. })
        ));
        assert!(matches!(
            one(r#"{"id":{},"method":"ping"}"#),
            Err(LineError::NotJsonRpc { .. })
        ));
        assert!(matches!(
            one(r#"{"id":1}"#),
            Err(LineError::NotJsonRpc { .. })
        ));
    }

    #[test]
    fn members_read_directly_mean_what_they_mean_in_a_value() {
        // Each line against the same line read the general way, through a `Value`.
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":null,"id":1,"result":1}"#,
            r#"{"jsonrpc":2.0,"id":1,"result":1}"#,
            r#"{"id":1,"method":null}"#,
            r#"{"id":1,"method":7}"#,
            r#"{"id":1,"id":2,"result":1}"#,
            r#"{"id":1,"result":1,"error":null}"#,
            r#"{"id":1,"extra":[1,{"x":null}],"result":{"a":"b"}}"#,
            r#"{"jsonrpc":"2.\u0030","method":"n","params":null}"#,
            r#" {"method":"ping","id":"p"} "#,
            r#"{"method":"n","id":null}"#,
            r#"{"id":2,"result":1} trailing"#,
        ];
        for line in lines {
            let general = serde_json::from_slice(line.as_bytes())
                .map_err(|error| classify_parse_error(line.as_bytes(), &error))
                .and_then(classify);
            assert_eq!(one(line), general, "{line}");
        }
        // A top-level array is a batch, never a message read by position.
        let messages: Vec<_> = decode(br#"["2.0", 1, "ping"]"#).collect();
        assert!(messages.iter().all(Result::is_err), "{messages:?}");
    }

    #[test]
    fn batch_yields_each_element() {
        let messages: Vec<_> = decode(br#"[{"id":1,"result":1},{"method":"n"},7]"#).collect();
        assert_eq!(messages.len(), 3);
        assert!(matches!(messages[0], Ok(Message::Response { .. })));
        assert!(matches!(messages[1], Ok(Message::Notification { .. })));
        assert!(matches!(messages[2], Err(LineError::NotJsonRpc { .. })));
    }

    #[test]
    fn malformed_error_object_is_kept_as_invalid() {
        assert!(matches!(
            one(r#"{"id":1,"error":"boom"}"#),
            Ok(Message::Response {
                result: Err(ResponseError::Invalid(_)),
                ..
            })
        ));
    }

    #[test]
    fn encoded_messages_are_single_lines() {
        let bytes = request(1, "tools/call", Some(&json!({"text": "a\nb"})));
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
        assert!(bytes.ends_with(b"\n"));
    }
}
