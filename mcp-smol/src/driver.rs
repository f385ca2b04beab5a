//! The driver: one future that owns the connection and its byte stream: a spawned child's
//! pipes (the child too), or any stream someone else opened (a Unix socket).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use async_io::Timer;
use futures_lite::StreamExt;
use futures_lite::future::FutureExt;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use proto::{
    CloseReason, Connection, Event, Notification, Request, RequestError, RpcError, ServerInfo,
    ServerRequest, ServerRequestId,
};
use rustix::process::Signal;
use serde_json::Value;

use crate::buffer::ReadBuffer;
use crate::pipe::PipeInput;
use crate::process::{self, StderrReader, StderrTail};
use crate::{Disconnect, Error, Options};

mod callers;
mod pilot;
pub(crate) use callers::Callers;
pub(crate) use pilot::Pilot;

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
        reply: Reply<Value>,
    },
    WaitReady(Reply<ServerInfo>),
    Subscribe(Sender<Notification>),
    /// From now on, server requests of declared capabilities go here to be answered.
    Answer(Sender<ServerRequest>),
    Respond {
        id: ServerRequestId,
        result: Result<Value, RpcError>,
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
            Op::Subscribe(_) | Op::Answer(_) | Op::Respond { .. } | Op::Abandoned | Op::Close => {}
        }
    }
}

/// What the server writes: a stream's read half (a child's stdout is an [`Incoming::Pipe`]).
pub(crate) type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// What the server reads: a child's stdin, or a stream's write half.
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// State the handles read without asking the driver.
pub(crate) struct Shared {
    /// The child's pid; 0 over a stream, where there is no process of ours.
    pub(crate) pid: u32,
    /// Set once, before the driver stops taking operations.
    pub(crate) disconnect: OnceLock<Disconnect>,
    /// Why the connection could not start, when that says more than the disconnect (an HTTP
    /// server that needs authorization, or that could not be reached): what `wait_ready`
    /// reports, even to a caller that asks after the end.
    pub(crate) failure: OnceLock<Error>,
    stderr: Arc<Mutex<StderrTail>>,
    /// Closed by the driver when the server has been reaped.
    pub(crate) done: Receiver<()>,
    /// Holds a message once the grace period is to be skipped.
    terminate: Sender<()>,
}

impl Shared {
    /// For a driver with no process and no stderr (HTTP): pid 0, and terminate has nothing
    /// to cut short.
    pub(crate) fn without_process(done: Receiver<()>) -> Self {
        let (terminate, _) = async_channel::bounded(1);
        Self {
            pid: 0,
            disconnect: OnceLock::new(),
            failure: OnceLock::new(),
            stderr: Arc::default(),
            done,
            terminate,
        }
    }

    pub(crate) fn stderr_tail(&self) -> Vec<String> {
        self.stderr.lock().map(|t| t.lines()).unwrap_or_default()
    }

    /// Asks for shutdown without the grace period, whenever it comes or if it has begun.
    pub(crate) fn terminate(&self) {
        let _ = self.terminate.try_send(());
    }
}

/// How many bytes may wait for the server's stdin before we stop reading its stdout: far more
/// than usual requests, so in practice only a server that has stopped reading meets it.
const MAX_OUTGOING: usize = 64 * 1024 * 1024;

/// How long close waits for a SIGKILLed server to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// After the server exits, how long its stdout and stderr may take to deliver what it wrote.
const EXIT_DRAIN: Duration = Duration::from_millis(250);

