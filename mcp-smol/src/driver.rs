//! The driver: one future that owns a connection and its byte stream, and one loop that both
//! roles run over any byte stream ([`Loop`]): a client over a spawned server's pipes (the
//! process too, see [`crate::process`]) or over a stream someone else opened (a Unix
//! socket), and the server role of [`serve`](crate::serve). What differs between them is the
//! core and what its events mean ([`Role`]), and how they shut down.
//!
//! Beside it, in `driver/`:
//!
//! - `callers.rs`: who the driver answers: waiting callers, listeners, answerers
//! - `on_caller.rs`: the pilot: a waiting caller driving the connection itself
//! - `progress.rs`: where progress reports on a caller's requests arrive

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use async_io::Timer;
use futures_lite::StreamExt;
use futures_lite::future::FutureExt;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use proto::{
    CloseReason, Connection, Event, Notification, RawResult, Request, RequestError, RpcError,
    ServerInfo, ServerRequest, ServerRequestId,
};
use serde_json::Value;

use crate::buffer::ReadBuffer;
use crate::process::{self, ServerProcess, StderrTail};
use crate::{Disconnect, Error, Options};

mod callers;
mod on_caller;
mod progress;
pub(crate) use callers::{Callers, Waiters};
pub(crate) use on_caller::Pilot;
pub use progress::ProgressInbox;
pub(crate) use progress::Route;

/// Runs one server connection to its end; see [`start`](crate::start). Poll it on any
/// executor. When it completes, the server and its process group are gone.
pub struct Driver(pub(crate) Pin<Box<dyn Future<Output = ()> + Send>>);

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Driver")
    }
}

/// Where a caller hears its answer.
pub(crate) type Reply<T> = crate::oneshot::Sender<Result<T, Error>>;

/// What a handle asks of the driver.
pub(crate) enum Op {
    Request {
        request: Request,
        reply: Reply<RawResult>,
        /// Where the server's progress on the request goes, when its caller hears it.
        progress: Option<Route>,
    },
    WaitReady(Reply<ServerInfo>),
    Subscribe(Sender<Notification>),
    /// From now on, server requests of declared capabilities go here to be answered.
    Answer(Sender<ServerRequest>),
    Respond {
        id: ServerRequestId,
        result: Result<Value, RpcError>,
    },
    /// A notification of ours for the server.
    Notify {
        method: String,
        params: Option<Value>,
    },
    /// A caller stopped waiting for an answer: cancel the requests nobody waits for.
    Abandoned,
    Close,
}

impl Op {
    /// Answers an operation the driver can no longer carry out.
    pub(crate) fn fail(self, error: Error) {
        match self {
            Op::Request { reply, .. } => reply.send(Err(error)),
            Op::WaitReady(reply) => reply.send(Err(error)),
            Op::Subscribe(_)
            | Op::Answer(_)
            | Op::Respond { .. }
            | Op::Notify { .. }
            | Op::Abandoned
            | Op::Close => {}
        }
    }
}

/// What the peer writes: a stream's read half.
pub(crate) type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// What the peer reads: a child's stdin, or a stream's write half.
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Why a connection ended, recorded once: every caller of a dead connection hears `error`.
#[derive(Clone, Debug)]
pub(crate) struct Ended {
    /// How it ended, for [`Client::disconnect`](crate::Client::disconnect).
    pub(crate) disconnect: Disconnect,
    /// What every caller hears: the disconnect, or why the connection could not start where
    /// that says more (an HTTP server that needs authorization, or could not be reached).
    pub(crate) error: Error,
}

/// State the handles read without asking the driver.
pub(crate) struct Shared {
    /// The child's pid; 0 where there is no process of ours.
    pub(crate) pid: u32,
    /// Set once, before the driver stops taking operations.
    ended: OnceLock<Ended>,
    stderr: Arc<Mutex<StderrTail>>,
    /// Closed by the driver when the server has been reaped.
    pub(crate) done: Receiver<()>,
    /// Holds a message once the grace period is to be skipped.
    terminate: Sender<()>,
    /// The tools the last `tools/list` left out (HTTP, stateless era), as the driver last
    /// saw them.
    pub(crate) rejected_tools: Mutex<Vec<proto::RejectedTool>>,
    /// The sandbox's proxy listener, until the host takes it.
    pub(crate) proxy_listener: Mutex<Option<std::net::TcpListener>>,
}

