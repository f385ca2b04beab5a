//! The server role over any byte stream: our own stdin and stdout, a Unix socket, a pipe.
//! One driver future owns the [`proto::ServerConnection`] and both halves of the stream; a
//! cheap [`Server`] handle answers the host's requests and sends it notifications.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use async_channel::{Receiver, Sender};
use async_io::Timer;
use futures_lite::future::FutureExt;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use proto::{
    FromResult, HostRequestId, Request, RequestError, RequestId, RpcError, ServerConfig,
    ServerConnection, ServerEvent,
};
use serde_json::Value;

use crate::buffer::ReadBuffer;
use crate::{Error, oneshot};

/// Host notifications beyond this many unread are dropped, so a host that floods them cannot
/// grow our memory. Requests are never dropped: the core caps how many are open.
const MAX_QUEUED_NOTIFICATIONS: usize = 1024;

/// How long the last answers may take to be written once the connection has ended.
const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs one server connection to its end; see [`serve`]. Poll it on any executor.
pub struct ServeDriver(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Future for ServeDriver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for ServeDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServeDriver")
    }
}

/// What a [`Server`] handle asks of the driver.
enum Op {
    Respond {
        id: HostRequestId,
        result: Result<Value, RpcError>,
    },
    Progress {
        id: HostRequestId,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    Notify {
        method: String,
        params: Option<Value>,
    },
    Request {
        request: Request,
        reply: oneshot::Sender<Result<Value, Error>>,
    },
    Close,
}

/// A cheap, cloneable handle to one server connection.
#[derive(Clone, Debug)]
pub struct Server {
    ops: Sender<Op>,
}

/// Starts the server role over `reader` (what the host writes) and `writer` (what it reads).
/// Returns the handle, the stream of [`ServerEvent`]s (requests to answer with
/// [`Server::respond`], cancellations, [`ServerEvent::Closed`] last), and the driver future,
/// which must be polled for anything to happen. Malformed lines are answered and skipped by
/// the core and not passed on.
///
/// The driver ends when the host closes its end (after writing what is queued) or on
/// [`Server::close`]; it then closes `writer`.
pub fn serve<R, W>(
    reader: R,
    writer: W,
    config: ServerConfig,
) -> (Server, Receiver<ServerEvent>, ServeDriver)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (ops_sender, ops) = async_channel::unbounded();
    let (events_sender, events) = async_channel::unbounded();
    let mut driver = Loop {
        connection: ServerConnection::new(Instant::now(), config),
        reader,
        writer,
        outgoing: VecDeque::new(),
        ops,
        events: events_sender,
        waiters: BTreeMap::new(),
        timer: Timer::never(),
    };
    let main = async move { driver.run().await };
    (
        Server { ops: ops_sender },
        events,
        ServeDriver(Box::pin(main)),
    )
}

impl Server {
    /// Answers a [`ServerEvent::Request`]. An answer to a request the host cancelled, or after
    /// the connection ended, is dropped.
    pub fn respond(&self, id: HostRequestId, result: Result<Value, RpcError>) {
        let _ = self.ops.try_send(Op::Respond { id, result });
    }

    /// Reports progress on an open request, with the host's own progress token (if it sent
    /// one; otherwise nothing is sent).
    pub fn progress(
        &self,
        id: HostRequestId,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) {
        let op = Op::Progress {
            id,
            progress,
            total,
            message,
        };
        let _ = self.ops.try_send(op);
    }

    /// Sends a notification (`notifications/tools/list_changed`, ...); dropped before the
    /// handshake is done (but for log messages) and after the connection ended.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        let method = method.to_owned();
        let _ = self.ops.try_send(Op::Notify { method, params });
    }

    /// Sends the host a request ([`Request::elicit`](proto::Request::elicit), or any
    /// [`Request::new`](proto::Request::new)) and reads its result as the request's type.
    pub async fn request<T: FromResult>(&self, request: Request<T>) -> Result<T, Error> {
        let (reply, answer) = oneshot::channel();
        let method = request.method().to_owned();
        let op = Op::Request {
            request: request.untyped(),
            reply,
        };
        let closed = || Error::from_request(RequestError::Closed(proto::CloseReason::Local));
        if self.ops.send(op).await.is_err() {
            return Err(closed());
        }
        let result = answer.recv().await.unwrap_or_else(|_| Err(closed()))?;
        Ok(T::answer(&method, result)?)
    }

    /// Ends the connection: queued lines are written, then the writer is closed.
    pub fn close(&self) {
        let _ = self.ops.try_send(Op::Close);
    }
}

enum Wake {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    Op(Option<Op>),
    Timeout,
}

struct Loop<R, W> {
    connection: ServerConnection,
    reader: R,
    writer: W,
    /// Bytes the core produced that the writer has not taken yet.
    outgoing: VecDeque<u8>,
    ops: Receiver<Op>,
    events: Sender<ServerEvent>,
    waiters: BTreeMap<RequestId, oneshot::Sender<Result<Value, Error>>>,
    timer: Timer,
}

