//! What each exchange's reply means: a POST's status and body, the session's refusal, the
//! fallback to HTTP+SSE, a listing relisted for the headers a call needs.

use std::time::Instant;

use serde_json::Value;

use crate::machines::connection::Sent;
use crate::model::error::{CloseReason, RequestError};
use crate::model::request::Request;
use crate::model::versions::Era;
use crate::wire::jsonrpc::RpcError;

use super::pieces::Message;
use super::{
    Affected, ExchangeId, HeaderRetry, HttpConnection, Mode, Purpose, Reply, session_lost,
};

impl HttpConnection {
    /// [`handle_reply`](Self::handle_reply) for anything but a message.
    pub(super) fn exchange_reply(
        &mut self,
        now: Instant,
        id: ExchangeId,
        reply: Reply,
    ) -> Affected {
        let Some(purpose) = self.exchanges.get(&id) else {
            return Affected::Nothing;
        };
        match purpose {
            Purpose::Post { .. } => self.post_reply(now, id, reply),
            Purpose::Resume { request, from } => {
                let (request, from) = (*request, from.clone());
                self.resume_reply(now, id, request, from, reply)
            }
            Purpose::Listen => {
                self.listen_reply(now, id, reply);
                Affected::Nothing
            }
            Purpose::LegacyStream => self.legacy_reply(reply),
        }
    }

    // ----- internals -----

    pub(super) fn post_reply(
        &mut self,
        now: Instant,
        exchange: ExchangeId,
        reply: Reply,
    ) -> Affected {
        let Some(Purpose::Post {
            url,
            sent,
            session,
            legacy,
            ..
        }) = self.exchanges.get(&exchange)
        else {
            return Affected::Nothing;
        };
        let (url, sent, session, legacy) = (url.clone(), sent.clone(), session.clone(), *legacy);
        let request = match sent {
            Sent::Initialize(id) | Sent::Request(id, _) => Some(id),
            _ => None,
        };
        let initialize = matches!(sent, Sent::Initialize(_));
        match reply {
            Reply::Unreachable(detail) => self.post_failed(now, &url, sent, detail, true),
            Reply::Unauthorized(why) => match sent {
                Sent::Initialize(_) | Sent::Discover { .. } => {
                    self.connection.fail(CloseReason::Transport(why));
                    Affected::Connection
                }
                Sent::Request(id, _) => {
                    let error = RequestError::Transport(why);
                    self.connection.fail_request(now, id, error);
                    Affected::Request(id)
                }
                _ => Affected::Nothing,
            },
            Reply::Refused {
                status,
                body,
                detail,
            } => {
                let probe = matches!(sent, Sent::Discover { probe: true, .. });
                // In the stateless era any JSON-RPC error answers the request; before the
                // verdict only one no handshake-era server sends.
                let any = self.stateless() && !probe;
                let answer = (any || matches!(sent, Sent::Discover { .. }))
                    .then(|| self.refusal_answer(exchange, status, &body, any))
                    .flatten();
                if let Some(answer) = answer {
                    if !self.relist_for_headers(now, exchange, &answer) {
                        self.handle_message(now, Message::Bytes(answer));
                    }
                } else if probe && (400..500).contains(&status) && !matches!(status, 401 | 403) {
                    // A handshake-era server refusing a request outside a session.
                    self.connection
                        .probe_refused(now, format!("HTTP status {status}"));
                } else if let Some(session) = session {
                    if session_lost(status, &body) {
                        self.session_refused(now, exchange, &session, &detail);
                    } else {
                        self.post_failed(now, &url, sent, detail, false);
                    }
                } else if initialize
                    && matches!(self.mode, Mode::Probing)
                    && matches!(status, 400 | 404 | 405)
                {
                    self.fall_back(exchange, format!("POST {url}: {detail}"));
                } else {
                    self.post_failed(now, &url, sent, detail, false);
                }
                Affected::Nothing
            }
            Reply::Head { session } => {
                if initialize && !legacy && session.is_some() {
                    self.session = session;
                }
                Affected::Nothing
            }
            Reply::Message(_) | Reply::Part(_) | Reply::PartsDropped => Affected::Nothing,
            Reply::BodyEnded(_) if self.answered.contains(&exchange) => Affected::Nothing,
            // The end of initialize's answered stream still tells where the server's own
            // stream is to take over.
            Reply::StreamEnded { .. } if self.answered.contains(&exchange) && !initialize => {
                Affected::Nothing
            }
            Reply::BodyEnded(detail) => {
                let why = format!("POST {url}: {detail}");
                if let Some(id) = request {
                    if initialize && self.handshaking() {
                        self.connection.fail(CloseReason::Transport(why));
                    } else if self.by_request.contains_key(&id) {
                        let error = RequestError::Transport(why);
                        self.connection.fail_request(now, id, error);
                    }
                }
                Affected::Nothing
            }
            Reply::Failed(detail) => self.post_failed(now, &url, sent, detail, false),
            Reply::TooLarge { size } => {
                let limit = self.connection.config().max_line_len;
                let error = RequestError::ResponseTooLarge { size, limit };
                match sent {
                    Sent::Initialize(_) if self.handshaking() => {
                        let reason = format!("POST {url}: initialize failed: {error}");
                        self.connection.fail(CloseReason::Transport(reason));
                    }
                    Sent::Request(id, _) => _ = self.connection.fail_request(now, id, error),
                    _ => {}
                }
                Affected::Nothing
            }
            Reply::StreamEnded {
                why,
                last_event_id,
                retry,
            } => {
                if let Some(id) = request {
                    let why = format!("POST {url}: {why}");
                    self.stream_ended(now, id, last_event_id, retry, why);
                }
                Affected::Nothing
            }
            Reply::Endpoint(_) => Affected::Nothing,
            Reply::Done => {
                self.exchanges.remove(&exchange);
                self.answered.remove(&exchange);
                if self.gate == Some(exchange) {
                    self.gate = None;
                    // The new session's handshake is over: what waited for it goes now.
                    for (message, sent) in std::mem::take(&mut self.resend) {
                        self.transmit(message, sent);
                    }
                    self.open_listener();
                }
                if self.initialize.is_some_and(|(_, init)| init == exchange) {
                    self.initialize = None;
                    self.open_listener();
                }
                Affected::Nothing
            }
        }
    }