impl Shared {
    /// For a driver with no process and no stderr (HTTP): pid 0, and terminate has nothing
    /// to cut short.
    pub(crate) fn without_process(done: Receiver<()>) -> Self {
        let (terminate, _) = async_channel::bounded(1);
        Self::new(0, Arc::default(), done, terminate)
    }

    fn new(
        pid: u32,
        stderr: Arc<Mutex<StderrTail>>,
        done: Receiver<()>,
        terminate: Sender<()>,
    ) -> Self {
        Self {
            pid,
            ended: OnceLock::new(),
            stderr,
            done,
            terminate,
            rejected_tools: Mutex::default(),
            proxy_listener: Mutex::default(),
        }
    }

    /// Records why the connection ended, unless that is known already; returns the error
    /// every caller hears: `error`, or the disconnect itself when `None`.
    pub(crate) fn end(&self, disconnect: Disconnect, error: Option<Error>) -> Error {
        let ended = self.ended.get_or_init(|| Ended {
            error: error.unwrap_or_else(|| Error::Disconnected(Box::new(disconnect.clone()))),
            disconnect,
        });
        ended.error.clone()
    }

    /// How the connection ended, if it has.
    pub(crate) fn ended(&self) -> Option<&Ended> {
        self.ended.get()
    }

    pub(crate) fn stderr_tail(&self) -> Vec<String> {
        self.stderr.lock().map(|t| t.lines()).unwrap_or_default()
    }

    /// The stderr lines written since the last request was answered with none left waiting:
    /// what a failure is reported with (older lines belong to work that went well).
    fn recent_stderr(&self) -> Vec<String> {
        self.stderr.lock().map(|t| t.recent()).unwrap_or_default()
    }

    /// Asks for shutdown without the grace period, whenever it comes or if it has begun.
    pub(crate) fn terminate(&self) {
        let _ = self.terminate.try_send(());
    }
}

/// How many bytes may wait for the peer to read before we stop reading what it writes: far
/// more than usual messages, so in practice only a peer that has stopped reading meets it.
const MAX_OUTGOING: usize = 64 * 1024 * 1024;

/// A role's sans-IO core, as the loop feeds it: [`Connection`] or
/// [`ServerConnection`](proto::ServerConnection).
pub(crate) trait Core {
    type Event;
    fn poll_transmit(&mut self) -> Option<Vec<u8>>;
    fn poll_event(&mut self) -> Option<Self::Event>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_bytes(&mut self, now: Instant, bytes: &[u8]);
    fn handle_eof(&mut self, now: Instant);
    fn handle_timeout(&mut self, now: Instant);
    fn close(&mut self);
}

macro_rules! core_of {
    ($core:ty, $event:ty, $poll_event:ident) => {
        impl Core for $core {
            type Event = $event;
            fn poll_transmit(&mut self) -> Option<Vec<u8>> {
                self.poll_transmit()
            }
            fn poll_event(&mut self) -> Option<$event> {
                self.$poll_event()
            }
            fn poll_timeout(&self) -> Option<Instant> {
                self.poll_timeout()
            }
            fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
                self.handle_bytes(now, bytes);
            }
            fn handle_eof(&mut self, now: Instant) {
                self.handle_eof(now);
            }
            fn handle_timeout(&mut self, now: Instant) {
                self.handle_timeout(now);
            }
            fn close(&mut self) {
                self.close();
            }
        }
    };
}

// Results stay text until their callers read them, each on its own task.
core_of!(Connection, Event<RawResult>, poll_raw_event);
core_of!(proto::ServerConnection, proto::ServerEvent, poll_event);

/// One role: its core, and what its handles' operations and its core's events mean.
pub(crate) trait Role {
    type Core: Core;
    type Op;
    fn core(&mut self) -> &mut Self::Core;
    fn apply(&mut self, now: Instant, op: Self::Op);
    /// Passes one event on; `true` if it says the connection has closed.
    fn dispatch(&mut self, event: <Self::Core as Core>::Event) -> bool;
    /// The peer stopped reading what we write.
    fn write_failed(&mut self) {}
}

/// What the peer writes: a child's stdout (read beside its stderr and its exit), or a
/// stream's read half.
pub(crate) enum Incoming {
    Process(Box<ServerProcess>),
    Stream(Reader),
}

