//! The HTTP transports' rules, sans-IO: [`HttpConnection`] wraps a [`Connection`] and decides
//! which HTTP exchanges carry its messages (Streamable HTTP, or the 2024-11-05 HTTP+SSE
//! transport), which headers each carries, and what each answer means: sessions, the
//! handshake's order, fallback, resumption budgets, what a 404 means, and in the stateless era
//! which era a refused probe means and the headers that mirror each request.
//!
//! Beside it, in `streamable/`:
//!
//! - `exchanges.rs`: what it asks for and hears back: [`Exchange`], [`Reply`] and their parts
//! - `outgoing.rs`: how each message goes out, and with which headers
//! - `replies.rs`: what each reply means: statuses, sessions, fallback, relisting
//! - `streams.rs`: the event streams: an answer's resumed, the server's own, HTTP+SSE's
//! - `pieces.rs`: one message arriving in pieces, parsed as they come

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::machines::connection::{Config, Connection, Event, Sent, ServerRequestId};
use crate::model::error::{CloseReason, RequestError, SendError};
use crate::model::headers::{RejectedTool, ToolHeaders};
use crate::model::request::{Request, RequestId};
use crate::model::types::ServerInfo;
use crate::model::versions::Era;
use crate::wire::jsonrpc::RpcError;

mod exchanges;
mod outgoing;
mod pieces;
mod replies;
mod streams;

use pieces::{Message, Pieces};

/// A JSON body or event data longer than this is best handed over in pieces
/// ([`Reply::Part`]), which are then parsed as they arrive: the bound from which lines are
/// parsed as they arrive over stdio. Below it, holding the message and parsing it whole is
/// faster; above it, the message's bytes would double a large result's memory.
pub const PIECES_FROM: usize = crate::wire::framing::PARSE_FROM;

/// How many times in a row one answer's event stream is resumed from the same event before
/// the request fails.
const MAX_RESUMES: u32 = 5;

/// How long to wait before reconnecting an event stream when the server gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// How many GETs for the server's own stream may fail in a row before we stop asking.
const LISTEN_FAILURES: u32 = 3;

/// A server stream shorter than this does not reset the count of failures, so a server
/// that ends it as soon as it opens is not asked again every second for ever.
const SHORT_STREAM: Duration = Duration::from_secs(1);

pub use exchanges::{
    Affected, Answer, Exchange, ExchangeId, Get, HttpTransport, Post, Reply, session_lost,
};

/// How the message endpoint is reached.
enum Mode {
    /// [`HttpTransport::Auto`] before the first answer to `initialize`: a refusal of it may
    /// mean an HTTP+SSE server.
    Probing,
    Streamable,
    Legacy {
        /// Where to POST, once the stream has said.
        endpoint: Option<String>,
        /// Messages waiting for the endpoint.
        queued: Vec<(Vec<u8>, Sent)>,
    },
}

/// What an exchange in flight is for.
enum Purpose {
    Post {
        url: String,
        body: Vec<u8>,
        sent: Sent,
        /// The session id it carried.
        session: Option<String>,
        legacy: bool,
    },
    /// Resumes the event stream carrying this request's answer, from this event.
    Resume {
        request: RequestId,
        from: Option<String>,
    },
    /// The server's own stream.
    Listen,
    /// HTTP+SSE's one stream.
    LegacyStream,
}

/// The GET stream for the server's own messages, once opened.
#[derive(Default)]
struct Listener {
    exchange: Option<ExchangeId>,
    last_event_id: Option<String>,
    delay: Duration,
    failures: u32,
    opened: Option<Instant>,
    /// The server offers none, or it failed too often: not asked again in this session.
    stopped: bool,
}

