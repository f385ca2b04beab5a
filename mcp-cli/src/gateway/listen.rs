//! `serve --listen`: the gateway over Streamable HTTP, one endpoint (`/mcp`) for hosts of
//! both eras. What the transport means (sessions and their end, the headers a stateless-era
//! request must mirror, the status of each answer, when an answer becomes an event stream,
//! what a host that hung up leaves) is the core's `HttpServer`, which `bridge.rs` drives; this
//! file keeps the sockets: accepting, at most `--max-connections`, the bearer token, `Host`
//! and `Origin` (DNS rebinding), the size of bodies, and stopping gracefully.
//!
//! Beside it, in `listen/`:
//!
//! - `clock.rs`: a coarse timer for hyper's header-read timeout
//! - `connections.rs`: at most `--max-connections` at once, one more answered 503
//! - `token.rs`: the bearer token: made on first use, kept in the state folder

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
use mcp_smol::proto::server::http::{Abandon, HttpRequest, HttpResponse, event};

use crate::gateway::Gateway;
use crate::gateway::bridge::{Answer, Bridges, Delivered, Reply, Standalone};
use crate::gateway::rounds::Rounds;
use crate::gateway::sealed::Seal;
use clock::CoarseTimer;
use connections::Connections;
pub(crate) use connections::DEFAULT_MAX_CONNECTIONS;
use token::bearer;
pub(crate) use token::token;

mod clock;
mod connections;
mod token;

/// Where `serve --listen` without an address listens.
pub(crate) const DEFAULT_ADDRESS: &str = "127.0.0.1:8931";

/// The one MCP endpoint.
pub(crate) const ENDPOINT: &str = "/mcp";

/// The largest body taken; a larger one is refused with 413.
const BODY_LIMIT: usize = 4 * 1024 * 1024;

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
    /// The hosts: the core's transport state and the machines it names.
    bridges: Bridges,
    token: String,
    /// `Host` values taken beside this address, lower case: `NAME` for any port, or
    /// `NAME:PORT`.
    allowed_hosts: Vec<String>,
    bound: SocketAddr,
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

/// Who is let in and what they bring: the bearer token hosts must send, the names a proxy in
/// front may reach the gateway by (`--allowed-host`), and the keys input rounds are sealed
/// with.
pub(crate) struct Admission {
    pub(crate) token: String,
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) seal: Arc<Seal>,
}

/// Serves hosts on `listener`, at most `max_connections` at once, until `stop` says, then
/// stops accepting, lets the requests in flight finish (or fails them after the grace) and
/// returns.
pub(crate) async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    admission: Admission,
    max_connections: usize,
    stop: Receiver<()>,
) {
    // A task of its own: awaited in the command's future, which the executor polls whenever
    // any of its tasks wakes, the listener would try an `accept` twice for every call.
    let executor = gateway.executor.clone();
    let connections = Connections::new(max_connections);
    executor
        .spawn(accept(gateway, listener, admission, connections, stop))
        .await;
}

