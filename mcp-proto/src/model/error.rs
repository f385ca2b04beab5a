//! Errors, sorted by who is at fault: one request failed, the connection ended, or the caller
//! misused the API. A bad line from the server is a [`LineError`](crate::LineError).

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::model::versions::{Era, HANDSHAKE_VERSIONS};
use crate::wire::jsonrpc::RpcError;

/// What the protocol's error codes mean to us, beside the JSON-RPC object itself (whose
/// struct is the wire's): the codes MCP adds, and what each says.
impl RpcError {
    /// The params do not fit the method, such as tool arguments that do not fit the schema;
    /// from 2026-07-28 on also an unknown resource (see [`RpcError::is_resource_not_found`]).
    pub const INVALID_PARAMS: i64 = -32602;
    /// The resource does not exist, as servers of 2025-11-25 and earlier say it.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// Stateless era: an HTTP header does not match the message it carries.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// Stateless era: the request needs client capabilities it did not declare
    /// (`data.requiredCapabilities`).
    pub(crate) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// Stateless era: the server does not speak the requested revision (`data.supported`,
    /// `data.requested`).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// 2025-11-25 only: the request can go on once the person has opened the URL-mode
    /// elicitations in `data.elicitations` (see [`ErrorKind::UrlElicitationRequired`]); then
    /// it is made again.
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
}

impl RpcError {
    /// What the error means, with its `data` read out, for the codes the protocol defines.
    pub fn kind(&self) -> ErrorKind {
        let data = self.data.as_ref();
        let member = |name: &str| data.and_then(|data| data.get(name));
        match self.code {
            Self::METHOD_NOT_FOUND => ErrorKind::MethodNotFound,
            Self::INVALID_PARAMS => ErrorKind::InvalidParams,
            Self::RESOURCE_NOT_FOUND => ErrorKind::ResourceNotFound,
            Self::HEADER_MISMATCH => ErrorKind::HeaderMismatch,
            Self::MISSING_REQUIRED_CLIENT_CAPABILITY => {
                // A `ClientCapabilities` object by the schema; a list of names is read too.
                let required = match member("requiredCapabilities") {
                    Some(Value::Object(capabilities)) => capabilities.keys().cloned().collect(),
                    Some(Value::Array(names)) => strings(names),
                    _ => Vec::new(),
                };
                ErrorKind::MissingClientCapabilities { required }
            }
            Self::UNSUPPORTED_PROTOCOL_VERSION => ErrorKind::UnsupportedVersion {
                supported: match member("supported") {
                    Some(Value::Array(versions)) => strings(versions),
                    _ => Vec::new(),
                },
                requested: member("requested")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
            Self::URL_ELICITATION_REQUIRED => ErrorKind::UrlElicitationRequired {
                elicitations: match member("elicitations") {
                    Some(Value::Array(elicitations)) => (elicitations.iter())
                        .filter(|e| e.get("url").is_some_and(Value::is_string))
                        .cloned()
                        .collect(),
                    _ => Vec::new(),
                },
            },
            _ => ErrorKind::Other,
        }
    }

    /// Whether this answers a read of a resource that does not exist: -32002 (servers of
    /// 2025-11-25 and earlier), or -32602 as the answer to `method` `resources/read` (later
    /// ones). The method comes from the caller, which knows what it asked.
    pub fn is_resource_not_found(&self, method: &str) -> bool {
        self.code == Self::RESOURCE_NOT_FOUND
            || (self.code == Self::INVALID_PARAMS && method == "resources/read")
    }

    /// The server's message without the `MCP error <code>: ` the TypeScript SDK puts in front
    /// of it, since the code is shown anyway.
    pub fn text(&self) -> &str {
        let prefix = format!("MCP error {}: ", self.code);
        self.message.strip_prefix(&prefix).unwrap_or(&self.message)
    }
}

/// The strings of a JSON array; anything else in it is left out.
fn strings(values: &[Value]) -> Vec<String> {
    (values.iter())
        .filter_map(|value| Some(value.as_str()?.to_owned()))
        .collect()
}

/// What an [`RpcError`] means, from [`RpcError::kind`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// -32601.
    MethodNotFound,
    /// -32602.
    InvalidParams,
    /// -32002, resource not found (2025-11-25 and earlier).
    ResourceNotFound,
    /// -32020: an HTTP header does not match the message.
    HeaderMismatch,
    /// -32021: the request needs client capabilities we did not declare.
    MissingClientCapabilities {
        /// Their names (`elicitation`, `sampling`, ...).
        required: Vec<String>,
    },
    /// -32022: the server does not speak the revision we asked for.
    UnsupportedVersion {
        /// The revisions it speaks.
        supported: Vec<String>,
        /// The revision we asked for, as the server read it.
        requested: Option<String>,
    },
    /// -32042 (2025-11-25 only): the person must open these links first, then the request is
    /// made again.
    UrlElicitationRequired {
        /// The URL-mode elicitations as sent (`mode`, `url`, `message`, `elicitationId`),
        /// those without a `url` string left out.
        elicitations: Vec<Value>,
    },
    /// Any other code.
    Other,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The errors of the stateless era say what to do about them; the server's own words
        // follow.
        match self.kind() {
            ErrorKind::UnsupportedVersion {
                supported,
                requested,
            } => write!(
                f,
                "the server does not support protocol revision {} (it supports: {}); ",
                requested.as_deref().unwrap_or("we asked for"),
                list_or_none(&supported)
            )?,
            ErrorKind::MissingClientCapabilities { required } => write!(
                f,
                "the server needs client capabilities we did not declare: {}; ",
                list_or_none(&required)
            )?,
            ErrorKind::HeaderMismatch => f.write_str(
                "the server found an HTTP header that does not match the message it carries; ",
            )?,
            // Its data is the links, said here in words: not repeated after the message.
            ErrorKind::UrlElicitationRequired { elicitations } => {
                f.write_str("the server needs the person to open ")?;
                for (n, elicitation) in elicitations.iter().enumerate() {
                    let text = |key: &str| elicitation.get(key).and_then(Value::as_str);
                    let separator = if n == 0 { "" } else { " and " };
                    write!(f, "{separator}{}", text("url").unwrap_or_default())?;
                    if let Some(message) = text("message").filter(|m| !m.is_empty()) {
                        write!(f, " ({message})")?;
                    }
                }
                if elicitations.is_empty() {
                    f.write_str("a link it did not name")?;
                }
                return write!(
                    f,
                    " before the request is made again; {} (code {})",
                    self.text(),
                    self.code
                );
            }
            _ => {}
        }
        write!(f, "{} (code {})", self.text(), self.code)?;
        if let Some(data) = &self.data {
            write!(f, ": {data}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RpcError {}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none named".to_owned()
    } else {
        names.join(", ")
    }
}

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
    /// discarded as it arrived. The request fails as soon as the answer crosses the limit,
    /// if its `id` shows at its start; else once it has ended.
    ResponseTooLarge {
        /// The answer's length in bytes, or as much of it as had come when it crossed the
        /// limit.
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
    /// The method does not exist in the era the server turned out to speak (`ping` or
    /// `logging/setLevel` issued before a probe found the stateless era).
    NotInEra {
        /// The method.
        method: String,
        /// The era.
        era: Era,
    },
    /// A multi-round-trip request still asked for input after
    /// [`Config::max_input_rounds`](crate::Config::max_input_rounds) rounds.
    TooManyInputRounds {
        /// The rounds taken.
        rounds: u32,
    },
    /// A `subscriptions/listen` was not acknowledged before its deadline.
    NotAcknowledged {
        /// How long it waited.
        after: Duration,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Remote(error) => write!(f, "server returned an error: {error}"),
            Self::InvalidResponse(detail) => write!(f, "server sent an invalid response: {detail}"),
            Self::TimedOut { after } => write!(f, "no response within {}", seconds(*after)),
            Self::ResponseTooLarge { size, limit } => {
                // Rounded as the limit is, a size just past it would read as the limit itself.
                let (mut seen, limit) = (mebibytes(*size), mebibytes(*limit));
                if seen == limit {
                    seen = format!("{size} bytes");
                }
                write!(
                    f,
                    "the response is at least {seen}, over the {limit} limit on messages from \
                     this server"
                )
            }
            Self::Cancelled => f.write_str("request cancelled"),
            Self::Transport(detail) => f.write_str(detail),
            Self::Closed(reason) => write!(f, "connection closed: {reason}"),
            Self::NotInEra { method, era } => not_in_era(f, method, *era),
            Self::TooManyInputRounds { rounds } => write!(
                f,
                "the server still asked for more input after {rounds} rounds; gave up"
            ),
            Self::NotAcknowledged { after } => write!(
                f,
                "the subscription was not acknowledged within {} (timed out)",
                seconds(*after)
            ),
        }
    }
}

