//! Who a driver answers: callers waiting for a response or for the handshake, listeners of
//! the server's notifications, answerers of its requests. Every client driver (a byte
//! stream, HTTP) keeps them alike, here, and the server role keeps its own requests' callers
//! in the same [`Waiters`]; what differs between them is how bytes move.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::task::Waker;
use std::time::Instant;

use async_channel::Sender;
use proto::{
    Connection, Notification, RequestError, RequestId, RpcError, SendError, ServerInfo,
    ServerRequest,
};
use serde_json::Value;

use super::{Op, Reply};
use crate::Error;

/// The callers whose answers one read brought, woken together once all are in.
///
/// Callers often wait on another thread than the driver's (tasks of an executor of their own).
/// Woken one by one as each answer is handed out, with both threads on one CPU, that thread
/// takes the CPU at each wake-up, runs the one caller woken, and goes back to sleep: with 32
/// calls in flight, a read's answers cost several round trips between the threads, and the
/// callers' next requests leave in as many small writes. So the driver hands out every answer
/// first and then wakes the callers, and the first caller to run wakes whoever is still
/// waiting to be woken, on its own thread, where that costs no switch.
#[derive(Default)]
pub(crate) struct Answered(Mutex<Vec<Waker>>);

impl Answered {
    fn push(&self, waker: Waker) {
        self.lock().push(waker);
    }

    /// Wakes every caller answered and not yet woken; by the driver after each read's
    /// answers, and by each caller as its answer arrives.
    pub(crate) fn wake_all(&self) {
        // One at a time, outside the lock: waking may run the caller's executor's code,
        // which may call this again. (A `while let` would hold the guard through the wake.)
        loop {
            let waker = self.lock().pop();
            let Some(waker) = waker else { return };
            waker.wake();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waker>> {
        // Nothing that can panic runs under the lock.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// How many notifications a listener may fall behind before further ones are dropped for it.
const NOTIFICATION_BACKLOG: usize = 1024;

/// Callers waiting for the answers to their requests, by request id.
#[derive(Default)]
pub(crate) struct Waiters(BTreeMap<RequestId, Reply<Value>>);

impl Waiters {
    /// Sends a request through `send` (the core's `request`); its caller waits for the answer.
    pub(crate) fn send(
        &mut self,
        reply: Reply<Value>,
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
    pub(crate) fn answer(&mut self, id: RequestId, result: Result<Value, Error>) {
        if let Some(waiter) = self.0.remove(&id) {
            waiter.send(result);
        }
    }

    /// Answers the caller of request `id`, if it still waits, without waking it: its waker
    /// goes to `answered`.
    fn answer_quietly(&mut self, id: RequestId, result: Result<Value, Error>, answered: &Answered) {
        if let Some(waker) = (self.0.remove(&id)).and_then(|waiter| waiter.send_quietly(result)) {
            answered.push(waker);
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

#[derive(Default)]
pub(crate) struct Callers {
    waiters: Waiters,
    ready_waiters: Vec<Reply<ServerInfo>>,
    listeners: Vec<Sender<Notification>>,
    answerers: Vec<Sender<ServerRequest>>,
}

impl Callers {
    /// Carries out what a handle asked. `ready`: whether a `wait_ready` is answered now (the
    /// handshake is done and no new one is under way), or waits for the next.
    pub(crate) fn apply(&mut self, connection: &mut Connection, now: Instant, op: Op, ready: bool) {
        match op {
            Op::Request { request, reply } => {
                self.waiters
                    .send(reply, || connection.request(now, request));
            }
            Op::WaitReady(reply) => match connection.server_info().filter(|_| ready) {
                Some(info) => reply.send(Ok(info.clone())),
                None => self.ready_waiters.push(reply),
            },
            Op::Subscribe(listener) => self.listeners.push(listener),
            Op::Answer(answerer) => self.answerers.push(answerer),
            Op::Respond { id, result } => _ = connection.respond(now, id, result),
            Op::Abandoned => self.cancel_abandoned(connection, now),
            Op::Close => connection.close(),
        }
    }

    /// Cancels every request whose caller has stopped waiting (its reply channel is closed),
    /// which also tells the server with `notifications/cancelled`.
    fn cancel_abandoned(&mut self, connection: &mut Connection, now: Instant) {
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
        self.waiters.answer(id, result);
    }

    /// Answers the caller of request `id`, if it still waits, and leaves its waking to
    /// `answered` (see [`Answered`]).
    pub(crate) fn answer_together(
        &mut self,
        id: RequestId,
        result: Result<Value, Error>,
        answered: &Answered,
    ) {
        self.waiters.answer_quietly(id, result, answered);
    }

    /// Passes `notification` to every listener still listening, except one that has fallen
    /// [`NOTIFICATION_BACKLOG`] behind: a slow reader must not block the driver, nor grow our
    /// memory without bound. (Unbounded channels with this check, where bounded ones would
    /// allocate the whole backlog for each listener up front.)
    pub(crate) fn notify(&mut self, notification: &Notification) {
        self.listeners.retain(|listener| {
            if listener.len() >= NOTIFICATION_BACKLOG {
                return !listener.is_closed();
            }
            listener.try_send(notification.clone()).is_ok()
        });
    }

    /// Hands a server request to the first answerer still listening; with none, or none with
    /// room, it is refused at once rather than left to its deadline.
    pub(crate) fn pass_on(&mut self, connection: &mut Connection, mut request: ServerRequest) {
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

    /// The connection has ended: every caller still waiting hears `error`.
    pub(crate) fn fail_all(&mut self, error: &Error) {
        for waiter in self.ready_waiters.drain(..) {
            waiter.send(Err(error.clone()));
        }
        self.waiters.fail_all(error);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Wake, Waker};

    use super::*;
    use crate::oneshot;

    /// Counts its wake-ups; with `then`, wakes whoever is answered too, as a caller does.
    struct Counter {
        woken: AtomicUsize,
        then: Option<Arc<Answered>>,
    }

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.woken.fetch_add(1, Ordering::SeqCst);
            if let Some(answered) = &self.then {
                answered.wake_all();
            }
        }
    }

    #[test]
    fn callers_answered_together_are_woken_once_each_when_asked() {
        let answered = Arc::new(Answered::default());
        // The first caller to wake wakes the others, from inside its own wake-up.
        let counters: Vec<_> = (0..3)
            .map(|i| {
                let then = (i == 2).then(|| answered.clone());
                Arc::new(Counter {
                    woken: AtomicUsize::new(0),
                    then,
                })
            })
            .collect();
        let mut waits = Vec::new();
        for (i, counter) in counters.iter().enumerate() {
            let (reply, answer) = oneshot::channel::<usize>();
            let waker = Waker::from(counter.clone());
            let mut wait = Box::pin(async move { answer.recv().await });
            assert!(
                wait.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending()
            );
            if let Some(waker) = reply.send_quietly(i) {
                answered.push(waker);
            }
            waits.push(wait);
        }
        let woken = || -> Vec<usize> {
            let count = |counter: &Arc<Counter>| counter.woken.load(Ordering::SeqCst);
            counters.iter().map(count).collect()
        };
        assert_eq!(woken(), [0, 0, 0]);
        answered.wake_all();
        assert_eq!(woken(), [1, 1, 1]);
        for (i, wait) in waits.into_iter().enumerate() {
            assert_eq!(futures_lite::future::block_on(wait), Ok(i));
        }
    }
}