    /// A POST got no usable answer: `initialize`'s failure ends a connection still starting,
    /// a request's fails that request.
    pub(super) fn post_failed(
        &mut self,
        now: Instant,
        url: &str,
        sent: Sent,
        detail: String,
        unreachable: bool,
    ) -> Affected {
        let sentence = format!("POST {url}: {detail}");
        match sent {
            Sent::Initialize(_) | Sent::Discover { .. } if self.handshaking() => {
                self.connection.fail(CloseReason::Transport(sentence));
                if unreachable {
                    return Affected::Connection;
                }
            }
            Sent::Request(id, _) => {
                let error = RequestError::Transport(sentence);
                self.connection.fail_request(now, id, error);
            }
            _ => {}
        }
        Affected::Nothing
    }

    /// A message answering a POST: a response marks the POST answered, and a stateless-era
    /// `tools/list` result teaches the tools' headers.
    pub(super) fn post_message(&mut self, now: Instant, exchange: ExchangeId, message: Message) {
        if is_response(&message) {
            self.answered.insert(exchange);
        }
        let message = match (self.listing_page(exchange), message) {
            (Some(first), Message::Bytes(bytes)) => Message::Bytes(self.tools.relay(first, bytes)),
            (Some(first), Message::Parsed(Ok(mut value))) => {
                if let Some(result) = value.get_mut("result") {
                    self.tools.learn(first, result);
                }
                Message::Parsed(Ok(value))
            }
            (_, message) => message,
        };
        self.handle_message(now, message);
    }

    /// Whether `exchange` carries a stateless-era `tools/list`, and if so whether it asks for
    /// the first page (no cursor), which starts a new listing.
    pub(super) fn listing_page(&self, exchange: ExchangeId) -> Option<bool> {
        let Some(Purpose::Post {
            body,
            sent: Sent::Request(_, Some(outgoing)),
            ..
        }) = self.exchanges.get(&exchange)
        else {
            return None;
        };
        if outgoing.method != "tools/list" {
            return None;
        }
        let request: Value = serde_json::from_slice(body).ok()?;
        Some(request["params"].get("cursor").is_none())
    }

    /// Whether the stateless era is spoken (no session, no GET stream, no resumption).
    pub(super) fn stateless(&self) -> bool {
        self.connection.era() == Some(Era::Stateless)
    }

    /// The JSON-RPC error in the body of a refusal of `exchange`'s POST, as the answer to its
    /// request: any error when `any`, else only one of the stateless era's (-32020, -32021,
    /// -32022 in a 400, 404 or 405, or -32601 in a 404). A POST carries one request, so the
    /// error answers it whatever id it names (servers often write `null` there).
    pub(super) fn refusal_answer(
        &self,
        exchange: ExchangeId,
        status: u16,
        body: &[u8],
        any: bool,
    ) -> Option<Vec<u8>> {
        let Some(Purpose::Post { body: request, .. }) = self.exchanges.get(&exchange) else {
            return None;
        };
        let mut answer: Value = serde_json::from_slice(body).ok()?;
        let code = answer.get("error")?.get("code")?.as_i64()?;
        let modern = matches!(
            code,
            RpcError::HEADER_MISMATCH
                | RpcError::MISSING_REQUIRED_CLIENT_CAPABILITY
                | RpcError::UNSUPPORTED_PROTOCOL_VERSION
        ) && matches!(status, 400 | 404 | 405)
            || (status, code) == (404, RpcError::METHOD_NOT_FOUND);
        if !any && !modern {
            return None;
        }
        let id = serde_json::from_slice::<Value>(request)
            .ok()?
            .get("id")?
            .clone();
        answer.as_object_mut()?.insert("id".to_owned(), id);
        serde_json::to_vec(&answer).ok()
    }

