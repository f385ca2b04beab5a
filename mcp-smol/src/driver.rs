//! The driver: one future that owns a connection and its link to the peer, and the one loop
//! ([`Loop`]) that every driver runs: a client over a spawned server's pipes (the process
//! too, see [`crate::process`]), over a stream someone else opened (a Unix socket) or over
//! HTTP exchanges, and the server role of [`serve`](crate::serve) over a byte stream. The
//! loop hands out the handles' operations, refuses them once the connection is closing,
//! and waits for exactly one of: the peer, an operation, the core's deadline. What differs
//! is written beside it: the core and what its events mean ([`Role`]), how messages go out
//! and come back ([`Link`]), and, for a client, how its link ends ([`ClientLink`]).
//!
//! Beside it, in `driver/`:
//!
//! - `stream.rs`: the byte-stream link (a child's stdio, any reader and writer)
//! - `callers.rs`: who a client's driver answers: waiting callers, listeners, answerers
//! - `on_caller.rs`: the pilot: a waiting caller driving the connection itself
//! - `progress.rs`: where progress reports on a caller's requests arrive
//!
//! The HTTP link lives with the rest of HTTP, in `http/streamable.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use async_channel::{Receiver, Sender};
use async_io::Timer;
use futures_lite::future::FutureExt;
use proto::{
    CloseReason, Event, Notification, RawResult, Request, RequestError, RpcError, ServerInfo,
    ServerRequest, ServerRequestId,
};
use serde_json::Value;

use crate::process::StderrTail;
use crate::{Disconnect, Error, queue};

mod callers;
mod on_caller;
mod progress;
mod stream;
pub(crate) use callers::{Callers, ClientCore, Waiters};
pub(crate) use on_caller::{Flight, Pilot};
pub use progress::ProgressInbox;
pub(crate) use progress::Route;
pub(crate) use stream::{ByteStream, Incoming, Reader, Writer, over_stream, spawn};

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
    pub(crate) rejected_tools: Mutex<Vec<proto::http::RejectedTool>>,
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

    pub(crate) fn new(
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
    pub(crate) fn recent_stderr(&self) -> Vec<String> {
        self.stderr.lock().map(|t| t.recent()).unwrap_or_default()
    }

    /// Nothing is left waiting for an answer: what stderr said so far went with work that is
    /// done, and a later failure is reported with what comes after.
    fn mark_stderr(&self) {
        if let Ok(mut tail) = self.stderr.lock() {
            tail.mark();
        }
    }

    /// Asks for shutdown without the grace period, whenever it comes or if it has begun.
    pub(crate) fn terminate(&self) {
        let _ = self.terminate.try_send(());
    }
}

/// A role's sans-IO core as the loop sees it, whatever carries its messages.
pub(crate) trait Core {
    type Event;
    fn poll_event(&mut self) -> Option<Self::Event>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    fn close(&mut self);
}

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
    /// The driver is going, finished or dropped unfinished: the last word before the
    /// operations still queued are dropped.
    fn driver_gone(&mut self) {}
}

/// How a role's messages reach the peer and the peer's come back: a byte stream
/// ([`ByteStream`]) or HTTP exchanges (`http::streamable::Exchanges`). Only generic code
/// calls it, so its futures need no `Send` bound of their own.
#[allow(async_fn_in_trait)]
pub(crate) trait Link<R: Role> {
    /// What one wake-up from the peer's side brings.
    type Input;
    /// Takes what the core has to send and sends what goes without waiting; the rest goes
    /// while the loop waits.
    async fn send(&mut self, role: &mut R);
    /// Waits for the peer's side: what it sent, or room to send more.
    async fn next_input(&mut self) -> Self::Input;
    /// Feeds what came to the core.
    async fn handle(&mut self, now: Instant, input: Self::Input, role: &mut R);
}

/// The one loop of every driver. Each turn sends what the core produced and hands out its
/// events, then waits for exactly one of: the peer (its input, or room to send), an
/// operation from a handle, the core's deadline.
pub(crate) struct Loop<R: Role, L> {
    pub(crate) role: R,
    pub(crate) link: L,
    ops: queue::Receiver<R::Op>,
    /// One timer, re-armed only when the deadline moves earlier: a later deadline just costs
    /// one early wake-up, where re-arming on every turn would cost a reactor round trip each.
    timer: Timer,
    timer_armed: Option<Instant>,
}

enum Wake<Input, Op> {
    Peer(Input),
    Op(Option<Op>),
    Timeout,
}

impl<R: Role, L> Loop<R, L> {
    pub(crate) fn new(role: R, link: L, ops: queue::Receiver<R::Op>) -> Self {
        Self {
            role,
            link,
            ops,
            timer: Timer::never(),
            timer_armed: None,
        }
    }

    /// Stops taking operations and drops those already queued, whose callers then hear
    /// why the connection ended. One left in the queue would hold its reply sender for as
    /// long as any handle keeps the channel alive, leaving its caller waiting forever.
    pub(crate) fn refuse_operations(&mut self) {
        self.ops.close();
        while self.ops.try_recv().is_some() {}
    }
}