/// Spawns the server; returns the handles' side of the channel, their shared state, and the
/// driver future.
pub(crate) fn spawn(
    command: &process::ServerCommand,
    mut options: Options,
) -> Result<(Sender<Op>, Arc<Shared>, Driver), Error> {
    let spawned = process::spawn(command)?;
    let pid = spawned.child.id();
    // From here on, any way out, an early error included, takes the whole group down.
    let group_guard = GroupGuard(pid);
    let connection = Connection::new(Instant::now(), options.core.clone());

    let (ops_sender, ops) = async_channel::unbounded();
    let (done_sender, done) = async_channel::bounded(1);
    let tail = Arc::new(Mutex::new(StderrTail::default()));
    let (terminate, terminated) = async_channel::bounded(1);
    let shared = Arc::new(Shared {
        pid,
        disconnect: OnceLock::new(),
        failure: OnceLock::new(),
        stderr: tail.clone(),
        done,
        terminate,
    });
    let registration_error = |error: std::io::Error| Error::Spawn {
        program: command.program.clone(),
        reason: format!("cannot watch its pipes: {error}"),
    };
    let stderr = StderrReader::new(spawned.stderr, tail, options.stderr_sink.take())
        .map_err(registration_error)?;
    let stdout = PipeInput::new(spawned.stdout).map_err(registration_error)?;
    let stdin = async_io::Async::new(spawned.stdin).map_err(registration_error)?;
    let process = Process {
        child: spawned.child,
        pid,
        stderr,
        exited: false,
    };
    let wiring = Wiring {
        connection,
        ops,
        shared: shared.clone(),
        done_sender,
        terminated,
    };
    let driver = wiring.build(
        Incoming::Pipe(stdout),
        Box::new(stdin),
        Some(process),
        options,
    );
    let main = async move {
        let _group_guard = group_guard;
        driver.await;
    };
    Ok((ops_sender, shared, Driver(Box::pin(main))))
}

/// Drives a connection over a stream someone else opened; there is no process to watch or
/// stop, and closing shuts the stream's write side so the server sees EOF.
pub(crate) fn over_stream(
    reader: Reader,
    writer: Writer,
    options: Options,
) -> (Sender<Op>, Arc<Shared>, Driver) {
    let connection = Connection::new(Instant::now(), options.core.clone());
    let (ops_sender, ops) = async_channel::unbounded();
    let (done_sender, done) = async_channel::bounded(1);
    let (terminate, terminated) = async_channel::bounded(1);
    let shared = Arc::new(Shared {
        pid: 0,
        disconnect: OnceLock::new(),
        failure: OnceLock::new(),
        stderr: Arc::default(),
        done,
        terminate,
    });
    let wiring = Wiring {
        connection,
        ops,
        shared: shared.clone(),
        done_sender,
        terminated,
    };
    let driver = wiring.build(Incoming::Stream(reader), writer, None, options);
    (ops_sender, shared, Driver(Box::pin(driver)))
}

/// What both kinds of driver are made of, besides the stream.
struct Wiring {
    connection: Connection,
    ops: Receiver<Op>,
    shared: Arc<Shared>,
    done_sender: Sender<()>,
    terminated: Receiver<()>,
}

impl Wiring {
    fn build(
        self,
        stdout: Incoming,
        stdin: Writer,
        process: Option<Process>,
        options: Options,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut driver = Loop {
            connection: self.connection,
            process,
            stdout,
            stdin: Some(stdin),
            outgoing: VecDeque::new(),
            ops: Box::pin(self.ops),
            shared: self.shared,
            options,
            callers: Callers::default(),
            exit_status: None,
            last_skipped: None,
            timer: Timer::never(),
            timer_armed: None,
            terminated: self.terminated,
        };
        let done_sender = self.done_sender;
        async move {
            let reason = driver.run().await;
            driver.shut_down(reason).await;
            drop(done_sender);
        }
    }
}

/// Kills the whole group if the driver is dropped before it finished: nothing may outlive us.
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        process::signal_group(self.0, Signal::KILL);
    }
}

enum Wake {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    Op(Option<Op>),
    Timeout,
    Exited(std::io::Result<ExitStatus>),
    /// A piece of stderr was passed on.
    Stderr,
}

/// What the server writes: a child's stdout, read once the reactor says it holds something,
/// or a stream's read half.
pub(crate) enum Incoming {
    Pipe(PipeInput),
    Stream(Reader),
}

impl Incoming {
    async fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Incoming::Pipe(pipe) => pipe.read(buffer).await,
            Incoming::Stream(stream) => stream.read(buffer).await,
        }
    }
}

