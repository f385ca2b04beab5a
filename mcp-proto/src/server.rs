//! The server role: the peer of [`Connection`](crate::Connection), for a program that stands as
//! an MCP server before a host. Every state transition of that role lives in this file.
//!
//! It answers `initialize` (with the host's revision when we support it, else our latest),
//! refuses every request but `ping` until `notifications/initialized`, turns the host's requests
//! into [`ServerEvent::Request`] under ids of our own (the host's id is echoed exactly in the
//! answer), and the host's `notifications/cancelled` into [`ServerEvent::Cancelled`].

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::connection::{RequestId, Stats};
use crate::error::{CloseReason, RequestError, RpcError, SendError};
use crate::framing::{LineDecoder, LineError};
use crate::jsonrpc::{self, Message, ResponseError};
use crate::pending::Outstanding;
use crate::request::{Params, Request};
use crate::types::{Implementation, Notification};
use crate::{HANDSHAKE_VERSIONS, LATEST_PROTOCOL_VERSION};

/// Settings of a [`ServerConnection`], fixed for its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Sent as `serverInfo.name`.
    pub name: String,
    /// Sent as `serverInfo.version`.
    pub version: String,
    /// Sent as `capabilities`, such as `{"tools": {"listChanged": true}}`.
    pub capabilities: Value,
    /// Sent as `instructions`, if any.
    pub instructions: Option<String>,
    /// Longest line accepted from the host, in bytes, without its newline.
    pub max_line_len: usize,
    /// At most this many host requests wait for [`ServerConnection::respond`]; more are
    /// refused at once with [`ServerConnection::TOO_MANY_REQUESTS`].
    pub max_open_requests: usize,
    /// Deadline of each request we send the host (an elicitation waits for a person).
    pub request_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            name: "mcp-proto".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            capabilities: json!({}),
            instructions: None,
            max_line_len: 64 * 1024 * 1024,
            max_open_requests: 256,
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// Identifies one host request that waits for [`ServerConnection::respond`]. Our own counter:
/// the host's id, whatever its type, is echoed by the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostRequestId(pub(crate) u64);

/// What the host said about itself in `initialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The negotiated revision, one of [`HANDSHAKE_VERSIONS`].
    pub protocol_version: String,
    /// The host's `clientInfo`; empty names when it sent none.
    pub client: Implementation,
    /// The host's `capabilities` object, as sent.
    pub capabilities: Value,
}

impl ClientInfo {
    /// Whether the host declared capability `name` (`elicitation`, `roots`, `sampling`).
    pub fn declares(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|c| !c.is_null())
    }
}

/// A request from the host, for the caller to answer with [`ServerConnection::respond`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRequest {
    /// What to pass to [`ServerConnection::respond`].
    pub id: HostRequestId,
    /// `tools/list`, `tools/call`, ...
    pub method: String,
    /// As sent; `None` when the host sent no `params`.
    pub params: Option<Value>,
}

/// What happened, drained with [`ServerConnection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// The host sent `notifications/initialized`: requests flow from now on.
    Ready(ClientInfo),
    /// A host request; answer it with [`ServerConnection::respond`].
    Request(HostRequest),
    /// The host gave up on a request (`notifications/cancelled`): stop working on it. It is
    /// no longer open, so an answer to it is dropped.
    Cancelled {
        /// The request.
        id: HostRequestId,
        /// Why, if the host said.
        reason: Option<String>,
    },
    /// Any other notification from the host (`notifications/roots/list_changed`, ...).
    Notification(Notification),
    /// A request of ours to the host ended. Every request ends exactly once.
    Response {
        /// The request, as [`ServerConnection::request`] returned it.
        id: RequestId,
        /// Its `result` member, or why it failed.
        result: Result<Value, RequestError>,
    },
    /// A line from the host was skipped (and answered with a JSON-RPC error where one fits).
    Malformed(LineError),
    /// The connection ended; always the last event.
    Closed(CloseReason),
}