impl<R: Role, L: Link<R>> Loop<R, L> {
    /// Runs until the core says the connection has closed.
    pub(crate) async fn run(&mut self) {
        loop {
            // What handing out events queued (a refused server request, the retry of an
            // input round) is sent before the wait, as what came before it.
            let mut handed_out = true;
            while handed_out {
                self.link.send(&mut self.role).await;
                handed_out = false;
                let mut closed = false;
                while let Some(event) = self.role.core().poll_event() {
                    closed |= self.role.dispatch(event);
                    handed_out = true;
                }
                if closed {
                    return;
                }
            }
            let deadline = self.role.core().poll_timeout();
            let wake = self.next_wake(deadline).await;
            let now = Instant::now();
            match wake {
                Wake::Peer(input) => self.link.handle(now, input, &mut self.role).await,
                Wake::Op(Some(op)) => {
                    self.role.apply(now, op);
                    // Whatever else is queued goes out in the same write: with many calls in
                    // flight, one write (one wake-up of the peer) carries them all.
                    while let Some(op) = self.ops.try_recv() {
                        self.role.apply(now, op);
                    }
                }
                // Every handle is gone.
                Wake::Op(None) => self.role.core().close(),
                Wake::Timeout => self.role.core().handle_timeout(now),
            }
        }
    }

    async fn next_wake(&mut self, deadline: Option<Instant>) -> Wake<L::Input, R::Op> {
        if let Some(deadline) = deadline
            && self.timer_armed.is_none_or(|armed| deadline < armed)
        {
            self.timer.set_at(deadline);
            self.timer_armed = Some(deadline);
        }
        let peer = async { Wake::Peer(self.link.next_input().await) };
        let ops = &self.ops;
        let op = async { Wake::Op(std::future::poll_fn(|cx| ops.poll_recv(cx)).await) };
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
        peer.race(op).race(timeout).await
    }
}

impl<R: Role, L> Drop for Loop<R, L> {
    /// Also when the driver future is dropped unfinished: no caller may be left waiting.
    fn drop(&mut self) {
        self.role.driver_gone();
        self.refuse_operations();
    }
}

/// What a client's link adds to the end of a connection.
#[allow(async_fn_in_trait)]
pub(crate) trait ClientLink<C: ClientCore>: Link<ClientRole<C>> {
    /// How the connection ended, once the peer has had its say (a server's exit, its last
    /// stderr lines), and the error every caller hears where it says more than that.
    async fn ended(
        &mut self,
        reason: CloseReason,
        role: &mut ClientRole<C>,
    ) -> (Disconnect, Option<Error>);
    /// Once every caller has heard: whatever is left to take down (the process group, the
    /// HTTP session).
    async fn finish(&mut self, core: &mut C);
}

/// The client role, over any link: the core, and the callers it answers.
pub(crate) struct ClientRole<C> {
    pub(crate) core: C,
    pub(crate) callers: Callers,
    pub(crate) shared: Arc<Shared>,
    /// Why the last skipped message was skipped, for the disconnect report.
    pub(crate) last_skipped: Option<String>,
    /// Set when the core closed.
    reason: Option<CloseReason>,
}

impl<C> ClientRole<C> {
    pub(crate) fn new(core: C, shared: Arc<Shared>) -> Self {
        Self {
            core,
            callers: Callers::default(),
            shared,
            last_skipped: None,
            reason: None,
        }
    }
}

impl<C: ClientCore> Role for ClientRole<C> {
    type Core = C;
    type Op = Op;

    fn core(&mut self) -> &mut C {
        &mut self.core
    }

    fn apply(&mut self, now: Instant, op: Op) {
        self.callers.apply(&mut self.core, now, op);
    }

    fn dispatch(&mut self, event: Event) -> bool {
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
            Event::ServerRequest(request) => self.callers.pass_on(&mut self.core, request),
            Event::Malformed(error) => self.last_skipped = Some(error.to_string()),
            Event::Closed(reason) => {
                self.reason = Some(reason);
                return true;
            }
        }
        // Issue 47: a crash quoted an old, unrelated error.
        if answered && self.callers.idle() {
            self.shared.mark_stderr();
        }
        false
    }

    fn driver_gone(&mut self) {
        self.shared.end(Disconnect::driver_dropped(), None);
    }
}

/// A client's driver over `link`: the loop until the core closes, then the end of the
/// connection, the same for every link: how it ended is recorded, new operations are
/// refused and every caller still waiting hears why, then the link is taken down.
pub(crate) async fn run_client<C, L>(mut driver: Loop<ClientRole<C>, L>)
where
    C: ClientCore,
    L: ClientLink<C>,
{
    driver.run().await;
    let reason = driver.role.reason.take().unwrap_or(CloseReason::Local);
    let (disconnect, error) = driver.link.ended(reason, &mut driver.role).await;
    let error = driver.role.shared.end(disconnect, error);
    driver.refuse_operations();
    driver.role.callers.fail_all(&error);
    driver.link.finish(&mut driver.role.core).await;
}
