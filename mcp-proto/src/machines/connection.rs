//! The client connection: every state transition of the protocol lives in this file. Beside
//! it: the settings ([`config`]), what it tells its caller ([`events`]), how a request goes
//! on the wire ([`wire`]), what the server sends besides its answers ([`incoming`]), and
//! what the stateless era does with a request's answer between its rounds ([`rounds`]), and
//! what a server says of the revision it speaks ([`versions`]).
//!
//! Beside it, in `connection/`:
//!
//! - `config.rs`: `Config` and the client capabilities it declares
//! - `events.rs`: `Event`, `RequestId`, `ServerRequest`, `Stats`
//! - `wire.rs`: a request as it goes on the wire
//! - `incoming.rs`: what the server sends besides its answers
//! - `rounds.rs`: the stateless era's input rounds and revision retries
//! - `versions.rs`: what a server says of the revision it speaks
//! - `tests.rs`: unit tests of the bookkeeping (scenarios are in `tests/core`)

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use serde_json::{Value, json};

use crate::machines::pending::{Origin, Outstanding, ProgressToken, deadline_after};
use crate::model::error::{CloseReason, ErrorKind, RequestError, SendError};
use crate::model::params::{Input, StatelessMeta};
use crate::model::raw_result::RawResult;
use crate::model::request::{Params, Request, RequestId};
use crate::model::stateless;
use crate::model::types::{Fallback, Notification, ServerInfo};
use crate::model::versions::{
    Era, HANDSHAKE_VERSIONS, LATEST_PROTOCOL_VERSION, LATEST_STATELESS_VERSION, Protocol,
    STATELESS_VERSIONS,
};
use crate::wire::framing::{self, Line, LineDecoder};
use crate::wire::jsonrpc::{self, ResponseError, RpcError, read_id};
use crate::wire::line_error::LineError;

mod config;
mod events;
mod incoming;
mod rounds;
#[cfg(test)]
mod tests;
mod versions;
mod wire;

pub use config::{ClientCapabilities, Config};
pub use events::{Event, ServerRequest, ServerRequestId, Stats};
use versions::{not_stateless, other_stateless_revision, parse_initialize_result};
pub(crate) use wire::{Outgoing, Sent};
use wire::{encode, outgoing};

/// A server request waiting for the caller's answer.
struct OpenServerRequest {
    answer: Answer,
    method: String,
    deadline: Instant,
}

/// Where the caller's answer to a server request goes.
enum Answer {
    /// To the server, as the response to its request of this id (echoed exactly).
    Wire(Value),
    /// Into the next round of our request `request`, under the server's `key`.
    Input { request: u64, key: String },
}

impl Answer {
    /// Whether it is an input request of our request `id`.
    fn is_for(&self, id: u64) -> bool {
        matches!(self, Answer::Input { request, .. } if *request == id)
    }
}

enum State {
    /// [`Protocol::Auto`]: the `server/discover` probe is in flight; every request is held
    /// until the era is known.
    Probing {
        id: u64,
        deadline: Instant,
        /// Whether this is the probe again in a revision a -32022 named (never a third).
        retried: bool,
        /// Answers to server requests, held until the era is known.
        held_replies: Vec<Vec<u8>>,
    },
    /// Handshake era: `initialize` is in flight; only `ping` and `initialize` may cross the wire.
    Initializing {
        id: u64,
        deadline: Instant,
        /// The revision asked for.
        requested: &'static str,
        /// Answers to server requests, held until `notifications/initialized` is out.
        held_replies: Vec<Vec<u8>>,
        /// Why the probe gave way to the handshake, if it did.
        fallback: Option<Fallback>,
    },
    /// Stateless era at a fixed revision: `server/discover` is in flight and requests go
    /// out beside it.
    Discovering {
        id: u64,
        deadline: Instant,
        /// Whether this is discover again in a revision a -32022 named (never a third).
        retried: bool,
    },
    /// Handshake done (`notifications/initialized` has been queued), or discover answered.
    Ready { server: ServerInfo },
    /// Terminal: inputs are ignored and every pending request has already failed.
    Closed { reason: CloseReason },
}