/// The child a driver spawned, which it must see gone before it ends.
struct Process {
    child: process::Child,
    pid: u32,
    stderr: StderrReader,
    /// Its exit has been seen (or could not be waited for): the loop stops watching.
    exited: bool,
}

struct Loop {
    connection: Connection,
    /// `None` over a stream.
    process: Option<Process>,
    stdout: Incoming,
    /// `None` once closed, or once the server stopped reading it.
    stdin: Option<Writer>,
    /// Bytes the core produced that the pipe has not taken yet. A ring, so that taking the
    /// front after each partial write costs nothing however large the backlog.
    outgoing: VecDeque<u8>,
    /// Pinned, to be polled as a stream (see [`Loop::next_wake`]).
    ops: Pin<Box<Receiver<Op>>>,
    shared: Arc<Shared>,
    options: Options,
    callers: Callers,
    exit_status: Option<ExitStatus>,
    /// Why the last skipped stdout line was skipped, for the disconnect report.
    last_skipped: Option<String>,
    /// One timer, re-armed only when the deadline moves earlier: a later deadline just costs
    /// one early wake-up, where re-arming on every turn would cost a reactor round trip each.
    timer: Timer,
    timer_armed: Option<Instant>,
    /// A message here means: skip the grace period.
    terminated: Receiver<()>,
}

impl Loop {
    /// Feeds the connection until it closes; returns why.
    async fn run(&mut self) -> CloseReason {
        let mut buffer = ReadBuffer::new(8 * 1024, 64 * 1024);
        let mut eof_deadline: Option<Instant> = None;
        loop {
            while let Some(line) = self.connection.poll_transmit() {
                self.outgoing.extend(&line);
            }
            // Usually the pipe takes it all at once; the rest waits for it to become writable.
            if !self.outgoing.is_empty() {
                let written = futures_lite::future::poll_once(self.write_some()).await;
                if let Some(written) = written {
                    self.wrote(written);
                }
            }
            while let Some(event) = self.connection.poll_event() {
                if let Event::Closed(reason) = event {
                    return reason;
                }
                self.dispatch(event);
            }
            let deadline = [self.connection.poll_timeout(), eof_deadline]
                .into_iter()
                .flatten()
                .min();
            let wake = self.next_wake(&mut buffer, deadline).await;
            let now = Instant::now();
            match wake {
                Wake::Read(Ok(0) | Err(_)) => self.connection.handle_eof(now),
                Wake::Read(Ok(n)) => {
                    self.connection.handle_bytes(now, &buffer[..n]);
                    buffer.grow_if_filled(n);
                }
                Wake::Wrote(written) => self.wrote(written),
                Wake::Op(Some(op)) => {
                    self.apply(now, op);
                    // Whatever else is queued goes out in the same write: with many calls in
                    // flight, one write (one wake-up of the server) carries them all.
                    while let Ok(op) = self.ops.try_recv() {
                        self.apply(now, op);
                    }
                }
                // Every handle is gone.
                Wake::Op(None) => self.connection.close(),
                Wake::Timeout if eof_deadline.is_some_and(|d| d <= now) => {
                    // Something outside the group still holds stdout open.
                    self.connection.handle_eof(now);
                }
                Wake::Timeout => self.connection.handle_timeout(now),
                Wake::Exited(status) => {
                    self.exit_status = status.ok();
                    // Orphans it left in the group must not keep stdout open.
                    if let Some(process) = &mut self.process {
                        process.exited = true;
                        process::signal_group(process.pid, Signal::TERM);
                    }
                    eof_deadline = Some(now + EXIT_DRAIN);
                }
                Wake::Stderr => {}
            }
        }
    }