/// The byte stream, both ways.
pub(crate) struct Link {
    pub(crate) incoming: Incoming,
    /// `None` once closed, or once the peer stopped reading.
    writer: Option<Writer>,
    /// Bytes the core produced that the writer has not taken yet. A ring, so that taking the
    /// front after each partial write costs nothing however large the backlog; made
    /// contiguous before each write, so that one write takes all that is queued where the
    /// ring wraps (in two writes, the peer would wake twice). That moves each byte once at
    /// most per lap of the ring.
    outgoing: VecDeque<u8>,
}

impl Incoming {
    async fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Incoming::Process(process) => process.read(buffer).await,
            Incoming::Stream(stream) => stream.read(buffer).await,
        }
    }
}

impl Link {
    pub(crate) fn new(incoming: Incoming, writer: Writer) -> Self {
        Self {
            incoming,
            writer: Some(writer),
            outgoing: VecDeque::new(),
        }
    }

    /// One write call only: the future must complete the moment the writer has taken the
    /// bytes, or a race lost later would leave them queued to be written again.
    async fn write_some(&mut self) -> std::io::Result<usize> {
        match &mut self.writer {
            Some(writer) => writer.write(self.outgoing.make_contiguous()).await,
            None => Ok(self.outgoing.len()),
        }
    }

    /// Takes note of a write; `false` if the peer has stopped reading.
    async fn wrote(&mut self, written: std::io::Result<usize>) -> bool {
        match (written, &mut self.writer) {
            (Ok(n), Some(writer)) => {
                self.outgoing.drain(..n);
                // A server on our CPU often answers before we come to read.
                if let Incoming::Process(process) = &mut self.incoming {
                    process.expect();
                }
                if self.outgoing.is_empty() {
                    // Buffered writers (our own stdout) pass the lines on now.
                    let _ = futures_lite::future::poll_once(writer.flush()).await;
                }
                true
            }
            (Ok(_), None) => {
                self.outgoing.clear();
                true
            }
            (Err(_), _) => {
                self.writer = None;
                self.outgoing.clear();
                false
            }
        }
    }

    /// Writes what is queued for `limit` at most, then closes the writer: a stream's peer
    /// sees EOF only from a shutdown, while its read half lives on.
    pub(crate) async fn finish(&mut self, limit: Duration) {
        if let Some(writer) = &mut self.writer {
            let (front, back) = self.outgoing.as_slices();
            let written = async {
                let _ = writer.write_all(front).await;
                let _ = writer.write_all(back).await;
                let _ = writer.flush().await;
            };
            written
                .or(async {
                    Timer::after(limit).await;
                })
                .await;
            let _ = futures_lite::future::poll_once(writer.close()).await;
        }
        self.writer = None;
        self.outgoing.clear();
    }
}

/// The one loop of every byte-stream driver. Each turn feeds the core, writes what it
/// produced, hands out its events, then waits for exactly one of: bytes from the peer (or
/// room to write), an operation from a handle, the core's deadline.
pub(crate) struct Loop<R: Role> {
    pub(crate) role: R,
    pub(crate) link: Link,
    /// Pinned, to be polled as a stream: it then keeps its listener from one wait to the
    /// next, where each `recv()` would make and drop one.
    ops: Pin<Box<Receiver<R::Op>>>,
    /// One timer, re-armed only when the deadline moves earlier: a later deadline just costs
    /// one early wake-up, where re-arming on every turn would cost a reactor round trip each.
    timer: Timer,
    timer_armed: Option<Instant>,
}

enum Wake<Op> {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    Op(Option<Op>),
    Timeout,
}

impl<R: Role> Loop<R> {
    pub(crate) fn new(role: R, link: Link, ops: Receiver<R::Op>) -> Self {
        Self {
            role,
            link,
            ops: Box::pin(ops),
            timer: Timer::never(),
            timer_armed: None,
        }
    }

