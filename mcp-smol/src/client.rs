//! The handle: cheap clones that send the driver operations and await the answers.

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_channel::Receiver;
use futures_lite::io::{AsyncRead, AsyncWrite};
use proto::{
    CallToolResult, Listed, Listing, Notification, Pager, Protocol, RawResult, Request, RpcError,
    ServerInfo, ServerRequest, ServerRequestId, Tool,
};
use serde_json::Value;

use crate::driver::{self, Driver, Flight, Op, Pilot, Reader, Reply, Route, Shared, Writer};
use crate::{
    Call, Disconnect, Error, HttpServer, Options, ServerCommand, StderrSink, background, oneshot,
    queue,
};

/// What a client runs over: a server to spawn, a stream someone else opened, or a remote
/// server over HTTP. Made with `From`: `&ServerCommand` or `ServerCommand`, a `(reader,
/// writer)` pair, an [`HttpServer`].
pub enum Transport {
    /// Spawns the server, the leader of its own process group; see the crate docs for how
    /// it is stopped.
    Command(ServerCommand),
    /// A stream someone else opened (a Unix socket's halves): there is no process
    /// ([`Client::pid`] is 0), closing shuts the write half down, and the stream's owner ends
    /// whatever is behind it.
    Stream(Reader, Writer),
    /// A remote server over Streamable HTTP, or the older HTTP+SSE transport. A server that
    /// needs authorization nobody could give fails with [`Error::Unauthorized`]; one that
    /// cannot be reached at all (DNS, refused, TLS) with [`Error::Http`].
    Http(HttpServer),
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Command(command) => f.debug_tuple("Command").field(command).finish(),
            Transport::Stream(..) => f.write_str("Stream"),
            Transport::Http(server) => f.debug_tuple("Http").field(server).finish(),
        }
    }
}

impl From<ServerCommand> for Transport {
    fn from(command: ServerCommand) -> Self {
        Transport::Command(command)
    }
}

impl From<&ServerCommand> for Transport {
    fn from(command: &ServerCommand) -> Self {
        Transport::Command(command.clone())
    }
}

impl From<HttpServer> for Transport {
    fn from(server: HttpServer) -> Self {
        Transport::Http(server)
    }
}

impl<R, W> From<(R, W)> for Transport
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    fn from((reader, writer): (R, W)) -> Self {
        Transport::Stream(Box::new(reader), Box::new(writer))
    }
}

/// Starts a client over `transport` and returns a handle and the driver future, which must
/// be polled: a caller waiting alone for its answer drives the connection itself, on its
/// own thread, but between calls (notifications, timeouts, close) and while callers of
/// several tasks wait, only the driver does; the same over every transport. The handshake
/// starts at once; calls made before it ends are held. Fails only to spawn a server.
///
/// Under [`proto::Protocol::Auto`] (the default) a server that exits on the
/// `server/discover` probe ends the connection with
/// [`proto::CloseReason::EndedOnProbe`] (in [`Error::Disconnected`]), which the caller
/// sees: it is for the caller to start the server again at a handshake revision (as
/// [`connect`] does) and to remember that.
pub fn start(transport: impl Into<Transport>, options: Options) -> Result<(Client, Driver), Error> {
    let max_listed = options.core.max_listed;
    let (ops, shared, driver) = match transport.into() {
        Transport::Command(command) => driver::spawn(&command, options)?,
        Transport::Stream(reader, writer) => driver::over_stream(reader, writer, &options),
        Transport::Http(server) => crate::http::start(server, &options),
    };
    let (pilot, driver) = Pilot::share(driver);
    let capped = Arc::default();
    let client = Client {
        ops,
        shared,
        pilot,
        max_listed,
        capped,
    };
    Ok((client, driver))
}