    /// A `tools/call` refused with -32020 (HeaderMismatch) for the first time: the tool's
    /// `Mcp-Param-*` headers may have changed, or it was never listed, so list the tools (as
    /// the revision says) and send the call again once the listing is in. Returns whether it
    /// did; otherwise the refusal is the call's answer.
    pub(super) fn relist_for_headers(
        &mut self,
        now: Instant,
        exchange: ExchangeId,
        answer: &[u8],
    ) -> bool {
        let Some(Purpose::Post { body, sent, .. }) = self.exchanges.get(&exchange) else {
            return false;
        };
        let Sent::Request(id, Some(outgoing)) = sent else {
            return false;
        };
        let mismatch = serde_json::from_slice::<Value>(answer)
            .ok()
            .and_then(|answer| answer["error"]["code"].as_i64())
            == Some(RpcError::HEADER_MISMATCH);
        if outgoing.method != "tools/call" || !mismatch || !self.header_retried.insert(*id) {
            return false;
        }
        let retry = HeaderRetry {
            body: body.clone(),
            sent: sent.clone(),
            refusal: answer.to_vec(),
        };
        match self.connection.request(now, Request::list_tools(None)) {
            Ok(listing) => {
                self.relisting.insert(listing, retry);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the connection is still opening a session (the first, or a new one).
    pub(super) fn handshaking(&self) -> bool {
        self.connection.server_info().is_none()
    }

    /// A message from the server, from any exchange.
    pub(super) fn handle_message(&mut self, now: Instant, message: Message) {
        // It answered as a Streamable HTTP server: no falling back now.
        if matches!(self.mode, Mode::Probing) {
            self.mode = Mode::Streamable;
        }
        match message {
            Message::Bytes(bytes) => self.connection.handle_message(now, &bytes),
            Message::Parsed(parsed) => self.connection.handle_parsed(now, parsed),
            Message::Unreadable { error, id } => self.connection.handle_unreadable(now, &id, error),
        }
        // Taken at once, so that `notifications/initialized` holds the gate before anything
        // else this exchange reports (its end opens the listener).
        self.take_transmits();
    }

    /// Takes the connection's messages as exchanges, up to `notifications/initialized`.
    pub(super) fn take_transmits(&mut self) {
        while self.gate.is_none()
            && let Some((message, sent)) = self.connection.poll_transmit_with()
        {
            self.transmit(message, sent);
        }
    }

    /// The server refused a message for carrying `session`, which it no longer knows.
    pub(super) fn session_refused(
        &mut self,
        now: Instant,
        exchange: ExchangeId,
        session: &str,
        refusal: &str,
    ) {
        // The exchange stays known until it is over: its end may open the gate.
        let Some(Purpose::Post { body, sent, .. }) = self.exchanges.get(&exchange) else {
            return;
        };
        let (body, sent) = (body.clone(), sent.clone());
        let request = match sent {
            Sent::Initialize(id) | Sent::Request(id, _) => Some(id),
            _ => None,
        };
        // Sent again in a new session and refused again: the refusal is not about the
        // session, and another restart would only loop.
        if let Some(id) = request
            && !self.resent.insert(id)
        {
            let why = format!("POST {}: {refusal}, in a new session too", self.url);
            self.connection
                .fail_request(now, id, RequestError::Transport(why));
            return;
        }
        if self.session.as_deref() == Some(session) {
            // A new session refused before it answered anything: another would go round for
            // ever (`notifications/initialized` opens each).
            if self.restarted_unanswered {
                let why = format!(
                    "POST {}: {refusal}, in a new session that had answered nothing yet",
                    self.url
                );
                self.connection.fail(CloseReason::Transport(why));
                return;
            }
            self.restarted_unanswered = true;
            self.session = None;
            self.restarting = true;
            if let Some(old) = self.listener.take().and_then(|listener| listener.exchange) {
                self.stop_exchange(old);
            }
            self.connection.restart_session(now);
        }
        if request.is_some() {
            self.transmit(body, sent);
        }
    }

    /// `initialize` refused as an HTTP+SSE server would: speak that from now on.
    pub(super) fn fall_back(&mut self, exchange: ExchangeId, why: String) {
        let Some(Purpose::Post { body, sent, .. }) = self.exchanges.get(&exchange) else {
            return;
        };
        let queued = vec![(body.clone(), sent.clone())];
        self.fell_back = Some(why);
        self.initialize = None;
        self.mode = Mode::Legacy {
            endpoint: None,
            queued,
        };
        self.open_legacy_stream();
    }
}

/// Whether `message` is a JSON-RPC response (a result or an error), whatever its id.
pub(super) fn is_response(message: &Message) -> bool {
    let response = |value: &Value| value.get("result").is_some() || value.get("error").is_some();
    match message {
        Message::Bytes(bytes) => serde_json::from_slice::<Value>(bytes).is_ok_and(|v| response(&v)),
        Message::Parsed(parsed) => parsed.as_ref().is_ok_and(response),
        Message::Unreadable { .. } => true,
    }
}