impl<R, W> Loop<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    async fn run(&mut self) {
        let mut buffer = ReadBuffer::new(8 * 1024, 64 * 1024);
        let mut writable = true;
        loop {
            while let Some(line) = self.connection.poll_transmit() {
                if writable {
                    self.outgoing.extend(&line);
                }
            }
            while let Some(event) = self.connection.poll_event() {
                self.dispatch(event);
            }
            if self.connection.is_closed() {
                break;
            }
            match self.connection.poll_timeout() {
                Some(deadline) => self.timer.set_at(deadline),
                None => self.timer = Timer::never(),
            }
            let wake = self.next_wake(&mut buffer).await;
            let now = Instant::now();
            match wake {
                Wake::Read(Ok(0) | Err(_)) => self.connection.handle_eof(now),
                Wake::Read(Ok(n)) => {
                    self.connection.handle_bytes(now, &buffer[..n]);
                    buffer.grow_if_filled(n);
                }
                Wake::Wrote(Ok(n)) => {
                    self.outgoing.drain(..n);
                    if self.outgoing.is_empty() {
                        // Buffered writers (our stdout) pass the lines on now.
                        let _ = futures_lite::future::poll_once(self.writer.flush()).await;
                    }
                }
                // The host stopped reading: nothing more can reach it.
                Wake::Wrote(Err(_)) => {
                    writable = false;
                    self.outgoing.clear();
                    self.connection.close();
                }
                Wake::Op(Some(op)) => self.apply(now, op),
                // Every handle is gone.
                Wake::Op(None) => self.connection.close(),
                Wake::Timeout => self.connection.handle_timeout(now),
            }
        }
        // What was answered before the end still goes out.
        let (front, back) = self.outgoing.as_slices();
        let flushed = async {
            let _ = self.writer.write_all(front).await;
            let _ = self.writer.write_all(back).await;
            let _ = self.writer.flush().await;
            let _ = self.writer.close().await;
        };
        // A host that no longer reads must not hold the driver forever.
        let stuck = async {
            Timer::after(FLUSH_LIMIT).await;
        };
        flushed.or(stuck).await;
        self.ops.close();
    }

    async fn next_wake(&mut self, buffer: &mut [u8]) -> Wake {
        let read = async { Wake::Read(self.reader.read(buffer).await) };
        // One write call only: the future must complete the moment the writer has taken the
        // bytes, or a race lost later would leave them queued to be written again.
        let write = async {
            if self.outgoing.is_empty() {
                return std::future::pending().await;
            }
            Wake::Wrote(self.writer.write(self.outgoing.as_slices().0).await)
        };
        let op = async { Wake::Op(self.ops.recv().await.ok()) };
        let timer = async {
            (&mut self.timer).await;
            Wake::Timeout
        };
        read.race(write).race(op).race(timer).await
    }

    fn apply(&mut self, now: Instant, op: Op) {
        match op {
            Op::Respond { id, result } => _ = self.connection.respond(now, id, result),
            Op::Progress {
                id,
                progress,
                total,
                message,
            } => _ = (self.connection).progress(id, progress, total, message.as_deref()),
            Op::Notify { method, params } => _ = self.connection.notify(&method, params),
            Op::Request { request, reply } => match self.connection.request(now, request) {
                Ok(id) => _ = self.waiters.insert(id, reply),
                Err(error) => reply.send(Err(error.into())),
            },
            Op::Close => self.connection.close(),
        }
    }

    fn dispatch(&mut self, event: ServerEvent) {
        match event {
            ServerEvent::Response { id, result } => {
                if let Some(waiter) = self.waiters.remove(&id) {
                    waiter.send(result.map_err(Error::from_request));
                }
            }
            ServerEvent::Malformed(_) => {}
            ServerEvent::Notification(_) if self.events.len() >= MAX_QUEUED_NOTIFICATIONS => {}
            event => _ = self.events.try_send(event),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use async_net::unix::UnixStream;
    use futures_lite::io::{AsyncBufReadExt, BufReader};
    use futures_lite::stream::StreamExt;
    use serde_json::json;

    #[test]
    fn serves_a_host_over_a_unix_socket() {
        let executor = async_executor::Executor::new();
        async_io::block_on(executor.run(async {
            let (ours, host) = UnixStream::pair().unwrap();
            let (server, events, driver) = serve(ours.clone(), ours, ServerConfig::default());
            let driver = executor.spawn(driver);
            let mut host_lines = BufReader::new(host.clone()).lines();
            let mut host_writer = host.clone();
            let script = [
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}}),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                json!({"jsonrpc": "2.0", "id": "q", "method": "tools/list"}),
            ];
            for message in script {
                host_writer
                    .write_all(format!("{message}\n").as_bytes())
                    .await
                    .unwrap();
            }
            let answer: Value =
                serde_json::from_str(&host_lines.next().await.unwrap().unwrap()).unwrap();
            assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
            assert!(matches!(events.recv().await, Ok(ServerEvent::Ready(_))));
            let Ok(ServerEvent::Request(request)) = events.recv().await else {
                panic!("expected a request");
            };
            server.respond(request.id, Ok(json!({"tools": []})));
            server.notify("notifications/tools/list_changed", None);
            let answer: Value =
                serde_json::from_str(&host_lines.next().await.unwrap().unwrap()).unwrap();
            assert_eq!(
                answer,
                json!({"jsonrpc": "2.0", "id": "q", "result": {"tools": []}})
            );
            let note: Value =
                serde_json::from_str(&host_lines.next().await.unwrap().unwrap()).unwrap();
            assert_eq!(note["method"], "notifications/tools/list_changed");
            // The host hangs up: the driver ends, the last event says why, and our end closes.
            host.shutdown(std::net::Shutdown::Write).unwrap();
            assert!(matches!(
                events.recv().await,
                Ok(ServerEvent::Closed(proto::CloseReason::ClientEof))
            ));
            driver.await;
            assert!(host_lines.next().await.is_none());
        }));
    }
}