/// [`start`], with the handshake completed and the driver on this crate's background thread
/// whenever no caller is driving it. A connection that fails the handshake is closed before
/// the error returns. A server to spawn that exits on the `server/discover` probe of
/// [`proto::Protocol::Auto`] is started once more at the newest handshake revision, so the
/// caller never sees [`proto::CloseReason::EndedOnProbe`]; both processes write to the same
/// [`Options::stderr_sink`].
pub async fn connect(
    transport: impl Into<Transport>,
    mut options: Options,
) -> Result<Client, Error> {
    let transport = transport.into();
    let command = match &transport {
        Transport::Command(command) if options.core.protocol == Protocol::Auto => command.clone(),
        _ => return connect_once(transport, options).await,
    };
    let sink = (options.stderr_sink.take()).map(|sink| Arc::new(Mutex::new(sink)));
    let shared_sink = || {
        sink.clone()
            .map(|sink| Box::new(SharedSink(sink)) as StderrSink)
    };
    let first = Options {
        core: options.core.clone(),
        stderr_sink: shared_sink(),
        ..options
    };
    match connect_once(transport, first).await {
        Err(error) if ended_on_probe(&error) => {
            options.core.protocol = Protocol::Revision(proto::LATEST_PROTOCOL_VERSION);
            options.stderr_sink = shared_sink();
            connect_once(Transport::Command(command), options).await
        }
        connected => connected,
    }
}

/// Whether the server closed its output on the `server/discover` probe.
fn ended_on_probe(error: &Error) -> bool {
    matches!(error, Error::Disconnected(d) if d.reason == proto::CloseReason::EndedOnProbe)
}

/// One stderr sink written by a server and by the same server started again.
struct SharedSink(Arc<Mutex<StderrSink>>);

impl std::io::Write for SharedSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut sink = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("sink poisoned"))?;
        sink.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let mut sink = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("sink poisoned"))?;
        sink.flush()
    }
}

async fn connect_once(transport: Transport, options: Options) -> Result<Client, Error> {
    let (client, driver) = start(transport, options)?;
    if let Err(error) = background::spawn(driver) {
        return Err(Error::Spawn {
            program: "the connection".to_owned(),
            reason: format!("no thread for its driver: {error}"),
        });
    }
    match client.wait_ready().await {
        Ok(_) => Ok(client),
        Err(error) => {
            client.close().await;
            Err(error)
        }
    }
}

/// A cheap, cloneable handle to one server connection.
#[derive(Clone)]
pub struct Client {
    ops: queue::Sender<Op>,
    shared: Arc<Shared>,
    /// Lets a waiting caller drive the connection on its own thread, whatever the transport.
    pilot: Arc<Pilot>,
    /// [`proto::Config::max_listed`]: at most this many entries of each listing are kept.
    max_listed: usize,
    /// The listings (by result member: `tools`, ...) whose last [`Client::list_all`] was cut
    /// at `max_listed`.
    capped: Arc<Mutex<BTreeSet<&'static str>>>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("pid", &self.shared.pid)
            .finish()
    }
}

impl Client {
    /// The server's process id (also its process group id); 0 over a stream.
    pub fn pid(&self) -> u32 {
        self.shared.pid
    }

    /// The listener a sandbox with a [`proxy_port`](crate::Sandbox::proxy_port) made inside
    /// the server's network namespace: the first call takes it, later ones get `None`. The
    /// caller serves the server's proxy on it; connections accepted on it come from inside
    /// the namespace.
    pub fn take_proxy_listener(&self) -> Option<std::net::TcpListener> {
        (self.shared.proxy_listener.lock()).map_or(None, |mut slot| slot.take())
    }

