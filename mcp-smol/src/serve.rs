//! The server role over any byte stream: our own stdin and stdout, a Unix socket, a pipe.
//! One driver future owns the [`proto::server::ServerConnection`] and both halves of the stream, and
//! runs the same loop as a client's ([`crate::driver`]); a cheap [`Server`] handle answers the
//! host's requests and sends it notifications. A transport that reads each of the host's
//! messages whole and decodes it itself (an HTTP request's body) hands it over as it is
//! ([`serve_messages`]), with no byte stream in between to decode it again.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::io::{AsyncRead, AsyncWrite};
use proto::{
    FromResult, Request, RequestError, RpcError,
    server::{HostMessage, HostRequestId, ServerConfig, ServerConnection, ServerEvent},
};
use serde_json::Value;

use crate::driver::{ByteStream, Incoming, Loop, Role, Waiters};
use crate::{Error, oneshot, queue};

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
        result: Result<proto::RawResult, RpcError>,
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
    /// A message of the host's, decoded ([`serve_messages`]).
    Receive(HostMessage),
    /// The host will send nothing more ([`serve_messages`]).
    EndInput,
}

/// A cheap, cloneable handle to one server connection.
#[derive(Clone, Debug)]
pub struct Server {
    ops: queue::Sender<Op>,
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
    serve_over(Box::new(reader), writer, config)
}

/// The server role for a host whose messages come decoded, through [`Server::receive`]
/// (until [`Server::end_input`], which is the host closing its end); what the machine
/// writes goes to `writer` as lines. Otherwise as [`serve`].
pub fn serve_messages<W>(
    writer: W,
    config: ServerConfig,
) -> (Server, Receiver<ServerEvent>, ServeDriver)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_over(Box::new(NoBytes), writer, config)
}

fn serve_over<W>(
    reader: crate::driver::Reader,
    writer: W,
    config: ServerConfig,
) -> (Server, Receiver<ServerEvent>, ServeDriver)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (ops_sender, ops) = queue::unbounded();
    let (events_sender, events) = async_channel::unbounded();
    let role = ServerRole {
        connection: ServerConnection::new(Instant::now(), config),
        events: events_sender,
        waiters: Waiters::default(),
    };
    let stream = ByteStream::new(Incoming::Stream(reader), Box::new(writer));
    let mut driver = Loop::new(role, stream, ops);
    let main = async move {
        driver.run().await;
        // What was answered before the end still goes out, unless the host no longer reads.
        driver.link.flush_and_close(FLUSH_LIMIT).await;
        driver.refuse_operations();
    };
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
        self.respond_raw(id, result.map(proto::RawResult::from));
    }

    /// [`respond`](Self::respond) with a result as a server sent it, from
    /// [`Call::raw`](crate::Call::raw): its text goes to the host unread
    /// ([`ServerConnection::respond_raw`](proto::server::ServerConnection::respond_raw)).
    pub fn respond_raw(&self, id: HostRequestId, result: Result<proto::RawResult, RpcError>) {
        let _ = self.ops.send(Op::Respond { id, result });
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
        let _ = self.ops.send(op);
    }

    /// Sends a notification (`notifications/tools/list_changed`, ...); dropped before the
    /// handshake is done (but for log messages) and after the connection ended.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        let method = method.to_owned();
        let _ = self.ops.send(Op::Notify { method, params });
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
        if self.ops.send(op).is_err() {
            return Err(closed());
        }
        let result = answer.recv().await.unwrap_or_else(|_| Err(closed()))?;
        Ok(T::answer(&method, result)?)
    }

    /// Ends the connection: queued lines are written, then the writer is closed.
    pub fn close(&self) {
        let _ = self.ops.send(Op::Close);
    }

    /// Passes on a message of the host's ([`serve_messages`]); `false` once the driver has
    /// ended.
    pub fn receive(&self, message: HostMessage) -> bool {
        self.ops.send(Op::Receive(message)).is_ok()
    }

    /// The host will send nothing more ([`serve_messages`]): as when a stream's host closes
    /// its end, the driver ends once what is queued is written.
    pub fn end_input(&self) {
        let _ = self.ops.send(Op::EndInput);
    }
}

