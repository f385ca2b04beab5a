//! `serve --listen`: the gateway over Streamable HTTP, one endpoint (`POST /mcp`) for hosts of
//! both eras. A handshake-era host gets a session (`Mcp-Session-Id`, issued on `initialize`)
//! with a server-role machine of its own; a stateless-era request gets a machine for itself.
//! Every request must bring the bearer token, and its `Host` and `Origin` must name this
//! address (DNS rebinding); bodies and open requests are bounded.
//!
//! A request is answered with JSON when its answer is the first thing to say; when something
//! relating to it comes first (progress, a form or `roots/list` asked of a session's host), and
//! the host accepts `text/event-stream`, the answer becomes an event stream that carries it
//! and ends with the answer. A stateless-era `subscriptions/listen` is such a stream that
//! stays open; a session's `GET` opens its standalone stream (list changes).
//!
//! Beside it, in `listen/`:
//!
//! - `clock.rs`: a coarse timer for hyper's header-read timeout
//! - `connections.rs`: at most `--max-connections` at once, one more answered 503
//! - `posted.rs`: a posted body read as one message, decoded once
//! - `token.rs`: the bearer token: made on first use, kept in the state folder

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_channel::Receiver;
use async_net::{TcpListener, TcpStream};
use futures_lite::future::FutureExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited, StreamBody};
use hyper::body::Frame;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use mcp_smol::proto::{META_PROTOCOL_VERSION, RpcError};

use crate::gateway::Gateway;
use crate::gateway::bridge::{Bridge, MAX_IN_FLIGHT, Message, Refused, Reply};
use crate::gateway::rounds::Rounds;
use clock::CoarseTimer;
use connections::Connections;
pub(crate) use connections::DEFAULT_MAX_CONNECTIONS;
use posted::{Posted, Unread};
use token::bearer;
pub(crate) use token::token;

mod clock;
mod connections;
mod posted;
mod token;

/// Where `serve --listen` without an address listens.
pub(crate) const DEFAULT_ADDRESS: &str = "127.0.0.1:8931";

/// The one MCP endpoint.
pub(crate) const ENDPOINT: &str = "/mcp";

/// The largest body taken; a larger one is refused with 413.
const BODY_LIMIT: usize = 4 * 1024 * 1024;

/// At most this many sessions at once; an `initialize` beyond them is refused with 503.
const MAX_SESSIONS: usize = 256;

/// At most this many stateless-era requests open at once; one more is refused with 429.
const MAX_STATELESS: usize = 256;

/// How long a stop waits for the calls in flight before failing them, unless
/// `MCP_CLI_STOP_GRACE_MS` says.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long a connection may sit between requests (or before its first) until it is closed,
/// unless `MCP_CLI_IDLE_TIMEOUT_MS` says: an idle one holds its buffers and a place under
/// `--max-connections`. A request's head must also have come whole by then.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the accept loop rests after a failed accept (out of file descriptors, say),
/// rather than trying again at once and for ever.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The session header, as the transport names it.
const SESSION_HEADER: &str = "mcp-session-id";

/// The stateless era's long-lived request.
const LISTEN: &str = "subscriptions/listen";

/// What must live as long as a request's answer (its machine's place among the open ones).
type Keep = Box<dyn Send>;

type Body = UnsyncBoxBody<Bytes, Infallible>;
type Response = hyper::Response<Body>;

/// The address `--listen` names: `PORT`, `HOST:PORT` or `[V6]:PORT`; `localhost` is
/// 127.0.0.1.
pub(crate) fn parse_address(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Some(port) = text.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse()
        .map_err(|_| format!("--listen {text}: not an address; give PORT, IP:PORT or [IPV6]:PORT"))
}

/// What the connections share.
struct Listener {
    gateway: Arc<Gateway>,
    token: String,
    bound: SocketAddr,
    sessions: Mutex<BTreeMap<String, Arc<Bridge>>>,
    /// The stateless-era hosts' calls parked between input rounds.
    rounds: Rounds,
    stateless_open: Arc<AtomicUsize>,
    /// The hosts' requests being answered, but for `subscriptions/listen` (which never ends
    /// on its own): what a stop waits for.
    in_flight: Arc<AtomicUsize>,
    /// Hyper's, for the time a request's head may take to arrive.
    timer: CoarseTimer,
    /// [`IDLE_TIMEOUT`], or what the environment says.
    idle_timeout: Duration,
    /// Closed when the gateway begins to stop: the streams that never end on their own do.
    stopping: Receiver<()>,
    /// Closed when a stop's grace has run out: the calls still open are failed.
    abort: Receiver<()>,
}