    /// Runs until the core says the connection has closed.
    pub(crate) async fn run(&mut self) {
        let mut buffer = ReadBuffer::new(8 * 1024, 64 * 1024);
        loop {
            while let Some(line) = self.role.core().poll_transmit() {
                self.link.outgoing.extend(&line);
            }
            // Usually the peer takes it all at once; the rest waits for room.
            if !self.link.outgoing.is_empty()
                && let Some(written) = futures_lite::future::poll_once(self.link.write_some()).await
                && !self.link.wrote(written).await
            {
                self.role.write_failed();
            }
            let mut closed = false;
            while let Some(event) = self.role.core().poll_event() {
                closed |= self.role.dispatch(event);
            }
            if closed {
                return;
            }
            // What handing out the events queued (a refused server request, the retry of an
            // input round) goes out with the next wake-up's write, not after the one after.
            while let Some(line) = self.role.core().poll_transmit() {
                self.link.outgoing.extend(&line);
            }
            let deadline = self.role.core().poll_timeout();
            let wake = self.next_wake(&mut buffer, deadline).await;
            let now = Instant::now();
            match wake {
                Wake::Read(Ok(0) | Err(_)) => self.role.core().handle_eof(now),
                Wake::Read(Ok(n)) => {
                    self.role.core().handle_bytes(now, &buffer[..n]);
                    buffer.grow_if_filled(n);
                }
                Wake::Wrote(written) => {
                    if !self.link.wrote(written).await {
                        self.role.write_failed();
                    }
                }
                Wake::Op(Some(op)) => {
                    self.role.apply(now, op);
                    // Whatever else is queued goes out in the same write: with many calls in
                    // flight, one write (one wake-up of the peer) carries them all.
                    while let Ok(op) = self.ops.try_recv() {
                        self.role.apply(now, op);
                    }
                }
                // Every handle is gone.
                Wake::Op(None) => self.role.core().close(),
                Wake::Timeout => self.role.core().handle_timeout(now),
            }
        }
    }

    async fn next_wake(&mut self, buffer: &mut [u8], deadline: Option<Instant>) -> Wake<R::Op> {
        if let Some(deadline) = deadline
            && self.timer_armed.is_none_or(|armed| deadline < armed)
        {
            self.timer.set_at(deadline);
            self.timer_armed = Some(deadline);
        }
        // A peer that sends requests but never reads our answers must not grow our memory
        // without bound: while the backlog is this large, what it writes waits.
        let Link {
            incoming,
            writer,
            outgoing,
        } = &mut self.link;
        let backlogged = outgoing.len() > MAX_OUTGOING;
        let read = async {
            if backlogged {
                std::future::pending::<()>().await;
            }
            Wake::Read(incoming.read(buffer).await)
        };
        let write = async {
            match (writer, outgoing.is_empty()) {
                (Some(writer), false) => {
                    Wake::Wrote(writer.write(outgoing.make_contiguous()).await)
                }
                _ => std::future::pending().await,
            }
        };
        let op = async { Wake::Op(self.ops.next().await) };
        let armed = self.timer_armed.is_some();
        let (timer, timer_armed) = (&mut self.timer, &mut self.timer_armed);
        let timeout = async move {
            if !armed {
                std::future::pending::<()>().await;
            }
            timer.await;
            *timer_armed = None;
            Wake::Timeout
        };
        // `race` picks fairly among ready futures, so a flooding peer cannot starve timers.
        read.race(write).race(op).race(timeout).await
    }

    /// Stops taking operations and drops those already queued, whose callers then hear
    /// why the connection ended. One left in the queue would hold its reply sender for as
    /// long as any handle keeps the channel alive, leaving its caller waiting forever.
    pub(crate) fn refuse_operations(&mut self) {
        self.ops.close();
        while self.ops.try_recv().is_ok() {}
    }
}

impl<R: Role> Drop for Loop<R> {
    /// Also when the driver future is dropped unfinished: no caller may be left waiting.
    fn drop(&mut self) {
        self.refuse_operations();
    }
}

/// Spawns the server; returns the handles' side of the channel, their shared state, and the
/// driver future.
pub(crate) fn spawn(
    command: &process::ServerCommand,
    mut options: Options,
) -> Result<(Sender<Op>, Arc<Shared>, Driver), Error> {
    let tail = Arc::new(Mutex::new(StderrTail::default()));
    let (mut process, stdin) = process::spawn(command, tail.clone(), options.stderr_sink.take())?;
    let pid = process.pid();
    let listener = process.proxy_listener.take();
    let incoming = Incoming::Process(Box::new(process));
    let (ops, shared, driver) = client(incoming, Box::new(stdin), pid, tail, options);
    if let Ok(mut slot) = shared.proxy_listener.lock() {
        *slot = listener;
    }
    Ok((ops, shared, driver))
}

/// Drives a connection over a stream someone else opened; there is no process to watch or
/// stop, and closing shuts the stream's write side so the server sees EOF.
pub(crate) fn over_stream(
    reader: Reader,
    writer: Writer,
    options: Options,
) -> (Sender<Op>, Arc<Shared>, Driver) {
    client(Incoming::Stream(reader), writer, 0, Arc::default(), options)
}

