//! The server role: the peer of [`Connection`](crate::Connection), for a program that stands as
//! an MCP server before a host. Every state transition of that role lives in this file.
//!
//! It answers both eras, as the host chooses: `initialize` (with the host's revision when we
//! support it, else our latest), refusing every request but `ping` until
//! `notifications/initialized`; or, in the stateless era, `server/discover` and requests that
//! carry their revision and the host's capabilities in `_meta` (-32022 for a revision we do
//! not speak), `subscriptions/listen` served here. It turns the host's requests into
//! [`ServerEvent::Request`] under ids of our own (the host's id is echoed exactly in the
//! answer), and the host's `notifications/cancelled` into [`ServerEvent::Cancelled`].
//!
//! Beside it, in `server/`:
//!
//! - `config.rs`: its settings, and what the host says of itself
//! - `message.rs`: a host's message decoded once, for a transport that reads it whole
//!
//! What this role reads and writes in the stateless era is beside it, in `server_stateless.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use serde_json::{Value, json};

use crate::machines::connection::Stats;
use crate::machines::pending::Outstanding;
use crate::machines::server_stateless::{self as stateless, RequestEra, Subscriptions};
use crate::model::error::{CloseReason, RequestError, SendError};
use crate::model::raw_result::{self, RawResult};
use crate::model::request::{Params, Request, RequestId};
use crate::model::result_members::ResultMembers;
use crate::model::types::{Implementation, Notification};
use crate::model::versions::{HANDSHAKE_VERSIONS, LATEST_PROTOCOL_VERSION};
use crate::wire::framing::LineDecoder;
use crate::wire::jsonrpc::{self, Message, ResponseError, RpcError};
use crate::wire::line_error::LineError;

pub(crate) mod config;
mod message;
pub use config::{ClientInfo, ServerConfig};
pub use message::HostMessage;

/// Identifies one host request that waits for [`ServerConnection::respond`]. Our own counter:
/// the host's id, whatever its type, is echoed by the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostRequestId(pub(crate) u64);

/// A request from the host, for the caller to answer with [`ServerConnection::respond`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRequest {
    /// What to pass to [`ServerConnection::respond`].
    pub id: HostRequestId,
    /// `tools/list`, `tools/call`, ...
    pub method: String,
    /// As sent; `None` when the host sent no `params`.
    pub params: Option<Value>,
    /// Stateless era: what this request's `_meta` says of the host (its capabilities may
    /// differ from one request to the next); `None` in the handshake era, where
    /// [`ServerEvent::Ready`] said it once.
    pub client: Option<ClientInfo>,
}

/// What happened, drained with [`ServerConnection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// The host sent `notifications/initialized`, or its first stateless-era request (whose
    /// `_meta` this is; each request then brings its own, in [`HostRequest::client`]):
    /// requests flow from now on.
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
    /// The host speaks the stateless era (`client` is what its first request said): each
    /// request carries its revision, `initialize` is refused.
    Stateless { client: ClientInfo },
    /// Terminal: inputs are ignored and every pending request has already failed.
    Closed { reason: CloseReason },
}

/// A host request the caller has yet to answer.
struct OpenRequest {
    /// The host's id, echoed exactly.
    id: Value,
    /// The same as JSON text, its key in `by_host_id`: kept, not written again when the
    /// request ends.
    key: String,
    /// `params._meta.progressToken`, if the host sent one.
    progress_token: Option<Value>,
    /// Stateless era: the result gets its `resultType`.
    stateless: bool,
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
    /// Stateless era: the host's `subscriptions/listen` requests, open until it cancels them.
    subscriptions: Subscriptions,
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
            State::Stateless { .. } => "Stateless",
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
    pub(crate) const PARSE_ERROR: i64 = -32700;
    /// JSON-RPC "Invalid Request": not a request, or not one we take now (before the
    /// handshake, a second `initialize`, an id already in use, a line over the limit).
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    /// Implementation-defined server error: too many requests are open at once.
    pub(crate) const TOO_MANY_REQUESTS: i64 = -32000;

    /// A connection waiting for the host's `initialize`. Nothing is queued yet.
    pub fn new(_now: Instant, config: ServerConfig) -> Self {
        Self {
            decoder: LineDecoder::new(config.max_line_len),
            state: State::AwaitingInitialize,
            open: BTreeMap::new(),
            by_host_id: BTreeMap::new(),
            next_host_request: 1,
            pending: Outstanding::default(),
            subscriptions: Subscriptions::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
            config,
        }
    }

    /// Counters of what was skipped so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// What the host said in `initialize`, once it has been answered (in the stateless era,
    /// in its first request).
    pub fn client_info(&self) -> Option<&ClientInfo> {
        match &self.state {
            State::Initializing { client }
            | State::Ready { client }
            | State::Stateless { client } => Some(client),
            _ => None,
        }
    }

