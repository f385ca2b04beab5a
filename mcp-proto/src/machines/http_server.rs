//! The server half of Streamable HTTP, both eras: the mirror of
//! [`HttpConnection`](crate::http::HttpConnection). A host's HTTP request goes in (its
//! method, headers and body, and `now`); out comes which server-role machine its message goes
//! to, or the response to give at once. Each message a machine then writes goes in too, and
//! out comes which HTTP request it belongs to and how that request's response takes it: a
//! JSON answer when the answer is the first thing to say, else an event stream that carries
//! what relates to the request and ends with its answer.
//!
//! The transport's rules live here: a session per `initialize` (named in `Mcp-Session-Id`,
//! ended by `DELETE` or after [`HttpLimits::session_idle`] without use), at most
//! [`HttpLimits::max_sessions`] of them; a stateless-era request gets a machine for itself,
//! its headers checked against its body (`MCP-Protocol-Version`, `Mcp-Method`); the status of
//! each answer; the standalone stream of a session's `GET`; what a host that hung up leaves
//! (its requests of ours refused, a session's request cancelled). The caller keeps the
//! sockets, the bearer token, `Host` and `Origin`, the size of bodies, and the machines
//! themselves ([`ServerConnection`](super::server::ServerConnection)s), which it makes when
//! told and drops when [`HttpServer::take_ended`] says.
//!
//! Beside it, in `http_server/`:
//!
//! - `request.rs`: what it reads of a request, and the responses it makes
//! - `routes.rs`: one machine's open requests, and where each message it writes goes

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::machines::server::{HostMessage, ServerConnection};
use crate::wire::jsonrpc::RpcError;
use request::{SESSION_HEADER, rpc_error};
use routes::{Carried, HUNG_UP, Routes, Target, error_code, refusal};

mod request;
mod routes;
#[cfg(test)]
mod tests;

pub use request::{HttpRequest, HttpResponse, event};
pub use routes::ExchangeId;

/// The stateless era's long-lived request.
const LISTEN: &str = "subscriptions/listen";

/// Implementation-defined server error: too many open, retry later.
const TOO_MANY: i64 = -32000;

/// What a request naming an unknown session is answered with (as the TypeScript SDK does).
const UNKNOWN_SESSION: i64 = -32001;

/// JSON-RPC "Internal error".
const INTERNAL: i64 = RpcError::INTERNAL_ERROR;

/// Limits of an [`HttpServer`], fixed for its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// At most this many sessions at once; an `initialize` beyond them is refused with 503.
    pub max_sessions: usize,
    /// At most this many stateless-era requests open at once; one more is refused with 429.
    pub max_stateless: usize,
    /// At most this many requests of one machine open at once; one more is refused with 429.
    pub max_in_flight: usize,
    /// A session with no request open, no stream open and no request for this long ends.
    pub session_idle: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_sessions: 256,
            max_stateless: 256,
            max_in_flight: 64,
            session_idle: Duration::from_secs(60 * 60),
        }
    }
}

/// One server-role machine of the caller's: a session's, or one stateless-era request's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MachineId(u64);

/// What to do with a host's HTTP request, from [`HttpServer::receive`].
#[derive(Debug)]
pub enum Routed {
    /// Give this response; nothing more.
    Respond(HttpResponse),
    /// Give `message`, a request, to `machine`, first making it when `opens`; its answer,
    /// and what relates to it, come back through [`HttpServer::written`] for `exchange`.
    Request {
        /// The machine.
        machine: MachineId,
        /// The machine is new: make it first.
        opens: bool,
        /// Where its response stands.
        exchange: ExchangeId,
        /// The host's request.
        message: HostMessage,
    },
    /// Give `message` (a notification, or the host's answer to a request of ours) to
    /// `machine`, and answer [`HttpResponse::accepted`].
    Pass {
        /// The session's machine.
        machine: MachineId,
        /// The host's message.
        message: HostMessage,
    },
    /// A session's standalone stream opens: give `response`, then `held` (each a message to
    /// frame with [`event`]), then what [`Written::Standalone`] says; a stream opened before
    /// is replaced.
    Standalone {
        /// The session's machine.
        machine: MachineId,
        /// The stream's head.
        response: HttpResponse,
        /// The notifications that came before it opened.
        held: Vec<Vec<u8>>,
    },
}

