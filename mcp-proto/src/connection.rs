//! The client connection: every state transition of the protocol lives in this file.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error::{CloseReason, RequestError, RpcError, SendError};
use crate::framing::{LineDecoder, LineError};
use crate::jsonrpc::{self, Message, ResponseError};
use crate::pending::{Outstanding, ProgressToken, deadline_after, read_id};
use crate::request::{Params, Request};
use crate::types::{Implementation, Notification, ServerCapabilities, ServerInfo};
use crate::{HANDSHAKE_VERSIONS, LATEST_PROTOCOL_VERSION, Protocol};

/// Settings fixed for the life of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Sent as `clientInfo`.
    pub client_name: String,
    /// Sent as `clientInfo.version`.
    pub client_version: String,
    /// Budget for the `initialize` answer; on expiry the connection closes.
    pub handshake_timeout: Duration,
    /// Default deadline of each request, restarted by progress notifications.
    pub request_timeout: Duration,
    /// However much progress a server reports, a request fails after this long in total
    /// (or after its own timeout, if that is longer).
    pub max_request_time: Duration,
    /// Longest line accepted from the server, in bytes, without its newline.
    pub max_line_len: usize,
    /// What we offer the server; by default nothing, so every server request but `ping` is
    /// refused.
    pub capabilities: ClientCapabilities,
    /// How long a declared server request ([`Event::ServerRequest`]) waits for
    /// [`Connection::respond`] before it is refused.
    pub server_request_timeout: Duration,
    /// Which revision to speak: found out by a `server/discover` probe, or fixed.
    pub protocol: Protocol,
}

/// Client capabilities the caller declares in `initialize`. Each one declared turns the
/// matching server request into an [`Event::ServerRequest`] for the caller to answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCapabilities {
    /// `roots/list`: the caller names the directories the server may work in.
    pub roots: bool,
    /// `elicitation/create`: the caller asks a person to fill in a form.
    pub elicitation: bool,
    /// `sampling/createMessage`: the caller runs a language model for the server.
    pub sampling: bool,
}

impl ClientCapabilities {
    fn to_json(self) -> Value {
        let declared = [
            ("roots", self.roots),
            ("elicitation", self.elicitation),
            ("sampling", self.sampling),
        ];
        let capabilities = (declared.into_iter())
            .filter(|(_, on)| *on)
            .map(|(name, _)| (name.to_owned(), json!({})));
        Value::Object(capabilities.collect())
    }

    /// Whether a server request of this method is the caller's to answer.
    fn covers(self, method: &str) -> bool {
        match method {
            "roots/list" => self.roots,
            "elicitation/create" => self.elicitation,
            "sampling/createMessage" => self.sampling,
            _ => false,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            client_name: "mcp-proto".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_request_time: Duration::from_secs(600),
            max_line_len: 64 * 1024 * 1024,
            capabilities: ClientCapabilities::default(),
            // Long enough for a person to fill in a form.
            server_request_timeout: Duration::from_secs(300),
            protocol: Protocol::Revision(LATEST_PROTOCOL_VERSION),
        }
    }
}

/// Identifies one request of ours. Ids count up from 1 and are never reused (0 is skipped
/// because some servers treat a falsy id as absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub(crate) u64);

impl serde::Serialize for RequestId {
    /// As it goes on the wire: the number in the message's `id`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Identifies one server request that waits for [`Connection::respond`]. Our own counter:
/// the server's id, whatever its type, is echoed by the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerRequestId(pub(crate) u64);

/// A request from the server that a declared capability makes the caller's to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRequest {
    /// What to pass to [`Connection::respond`].
    pub id: ServerRequestId,
    /// `roots/list`, `elicitation/create` or `sampling/createMessage`.
    pub method: String,
    /// As sent; `None` when the server sent no `params`.
    pub params: Option<Value>,
}

