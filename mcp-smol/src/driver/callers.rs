//! Who a driver answers: callers waiting for a response or for the handshake, listeners of
//! the server's notifications, answerers of its requests. Every client driver (a byte
//! stream, HTTP) keeps them alike, here, and the server role keeps its own requests' callers
//! in the same [`Waiters`]; what differs between them is how bytes move.

use std::collections::BTreeMap;
use std::time::Instant;

use async_channel::Sender;
use proto::{
    Connection, Event, Notification, RawResult, Request, RequestError, RequestId, RpcError,
    SendError, ServerInfo, ServerRequest, ServerRequestId, http::HttpConnection,
};
use serde_json::Value;

use super::progress::Routes;
use super::{Core, Op, Reply};
use crate::Error;

/// How many notifications a listener may fall behind before further ones are dropped for it.
const NOTIFICATION_BACKLOG: usize = 1024;

/// Callers waiting for the answers to their requests, by request id: as values (the server
/// role's), or as the server sent them (a client's, [`RawResult`]).
pub(crate) struct Waiters<T = Value>(BTreeMap<RequestId, Reply<T>>);

impl<T> Default for Waiters<T> {
    fn default() -> Self {
        Self(BTreeMap::new())
    }
}

impl<T> Waiters<T> {
    /// Sends a request through `send` (the core's `request`); its caller waits for the answer.
    pub(crate) fn send(
        &mut self,
        reply: Reply<T>,
        send: impl FnOnce() -> Result<RequestId, SendError>,
    ) {
        match send() {
            Ok(id) => _ = self.0.insert(id, reply),
            // Not expected: a driver stops taking operations once the connection closes.
            Err(SendError::Closed(reason)) => {
                reply.send(Err(Error::from_request(RequestError::Closed(reason))));
            }
            Err(error) => reply.send(Err(error.into())),
        }
    }

    /// Answers the caller of request `id`, if it still waits.
    pub(crate) fn answer(&mut self, id: RequestId, result: Result<T, Error>) {
        if let Some(waiter) = self.0.remove(&id) {
            waiter.send(result);
        }
    }

    /// The requests whose callers have stopped waiting (their reply channel is closed), which
    /// are forgotten here.
    fn abandoned(&mut self) -> Vec<RequestId> {
        let abandoned: Vec<RequestId> = (self.0.iter())
            .filter(|(_, reply)| reply.is_closed())
            .map(|(&id, _)| id)
            .collect();
        for id in &abandoned {
            self.0.remove(id);
        }
        abandoned
    }

    /// Every caller still waiting hears `error`.
    pub(crate) fn fail_all(&mut self, error: &Error) {
        for (_, waiter) in std::mem::take(&mut self.0) {
            waiter.send(Err(error.clone()));
        }
    }
}

/// A client core as the loop feeds it and [`Callers`] command it: [`Connection`] over a byte
/// stream, [`HttpConnection`] over HTTP, whose commands are the same.
pub(crate) trait ClientCore: Core<Event = Event> {
    fn request(&mut self, now: Instant, request: Request) -> Result<RequestId, SendError>;
    fn respond(&mut self, now: Instant, id: ServerRequestId, result: Result<Value, RpcError>);
    fn notify(&mut self, method: &str, params: Option<Value>);
    fn cancel(&mut self, now: Instant, id: RequestId);
    fn server_info(&self) -> Option<&ServerInfo>;
}

macro_rules! client_core_of {
    ($core:ty) => {
        impl ClientCore for $core {
            fn request(&mut self, now: Instant, request: Request) -> Result<RequestId, SendError> {
                <$core>::request(self, now, request)
            }
            fn respond(
                &mut self,
                now: Instant,
                id: ServerRequestId,
                result: Result<Value, RpcError>,
            ) {
                // `false`: answered already, or too late; nothing to send.
                let _ = <$core>::respond(self, now, id, result);
            }
            fn notify(&mut self, method: &str, params: Option<Value>) {
                // `false`: not ready yet, or closed; dropped, as documented.
                let _ = <$core>::notify(self, method, params);
            }
            fn cancel(&mut self, now: Instant, id: RequestId) {
                let _ = <$core>::cancel(self, now, id);
            }
            fn server_info(&self) -> Option<&ServerInfo> {
                <$core>::server_info(self)
            }
        }
    };
}

