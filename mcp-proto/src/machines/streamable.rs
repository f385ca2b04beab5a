//! The HTTP transports' rules, sans-IO: [`HttpConnection`] wraps a [`Connection`] and decides
//! which HTTP exchanges carry its messages (Streamable HTTP, or the 2024-11-05 HTTP+SSE
//! transport), which headers each carries, and what each answer means: sessions, the
//! handshake's order, fallback, resumption budgets, what a 404 means, and in the stateless era
//! which era a refused probe means and the headers that mirror each request.
//!
//! Beside it, in `streamable/`:
//!
//! - `streams.rs`: the event streams: an answer's resumed, the server's own, HTTP+SSE's
//! - `pieces.rs`: one message arriving in pieces, parsed as they come

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::machines::connection::{Config, Connection, Event, Outgoing, Sent, ServerRequestId};
use crate::model::error::{CloseReason, RequestError, SendError};
use crate::model::headers::{RejectedTool, ToolHeaders, encode_header_value};
use crate::model::request::{Request, RequestId};
use crate::model::types::ServerInfo;
use crate::model::versions::Era;
use crate::wire::jsonrpc::RpcError;

mod pieces;
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
pub struct ExchangeId(u64);

/// An exchange to start, or to stop, drained with [`HttpConnection::poll_exchange`].
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

