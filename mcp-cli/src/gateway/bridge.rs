//! The hosts of `serve --listen`, in memory: the core's [`HttpServer`] (which machine each
//! HTTP request goes to, and which HTTP request each message a machine writes belongs to) and
//! the server-role machines it names, each served by the gateway as a stdio host is. The
//! messages of the host's HTTP requests go into a machine as they were decoded from their
//! bodies, once, and what it writes is passed, as it writes it, to the HTTP response the
//! core names: nothing here reads a message.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::io::AsyncWrite;
use hyper::body::Bytes;
use mcp_smol::Server;
use mcp_smol::proto::server::http::{
    Abandon, ExchangeId, HttpLimits, HttpRequest, HttpResponse, HttpServer, MachineId, Part,
    Routed, Written,
};

use crate::gateway::rounds::Rounds;
use crate::gateway::{Gateway, Host, server_config};

/// A stream this far behind its host loses notifications rather than holding them all.
const MAX_QUEUED: usize = 1024;

/// A message of a machine's for the host, as the machine wrote it (JSON without the line's
/// end): it goes out as written, never decoded and encoded again.
pub(crate) type Message = Bytes;

/// What goes to one open request's HTTP response.
pub(crate) enum Delivered {
    /// The whole response: the answer came first.
    Answer(HttpResponse),
    /// An event stream opens with this head and `message` as its first event.
    Opens(HttpResponse, Message),
    /// A later event.
    Event(Message),
    /// The answer, the stream's last event.
    Last(Message),
}

/// The hosts: the core's transport state and the machines it names.
pub(crate) struct Bridges {
    gateway: Arc<Gateway>,
    /// The stateless-era hosts' calls parked between input rounds, shared by all their
    /// requests' machines, so that a retry finds the call it answers.
    rounds: Rounds,
    shared: Arc<Mutex<Shared>>,
}

/// What the requests and the machines share, under one lock.
struct Shared {
    http: HttpServer,
    /// Each machine, while the core knows it.
    machines: BTreeMap<MachineId, Arc<Machine>>,
    /// What is queued for each open request's response.
    exchanges: BTreeMap<ExchangeId, Outbox>,
    /// Each session's standalone stream, when open, and which one it is.
    standalone: BTreeMap<MachineId, (u64, Sender<Message>)>,
    /// How many standalone streams have opened.
    streams_opened: u64,
}

impl Shared {
    /// The machines the core ended, taken out: to drop once the lock is given up (dropping
    /// one ends its calls, once its requests still open have taken their answers).
    fn take_ended(&mut self) -> Vec<Arc<Machine>> {
        // Their requests still open are answered (a session deleted during a call).
        for (exchange, part, message) in self.http.take_abandoned() {
            if let Some(to) = self.exchanges.get_mut(&exchange) {
                to.push(match part {
                    Part::Answer(response) => Delivered::Answer(response),
                    _ => Delivered::Last(Message::from(message)),
                });
            }
        }
        let ended = self.http.take_ended();
        let machines = &mut self.machines;
        (ended.iter())
            .filter_map(|machine| machines.remove(machine))
            .collect()
    }
}

/// One server-role machine of the gateway's, for one session or one stateless-era request.
/// Dropping it ends the machine, which drops its calls and so cancels them at their backends.
pub(crate) struct Machine {
    /// The machine's handle, where the host's messages go in.
    server: Server,
    _serving: async_executor::Task<()>,
}

