//! The byte-stream link: what the loop runs over a child's stdio (a server we spawned, read
//! beside its stderr and its exit) or any reader and writer (a Unix socket, our own stdin
//! and stdout for the server role). Lines go out as the core makes them, bytes come in as
//! they arrive; for a client, the end stops the process group.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_channel::Receiver;
use async_io::Timer;
use futures_lite::future::FutureExt;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use proto::{CloseReason, Connection, Event};

use super::{ClientLink, ClientRole, Core, Driver, Link, Loop, Op, Role, Shared, run_client};
use crate::buffer::ReadBuffer;
use crate::process::{self, ServerProcess, StderrTail};
use crate::{Disconnect, Error, Options, queue};

/// What the peer writes: a stream's read half.
pub(crate) type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// What the peer reads: a child's stdin, or a stream's write half.
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// How many bytes may wait for the peer to read before we stop reading what it writes: far
/// more than usual messages, so in practice only a peer that has stopped reading meets it.
const MAX_OUTGOING: usize = 64 * 1024 * 1024;

/// A core fed with bytes: [`Connection`] or [`ServerConnection`](proto::server::ServerConnection).
pub(crate) trait ByteCore: Core {
    fn poll_transmit(&mut self) -> Option<Vec<u8>>;
    fn handle_bytes(&mut self, now: Instant, bytes: &[u8]);
    fn handle_eof(&mut self, now: Instant);
}

macro_rules! byte_core_of {
    ($core:ty, $event:ty) => {
        impl Core for $core {
            type Event = $event;
            fn poll_event(&mut self) -> Option<$event> {
                self.poll_event()
            }
            fn poll_timeout(&self) -> Option<Instant> {
                self.poll_timeout()
            }
            fn handle_timeout(&mut self, now: Instant) {
                self.handle_timeout(now);
            }
            fn close(&mut self) {
                self.close();
            }
        }

        impl ByteCore for $core {
            fn poll_transmit(&mut self) -> Option<Vec<u8>> {
                self.poll_transmit()
            }
            fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
                self.handle_bytes(now, bytes);
            }
            fn handle_eof(&mut self, now: Instant) {
                self.handle_eof(now);
            }
        }
    };
}

byte_core_of!(Connection, Event);
byte_core_of!(proto::server::ServerConnection, proto::server::ServerEvent);

/// What the peer writes: a child's stdout (read beside its stderr and its exit), or a
/// stream's read half.
pub(crate) enum Incoming {
    Process(Box<Spawned>),
    Stream(Reader),
}

/// A server of ours, and how it is stopped once the connection is over.
pub(crate) struct Spawned {
    process: ServerProcess,
    grace: Duration,
    term: Duration,
    /// Holds a message once the grace period is to be skipped.
    terminated: Receiver<()>,
}

impl Incoming {
    async fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Incoming::Process(spawned) => spawned.process.read(buffer).await,
            Incoming::Stream(stream) => stream.read(buffer).await,
        }
    }
}

/// The byte stream, both ways.
pub(crate) struct ByteStream {
    incoming: Incoming,
    /// `None` once closed, or once the peer stopped reading.
    writer: Option<Writer>,
    /// Bytes the core produced that the writer has not taken yet. A ring, so that taking the
    /// front after each partial write costs nothing however large the backlog; made
    /// contiguous before each write, so that one write takes all that is queued where the
    /// ring wraps (in two writes, the peer would wake twice). That moves each byte once at
    /// most per lap of the ring.
    outgoing: VecDeque<u8>,
    read_buffer: ReadBuffer,
}

/// What a wake-up from the stream brings.
pub(crate) enum StreamInput {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
}