    async fn next_wake(&mut self, buffer: &mut [u8], deadline: Option<Instant>) -> Wake {
        if let Some(deadline) = deadline
            && self.timer_armed.is_none_or(|armed| deadline < armed)
        {
            self.timer.set_at(deadline);
            self.timer_armed = Some(deadline);
        }
        // A server that sends requests but never reads our answers must not grow our memory
        // without bound: while the backlog is this large, its stdout waits.
        let backlogged = self.outgoing.len() > MAX_OUTGOING;
        let read = async {
            if backlogged {
                std::future::pending::<()>().await;
            }
            Wake::Read(self.stdout.read(buffer).await)
        };
        let write = async {
            match (&mut self.stdin, self.outgoing.is_empty()) {
                (Some(stdin), false) => Wake::Wrote(stdin.write(self.outgoing.as_slices().0).await),
                _ => std::future::pending().await,
            }
        };
        // As a stream the receiver keeps its listener from one wait to the next, where each
        // `recv()` would make and drop one.
        let op = async { Wake::Op(self.ops.next().await) };
        let armed = self.timer_armed.is_some();
        let timer = &mut self.timer;
        let timer_armed = &mut self.timer_armed;
        let timeout = async move {
            if !armed {
                std::future::pending::<()>().await;
            }
            timer.await;
            *timer_armed = None;
            Wake::Timeout
        };
        let (exit, stderr) = match &mut self.process {
            Some(Process {
                child,
                stderr,
                exited,
                ..
            }) => (Some(child).filter(|_| !*exited), Some(stderr)),
            None => (None, None),
        };
        let exit = async {
            match exit {
                Some(child) => Wake::Exited(child.exit().await),
                None => std::future::pending().await,
            }
        };
        let stderr = async {
            match stderr {
                Some(stderr) => {
                    stderr.pump().await;
                    Wake::Stderr
                }
                None => std::future::pending().await,
            }
        };
        // `race` picks fairly among ready futures, so a flooding server cannot starve timers.
        (read.race(write).race(op).race(timeout))
            .race(exit.race(stderr))
            .await
    }

    async fn write_some(&mut self) -> std::io::Result<usize> {
        match &mut self.stdin {
            Some(stdin) => stdin.write(self.outgoing.as_slices().0).await,
            None => Ok(self.outgoing.len()),
        }
    }

    fn wrote(&mut self, written: std::io::Result<usize>) {
        match written {
            Ok(n) => {
                self.outgoing.drain(..n);
                // A server on our CPU often answers before we come to read.
                if let Incoming::Pipe(pipe) = &mut self.stdout {
                    pipe.expect();
                }
            }
            // The server stopped reading; its exit or EOF will end the connection.
            Err(_) => {
                self.stdin = None;
                self.outgoing.clear();
            }
        }
    }