/// Where a message a machine wrote goes, from [`HttpServer::written`].
#[derive(Debug, PartialEq)]
pub enum Written {
    /// To the HTTP response of `exchange`.
    To {
        /// The request it relates to.
        exchange: ExchangeId,
        /// How that response takes it.
        part: Part,
    },
    /// To the session's standalone stream, as an [`event`].
    Standalone,
    /// Nowhere: it was held for a standalone stream not open yet, or it relates to a
    /// request whose response takes nothing but the answer.
    Nowhere,
    /// A request of ours that no response can take: give the machine this refusal as the
    /// host's answer.
    Refused(HostMessage),
}

/// How an exchange's HTTP response takes a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Part {
    /// The answer came first: this response (its body the message), and the exchange ends.
    Answer(HttpResponse),
    /// Something else came first: this head opens an event stream, and the message is its
    /// first [`event`].
    Opens(HttpResponse),
    /// A later [`event`] on the open stream; `droppable` for a notification, which may be
    /// lost to a host too slow to read it (a request of ours may not).
    Event {
        /// Whether it may be dropped.
        droppable: bool,
    },
    /// The answer, the stream's last [`event`]; the exchange ends.
    Last,
}

/// Why an exchange ends with no answer of its machine's, for [`HttpServer::abandon`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandon {
    /// The machine ended first.
    MachineEnded,
    /// The caller stops serving: a `subscriptions/listen` is answered as complete, any
    /// other request with an error.
    Stopping,
    /// The caller stopped waiting (its grace ran out): an error.
    Aborted,
}

/// The server half of Streamable HTTP for any number of hosts of either era.
#[derive(Debug, Default)]
pub struct HttpServer {
    limits: HttpLimits,
    /// The sessions by id.
    sessions: BTreeMap<String, Session>,
    machines: BTreeMap<MachineId, Machine>,
    exchanges: BTreeMap<ExchangeId, Exchange>,
    /// The machines the caller is to drop.
    ended: Vec<MachineId>,
    /// The requests that ended with their machine, for the caller to answer.
    abandoned: Vec<(ExchangeId, Part, Vec<u8>)>,
    stateless_open: usize,
    next: u64,
    /// The latest `now` given: when a session was last used, for what is given no time.
    last_now: Option<Instant>,
}

#[derive(Debug)]
struct Session {
    machine: MachineId,
    /// When it was last used.
    seen: Instant,
}

#[derive(Debug)]
struct Machine {
    /// The session's id; set before its `initialize` is answered, which confirms it.
    session: Option<String>,
    confirmed: bool,
    routes: Routes,
}

