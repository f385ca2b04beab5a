//! What becomes of an answer to a request of ours in the stateless era, and of the caller's
//! answers to the server: a result complete or another round, a retry with the round's
//! input under a new wire id, a retry in another revision after -32022.

use std::time::Instant;

use serde_json::Value;

use super::{Answer, Connection, Sent, State, encode, other_stateless_revision};
use crate::model::error::RequestError;
use crate::model::params::Input;
use crate::model::raw_result::RawResult;
use crate::model::result_members::Outcome;
use crate::model::stateless;
use crate::wire::jsonrpc::{self, RpcError};

impl Connection {
    /// Sends the caller's answer to the server, or keeps it for the retry of the request it
    /// was asked for (an error is left out), which goes once nothing of its round is open.
    pub(super) fn answer(&mut self, now: Instant, answer: Answer, result: Result<Value, RpcError>) {
        let (request, key) = match answer {
            Answer::Wire(id) => {
                let answer = jsonrpc::response(id, result);
                return self.transmits.push_back((answer, Sent::Other));
            }
            Answer::Input { request, key } => (request, key),
        };
        let origin = self.pending.origin_mut(request);
        if let (Some(origin), Ok(result)) = (origin, result) {
            origin
                .input_responses
                .get_or_insert_default()
                .insert(key, result);
        }
        self.resend_when_settled(now, request);
    }

    /// Sends request `id` again once it waits for input and none of its round is open.
    pub(super) fn resend_when_settled(&mut self, now: Instant, id: u64) {
        let waiting = (self.pending.get(id)).is_some_and(|p| p.wire.is_none() && !p.held);
        let open = self
            .server_requests
            .values()
            .any(|open| open.answer.is_for(id));
        if waiting && !open {
            self.resend(now, id);
        }
    }

    /// A stateless-era result: complete, another round, or not a result at all.
    pub(super) fn handle_stateless_result(&mut self, now: Instant, id: u64, result: RawResult) {
        match result.outcome() {
            Outcome::Complete => self.finish(id, Ok(result)),
            Outcome::Unknown(kind) => {
                let error = format!("unknown `resultType` {kind}");
                self.finish(id, Err(RequestError::InvalidResponse(error)));
            }
            Outcome::InputRequired => match result.into_value() {
                Ok(result) => self.handle_input_required(now, id, result),
                Err(error) => self.finish(id, Err(RequestError::InvalidResponse(error))),
            },
            Outcome::Task => {
                let method = self.pending.origin(id);
                let method = method.map_or("", |origin| origin.method.as_str());
                if method == "tools/call" {
                    // The caller reads it with `Task::created_by`.
                    self.finish(id, Ok(result));
                } else {
                    let error = format!("{method}: a task answers a request that cannot be one");
                    self.finish(id, Err(RequestError::InvalidResponse(error)));
                }
            }
        }
    }

    /// An `input_required` answer: ask the caller for input, or go again at once.
    pub(super) fn handle_input_required(&mut self, now: Instant, id: u64, result: Value) {
        let capabilities = self.config.capabilities;
        let max_rounds = self.config.max_input_rounds;
        let Some(origin) = self.pending.origin_mut(id) else {
            return;
        };
        let round = stateless::read_input_round(&origin.method, result, |m| capabilities.covers(m));
        let round = match round {
            Ok(round) => round,
            Err(detail) => {
                let error = format!("{}: {detail}", origin.method);
                return self.finish(id, Err(RequestError::InvalidResponse(error)));
            }
        };
        if origin.rounds >= max_rounds {
            let rounds = origin.rounds;
            return self.finish(id, Err(RequestError::TooManyInputRounds { rounds }));
        }
        origin.rounds += 1;
        // Each round stands alone: nothing of an earlier one goes again.
        origin.request_state = round.state;
        origin.input_responses = None;
        let requests = round.requests.unwrap_or_default();
        if requests.is_empty() {
            return self.resend(now, id);
        }
        // Each input request has its own deadline, and the retry goes once all are settled.
        self.pending.await_input(id, now);
        for request in requests {
            // With too many open already it is left out, as if refused.
            if self.has_room() {
                let answer = Answer::Input {
                    request: id,
                    key: request.key,
                };
                self.ask_caller(now, answer, request.method, request.params);
            }
        }
        self.resend_when_settled(now, id);
    }

    /// Sends request `id` again under a new wire id, with what its rounds added, in the
    /// revision spoken now.
    pub(super) fn resend(&mut self, now: Instant, id: u64) {
        let wire = self.pending.take_id();
        self.pending.resend(id, wire, now);
        let Some(origin) = self.pending.origin(id) else {
            return;
        };
        let input = Input {
            responses: origin.input_responses.as_ref(),
            state: origin.request_state.as_deref(),
        };
        let meta = self.era_meta.as_ref();
        let bytes = encode(meta, wire, id, &origin.method, &origin.params, input);
        let sent = self.sent_request(id, &origin.method, &origin.params);
        self.transmits.push_back((bytes, sent));
    }

    /// A request refused with -32022 naming a stateless revision we speak goes again in it,
    /// once; whether it did.
    pub(super) fn retry_in_other_revision(
        &mut self,
        now: Instant,
        id: u64,
        error: &RpcError,
    ) -> bool {
        let Some(version) = other_stateless_revision(error) else {
            return false;
        };
        let Some(origin) = self.pending.origin_mut(id) else {
            return false;
        };
        if origin.version_retried {
            return false;
        }
        origin.version_retried = true;
        self.switch_revision(version);
        self.resend(now, id);
        true
    }

    /// Speaks stateless revision `version` from now on (the server refused another).
    pub(super) fn switch_revision(&mut self, version: &'static str) {
        if self
            .era_meta
            .as_ref()
            .is_some_and(|meta| meta.version == version)
        {
            return;
        }
        self.speak(Some(version));
        if let State::Ready { server } = &mut self.state {
            server.protocol_version = version.to_owned();
        }
    }
}