/// A client [`Connection`] over HTTP. The caller performs the exchanges it asks for and feeds
/// back what each brought; it never looks inside a message.
///
/// # The run loop
///
/// As [`Connection`]'s, with exchanges in place of lines:
/// 1. Start every [`Exchange`] from [`poll_exchange`](Self::poll_exchange): a POST or a GET
///    with the protocol headers given (plus the caller's own), or stop one.
/// 2. Handle every event from [`poll_event`](Self::poll_event), as [`Connection::poll_event`]'s.
/// 3. Feed every fact an exchange brings, in order, to [`handle_reply`](Self::handle_reply),
///    and [`Reply::Done`] when it ends; commands ([`request`](Self::request),
///    [`respond`](Self::respond), [`cancel`](Self::cancel), [`close`](Self::close)) and
///    deadlines ([`poll_timeout`](Self::poll_timeout), [`handle_timeout`](Self::handle_timeout))
///    go to it as to a [`Connection`].
/// 4. When the connection has closed, end the session with a DELETE carrying
///    [`session_end`](Self::session_end)'s headers, if it gives any.
///
/// The rules it keeps: `Mcp-Session-Id` and `MCP-Protocol-Version` on every message after the
/// handshake; nothing is sent while `notifications/initialized` is in flight (servers built
/// on the Python SDK refuse requests that overtake it); the GET stream for the server's own
/// messages opens once `initialize`'s exchange and `notifications/initialized`'s are over
/// (from the last event id of a stream that answered `initialize`); a refusal of the session
/// ([`session_lost`]) starts a new session and sends the refused request again, once, after
/// the new `notifications/initialized`; a new session refused before it answered anything
/// ends the connection; an answer's event stream cut short is resumed with `Last-Event-ID`
/// after the server's `retry` (1 s without one), at most 5 times
/// in a row without a new event; under [`HttpTransport::Auto`], `initialize` refused with 400,
/// 404 or 405 falls back to HTTP+SSE.
///
/// # The stateless era
///
/// Under [`Protocol::Auto`](crate::Protocol::Auto) the first POST is the core's
/// `server/discover` probe. A 2xx answer goes to the core, which decides. A refusal whose body
/// is a stateless-era JSON-RPC error (-32020, -32021, -32022 in a 400, 404 or 405; -32601 in a
/// 404) is the probe's answer: the server is stateless, and a -32022 has the probe sent again
/// in the revision it names, never a fallback. Any other 4xx (an empty body, or -32603 in a 400
/// as real legacy servers answer) means the handshake era: `initialize` follows, and its own
/// refusal may still fall back to HTTP+SSE. 401 and 403 are never evidence of an era.
///
/// In the stateless era every POST carries `MCP-Protocol-Version` (the `_meta`'s), `Mcp-Method`,
/// `Mcp-Name` for `tools/call`, `prompts/get` and `resources/read` (base64-encoded when unsafe),
/// and for `tools/call` the `Mcp-Param-*` headers of the tool's `x-mcp-header` annotations, as
/// learnt from the `tools/list` results relayed (a tool not listed yet gets none). A tool whose
/// annotations are invalid is removed from the `tools/list` result the caller sees and named,
/// with the reason, in [`rejected_tools`](Self::rejected_tools). A `tools/call` refused with
/// -32020 has the tools listed once and is sent again with the headers now known; a second
/// -32020 is its answer. Any JSON-RPC error inside a refusal answers its request, typed. There
/// is no session id (one the server sends is ignored), no GET stream, no `Last-Event-ID`: a
/// stream that breaks before the answer fails its request, and [`session_end`](Self::session_end)
/// gives nothing. Cancelling a request stops its exchange ([`Exchange::Cancel`]); no
/// `notifications/cancelled` is POSTed.
pub struct HttpConnection {
    connection: Connection,
    /// The configured URL: the MCP endpoint, or HTTP+SSE's event stream.
    url: String,
    mode: Mode,
    /// Why the Streamable HTTP `initialize` was refused, once we fell back to HTTP+SSE.
    fell_back: Option<String>,
    session: Option<String>,
    /// A new session is being set up after the server forgot the last one; until its
    /// `notifications/initialized` goes, other messages wait in `resend`.
    restarting: bool,
    /// A new session was started and has answered no request yet: if the server refuses it
    /// too, the connection fails rather than start another.
    restarted_unanswered: bool,
    /// Messages for the new session, sent once its `notifications/initialized` is over.
    resend: Vec<(Vec<u8>, Sent)>,
    /// Requests already sent again in a new session: a second refusal fails them.
    resent: BTreeSet<RequestId>,
    /// The `initialize` in flight: its request id and exchange.
    initialize: Option<(RequestId, ExchangeId)>,
    /// Where the server's own stream starts, when an event stream answered `initialize`
    /// with an event id (and how long to wait first).
    listen_from: Option<(Option<String>, Duration)>,
    listener: Option<Listener>,
    /// The exchange carrying `notifications/initialized`: nothing else is sent until it is over.
    gate: Option<ExchangeId>,
    exchanges: BTreeMap<ExchangeId, Purpose>,
    next_exchange: u64,
    /// The exchange carrying each request's answer.
    by_request: BTreeMap<RequestId, ExchangeId>,
    /// Messages arriving in pieces, by exchange.
    pieces: BTreeMap<ExchangeId, Pieces>,
    /// POSTs whose JSON body or event stream carried a response: it answered its request, even
    /// when the answer (`input_required`) sends the request again under another exchange.
    answered: BTreeSet<ExchangeId>,
    /// How often each request's answer stream has been resumed in a row from the same event,
    /// and that event's id.
    resumes: BTreeMap<RequestId, (u32, Option<String>)>,
    /// Stateless era: each tool's `Mcp-Param-*` headers, from the `tools/list` results relayed.
    tools: ToolHeaders,
    /// Stateless era: `tools/call`s refused with -32020 (HeaderMismatch), waiting for the
    /// `tools/list` of ours (by its id) that may teach their headers, with the refusal to
    /// fail them with if it does not.
    relisting: BTreeMap<RequestId, HeaderRetry>,
    /// Stateless era: calls already sent again after a -32020; a second one fails them.
    header_retried: BTreeSet<RequestId>,
    /// The time of the latest input, for what [`poll_event`](Self::poll_event) feeds the
    /// connection.
    latest: Instant,
    outgoing: VecDeque<Exchange>,
}

