//! What an [`HttpConnection`](super::HttpConnection) asks its caller for and hears back: the
//! exchanges (a POST or a GET), their ids, and the replies they bring.

use std::time::Duration;

use crate::model::request::RequestId;

/// Which HTTP transport to speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpTransport {
    /// Streamable HTTP, falling back to HTTP+SSE when the `initialize` POST is answered with
    /// 400, 404 or 405, as the specification's backwards compatibility section says.
    #[default]
    Auto,
    /// Streamable HTTP only.
    Streamable,
    /// The 2024-11-05 HTTP+SSE transport only: the URL is the event stream.
    Sse,
}

/// Names one HTTP exchange the machine asked for, in the facts reported about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExchangeId(pub(super) u64);

/// An exchange to start, or to stop, drained with [`HttpConnection::poll_exchange`](super::HttpConnection::poll_exchange).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exchange {
    /// POST one message.
    Post(Post),
    /// GET an event stream.
    Get(Get),
    /// Stop this exchange (close its socket); report nothing more about it.
    Cancel(ExchangeId),
}

/// One message to POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    /// What to report its facts under.
    pub id: ExchangeId,
    /// The configured endpoint, or HTTP+SSE's message endpoint.
    pub url: String,
    /// The protocol's headers; the caller adds its own (static ones, `Authorization`).
    pub headers: Vec<(String, String)>,
    /// The message.
    pub body: Vec<u8>,
    /// Where its answer comes, which says how much of the response to read.
    pub answer: Answer,
    /// Stop it after this long: a message nobody answers must not hold a socket for ever.
    pub timeout: Option<Duration>,
}

/// Where a POST's answer comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// In the response: a JSON body or an event stream. Anything else fails the request.
    InResponse,
    /// On HTTP+SSE's event stream: the response is only an acknowledgement, read to its end.
    OnTheStream,
    /// None is due (a notification, an answer to the server): any 2xx will do, though a JSON
    /// body or an event stream is still relayed.
    None,
}

/// An event stream to GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Get {
    /// What to report its facts under.
    pub id: ExchangeId,
    /// The configured URL.
    pub url: String,
    /// The protocol's headers (`Accept`, the session's, `Last-Event-ID`); the caller adds its own.
    pub headers: Vec<(String, String)>,
    /// Wait this long before sending it.
    pub delay: Duration,
    /// HTTP+SSE's one stream: its `endpoint` event is reported as [`Reply::Endpoint`].
    pub legacy: bool,
}

/// A fact about an exchange, fed with [`HttpConnection::handle_reply`](super::HttpConnection::handle_reply), in the order seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// No HTTP answer at all (DNS, refused, TLS, a redirect loop, no authorization to send):
    /// the sentence, without the method and URL.
    Unreachable(String),
    /// 401 or 403 that could not be fixed: the sentence to fail with.
    Unauthorized(String),
    /// A status other than 2xx: the start of the body, and the answer described
    /// (`HTTP 404 Not Found: ...`).
    Refused {
        /// The status code.
        status: u16,
        /// The start of the body.
        body: Vec<u8>,
        /// The status and the body's start, on one line.
        detail: String,
    },
    /// A 2xx head; `session` is its `Mcp-Session-Id`.
    Head {
        /// The `Mcp-Session-Id` header, if any.
        session: Option<String>,
    },
    /// One JSON-RPC message: a JSON body, or one event's data; or, after [`Part`](Self::Part)s,
    /// the last piece of one (empty if there is no more), which makes it whole.
    Message(Vec<u8>),
    /// A piece of a JSON body or of one event's data, in order, for a message too large to
    /// be held whole ([`PIECES_FROM`](super::PIECES_FROM)): pieces are parsed as they come. A
    /// [`Message`](Self::Message) ends it. Any other fact about the exchange drops what came
    /// of it.
    Part(Vec<u8>),
    /// The pieces since the last message were not one after all (an event of another type):
    /// forget them.
    PartsDropped,
    /// A JSON body was read to its end; `detail` describes it, for when it answered nothing.
    BodyEnded(String),
    /// The answer is unusable (another content type, a body that broke off): the sentence,
    /// without the method and URL.
    Failed(String),
    /// A body or an event over [`Config::max_line_len`](crate::Config::max_line_len); `size` is what had come of it.
    TooLarge {
        /// Bytes seen.
        size: usize,
    },
    /// An event stream ended or broke (`why`), after the last event id and `retry` it gave.
    StreamEnded {
        /// `the event stream ended`, or why it broke off.
        why: String,
        /// The id of the last event that had one.
        last_event_id: Option<String>,
        /// The last `retry` field.
        retry: Option<Duration>,
    },
    /// HTTP+SSE: where to POST messages, as a URL checked to be on the stream's origin.
    Endpoint(String),
    /// The exchange is over: its task ended, or its timeout passed.
    Done,
}

/// Whom an exchange's [`Reply::Unreachable`] or [`Reply::Unauthorized`] failed, so that the
/// caller can give its own, fuller error there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affected {
    /// Nobody, or nobody new.
    Nothing,
    /// The connection, which could not start.
    Connection,
    /// This request.
    Request(RequestId),
}

/// Whether the server refused a message carrying a session id because it no longer knows
/// that session, so that a new session should be started (once) and the message sent again:
/// a 404, as the specification says, or a 400 whose body names the session, as servers built
/// on the TypeScript SDK answer after a restart ("Bad Request: No valid session ID
/// provided"). Any other refusal is the message's own failure.
///
/// ```
/// use mcp_proto::http::session_lost;
/// let body = br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#;
/// assert!(session_lost(400, body));
/// assert!(session_lost(404, b""));
/// assert!(!session_lost(400, b"Bad Request: unknown tool"));
/// assert!(!session_lost(500, b"session store unavailable"));
/// ```
pub fn session_lost(status: u16, body: &[u8]) -> bool {
    let needle = b"session";
    match status {
        404 => true,
        400 => (body.windows(needle.len())).any(|window| window.eq_ignore_ascii_case(needle)),
        _ => false,
    }
}