    /// Whether `notifications/initialized` (or a stateless-era request) has arrived, and the
    /// connection is open.
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready { .. } | State::Stateless { .. })
    }

    /// Whether the host speaks the stateless era.
    pub fn is_stateless(&self) -> bool {
        matches!(self.state, State::Stateless { .. })
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

    /// Feeds one message of the host's decoded already ([`HostMessage::decode`]), as
    /// [`handle_bytes`](Self::handle_bytes) would a line holding it: for a transport that
    /// reads each message whole and looks at it first (an HTTP request's body).
    pub fn handle_message(&mut self, now: Instant, message: HostMessage) {
        if !self.is_closed() {
            self.handle_decoded(now, message.0);
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
    /// connection has closed. In the stateless era a result without `resultType` is sent as
    /// `"complete"`; an [`InputRequired`](crate::server::InputRequired) result keeps its own.
    pub fn respond(
        &mut self,
        now: Instant,
        id: HostRequestId,
        result: Result<Value, RpcError>,
    ) -> bool {
        self.respond_raw(now, id, result.map(RawResult::from))
    }

    /// [`respond`](Self::respond) with a result as a server sent it
    /// (a client's `request_raw` hands these on): its text goes to
    /// the host as it is, never read into a value, but for the `resultType` spliced in for a
    /// stateless-era host. The host gets what `respond` would send of the result's value, but
    /// for the order of members and whitespace.
    pub fn respond_raw(
        &mut self,
        _now: Instant,
        id: HostRequestId,
        result: Result<RawResult, RpcError>,
    ) -> bool {
        let Some(open) = self.forget(id) else {
            return false;
        };
        let text = (result.as_ref().ok()).and_then(|raw| raw.answer_text(open.stateless));
        if let Some(text) = text {
            let line = jsonrpc::response_text(&open.id, &text);
            self.transmits.push_back(line);
            return true;
        }
        let mut result = result.and_then(|raw| {
            raw.into_value().map_err(|error| RpcError {
                code: RpcError::INTERNAL_ERROR,
                message: format!("the result cannot be written: {error}"),
                data: None,
            })
        });
        if let (true, Ok(result)) = (open.stateless, &mut result) {
            raw_result::mark_complete(result);
        }
        let line = jsonrpc::response(open.id, result);
        self.transmits.push_back(line);
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
    /// returns `false` (and sends nothing) for anything else then, or once closed. In the
    /// stateless era a notification goes once to each `subscriptions/listen` that asked for
    /// it, tagged with its id, and to no one else (`false` when none asked).
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> bool {
        if let State::Stateless { .. } = self.state {
            let routed = self.subscriptions.route(method, params.as_ref());
            let sent = !routed.is_empty();
            self.transmits.extend(routed);
            return sent;
        }
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
    /// [`Request::new`] for any method (`roots/list`, ...), whose `params` must be an object or an
    /// array. Only once ready ([`SendError::NotReady`] before, and in the stateless era, where such
    /// questions go in an [`InputRequired`](crate::server::InputRequired) result). It ends with a
    /// [`ServerEvent::Response`], failed with a timeout after its own [`Request::timeout`], else
    /// [`ServerConfig::request_timeout`].
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
        let timeout = request.deadline.or(self.config.request_timeout);
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
    /// requests are dropped, and each open subscription is answered (its graceful end). The
    /// caller then closes its output.
    pub fn close(&mut self) {
        if !self.is_closed() {
            let answers = self.subscriptions.close_all();
            self.transmits.extend(answers);
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
                Ok(message) => self.handle_decoded(now, message),
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

    /// A host's answer reads as a server's does, the stateless era's members read out of it.
    fn handle_decoded(&mut self, now: Instant, message: Message<ResultMembers>) {
        match message {
            Message::Request { id, method, params } => self.handle_request(id, method, params),
            Message::Notification { method, params } => self.handle_notification(method, params),
            Message::Response { id, result } => {
                self.handle_response(now, &id, result.map(|members| members.result));
            }
        }
    }

    fn handle_request(&mut self, id: Value, method: String, params: Option<Value>) {
        // A handshake-era request in the stateless era, or the era's own without `_meta`,
        // is refused under the era's rules below.
        let era = match (&self.state, method.as_str()) {
            (State::Closed { .. }, _) => return,
            (_, "ping") => {
                let reply = jsonrpc::response(id, Ok(json!({})));
                return self.transmits.push_back(reply);
            }
            (_, stateless::DISCOVER) => match stateless::request_era(params.as_ref()) {
                RequestEra::Unsupported(requested) => {
                    let error = stateless::unsupported_version(requested.as_deref());
                    return self.transmits.push_back(jsonrpc::response(id, Err(error)));
                }
                _ => {
                    let result = stateless::discover_result(&self.config);
                    return self.transmits.push_back(jsonrpc::response(id, Ok(result)));
                }
            },
            (State::AwaitingInitialize | State::Stateless { .. }, _) => {
                stateless::request_era(params.as_ref())
            }
            _ => RequestEra::Unstated,
        };
        match (era, &self.state) {
            (RequestEra::Unsupported(requested), _) => {
                let error = stateless::unsupported_version(requested.as_deref());
                self.transmits.push_back(jsonrpc::response(id, Err(error)));
            }
            (RequestEra::Stateless(client), _) => {
                if let State::AwaitingInitialize = self.state {
                    self.state = State::Stateless {
                        client: client.clone(),
                    };
                    self.events.push_back(ServerEvent::Ready(client.clone()));
                }
                self.handle_stateless(id, method, params, client);
            }
            (RequestEra::Unstated, State::Stateless { .. }) => {
                let error = stateless::unsupported_version(None);
                let message = format!(
                    "{method}: the host speaks the stateless era, and the request's `_meta`                      names no `io.modelcontextprotocol/protocolVersion`"
                );
                let error = RpcError { message, ..error };
                self.transmits.push_back(jsonrpc::response(id, Err(error)));
            }
            (RequestEra::Unstated, _) => self.handle_handshake_request(id, method, params),
        }
    }

    fn handle_stateless(
        &mut self,
        id: Value,
        method: String,
        params: Option<Value>,
        client: ClientInfo,
    ) {
        match method.as_str() {
            "initialize" => {
                let message = "initialize: this connection speaks the stateless era";
                self.refuse(id, Self::INVALID_REQUEST, message);
            }
            crate::model::stateless::LISTEN => {
                let key = id.to_string();
                if self.by_host_id.contains_key(&key) || self.subscriptions.contains(&key) {
                    let message = format!("request id {key} is already in use by an open request");
                    return self.refuse(id, Self::INVALID_REQUEST, &message);
                }
                if self.subscriptions.len() >= self.config.max_open_requests {
                    let limit = self.config.max_open_requests;
                    let message = format!("too many subscriptions open (at most {limit})");
                    return self.refuse(id, Self::TOO_MANY_REQUESTS, &message);
                }
                let capabilities = &self.config.capabilities;
                let acknowledgement = self.subscriptions.open(id, params.as_ref(), capabilities);
                self.transmits.push_back(acknowledgement);
            }
            _ => self.open_request(id, method, params, Some(client)),
        }
    }

    fn handle_handshake_request(&mut self, id: Value, method: String, params: Option<Value>) {
        match (&self.state, method.as_str()) {
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
            (State::Ready { .. }, _) => self.open_request(id, method, params, None),
            (State::Stateless { .. } | State::Closed { .. }, _) => {}
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
            "capabilities": self.config.capabilities.to_json(),
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

    fn open_request(
        &mut self,
        id: Value,
        method: String,
        params: Option<Value>,
        client: Option<ClientInfo>,
    ) {
        let key = id.to_string();
        if self.by_host_id.contains_key(&key) || self.subscriptions.contains(&key) {
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
        self.by_host_id.insert(key.clone(), ours);
        let stateless = client.is_some();
        let open = OpenRequest {
            id,
            key,
            progress_token,
            stateless,
        };
        self.open.insert(ours, open);
        let id = HostRequestId(ours);
        let request = HostRequest {
            id,
            method,
            params,
            client,
        };
        self.events.push_back(ServerEvent::Request(request));
    }

    fn handle_notification(&mut self, method: String, params: Option<Value>) {
        match method.as_str() {
            Notification::INITIALIZED => {
                if let State::Initializing { client } = &self.state {
                    let client = client.clone();
                    self.state = State::Ready {
                        client: client.clone(),
                    };
                    self.events.push_back(ServerEvent::Ready(client));
                }
            }
            Notification::CANCELLED => {
                let params = params.as_ref();
                let Some(key) = params
                    .and_then(|p| p.get("requestId"))
                    .map(Value::to_string)
                else {
                    return;
                };
                if self.subscriptions.cancel(&key) {
                    // The host ended a subscription: nothing more goes on it, no answer.
                    return;
                }
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
        self.by_host_id.remove(&open.key);
        Some(open)
    }

    fn abandon(&mut self, id: u64, error: RequestError, reason: &str) {
        self.finish(id, Err(error));
        let params = json!({ "requestId": id, "reason": reason });
        let cancelled = jsonrpc::notification(Notification::CANCELLED, Some(params));
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
        self.subscriptions = Subscriptions::default();
        self.events.push_back(ServerEvent::Closed(reason.clone()));
        self.state = State::Closed { reason };
    }
}
