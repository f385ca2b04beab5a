//! What the server half of Streamable HTTP reads of a host's HTTP request: its method, the
//! few headers the transport defines, and whether its body is one message; and the
//! responses it gives of its own (refusals, `202 Accepted`).

use serde_json::{Value, json};

use crate::machines::server::{HostMessage, ServerConnection};
use crate::model::params::PROTOCOL_VERSION;
use crate::wire::jsonrpc::RpcError;
use crate::wire::line_error::LineError;

/// A host's HTTP request, as the transport reads it: the caller has checked everything
/// around it (the bearer token, `Host` and `Origin`, the path, the body's size).
#[derive(Debug, Clone, Copy)]
pub struct HttpRequest<'a> {
    /// `POST`, `GET`, `DELETE`, ...
    pub method: &'a str,
    /// Every header, names in lower case (as HTTP/2 and hyper give them), in the order sent;
    /// a name may come more than once.
    pub headers: &'a [(&'a str, &'a [u8])],
    /// The whole body.
    pub body: &'a [u8],
}

impl<'a> HttpRequest<'a> {
    /// The first value of header `name` (lower case), when it is text.
    pub(super) fn header(&self, name: &str) -> Option<&'a str> {
        let (_, value) = self.headers.iter().find(|(given, _)| *given == name)?;
        Some(std::str::from_utf8(value).unwrap_or("\u{fffd}"))
    }

    /// The session the request names (`Mcp-Session-Id`).
    pub(super) fn session(&self) -> Option<&'a str> {
        self.header(SESSION_HEADER)
    }

    /// Whether its `Accept` takes an event stream.
    pub(super) fn accepts_events(&self) -> bool {
        // Read as bytes: the media types are ASCII, and a value that is not is no event stream.
        (self.headers.iter())
            .filter(|(name, _)| *name == "accept")
            .flat_map(|(_, value)| value.split(|&byte| byte == b','))
            .any(|kind| {
                let kind = kind.split(|&byte| byte == b';').next().unwrap_or_default();
                kind.trim_ascii().eq_ignore_ascii_case(b"text/event-stream")
            })
    }

    /// The body as one message, or the 400 that says why it is not one.
    pub(super) fn message(&self) -> Result<HostMessage, HttpResponse> {
        let first = self.body.iter().find(|byte| !byte.is_ascii_whitespace());
        if first == Some(&b'[') {
            let error = rpc_error(
                &Value::Null,
                ServerConnection::INVALID_REQUEST,
                "batches are not supported",
            );
            return Err(HttpResponse::json(400, &error));
        }
        HostMessage::decode(self.body).map_err(|error| {
            let (code, text) = match error {
                LineError::NotJsonRpc { .. } => {
                    (ServerConnection::INVALID_REQUEST, error.to_string())
                }
                _ => (
                    ServerConnection::PARSE_ERROR,
                    format!("parse error: {error}"),
                ),
            };
            HttpResponse::json(400, &rpc_error(&Value::Null, code, &text))
        })
    }

    /// A stateless-era request that its headers contradict, as the era's transport forbids
    /// (`MCP-Protocol-Version` and `Mcp-Method` mirror the body), or that is of neither era
    /// (no revision in `_meta`, and not `initialize`): the error to answer with 400.
    pub(super) fn mirror_mismatch(&self, message: &HostMessage) -> Option<Value> {
        let id = message.id().unwrap_or(&Value::Null);
        let method = message.method().unwrap_or_default();
        let stated = message.meta(PROTOCOL_VERSION).and_then(Value::as_str);
        let mismatch = |text: String| Some(rpc_error(id, RpcError::HEADER_MISMATCH, &text));
        match (stated, self.header("mcp-protocol-version")) {
            (None, _) if method == "server/discover" => {}
            (None, _) => {
                let text = "no Mcp-Session-Id: send initialize first for a session, or name \
                            the 2026-07-28 revision in the request's _meta";
                return Some(rpc_error(id, ServerConnection::INVALID_REQUEST, text));
            }
            (Some(stated), Some(given)) if stated != given => {
                return mismatch(format!(
                    "MCP-Protocol-Version {given} does not match the _meta's {stated}"
                ));
            }
            (Some(_), None) => return mismatch("MCP-Protocol-Version is missing".to_owned()),
            _ => {}
        }
        match self.header("mcp-method") {
            Some(given) if given != method => mismatch(format!(
                "Mcp-Method {given} does not match the body's {method}"
            )),
            _ => None,
        }
    }
}

/// The session header, as the transport names it.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// A response the caller writes as it is: a status, headers and a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The HTTP status.
    pub status: u16,
    /// Its headers (`Content-Type` among them when there is a body).
    pub headers: Vec<(&'static str, String)>,
    /// The whole body; empty for an event stream's head, whose events come after it.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// A JSON-RPC message.
    pub(super) fn json(status: u16, message: &Value) -> Self {
        Self::json_text(status, serde_json::to_vec(message).unwrap_or_default())
    }

    /// A JSON-RPC message as written.
    pub(super) fn json_text(status: u16, body: Vec<u8>) -> Self {
        let headers = vec![("content-type", "application/json".to_owned())];
        Self {
            status,
            headers,
            body,
        }
    }

    /// A line of text for a person (what a refusal before any message says).
    pub(super) fn plain(status: u16, text: &str) -> Self {
        let headers = vec![("content-type", "text/plain; charset=utf-8".to_owned())];
        let body = format!("{text}\n").into_bytes();
        Self {
            status,
            headers,
            body,
        }
    }

    /// A 405 naming the methods the endpoint takes.
    pub(super) fn not_allowed(text: &str) -> Self {
        let mut response = Self::plain(405, text);
        response
            .headers
            .push(("allow", "GET, POST, DELETE".to_owned()));
        response
    }

    /// `202 Accepted`, the answer to a notification or to a host's answer.
    pub fn accepted() -> Self {
        Self {
            status: 202,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// The head of an event stream.
    pub(super) fn event_stream() -> Self {
        let headers = vec![
            ("content-type", "text/event-stream".to_owned()),
            ("cache-control", "no-cache".to_owned()),
            // Proxies such as nginx would otherwise hold the events back.
            ("x-accel-buffering", "no".to_owned()),
        ];
        Self {
            status: 200,
            headers,
            body: Vec::new(),
        }
    }
}

/// A JSON-RPC error answering `id`.
pub(super) fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// One server-sent event carrying `message`, as this transport writes it.
pub fn event(message: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(message.len() + 24);
    bytes.extend_from_slice(b"event: message\ndata: ");
    bytes.extend_from_slice(message);
    bytes.extend_from_slice(b"\n\n");
    bytes
}