enum State {
    /// Nothing but `initialize` and `ping` is answered.
    AwaitingInitialize,
    /// `initialize` answered; requests other than `ping` wait for `notifications/initialized`.
    Initializing { client: ClientInfo },
    /// Handshake done: host requests become events.
    Ready { client: ClientInfo },
    /// Terminal: inputs are ignored and every pending request has already failed.
    Closed { reason: CloseReason },
}

/// A host request the caller has yet to answer.
struct OpenRequest {
    /// The host's id, echoed exactly.
    id: Value,
    /// `params._meta.progressToken`, if the host sent one.
    progress_token: Option<Value>,
}

/// One MCP server connection, as a state machine: bytes from the host in; bytes to write,
/// events and the next deadline out. Drive it as the crate docs describe for [`Connection`],
/// with [`handle_bytes`](Self::handle_bytes), [`handle_eof`](Self::handle_eof) and
/// [`handle_timeout`](Self::handle_timeout) in, and [`poll_transmit`](Self::poll_transmit),
/// [`poll_event`](Self::poll_event) and [`poll_timeout`](Self::poll_timeout) out.
///
/// [`Connection`]: crate::Connection
pub struct ServerConnection {
    config: ServerConfig,
    state: State,
    decoder: LineDecoder,
    /// Host requests by our id for them.
    open: BTreeMap<u64, OpenRequest>,
    /// Our id for each open host request, by the host's id as JSON text (for cancellation).
    by_host_id: BTreeMap<String, u64>,
    next_host_request: u64,
    /// Our requests to the host.
    pending: Outstanding,
    transmits: VecDeque<Vec<u8>>,
    events: VecDeque<ServerEvent>,
    stats: Stats,
}