    fn apply(&mut self, now: Instant, op: Op) {
        self.callers.apply(&mut self.connection, now, op, true);
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Ready(info) => self.callers.ready(&info),
            // Failures caused by the close are answered once we know how the server ended.
            Event::Response {
                result: Err(RequestError::Closed(_)),
                ..
            } => {}
            Event::Response { id, result } => {
                self.callers.answer(id, result.map_err(Error::from_request));
            }
            Event::Notification(notification) => self.callers.notify(&notification),
            Event::ServerRequest(request) => self.callers.pass_on(&mut self.connection, request),
            Event::Malformed(error) => self.last_skipped = Some(error.to_string()),
            Event::Closed(_) => {}
        }
    }

    /// Fails whatever is still waiting, then makes sure the server and its group are gone.
    async fn shut_down(mut self, reason: CloseReason) {
        // A server that never answered `initialize` is not waited on for a graceful exit: the
        // caller has already waited the whole handshake budget.
        if matches!(reason, CloseReason::HandshakeTimedOut { .. }) {
            self.shared.terminate();
        }
        let server_ended = matches!(reason, CloseReason::Eof);
        if server_ended
            && self.exit_status.is_none()
            && let Some(process) = &mut self.process
        {
            let status = async { process.child.exit().await.ok() };
            let status = status.or(async {
                Timer::after(EXIT_DRAIN).await;
                None
            });
            self.exit_status = process.stderr.beside(status).await;
        }
        if self.exit_status.is_some() {
            // Catch the server's last words before we quote them.
            self.stderr_drained().await;
        }
        let disconnect = Disconnect {
            reason,
            exit_status: self.exit_status,
            stderr: self.shared.stderr_tail(),
            skipped_lines: self.connection.stats().malformed_lines,
            last_skipped: self.last_skipped.take(),
        };
        let _ = self.shared.disconnect.set(disconnect.clone());
        let error = Error::Disconnected(Box::new(disconnect));
        self.refuse_operations(&error);
        self.callers.fail_all(&error, &error);
        // A last non-blocking try for queued lines (cancellations), then stdin closes.
        while !self.outgoing.is_empty() && self.stdin.is_some() {
            match futures_lite::future::poll_once(self.write_some()).await {
                Some(written) => self.wrote(written),
                None => break,
            }
        }
        // Dropping a stream's write half leaves the socket open while its read half lives:
        // the server sees EOF only from a shutdown.
        if self.process.is_none()
            && let Some(stdin) = &mut self.stdin
        {
            let _ = futures_lite::future::poll_once(stdin.close()).await;
        }
        self.stdin = None;
        self.reap().await;
        // The group is gone, so stderr ends now: let the sink take the server's last lines
        // before close returns.
        self.stderr_drained().await;
    }

    /// Reads stderr until EOF, or `EXIT_DRAIN` at most (a process that left the group may
    /// hold the pipe open).
    async fn stderr_drained(&mut self) {
        if let Some(process) = &mut self.process {
            let timer = async {
                Timer::after(EXIT_DRAIN).await;
            };
            process.stderr.drain().or(timer).await;
        }
    }

    /// Stops taking operations and fails those already queued. A queued operation holds its
    /// reply sender for as long as any handle keeps the channel alive, so one left in the
    /// queue would leave its caller waiting forever.
    fn refuse_operations(&mut self, error: &Error) {
        self.ops.close();
        while let Ok(op) = self.ops.try_recv() {
            op.fail(error.clone());
        }
    }

    /// Grace period (unless terminated), SIGTERM to the group, SIGKILL to the group, reap.
    async fn reap(&mut self) {
        let Some(pid) = self.process.as_ref().map(|process| process.pid) else {
            return;
        };
        if self.exit_status.is_none() && !self.wait_grace().await {
            process::signal_group(pid, Signal::TERM);
            if !self.wait_exit(self.options.term_period).await {
                process::signal_group(pid, Signal::KILL);
                // SIGKILL cannot be ignored, but a process stuck in the kernel (a dead network
                // mount) takes it only when it wakes: close must not wait for that. The child
                // is reaped in the background when it does.
                self.wait_exit(KILL_WAIT).await;
            }
        }
        // The leader is gone; whatever it started and left behind goes too.
        process::signal_group(pid, Signal::KILL);
    }

    /// Waits out the grace period for the exit; `false` if it did not come, or if
    /// [`Client::terminate`](crate::Client::terminate) cut the wait short.
    async fn wait_grace(&mut self) -> bool {
        let terminated = self.terminated.clone();
        if terminated.try_recv().is_ok() {
            return false;
        }
        let grace = self.options.grace_period;
        let cut_short = async {
            let _ = terminated.recv().await;
            false
        };
        self.wait_exit(grace).or(cut_short).await
    }

    async fn wait_exit(&mut self, within: Duration) -> bool {
        let Some(process) = &mut self.process else {
            return true;
        };
        let exited = async { process.child.exit().await.is_ok() };
        let exited = exited.or(async {
            Timer::after(within).await;
            false
        });
        // A server that says a lot on its way out must not block on a full stderr pipe.
        process.stderr.beside(exited).await
    }
}

impl Drop for Loop {
    /// Also when the driver future is dropped unfinished: no caller may be left waiting.
    fn drop(&mut self) {
        let disconnect = self.shared.disconnect.get().cloned();
        let disconnect = disconnect.unwrap_or_else(Disconnect::driver_dropped);
        self.refuse_operations(&Error::Disconnected(Box::new(disconnect)));
    }
}
