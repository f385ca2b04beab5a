//! JSON-RPC 2.0 messages: classifying what the server sent, encoding what we send.

use std::borrow::Cow;
use std::marker::PhantomData;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::wire::line_error::{LineError, preview};

/// A JSON-RPC error object, as the server sent it or as we send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The JSON-RPC error code, such as [`RpcError::METHOD_NOT_FOUND`].
    pub code: i64,
    /// What the server said went wrong.
    pub message: String,
    /// Anything else the server attached.
    pub data: Option<Value>,
}

impl RpcError {
    /// The method is unknown, or a capability we did not declare.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Something went wrong on the answering side that is not the request's fault.
    pub const INTERNAL_ERROR: i64 = -32603;

    /// The refusal we send for server requests we do not serve.
    pub fn method_not_found(method: &str) -> Self {
        Self {
            code: Self::METHOD_NOT_FOUND,
            message: format!("Method not found: {method}"),
            data: None,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

/// One of our ids as a response carries it: ours are integers, which peers sometimes echo as
/// strings or floats of the same value.
pub(crate) fn read_id(id: &Value) -> Option<u64> {
    match id {
        Value::Number(number) => number.as_u64().or_else(|| {
            let float = number.as_f64()?;
            (float.fract() == 0.0 && (0.0..9.0e15).contains(&float)).then_some(float as u64)
        }),
        Value::String(text) => text.parse().ok(),
        _ => None,
    }
}

/// The `id` of the response `message` is, should it turn out no message: an object with a
/// `result` or an `error` and no `method` (the `id` of a request is the peer's own).
pub(crate) fn response_id(message: &Value) -> Option<Value> {
    let members = message.as_object()?;
    let answer = members.contains_key("result") || members.contains_key("error");
    let id = members.get("id")?;
    (answer && !members.contains_key("method")).then(|| id.clone())
}

/// How a response's `result` member is read: the wire finds it and hands its text (or, for a
/// line parsed as it arrived, its value) to this reading; what a result sheds on the way (the
/// members the stateless era adds to every result) is the floor above's to say. A plain
/// [`Value`] keeps the result as sent.
pub(crate) trait ResponseResult: for<'de> Deserialize<'de> {
    /// The same reading of a result already parsed into a value.
    fn from_value(result: Value) -> Self;
}

impl ResponseResult for Value {
    fn from_value(result: Value) -> Self {
        result
    }
}

/// One message from the server, classified by its fields; a response's result read as `R`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message<R = Value> {
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
        result: Result<R, ResponseError>,
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
///
/// There is one way through: the line is parsed once, each object's members are read as they
/// come (no map is built for the envelope), and `params`, `result` and `error` become values.
/// A well-formed line that is not a message is classified, not rejected by the parser, so the
/// whole line is still checked to be JSON first: a broken line is reported as broken.
pub(crate) fn decode<R: ResponseResult>(line: &[u8]) -> Messages<R> {
    // Checked once for the whole line, where parsing bytes would check each string on its
    // own: a typical response holds a dozen, and each check has a fixed cost.
    let Ok(text) = std::str::from_utf8(line) else {
        return Messages::One(Some(Err(LineError::NotUtf8)));
    };
    let mut parser = serde_json::Deserializer::from_str(text);
    let decoded = parser
        .deserialize_any(LineVisitor::<R>::new(true))
        .and_then(|decoded| parser.end().map(|()| decoded));
    match decoded {
        Ok(Decoded::One(message)) => Messages::One(Some(message)),
        Ok(Decoded::Batch(messages)) => Messages::Batch(messages.into_iter()),
        Err(error) => Messages::One(Some(Err(not_json(text, &error)))),
    }
}

/// Classifies a line that was parsed as it arrived (see
/// [`JsonStream`](crate::wire::stream_json::JsonStream)): the messages [`decode`] finds in the same
/// text, with the value's members moved into them.
pub(crate) fn decode_value<R: ResponseResult>(value: Value) -> Messages<R> {
    match value {
        Value::Array(items) if items.is_empty() => {
            Messages::One(Some(Err(not_jsonrpc("empty batch"))))
        }
        Value::Array(items) => {
            let messages: Vec<_> = items.into_iter().map(message_from_value).collect();
            Messages::Batch(messages.into_iter())
        }
        value => Messages::One(Some(message_from_value(value))),
    }
}

/// [`read_message`] for a value: a batch's element, or a whole line.
fn message_from_value<R: ResponseResult>(value: Value) -> Result<Message<R>, LineError> {
    let Value::Object(mut members) = value else {
        return Err(not_jsonrpc("not an object"));
    };
    if members
        .get("jsonrpc")
        .is_some_and(|version| version.as_str() != Some("2.0"))
    {
        return Err(not_jsonrpc("`jsonrpc` is not \"2.0\""));
    }
    let id = members.remove("id");
    match members.remove("method") {
        None => classify_response(
            id,
            (members.remove("result")).map(R::from_value),
            members.remove("error"),
        ),
        Some(Value::String(method)) => classify_call(id, method, members.remove("params")),
        Some(_) => Err(not_jsonrpc("`method` is not a string")),
    }
}

/// The messages of one line: no list is built for the usual single message.
pub(crate) enum Messages<R = Value> {
    One(Option<Result<Message<R>, LineError>>),
    Batch(std::vec::IntoIter<Result<Message<R>, LineError>>),
}

impl<R> Iterator for Messages<R> {
    type Item = Result<Message<R>, LineError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::One(message) => message.take(),
            Self::Batch(messages) => messages.next(),
        }
    }
}

enum Decoded<R> {
    One(Result<Message<R>, LineError>),
    Batch(Vec<Result<Message<R>, LineError>>),
}

/// Reads a message, or at the top level a batch of them. Whatever is not an object becomes a
/// classification error, never a parse error, so parsing goes on to the end of the line.
struct LineVisitor<R> {
    top_level: bool,
    result: PhantomData<fn() -> R>,
}

impl<R> LineVisitor<R> {
    fn new(top_level: bool) -> Self {
        Self {
            top_level,
            result: PhantomData,
        }
    }

