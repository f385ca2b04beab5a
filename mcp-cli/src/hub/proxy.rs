//! The hub's forward proxy, the only way out for a server whose `permissions.network` is a
//! list of hosts. The server runs in a network namespace of its own; mcp-smol makes a listener
//! on `127.0.0.1:PROXY_PORT` inside it before the server runs and hands it to us
//! ([`mcp_smol::Client::take_proxy_listener`]), so connections accepted on it come straight
//! from the server, with no relay in between, and the hub's executor serves them.
//!
//! hyper reads each request: `CONNECT host:port` becomes a tunnel, an absolute URI
//! (`GET http://host/path`) is forwarded with hyper's client over a kept-alive connection.
//! Either way the host is resolved and dialled here, outside the namespace, and only when an
//! allowlist entry admits it; a refusal is answered 403 and written to the server's log with
//! the tool calls in flight.

use std::convert::Infallible;
use std::io::Write;
use std::net::Shutdown;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_channel::Receiver;
use async_executor::Executor;
use async_net::{TcpListener, TcpStream};
use futures_lite::future::FutureExt;
use futures_lite::io::AsyncWriteExt;
use http_body_util::{Either, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, Response, StatusCode};
use smol_hyper::rt::{FuturesIo, SmolTimer};

use crate::config::HostPattern;
use crate::logs::RunLog;

/// The proxy's port on the loopback of a sandboxed server's namespace: that namespace is
/// the server's own, so any port is free; this one is the customary proxy port.
pub(crate) const PROXY_PORT: u16 = 3128;

/// At most this many connections, tunnels and upstream connections of one server at once; a
/// connection past them is closed as it arrives, so a server cannot exhaust the hub.
const MAX_TASKS: usize = 512;

type Body = Either<Incoming, Full<Bytes>>;

/// The tool calls a server is running, for a refusal's log line.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    calls: Mutex<Vec<(u64, String)>>,
    next: AtomicU64,
}

/// A call counted in [`InFlight`] until dropped.
pub(crate) struct Flight {
    calls: Arc<InFlight>,
    id: u64,
}

impl InFlight {
    /// Counts a call of `tool` until the returned guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>, tool: &str) -> Flight {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push((id, tool.to_owned()));
        Flight {
            calls: self.clone(),
            id,
        }
    }

    /// `while calling fetch` (or several), or `with no tool call in flight`.
    fn describe(&self) -> String {
        let calls = self.lock();
        if calls.is_empty() {
            return "with no tool call in flight".to_owned();
        }
        let names: Vec<&str> = calls.iter().map(|(_, tool)| tool.as_str()).collect();
        format!("while calling {}", names.join(", "))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, String)>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        self.calls.lock().retain(|(id, _)| *id != self.id);
    }
}

/// One sandboxed server as the proxy serves it.
pub(crate) struct Guest {
    pub(crate) allow: Vec<HostPattern>,
    /// The server's log, where refusals go.
    pub(crate) log: Option<RunLog>,
    pub(crate) calls: Arc<InFlight>,
}

/// What every task of one server's proxy shares.
struct Shared {
    guest: Guest,
    executor: Arc<Executor<'static>>,
    /// Closes when the server's connection has ended: every tunnel and upstream connection
    /// of it stops then.
    ended: Receiver<()>,
    /// How many of its tasks are running.
    tasks: Arc<AtomicUsize>,
}