#[derive(Debug)]
struct Exchange {
    machine: MachineId,
    /// The host's id, and its JSON text (the routes' key).
    id: Value,
    key: String,
    /// Its response's head has been given (an event stream).
    started: bool,
    /// A `subscriptions/listen`, which never ends on its own.
    listens: bool,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("open", &self.open.len())
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// A server with no hosts yet.
    pub fn new(limits: HttpLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Reads a host's HTTP request. `new_session` makes a session's id (visible ASCII,
    /// unguessable: the caller's random source), asked only for an `initialize`.
    pub fn receive(
        &mut self,
        now: Instant,
        request: &HttpRequest<'_>,
        new_session: impl FnOnce() -> String,
    ) -> Routed {
        self.handle_timeout(now);
        match request.method {
            "POST" => self.post(now, request, new_session),
            "GET" => self.get(now, request).unwrap_or_else(Routed::Respond),
            "DELETE" => Routed::Respond(self.delete(request)),
            _ => Routed::Respond(HttpResponse::not_allowed(
                "POST a message, GET a session's stream, or DELETE the session",
            )),
        }
    }

    fn post(
        &mut self,
        now: Instant,
        request: &HttpRequest<'_>,
        new_session: impl FnOnce() -> String,
    ) -> Routed {
        let message = match request.message() {
            Ok(message) => message,
            Err(response) => return Routed::Respond(response),
        };
        let streams = request.accepts_events();
        if let Some(session) = request.session() {
            let Some(machine) = self.session(now, session) else {
                return Routed::Respond(unknown_session());
            };
            if !message.is_request() {
                return Routed::Pass { machine, message };
            }
            return self.open(machine, false, message, streams);
        }
        let id = message.id().cloned().unwrap_or(Value::Null);
        match message.method() {
            _ if !message.is_request() => Routed::Respond(HttpResponse::accepted()),
            Some("initialize") => {
                if self.sessions.len() >= self.limits.max_sessions {
                    let error = rpc_error(&id, TOO_MANY, "too many sessions open");
                    return Routed::Respond(HttpResponse::json(503, &error));
                }
                let machine = self.new_machine(Some(new_session()));
                self.open(machine, true, message, false)
            }
            method => {
                if let Some(error) = request.mirror_mismatch(&message) {
                    return Routed::Respond(HttpResponse::json(400, &error));
                }
                // Its notifications come on an event stream, which this host must take.
                if method == Some(LISTEN) && !streams {
                    let text = "subscriptions/listen is answered with an event stream: send \
                                Accept: text/event-stream";
                    let error = rpc_error(&id, ServerConnection::INVALID_REQUEST, text);
                    return Routed::Respond(HttpResponse::json(406, &error));
                }
                if self.stateless_open >= self.limits.max_stateless {
                    let text = format!(
                        "{} requests are open; retry later",
                        self.limits.max_stateless
                    );
                    let error = rpc_error(&id, TOO_MANY, &text);
                    return Routed::Respond(HttpResponse::json(429, &error));
                }
                self.stateless_open += 1;
                let machine = self.new_machine(None);
                self.open(machine, true, message, streams)
            }
        }
    }

    /// A session's machine, if it is one, marked as used now.
    fn session(&mut self, now: Instant, id: &str) -> Option<MachineId> {
        let session = self.sessions.get_mut(id)?;
        session.seen = now;
        Some(session.machine)
    }

    fn new_machine(&mut self, session: Option<String>) -> MachineId {
        let machine = MachineId(self.next_id());
        let state = Machine {
            session,
            confirmed: false,
            routes: Routes::default(),
        };
        self.machines.insert(machine, state);
        machine
    }

    fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Opens an exchange for `message`, a request, on `machine`.
    fn open(
        &mut self,
        machine: MachineId,
        opens: bool,
        message: HostMessage,
        streams: bool,
    ) -> Routed {
        let id = message.id().cloned().unwrap_or(Value::Null);
        let refused = |this: &mut Self, status, code, text: &str| {
            if opens {
                this.end_machine(machine);
            }
            Routed::Respond(HttpResponse::json(status, &rpc_error(&id, code, text)))
        };
        let Some(state) = self.machines.get(&machine) else {
            return refused(self, 404, UNKNOWN_SESSION, "the session has ended");
        };
        let key = id.to_string();
        if state.routes.open.len() >= self.limits.max_in_flight {
            let text = format!(
                "{} requests of this host are open; retry later",
                self.limits.max_in_flight
            );
            return refused(self, 429, TOO_MANY, &text);
        }
        if state.routes.open.contains_key(&key) {
            let text = "a request with this id is already open";
            return refused(self, 400, ServerConnection::INVALID_REQUEST, text);
        }
        let token = (message.meta("progressToken"))
            .filter(|token| !token.is_null())
            .map(Value::to_string);
        let exchange = ExchangeId(self.next_id());
        let listens = message.method() == Some(LISTEN);
        if let Some(state) = self.machines.get_mut(&machine) {
            state.routes.open(key.clone(), exchange, token, streams);
        }
        let state = Exchange {
            machine,
            id,
            key,
            started: false,
            listens,
        };
        self.exchanges.insert(exchange, state);
        Routed::Request {
            machine,
            opens,
            exchange,
            message,
        }
    }

    /// GET: a session's standalone stream, for what its machine sends that relates to no
    /// request of the host's (list changes).
    fn get(&mut self, now: Instant, request: &HttpRequest<'_>) -> Result<Routed, HttpResponse> {
        if !request.accepts_events() {
            let text = "GET opens an event stream: send Accept: text/event-stream";
            return Err(HttpResponse::plain(406, text));
        }
        let Some(session) = request.session() else {
            return Err(HttpResponse::not_allowed(
                "GET opens a session's stream: send its Mcp-Session-Id (stateless-era hosts send \
                 subscriptions/listen instead)",
            ));
        };
        let machine = self.session(now, session).ok_or_else(unknown_session)?;
        let state = self
            .machines
            .get_mut(&machine)
            .ok_or_else(unknown_session)?;
        state.routes.standalone += 1;
        let held = state.routes.held.drain(..).collect();
        Ok(Routed::Standalone {
            machine,
            response: HttpResponse::event_stream(),
            held,
        })
    }

    /// DELETE: the host ends its session; its machine is to be dropped, which ends its calls.
    fn delete(&mut self, request: &HttpRequest<'_>) -> HttpResponse {
        let Some(session) = request.session() else {
            return HttpResponse::plain(400, "no Mcp-Session-Id to end");
        };
        match self.sessions.remove(session) {
            Some(session) => {
                self.end_machine(session.machine);
                HttpResponse::plain(200, "session ended")
            }
            None => HttpResponse::plain(404, "unknown session"),
        }
    }

    /// Reads `message`, one message `machine` wrote (without its line's end): where it goes.
    pub fn written(&mut self, now: Instant, machine: MachineId, message: &[u8]) -> Written {
        self.last_now = Some(now);
        let Some(state) = self.machines.get_mut(&machine) else {
            return Written::Nowhere;
        };
        match state.routes.route(message) {
            Target::Request { exchange, what } => {
                let part = match what {
                    Carried::Answer => self.answer(now, exchange, message),
                    Carried::Request => self.event(exchange, false),
                    Carried::Notification => self.event(exchange, true),
                };
                Written::To { exchange, part }
            }
            Target::Standalone => Written::Standalone,
            // Only a session has a standalone stream to hold it for.
            Target::Hold if state.session.is_some() => {
                state.routes.hold(message);
                Written::Nowhere
            }
            Target::Hold | Target::Nowhere => Written::Nowhere,
            Target::Refused(why) => refused(message, why),
        }
    }

    /// The part an exchange's answer is; the exchange ends with it.
    fn answer(&mut self, now: Instant, exchange: ExchangeId, message: &[u8]) -> Part {
        let Some(state) = self.exchanges.remove(&exchange) else {
            return Part::Last;
        };
        let machine = state.machine;
        let session = self.machines.get(&machine).and_then(|m| m.session.clone());
        let code = error_code(message);
        let mut response = match state.started {
            true => None,
            false => Some(HttpResponse::json_text(
                self.status(machine, code),
                message.to_vec(),
            )),
        };
        match session {
            // A session's `initialize`: confirmed by a result, named in its response.
            Some(id) if !self.is_confirmed(machine) => match (code, response.as_mut()) {
                (None, Some(response)) => {
                    response.headers.push((SESSION_HEADER, id.clone()));
                    self.confirm(now, machine, id);
                }
                _ => self.end_machine(machine),
            },
            Some(_) => self.touch(machine),
            // A stateless-era request's machine ends with its answer.
            None => self.end_machine(machine),
        }
        match response {
            Some(response) => Part::Answer(response),
            None => Part::Last,
        }
    }

    fn is_confirmed(&self, machine: MachineId) -> bool {
        self.machines
            .get(&machine)
            .is_some_and(|state| state.confirmed)
    }

    fn confirm(&mut self, now: Instant, machine: MachineId, id: String) {
        if let Some(state) = self.machines.get_mut(&machine) {
            state.confirmed = true;
        }
        self.sessions.insert(id, Session { machine, seen: now });
    }

    /// Marks a session's machine as used at the latest `now`: its idle time starts again.
    fn touch(&mut self, machine: MachineId) {
        let id = self
            .machines
            .get(&machine)
            .and_then(|state| state.session.as_ref());
        let session = id.and_then(|id| self.sessions.get_mut(id));
        if let (Some(session), Some(now)) = (session, self.last_now) {
            session.seen = session.seen.max(now);
        }
    }

    /// The part a message other than the answer is, on a response that streams.
    fn event(&mut self, exchange: ExchangeId, droppable: bool) -> Part {
        match self.exchanges.get_mut(&exchange) {
            Some(state) if !state.started => {
                state.started = true;
                Part::Opens(HttpResponse::event_stream())
            }
            _ => Part::Event { droppable },
        }
    }

    /// The status of an answer whose error code is `code`: 200, but for what the stateless
    /// era's transport gives a status of its own.
    fn status(&self, machine: MachineId, code: Option<i64>) -> u16 {
        let stateless = self
            .machines
            .get(&machine)
            .is_some_and(|m| m.session.is_none());
        match (stateless, code) {
            (true, Some(RpcError::UNSUPPORTED_PROTOCOL_VERSION)) => 400,
            (true, Some(RpcError::METHOD_NOT_FOUND)) => 404,
            _ => 200,
        }
    }

    /// Ends `exchange` with no answer of its machine's, saying `why`: the part and the
    /// message to give its response (a JSON answer, or the last event of its stream), and
    /// for a machine still running what to give it (a stateless-era request's machine is
    /// to be dropped; see [`take_ended`](Self::take_ended)). `None` if it had ended.
    pub fn abandon(&mut self, exchange: ExchangeId, why: Abandon) -> Option<(Part, Vec<u8>)> {
        let state = self.exchanges.remove(&exchange)?;
        self.close_exchange(&state);
        Some(ending(&state, why))
    }

    /// The host hung up on `exchange` before its answer was written; `unsent` are the
    /// messages routed to it and never written. Returns what to give its machine: the
    /// refusals of the requests of ours among `unsent`, and for a session's request its
    /// cancellation (a stateless-era request's machine is to be dropped instead).
    pub fn hung_up<'a>(
        &mut self,
        now: Instant,
        exchange: ExchangeId,
        unsent: impl IntoIterator<Item = &'a [u8]>,
    ) -> Vec<HostMessage> {
        self.last_now = Some(now);
        let mut given: Vec<HostMessage> = refusals(unsent);
        let Some(state) = self.exchanges.remove(&exchange) else {
            return given;
        };
        self.close_exchange(&state);
        if self.machines.contains_key(&state.machine) {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": state.id, "reason": "the host hung up"}});
            let text = serde_json::to_vec(&note).unwrap_or_default();
            given.extend(HostMessage::decode(&text).ok());
        }
        given
    }

    /// A session's standalone stream closed; `unsent` were routed to it and never written:
    /// the refusals to give the machine for the requests of ours among them.
    pub fn standalone_closed<'a>(
        &mut self,
        now: Instant,
        machine: MachineId,
        unsent: impl IntoIterator<Item = &'a [u8]>,
    ) -> Vec<HostMessage> {
        self.last_now = Some(now);
        if let Some(state) = self.machines.get_mut(&machine) {
            state.routes.standalone = state.routes.standalone.saturating_sub(1);
        }
        self.touch(machine);
        refusals(unsent)
    }

