//! What a server sends besides its answers: its lines as they are decoded (a malformed one
//! reported, one too long failing the request it answers), its requests (passed to the
//! caller or refused), progress, and a subscription's acknowledgement.

use std::time::Instant;

use serde_json::{Value, json};

use super::{Answer, Connection, OpenServerRequest, Sent, State};
use crate::machines::connection::{Event, ServerRequest, ServerRequestId};
use crate::machines::pending::{ProgressToken, deadline_after};
use crate::model::error::RequestError;
use crate::model::raw_result::{self, RawResult};
use crate::model::request::RequestId;
use crate::model::result_members::ResultMembers;
use crate::model::stateless;
use crate::model::types::Notification;
use crate::wire::framing::{Line, line_response_id};
use crate::wire::jsonrpc::{self, Message, Messages, ResponseError, RpcError, read_id};
use crate::wire::line_error::LineError;

/// At most this many refusals of server requests wait for the handshake to end.
const MAX_HELD_REPLIES: usize = 64;

/// At most this many server requests wait for the caller's answer; more are refused at once.
const MAX_OPEN_SERVER_REQUESTS: usize = 64;

impl Connection {
    pub(super) fn handle_line<B: AsRef<[u8]>>(&mut self, now: Instant, line: Line<B>) {
        match line {
            Line::Bytes(line) => self.handle_line_bytes(now, line.as_ref()),
            Line::Parsed(value) => {
                // Taken before the value is moved into its messages, in case it is no message.
                let answered = jsonrpc::response_id(&value);
                let messages = jsonrpc::decode_value(value);
                self.handle_messages(now, messages, || answered.clone());
            }
            Line::Unreadable { error, id } => self.fail_unreadable(now, &id, error),
            Line::Overflowing { limit, size, id } => self.fail_too_large(&id, size, limit),
        }
    }

    fn handle_line_bytes(&mut self, now: Instant, line: &[u8]) {
        let messages = match raw_result::decode_result(line) {
            // The usual line: an answer, its result kept as text.
            Some((id, result, info)) => return self.handle_response(now, &id, Ok(result), info),
            None => jsonrpc::decode(line),
        };
        self.handle_messages(now, messages, || line_response_id(line));
    }

    /// The messages of one line; `answered` says whom the line answers, should it turn out
    /// unreadable.
    fn handle_messages(
        &mut self,
        now: Instant,
        messages: Messages<ResultMembers>,
        answered: impl Fn() -> Option<Value>,
    ) {
        for message in messages {
            match message {
                Ok(message) => self.handle_decoded(now, message),
                Err(error) => match answered() {
                    Some(id) => self.fail_unreadable(now, &id, error),
                    None => self.report_malformed(error),
                },
            }
            if self.is_closed() {
                return;
            }
        }
    }

    /// A line too long to keep fails, at once, the request it answers, if it names one and
    /// its first bytes did not already fail it ([`Line::Overflowing`]).
    pub(super) fn handle_too_long(&mut self, error: LineError) {
        if let LineError::TooLong {
            limit,
            size,
            id: Some(id),
        } = &error
        {
            self.fail_too_large(id, *size, *limit);
        }
        self.report_malformed(error);
    }

    /// The request a response too large to keep answers, if it is still outstanding, fails:
    /// `size` bytes of it had come when it was cut off.
    pub(super) fn fail_too_large(&mut self, id: &Value, size: usize, limit: usize) {
        if let Some(id) = read_id(id).and_then(|wire| self.pending.on_wire(wire)) {
            self.finish(id, Err(RequestError::ResponseTooLarge { size, limit }));
        }
    }

    /// A line that answers `id` but cannot be read ends what it answers, as an answer that is
    /// not valid would, and is reported.
    pub(super) fn fail_unreadable(&mut self, now: Instant, id: &Value, error: LineError) {
        // Reported first: ending what it answers may close the connection (a handshake's
        // answer), and nothing is reported after `Closed`.
        let invalid = ResponseError::Invalid(error.to_string());
        self.report_malformed(error);
        self.handle_response(now, id, Err(invalid), None);
    }

    fn report_malformed(&mut self, error: LineError) {
        self.stats.malformed_lines += 1;
        self.events.push_back(Event::Malformed(error));
    }

    fn handle_decoded(&mut self, now: Instant, message: Message<ResultMembers>) {
        match message {
            Message::Request { id, method, params } => {
                self.handle_server_request(now, id, method, params);
            }
            Message::Notification { method, params } => {
                if method == Notification::PROGRESS {
                    self.handle_progress(now, params.as_ref());
                }
                let notification = Notification { method, params };
                if notification.method == stateless::ACKNOWLEDGED {
                    self.handle_acknowledged(now, &notification);
                }
                self.events.push_back(Event::Notification(notification));
            }
            Message::Response { id, result } => {
                let (result, server_info) = match result {
                    Ok(members) => (Ok(RawResult::from(members.result)), members.server_info),
                    Err(error) => (Err(error), None),
                };
                self.handle_response(now, &id, result, server_info);
            }
        }
    }

    /// A subscription's acknowledgement: from now on it has no deadline.
    fn handle_acknowledged(&mut self, now: Instant, notification: &Notification) {
        let Some(wire) = notification.subscription_id() else {
            return;
        };
        if let Some(id) = self.pending.on_wire(wire.0)
            && self.pending.get(id).is_some_and(|p| p.awaiting_ack)
        {
            self.pending.acknowledge(id, now);
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
        let is_ready = matches!(self.state, State::Ready { .. } | State::Discovering { .. });
        if is_ready && self.has_room() && self.config.capabilities.covers(&method) {
            return self.ask_caller(now, Answer::Wire(id), method, params);
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
            State::Initializing { held_replies, .. } | State::Probing { held_replies, .. }
                if !is_ping =>
            {
                if held_replies.len() < MAX_HELD_REPLIES {
                    held_replies.push(bytes);
                } else {
                    self.stats.dropped_replies += 1;
                }
            }
            _ => self.transmits.push_back((bytes, Sent::Other)),
        }
    }

    /// Whether another server request may wait for the caller.
    pub(super) fn has_room(&self) -> bool {
        self.server_requests.len() < MAX_OPEN_SERVER_REQUESTS
    }

    /// Hands a server request to the caller as an [`Event::ServerRequest`].
    pub(super) fn ask_caller(
        &mut self,
        now: Instant,
        answer: Answer,
        method: String,
        params: Option<Value>,
    ) {
        let request = match &answer {
            Answer::Input { request, .. } => Some(RequestId(*request)),
            Answer::Wire(_) => None,
        };
        let key = self.next_server_request;
        self.next_server_request += 1;
        let deadline = deadline_after(now, self.config.server_request_timeout);
        let open = OpenServerRequest {
            answer,
            method: method.clone(),
            deadline,
        };
        self.server_requests.insert(key, open);
        let id = ServerRequestId(key);
        let asked = ServerRequest {
            id,
            method,
            params,
            request,
        };
        self.events.push_back(Event::ServerRequest(asked));
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
    pub(super) fn owns_its_id_as_token(&self, id: u64) -> bool {
        let pending = self.pending.get(id);
        pending.is_some_and(|p| p.progress_token == Some(ProgressToken::OwnId))
    }
}