    /// The last lines the server wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.shared.stderr_tail()
    }

    /// The tools the last [`list_tools`](Self::list_tools) left out because their
    /// `x-mcp-header` annotations are invalid, and why (HTTP servers of the stateless era; the
    /// revision asks clients to warn about each). Empty otherwise.
    pub fn rejected_tools(&self) -> Vec<proto::http::RejectedTool> {
        (self.shared.rejected_tools.lock()).map_or_else(|_| Vec::new(), |tools| tools.clone())
    }

    /// Waits for the handshake; returns what the server said about itself.
    pub async fn wait_ready(&self) -> Result<ServerInfo, Error> {
        self.ask(Op::WaitReady).await
    }

    /// Starts a request: every request of this crate goes this way. Awaited, the [`Call`]
    /// sends it and reads its result as the request's type (`CallToolResult` for
    /// [`Request::call_tool`], the result as sent for [`Request::new`] or
    /// [`Request::untyped`]); before that it takes the options of this one call: its
    /// result unread ([`Call::raw`]), its progress ([`Call::progress`]), its deadline
    /// ([`Call::timeout`], [`Call::no_timeout`]).
    ///
    /// ```no_run
    /// # async fn demo(client: mcp_smol::Client) -> Result<(), mcp_smol::Error> {
    /// use mcp_smol::proto::Request;
    /// let result = client.request(Request::call_tool("echo", serde_json::json!({}))).await?;
    /// let unread = client.request(Request::list_tools(None)).no_timeout().raw().await?;
    /// # Ok(()) }
    /// ```
    pub fn request<T>(&self, request: Request<T>) -> Call<'_, T> {
        Call::new(self, request)
    }

    /// Sends a request of a [`Call`], its result unread.
    pub(crate) fn send(
        &self,
        request: Request,
        progress: Option<Route>,
    ) -> Flight<'_, Ask<'_, RawResult>> {
        self.ask(|reply| Op::Request {
            request,
            reply,
            progress,
        })
    }

    /// Calls a tool with the default timeout. A result with `is_error` is still `Ok`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.request(Request::call_tool(name, arguments)).await
    }

    /// Lists every tool, following `tools/list` pages; see [`list_all`](Self::list_all).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        Ok(self.list_all::<Tool>().await?.items)
    }

    /// Follows every page of a listing: `list_all::<Resource>()` for resources, and so on
    /// for anything [`Listed`]. At most [`proto::DEFAULT_MAX_PAGES`] pages, and never
    /// the same cursor twice; entries the server sent unreadably are counted in `skipped`.
    /// At most [`proto::Config::max_listed`] entries are kept: past them the listing is
    /// [`capped`](Listing::capped), and [`capped`](Self::capped) says so until the next
    /// listing of the kind.
    pub async fn list_all<T: Listed>(&self) -> Result<Listing<T>, Error> {
        let mut pager = Pager::<T>::default().max_items(self.max_listed);
        while let Some(request) = pager.next_request() {
            let page = self.request(request).await?;
            pager.add_page(page)?;
        }
        let listing = pager.finish();
        if let Ok(mut capped) = self.capped.lock() {
            match listing.capped {
                Some(_) => capped.insert(T::MEMBER),
                None => capped.remove(T::MEMBER),
            };
        }
        Ok(listing)
    }

    /// The cap, when the last [`list_all`](Self::list_all) of `T` listed more entries than
    /// [`proto::Config::max_listed`] and kept only that many; `None` otherwise.
    pub fn capped<T: Listed>(&self) -> Option<usize> {
        let capped = self.capped.lock().ok()?;
        capped.contains(T::MEMBER).then_some(self.max_listed)
    }

    /// A stream of the server's notifications from now on. It holds up to 1024 unread; while
    /// the receiver is that far behind, further ones are dropped rather than blocking the
    /// driver.
    pub async fn notifications(&self) -> Receiver<Notification> {
        let (sender, receiver) = async_channel::unbounded();
        let _ = self.ops.send(Op::Subscribe(sender));
        receiver
    }

    /// The server's requests for the capabilities declared in
    /// [`Options::core`](crate::Options)'s `capabilities`, from now on; answer each with
    /// [`respond`](Self::respond). In the stateless era they include the input requests of an
    /// `input_required` result, each naming the request it is for
    /// ([`ServerRequest::request`]); that request goes again once all are answered. With no
    /// receiver listening (or all of them 16 behind), a request is refused at once; one left
    /// unanswered is refused at the core's `server_request_timeout`.
    pub async fn server_requests(&self) -> Receiver<ServerRequest> {
        let (sender, receiver) = async_channel::bounded(16);
        let _ = self.ops.send(Op::Answer(sender));
        receiver
    }

    /// Answers a request from [`server_requests`](Self::server_requests). An answer that
    /// comes too late (after the refusal) or after the connection ended is dropped.
    pub async fn respond(&self, id: ServerRequestId, result: Result<Value, RpcError>) {
        let _ = self.ops.send(Op::Respond { id, result });
    }

    /// Sends the server a notification (`notifications/roots/list_changed`, ...). Sent once
    /// the connection is ready; dropped before that and after it ended.
    pub async fn notify(&self, method: &str, params: Option<Value>) {
        let method = method.to_owned();
        let _ = self.ops.send(Op::Notify { method, params });
    }

    /// Closes the connection and waits until the server process has been reaped: stdin
    /// closed, [`Options::grace_period`], SIGTERM to the group, [`Options::term_period`],
    /// SIGKILL to the group.
    pub async fn close(&self) {
        let closed = async {
            let _ = self.ops.send(Op::Close);
            let _ = self.shared.done.recv().await;
        };
        self.drive_while(closed).await;
    }

    /// Stops the server now: [`close`](Self::close) without the grace period, so SIGTERM
    /// reaches the group at once and SIGKILL after [`Options::term_period`]. Also cuts short
    /// a close already waiting out its grace period. For a caller that is itself stopping.
    pub async fn terminate(&self) {
        self.shared.terminate();
        self.close().await;
    }

    /// How the connection ended, if it has.
    pub fn disconnect(&self) -> Option<Disconnect> {
        self.shared.ended().map(|ended| ended.disconnect.clone())
    }

    /// Waits for `future`, driving the connection meanwhile if no other caller does: the
    /// answer is then read on this thread, with no hop through the driver's.
    async fn drive_while<F: Future>(&self, future: F) -> F::Output {
        self.pilot.fly(std::pin::pin!(future)).await
    }

    /// Hands the driver the operation `op` makes and waits for its answer, driving meanwhile
    /// (see [`drive_while`](Self::drive_while)).
    fn ask<T>(&self, op: impl FnOnce(Reply<T>) -> Op) -> Flight<'_, Ask<'_, T>> {
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            client: self,
            op: Some(op(reply)),
            answer: Some(answer),
        };
        self.pilot.fly(ask)
    }

    /// Why every operation fails once the driver has stopped: it recorded why before it did,
    /// unless it was dropped.
    fn ended_error(&self) -> Error {
        match self.shared.ended() {
            Some(ended) => ended.error.clone(),
            None => Error::Disconnected(Box::new(Disconnect::driver_dropped())),
        }
    }
}