    /// Takes an ended exchange off its machine's routes; a stateless-era request's machine
    /// ends with it.
    fn close_exchange(&mut self, state: &Exchange) {
        let Some(machine) = self.machines.get_mut(&state.machine) else {
            return;
        };
        machine.routes.open.remove(&state.key);
        match machine.session.is_none() || !machine.confirmed {
            true => self.end_machine(state.machine),
            false => self.touch(state.machine),
        }
    }

    fn end_machine(&mut self, machine: MachineId) {
        let Some(state) = self.machines.remove(&machine) else {
            return;
        };
        match &state.session {
            Some(id) => _ = self.sessions.remove(id),
            None => self.stateless_open = self.stateless_open.saturating_sub(1),
        }
        // Its requests still open end with it, answered with an error.
        let open: Vec<ExchangeId> = (self.exchanges.iter())
            .filter(|(_, state)| state.machine == machine)
            .map(|(exchange, _)| *exchange)
            .collect();
        for exchange in open {
            if let Some(state) = self.exchanges.remove(&exchange) {
                let (part, message) = ending(&state, Abandon::MachineEnded);
                self.abandoned.push((exchange, part, message));
            }
        }
        self.ended.push(machine);
    }

    /// The requests that ended with their machine (a session deleted while they were open):
    /// the part each response takes and the message, once each.
    pub fn take_abandoned(&mut self) -> Vec<(ExchangeId, Part, Vec<u8>)> {
        std::mem::take(&mut self.abandoned)
    }