/// Serves hosts on `listener`, at most `max_connections` at once, until `stop` says, then
/// stops accepting, lets the requests in flight finish (or fails them after the grace) and
/// returns.
pub(crate) async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    token: String,
    max_connections: usize,
    stop: Receiver<()>,
) {
    // A task of its own: awaited in the command's future, which the executor polls whenever
    // any of its tasks wakes, the listener would try an `accept` twice for every call.
    let executor = gateway.executor.clone();
    let connections = Connections::new(max_connections);
    executor
        .spawn(accept(gateway, listener, token, connections, stop))
        .await;
}

async fn accept(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    token: String,
    open: Connections,
    stop: Receiver<()>,
) {
    let env = |key: &str| std::env::var(key).ok();
    let millis = |key: &str| env(key).and_then(|text| text.trim().parse().ok());
    let grace = millis("MCP_CLI_STOP_GRACE_MS").map_or(STOP_GRACE, Duration::from_millis);
    let idle_timeout =
        millis("MCP_CLI_IDLE_TIMEOUT_MS").map_or(IDLE_TIMEOUT, Duration::from_millis);
    let (aborting, abort) = async_channel::bounded::<()>(1);
    let (stopping, stopped) = async_channel::bounded::<()>(1);
    let bound = listener
        .local_addr()
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
    let executor = gateway.executor.clone();
    let (timer, ticking) = CoarseTimer::new();
    let _ticking = executor.spawn(ticking);
    let shared = Arc::new(Listener {
        timer,
        idle_timeout,
        rounds: Rounds::new(&env),
        gateway,
        token,
        bound,
        sessions: Mutex::default(),
        stateless_open: Arc::default(),
        in_flight: Arc::default(),
        stopping: stopped.clone(),
        abort,
    });
    let mut connections: Vec<async_executor::Task<()>> = Vec::new();
    loop {
        let accepted = async { Some(listener.accept().await) };
        let stop = async {
            let _ = stop.recv().await;
            None
        };
        match accepted.or(stop).await {
            Some(Ok((stream, _))) => {
                // An answer goes out in one write; nothing is gained by holding it back.
                let _ = stream.set_nodelay(true);
                connections.retain(|task| !task.is_finished());
                let Some(place) = open.enter() else {
                    open.refuse(&executor, stream);
                    continue;
                };
                let connection = connection(shared.clone(), stream, stopped.clone());
                connections.push(executor.spawn(async move {
                    connection.await;
                    // Given up once the connection's buffers are freed, not before.
                    drop(place);
                }));
            }
            Some(Err(error)) => {
                eprintln!("mcp-cli serve: accept: {error}");
                async_io::Timer::after(ACCEPT_PAUSE).await;
            }
            None => break,
        }
    }
    drop(listener);
    // Said as it stands: a person stopping an idle gateway is not told it waits for anything.
    match shared.in_flight.load(Ordering::SeqCst) {
        0 => eprintln!("mcp-cli serve: stopping; no requests in flight"),
        1 => eprintln!("mcp-cli serve: stopping; waiting for the 1 request in flight"),
        n => eprintln!("mcp-cli serve: stopping; waiting for the {n} requests in flight"),
    }
    // Each connection finishes what it is answering, then closes.
    drop(stopping);
    let all = async {
        for task in &mut connections {
            task.await;
        }
        true
    };
    let finished = all
        .or(async {
            async_io::Timer::after(grace).await;
            false
        })
        .await;
    if !finished {
        eprintln!("mcp-cli serve: grace over; failing the calls still open");
        drop(aborting);
        let ended = async {
            for task in connections.iter_mut().filter(|task| !task.is_finished()) {
                task.await;
            }
        };
        ended
            .or(async {
                async_io::Timer::after(Duration::from_secs(2)).await;
            })
            .await;
    }
    shared
        .sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

/// One TCP connection: HTTP/1.1 with keep-alive, closed gracefully when the gateway stops.
async fn connection(shared: Arc<Listener>, stream: TcpStream, stopped: Receiver<()>) {
    let (timer, idle_timeout) = (shared.timer.clone(), shared.idle_timeout);
    let service = hyper::service::service_fn(move |request| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(shared.handle(request).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(timer)
        // Armed whenever hyper waits for a request's head: before the first, and while a
        // kept-alive connection sits between requests.
        .header_read_timeout(idle_timeout)
        .serve_connection(
            mcp_smol::HyperIo::new(mcp_smol::ReadWhenReady::new(stream)),
            service,
        );
    let mut connection = std::pin::pin!(connection);
    let stop = async {
        let _ = stopped.recv().await;
        None
    };
    let ended = async { Some(connection.as_mut().await) }.or(stop).await;
    if ended.is_none() {
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    }
}

impl Listener {
    async fn handle(self: Arc<Self>, request: hyper::Request<Incoming>) -> Response {
        if let Some(refusal) = self.foreign(&request) {
            return refusal;
        }
        if !self.authorized(&request) {
            let mut response = plain(StatusCode::UNAUTHORIZED, "a bearer token is required");
            let challenge = HeaderValue::from_static("Bearer realm=\"mcp-cli\"");
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
            return response;
        }
        if request.uri().path() != ENDPOINT {
            return plain(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp");
        }
        match *request.method() {
            Method::POST => self.post(request).await,
            Method::GET => self.get(&request),
            Method::DELETE => self.delete(&request),
            _ => {
                let mut response = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "POST a message, GET a session's stream, or DELETE the session",
                );
                let allow = HeaderValue::from_static("GET, POST, DELETE");
                response.headers_mut().insert(header::ALLOW, allow);
                response
            }
        }
    }

    /// A 403 for a request whose `Host` or `Origin` is not this address: a web page that
    /// got a name of its own resolved to us (DNS rebinding) or a page of another origin.
    fn foreign(&self, request: &hyper::Request<Incoming>) -> Option<Response> {
        let text = |name: header::HeaderName| {
            let value = request.headers().get(name)?;
            Some(value.to_str().unwrap_or("\u{fffd}"))
        };
        let host = text(header::HOST);
        if !host.is_some_and(|host| self.is_us(host)) {
            let shown = host.unwrap_or("none");
            return Some(plain(
                StatusCode::FORBIDDEN,
                &format!("Host {shown} is not this gateway's address"),
            ));
        }
        let origin = text(header::ORIGIN)?;
        let ours = origin
            .strip_prefix("http://")
            .is_some_and(|o| self.is_us(o));
        (!ours).then(|| {
            plain(
                StatusCode::FORBIDDEN,
                &format!("Origin {origin} is not this gateway's"),
            )
        })
    }

    /// Whether `authority` (`name:port`) names this address: our IP (any IP when we listen
    /// on all of them) or `localhost`, and our port. Names other than `localhost` are
    /// refused: they are what DNS rebinding uses.
    fn is_us(&self, authority: &str) -> bool {
        let Some((name, port)) = authority.rsplit_once(':') else {
            return false;
        };
        if port.parse::<u16>() != Ok(self.bound.port()) {
            return false;
        }
        let ip = self.bound.ip();
        if name.eq_ignore_ascii_case("localhost") {
            return ip.is_loopback() || ip.is_unspecified();
        }
        let name = name.trim_start_matches('[').trim_end_matches(']');
        name.parse::<IpAddr>()
            .is_ok_and(|given| given == ip || ip.is_unspecified())
    }

    fn authorized(&self, request: &hyper::Request<Incoming>) -> bool {
        let given = request.headers().get(header::AUTHORIZATION);
        let given = given.and_then(|value| value.to_str().ok());
        let Some(token) = given.and_then(bearer) else {
            return false;
        };
        let (given, ours) = (token.trim().as_bytes(), self.token.as_bytes());
        // Every byte compared whatever the first difference, so timing tells nothing.
        given.len() == ours.len()
            && given.iter().zip(ours).fold(0, |all, (a, b)| all | (a ^ b)) == 0
    }

    async fn post(self: Arc<Self>, request: hyper::Request<Incoming>) -> Response {
        let (parts, body) = request.into_parts();
        let headers = parts.headers;
        let session = (headers.get(SESSION_HEADER)).and_then(|value| value.to_str().ok());
        let streams = accepts_events(&headers);
        let declared = (headers.get(header::CONTENT_LENGTH))
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > BODY_LIMIT as u64) {
            let message = format!("the body is over {BODY_LIMIT} bytes");
            return plain(StatusCode::PAYLOAD_TOO_LARGE, &message);
        }
        let body = match Limited::new(body, BODY_LIMIT).collect().await {
            Ok(body) => body.to_bytes(),
            Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
                let message = format!("the body is over {BODY_LIMIT} bytes");
                return plain(StatusCode::PAYLOAD_TOO_LARGE, &message);
            }
            Err(error) => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    &format!("reading the body: {error}"),
                );
            }
        };
        let message = match Posted::read(&body) {
            Ok(message) => message,
            Err(Unread::Batch) => {
                let error = rpc_error(Value::Null, -32600, "batches are not supported");
                return json_response(StatusCode::BAD_REQUEST, &error);
            }
            Err(Unread::NotAMessage(error)) => {
                let error = rpc_error(Value::Null, -32600, &error.to_string());
                return json_response(StatusCode::BAD_REQUEST, &error);
            }
            Err(Unread::Invalid(error)) => {
                let error = rpc_error(Value::Null, -32700, &format!("parse error: {error}"));
                return json_response(StatusCode::BAD_REQUEST, &error);
            }
        };
        let is_request = message.is_request();
        match session {
            Some(session) => {
                let bridge = self.session(session);
                let Some(bridge) = bridge else {
                    let error = rpc_error(Value::Null, -32001, "unknown session");
                    return json_response(StatusCode::NOT_FOUND, &error);
                };
                if !is_request {
                    return self.pass(&bridge, message);
                }
                self.forward(&bridge, message, Machine::Session, streams, None)
                    .await
            }
            None if is_request && message.method() == "initialize" => {
                self.initialize(message).await
            }
            // Without a session a notification or an answer has no machine to go to.
            None if !is_request => hyper::Response::builder()
                .status(StatusCode::ACCEPTED)
                .body(empty())
                .unwrap_or_default(),
            None => match mirror_mismatch(&headers, &message) {
                Some(error) => json_response(StatusCode::BAD_REQUEST, &error),
                // Its notifications come on an event stream, which this host must take.
                None if message.method() == LISTEN && !streams => {
                    let text = "subscriptions/listen is answered with an event stream: \
                                send Accept: text/event-stream";
                    let error = rpc_error(message.id(), -32600, text);
                    json_response(StatusCode::NOT_ACCEPTABLE, &error)
                }
                None => self.stateless(message, streams).await,
            },
        }
    }

    fn session(&self, id: &str) -> Option<Arc<Bridge>> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.get(id).cloned()
    }

    /// A handshake-era host's `initialize`: a session of its own, named in the answer.
    async fn initialize(&self, message: Posted) -> Response {
        if self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
            >= MAX_SESSIONS
        {
            let error = rpc_error(message.id(), -32000, "too many sessions open");
            return json_response(StatusCode::SERVICE_UNAVAILABLE, &error);
        }
        let bridge = Arc::new(Bridge::open(self.gateway.clone(), None));
        let id = session_id();
        let mut response = (self.forward(&bridge, message, Machine::Opening, false, None)).await;
        if response.status() == StatusCode::OK {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.insert(id.clone(), bridge);
            if let Ok(value) = HeaderValue::from_str(&id) {
                response.headers_mut().insert(SESSION_HEADER, value);
            }
        }
        response
    }

    /// A request with no session: a machine for itself, ended (and its calls with it) when
    /// answered or when the host hangs up.
    async fn stateless(&self, message: Posted, streams: bool) -> Response {
        let open = self.stateless_open.fetch_add(1, Ordering::SeqCst);
        let open_slot = Decrement(self.stateless_open.clone());
        if open >= MAX_STATELESS {
            let text = format!("{MAX_STATELESS} requests are open; retry later");
            let error = rpc_error(message.id(), -32000, &text);
            return json_response(StatusCode::TOO_MANY_REQUESTS, &error);
        }
        let rounds = Some(self.rounds.clone());
        let bridge = Arc::new(Bridge::open(self.gateway.clone(), rounds));
        // The slot is held as long as the request's stream, which holds its machine.
        let open_slot: Keep = Box::new(open_slot);
        (self.forward(
            &bridge,
            message,
            Machine::Stateless,
            streams,
            Some(open_slot),
        ))
        .await
    }

    /// Passes a notification, or the host's answer to a request of ours, to its session's
    /// machine: 202 when taken.
    fn pass(&self, bridge: &Bridge, message: Posted) -> Response {
        match bridge.send(message.into_message()) {
            Ok(()) => hyper::Response::builder()
                .status(StatusCode::ACCEPTED)
                .body(empty())
                .unwrap_or_default(),
            Err(_) => plain(StatusCode::NOT_FOUND, "the session has ended"),
        }
    }

    /// Passes a request to a machine: its answer comes back as JSON when it is the first
    /// thing to say, else (when the host `streams`) as an event stream of what relates to it
    /// and then the answer; an error when refused, or when a stop's grace ran out. `keep`
    /// lives as long as the answer does.
    async fn forward(
        &self,
        bridge: &Arc<Bridge>,
        message: Posted,
        machine: Machine,
        streams: bool,
        keep: Option<Keep>,
    ) -> Response {
        let id = message.id();
        let cancel = machine == Machine::Session;
        // A long-lived stream ends (gracefully) when the gateway begins to stop.
        let listens = message.method() == LISTEN;
        // Counted until its answer is given (with its stream, when it streams).
        let counted = (!listens).then(|| {
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            Decrement(self.in_flight.clone())
        });
        let mut reply = match bridge.request(message.into_message(), cancel, streams) {
            Ok(reply) => reply,
            Err(Refused::Busy) => {
                let text = format!("{MAX_IN_FLIGHT} requests of this host are open; retry later");
                let error = rpc_error(id, -32000, &text);
                return json_response(StatusCode::TOO_MANY_REQUESTS, &error);
            }
            Err(Refused::DuplicateId) => {
                let text = "a request with this id is already open";
                return json_response(StatusCode::BAD_REQUEST, &rpc_error(id, -32600, text));
            }
            Err(Refused::Closed) => return internal(id, "the session ended first"),
        };
        let first = async { Some(reply.next().await) };
        let aborted = async {
            let _ = self.abort.recv().await;
            None
        };
        match first.or(aborted).await {
            Some(Some(answer)) if reply.answered() => {
                json_text_response(answer_status(&answer, machine), answer)
            }
            Some(Some(first)) => {
                let stream = Events {
                    first: Some(first),
                    reply,
                    abort: self.abort.clone(),
                    closing: listens.then(|| self.stopping.clone()),
                    ended: false,
                    _keep: Some(Box::new((keep, counted))),
                };
                event_stream(stream.into_stream())
            }
            Some(None) => internal(id, "the session ended first"),
            None => internal(id, "mcp-cli serve is stopping; the call did not finish"),
        }
    }

    /// GET: a session's standalone stream, for what its machine sends that relates to no
    /// request of the host's (list changes); it ends with the session or when the gateway
    /// begins to stop.
    fn get(&self, request: &hyper::Request<Incoming>) -> Response {
        if !accepts_events(request.headers()) {
            return plain(
                StatusCode::NOT_ACCEPTABLE,
                "GET opens an event stream: send Accept: text/event-stream",
            );
        }
        let session = (request.headers().get(SESSION_HEADER)).and_then(|value| value.to_str().ok());
        let Some(session) = session else {
            let mut response = plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "GET opens a session's stream: send its Mcp-Session-Id (stateless-era hosts \
                 send subscriptions/listen instead)",
            );
            let allow = HeaderValue::from_static("GET, POST, DELETE");
            response.headers_mut().insert(header::ALLOW, allow);
            return response;
        };
        let Some(bridge) = self.session(session) else {
            let error = rpc_error(Value::Null, -32001, "unknown session");
            return json_response(StatusCode::NOT_FOUND, &error);
        };
        let messages = bridge.standalone();
        let stopping = self.stopping.clone();
        let stream =
            futures_lite::stream::unfold((messages, stopping), |(messages, stopping)| async move {
                let next = messages.next();
                let stop = async {
                    let _ = stopping.recv().await;
                    None
                };
                let message = next.or(stop).await?;
                Some((event(&message), (messages, stopping)))
            });
        event_stream(stream)
    }

    /// DELETE: the host ends its session, and its calls still running are cancelled.
    fn delete(&self, request: &hyper::Request<Incoming>) -> Response {
        let session = (request.headers().get(SESSION_HEADER)).and_then(|value| value.to_str().ok());
        let Some(session) = session else {
            return plain(StatusCode::BAD_REQUEST, "no Mcp-Session-Id to end");
        };
        let removed =
            (self.sessions.lock().unwrap_or_else(PoisonError::into_inner)).remove(session);
        match removed {
            Some(_) => plain(StatusCode::OK, "session ended"),
            None => plain(StatusCode::NOT_FOUND, "unknown session"),
        }
    }
}