/// An operation on its way to the driver, then its caller waiting for the answer. A future
/// written out rather than an `async` block: those, nested in the caller's and the pilot's,
/// kept a copy of each other's state at every level (1.7 KB for a call, allocated and copied
/// on every call); this is the operation and two pointers.
pub(crate) struct Ask<'a, T> {
    client: &'a Client,
    /// Sent on the first poll, once the wait has boarded: the driver's wake-up is then the
    /// pilot's to take, not the background task's.
    op: Option<Op>,
    /// Taken once answered.
    answer: Option<oneshot::Receiver<Result<T, Error>>>,
}

impl<T> Future for Ask<'_, T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, Error>> {
        let this = &mut *self;
        if let Some(op) = this.op.take()
            && this.client.ops.send(op).is_err()
        {
            this.answer = None;
            return Poll::Ready(Err(this.client.ended_error()));
        }
        let Some(answer) = &this.answer else {
            // Polled again after it returned its answer.
            return Poll::Pending;
        };
        let answered = std::task::ready!(answer.poll_recv(cx));
        this.answer = None;
        Poll::Ready(answered.unwrap_or_else(|oneshot::Closed| Err(this.client.ended_error())))
    }
}

impl<T> Drop for Ask<'_, T> {
    /// A caller that drops its wait (a timeout of its own, a select) stops waiting, and the
    /// server is told to stop working on it too: the answer channel is closed first, then
    /// the driver told, which cancels every request whose channel is closed.
    fn drop(&mut self) {
        if self.op.is_none()
            && let Some(answer) = self.answer.take()
        {
            drop(answer);
            // The queue is unbounded, so this never waits; a stopped driver needs no telling.
            let _ = self.client.ops.send(Op::Abandoned);
        }
    }
}