/// A `tools/call` to send again once the tools are listed anew.
struct HeaderRetry {
    body: Vec<u8>,
    sent: Sent,
    /// The server's -32020 answer, as a message for the connection.
    refusal: Vec<u8>,
}

impl std::fmt::Debug for HttpConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConnection")
            .field("connection", &self.connection)
            .field("url", &self.url)
            .field("session", &self.session)
            .field("exchanges", &self.exchanges.len())
            .finish_non_exhaustive()
    }
}

impl HttpConnection {
    /// Starts a connection to `url` (the MCP endpoint, or HTTP+SSE's event stream, as the
    /// caller writes URLs: it appears in error messages) over `transport`.
    pub fn new(now: Instant, config: Config, url: String, transport: HttpTransport) -> Self {
        let mode = match transport {
            HttpTransport::Auto => Mode::Probing,
            HttpTransport::Streamable => Mode::Streamable,
            HttpTransport::Sse => Mode::Legacy {
                endpoint: None,
                queued: Vec::new(),
            },
        };
        let mut connection = Connection::new(now, config);
        connection.tag_requests();
        let mut http = Self {
            connection,
            url,
            mode,
            fell_back: None,
            session: None,
            restarting: false,
            restarted_unanswered: false,
            resend: Vec::new(),
            resent: BTreeSet::new(),
            initialize: None,
            listen_from: None,
            listener: None,
            gate: None,
            exchanges: BTreeMap::new(),
            next_exchange: 0,
            by_request: BTreeMap::new(),
            pieces: BTreeMap::new(),
            answered: BTreeSet::new(),
            resumes: BTreeMap::new(),
            tools: ToolHeaders::default(),
            relisting: BTreeMap::new(),
            header_retried: BTreeSet::new(),
            latest: now,
            outgoing: VecDeque::new(),
        };
        if transport == HttpTransport::Sse {
            http.open_legacy_stream();
        }
        http
    }

    // ----- what it knows -----

    /// The era spoken, as [`Connection::era`].
    pub fn era(&self) -> Option<Era> {
        self.connection.era()
    }

    /// What the server said of itself, once ready, as [`Connection::server_info`].
    pub fn server_info(&self) -> Option<&ServerInfo> {
        self.connection.server_info()
    }

    // ----- commands, as the connection's -----
    //
    // Forwarded one by one, never by handing out the connection within: its messages must
    // leave through `poll_exchange`, which keeps the HTTP rules (the gate, the session).

    /// Sends a request, as [`Connection::request`].
    pub fn request<T>(
        &mut self,
        now: Instant,
        request: Request<T>,
    ) -> Result<RequestId, SendError> {
        self.connection.request(now, request)
    }

    /// Answers a server request, as [`Connection::respond`].
    pub fn respond(
        &mut self,
        now: Instant,
        id: ServerRequestId,
        result: Result<Value, RpcError>,
    ) -> bool {
        self.connection.respond(now, id, result)
    }

    /// Sends the server a notification of ours, as [`Connection::notify`].
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> bool {
        self.connection.notify(method, params)
    }

    /// Gives up on a request, as [`Connection::cancel`] (in the stateless era, by stopping
    /// its exchange).
    pub fn cancel(&mut self, now: Instant, id: RequestId) -> bool {
        self.connection.cancel(now, id)
    }

    /// Ends the connection for a reason only the transport knows, as [`Connection::fail`].
    pub fn fail(&mut self, reason: CloseReason) {
        self.connection.fail(reason);
    }