/// What happened, drained with [`Connection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake is done; held requests have been queued after `notifications/initialized`.
    Ready(ServerInfo),
    /// A request of ours ended. Every request ends exactly once.
    Response {
        /// The request, as [`Connection::request`] returned it.
        id: RequestId,
        /// Its `result` member, or why it failed.
        result: Result<Value, RequestError>,
    },
    /// A notification from the server (progress, logging, list changes, anything else).
    Notification(Notification),
    /// The server asks something a declared capability covers; answer it with
    /// [`Connection::respond`] before [`Config::server_request_timeout`], or it is refused.
    ServerRequest(ServerRequest),
    /// A line from the server was skipped; the connection goes on.
    Malformed(LineError),
    /// The connection ended; always the last event. Pending requests have already failed.
    Closed(CloseReason),
}

/// Counters for diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Responses whose id matched no pending request (late, duplicate or invented).
    pub stray_responses: u64,
    /// Lines reported as [`Event::Malformed`].
    pub malformed_lines: u64,
    /// Refusals of server requests dropped because too many piled up during the handshake.
    pub dropped_replies: u64,
}

/// At most this many refusals of server requests wait for the handshake to end.
const MAX_HELD_REPLIES: usize = 64;

/// At most this many server requests wait for the caller's answer; more are refused at once.
const MAX_OPEN_SERVER_REQUESTS: usize = 64;

/// A server request waiting for the caller's answer.
struct OpenServerRequest {
    /// The server's id, echoed exactly.
    id: Value,
    method: String,
    deadline: Instant,
}

enum State {
    /// `initialize` is in flight; only `ping` and `initialize` may cross the wire.
    Initializing {
        id: u64,
        deadline: Instant,
        /// Answers to server requests, held until `notifications/initialized` is out.
        held_replies: Vec<Vec<u8>>,
    },
    /// Handshake done; `notifications/initialized` has been queued.
    Ready { server: ServerInfo },
    /// Terminal: inputs are ignored and every pending request has already failed.
    Closed { reason: CloseReason },
}

/// What a queued message is, for a transport that sends each message on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// `initialize`, opening a session.
    Initialize(RequestId),
    /// `notifications/initialized`, closing the handshake.
    Initialized,
    /// Any other request of ours.
    Request(RequestId),
    /// A notification, or an answer to the server.
    Other,
}

/// One MCP client connection, as a state machine. See the crate docs for the run loop.
pub struct Connection {
    config: Config,
    state: State,
    decoder: LineDecoder,
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
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Initializing { .. } => "Initializing",
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
    /// Starts a connection: the `initialize` request is queued at once.
    pub fn new(now: Instant, config: Config) -> Self {
        let mut connection = Self {
            decoder: LineDecoder::new(config.max_line_len),
            // Replaced at once by `begin_handshake`.
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
            config,
        };
        connection.begin_handshake(now);
        connection
    }

    /// Queues `initialize` under the next id and waits for its answer.
    fn begin_handshake(&mut self, now: Instant) {
        let id = self.pending.take_id();
        self.state = State::Initializing {
            id,
            deadline: deadline_after(now, self.config.handshake_timeout),
            held_replies: Vec::new(),
        };
        let params = json!({
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": self.config.capabilities.to_json(),
            "clientInfo": {
                "name": self.config.client_name,
                "version": self.config.client_version,
            },
        });
        let initialize = jsonrpc::request(id, "initialize", Some(&params));
        (self.transmits).push_back((initialize, Sent::Initialize(RequestId(id))));
    }