client_core_of!(Connection);
client_core_of!(HttpConnection);

#[derive(Default)]
pub(crate) struct Callers {
    waiters: Waiters<RawResult>,
    ready_waiters: Vec<Reply<ServerInfo>>,
    listeners: Vec<Sender<Notification>>,
    /// Where each request's progress goes, by its token, for callers that hear it.
    progress: Routes,
    answerers: Vec<Sender<ServerRequest>>,
}

impl Callers {
    /// Carries out what a handle asked; a `wait_ready` is answered now if the connection is
    /// ready, else when it is.
    pub(crate) fn apply(&mut self, connection: &mut impl ClientCore, now: Instant, op: Op) {
        match op {
            Op::Request {
                request,
                reply,
                progress,
            } => {
                if let Some(route) = progress {
                    self.progress.add(route);
                }
                self.waiters
                    .send(reply, || connection.request(now, request));
            }
            Op::WaitReady(reply) => match connection.server_info() {
                Some(info) => reply.send(Ok(info.clone())),
                None => self.ready_waiters.push(reply),
            },
            Op::Subscribe(listener) => self.listeners.push(listener),
            Op::Answer(answerer) => self.answerers.push(answerer),
            Op::Respond { id, result } => connection.respond(now, id, result),
            Op::Notify { method, params } => connection.notify(&method, params),
            Op::Abandoned => self.cancel_abandoned(connection, now),
            Op::Close => connection.close(),
        }
    }

    /// Cancels every request whose caller has stopped waiting (its reply channel is closed),
    /// which also tells the server with `notifications/cancelled`.
    fn cancel_abandoned(&mut self, connection: &mut impl ClientCore, now: Instant) {
        for id in self.waiters.abandoned() {
            connection.cancel(now, id);
        }
    }

    /// The handshake is done: every `wait_ready` hears what the server said.
    pub(crate) fn ready(&mut self, info: &ServerInfo) {
        for waiter in self.ready_waiters.drain(..) {
            waiter.send(Ok(info.clone()));
        }
    }

    /// Answers the caller of request `id`, if it still waits.
    pub(crate) fn answer(&mut self, id: RequestId, result: Result<Value, Error>) {
        self.waiters.answer(id, result.map(RawResult::from));
    }

    /// [`answer`](Self::answer) with the result as the server sent it, read by the caller.
    pub(crate) fn answer_raw(&mut self, id: RequestId, result: Result<RawResult, Error>) {
        self.waiters.answer(id, result);
    }

    /// Passes `notification` to every listener still listening, except one that has fallen
    /// [`NOTIFICATION_BACKLOG`] behind: a slow reader must not block the driver, nor grow our
    /// memory without bound. (Unbounded channels with this check, where bounded ones would
    /// allocate the whole backlog for each listener up front.) A progress report also goes to
    /// the caller its token names, if that caller hears it.
    pub(crate) fn notify(&mut self, notification: &Notification) {
        self.progress.deliver(notification);
        self.listeners.retain(|listener| {
            if listener.len() >= NOTIFICATION_BACKLOG {
                return !listener.is_closed();
            }
            listener.try_send(notification.clone()).is_ok()
        });
    }

    /// Hands a server request to the first answerer still listening; with none, or none with
    /// room, it is refused at once rather than left to its deadline.
    pub(crate) fn pass_on(&mut self, connection: &mut impl ClientCore, mut request: ServerRequest) {
        self.answerers.retain(|answerer| !answerer.is_closed());
        for answerer in &self.answerers {
            match answerer.try_send(request) {
                Ok(()) => return,
                Err(error) => request = error.into_inner(),
            }
        }
        let refusal = Err(RpcError::method_not_found(&request.method));
        connection.respond(Instant::now(), request.id, refusal);
    }

    /// Whether nobody waits for an answer or for the handshake.
    pub(crate) fn idle(&self) -> bool {
        self.waiters.0.is_empty() && self.ready_waiters.is_empty()
    }

    /// The connection has ended: every caller still waiting hears `error`.
    pub(crate) fn fail_all(&mut self, error: &Error) {
        for waiter in self.ready_waiters.drain(..) {
            waiter.send(Err(error.clone()));
        }
        self.progress.clear();
        self.waiters.fail_all(error);
    }
}