impl std::error::Error for RequestError {}

fn not_in_era(f: &mut fmt::Formatter<'_>, method: &str, era: Era) -> fmt::Result {
    write!(f, "`{method}` does not exist in the {era} era")?;
    if method == "logging/setLevel" {
        f.write_str(" (set Config::log_level: the level rides every request's `_meta`)")?;
    }
    Ok(())
}

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
    /// The server closed its output on the `server/discover` probe: a handshake-era server
    /// that exits on requests it does not know. Start it again in the handshake era.
    EndedOnProbe,
    /// A fixed stateless revision was asked for, and `server/discover` showed that the server
    /// does not speak the stateless era (the text says how): a verdict that was cached is
    /// stale, probe again.
    NotStateless(String),
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
                HANDSHAKE_VERSIONS.join(", ")
            ),
            Self::InvalidInitializeResult(detail) => {
                write!(f, "invalid `initialize` result: {detail}")
            }
            Self::Transport(detail) => f.write_str(detail),
            Self::EndedOnProbe => f.write_str(
                "the server closed its output on the `server/discover` probe, as handshake-era \
                 servers that exit on requests they do not know do; start it again in the \
                 handshake era",
            ),
            Self::NotStateless(detail) => write!(
                f,
                "the server does not speak the stateless era: {detail}; probe it again \
                 (protocol `auto`)"
            ),
        }
    }
}

impl std::error::Error for CloseReason {}

/// A command the caller issued cannot be carried out. Nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The connection has ended; the reason is the one reported by
    /// [`Event::Closed`](crate::Event::Closed).
    Closed(CloseReason),
    /// JSON-RPC `params` must be an object or an array.
    InvalidParams,
    /// `params._meta.progressToken` is already the token of a pending request, so progress
    /// could not be told apart.
    ProgressTokenInUse,
    /// Server role: requests to the host wait for `notifications/initialized`.
    NotReady,
    /// The method does not exist in the era the connection speaks (`ping` and
    /// `logging/setLevel` in the stateless era, where the level rides `_meta`).
    NotInEra {
        /// The method.
        method: String,
        /// The era.
        era: Era,
    },
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
            Self::NotInEra { method, era } => not_in_era(f, method, *era),
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