    /// The settings this connection was made with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters of what was skipped or dropped so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The server's handshake answer, once ready.
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
        // Taken out while its lines are read in place, and put back whatever happens.
        let mut decoder = std::mem::replace(&mut self.decoder, LineDecoder::new(0));
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
        self.decoder = decoder;
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
            let error = crate::framing::too_long(self.config.max_line_len, message);
            return self.handle_too_long(error);
        }
        self.handle_line(now, message);
    }

    /// The server's stdout reached end of file. An unterminated last line is still read.
    pub fn handle_eof(&mut self, now: Instant) {
        if self.is_closed() {
            return;
        }
        if let Some(line) = self.decoder.finish() {
            self.handle_line(now, &line);
        }
        self.close_with(CloseReason::Eof);
    }

    /// Expires every deadline at or before `now`. Call it when the instant returned by
    /// [`poll_timeout`](Self::poll_timeout) has passed; calling it early does no harm.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let State::Initializing { deadline, .. } = self.state
            && deadline <= now
        {
            let after = self.config.handshake_timeout;
            return self.close_with(CloseReason::HandshakeTimedOut { after });
        }
        for (id, after) in self.pending.expired(now) {
            let reason = format!("timed out after {:.1}s", after.as_secs_f64());
            self.abandon(id, RequestError::TimedOut { after }, &reason);
        }
        let unanswered: Vec<u64> = (self.server_requests.iter())
            .filter(|(_, open)| open.deadline <= now)
            .map(|(&key, _)| key)
            .collect();
        for key in unanswered {
            if let Some(open) = self.server_requests.remove(&key) {
                let refusal = Err(RpcError::method_not_found(&open.method));
                let refusal = jsonrpc::response(open.id, refusal);
                self.transmits.push_back((refusal, Sent::Other));
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
        let timeout = request.timeout.unwrap_or(self.config.request_timeout);
        let id = self.pending.next_id();
        let (bytes, progress_token) = match &request.params {
            Params::CallTool {
                name,
                arguments,
                progress_token,
            } => {
                let empty = Value::Object(serde_json::Map::new());
                let arguments = match arguments {
                    Value::Null => &empty,
                    Value::Object(_) => arguments,
                    _ => return Err(SendError::InvalidParams),
                };
                match progress_token {
                    // The call's own id is its progress token: unique, found without a lookup.
                    None => {
                        let meta = jsonrpc::ProgressMeta { progress_token: id };
                        let params = jsonrpc::CallToolParams {
                            name,
                            arguments,
                            meta,
                        };
                        let bytes = jsonrpc::request(id, &request.method, Some(&params));
                        (bytes, Some(ProgressToken::OwnId))
                    }
                    Some(token) => {
                        let claimed = self.claim_token(id, token)?;
                        let meta = jsonrpc::ProgressMeta {
                            progress_token: token,
                        };
                        let params = jsonrpc::CallToolParams {
                            name,
                            arguments,
                            meta,
                        };
                        let bytes = jsonrpc::request(id, &request.method, Some(&params));
                        (bytes, claimed)
                    }
                }
            }
            Params::Value(params) if !params.is_object() && !params.is_array() => {
                return Err(SendError::InvalidParams);
            }
            Params::Value(params) => {
                let progress_token = self.claim_progress_token(id, params)?;
                (
                    jsonrpc::request(id, &request.method, Some(params)),
                    progress_token,
                )
            }
            Params::None => (jsonrpc::request::<Value>(id, &request.method, None), None),
        };
        Ok(self.start_request(now, &request.method, bytes, progress_token, timeout))
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

    /// Queues an encoded request (or holds it until the handshake ends) under the next id,
    /// which `bytes` must carry, and starts its deadline.
    fn start_request(
        &mut self,
        now: Instant,
        method: &str,
        bytes: Vec<u8>,
        progress_token: Option<ProgressToken>,
        timeout: Duration,
    ) -> RequestId {
        // Before the handshake ends, only pings may be written.
        let id = self.pending.next_id();
        let held = if matches!(self.state, State::Ready { .. }) || method == "ping" {
            (self.transmits).push_back((bytes, Sent::Request(RequestId(id))));
            None
        } else {
            Some(bytes)
        };
        RequestId(self.pending.start(now, timeout, progress_token, held))
    }

    /// Answers an [`Event::ServerRequest`] with a result or an error. Returns `false` if it
    /// had already been answered, or refused when its deadline passed, or the connection has
    /// closed: then nothing is sent.
    pub fn respond(
        &mut self,
        _now: Instant,
        id: ServerRequestId,
        result: Result<Value, RpcError>,
    ) -> bool {
        let Some(open) = self.server_requests.remove(&id.0) else {
            return false;
        };
        let answer = jsonrpc::response(open.id, result);
        self.transmits.push_back((answer, Sent::Other));
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
    /// nothing once closed.
    pub fn restart_session(&mut self, now: Instant) {
        if self.is_closed() {
            return;
        }
        // Answers to the old session's server requests have nowhere to go.
        self.server_requests.clear();
        self.begin_handshake(now);
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

    #[must_use]
    /// The next event; drain them after every input or command.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest deadline, if any; call [`handle_timeout`](Self::handle_timeout) then.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let requests = self.pending.first_deadline();
        match &self.state {
            State::Initializing { deadline, .. } => requests.into_iter().chain([*deadline]).min(),
            State::Ready { .. } => {
                let answers = self.server_requests.values().map(|open| open.deadline);
                requests.into_iter().chain(answers).min()
            }
            State::Closed { .. } => None,
        }
    }

    // ----- internals -----

    fn handle_line(&mut self, now: Instant, line: &[u8]) {
        for message in jsonrpc::decode(line) {
            match message {
                Ok(message) => self.handle_decoded(now, message),
                Err(error) => self.report_malformed(error),
            }
            if self.is_closed() {
                return;
            }
        }
    }

    /// A line too long to keep fails, at once, the request it answers, if it names one.
    fn handle_too_long(&mut self, error: LineError) {
        if let LineError::TooLong {
            limit,
            size,
            id: Some(id),
        } = &error
            && let Some(id) = read_id(id)
            && self.pending.is_sent(id)
        {
            let error = RequestError::ResponseTooLarge {
                size: *size,
                limit: *limit,
            };
            self.finish(id, Err(error));
        }
        self.report_malformed(error);
    }

    fn report_malformed(&mut self, error: LineError) {
        self.stats.malformed_lines += 1;
        self.events.push_back(Event::Malformed(error));
    }

    fn handle_decoded(&mut self, now: Instant, message: Message) {
        match message {
            Message::Request { id, method, params } => {
                self.handle_server_request(now, id, method, params);
            }
            Message::Notification { method, params } => {
                if method == "notifications/progress" {
                    self.handle_progress(now, params.as_ref());
                }
                let notification = Notification { method, params };
                self.events.push_back(Event::Notification(notification));
            }
            Message::Response { id, result } => self.handle_response(now, &id, result),
        }
    }

    fn handle_server_request(
        &mut self,
        now: Instant,
        id: Value,
        method: String,
        params: Option<Value>,
    ) {
        // Only once ready: before that, nothing but answers to pings may cross the wire, and
        // a server may not ask anything else yet anyway.
        let is_ready = matches!(self.state, State::Ready { .. });
        let has_room = self.server_requests.len() < MAX_OPEN_SERVER_REQUESTS;
        if is_ready && has_room && self.config.capabilities.covers(&method) {
            let key = self.next_server_request;
            self.next_server_request += 1;
            let deadline = deadline_after(now, self.config.server_request_timeout);
            let open = OpenServerRequest {
                id,
                method: method.clone(),
                deadline,
            };
            self.server_requests.insert(key, open);
            let id = ServerRequestId(key);
            let request = ServerRequest { id, method, params };
            self.events.push_back(Event::ServerRequest(request));
            return;
        }
        let reply = match method.as_str() {
            "ping" => Ok(json!({})),
            // Every request that no declared capability covers is refused.
            _ => Err(RpcError::method_not_found(&method)),
        };
        let is_ping = reply.is_ok();
        let bytes = jsonrpc::response(id, reply);
        match &mut self.state {
            // A server flooding requests before it answers `initialize` must not grow memory.
            State::Initializing { held_replies, .. } if !is_ping => {
                if held_replies.len() < MAX_HELD_REPLIES {
                    held_replies.push(bytes);
                } else {
                    self.stats.dropped_replies += 1;
                }
            }
            _ => self.transmits.push_back((bytes, Sent::Other)),
        }
    }

    fn handle_progress(&mut self, now: Instant, params: Option<&Value>) {
        let Some(token) = params.and_then(|params| params.get("progressToken")) else {
            return;
        };
        // A caller's own token wins over a call's id that happens to equal it.
        let other = self.progress_tokens.get(&token.to_string()).copied();
        let own = || token.as_u64().filter(|&id| self.owns_its_id_as_token(id));
        let Some(id) = other.or_else(own) else {
            return;
        };
        self.pending.extend(id, now, self.config.max_request_time);
    }

    /// Whether pending request `id` uses its own id as its progress token.
    fn owns_its_id_as_token(&self, id: u64) -> bool {
        let pending = self.pending.get(id);
        pending.is_some_and(|p| p.progress_token == Some(ProgressToken::OwnId))
    }

    fn handle_response(&mut self, now: Instant, id: &Value, result: Result<Value, ResponseError>) {
        if let State::Initializing { id: init_id, .. } = self.state
            && read_id(id) == Some(init_id)
        {
            return self.finish_handshake(now, result);
        }
        // A held request has not been written, so nothing can be answering it.
        let awaited = read_id(id).filter(|&id| self.pending.is_sent(id));
        let Some(id) = awaited else {
            self.stats.stray_responses += 1;
            return;
        };
        let result = result.map_err(|error| match error {
            ResponseError::Remote(error) => RequestError::Remote(error),
            ResponseError::Invalid(detail) => RequestError::InvalidResponse(detail),
        });
        self.finish(id, result);
    }

    fn finish_handshake(&mut self, _now: Instant, result: Result<Value, ResponseError>) {
        let server = match result {
            Ok(result) => parse_initialize_result(result),
            Err(ResponseError::Remote(error)) => Err(CloseReason::InitializeFailed(error)),
            Err(ResponseError::Invalid(detail)) => {
                Err(CloseReason::InvalidInitializeResult(detail))
            }
        };
        let server = match server {
            Ok(server) => server,
            Err(reason) => return self.close_with(reason),
        };
        let previous = std::mem::replace(
            &mut self.state,
            State::Ready {
                server: server.clone(),
            },
        );
        let initialized = jsonrpc::notification("notifications/initialized", None);
        self.transmits.push_back((initialized, Sent::Initialized));
        if let State::Initializing { held_replies, .. } = previous {
            let replies = held_replies.into_iter().map(|bytes| (bytes, Sent::Other));
            self.transmits.extend(replies);
        }
        let held = self.pending.release_held().into_iter();
        (self.transmits).extend(held.map(|(id, bytes)| (bytes, Sent::Request(RequestId(id)))));
        self.events.push_back(Event::Ready(server));
    }

    /// Ends a request locally, telling the server if it has seen it.
    fn abandon(&mut self, id: u64, error: RequestError, reason: &str) {
        let was_sent = self.pending.is_sent(id);
        self.finish(id, Err(error));
        // Before the handshake ends only pings may cross the wire, so a ping given up on then
        // goes without a notification (the spec makes it optional).
        let may_notify = !matches!(self.state, State::Initializing { .. });
        if was_sent && may_notify {
            let params = json!({ "requestId": id, "reason": reason });
            let cancelled = jsonrpc::notification("notifications/cancelled", Some(params));
            self.transmits.push_back((cancelled, Sent::Other));
        }
    }

    fn finish(&mut self, id: u64, result: Result<Value, RequestError>) {
        if let Some(pending) = self.pending.remove(id) {
            if let Some(ProgressToken::Other(token)) = pending.progress_token {
                self.progress_tokens.remove(&token);
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

fn parse_initialize_result(result: Value) -> Result<ServerInfo, CloseReason> {
    let invalid = |detail: &str| CloseReason::InvalidInitializeResult(detail.to_owned());
    let Value::Object(mut result) = result else {
        return Err(invalid("not an object"));
    };
    let Some(Value::String(version)) = result.remove("protocolVersion") else {
        return Err(invalid("`protocolVersion` is missing or not a string"));
    };
    if !HANDSHAKE_VERSIONS.contains(&version.as_str()) {
        return Err(CloseReason::UnsupportedVersion {
            requested: LATEST_PROTOCOL_VERSION.to_owned(),
            offered: version,
        });
    }
    // `serverInfo` and `capabilities` are required by the spec, but a server that forgets them
    // is still usable, so only a wrong `serverInfo` is fatal (`null` counts as missing);
    // capabilities of an odd shape declare nothing.
    let server = match result.remove("serverInfo") {
        None | Some(Value::Null) => Implementation {
            name: String::new(),
            version: String::new(),
            title: None,
        },
        Some(info) => serde_json::from_value(info)
            .map_err(|error| invalid(&format!("`serverInfo`: {error}")))?,
    };
    let capabilities = (result.get("capabilities"))
        .map(ServerCapabilities::read)
        .unwrap_or_default();
    let instructions = match result.remove("instructions") {
        Some(Value::String(text)) => Some(text),
        _ => None,
    };
    Ok(ServerInfo {
        protocol_version: version,
        server,
        capabilities,
        instructions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pending map is unordered; what leaves the connection must still follow the ids.
    #[test]
    fn held_requests_and_close_failures_follow_request_order() {
        let now = Instant::now();
        let mut connection = Connection::new(now, Config::default());
        while connection.poll_transmit().is_some() {}
        let ids: Vec<RequestId> = (0..200)
            .map(|_| connection.request(now, Request::list_tools(None)))
            .collect::<Result<_, _>>()
            .unwrap_or_default();
        assert_eq!(ids.len(), 200);
        let init = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}
"#;
        connection.handle_bytes(now, init);
        let written: Vec<Sent> = std::iter::from_fn(|| connection.poll_transmit_with())
            .skip(1) // notifications/initialized
            .map(|(_, sent)| sent)
            .collect();
        let expected: Vec<Sent> = ids.iter().copied().map(Sent::Request).collect();
        assert_eq!(written, expected);

        while connection.poll_event().is_some() {}
        connection.close();
        let failed: Vec<RequestId> = std::iter::from_fn(|| connection.poll_event())
            .filter_map(|event| match event {
                Event::Response { id, .. } => Some(id),
                _ => None,
            })
            .collect();
        assert_eq!(failed, ids);
    }

    /// Requests answered while an earlier deadline stays pending leave entries behind it;
    /// they must not pile up, nor show in `poll_timeout`.
    #[test]
    fn deadlines_of_ended_requests_do_not_pile_up() {
        let now = Instant::now();
        let mut connection = Connection::new(now, Config::default());
        let init = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}
"#;
        connection.handle_bytes(now, init);
        let request = |timeout| Request::list_tools(None).timeout(Duration::from_secs(timeout));
        let first = connection.request(now, request(1)).map(|id| id.0);
        let first = first.unwrap_or_default();
        for round in 0..1000u32 {
            let later = request(100 + u64::from(round % 7));
            let id = connection.request(now, later).map(|id| id.0);
            let id = id.unwrap_or_default();
            let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n");
            connection.handle_bytes(now, answer.as_bytes());
            assert!(
                connection.pending.deadline_entries() <= 2 + 64,
                "round {round}"
            );
            let earliest = now + Duration::from_secs(1);
            assert_eq!(connection.poll_timeout(), Some(earliest));
        }
        assert!(connection.fail_request(now, RequestId(first), RequestError::Cancelled));
        assert_eq!(connection.poll_timeout(), None);
        assert_eq!(connection.pending.deadline_entries(), 0);
    }
}