impl std::fmt::Debug for ServerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::AwaitingInitialize => "AwaitingInitialize",
            State::Initializing { .. } => "Initializing",
            State::Ready { .. } => "Ready",
            State::Closed { .. } => "Closed",
        };
        f.debug_struct("ServerConnection")
            .field("state", &state)
            .field("open", &self.open.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl ServerConnection {
    /// JSON-RPC "Parse error": the line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON-RPC "Invalid Request": not a request, or not one we take now (before the
    /// handshake, a second `initialize`, an id already in use, a line over the limit).
    pub const INVALID_REQUEST: i64 = -32600;
    /// Implementation-defined server error: too many requests are open at once.
    pub const TOO_MANY_REQUESTS: i64 = -32000;

    /// A connection waiting for the host's `initialize`. Nothing is queued yet.
    pub fn new(_now: Instant, config: ServerConfig) -> Self {
        Self {
            decoder: LineDecoder::new(config.max_line_len),
            state: State::AwaitingInitialize,
            open: BTreeMap::new(),
            by_host_id: BTreeMap::new(),
            next_host_request: 1,
            pending: Outstanding::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
            config,
        }
    }

    /// The settings this connection was made with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Counters of what was skipped so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// What the host said in `initialize`, once it has been answered.
    pub fn client_info(&self) -> Option<&ClientInfo> {
        match &self.state {
            State::Initializing { client } | State::Ready { client } => Some(client),
            _ => None,
        }
    }

    /// Whether `notifications/initialized` has arrived (and the connection is open).
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready { .. })
    }

    /// Whether the connection has ended; see [`ServerEvent::Closed`].
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed { .. })
    }

    /// Host requests not answered yet.
    pub fn open_requests(&self) -> usize {
        self.open.len()
    }

    // ----- inputs -----

    /// Feeds bytes read from the host (our stdin, a socket). Any fragment of any number of
    /// lines; afterwards drain [`poll_transmit`](Self::poll_transmit) and
    /// [`poll_event`](Self::poll_event), then re-arm the timer from
    /// [`poll_timeout`](Self::poll_timeout).
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        if self.is_closed() {
            return;
        }
        self.decoder.push(bytes);
        while let Some(line) = self.decoder.next_line() {
            match line {
                Ok(line) => self.handle_line(now, &line),
                Err(error) => self.handle_too_long(error),
            }
        }
    }

    /// The host closed its end. An unterminated last line is still read.
    pub fn handle_eof(&mut self, now: Instant) {
        if self.is_closed() {
            return;
        }
        if let Some(line) = self.decoder.finish() {
            self.handle_line(now, &line);
        }
        self.close_with(CloseReason::ClientEof);
    }

    /// Expires the deadlines of our requests at or before `now`; calling it early does no harm.
    pub fn handle_timeout(&mut self, now: Instant) {
        for (id, after) in self.pending.expired(now) {
            let reason = format!("timed out after {:.1}s", after.as_secs_f64());
            self.abandon(id, RequestError::TimedOut { after }, &reason);
        }
    }

    // ----- commands -----

    /// Answers a [`ServerEvent::Request`] with a result or a JSON-RPC error. Returns `false`
    /// (and sends nothing) if it was answered already, cancelled by the host, or the
    /// connection has closed.
    pub fn respond(
        &mut self,
        _now: Instant,
        id: HostRequestId,
        result: Result<Value, RpcError>,
    ) -> bool {
        let Some(open) = self.forget(id) else {
            return false;
        };
        self.transmits.push_back(jsonrpc::response(open.id, result));
        true
    }

    /// Reports progress on an open host request, with the host's own `progressToken`. Returns
    /// `false` (and sends nothing) if the host sent no token or the request is not open.
    pub fn progress(
        &mut self,
        id: HostRequestId,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> bool {
        let Some(token) = (self.open.get(&id.0)).and_then(|open| open.progress_token.clone())
        else {
            return false;
        };
        let mut params = json!({ "progressToken": token, "progress": progress });
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let Some(message) = message {
            params["message"] = json!(message);
        }
        let notification = jsonrpc::notification(Notification::PROGRESS, Some(params));
        self.transmits.push_back(notification);
        true
    }

    /// Sends a notification (`notifications/tools/list_changed`, `notifications/message`,
    /// ...). Before `notifications/initialized` only log messages may go, as the spec says;
    /// returns `false` (and sends nothing) for anything else then, or once closed.
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> bool {
        let allowed = match self.state {
            State::Ready { .. } => true,
            State::Initializing { .. } => method == Notification::MESSAGE,
            _ => false,
        };
        if allowed {
            self.transmits
                .push_back(jsonrpc::notification(method, params));
        }
        allowed
    }

    /// Sends the host a request, built like the client role's: [`Request::elicit`], or
    /// [`Request::new`] for any method (`roots/list`, ...), whose `params` must be an object or
    /// an array. Only once ready ([`SendError::NotReady`] before). It ends with a
    /// [`ServerEvent::Response`], failed with a timeout after its own
    /// [`Request::timeout`], else [`ServerConfig::request_timeout`].
    pub fn request<T>(
        &mut self,
        now: Instant,
        request: Request<T>,
    ) -> Result<RequestId, SendError> {
        match &self.state {
            State::Closed { reason } => return Err(SendError::Closed(reason.clone())),
            State::Ready { .. } => {}
            _ => return Err(SendError::NotReady),
        }
        let params = match &request.params {
            Params::None => None,
            Params::Value(params) if params.is_object() || params.is_array() => Some(params),
            // A tool call is the host's to make, not ours.
            Params::Value(_) | Params::CallTool { .. } => return Err(SendError::InvalidParams),
        };
        let method = request.method.as_str();
        let timeout = request.timeout.unwrap_or(self.config.request_timeout);
        let id = self.pending.start(now, timeout, None, false, None);
        self.transmits
            .push_back(jsonrpc::request(id, method, params));
        Ok(RequestId(id))
    }

    /// Gives up on a request of ours: it fails with [`RequestError::Cancelled`] and the host
    /// is sent `notifications/cancelled`. Returns `false` if it had already ended.
    pub fn cancel(&mut self, _now: Instant, id: RequestId) -> bool {
        if self.pending.get(id.0).is_none() {
            return false;
        }
        self.abandon(id.0, RequestError::Cancelled, "cancelled by the server");
        true
    }

    /// Ends the connection: our pending requests fail with [`CloseReason::Local`], open host
    /// requests are dropped. The caller then closes its output.
    pub fn close(&mut self) {
        if !self.is_closed() {
            self.close_with(CloseReason::Local);
        }
    }

    // ----- outputs -----

    /// The next line to write to the host, `\n` included.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transmits.pop_front()
    }

    /// The next event; drain them after every input or command.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// The earliest deadline, if any; call [`handle_timeout`](Self::handle_timeout) then.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pending.first_deadline()
    }

    // ----- internals -----

    fn handle_line(&mut self, now: Instant, line: &[u8]) {
        for message in jsonrpc::decode(line) {
            match message {
                Ok(message) => self.handle_message(now, message),
                Err(error) => {
                    // JSON-RPC answers a line it cannot read with an error whose id is null.
                    let code = match error {
                        LineError::NotUtf8 | LineError::NotJson { .. } => Self::PARSE_ERROR,
                        _ => Self::INVALID_REQUEST,
                    };
                    self.refuse(Value::Null, code, &error.to_string());
                    self.report_malformed(error);
                }
            }
            if self.is_closed() {
                return;
            }
        }
    }

    /// A line over the limit is refused under its own id when that could be read.
    fn handle_too_long(&mut self, error: LineError) {
        if let LineError::TooLong { id, .. } = &error {
            let id = id.clone().filter(|id| id.is_string() || id.is_number());
            self.refuse(
                id.unwrap_or(Value::Null),
                Self::INVALID_REQUEST,
                &error.to_string(),
            );
        }
        self.report_malformed(error);
    }

    fn report_malformed(&mut self, error: LineError) {
        self.stats.malformed_lines += 1;
        self.events.push_back(ServerEvent::Malformed(error));
    }

    fn refuse(&mut self, id: Value, code: i64, message: &str) {
        let error = RpcError {
            code,
            message: message.to_owned(),
            data: None,
        };
        self.transmits.push_back(jsonrpc::response(id, Err(error)));
    }

    fn handle_message(&mut self, now: Instant, message: Message) {
        match message {
            Message::Request { id, method, params } => self.handle_request(id, method, params),
            Message::Notification { method, params } => self.handle_notification(method, params),
            Message::Response { id, result, .. } => self.handle_response(now, &id, result),
        }
    }

    fn handle_request(&mut self, id: Value, method: String, params: Option<Value>) {
        match (&self.state, method.as_str()) {
            (_, "ping") => {
                let reply = jsonrpc::response(id, Ok(json!({})));
                self.transmits.push_back(reply);
            }
            (State::AwaitingInitialize, "initialize") => self.handle_initialize(id, params),
            (State::AwaitingInitialize | State::Initializing { .. }, _) => {
                let message = format!(
                    "server not initialized: {method} must wait for `initialize` and \
                     `notifications/initialized`"
                );
                self.refuse(id, Self::INVALID_REQUEST, &message);
            }
            (State::Ready { .. }, "initialize") => {
                self.refuse(id, Self::INVALID_REQUEST, "already initialized");
            }
            (State::Ready { .. }, _) => self.open_request(id, method, params),
            (State::Closed { .. }, _) => {}
        }
    }

    fn handle_initialize(&mut self, id: Value, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
            let message = "initialize: `protocolVersion` is missing or not a string";
            return self.refuse(id, RpcError::INVALID_PARAMS, message);
        };
        // The host's revision if we speak it; else our latest, and the host decides.
        let version = match HANDSHAKE_VERSIONS.contains(&requested) {
            true => requested,
            false => LATEST_PROTOCOL_VERSION,
        };
        let client = (params.get("clientInfo").cloned())
            .and_then(|info| serde_json::from_value(info).ok())
            .unwrap_or(Implementation {
                name: String::new(),
                version: String::new(),
                title: None,
            });
        let capabilities = match params.get("capabilities") {
            Some(capabilities @ Value::Object(_)) => capabilities.clone(),
            _ => json!({}),
        };
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": self.config.capabilities,
            "serverInfo": { "name": self.config.name, "version": self.config.version },
        });
        if let Some(instructions) = &self.config.instructions {
            result["instructions"] = json!(instructions);
        }
        self.transmits.push_back(jsonrpc::response(id, Ok(result)));
        let client = ClientInfo {
            protocol_version: version.to_owned(),
            client,
            capabilities,
        };
        self.state = State::Initializing { client };
    }

    fn open_request(&mut self, id: Value, method: String, params: Option<Value>) {
        let key = id.to_string();
        if self.by_host_id.contains_key(&key) {
            let message = format!("request id {key} is already in use by an open request");
            return self.refuse(id, Self::INVALID_REQUEST, &message);
        }
        if self.open.len() >= self.config.max_open_requests {
            let limit = self.config.max_open_requests;
            let message = format!("too many requests in flight (at most {limit}); retry later");
            return self.refuse(id, Self::TOO_MANY_REQUESTS, &message);
        }
        let progress_token = (params.as_ref())
            .and_then(|params| params.get("_meta"))
            .and_then(|meta| meta.get("progressToken"))
            .filter(|token| token.is_string() || token.is_number())
            .cloned();
        let ours = self.next_host_request;
        self.next_host_request += 1;
        self.by_host_id.insert(key, ours);
        self.open.insert(ours, OpenRequest { id, progress_token });
        let id = HostRequestId(ours);
        let request = HostRequest { id, method, params };
        self.events.push_back(ServerEvent::Request(request));
    }

    fn handle_notification(&mut self, method: String, params: Option<Value>) {
        match method.as_str() {
            "notifications/initialized" => {
                if let State::Initializing { client } = &self.state {
                    let client = client.clone();
                    self.state = State::Ready {
                        client: client.clone(),
                    };
                    self.events.push_back(ServerEvent::Ready(client));
                }
            }
            "notifications/cancelled" => {
                let params = params.as_ref();
                let Some(key) = params
                    .and_then(|p| p.get("requestId"))
                    .map(Value::to_string)
                else {
                    return;
                };
                let Some(&ours) = self.by_host_id.get(&key) else {
                    // Already answered, or never seen: nothing to stop.
                    return;
                };
                self.forget(HostRequestId(ours));
                let reason = params.and_then(|p| p.get("reason")).and_then(Value::as_str);
                let reason = reason.map(str::to_owned);
                let id = HostRequestId(ours);
                self.events.push_back(ServerEvent::Cancelled { id, reason });
            }
            _ => {
                let notification = Notification { method, params };
                self.events
                    .push_back(ServerEvent::Notification(notification));
            }
        }
    }

    fn handle_response(&mut self, _now: Instant, id: &Value, result: Result<Value, ResponseError>) {
        let Some(id) = self.pending.answered(id) else {
            self.stats.stray_responses += 1;
            return;
        };
        let result = result.map_err(|error| match error {
            ResponseError::Remote(error) => RequestError::Remote(error),
            ResponseError::Invalid(detail) => RequestError::InvalidResponse(detail),
        });
        self.finish(id, result);
    }

    fn forget(&mut self, id: HostRequestId) -> Option<OpenRequest> {
        let open = self.open.remove(&id.0)?;
        self.by_host_id.remove(&open.id.to_string());
        Some(open)
    }

    fn abandon(&mut self, id: u64, error: RequestError, reason: &str) {
        self.finish(id, Err(error));
        let params = json!({ "requestId": id, "reason": reason });
        let cancelled = jsonrpc::notification("notifications/cancelled", Some(params));
        self.transmits.push_back(cancelled);
    }

    fn finish(&mut self, id: u64, result: Result<Value, RequestError>) {
        if self.pending.remove(id).is_some() {
            let id = RequestId(id);
            self.events.push_back(ServerEvent::Response { id, result });
        }
    }

    fn close_with(&mut self, reason: CloseReason) {
        for id in self.pending.take_all() {
            let result = Err(RequestError::Closed(reason.clone()));
            let id = RequestId(id);
            self.events.push_back(ServerEvent::Response { id, result });
        }
        self.open.clear();
        self.by_host_id.clear();
        self.events.push_back(ServerEvent::Closed(reason.clone()));
        self.state = State::Closed { reason };
    }
}