    /// The machines to drop (ended sessions, answered stateless-era requests, failed
    /// `initialize`s), once each.
    pub fn take_ended(&mut self) -> Vec<MachineId> {
        std::mem::take(&mut self.ended)
    }

    /// When the next idle session ends, if any may.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let idle = self
            .sessions
            .values()
            .filter(|session| self.is_idle(session.machine));
        idle.map(|session| session.seen + self.limits.session_idle)
            .min()
    }

    /// Ends the sessions idle for [`HttpLimits::session_idle`] by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = Some(now);
        let expired: Vec<String> = (self.sessions.iter())
            .filter(|(_, session)| {
                self.is_idle(session.machine) && now >= session.seen + self.limits.session_idle
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(session) = self.sessions.remove(&id) {
                self.end_machine(session.machine);
            }
        }
    }

    /// Whether a session's machine has nothing open: no request, no standalone stream.
    fn is_idle(&self, machine: MachineId) -> bool {
        self.machines
            .get(&machine)
            .is_none_or(|state| state.routes.open.is_empty() && state.routes.standalone == 0)
    }
}

fn unknown_session() -> HttpResponse {
    HttpResponse::json(
        404,
        &rpc_error(&Value::Null, UNKNOWN_SESSION, "unknown session"),
    )
}

/// The refusal of `message`, a request of ours, as the host's answer.
fn refused(message: &[u8], why: &str) -> Written {
    let refusal = refusal(message, why).and_then(|text| HostMessage::decode(&text).ok());
    refusal.map_or(Written::Nowhere, Written::Refused)
}