/// A request without a session that its headers contradict, as the era's transport forbids
/// (`MCP-Protocol-Version` and `Mcp-Method` mirror the body), or that is of neither era (no
/// revision in `_meta`, and not `initialize`): the JSON-RPC error to answer with 400.
fn mirror_mismatch(headers: &hyper::HeaderMap, message: &Posted) -> Option<Value> {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let id = message.id();
    let method = message.method();
    let stated = message.meta(META_PROTOCOL_VERSION).as_str();
    let mismatch = |text: String| Some(rpc_error(id.clone(), RpcError::HEADER_MISMATCH, &text));
    match (stated, header("mcp-protocol-version")) {
        (None, _) if method == "server/discover" => {}
        (None, _) => {
            return Some(rpc_error(
                id,
                -32600,
                "no Mcp-Session-Id: send initialize first for a session, or name the \
                 2026-07-28 revision in the request's _meta",
            ));
        }
        (Some(stated), Some(given)) if stated != given => {
            return mismatch(format!(
                "MCP-Protocol-Version {given} does not match the _meta's {stated}"
            ));
        }
        (Some(_), None) => return mismatch("MCP-Protocol-Version is missing".to_owned()),
        _ => {}
    }
    match header("mcp-method") {
        Some(given) if given != method => mismatch(format!(
            "Mcp-Method {given} does not match the body's {method}"
        )),
        _ => None,
    }
}