async fn accept(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    admission: Admission,
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
        bridges: Bridges::new(gateway, Rounds::sealed_by(&env, admission.seal), &env),
        token: admission.token,
        allowed_hosts: admission.allowed_hosts,
        bound,
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
    shared.bridges.clear();
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
        self.exchange(request).await
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
        let ours = match origin.strip_prefix("http://") {
            Some(authority) => self.is_us(authority),
            // Through a proxy that speaks TLS to the browser: one of the names allowed.
            None => (origin.strip_prefix("https://")).is_some_and(|a| self.is_allowed(a)),
        };
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
        if self.is_allowed(authority) {
            return true;
        }
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

    /// Whether `authority` is one of the names `--allowed-host` gave.
    fn is_allowed(&self, authority: &str) -> bool {
        // Asked of every request's `Host`: without the flag, nothing to lower-case.
        if self.allowed_hosts.is_empty() {
            return false;
        }
        let authority = authority.to_ascii_lowercase();
        let name = match authority.rsplit_once(':') {
            Some((name, port)) if port.parse::<u16>().is_ok() => name,
            _ => &authority,
        };
        (self.allowed_hosts.iter()).any(|allowed| *allowed == authority || *allowed == name)
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

    /// A request for the endpoint: its body read (bounded), then the core says where it goes.
    async fn exchange(self: Arc<Self>, request: hyper::Request<Incoming>) -> Response {
        let (parts, body) = request.into_parts();
        let body = match parts.method {
            Method::POST => match read_body(&parts.headers, body).await {
                Ok(body) => body,
                Err(refusal) => return refusal,
            },
            _ => Bytes::new(),
        };
        let headers: Vec<(&str, &[u8])> = (parts.headers.iter())
            .map(|(name, value)| (name.as_str(), value.as_bytes()))
            .collect();
        let request = HttpRequest {
            method: parts.method.as_str(),
            headers: &headers,
            body: &body,
        };
        match self.bridges.receive(&request) {
            Answer::Respond(response) => whole(response),
            Answer::Reply(reply) => self.reply(reply).await,
            Answer::Standalone(head, standalone) => self.standalone(head, standalone),
        }
    }

    /// A request a machine took: its answer as JSON when it is the first thing to say, else
    /// an event stream of what relates to it and then the answer; an error when a stop's grace
    /// ran out first.
    async fn reply(&self, mut reply: Reply) -> Response {
        // Counted until its answer is given (with its stream, when it streams); a long-lived
        // stream ends (gracefully) when the gateway begins to stop instead.
        let counted = (!reply.listens()).then(|| {
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            Decrement(self.in_flight.clone())
        });
        let first = async { Some(reply.next().await) };
        let aborted = async {
            let _ = self.abort.recv().await;
            None
        };
        let first = match first.or(aborted).await {
            Some(Some(first)) => first,
            Some(None) => match reply.abandon(Abandon::MachineEnded) {
                Some(delivered) => delivered,
                None => return whole(HttpResponse::accepted()),
            },
            None => match reply.abandon(Abandon::Aborted) {
                Some(delivered) => delivered,
                None => return whole(HttpResponse::accepted()),
            },
        };
        let (head, message) = match first {
            Delivered::Answer(response) => return whole(response),
            Delivered::Opens(head, message) => (head, message),
            // The core opens a stream before any other part of it.
            Delivered::Event(message) | Delivered::Last(message) => {
                (HttpResponse::accepted(), message)
            }
        };
        let listens = reply.listens();
        let events = Events {
            first: Some(message),
            reply,
            abort: self.abort.clone(),
            closing: listens.then(|| self.stopping.clone()),
            _counted: counted,
        };
        event_stream(head, events.into_stream())
    }

    /// A session's standalone stream: what its machine sends that relates to no request of
    /// the host's (list changes); it ends with the session or when the gateway begins to stop.
    fn standalone(&self, head: HttpResponse, messages: Standalone) -> Response {
        let stopping = self.stopping.clone();
        let stream =
            futures_lite::stream::unfold((messages, stopping), |(messages, stopping)| async move {
                let next = messages.next();
                let stop = async {
                    let _ = stopping.recv().await;
                    None
                };
                let message = next.or(stop).await?;
                Some((Bytes::from(event(&message)), (messages, stopping)))
            });
        event_stream(head, stream)
    }
}

/// A POST's body, whole, or the refusal of one over [`BODY_LIMIT`] or unreadable.
async fn read_body(headers: &hyper::HeaderMap, body: Incoming) -> Result<Bytes, Response> {
    let too_large = || {
        let message = format!("the body is over {BODY_LIMIT} bytes");
        plain(StatusCode::PAYLOAD_TOO_LARGE, &message)
    };
    let declared = (headers.get(header::CONTENT_LENGTH))
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > BODY_LIMIT as u64) {
        return Err(too_large());
    }
    match Limited::new(body, BODY_LIMIT).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(error) => Err(plain(
            StatusCode::BAD_REQUEST,
            &format!("reading the body: {error}"),
        )),
    }
}

/// Takes one off a count when dropped.
struct Decrement(Arc<AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A request's messages as events: the first one, then the rest until its answer. A stop's
/// grace running out ends it with an error; a long-lived one (`closing`) ends gracefully,
/// with its answer, as soon as the gateway begins to stop.
struct Events {
    first: Option<Bytes>,
    reply: Reply,
    abort: Receiver<()>,
    closing: Option<Receiver<()>>,
    _counted: Option<Decrement>,
}

impl Events {
    fn into_stream(self) -> impl futures_lite::Stream<Item = Bytes> + Send + 'static {
        futures_lite::stream::unfold(self, |mut events| async move {
            let message = events.next().await?;
            Some((Bytes::from(event(&message)), events))
        })
    }

    async fn next(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        if self.reply.answered() {
            return None;
        }
        enum Next {
            Delivered(Option<Delivered>),
            Abort,
            Close,
        }
        let delivered = async { Next::Delivered(self.reply.next().await) };
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
        let delivered = match delivered.or(abort).or(close).await {
            Next::Delivered(Some(delivered)) => delivered,
            Next::Delivered(None) => self.reply.abandon(Abandon::MachineEnded)?,
            Next::Abort => self.reply.abandon(Abandon::Aborted)?,
            Next::Close => self.reply.abandon(Abandon::Stopping)?,
        };
        match delivered {
            Delivered::Opens(_, message) | Delivered::Event(message) | Delivered::Last(message) => {
                Some(message)
            }
            // A whole answer on a stream already open: its body is the message.
            Delivered::Answer(response) => Some(Bytes::from(response.body)),
        }
    }
}

/// A response the core made, as hyper's.
fn whole(response: HttpResponse) -> Response {
    let HttpResponse {
        status,
        headers,
        body,
    } = response;
    let mut answer = hyper::Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    *answer.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            answer.headers_mut().append(name, value);
        }
    }
    answer
}

/// The core's head of an event stream, its body the events of `stream`.
fn event_stream(
    head: HttpResponse,
    stream: impl futures_lite::Stream<Item = Bytes> + Send + 'static,
) -> Response {
    use futures_lite::StreamExt;
    let stream = crate::gateway::keepalive::every(stream, crate::gateway::keepalive::interval());
    let frames = stream.map(|bytes| Ok::<_, Infallible>(Frame::data(bytes)));
    let mut response = hyper::Response::new(StreamBody::new(frames).boxed_unsync());
    for (name, value) in head.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(name, value);
        }
    }
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