    fn not_an_object<E>(self) -> Result<Decoded<R>, E> {
        Ok(Decoded::One(Err(not_jsonrpc("not an object"))))
    }
}

impl<'de, R: ResponseResult> Visitor<'de> for LineVisitor<R> {
    type Value = Decoded<R>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Decoded<R>, A::Error> {
        read_message(map).map(Decoded::One)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Decoded<R>, A::Error> {
        if !self.top_level {
            // A batch inside a batch is not a message.
            IgnoredAny.visit_seq(seq)?;
            return self.not_an_object();
        }
        let mut messages = Vec::new();
        while let Some(Element(message)) = seq.next_element()? {
            messages.push(message);
        }
        if messages.is_empty() {
            return Ok(Decoded::One(Err(not_jsonrpc("empty batch"))));
        }
        Ok(Decoded::Batch(messages))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Decoded<R>, E> {
        self.not_an_object()
    }

    fn visit_i64<E>(self, _: i64) -> Result<Decoded<R>, E> {
        self.not_an_object()
    }

    fn visit_u64<E>(self, _: u64) -> Result<Decoded<R>, E> {
        self.not_an_object()
    }

    fn visit_f64<E>(self, _: f64) -> Result<Decoded<R>, E> {
        self.not_an_object()
    }

    fn visit_str<E>(self, _: &str) -> Result<Decoded<R>, E> {
        self.not_an_object()
    }

    fn visit_unit<E>(self) -> Result<Decoded<R>, E> {
        self.not_an_object()
    }
}

/// One element of a batch.
struct Element<R>(Result<Message<R>, LineError>);

impl<'de, R: ResponseResult> Deserialize<'de> for Element<R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(LineVisitor::new(false))? {
            Decoded::One(message) => Ok(Self(message)),
            // Unreachable: only the top level reads batches.
            Decoded::Batch(_) => Ok(Self(Err(not_jsonrpc("not an object")))),
        }
    }
}

/// The members classification reads; the rest are skipped unparsed into values.
pub(crate) enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MemberVisitor;
        impl Visitor<'_> for MemberVisitor {
            type Value = Member;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a member name")
            }

            fn visit_str<E>(self, name: &str) -> Result<Member, E> {
                Ok(match name {
                    "jsonrpc" => Member::Jsonrpc,
                    "id" => Member::Id,
                    "method" => Member::Method,
                    "params" => Member::Params,
                    "result" => Member::Result,
                    "error" => Member::Error,
                    _ => Member::Other,
                })
            }
        }
        deserializer.deserialize_identifier(MemberVisitor)
    }
}