fn client(
    incoming: Incoming,
    writer: Writer,
    pid: u32,
    tail: Arc<Mutex<StderrTail>>,
    options: Options,
) -> (Sender<Op>, Arc<Shared>, Driver) {
    let (ops_sender, ops) = async_channel::unbounded();
    let (done_sender, done) = async_channel::bounded(1);
    let (terminate, terminated) = async_channel::bounded(1);
    let shared = Arc::new(Shared::new(pid, tail.clone(), done, terminate));
    let role = ClientRole {
        connection: Connection::new(Instant::now(), options.core.clone()).results_as_text(),
        callers: Callers::default(),
        stderr: tail,
        last_skipped: None,
        reason: None,
    };
    let mut driver = Loop::new(role, Link::new(incoming, writer), ops);
    let ours = shared.clone();
    let main = async move {
        driver.run().await;
        let periods = (options.grace_period, options.term_period);
        drop(options);
        shut_down(&mut driver, &ours, periods, &terminated).await;
        drop(done_sender);
    };
    (ops_sender, shared, Driver(Box::pin(main)))
}

/// The client role over a byte stream.
struct ClientRole {
    connection: Connection,
    callers: Callers,
    /// The server's stderr, marked whenever nothing is left waiting for an answer.
    stderr: Arc<Mutex<StderrTail>>,
    /// Why the last skipped line was skipped, for the disconnect report.
    last_skipped: Option<String>,
    /// Set when the core closed.
    reason: Option<CloseReason>,
}

impl Role for ClientRole {
    type Core = Connection;
    type Op = Op;

    fn core(&mut self) -> &mut Connection {
        &mut self.connection
    }

    fn apply(&mut self, now: Instant, op: Op) {
        self.callers.apply(&mut self.connection, now, op, true);
    }

    fn dispatch(&mut self, event: Event<RawResult>) -> bool {
        let answered = matches!(event, Event::Ready(_) | Event::Response { .. });
        match event {
            Event::Ready(info) => self.callers.ready(&info),
            // Failures caused by the close are answered once we know how the server ended.
            Event::Response {
                result: Err(RequestError::Closed(_)),
                ..
            } => {}
            Event::Response { id, result } => {
                self.callers
                    .answer_raw(id, result.map_err(Error::from_request));
            }
            Event::Notification(notification) => self.callers.notify(&notification),
            Event::ServerRequest(request) => self.callers.pass_on(&mut self.connection, request),
            Event::Malformed(error) => self.last_skipped = Some(error.to_string()),
            Event::Closed(reason) => {
                self.reason = Some(reason);
                return true;
            }
        }
        // What stderr said so far went with work that is done: a failure after this is
        // reported with what comes after (issue 47: a crash quoted an old, unrelated error).
        if answered
            && self.callers.idle()
            && let Ok(mut tail) = self.stderr.lock()
        {
            tail.mark();
        }
        false
    }
}

/// Records how the connection ended, fails whatever is still waiting with that, then makes
/// sure the server and its group are gone.
async fn shut_down(
    driver: &mut Loop<ClientRole>,
    shared: &Shared,
    (grace, term): (Duration, Duration),
    terminated: &Receiver<()>,
) {
    let reason = driver.role.reason.take().unwrap_or(CloseReason::Local);
    // A server that never answered `initialize` is not waited on for a graceful exit: the
    // caller has already waited the whole handshake budget.
    if matches!(reason, CloseReason::HandshakeTimedOut { .. }) {
        shared.terminate();
    }
    let exit_status = match &mut driver.link.incoming {
        Incoming::Process(process) => {
            let closed_stdout = matches!(reason, CloseReason::Eof | CloseReason::EndedOnProbe);
            process.settle(closed_stdout).await
        }
        Incoming::Stream(_) => None,
    };
    let disconnect = Disconnect {
        reason,
        exit_status,
        stderr: shared.recent_stderr(),
        skipped_lines: driver.role.connection.stats().malformed_lines,
        last_skipped: driver.role.last_skipped.take(),
    };
    let error = shared.end(disconnect, None);
    driver.refuse_operations();
    driver.role.callers.fail_all(&error);
    // A last try for queued lines (cancellations), then stdin or the write half closes.
    driver.link.finish(Duration::ZERO).await;
    if let Incoming::Process(process) = &mut driver.link.incoming {
        process.stop(grace, term, terminated).await;
    }
}