/// The refusals of the requests of ours among `unsent`, messages that will never be written.
fn refusals<'a>(unsent: impl IntoIterator<Item = &'a [u8]>) -> Vec<HostMessage> {
    (unsent.into_iter())
        .filter_map(|message| refusal(message, HUNG_UP))
        .filter_map(|text| HostMessage::decode(&text).ok())
        .collect()
}

/// What ends `exchange` with no answer of its machine's, saying `why`: the part its response
/// takes and the message.
fn ending(state: &Exchange, why: Abandon) -> (Part, Vec<u8>) {
    let text = match why {
        Abandon::MachineEnded => "the session ended first",
        Abandon::Aborted | Abandon::Stopping => {
            "mcp-cli serve is stopping; the call did not finish"
        }
    };
    let message = match (why, state.listens) {
        (Abandon::Stopping, true) => {
            let meta = json!({ "io.modelcontextprotocol/subscriptionId": state.id });
            let result = json!({"resultType": "complete", "_meta": meta});
            json!({"jsonrpc": "2.0", "id": state.id, "result": result})
        }
        _ => rpc_error(&state.id, INTERNAL, text),
    };
    let message = serde_json::to_vec(&message).unwrap_or_default();
    let part = match state.started {
        true => Part::Last,
        false => Part::Answer(HttpResponse::json_text(200, message.clone())),
    };
    (part, message)
}