/// A member that should be a string: its text, borrowed from the line when it has no escapes,
/// or `None` when it is something else.
pub(crate) struct Text<'de>(pub(crate) Option<Cow<'de, str>>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Some(Cow::Borrowed(text))))
    }

    fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
        Ok(Text(Some(Cow::Owned(text.to_owned()))))
    }

    fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
        Ok(Text(Some(Cow::Owned(text))))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Text<'de>, E> {
        Ok(Text(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Text<'de>, E> {
        Ok(Text(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Text<'de>, E> {
        Ok(Text(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Text<'de>, E> {
        Ok(Text(None))
    }

    fn visit_unit<E>(self) -> Result<Text<'de>, E> {
        Ok(Text(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Text<'de>, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| Text(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Text<'de>, A::Error> {
        IgnoredAny.visit_map(map).map(|_| Text(None))
    }
}

/// Reads an object's members as they come and classifies it. A member given twice counts
/// with its last value, as in any JSON object read into a map.
fn read_message<'de, R: ResponseResult, A: MapAccess<'de>>(
    mut map: A,
) -> Result<Result<Message<R>, LineError>, A::Error> {
    let mut jsonrpc = None;
    let mut id = None;
    let mut method = None;
    let mut params = None;
    let mut result = None;
    let mut error = None;
    while let Some(member) = map.next_key()? {
        match member {
            Member::Jsonrpc => jsonrpc = Some(map.next_value::<Text<'de>>()?.0),
            Member::Id => id = Some(map.next_value()?),
            Member::Method => method = Some(map.next_value::<Text<'de>>()?.0),
            Member::Params => params = Some(map.next_value()?),
            Member::Result => result = Some(map.next_value::<R>()?),
            Member::Error => error = Some(map.next_value()?),
            Member::Other => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    // A missing `jsonrpc` member is tolerated: it carries no information we need, and a
    // stricter check would only drop answers from sloppy servers.
    if jsonrpc.is_some_and(|version| version.as_deref() != Some("2.0")) {
        return Ok(Err(not_jsonrpc("`jsonrpc` is not \"2.0\"")));
    }
    Ok(match method {
        None => classify_response(id, result, error),
        Some(Some(method)) => classify_call(id, method.into_owned(), params),
        Some(None) => Err(not_jsonrpc("`method` is not a string")),
    })
}

fn not_json(line: &str, error: &serde_json::Error) -> LineError {
    LineError::NotJson {
        detail: format!("{error} in {:?}", preview(line)),
    }
}

fn not_jsonrpc(detail: &str) -> LineError {
    LineError::NotJsonRpc {
        detail: detail.to_owned(),
    }
}

fn classify_call<R>(
    id: Option<Value>,
    method: String,
    params: Option<Value>,
) -> Result<Message<R>, LineError> {
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

fn classify_response<R>(
    id: Option<Value>,
    result: Option<R>,
    error: Option<Value>,
) -> Result<Message<R>, LineError> {
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
/// is built just to be serialised and dropped. Members the params want spliced in (see
/// [`RequestParams::spliced`]) are copied in last.
pub(crate) fn request<P: RequestParams>(id: u64, method: &str, params: Option<&P>) -> Vec<u8> {
    // Room for a stateless-era request at once (its `_meta` alone takes 200 bytes): grown
    // from `to_vec`'s 128 bytes, it was copied twice on the way.
    let mut bytes = Vec::with_capacity(512);
    // The members' names are written as they are, not through serde: each one it wrote was
    // scanned for escapes, a sixth of encoding a call. What serde would write, byte for byte
    // (the tests hold the two together); only the values go through it.
    bytes.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    let written = serde_json::to_writer(&mut bytes, &id)
        .and_then(|()| {
            bytes.extend_from_slice(br#","method":"#);
            serde_json::to_writer(&mut bytes, method)
        })
        .and_then(|()| match params {
            // Last, so that an object that ends it closes just before the request does.
            Some(params) => {
                bytes.extend_from_slice(br#","params":"#);
                params.write(&mut bytes)
            }
            None => Ok(()),
        });
    // Serialising these (string keys only) cannot fail, and JSON escapes every newline inside
    // strings, so the output is exactly one line.
    if written.is_err() {
        bytes.clear();
    } else {
        bytes.push(b'}');
    }
    bytes.push(b'\n');
    if let Some(members) = params.and_then(RequestParams::spliced) {
        splice(&mut bytes, members);
    }
    bytes
}

/// What goes in a request's `params`: written as it serialises, and then, if it says so,
/// members given as JSON text added to the object it ends with. The floor above uses this
/// for what it writes once and copies into every request (the stateless era's `_meta`).
pub(crate) trait RequestParams: Serialize {
    /// `"key":value` pairs joined by commas, to add at the end of the object that is the
    /// params' last member; `None` to add nothing.
    fn spliced(&self) -> Option<&str> {
        None
    }

    /// Appends the params' JSON to `out`: as serde writes them, unless a type knows a
    /// quicker way to the same bytes.
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(out, self)
    }
}

/// Params as given: written as they are.
impl RequestParams for Value {}

/// Adds `members` to request `line`, whose params end with an object member (see
/// [`RequestParams::spliced`]): the line then ends with the closing braces of that object,
/// the params and the request, and its newline.
fn splice(line: &mut Vec<u8>, members: &str) {
    const END: &[u8] = b"}}}\n";
    debug_assert!(line.ends_with(END), "no object at the end of {line:?}");
    line.truncate(line.len().saturating_sub(END.len()));
    if !line.ends_with(b"{") {
        line.push(b',');
    }
    line.extend_from_slice(members.as_bytes());
    line.extend_from_slice(END);
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
    /// An answer, serialised from what it borrows: no map built for it.
    #[derive(Serialize)]
    struct Answer<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<&'a Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
    }
    let (result, error) = match &result {
        Ok(result) => (Some(result), None),
        Err(error) => (None, Some(error.to_json())),
    };
    line(&Answer {
        jsonrpc: "2.0",
        id: &id,
        result,
        error,
    })
}

/// An answer whose result is JSON text already, written as it is but for its line breaks:
/// in valid JSON those are whitespace, which a line-delimited transport cannot carry inside a
/// message (a result that came over HTTP may be pretty-printed).
pub(crate) fn response_text(id: &Value, result: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(result.len() + 64);
    bytes.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // An id is a number, a string or null: it always serialises.
    if serde_json::to_writer(&mut bytes, id).is_err() {
        bytes.extend_from_slice(b"null");
    }
    bytes.extend_from_slice(br#","result":"#);
    let start = bytes.len();
    bytes.extend_from_slice(result.as_bytes());
    let text = &mut bytes[start..];
    if text.contains(&b'\n') || text.contains(&b'\r') {
        for byte in text.iter_mut().filter(|byte| matches!(byte, b'\n' | b'\r')) {
            *byte = b' ';
        }
    }
    bytes.extend_from_slice(b"}\n");
    bytes
}

fn line(message: &impl Serialize) -> Vec<u8> {
    // Room for a stateless-era request at once (its `_meta` alone takes 200 bytes): grown
    // from `to_vec`'s 128 bytes, it was copied twice on the way.
    let mut bytes = Vec::with_capacity(512);
    // Serialising these (string keys only) cannot fail, and JSON escapes every newline inside
    // strings, so the output is exactly one line.
    if serde_json::to_writer(&mut bytes, message).is_err() {
        bytes.clear();
    }
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests;