    /// Ends the connection, as [`Connection::close`]; then end the session
    /// ([`session_end`](Self::session_end)).
    pub fn close(&mut self) {
        self.connection.close();
    }

    /// Expires every deadline at or before `now`, as [`Connection::handle_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.connection.handle_timeout(now);
    }

    /// The earliest deadline, as [`Connection::poll_timeout`].
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.connection.poll_timeout()
    }

    // ----- outputs -----

    /// The next exchange to start or stop.
    #[must_use]
    pub fn poll_exchange(&mut self) -> Option<Exchange> {
        self.take_transmits();
        self.outgoing.pop_front()
    }

    /// The connection's next event, as [`Connection::poll_event`].
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        loop {
            let event = self.connection.poll_event()?;
            if let Event::Response { id, result } = &event
                && let Some(retry) = self.relisting.remove(id)
            {
                // Our own listing, for a call's headers: whatever it brought, the call goes
                // again with what is known now, or fails with the server's refusal.
                match result {
                    Ok(_) => self.transmit(retry.body, retry.sent),
                    Err(_) => self.connection.handle_message(self.latest, &retry.refusal),
                }
                continue;
            }
            return Some(self.observe(event));
        }
    }

    /// Keeps the transport's state in step with an event on its way to the caller.
    fn observe(&mut self, event: Event) -> Event {
        match &event {
            Event::Ready(_) => {
                if matches!(self.mode, Mode::Probing) {
                    self.mode = Mode::Streamable;
                }
                // The probe's refusal explains a handshake that fails both ways, not a later
                // failure of the HTTP+SSE stream.
                self.fell_back = None;
                self.open_listener();
            }
            Event::Response {
                result: Err(RequestError::Closed(_)),
                ..
            } => {}
            Event::Response { id, result } => {
                if matches!(result, Ok(_) | Err(RequestError::Remote(_))) {
                    self.restarted_unanswered = false;
                }
                // Its exchange has done its job: stopping it closes the stream.
                if let Some(exchange) = self.by_request.remove(id) {
                    self.stop_exchange(exchange);
                }
                self.resumes.remove(id);
                self.resent.remove(id);
                self.header_retried.remove(id);
            }
            _ => {}
        }
        event
    }

    /// The tools the last `tools/list` (in the stateless era) left out of its result because
    /// their `x-mcp-header` annotations are invalid, and why: the revision asks clients to
    /// drop such tools and to warn about each. Read it after a listing ends; a new listing
    /// (its first page) replaces it.
    pub fn rejected_tools(&self) -> &[RejectedTool] {
        self.tools.rejected()
    }

    /// The headers of the `DELETE` that ends the session on close, if there is one to end.
    /// Call it once the connection has closed.
    pub fn session_end(&mut self) -> Option<Vec<(String, String)>> {
        if matches!(self.mode, Mode::Legacy { .. }) || self.session.is_none() {
            return None;
        }
        let headers = self.headers();
        self.session = None;
        Some(headers)
    }

    // ----- inputs -----

    /// Feeds one fact about exchange `id`, in the order the exchange saw them. Facts about an
    /// exchange that was stopped, or is over, are ignored. Returns whom a
    /// [`Reply::Unreachable`] or [`Reply::Unauthorized`] failed.
    pub fn handle_reply(&mut self, now: Instant, id: ExchangeId, reply: Reply) -> Affected {
        self.latest = now;
        if !self.exchanges.contains_key(&id) {
            return Affected::Nothing;
        }
        let message = match reply {
            Reply::Part(bytes) => {
                let config = self.connection.config();
                let (limit, keep) = (config.max_line_len, config.max_listed.saturating_add(1));
                let pieces = (self.pieces.entry(id)).or_insert_with(|| Pieces::new(limit, keep));
                if let Some((size, answered)) = pieces.push(bytes) {
                    // Over the limit and naming whom it answers: that fails now, not when the
                    // rest of it has come.
                    self.connection.handle_overflowing(limit, size, &answered);
                }
                return Affected::Nothing;
            }
            Reply::Message(bytes) => match self.pieces.remove(&id) {
                Some(mut pieces) => {
                    // Crossing the limit with the last piece, it is reported whole at once.
                    let _ = pieces.push(bytes);
                    pieces.finish()
                }
                None => Message::Bytes(bytes),
            },
            reply => {
                self.pieces.remove(&id);
                return self.exchange_reply(now, id, reply);
            }
        };
        if matches!(self.exchanges.get(&id), Some(Purpose::Post { .. })) {
            self.post_message(now, id, message);
        } else {
            self.handle_message(now, message);
        }
        Affected::Nothing
    }
}