/// A fact about an exchange, fed with [`HttpConnection::handle_reply`], in the order seen.
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
    /// be held whole ([`PIECES_FROM`]): pieces are parsed as they come. A
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
    /// A body or an event over [`Config::max_line_len`]; `size` is what had come of it.
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

    /// [`handle_reply`](Self::handle_reply) for anything but a message.
    fn exchange_reply(&mut self, now: Instant, id: ExchangeId, reply: Reply) -> Affected {
        let Some(purpose) = self.exchanges.get(&id) else {
            return Affected::Nothing;
        };
        match purpose {
            Purpose::Post { .. } => self.post_reply(now, id, reply),
            Purpose::Resume { request, from } => {
                let (request, from) = (*request, from.clone());
                self.resume_reply(now, id, request, from, reply)
            }
            Purpose::Listen => {
                self.listen_reply(now, id, reply);
                Affected::Nothing
            }
            Purpose::LegacyStream => self.legacy_reply(reply),
        }
    }

    // ----- internals -----

    fn post_reply(&mut self, now: Instant, exchange: ExchangeId, reply: Reply) -> Affected {
        let Some(Purpose::Post {
            url,
            sent,
            session,
            legacy,
            ..
        }) = self.exchanges.get(&exchange)
        else {
            return Affected::Nothing;
        };
        let (url, sent, session, legacy) = (url.clone(), sent.clone(), session.clone(), *legacy);
        let request = match sent {
            Sent::Initialize(id) | Sent::Request(id, _) => Some(id),
            _ => None,
        };
        let initialize = matches!(sent, Sent::Initialize(_));
        match reply {
            Reply::Unreachable(detail) => self.post_failed(now, &url, sent, detail, true),
            Reply::Unauthorized(why) => match sent {
                Sent::Initialize(_) | Sent::Discover { .. } => {
                    self.connection.fail(CloseReason::Transport(why));
                    Affected::Connection
                }
                Sent::Request(id, _) => {
                    let error = RequestError::Transport(why);
                    self.connection.fail_request(now, id, error);
                    Affected::Request(id)
                }
                _ => Affected::Nothing,
            },
            Reply::Refused {
                status,
                body,
                detail,
            } => {
                let probe = matches!(sent, Sent::Discover { probe: true, .. });
                // In the stateless era any JSON-RPC error answers the request; before the
                // verdict only one no handshake-era server sends.
                let any = self.stateless() && !probe;
                let answer = (any || matches!(sent, Sent::Discover { .. }))
                    .then(|| self.refusal_answer(exchange, status, &body, any))
                    .flatten();
                if let Some(answer) = answer {
                    if !self.relist_for_headers(now, exchange, &answer) {
                        self.handle_message(now, Message::Bytes(answer));
                    }
                } else if probe && (400..500).contains(&status) && !matches!(status, 401 | 403) {
                    // A handshake-era server refusing a request outside a session.
                    self.connection
                        .probe_refused(now, format!("HTTP status {status}"));
                } else if let Some(session) = session {
                    if session_lost(status, &body) {
                        self.session_refused(now, exchange, &session, &detail);
                    } else {
                        self.post_failed(now, &url, sent, detail, false);
                    }
                } else if initialize
                    && matches!(self.mode, Mode::Probing)
                    && matches!(status, 400 | 404 | 405)
                {
                    self.fall_back(exchange, format!("POST {url}: {detail}"));
                } else {
                    self.post_failed(now, &url, sent, detail, false);
                }
                Affected::Nothing
            }
            Reply::Head { session } => {
                if initialize && !legacy && session.is_some() {
                    self.session = session;
                }
                Affected::Nothing
            }
            Reply::Message(_) | Reply::Part(_) | Reply::PartsDropped => Affected::Nothing,
            Reply::BodyEnded(_) if self.answered.contains(&exchange) => Affected::Nothing,
            // The end of initialize's answered stream still tells where the server's own
            // stream is to take over.
            Reply::StreamEnded { .. } if self.answered.contains(&exchange) && !initialize => {
                Affected::Nothing
            }
            Reply::BodyEnded(detail) => {
                let why = format!("POST {url}: {detail}");
                if let Some(id) = request {
                    if initialize && self.handshaking() {
                        self.connection.fail(CloseReason::Transport(why));
                    } else if self.by_request.contains_key(&id) {
                        let error = RequestError::Transport(why);
                        self.connection.fail_request(now, id, error);
                    }
                }
                Affected::Nothing
            }
            Reply::Failed(detail) => self.post_failed(now, &url, sent, detail, false),
            Reply::TooLarge { size } => {
                let limit = self.connection.config().max_line_len;
                let error = RequestError::ResponseTooLarge { size, limit };
                match sent {
                    Sent::Initialize(_) if self.handshaking() => {
                        let reason = format!("POST {url}: initialize failed: {error}");
                        self.connection.fail(CloseReason::Transport(reason));
                    }
                    Sent::Request(id, _) => _ = self.connection.fail_request(now, id, error),
                    _ => {}
                }
                Affected::Nothing
            }
            Reply::StreamEnded {
                why,
                last_event_id,
                retry,
            } => {
                if let Some(id) = request {
                    let why = format!("POST {url}: {why}");
                    self.stream_ended(now, id, last_event_id, retry, why);
                }
                Affected::Nothing
            }
            Reply::Endpoint(_) => Affected::Nothing,
            Reply::Done => {
                self.exchanges.remove(&exchange);
                self.answered.remove(&exchange);
                if self.gate == Some(exchange) {
                    self.gate = None;
                    // The new session's handshake is over: what waited for it goes now.
                    for (message, sent) in std::mem::take(&mut self.resend) {
                        self.transmit(message, sent);
                    }
                    self.open_listener();
                }
                if self.initialize.is_some_and(|(_, init)| init == exchange) {
                    self.initialize = None;
                    self.open_listener();
                }
                Affected::Nothing
            }
        }
    }

    /// A POST got no usable answer: `initialize`'s failure ends a connection still starting,
    /// a request's fails that request.
    fn post_failed(
        &mut self,
        now: Instant,
        url: &str,
        sent: Sent,
        detail: String,
        unreachable: bool,
    ) -> Affected {
        let sentence = format!("POST {url}: {detail}");
        match sent {
            Sent::Initialize(_) | Sent::Discover { .. } if self.handshaking() => {
                self.connection.fail(CloseReason::Transport(sentence));
                if unreachable {
                    return Affected::Connection;
                }
            }
            Sent::Request(id, _) => {
                let error = RequestError::Transport(sentence);
                self.connection.fail_request(now, id, error);
            }
            _ => {}
        }
        Affected::Nothing
    }

    /// A message answering a POST: a response marks the POST answered, and a stateless-era
    /// `tools/list` result teaches the tools' headers.
    fn post_message(&mut self, now: Instant, exchange: ExchangeId, message: Message) {
        if is_response(&message) {
            self.answered.insert(exchange);
        }
        let message = match (self.listing_page(exchange), message) {
            (Some(first), Message::Bytes(bytes)) => Message::Bytes(self.tools.relay(first, bytes)),
            (Some(first), Message::Parsed(Ok(mut value))) => {
                if let Some(result) = value.get_mut("result") {
                    self.tools.learn(first, result);
                }
                Message::Parsed(Ok(value))
            }
            (_, message) => message,
        };
        self.handle_message(now, message);
    }

    /// Whether `exchange` carries a stateless-era `tools/list`, and if so whether it asks for
    /// the first page (no cursor), which starts a new listing.
    fn listing_page(&self, exchange: ExchangeId) -> Option<bool> {
        let Some(Purpose::Post {
            body,
            sent: Sent::Request(_, Some(outgoing)),
            ..
        }) = self.exchanges.get(&exchange)
        else {
            return None;
        };
        if outgoing.method != "tools/list" {
            return None;
        }
        let request: Value = serde_json::from_slice(body).ok()?;
        Some(request["params"].get("cursor").is_none())
    }

    /// Whether the stateless era is spoken (no session, no GET stream, no resumption).
    fn stateless(&self) -> bool {
        self.connection.era() == Some(Era::Stateless)
    }

    /// The JSON-RPC error in the body of a refusal of `exchange`'s POST, as the answer to its
    /// request: any error when `any`, else only one of the stateless era's (-32020, -32021,
    /// -32022 in a 400, 404 or 405, or -32601 in a 404). A POST carries one request, so the
    /// error answers it whatever id it names (servers often write `null` there).
    fn refusal_answer(
        &self,
        exchange: ExchangeId,
        status: u16,
        body: &[u8],
        any: bool,
    ) -> Option<Vec<u8>> {
        let Some(Purpose::Post { body: request, .. }) = self.exchanges.get(&exchange) else {
            return None;
        };
        let mut answer: Value = serde_json::from_slice(body).ok()?;
        let code = answer.get("error")?.get("code")?.as_i64()?;
        let modern = matches!(
            code,
            RpcError::HEADER_MISMATCH
                | RpcError::MISSING_REQUIRED_CLIENT_CAPABILITY
                | RpcError::UNSUPPORTED_PROTOCOL_VERSION
        ) && matches!(status, 400 | 404 | 405)
            || (status, code) == (404, RpcError::METHOD_NOT_FOUND);
        if !any && !modern {
            return None;
        }
        let id = serde_json::from_slice::<Value>(request)
            .ok()?
            .get("id")?
            .clone();
        answer.as_object_mut()?.insert("id".to_owned(), id);
        serde_json::to_vec(&answer).ok()
    }

    /// A `tools/call` refused with -32020 (HeaderMismatch) for the first time: the tool's
    /// `Mcp-Param-*` headers may have changed, or it was never listed, so list the tools (as
    /// the revision says) and send the call again once the listing is in. Returns whether it
    /// did; otherwise the refusal is the call's answer.
    fn relist_for_headers(&mut self, now: Instant, exchange: ExchangeId, answer: &[u8]) -> bool {
        let Some(Purpose::Post { body, sent, .. }) = self.exchanges.get(&exchange) else {
            return false;
        };
        let Sent::Request(id, Some(outgoing)) = sent else {
            return false;
        };
        let mismatch = serde_json::from_slice::<Value>(answer)
            .ok()
            .and_then(|answer| answer["error"]["code"].as_i64())
            == Some(RpcError::HEADER_MISMATCH);
        if outgoing.method != "tools/call" || !mismatch || !self.header_retried.insert(*id) {
            return false;
        }
        let retry = HeaderRetry {
            body: body.clone(),
            sent: sent.clone(),
            refusal: answer.to_vec(),
        };
        match self.connection.request(now, Request::list_tools(None)) {
            Ok(listing) => {
                self.relisting.insert(listing, retry);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the connection is still opening a session (the first, or a new one).
    fn handshaking(&self) -> bool {
        self.connection.server_info().is_none()
    }

    /// A message from the server, from any exchange.
    fn handle_message(&mut self, now: Instant, message: Message) {
        // It answered as a Streamable HTTP server: no falling back now.
        if matches!(self.mode, Mode::Probing) {
            self.mode = Mode::Streamable;
        }
        match message {
            Message::Bytes(bytes) => self.connection.handle_message(now, &bytes),
            Message::Parsed(parsed) => self.connection.handle_parsed(now, parsed),
            Message::Unreadable { error, id } => self.connection.handle_unreadable(now, &id, error),
        }
        // Taken at once, so that `notifications/initialized` holds the gate before anything
        // else this exchange reports (its end opens the listener).
        self.take_transmits();
    }

    /// Takes the connection's messages as exchanges, up to `notifications/initialized`.
    fn take_transmits(&mut self) {
        while self.gate.is_none()
            && let Some((message, sent)) = self.connection.poll_transmit_with()
        {
            self.transmit(message, sent);
        }
    }

    /// The server refused a message for carrying `session`, which it no longer knows.
    fn session_refused(
        &mut self,
        now: Instant,
        exchange: ExchangeId,
        session: &str,
        refusal: &str,
    ) {
        // The exchange stays known until it is over: its end may open the gate.
        let Some(Purpose::Post { body, sent, .. }) = self.exchanges.get(&exchange) else {
            return;
        };
        let (body, sent) = (body.clone(), sent.clone());
        let request = match sent {
            Sent::Initialize(id) | Sent::Request(id, _) => Some(id),
            _ => None,
        };
        // Sent again in a new session and refused again: the refusal is not about the
        // session, and another restart would only loop.
        if let Some(id) = request
            && !self.resent.insert(id)
        {
            let why = format!("POST {}: {refusal}, in a new session too", self.url);
            self.connection
                .fail_request(now, id, RequestError::Transport(why));
            return;
        }
        if self.session.as_deref() == Some(session) {
            // A new session refused before it answered anything: another would go round for
            // ever (`notifications/initialized` opens each).
            if self.restarted_unanswered {
                let why = format!(
                    "POST {}: {refusal}, in a new session that had answered nothing yet",
                    self.url
                );
                self.connection.fail(CloseReason::Transport(why));
                return;
            }
            self.restarted_unanswered = true;
            self.session = None;
            self.restarting = true;
            if let Some(old) = self.listener.take().and_then(|listener| listener.exchange) {
                self.stop_exchange(old);
            }
            self.connection.restart_session(now);
        }
        if request.is_some() {
            self.transmit(body, sent);
        }
    }

    /// `initialize` refused as an HTTP+SSE server would: speak that from now on.
    fn fall_back(&mut self, exchange: ExchangeId, why: String) {
        let Some(Purpose::Post { body, sent, .. }) = self.exchanges.get(&exchange) else {
            return;
        };
        let queued = vec![(body.clone(), sent.clone())];
        self.fell_back = Some(why);
        self.initialize = None;
        self.mode = Mode::Legacy {
            endpoint: None,
            queued,
        };
        self.open_legacy_stream();
    }

    /// Sends one message from the connection: one POST, or held until a new session or
    /// HTTP+SSE's endpoint is ready for it.
    fn transmit(&mut self, mut message: Vec<u8>, sent: Sent) {
        if message.last() == Some(&b'\n') {
            message.pop();
        }
        match sent {
            // Over HTTP the stateless era cancels by closing the request's stream.
            Sent::Cancelled(id) if self.stateless() => {
                if let Some(exchange) = self.by_request.remove(&id) {
                    self.stop_exchange(exchange);
                }
                return;
            }
            // The answer to the new `initialize` has come: the new session is ready.
            Sent::Initialized => self.restarting = false,
            // Issued before the session was lost, it would go out with no session at all.
            Sent::Request(..) | Sent::Other if self.restarting => {
                self.resend.push((message, sent));
                return;
            }
            _ => {}
        }
        let (url, legacy) = match &mut self.mode {
            Mode::Legacy {
                endpoint: Some(url),
                ..
            } => (url.clone(), true),
            Mode::Legacy { queued, .. } => return queued.push((message, sent)),
            Mode::Probing | Mode::Streamable => (self.url.clone(), false),
        };
        self.post(url, message, sent, legacy);
    }

    fn post(&mut self, url: String, body: Vec<u8>, sent: Sent, legacy: bool) {
        let mut headers = match &sent {
            _ if legacy => Vec::new(),
            Sent::Discover { version, .. } => stateless_headers(version, "server/discover", None),
            Sent::Request(_, Some(outgoing)) => self.request_headers(outgoing),
            _ => self.headers(),
        };
        headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
        headers.push((
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ));
        let answer = match sent {
            Sent::Initialize(_) | Sent::Request(..) | Sent::Discover { .. } if legacy => {
                Answer::OnTheStream
            }
            Sent::Initialize(_) | Sent::Request(..) | Sent::Discover { .. } => Answer::InResponse,
            Sent::Initialized | Sent::Cancelled(_) | Sent::Other => Answer::None,
        };
        let timeout = (answer == Answer::None).then_some(self.connection.config().request_timeout);
        let id = self.next_id();
        let session = if legacy { None } else { self.session.clone() };
        self.outgoing.push_back(Exchange::Post(Post {
            id,
            url: url.clone(),
            headers,
            body: body.clone(),
            answer,
            timeout,
        }));
        match &sent {
            Sent::Initialized => self.gate = Some(id),
            Sent::Initialize(request) => self.initialize = Some((*request, id)),
            Sent::Request(request, _) if !legacy => _ = self.by_request.insert(*request, id),
            _ => {}
        }
        let purpose = Purpose::Post {
            url,
            body,
            sent,
            session,
            legacy,
        };
        self.exchanges.insert(id, purpose);
    }

    /// The headers of a stateless-era request: the protocol version, `Mcp-Method`, `Mcp-Name`
    /// and, for `tools/call`, the `Mcp-Param-*` headers the tool's listing asked for (none for
    /// a tool not listed yet).
    fn request_headers(&self, outgoing: &Outgoing) -> Vec<(String, String)> {
        let name = outgoing.name.as_deref();
        let mut headers = stateless_headers(outgoing.version, &outgoing.method, name);
        if let (Some(name), Some(arguments)) = (name, &outgoing.arguments) {
            headers.extend(self.tools.headers(name, arguments));
        }
        headers
    }

    /// Stops an exchange: its stream closes, what it still brings is ignored.
    fn stop_exchange(&mut self, exchange: ExchangeId) {
        self.answered.remove(&exchange);
        self.pieces.remove(&exchange);
        if self.exchanges.remove(&exchange).is_some() {
            self.outgoing.push_back(Exchange::Cancel(exchange));
        }
    }

    fn next_id(&mut self) -> ExchangeId {
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        id
    }

    /// The session's headers for a message to the Streamable HTTP endpoint.
    fn headers(&self) -> Vec<(String, String)> {
        let mut headers = Vec::new();
        if let Some(session) = &self.session {
            headers.push(("Mcp-Session-Id".to_owned(), session.clone()));
        }
        if let Some(info) = self.connection.server_info() {
            let version = info.protocol_version.clone();
            headers.push(("MCP-Protocol-Version".to_owned(), version));
        }
        headers
    }
}

/// Whether `message` is a JSON-RPC response (a result or an error), whatever its id.
fn is_response(message: &Message) -> bool {
    let response = |value: &Value| value.get("result").is_some() || value.get("error").is_some();
    match message {
        Message::Bytes(bytes) => serde_json::from_slice::<Value>(bytes).is_ok_and(|v| response(&v)),
        Message::Parsed(parsed) => parsed.as_ref().is_ok_and(response),
        Message::Unreadable { .. } => true,
    }
}

/// `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`, `prompts/get`,
/// `resources/read`) `Mcp-Name`, encoded when it is not a safe header value.
fn stateless_headers(version: &str, method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut headers = vec![
        ("MCP-Protocol-Version".to_owned(), version.to_owned()),
        ("Mcp-Method".to_owned(), method.to_owned()),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name".to_owned(), encode_header_value(name)));
    }
    headers
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