impl ByteStream {
    pub(crate) fn new(incoming: Incoming, writer: Writer) -> Self {
        Self {
            incoming,
            writer: Some(writer),
            outgoing: VecDeque::new(),
            read_buffer: ReadBuffer::new(8 * 1024, 64 * 1024),
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
                if let Incoming::Process(spawned) = &mut self.incoming {
                    spawned.process.expect();
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
    pub(crate) async fn flush_and_close(&mut self, limit: Duration) {
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

impl<R: Role> Link<R> for ByteStream
where
    R::Core: ByteCore,
{
    type Input = StreamInput;

    async fn send(&mut self, role: &mut R) {
        while let Some(line) = role.core().poll_transmit() {
            self.outgoing.extend(&line);
        }
        // Usually the peer takes it all at once; the rest waits for room.
        if !self.outgoing.is_empty()
            && let Some(written) = futures_lite::future::poll_once(self.write_some()).await
            && !self.wrote(written).await
        {
            role.write_failed();
        }
    }

    async fn next_input(&mut self) -> StreamInput {
        // A peer that sends requests but never reads our answers must not grow our memory
        // without bound: while the backlog is this large, what it writes waits.
        let backlogged = self.outgoing.len() > MAX_OUTGOING;
        let Self {
            incoming,
            writer,
            outgoing,
            read_buffer,
        } = self;
        let read = async {
            if backlogged {
                std::future::pending::<()>().await;
            }
            StreamInput::Read(incoming.read(read_buffer).await)
        };
        let write = async {
            match (writer, outgoing.is_empty()) {
                (Some(writer), false) => {
                    StreamInput::Wrote(writer.write(outgoing.make_contiguous()).await)
                }
                _ => std::future::pending().await,
            }
        };
        read.race(write).await
    }

    async fn handle(&mut self, now: Instant, input: StreamInput, role: &mut R) {
        match input {
            StreamInput::Read(Ok(0) | Err(_)) => role.core().handle_eof(now),
            StreamInput::Read(Ok(n)) => {
                role.core().handle_bytes(now, &self.read_buffer[..n]);
                self.read_buffer.grow_if_filled(n);
            }
            StreamInput::Wrote(written) => {
                if !self.wrote(written).await {
                    role.write_failed();
                }
            }
        }
    }
}

impl ClientLink<Connection> for ByteStream {
    async fn ended(
        &mut self,
        reason: CloseReason,
        role: &mut ClientRole<Connection>,
    ) -> (Disconnect, Option<Error>) {
        // A server that never answered `initialize` is not waited on for a graceful exit: the
        // caller has already waited the whole handshake budget.
        if matches!(reason, CloseReason::HandshakeTimedOut { .. }) {
            role.shared.terminate();
        }
        let exit_status = match &mut self.incoming {
            Incoming::Process(spawned) => {
                let closed_stdout = matches!(reason, CloseReason::Eof | CloseReason::EndedOnProbe);
                spawned.process.settle(closed_stdout).await
            }
            Incoming::Stream(_) => None,
        };
        let disconnect = Disconnect {
            reason,
            exit_status,
            stderr: role.shared.recent_stderr(),
            skipped_lines: role.core.stats().malformed_lines,
            last_skipped: role.last_skipped.take(),
        };
        (disconnect, None)
    }

    async fn finish(&mut self, _: &mut Connection) {
        // A last try for queued lines (cancellations), then stdin or the write half closes.
        self.flush_and_close(Duration::ZERO).await;
        if let Incoming::Process(spawned) = &mut self.incoming {
            let Spawned {
                process,
                grace,
                term,
                terminated,
            } = spawned.as_mut();
            process.stop(*grace, *term, terminated).await;
        }
    }
}

/// Spawns the server; returns the handles' side of the channel, their shared state, and the
/// driver future.
pub(crate) fn spawn(
    command: &process::ServerCommand,
    mut options: Options,
) -> Result<(queue::Sender<Op>, Arc<Shared>, Driver), Error> {
    let tail = Arc::new(Mutex::new(StderrTail::default()));
    let (mut process, stdin) = process::spawn(command, tail.clone(), options.stderr_sink.take())?;
    let pid = process.pid();
    let listener = process.proxy_listener.take();
    let (terminate, terminated) = async_channel::bounded(1);
    let spawned = Spawned {
        process,
        grace: options.grace_period,
        term: options.term_period,
        terminated,
    };
    let incoming = Incoming::Process(Box::new(spawned));
    let shared = |done| Shared::new(pid, tail, done, terminate);
    let (ops, shared, driver) = client(incoming, Box::new(stdin), shared, &options);
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
    options: &Options,
) -> (queue::Sender<Op>, Arc<Shared>, Driver) {
    let incoming = Incoming::Stream(reader);
    client(incoming, writer, Shared::without_process, options)
}

fn client(
    incoming: Incoming,
    writer: Writer,
    shared: impl FnOnce(Receiver<()>) -> Shared,
    options: &Options,
) -> (queue::Sender<Op>, Arc<Shared>, Driver) {
    let (ops_sender, ops) = queue::unbounded();
    let (done_sender, done) = async_channel::bounded(1);
    let shared = Arc::new(shared(done));
    let connection = Connection::new(Instant::now(), options.core.clone());
    let role = ClientRole::new(connection, shared.clone());
    let driver = Loop::new(role, ByteStream::new(incoming, writer), ops);
    let main = async move {
        run_client(driver).await;
        // The server has been reaped.
        drop(done_sender);
    };
    (ops_sender, shared, Driver(Box::pin(main)))
}
