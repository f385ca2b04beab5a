//! Errors, sorted by who is at fault: one request failed, the connection ended, or the caller
//! misused the API. A bad line from the server is a [`LineError`](crate::LineError).

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

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
    /// The params do not fit the method, such as tool arguments that do not fit the schema.
    pub const INVALID_PARAMS: i64 = -32602;

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

impl RpcError {
    /// The server's message without the `MCP error <code>: ` the TypeScript SDK puts in front
    /// of it, since the code is shown anyway.
    pub fn text(&self) -> &str {
        let prefix = format!("MCP error {}: ", self.code);
        self.message.strip_prefix(&prefix).unwrap_or(&self.message)
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.text(), self.code)?;
        if let Some(data) = &self.data {
            write!(f, ": {data}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RpcError {}

/// Why one request failed. Each pending request ends exactly once, with a result or with this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    Remote(RpcError),
    /// The server answered, but the answer cannot be read.
    InvalidResponse(String),
    /// No answer before the deadline; `notifications/cancelled` was sent if the request was.
    TimedOut {
        /// How long the request had run.
        after: Duration,
    },
    /// The answer was longer than [`Config::max_line_len`](crate::Config::max_line_len); it was
    /// discarded as it arrived.
    ResponseTooLarge {
        /// The answer's length in bytes.
        size: usize,
        /// The limit it broke.
        limit: usize,
    },
    /// The caller cancelled it.
    Cancelled,
    /// The transport could not deliver the request or its answer (an HTTP exchange that
    /// failed); the text names where and why.
    Transport(String),
    /// The connection ended first.
    Closed(CloseReason),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Remote(error) => write!(f, "server returned an error: {error}"),
            Self::InvalidResponse(detail) => write!(f, "server sent an invalid response: {detail}"),
            Self::TimedOut { after } => write!(f, "no response within {}", seconds(*after)),
            Self::ResponseTooLarge { size, limit } => write!(
                f,
                "the response is {}, over the {} limit on messages from this server",
                mebibytes(*size),
                mebibytes(*limit)
            ),
            Self::Cancelled => f.write_str("request cancelled"),
            Self::Transport(detail) => f.write_str(detail),
            Self::Closed(reason) => write!(f, "connection closed: {reason}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// Why the connection ended. Terminal and sticky: reported once as an event, and again by
/// every command issued afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// [`Connection::close`](crate::Connection::close) was called.
    Local,
    /// The server closed its stdout.
    Eof,
    /// Server role: the host closed its end of the stream.
    ClientEof,
    /// No answer to `initialize` within the handshake budget.
    HandshakeTimedOut {
        /// The handshake budget.
        after: Duration,
    },
    /// The server answered `initialize` with an error.
    InitializeFailed(RpcError),
    /// The server wants a protocol revision we do not implement.
    UnsupportedVersion {
        /// The revision we asked for.
        requested: String,
        /// The revision the server answered with.
        offered: String,
    },
    /// The `initialize` result is not a valid result.
    InvalidInitializeResult(String),
    /// The transport failed for good (a refused connection, a TLS failure, an HTTP endpoint
    /// that is not an MCP server); the text names where and why.
    Transport(String),
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local => f.write_str("closed by the client"),
            Self::Eof => f.write_str("the server closed its output"),
            Self::ClientEof => f.write_str("the client closed its output"),
            Self::HandshakeTimedOut { after } => {
                write!(
                    f,
                    "the server did not answer `initialize` within {}",
                    seconds(*after)
                )
            }
            Self::InitializeFailed(error) => write!(f, "the server refused `initialize`: {error}"),
            Self::UnsupportedVersion { requested, offered } => write!(
                f,
                "unsupported protocol version: we asked for {requested}, the server offered \
                 {offered} (supported: {})",
                crate::HANDSHAKE_VERSIONS.join(", ")
            ),
            Self::InvalidInitializeResult(detail) => {
                write!(f, "invalid `initialize` result: {detail}")
            }
            Self::Transport(detail) => f.write_str(detail),
        }
    }
}

impl std::error::Error for CloseReason {}

/// A command the caller issued cannot be carried out. Nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The connection has ended; the reason is the one reported by [`Event::Closed`](crate::Event::Closed).
    Closed(CloseReason),
    /// JSON-RPC `params` must be an object or an array.
    InvalidParams,
    /// `params._meta.progressToken` is already the token of a pending request, so progress
    /// could not be told apart.
    ProgressTokenInUse,
    /// Server role: requests to the host wait for `notifications/initialized`.
    NotReady,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed(reason) => write!(f, "connection closed: {reason}"),
            Self::InvalidParams => f.write_str("params must be a JSON object or array"),
            Self::ProgressTokenInUse => {
                f.write_str("progressToken is already used by a pending request")
            }
            Self::NotReady => f.write_str("the client has not finished the handshake yet"),
        }
    }
}

impl std::error::Error for SendError {}

/// `64 MiB`, `16.2 MiB`, `900 bytes`: sizes as people read them.
fn mebibytes(bytes: usize) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes < 1024 * 1024 {
        return format!("{bytes} bytes");
    }
    let text = format!("{:.1}", bytes as f64 / MIB);
    format!("{} MiB", text.trim_end_matches(".0"))
}

/// `60s`, `1.5s`: durations as people write them.
fn seconds(duration: Duration) -> String {
    let text = format!("{:.3}", duration.as_secs_f64());
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}