/// What to answer one HTTP request with.
pub(crate) enum Answer {
    /// This response, now.
    Respond(HttpResponse),
    /// A request went to a machine: what relates to it comes through the [`Reply`].
    Reply(Reply),
    /// A session's standalone stream: its head, then its messages.
    Standalone(HttpResponse, Standalone),
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Bridges {
    /// No host yet; `MCP_CLI_SESSION_IDLE_MS` (in `env`) sets how long an idle session
    /// lives.
    pub(crate) fn new(gateway: Arc<Gateway>, rounds: Rounds, env: crate::config::Env<'_>) -> Self {
        let idle = env("MCP_CLI_SESSION_IDLE_MS").and_then(|text| text.trim().parse().ok());
        let mut limits = HttpLimits::default();
        if let Some(idle) = idle {
            limits.session_idle = std::time::Duration::from_millis(idle);
        }
        let shared = Shared {
            http: HttpServer::new(limits),
            machines: BTreeMap::new(),
            exchanges: BTreeMap::new(),
            standalone: BTreeMap::new(),
            streams_opened: 0,
        };
        Self {
            gateway,
            rounds,
            shared: Arc::new(Mutex::new(shared)),
        }
    }

    /// Takes a host's HTTP request: the core says where it goes, and it goes there.
    pub(crate) fn receive(&self, request: &HttpRequest<'_>) -> Answer {
        let mut shared = lock(&self.shared);
        let routed = shared.http.receive(Instant::now(), request, session_id);
        let answer = match routed {
            Routed::Respond(response) => Answer::Respond(response),
            Routed::Pass { machine, message } => {
                let machine = shared.machines.get(&machine).cloned();
                drop(shared);
                return match machine.is_some_and(|machine| machine.server.receive(message)) {
                    true => Answer::Respond(HttpResponse::accepted()),
                    false => Answer::Respond(gone()),
                };
            }
            Routed::Request {
                machine,
                opens,
                exchange,
                message,
            } => {
                let listens = message.method() == Some(LISTEN);
                if opens {
                    let stateless = message.method() != Some("initialize");
                    let rounds = stateless.then(|| self.rounds.clone());
                    let made = self.open(machine, rounds);
                    shared.machines.insert(machine, Arc::new(made));
                }
                shared.exchanges.insert(exchange, Outbox::default());
                let Some(held) = shared.machines.get(&machine).cloned() else {
                    return Answer::Respond(gone());
                };
                let reply = Reply {
                    shared: self.shared.clone(),
                    machine: held.clone(),
                    exchange,
                    listens,
                    answered: false,
                };
                drop(shared);
                if !held.server.receive(message) {
                    return Answer::Respond(gone());
                }
                return Answer::Reply(reply);
            }
            Routed::Standalone {
                machine,
                response,
                held,
            } => {
                let (to, messages) = async_channel::unbounded();
                for message in held {
                    let _ = to.try_send(Message::from(message));
                }
                shared.streams_opened += 1;
                let stream = shared.streams_opened;
                shared.standalone.insert(machine, (stream, to));
                let server = shared.machines.get(&machine).map(|m| m.server.clone());
                let standalone = Standalone {
                    shared: self.shared.clone(),
                    machine,
                    stream,
                    server,
                    messages,
                };
                Answer::Standalone(response, standalone)
            }
        };
        let ended = shared.take_ended();
        drop(shared);
        drop(ended);
        answer
    }

    /// A new machine served by the gateway, writing to the core's routes.
    fn open(&self, machine: MachineId, rounds: Option<Rounds>) -> Machine {
        let routing = Routing {
            shared: self.shared.clone(),
            machine,
            partial: Vec::new(),
            server: None,
        };
        let (server, events, driver) = mcp_smol::serve_messages(routing, server_config());
        let gateway = self.gateway.clone();
        let executor = gateway.executor.clone();
        let served = (server.clone(), events, driver);
        let serving = executor.spawn(async move {
            let executor = gateway.executor.clone();
            if let Some(host) = Host::connect_served(served, &executor, rounds).await {
                gateway.serve(host, None).await;
            }
        });
        Machine {
            server,
            _serving: serving,
        }
    }

    /// Ends every machine (the gateway stops).
    pub(crate) fn clear(&self) {
        let machines = std::mem::take(&mut lock(&self.shared).machines);
        drop(machines);
    }
}

/// The stateless era's long-lived request.
const LISTEN: &str = "subscriptions/listen";

/// The answer to a request whose machine ended before it could take it.
fn gone() -> HttpResponse {
    let mut response = HttpResponse::accepted();
    response.status = 404;
    response
        .headers
        .push(("content-type", "text/plain; charset=utf-8".to_owned()));
    response.body = b"the session has ended\n".to_vec();
    response
}

/// A new session id: 16 random bytes as hex (visible ASCII, as the transport asks).
fn session_id() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut bytes = [0u8; 16];
    // Without the system's random source the time and a count still keep ids apart.
    if getrandom::getrandom(&mut bytes).is_err() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let seed = now.map_or(0, |d| d.as_nanos()) ^ COUNT.fetch_add(1, Ordering::SeqCst) as u128;
        bytes = seed.to_le_bytes();
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// What is queued for one open request's response, kept with the rest under the one lock.
/// A general channel per request (`async_channel::unbounded`) cost a zeroed block of 31 slots
/// and an event list: about 5,000 of the gateway's 97,000 instructions a call over HTTP with
/// 32 in flight (callgrind).
#[derive(Default)]
struct Outbox {
    queued: VecDeque<Delivered>,
    /// The reply's, while it waits.
    waker: Option<Waker>,
}

impl Outbox {
    fn push(&mut self, delivered: Delivered) {
        self.queued.push_back(delivered);
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

/// One host request on its way: its answer, and before it what relates to it. When dropped
/// before the answer (the host hung up), the core says what the machine is to hear.
pub(crate) struct Reply {
    shared: Arc<Mutex<Shared>>,
    /// Held while the request is open: a stateless-era request's machine lives as long.
    machine: Arc<Machine>,
    exchange: ExchangeId,
    listens: bool,
    answered: bool,
}

impl Reply {
    /// What comes next for the response, `None` once the answer has come (or the machine
    /// ended first: then [`answered`](Self::answered) stays `false`).
    pub(crate) async fn next(&mut self) -> Option<Delivered> {
        if self.answered {
            return None;
        }
        let delivered = std::future::poll_fn(|cx| {
            let mut shared = lock(&self.shared);
            let Some(outbox) = shared.exchanges.get_mut(&self.exchange) else {
                return Poll::Ready(None);
            };
            match outbox.queued.pop_front() {
                Some(delivered) => Poll::Ready(Some(delivered)),
                None => {
                    if !(outbox.waker.as_ref()).is_some_and(|waker| waker.will_wake(cx.waker())) {
                        outbox.waker = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
        .await?;
        self.answered |= matches!(delivered, Delivered::Answer(_) | Delivered::Last(_));
        Some(delivered)
    }

    /// Whether its answer has come.
    pub(crate) fn answered(&self) -> bool {
        self.answered
    }

    /// Whether it is a `subscriptions/listen`, which never ends on its own.
    pub(crate) fn listens(&self) -> bool {
        self.listens
    }

    /// Ends it with no answer of its machine's, saying `why`: what to give the response.
    pub(crate) fn abandon(&mut self, why: Abandon) -> Option<Delivered> {
        let abandoned = lock(&self.shared).http.abandon(self.exchange, why);
        self.answered = true;
        let (part, message) = abandoned?;
        Some(match part {
            Part::Answer(response) => Delivered::Answer(response),
            _ => Delivered::Last(Message::from(message)),
        })
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        let mut shared = lock(&self.shared);
        let outbox = shared.exchanges.remove(&self.exchange);
        if self.answered {
            let ended = shared.take_ended();
            drop(shared);
            drop(ended);
            return;
        }
        // What was queued for this request and not written never reaches the host.
        let queued = outbox.into_iter().flat_map(|outbox| outbox.queued);
        let unsent: Vec<Message> = queued
            .filter_map(|delivered| match delivered {
                Delivered::Opens(_, message) | Delivered::Event(message) => Some(message),
                Delivered::Answer(_) | Delivered::Last(_) => None,
            })
            .collect();
        let given =
            (shared.http).hung_up(Instant::now(), self.exchange, unsent.iter().map(|m| &m[..]));
        let ended = shared.take_ended();
        drop(shared);
        for message in given {
            self.machine.server.receive(message);
        }
        drop(ended);
    }
}

/// A session's standalone stream. When dropped (its host hung up), the requests of ours
/// still queued on it are refused, so that nothing waits on a question never written.
pub(crate) struct Standalone {
    shared: Arc<Mutex<Shared>>,
    machine: MachineId,
    /// Which of the session's streams it is.
    stream: u64,
    server: Option<Server>,
    messages: Receiver<Message>,
}

impl Standalone {
    /// The next message for the host; `None` once the machine ended or another stream
    /// replaced this one and all that was sent here has been taken.
    pub(crate) async fn next(&self) -> Option<Message> {
        self.messages.recv().await.ok()
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        let unsent: Vec<Message> = std::iter::from_fn(|| self.messages.try_recv().ok()).collect();
        let mut shared = lock(&self.shared);
        // A stream that replaced this one is left open.
        let current = shared.standalone.get(&self.machine);
        if current.is_some_and(|(stream, _)| *stream == self.stream) {
            shared.standalone.remove(&self.machine);
        }
        let given = (shared.http).standalone_closed(
            Instant::now(),
            self.machine,
            unsent.iter().map(|m| &m[..]),
        );
        drop(shared);
        for message in given {
            if let Some(server) = &self.server {
                server.receive(message);
            }
        }
    }
}

/// Where a machine writes: each line it writes is passed on, as it is written, to where the
/// core says it belongs; a request of ours with nowhere to go is refused at once.
struct Routing {
    shared: Arc<Mutex<Shared>>,
    machine: MachineId,
    /// The machine's handle, for the refusals, once known.
    server: Option<Server>,
    /// The start of a line whose end is still to come.
    partial: Vec<u8>,
}

impl Routing {
    fn route(&mut self, line: &[u8]) {
        let message = match self.partial.is_empty() {
            true => Bytes::copy_from_slice(line),
            false => {
                self.partial.extend_from_slice(line);
                Bytes::from(std::mem::take(&mut self.partial))
            }
        };
        let mut shared = lock(&self.shared);
        let refusal = match shared.http.written(Instant::now(), self.machine, &message) {
            Written::To { exchange, part } => {
                let delivered = match part {
                    Part::Answer(response) => Delivered::Answer(response),
                    Part::Opens(head) => Delivered::Opens(head, message),
                    Part::Event { droppable } => {
                        let to = shared.exchanges.get(&exchange);
                        if droppable && to.is_some_and(|to| to.queued.len() >= MAX_QUEUED) {
                            return;
                        }
                        Delivered::Event(message)
                    }
                    Part::Last => Delivered::Last(message),
                };
                // Kept after the answer too, until the reply has taken it: the core routes
                // nothing more to an exchange it has answered.
                if let Some(to) = shared.exchanges.get_mut(&exchange) {
                    to.push(delivered);
                }
                None
            }
            Written::Standalone => {
                let to = shared.standalone.get(&self.machine).map(|(_, to)| to);
                if let Some(to) = to.filter(|to| to.len() < MAX_QUEUED) {
                    let _ = to.try_send(message);
                }
                None
            }
            Written::Nowhere => None,
            Written::Refused(refusal) => Some(refusal),
        };
        if self.server.is_none() {
            self.server = shared.machines.get(&self.machine).map(|m| m.server.clone());
        }
        drop(shared);
        if let (Some(refusal), Some(server)) = (refusal, &self.server) {
            server.receive(refusal);
        }
    }
}

impl AsyncWrite for Routing {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let routing = self.get_mut();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&byte| byte == b'\n') {
            routing.route(&rest[..end]);
            rest = &rest[end + 1..];
        }
        routing.partial.extend_from_slice(rest);
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