/// One MCP client connection, as a state machine. See the crate docs for the run loop.
pub struct Connection {
    config: Config,
    state: State,
    /// Boxed, and out only while [`handle_bytes`](Self::handle_bytes) reads its lines in
    /// place: taking it out and putting it back then moves a pointer, not the decoder.
    decoder: Option<Box<LineDecoder>>,
    pending: Outstanding,
    /// Progress tokens (as JSON text) of pending requests whose token is not their own id.
    progress_tokens: BTreeMap<String, u64>,
    /// Server requests the caller has yet to answer, by our own id for them.
    server_requests: BTreeMap<u64, OpenServerRequest>,
    next_server_request: u64,
    /// What to send, each with what it is (see [`Connection::poll_transmit_with`]).
    transmits: VecDeque<(Vec<u8>, Sent)>,
    events: VecDeque<Event>,
    stats: Stats,
    /// Stateless era (and while probing): the `_meta` members of every request.
    era_meta: Option<StatelessMeta>,
    /// Whether [`Sent::Request`] carries its [`Outgoing`] details.
    tag_requests: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Probing { .. } => "Probing",
            State::Initializing { .. } => "Initializing",
            State::Discovering { .. } => "Discovering",
            State::Ready { .. } => "Ready",
            State::Closed { .. } => "Closed",
        };
        f.debug_struct("Connection")
            .field("state", &state)
            .field("pending", &self.pending.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Starts a connection; what goes first depends on [`Config::protocol`]:
    /// [`Protocol::Auto`] queues the `server/discover` probe and holds every request until
    /// the era is known; a stateless revision queues `server/discover` and lets requests
    /// follow it at once; a handshake revision queues `initialize` and holds requests until
    /// the handshake ends.
    pub fn new(now: Instant, config: Config) -> Self {
        let mut connection = Self {
            // One more than is kept: the pager tells a listing cut here from one that fits.
            decoder: Some(Box::new(
                LineDecoder::new(config.max_line_len)
                    .parse_from(framing::PARSE_FROM)
                    .keep_listed(config.max_listed.saturating_add(1)),
            )),
            // Replaced at once by the first step of the lifecycle.
            state: State::Closed {
                reason: CloseReason::Local,
            },
            pending: Outstanding::default(),
            progress_tokens: BTreeMap::new(),
            server_requests: BTreeMap::new(),
            next_server_request: 1,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
            era_meta: None,
            tag_requests: false,
            config,
        };
        match connection.config.protocol {
            Protocol::Auto => connection.probe(now, LATEST_STATELESS_VERSION, false, Vec::new()),
            Protocol::Revision(version) if Era::of(version) == Some(Era::Stateless) => {
                connection.discover(now, version, false);
            }
            Protocol::Revision(version) => {
                connection.begin_handshake(now, version, Vec::new(), None);
            }
        }
        connection
    }

    /// Queues the `server/discover` probe in `version` and holds everything else.
    fn probe(
        &mut self,
        now: Instant,
        version: &'static str,
        retried: bool,
        held_replies: Vec<Vec<u8>>,
    ) {
        let id = self.send_discover(version, true);
        self.state = State::Probing {
            id,
            deadline: deadline_after(now, self.config.handshake_timeout),
            retried,
            held_replies,
        };
    }

    /// Queues `server/discover` in stateless revision `version`; requests go out meanwhile.
    fn discover(&mut self, now: Instant, version: &'static str, retried: bool) {
        let id = self.send_discover(version, false);
        self.state = State::Discovering {
            id,
            deadline: deadline_after(now, self.config.handshake_timeout),
            retried,
        };
    }

    /// Speaks stateless revision `version` from now on, and queues `server/discover` in it.
    fn send_discover(&mut self, version: &'static str, probe: bool) -> u64 {
        self.speak(Some(version));
        let id = self.pending.take_id();
        let bytes = encode(
            self.era_meta.as_ref(),
            id,
            id,
            "server/discover",
            &Params::None,
            Input::default(),
        );
        let sent = Sent::Discover {
            id: RequestId(id),
            probe,
            version,
        };
        self.transmits.push_back((bytes, sent));
        id
    }

    /// Sets the `_meta` of every request to come: stateless revision `version`, or none.
    fn speak(&mut self, version: Option<&'static str>) {
        self.era_meta = version.map(|version| {
            let client_info = json!({
                "name": self.config.client_name,
                "version": self.config.client_version,
            });
            let capabilities = self.config.capabilities.to_json(true);
            StatelessMeta::new(
                version,
                capabilities,
                client_info,
                self.config.log_level.clone(),
            )
        });
    }

    /// Queues `initialize` asking for `requested` under the next id and waits for its answer.
    fn begin_handshake(
        &mut self,
        now: Instant,
        requested: &'static str,
        held_replies: Vec<Vec<u8>>,
        fallback: Option<Fallback>,
    ) {
        self.speak(None);
        let id = self.pending.take_id();
        self.state = State::Initializing {
            id,
            deadline: deadline_after(now, self.config.handshake_timeout),
            requested,
            held_replies,
            fallback,
        };
        let params = json!({
            "protocolVersion": requested,
            "capabilities": self.config.capabilities.to_json(false),
            "clientInfo": {
                "name": self.config.client_name,
                "version": self.config.client_version,
            },
        });
        let initialize = jsonrpc::request(id, "initialize", Some(&params));
        (self.transmits).push_back((initialize, Sent::Initialize(RequestId(id))));
    }

    /// The handshake-era revision to ask for: the one configured, else the newest.
    fn handshake_version(&self) -> &'static str {
        match self.config.protocol {
            Protocol::Revision(version) if Era::of(version) != Some(Era::Stateless) => version,
            _ => LATEST_PROTOCOL_VERSION,
        }
    }

    /// For HTTP: the probe was refused in a way no stateless server refuses (a 4xx whose body
    /// is no stateless-era error), which means the handshake era, as when the probe times out.
    pub(crate) fn probe_refused(&mut self, now: Instant, detail: String) {
        if let State::Probing { held_replies, .. } = &mut self.state {
            let held_replies = std::mem::take(held_replies);
            let fallback = Some(Fallback::Refused(detail));
            self.begin_handshake(now, self.handshake_version(), held_replies, fallback);
        }
    }

    /// For a transport that sends each message on its own (HTTP): from now on every
    /// stateless-era [`Sent::Request`] carries its [`Outgoing`] details.
    pub(crate) fn tag_requests(&mut self) {
        self.tag_requests = true;
    }

    /// The era spoken: `None` while the probe is out (and once closed).
    pub fn era(&self) -> Option<Era> {
        match &self.state {
            State::Probing { .. } | State::Closed { .. } => None,
            State::Initializing { .. } => Some(Era::Handshake),
            State::Discovering { .. } => Some(Era::Stateless),
            State::Ready { server } => server.era(),
        }
    }

    /// The settings this connection was made with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters of what was skipped or dropped so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// What the server said of itself (its `initialize` or `server/discover` answer), once
    /// ready.
    pub fn server_info(&self) -> Option<&ServerInfo> {
        match &self.state {
            State::Ready { server } => Some(server),
            _ => None,
        }
    }

    /// Whether the connection has ended; see [`Event::Closed`].
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed { .. })
    }

    /// Requests that have not ended yet.
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    // ----- inputs -----

    /// Feeds bytes read from the server's stdout.
    ///
    /// `bytes` may hold any fragment of any number of lines; partial lines are buffered.
    /// Afterwards drain [`poll_transmit`](Self::poll_transmit) and
    /// [`poll_event`](Self::poll_event) until both return `None`, then re-arm the timer from
    /// [`poll_timeout`](Self::poll_timeout).
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        if self.is_closed() {
            return;
        }
        // Taken out while its lines are read in place, and put back whatever happens. It is
        // only ever out within this call.
        let Some(mut decoder) = self.decoder.take() else {
            return;
        };
        decoder.push(bytes);
        while let Some(line) = decoder.next_line_in_place() {
            match line {
                Ok(line) => self.handle_line(now, line),
                Err(error) => self.handle_too_long(error),
            }
            if self.is_closed() {
                break;
            }
        }
        self.decoder = Some(decoder);
    }

    /// Feeds one whole message (or batch) that came without line framing: an HTTP response
    /// body, or the `data` of one Server-Sent Event. It may contain newlines. One longer than
    /// [`Config::max_line_len`] is refused as an oversized line would be: the request it
    /// answers, if its `id` can be seen, fails with [`RequestError::ResponseTooLarge`].
    pub fn handle_message(&mut self, now: Instant, message: &[u8]) {
        if self.is_closed() {
            return;
        }
        if message.len() > self.config.max_line_len {
            let error = crate::wire::framing::too_long(self.config.max_line_len, message);
            return self.handle_too_long(error);
        }
        self.handle_line(now, Line::Bytes(message));
    }

    /// [`handle_message`](Self::handle_message) for a message parsed as it arrived in pieces
    /// (an HTTP body or event too large to hold whole), or why it could not be.
    pub(crate) fn handle_parsed(&mut self, now: Instant, parsed: Result<Value, LineError>) {
        if self.is_closed() {
            return;
        }
        match parsed {
            Ok(value) => self.handle_line(now, Line::<&[u8]>::Parsed(value)),
            Err(error) => self.handle_too_long(error),
        }
    }

    /// A message arriving in pieces has just grown over [`Config::max_line_len`] after `size`
    /// bytes, and its first bytes name it the response to `id`: that request fails now.
    pub(crate) fn handle_overflowing(&mut self, limit: usize, size: usize, id: &Value) {
        if !self.is_closed() {
            self.fail_too_large(id, size, limit);
        }
    }

    /// A message parsed as it arrived in pieces is not JSON, and its edges name it the
    /// response to `id`: that request fails now, with [`RequestError::InvalidResponse`].
    pub(crate) fn handle_unreadable(&mut self, now: Instant, id: &Value, error: LineError) {
        if !self.is_closed() {
            self.fail_unreadable(now, id, error);
        }
    }

    /// The server's stdout reached end of file. An unterminated last line is still read.
    pub fn handle_eof(&mut self, now: Instant) {
        if self.is_closed() {
            return;
        }
        if let Some(line) = self
            .decoder
            .as_mut()
            .and_then(|decoder| decoder.finish_line())
        {
            match line {
                Ok(line) => self.handle_line(now, line),
                Err(error) => self.handle_too_long(error),
            }
            if self.is_closed() {
                return;
            }
        }
        let reason = match self.state {
            State::Probing { .. } => CloseReason::EndedOnProbe,
            _ => CloseReason::Eof,
        };
        self.close_with(reason);
    }

    /// Expires every deadline at or before `now`. Call it when the instant returned by
    /// [`poll_timeout`](Self::poll_timeout) has passed; calling it early does no harm.
    pub fn handle_timeout(&mut self, now: Instant) {
        let after = self.config.handshake_timeout;
        match &mut self.state {
            // Silence is what many handshake-era servers answer an unknown method with.
            State::Probing {
                deadline,
                held_replies,
                ..
            } if *deadline <= now => {
                let held_replies = std::mem::take(held_replies);
                let fallback = Some(Fallback::Unanswered { after });
                self.begin_handshake(now, self.handshake_version(), held_replies, fallback);
            }
            State::Initializing { deadline, .. } if *deadline <= now => {
                return self.close_with(CloseReason::HandshakeTimedOut { after });
            }
            State::Discovering { deadline, .. } if *deadline <= now => {
                let detail = format!("no answer to `server/discover` within {after:?}");
                return self.close_with(CloseReason::NotStateless(detail));
            }
            _ => {}
        }
        for (id, after) in self.pending.expired(now) {
            let unacknowledged = self.pending.get(id).is_some_and(|p| p.awaiting_ack);
            let (error, reason) = if unacknowledged {
                let reason = "the subscription was not acknowledged";
                (RequestError::NotAcknowledged { after }, reason.to_owned())
            } else {
                let reason = format!("timed out after {:.1}s", after.as_secs_f64());
                (RequestError::TimedOut { after }, reason)
            };
            self.abandon(id, error, &reason);
        }
        let unanswered: Vec<u64> = (self.server_requests.iter())
            .filter(|(_, open)| open.deadline <= now)
            .map(|(&key, _)| key)
            .collect();
        for key in unanswered {
            if let Some(open) = self.server_requests.remove(&key) {
                let refusal = Err(RpcError::method_not_found(&open.method));
                self.answer(now, open.answer, refusal);
            }
        }
    }

    // ----- commands -----

    /// Sends a request: built by a typed helper such as [`Request::call_tool`], or by
    /// [`Request::new`] for any method, whose `params` must then be an object or an array.
    /// Its deadline is its own [`Request::timeout`], else [`Config::request_timeout`]. A
    /// `params._meta.progressToken` lets progress extend the deadline; it must not be the token
    /// of another pending request ([`SendError::ProgressTokenInUse`]).
    pub fn request<T>(
        &mut self,
        now: Instant,
        request: Request<T>,
    ) -> Result<RequestId, SendError> {
        if let State::Closed { reason } = &self.state {
            return Err(SendError::Closed(reason.clone()));
        }
        if self.era() == Some(Era::Stateless) && not_stateless(&request.method) {
            let method = request.method;
            return Err(SendError::NotInEra {
                method,
                era: Era::Stateless,
            });
        }
        let timeout = request.deadline.or(self.config.request_timeout);
        let id = self.pending.next_id();
        let progress_token = match &request.params {
            Params::CallTool {
                arguments,
                progress_token,
                ..
            } => {
                if !arguments.is_null() && !arguments.is_object() {
                    return Err(SendError::InvalidParams);
                }
                match progress_token {
                    // The call's own id is its progress token: unique, found without a lookup.
                    None => Some(ProgressToken::OwnId),
                    Some(token) => self.claim_token(id, token)?,
                }
            }
            Params::Value(params) if !params.is_object() && !params.is_array() => {
                return Err(SendError::InvalidParams);
            }
            Params::Value(params) => self.claim_progress_token(id, params)?,
            Params::None => None,
        };
        let Request { method, params, .. } = request.untyped();
        // Until the era is known or the handshake ends, only pings may be written (and not
        // even those while probing: the era decides whether `ping` exists).
        let held = match self.state {
            State::Probing { .. } => true,
            State::Initializing { .. } => method != "ping",
            _ => false,
        };
        let sent = (!held).then(|| {
            let input = Input::default();
            let bytes = encode(self.era_meta.as_ref(), id, id, &method, &params, input);
            (bytes, self.sent_request(id, &method, &params))
        });
        // Kept while it may go out again: held, or in the stateless era.
        let keep = held || self.era_meta.is_some();
        let listen = method == stateless::LISTEN;
        let origin = keep.then(|| Origin::new(method, params));
        let started = self
            .pending
            .start(now, timeout, progress_token, held, origin);
        if listen && let Some(pending) = self.pending.get_mut(started) {
            pending.awaiting_ack = true;
        }
        self.transmits.extend(sent);
        Ok(RequestId(started))
    }

    /// What request `id` is, for the transport: with its details in the stateless era, if
    /// asked for.
    fn sent_request(&self, id: u64, method: &str, params: &Params) -> Sent {
        let details = match &self.era_meta {
            Some(meta) if self.tag_requests => {
                Some(Box::new(outgoing(meta.version, method, params)))
            }
            _ => None,
        };
        Sent::Request(RequestId(id), details)
    }

    /// Records the `params._meta.progressToken` of request `id`, if it has one, unless a
    /// pending request already uses it.
    fn claim_progress_token(
        &mut self,
        id: u64,
        params: &Value,
    ) -> Result<Option<ProgressToken>, SendError> {
        match params
            .get("_meta")
            .and_then(|meta| meta.get("progressToken"))
        {
            Some(token) => self.claim_token(id, token),
            None => Ok(None),
        }
    }

    /// Records `token` as request `id`'s progress token, unless a pending request uses it.
    fn claim_token(&mut self, id: u64, token: &Value) -> Result<Option<ProgressToken>, SendError> {
        if token.as_u64() == Some(id) {
            return Ok(Some(ProgressToken::OwnId));
        }
        let text = token.to_string();
        let owned_by_a_call = token
            .as_u64()
            .is_some_and(|owner| self.owns_its_id_as_token(owner));
        if owned_by_a_call || self.progress_tokens.contains_key(&text) {
            return Err(SendError::ProgressTokenInUse);
        }
        self.progress_tokens.insert(text.clone(), id);
        Ok(Some(ProgressToken::Other(text)))
    }

    /// Answers an [`Event::ServerRequest`] with a result or an error. Returns `false` if it
    /// had already been answered, or refused when its deadline passed, or the request of ours
    /// it was asked for has ended, or the connection has closed: then nothing is sent.
    pub fn respond(
        &mut self,
        now: Instant,
        id: ServerRequestId,
        result: Result<Value, RpcError>,
    ) -> bool {
        let Some(open) = self.server_requests.remove(&id.0) else {
            return false;
        };
        self.answer(now, open.answer, result);
        true
    }

    /// Sends the server a notification of ours, such as `notifications/roots/list_changed`
    /// (whose era, and whether the server may hear it, is the caller's to know). Only once
    /// the connection is ready and until it closes; returns whether it was queued.
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> bool {
        if !matches!(self.state, State::Ready { .. }) {
            return false;
        }
        let notification = jsonrpc::notification(method, params);
        self.transmits.push_back((notification, Sent::Other));
        true
    }

    /// Gives up on a request: it fails with [`RequestError::Cancelled`] and, if the server has
    /// seen it, `notifications/cancelled` is queued. Returns `false` if it had already ended.
    pub fn cancel(&mut self, _now: Instant, id: RequestId) -> bool {
        if self.pending.get(id.0).is_none() {
            return false;
        }
        self.abandon(id.0, RequestError::Cancelled, "cancelled by the client");
        true
    }

    /// Ends one pending request with `error`, for a failure the transport saw rather than the
    /// server said (an HTTP exchange that failed, an answer over the size limit). No
    /// cancellation is sent: the server either never got it or has already answered. Returns
    /// `false` if the request had already ended.
    pub fn fail_request(&mut self, _now: Instant, id: RequestId, error: RequestError) -> bool {
        if self.pending.get(id.0).is_none() {
            return false;
        }
        self.finish(id.0, Err(error));
        true
    }

    /// Ends the connection for a reason only the transport knows, usually
    /// [`CloseReason::Transport`]: every pending request fails with it, as with any close.
    pub fn fail(&mut self, reason: CloseReason) {
        if !self.is_closed() {
            self.close_with(reason);
        }
    }

    /// Starts a new session on the same connection, for a server that forgot the old one (an
    /// HTTP `404` on a request carrying its session id): `initialize` is queued again, and
    /// [`Event::Ready`] comes again when it is answered. Pending requests stay pending;
    /// requests issued meanwhile are held until then, as during the first handshake. The
    /// caller re-sends the messages the server refused once the new session is ready. Does
    /// nothing outside the handshake era (and once closed).
    pub fn restart_session(&mut self, now: Instant) {
        // The stateless era has no session to lose, and a probe none yet.
        if self.era() != Some(Era::Handshake) {
            return;
        }
        // Answers to the old session's server requests have nowhere to go.
        self.server_requests.clear();
        self.begin_handshake(now, self.handshake_version(), Vec::new(), None);
    }

    /// Ends the connection: every pending request fails with [`CloseReason::Local`]. The
    /// caller then closes the server's stdin.
    pub fn close(&mut self) {
        if !self.is_closed() {
            self.close_with(CloseReason::Local);
        }
    }

    // ----- outputs -----

    /// The next line to write to the server's stdin, `\n` included.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transmits.pop_front().map(|(bytes, _)| bytes)
    }

    /// [`poll_transmit`](Self::poll_transmit), with what the message is, for a transport that
    /// sends each message on its own and treats the handshake's apart (HTTP).
    pub(crate) fn poll_transmit_with(&mut self) -> Option<(Vec<u8>, Sent)> {
        self.transmits.pop_front()
    }

    /// The next event; drain them after every input or command. A result comes as the
    /// server sent it, a [`RawResult`]: read it into its own type with
    /// [`FromResult::from_raw`](crate::FromResult::from_raw), or into a value with
    /// [`RawResult::into_value`], or pass its text on ([`RawResult::json`]).
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest deadline, if any; call [`handle_timeout`](Self::handle_timeout) then.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let requests = self.pending.first_deadline();
        let answers = self.server_requests.values().map(|open| open.deadline);
        match &self.state {
            State::Probing { deadline, .. } | State::Initializing { deadline, .. } => {
                requests.into_iter().chain([*deadline]).min()
            }
            State::Discovering { deadline, .. } => {
                requests.into_iter().chain(answers).chain([*deadline]).min()
            }
            State::Ready { .. } => requests.into_iter().chain(answers).min(),
            State::Closed { .. } => None,
        }
    }

    // ----- internals -----

    fn handle_response(
        &mut self,
        now: Instant,
        id: &Value,
        result: Result<RawResult, ResponseError>,
        server_info: Option<String>,
    ) {
        let wire = read_id(id);
        let lifecycle = match self.state {
            State::Initializing { id, .. }
            | State::Probing { id, .. }
            | State::Discovering { id, .. } => wire == Some(id),
            _ => false,
        };
        if lifecycle {
            // Read as values: these few answers are the core's own to read.
            let (result, server_info) = match result.map(RawResult::into_members) {
                Ok(Ok(members)) => (Ok(members.result), members.server_info.or(server_info)),
                Ok(Err(error)) => (Err(ResponseError::Invalid(error)), None),
                Err(error) => (Err(error), None),
            };
            return match self.state {
                State::Initializing { .. } => self.finish_handshake(now, result),
                State::Probing { .. } => self.finish_probe(now, result, server_info),
                _ => self.finish_discover(now, result, server_info),
            };
        }
        // Neither a held request nor one waiting for input can be answered, nor a former
        // round of one sent again.
        let Some(id) = wire.and_then(|wire| self.pending.on_wire(wire)) else {
            self.stats.stray_responses += 1;
            return;
        };
        let result = match result {
            Ok(result) if self.era_meta.is_some() => {
                return self.handle_stateless_result(now, id, result);
            }
            Ok(result) => Ok(result),
            Err(ResponseError::Remote(error)) => {
                if self.retry_in_other_revision(now, id, &error) {
                    return;
                }
                Err(RequestError::Remote(error))
            }
            Err(ResponseError::Invalid(detail)) => Err(RequestError::InvalidResponse(detail)),
        };
        self.finish(id, result);
    }

    /// The probe's answer decides the era.
    fn finish_probe(
        &mut self,
        now: Instant,
        result: Result<Value, ResponseError>,
        server_info: Option<String>,
    ) {
        let State::Probing {
            retried,
            held_replies,
            ..
        } = &mut self.state
        else {
            return;
        };
        let retried = *retried;
        let held_replies = std::mem::take(held_replies);
        let (handshake, detail) = match result {
            Ok(result) => match stateless::read_discover_result(result, server_info) {
                Ok(server) => {
                    let supported = &server.supported_versions;
                    match stateless::mutual(supported, STATELESS_VERSIONS) {
                        Some(version) => {
                            self.speak(Some(version));
                            return self.ready(server, version, held_replies);
                        }
                        // A modern server of only revisions we do not speak, or one that also
                        // speaks the handshake era.
                        None => (
                            stateless::mutual(supported, HANDSHAKE_VERSIONS),
                            format!(
                                "it supports {}, no stateless revision we speak",
                                supported.join(", ")
                            ),
                        ),
                    }
                }
                Err(detail) => (None, format!("its answer is unreadable: {detail}")),
            },
            Err(ResponseError::Remote(error)) => {
                if let Some(version) = other_stateless_revision(&error).filter(|_| !retried) {
                    return self.probe(now, version, true, held_replies);
                }
                let handshake = match error.kind() {
                    ErrorKind::UnsupportedVersion { supported, .. } => {
                        stateless::mutual(&supported, HANDSHAKE_VERSIONS)
                    }
                    _ => None,
                };
                (handshake, error.to_string())
            }
            Err(ResponseError::Invalid(detail)) => (None, detail),
        };
        let version = handshake.unwrap_or_else(|| self.handshake_version());
        let fallback = Some(Fallback::Refused(detail));
        self.begin_handshake(now, version, held_replies, fallback);
    }

    /// The answer to `server/discover` at a fixed stateless revision.
    fn finish_discover(
        &mut self,
        now: Instant,
        result: Result<Value, ResponseError>,
        server_info: Option<String>,
    ) {
        let State::Discovering { retried, .. } = self.state else {
            return;
        };
        let Some(version) = self.era_meta.as_ref().map(|meta| meta.version) else {
            return;
        };
        let detail = match result {
            Ok(result) => match stateless::read_discover_result(result, server_info) {
                Ok(server) => return self.ready(server, version, Vec::new()),
                Err(detail) => format!("its `server/discover` result is unreadable: {detail}"),
            },
            Err(ResponseError::Remote(error)) => {
                if let Some(version) = other_stateless_revision(&error).filter(|_| !retried) {
                    self.switch_revision(version);
                    return self.discover(now, version, true);
                }
                format!("`server/discover` failed: {error}")
            }
            Err(ResponseError::Invalid(detail)) => {
                format!("its `server/discover` answer is unreadable: {detail}")
            }
        };
        self.close_with(CloseReason::NotStateless(detail));
    }

    /// The stateless era is on at `version`: held answers and requests go out.
    fn ready(&mut self, mut server: ServerInfo, version: &'static str, held_replies: Vec<Vec<u8>>) {
        server.protocol_version = version.to_owned();
        self.state = State::Ready {
            server: server.clone(),
        };
        let replies = held_replies.into_iter().map(|bytes| (bytes, Sent::Other));
        self.transmits.extend(replies);
        self.release_held();
        self.events.push_back(Event::Ready(server));
    }

    /// Queues the requests held until the era was known, in the era now spoken.
    fn release_held(&mut self) {
        for id in self.pending.release_held() {
            let Some(origin) = self.pending.origin(id) else {
                continue;
            };
            if self.era_meta.is_some() && not_stateless(&origin.method) {
                let method = origin.method.clone();
                let error = RequestError::NotInEra {
                    method,
                    era: Era::Stateless,
                };
                self.finish(id, Err(error));
                continue;
            }
            let meta = self.era_meta.as_ref();
            let bytes = encode(
                meta,
                id,
                id,
                &origin.method,
                &origin.params,
                Input::default(),
            );
            let sent = self.sent_request(id, &origin.method, &origin.params);
            self.transmits.push_back((bytes, sent));
            if self.era_meta.is_none() {
                // Nothing in the handshake era sends it again.
                self.pending.forget_origin(id);
            }
        }
    }

    fn finish_handshake(&mut self, now: Instant, result: Result<Value, ResponseError>) {
        let State::Initializing {
            requested,
            fallback,
            ..
        } = &mut self.state
        else {
            return;
        };
        let (requested, fallback) = (*requested, fallback.take());
        let server = match result {
            Ok(result) => parse_initialize_result(result, requested),
            Err(ResponseError::Remote(error)) => {
                // A stateless server whose answer to the probe came too late (a slow start)
                // refuses `initialize` naming its revision: found out after all, under `Auto`.
                let stateless = other_stateless_revision(&error);
                if let Some(version) = stateless.filter(|_| self.config.protocol == Protocol::Auto)
                {
                    return self.discover(now, version, true);
                }
                Err(CloseReason::InitializeFailed(error))
            }
            Err(ResponseError::Invalid(detail)) => {
                Err(CloseReason::InvalidInitializeResult(detail))
            }
        };
        let server = match server {
            Ok(server) => ServerInfo { fallback, ..server },
            Err(reason) => return self.close_with(reason),
        };
        let previous = std::mem::replace(
            &mut self.state,
            State::Ready {
                server: server.clone(),
            },
        );
        let initialized = jsonrpc::notification(Notification::INITIALIZED, None);
        self.transmits.push_back((initialized, Sent::Initialized));
        if let State::Initializing { held_replies, .. } = previous {
            let replies = held_replies.into_iter().map(|bytes| (bytes, Sent::Other));
            self.transmits.extend(replies);
        }
        self.release_held();
        self.events.push_back(Event::Ready(server));
    }

    /// Ends a request locally, telling the server if it has seen it.
    fn abandon(&mut self, id: u64, error: RequestError, reason: &str) {
        let wire = self.pending.get(id).and_then(|p| p.wire);
        self.finish(id, Err(error));
        // Before the handshake ends only pings may cross the wire, so a ping given up on then
        // goes without a notification (the spec makes it optional).
        let may_notify = !matches!(self.state, State::Initializing { .. });
        if let Some(wire) = wire
            && may_notify
        {
            let params = json!({ "requestId": wire, "reason": reason });
            let cancelled = jsonrpc::notification(Notification::CANCELLED, Some(params));
            self.transmits
                .push_back((cancelled, Sent::Cancelled(RequestId(id))));
        }
    }

    fn finish(&mut self, id: u64, result: Result<RawResult, RequestError>) {
        if let Some(pending) = self.pending.remove(id) {
            if let Some(ProgressToken::Other(token)) = pending.progress_token {
                self.progress_tokens.remove(&token);
            }
            // Off the wire: it may wait for input, which nobody needs now.
            if pending.wire.is_none() {
                (self.server_requests).retain(|_, open| !open.answer.is_for(id));
            }
            let id = RequestId(id);
            self.events.push_back(Event::Response { id, result });
        }
    }

    fn close_with(&mut self, reason: CloseReason) {
        for id in self.pending.take_all() {
            let result = Err(RequestError::Closed(reason.clone()));
            let id = RequestId(id);
            self.events.push_back(Event::Response { id, result });
        }
        self.progress_tokens.clear();
        self.server_requests.clear();
        self.transmits.clear();
        self.events.push_back(Event::Closed(reason.clone()));
        self.state = State::Closed { reason };
    }
}