/// The byte stream of a host whose messages come decoded: nothing ever arrives on it.
struct NoBytes;

impl AsyncRead for NoBytes {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Pending
    }
}

/// The server role, run by the same loop as a client's byte stream.
struct ServerRole {
    connection: ServerConnection,
    events: Sender<ServerEvent>,
    waiters: Waiters,
}

impl Role for ServerRole {
    type Core = ServerConnection;
    type Op = Op;

    fn core(&mut self) -> &mut ServerConnection {
        &mut self.connection
    }

    fn apply(&mut self, now: Instant, op: Op) {
        match op {
            Op::Respond { id, result } => _ = self.connection.respond_raw(now, id, result),
            Op::Progress {
                id,
                progress,
                total,
                message,
            } => _ = (self.connection).progress(id, progress, total, message.as_deref()),
            Op::Notify { method, params } => _ = self.connection.notify(&method, params),
            Op::Request { request, reply } => {
                let connection = &mut self.connection;
                self.waiters
                    .send(reply, || connection.request(now, request));
            }
            Op::Close => self.connection.close(),
            Op::Receive(message) => self.connection.handle_message(now, message),
            Op::EndInput => self.connection.handle_eof(now),
        }
    }

    fn dispatch(&mut self, event: ServerEvent) -> bool {
        let closed = matches!(event, ServerEvent::Closed(_));
        match event {
            ServerEvent::Response { id, result } => {
                self.waiters.answer(id, result.map_err(Error::from_request));
            }
            ServerEvent::Malformed(_) => {}
            ServerEvent::Notification(_) if self.events.len() >= MAX_QUEUED_NOTIFICATIONS => {}
            event => _ = self.events.try_send(event),
        }
        closed
    }

    /// The host stopped reading: nothing more can reach it.
    fn write_failed(&mut self) {
        self.connection.close();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use async_net::unix::UnixStream;
    use futures_lite::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use futures_lite::stream::StreamExt;
    use serde_json::json;

    /// A handshake, then a listing the test answers.
    fn a_hosts_first_messages() -> [Value; 3] {
        [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": "q", "method": "tools/list"}),
        ]
    }

    #[test]
    fn serves_a_host_over_a_unix_socket() {
        let executor = async_executor::Executor::new();
        async_io::block_on(executor.run(async {
            let (ours, host) = UnixStream::pair().unwrap();
            let (server, events, driver) = serve(ours.clone(), ours, ServerConfig::default());
            let driver = executor.spawn(driver);
            let mut host_lines = BufReader::new(host.clone()).lines();
            let mut host_writer = host.clone();
            for message in a_hosts_first_messages() {
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

    #[test]
    fn serves_a_host_whose_messages_come_decoded() {
        let executor = async_executor::Executor::new();
        async_io::block_on(executor.run(async {
            let (ours, host) = UnixStream::pair().unwrap();
            let (server, events, driver) = serve_messages(ours, ServerConfig::default());
            let driver = executor.spawn(driver);
            let mut host_lines = BufReader::new(host).lines();
            for message in a_hosts_first_messages() {
                let text = serde_json::to_vec(&message).unwrap();
                assert!(server.receive(HostMessage::decode(&text).unwrap()));
            }
            let answer: Value =
                serde_json::from_str(&host_lines.next().await.unwrap().unwrap()).unwrap();
            assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
            assert!(matches!(events.recv().await, Ok(ServerEvent::Ready(_))));
            let Ok(ServerEvent::Request(request)) = events.recv().await else {
                panic!("expected a request");
            };
            assert_eq!(request.method, "tools/list");
            server.respond(request.id, Ok(json!({"tools": []})));
            let answer: Value =
                serde_json::from_str(&host_lines.next().await.unwrap().unwrap()).unwrap();
            assert_eq!(answer["id"], "q");
            // The end of the host's input ends the driver, as a stream's EOF does.
            server.end_input();
            assert!(matches!(
                events.recv().await,
                Ok(ServerEvent::Closed(proto::CloseReason::ClientEof))
            ));
            driver.await;
            assert!(host_lines.next().await.is_none());
            assert!(!server.receive(HostMessage::decode(b"{\"method\":\"x\"}").unwrap()));
        }));
    }
}