/// Counts a running task in [`Shared::tasks`] until dropped, finished or cancelled.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves `guest`'s proxy on `listener` until `notes` (the connection's notifications)
/// closes, which it does when the connection ends.
pub(crate) async fn serve<T>(
    listener: std::net::TcpListener,
    guest: Guest,
    executor: Arc<Executor<'static>>,
    notes: Receiver<T>,
) {
    let (_open, ended) = async_channel::bounded::<()>(1);
    let shared = Arc::new(Shared {
        guest,
        executor,
        ended,
        tasks: Arc::default(),
    });
    let accepting = async {
        let Ok(listener) = TcpListener::try_from(listener) else {
            return;
        };
        loop {
            match listener.accept().await {
                Ok((stream, _)) if shared.tasks.load(Ordering::Relaxed) >= MAX_TASKS => {
                    shared.log(&format!(
                        "mcp-cli: proxy closed a connection: {MAX_TASKS} are open already"
                    ));
                    drop(stream);
                }
                Ok((stream, _)) => shared.spawn(connection(shared.clone(), stream)),
                // Out of descriptors, say: the server's next connection may fare better.
                Err(_) => {
                    async_io::Timer::after(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    };
    let connection_ended = async { while notes.recv().await.is_ok() {} };
    accepting.or(connection_ended).await;
}

impl Shared {
    /// Runs `task` on the hub's executor until it ends or the server's connection does.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let ended = self.ended.clone();
        let until_ended = async move {
            let _ = ended.recv().await;
        };
        self.tasks.fetch_add(1, Ordering::Relaxed);
        let counted = Counted(self.tasks.clone());
        let task = async move {
            let _counted = counted;
            task.or(until_ended).await;
        };
        self.executor.spawn(task).detach();
    }

    /// Writes `line` to the server's log.
    fn log(&self, line: &str) {
        if let Some(log) = &self.guest.log {
            let _ = writeln!(log.clone(), "{line}");
        }
    }
}

/// One connection from the server: HTTP/1.1 requests, kept alive, each answered by
/// [`handle`]; a `CONNECT` turns it into a tunnel.
async fn connection(shared: Arc<Shared>, stream: TcpStream) {
    // A relay must not hold back small writes (Nagle) waiting for an acknowledgement.
    let _ = stream.set_nodelay(true);
    let upstream = Arc::new(async_lock::Mutex::new(None));
    let service = hyper::service::service_fn(move |request| {
        let (shared, upstream) = (shared.clone(), upstream.clone());
        async move { Ok::<_, Infallible>(handle(shared, request, &upstream).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(SmolTimer::new())
        .serve_connection(FuturesIo::new(stream), service)
        .with_upgrades();
    let _ = connection.await;
}

/// The origin a plain request was last forwarded to, and hyper's client connection to it.
struct Upstream {
    origin: (String, u16),
    sender: SendRequest<Incoming>,
}

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
    upstream: &async_lock::Mutex<Option<Upstream>>,
) -> Response<Body> {
    let Some((host, port)) = target(&request) else {
        let why = "mcp-cli's proxy takes CONNECT host:port or an absolute http:// URI";
        return text(StatusCode::BAD_REQUEST, why);
    };
    let guest = &shared.guest;
    if !guest
        .allow
        .iter()
        .any(|pattern| pattern.admits(&host, port))
    {
        let allowed: Vec<String> = guest.allow.iter().map(ToString::to_string).collect();
        shared.log(&format!(
            "mcp-cli: proxy refused {} {host}:{port}, not in permissions.network ({}), {}",
            request.method(),
            allowed.join(", "),
            guest.calls.describe()
        ));
        let why = format!("{host}:{port} is not in this server's permissions.network");
        return text(StatusCode::FORBIDDEN, &why);
    }
    if request.method() == Method::CONNECT {
        tunnel(&shared, request, &host, port).await
    } else {
        forward(&shared, request, (host, port), upstream).await
    }
}

/// The host (lower case, IPv6 without brackets) and port a request is for: a `CONNECT`'s
/// authority, or an absolute `http://` URI's (port 80 by default).
fn target(request: &Request<Incoming>) -> Option<(String, u16)> {
    let uri = request.uri();
    let authority = uri.authority()?;
    let port = match request.method() == Method::CONNECT {
        true => authority.port_u16()?,
        false if uri.scheme_str() == Some("http") => authority.port_u16().unwrap_or(80),
        false => return None,
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    Some((host.to_ascii_lowercase(), port))
}

/// Dials the target, answers 200 and, once hyper hands the connection over, copies bytes
/// both ways until both sides are done.
async fn tunnel(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
    host: &str,
    port: u16,
) -> Response<Body> {
    let target = match TcpStream::connect((host, port)).await {
        Ok(target) => target,
        Err(error) => return unreachable(host, port, &error),
    };
    let _ = target.set_nodelay(true);
    shared.spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(request).await else {
            return;
        };
        // Our own stream back, and what hyper had read past the request.
        let Ok(parts) = upgraded.downcast::<FuturesIo<TcpStream>>() else {
            return;
        };
        splice(parts.io.into_inner(), parts.read_buf, target).await;
    });
    Response::new(Either::Right(Full::default()))
}

async fn splice(client: TcpStream, early: Bytes, target: TcpStream) {
    let (mut from_client, mut to_client) = (client.clone(), client);
    let (mut from_target, mut to_target) = (target.clone(), target);
    let up = async {
        if to_target.write_all(&early).await.is_ok() {
            let _ = futures_lite::io::copy(&mut from_client, &mut to_target).await;
        }
        let _ = to_target.shutdown(Shutdown::Write);
    };
    let down = async {
        let _ = futures_lite::io::copy(&mut from_target, &mut to_client).await;
        let _ = to_client.shutdown(Shutdown::Write);
    };
    futures_lite::future::zip(up, down).await;
}

/// Sends a plain request on to its origin in origin form, over the connection the last
/// request to that origin used when it is still open.
async fn forward(
    shared: &Arc<Shared>,
    mut request: Request<Incoming>,
    origin: (String, u16),
    upstream: &async_lock::Mutex<Option<Upstream>>,
) -> Response<Body> {
    let path = (request.uri().path_and_query()).map_or("/", |path| path.as_str());
    *request.uri_mut() = path.parse().unwrap_or_default();
    for hop in [
        "proxy-connection",
        "proxy-authorization",
        "connection",
        "keep-alive",
    ] {
        request.headers_mut().remove(hop);
    }
    let mut upstream = upstream.lock().await;
    let reusable = (upstream.as_ref()).is_some_and(|u| u.origin == origin && !u.sender.is_closed());
    if !reusable {
        let (host, port) = (&origin.0, origin.1);
        let stream = match TcpStream::connect((host.as_str(), port)).await {
            Ok(stream) => stream,
            Err(error) => return unreachable(host, port, &error),
        };
        let _ = stream.set_nodelay(true);
        let handshake = hyper::client::conn::http1::handshake(FuturesIo::new(stream)).await;
        let (sender, connection) = match handshake {
            Ok(parts) => parts,
            Err(error) => return unreachable(host, port, &std::io::Error::other(error)),
        };
        shared.spawn(async move {
            let _ = connection.await;
        });
        *upstream = Some(Upstream { origin, sender });
    }
    let Some(Upstream { sender, origin }) = upstream.as_mut() else {
        return text(StatusCode::BAD_GATEWAY, "no upstream connection");
    };
    let answer = match sender.ready().await {
        Ok(()) => sender.send_request(request).await,
        Err(error) => Err(error),
    };
    match answer {
        Ok(response) => response.map(Either::Left),
        Err(error) => {
            let (host, port) = (origin.0.clone(), origin.1);
            *upstream = None;
            unreachable(&host, port, &std::io::Error::other(error))
        }
    }
}

fn unreachable(host: &str, port: u16, error: &std::io::Error) -> Response<Body> {
    let why = format!("mcp-cli's proxy cannot reach {host}:{port}: {error}");
    text(StatusCode::BAD_GATEWAY, &why)
}

fn text(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(format!("{text}\n")))));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_connection_past_the_cap_is_closed_and_logged() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-proxy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("fx.log");
        let guest = Guest {
            allow: Vec::new(),
            log: Some(RunLog::open(path.clone(), "fx").unwrap()),
            calls: Arc::default(),
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let executor = Arc::new(Executor::new());
        let (_connection, notes) = async_channel::unbounded::<()>();
        let task = executor.spawn(serve(listener, guest, executor.clone(), notes));
        let running = executor.clone();
        std::thread::spawn(move || async_io::block_on(running.run(task)));
        // Each holds its connection open, sending nothing: hyper waits for a request.
        let open: Vec<std::net::TcpStream> = (0..MAX_TASKS)
            .map(|_| std::net::TcpStream::connect(address).unwrap())
            .collect();
        let mut past = std::net::TcpStream::connect(address).unwrap();
        // A guard against a hang, not a measure: the answer is an immediate end of stream.
        past.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        assert_eq!(past.read(&mut [0; 16]).unwrap(), 0);
        let log = std::fs::read_to_string(&path).unwrap();
        let line = format!("mcp-cli: proxy closed a connection: {MAX_TASKS} are open already");
        assert!(log.contains(&line), "{log}");
        drop(open);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