/// Which machine a message goes to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Machine {
    /// A session's: a host hanging up mid-request cancels the request.
    Session,
    /// A session's, on its `initialize`.
    Opening,
    /// A stateless-era request's own: ended with the request.
    Stateless,
}

/// The status of a request's answer: 200, but for what the stateless era's transport gives a
/// status of its own.
fn answer_status(answer: &[u8], machine: Machine) -> StatusCode {
    if machine != Machine::Stateless {
        return StatusCode::OK;
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Option<Error>,
    }
    #[derive(serde::Deserialize)]
    struct Error {
        code: Option<i64>,
    }
    let answer = serde_json::from_slice::<Answer>(answer).ok();
    let code = answer.and_then(|answer| answer.error?.code);
    match (machine, code) {
        (Machine::Stateless, Some(RpcError::UNSUPPORTED_PROTOCOL_VERSION)) => {
            StatusCode::BAD_REQUEST
        }
        (Machine::Stateless, Some(RpcError::METHOD_NOT_FOUND)) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// Takes one off a count when dropped.
struct Decrement(Arc<AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A new session id: 16 random bytes as hex (visible ASCII, as the transport asks).
fn session_id() -> String {
    let mut bytes = [0u8; 16];
    // Without the system's random source the time and a count still keep ids apart.
    if getrandom::getrandom(&mut bytes).is_err() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let seed = now.map_or(0, |d| d.as_nanos()) ^ COUNT.fetch_add(1, Ordering::SeqCst) as u128;
        bytes = seed.to_le_bytes();
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn rpc_error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn internal(id: Value, text: &str) -> Response {
    let error = rpc_error(id, -32603, text);
    json_response(StatusCode::OK, &error)
}

/// A request's messages as events: the first one, then the rest until its answer. A stop's
/// grace running out ends it with an error; a long-lived one (`closing`) ends gracefully,
/// with its answer, as soon as the gateway begins to stop.
struct Events {
    first: Option<Message>,
    reply: Reply,
    abort: Receiver<()>,
    closing: Option<Receiver<()>>,
    ended: bool,
    _keep: Option<Keep>,
}

impl Events {
    fn into_stream(self) -> impl futures_lite::Stream<Item = Bytes> + Send + 'static {
        futures_lite::stream::unfold(self, |mut events| async move {
            let message = events.next().await?;
            Some((event(&message), events))
        })
    }

    async fn next(&mut self) -> Option<Message> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        if self.ended || self.reply.answered() {
            return None;
        }
        enum Next {
            Message(Option<Message>),
            Abort,
            Close,
        }
        let message = async { Next::Message(self.reply.next().await) };
        let abort = async {
            let _ = self.abort.recv().await;
            Next::Abort
        };
        let close = async {
            match &self.closing {
                Some(closing) => {
                    let _ = closing.recv().await;
                    Next::Close
                }
                None => std::future::pending().await,
            }
        };
        let next = message.or(abort).or(close).await;
        let id = self.reply.id().clone();
        match next {
            Next::Message(message) => message,
            Next::Abort => {
                self.ended = true;
                let text = "mcp-cli serve is stopping; the call did not finish";
                Some(encode(&rpc_error(id, -32603, text)))
            }
            Next::Close => {
                self.ended = true;
                let meta = json!({ "io.modelcontextprotocol/subscriptionId": id });
                let result = json!({"resultType": "complete", "_meta": meta});
                Some(encode(
                    &json!({"jsonrpc": "2.0", "id": id, "result": result}),
                ))
            }
        }
    }
}

/// One server-sent event carrying `message`.
fn event(message: &[u8]) -> Bytes {
    let mut bytes = b"event: message\ndata: ".to_vec();
    bytes.extend(message);
    bytes.extend(b"\n\n");
    Bytes::from(bytes)
}

/// A 200 whose body is the events of `stream`.
fn event_stream(stream: impl futures_lite::Stream<Item = Bytes> + Send + 'static) -> Response {
    use futures_lite::StreamExt;
    let stream = crate::gateway::keepalive::every(stream, crate::gateway::keepalive::interval());
    let frames = stream.map(|bytes| Ok::<_, Infallible>(Frame::data(bytes)));
    let mut response = hyper::Response::new(StreamBody::new(frames).boxed_unsync());
    let headers = response.headers_mut();
    let events = HeaderValue::from_static("text/event-stream");
    headers.insert(header::CONTENT_TYPE, events);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx would otherwise hold the events back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Whether the request's `Accept` takes an event stream.
fn accepts_events(headers: &hyper::HeaderMap) -> bool {
    // Read as bytes: the media types are ASCII, and a value that is not is no event stream.
    (headers.get_all(header::ACCEPT).iter())
        .flat_map(|value| value.as_bytes().split(|&byte| byte == b','))
        .any(|kind| {
            let kind = kind.split(|&byte| byte == b';').next().unwrap_or_default();
            kind.trim_ascii().eq_ignore_ascii_case(b"text/event-stream")
        })
}

fn empty() -> Body {
    Full::default().boxed_unsync()
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    json_text_response(status, encode(body))
}

fn encode(message: &Value) -> Bytes {
    serde_json::to_vec(message).unwrap_or_default().into()
}

/// A response of one JSON message, `text`.
fn json_text_response(status: StatusCode, text: Bytes) -> Response {
    let mut response = hyper::Response::new(Full::new(text).boxed_unsync());
    *response.status_mut() = status;
    let json = HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, json);
    response
}

fn plain(status: StatusCode, text: &str) -> Response {
    let text = Bytes::from(format!("{text}\n"));
    let mut response = hyper::Response::new(Full::new(text).boxed_unsync());
    *response.status_mut() = status;
    let plain = HeaderValue::from_static("text/plain; charset=utf-8");
    response.headers_mut().insert(header::CONTENT_TYPE, plain);
    response
}
