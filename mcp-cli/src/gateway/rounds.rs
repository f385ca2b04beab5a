//! Multi-round-trip requests for a stateless-era host, which takes no requests of ours: what a
//! backend asks of the person while the host's call, `prompts/get` or `resources/read` runs (a
//! form, a link to open, the roots) goes back to the host as an `input_required` result, and
//! the backend request waits, parked under the `requestState` we gave. The host's retry
//! brings the answers, and the request goes on where it waited. A host that never retries
//! does not hold the backend request for ever: it is dropped (and so cancelled) when its wait
//! ends, when the rounds run out, or when the host hangs up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_channel::{Receiver, Sender};
use futures_lite::future::FutureExt;
use mcp_smol::proto::{
    Request, RpcError,
    server::{HostInput, HostRequestId, InputRequired},
};
use serde_json::{Value, json};

use crate::gateway::errors::{internal_error, tool_error};

/// A backend's question to the person, on its way to the host, and where the answer goes.
pub(crate) struct Question {
    pub(crate) asked: Asked,
    /// The host's result for it (when it sent none: `{"action": "cancel"}` for an
    /// elicitation, no roots for `roots/list`).
    pub(crate) answer: Sender<Value>,
}

/// What a round may ask of a stateless-era host.
pub(crate) enum Asked {
    /// `elicitation/create`, a form or a link (URL mode), with these params.
    Elicitation(Value),
    /// `roots/list`.
    Roots,
}

impl Asked {
    /// The input request that asks it.
    fn request(self) -> Request {
        match self {
            Asked::Elicitation(params) => Request::new("elicitation/create", Some(params)),
            Asked::Roots => Request::new("roots/list", None),
        }
    }

    /// The answer taken when the host's retry leaves it out: it has not said yes, and named
    /// no roots.
    fn unanswered(&self) -> Value {
        match self {
            Asked::Elicitation(_) => json!({"action": "cancel"}),
            Asked::Roots => json!({"roots": []}),
        }
    }
}

/// The host request a call answers now, on the connection it came by: its first, then each
/// retry in turn (its progress goes there; over HTTP each request has a connection of its
/// own, which ends with its answer).
pub(crate) type Answering = Arc<Mutex<ReplyTo>>;

/// A host request, and the connection to send its progress on (`None`: nowhere).
#[derive(Clone)]
pub(crate) struct ReplyTo {
    pub(crate) id: HostRequestId,
    pub(crate) server: Option<mcp_smol::Server>,
}

impl crate::gateway::HostLink {
    /// Request `id` of this host, on this connection.
    pub(crate) fn reply_to(&self, id: HostRequestId) -> ReplyTo {
        ReplyTo {
            id,
            server: Some(self.server.clone()),
        }
    }
}

impl ReplyTo {
    /// Sends `progress` to the host, as this request's.
    pub(crate) fn progress(&self, progress: mcp_smol::proto::Progress) {
        if let Some(server) = &self.server {
            server.progress(self.id, progress.progress, progress.total, progress.message);
        }
    }
}

/// How long a parked call waits for the host's retry unless `MCP_CLI_INPUT_WAIT_MS` says:
/// long enough for a person to fill in a form.
const INPUT_WAIT: Duration = Duration::from_secs(300);

/// At most this many `input_required` answers per call; one more ends it with a tool error.
const MAX_ROUNDS: u32 = 8;

/// At most this many calls of one host wait for its answers at once (as many as the requests
/// it may have open); a call that would be one more ends with a tool error instead, so a host
/// that starts calls and never retries them cannot grow our memory.
const MAX_PARKED: usize = 256;

/// The answer to a request whose rounds ended in `why`: a tool error for a call, which the
/// model reads; an internal error (-32603) for a prompt or a read.
fn gave_up(origin: &str, why: String) -> Result<Value, RpcError> {
    match origin.starts_with("tools/call") {
        true => Ok(tool_error(&why)),
        false => Err(internal_error(format!("{origin}: {why}"))),
    }
}

/// The calls of one host parked on its answers, by `requestState`.
#[derive(Clone)]
pub(crate) struct Rounds {
    inner: Arc<Mutex<Parking>>,
    wait: Duration,
}

#[derive(Default)]
struct Parking {
    next: u64,
    parked: BTreeMap<String, Parked>,
}

/// A backend call between rounds.
struct Parked {
    /// The host's method and tool (or prompt, or URI): a retry must name the same.
    origin: String,
    call: async_executor::Task<Result<Value, RpcError>>,
    answering: Answering,
    questions: Receiver<Question>,
    /// The answers the call waits for, by the key the host answers under, with what it
    /// takes when the host leaves one out.
    waiting: BTreeMap<String, (Sender<Value>, Value)>,
    rounds: u32,
    /// Drops this call when the host has not retried in time.
    _expiry: Option<async_executor::Task<()>>,
}

impl Rounds {
    /// `MCP_CLI_INPUT_WAIT_MS` (for tests), else five minutes.
    pub(crate) fn new(env: crate::config::Env<'_>) -> Self {
        let millis = env("MCP_CLI_INPUT_WAIT_MS").and_then(|text| text.trim().parse().ok());
        Self {
            inner: Arc::default(),
            wait: millis.map_or(INPUT_WAIT, Duration::from_millis),
        }
    }

    fn parking(&self) -> std::sync::MutexGuard<'_, Parking> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls parked now (for tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn parked(&self) -> usize {
        self.parking().parked.len()
    }

    /// Answers one request of a stateless host: a retry (`input` with our `requestState`)
    /// resumes its parked call with the host's answers; anything else starts a call with
    /// `start`, which is given where the call's questions go. Either way the answer is the
    /// call's result, or `input_required` when it asks something first. `origin` names what
    /// is called, so that a retry cannot resume another call; `to` is the host request this
    /// answers, which the call is told of through [`Answering`].
    pub(crate) async fn answer<F>(
        &self,
        executor: &Arc<async_executor::Executor<'static>>,
        origin: String,
        to: ReplyTo,
        input: Option<HostInput>,
        start: F,
    ) -> Result<Value, RpcError>
    where
        F: FnOnce(Sender<Question>, Answering) -> async_executor::Task<Result<Value, RpcError>>,
    {
        let mut parked = match input {
            Some(input) => self.resume(&origin, input)?,
            None => {
                let (questions, asked) = async_channel::unbounded();
                let answering = Arc::new(Mutex::new(to.clone()));
                Parked {
                    origin,
                    call: start(questions, answering.clone()),
                    answering,
                    questions: asked,
                    waiting: BTreeMap::new(),
                    rounds: 0,
                    _expiry: None,
                }
            }
        };
        *(parked.answering.lock()).unwrap_or_else(PoisonError::into_inner) = to;
        enum Next {
            Done(Result<Value, RpcError>),
            Asked(Question),
        }
        let done = async { Next::Done((&mut parked.call).await) };
        let asked = async {
            match parked.questions.recv().await {
                Ok(question) => Next::Asked(question),
                // The call holds the sender until it ends, which `done` sees.
                Err(_) => std::future::pending().await,
            }
        };
        let first = match done.or(asked).await {
            Next::Done(result) => return result,
            Next::Asked(question) => question,
        };
        parked.rounds += 1;
        if parked.rounds > MAX_ROUNDS {
            // Dropping the call cancels it on the backend.
            return gave_up(
                &parked.origin,
                format!("the server asked for input more than {MAX_ROUNDS} times; gave up"),
            );
        }
        let questions =
            std::iter::once(first).chain(std::iter::from_fn(|| parked.questions.try_recv().ok()));
        let mut round = InputRequired::default();
        for (n, question) in questions.enumerate() {
            let key = format!("input-{}-{n}", parked.rounds);
            let unanswered = question.asked.unanswered();
            round.requests.insert(key.clone(), question.asked.request());
            parked.waiting.insert(key, (question.answer, unanswered));
        }
        let origin = parked.origin.clone();
        match self.park(executor, parked) {
            Some(state) => {
                round.state = Some(state);
                Ok(round.to_result())
            }
            None => gave_up(
                &origin,
                format!(
                    "the server asked for input, and {MAX_PARKED} requests of this host already \
                     wait for theirs; answer or abandon those first"
                ),
            ),
        }
    }

    /// Takes the call a retry names, and gives it the host's answers.
    fn resume(&self, origin: &str, input: HostInput) -> Result<Parked, RpcError> {
        let invalid = |message: String| RpcError {
            code: RpcError::INVALID_PARAMS,
            message,
            data: None,
        };
        let Some(state) = input.state else {
            return Err(invalid(
                "`inputResponses` without the `requestState` they answer".to_owned(),
            ));
        };
        let mut parking = self.parking();
        match parking.parked.get(&state) {
            None => {
                return Err(invalid(format!(
                    "`requestState` {state:?} names no call waiting for input (it ended, or \
                     waited too long); call again without it"
                )));
            }
            Some(parked) if parked.origin != origin => {
                return Err(invalid(format!(
                    "`requestState` {state:?} belongs to {}, not to {origin}",
                    parked.origin
                )));
            }
            Some(_) => {}
        }
        let mut parked = parking
            .parked
            .remove(&state)
            .ok_or_else(|| invalid(state.clone()))?;
        drop(parking);
        for (key, (answer, unanswered)) in std::mem::take(&mut parked.waiting) {
            let response = input.responses.get(&key).cloned().unwrap_or(unanswered);
            let _ = answer.try_send(response);
        }
        parked._expiry = None;
        Ok(parked)
    }

    /// Keeps `parked` until the host retries or its wait ends; returns its `requestState`, or
    /// `None` (and drops it) when [`MAX_PARKED`] calls wait already.
    fn park(
        &self,
        executor: &Arc<async_executor::Executor<'static>>,
        mut parked: Parked,
    ) -> Option<String> {
        let mut parking = self.parking();
        if parking.parked.len() >= MAX_PARKED {
            return None;
        }
        parking.next += 1;
        // Unguessable as well as unique: hosts of `serve --listen` share this table, and
        // one must not resume another's call by guessing its state (were the system to give no
        // random bytes, the count alone still keeps states apart).
        let mut secret = [0u8; 16];
        let _ = getrandom::getrandom(&mut secret);
        let secret: String = secret.iter().map(|byte| format!("{byte:02x}")).collect();
        let state = format!("mcp-cli-{}-{secret}", parking.next);
        let inner: Weak<Mutex<Parking>> = Arc::downgrade(&self.inner);
        let (key, wait) = (state.clone(), self.wait);
        parked._expiry = Some(executor.spawn(async move {
            async_io::Timer::after(wait).await;
            if let Some(inner) = inner.upgrade() {
                let expired = (inner.lock().unwrap_or_else(PoisonError::into_inner))
                    .parked
                    .remove(&key);
                if let Some(mut expired) = expired {
                    // Not this task's own handle: it is running, and ends on its own.
                    if let Some(expiry) = expired._expiry.take() {
                        expiry.detach();
                    }
                    drop(expired);
                }
            }
        }));
        parking.parked.insert(state.clone(), parked);
        Some(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that asks `times` questions, one after another, and returns the answers.
    fn asking(
        executor: &Arc<async_executor::Executor<'static>>,
        times: usize,
    ) -> impl FnOnce(Sender<Question>, Answering) -> async_executor::Task<Result<Value, RpcError>>
    {
        let executor = executor.clone();
        move |questions, _| {
            executor.spawn(async move {
                let mut answers = Vec::new();
                for n in 0..times {
                    let (answer, answered) = async_channel::bounded(1);
                    let params = json!({"message": format!("question {n}")});
                    let asked = Asked::Elicitation(params);
                    questions.send(Question { asked, answer }).await.unwrap();
                    answers.push(answered.recv().await.unwrap());
                }
                Ok(json!(answers))
            })
        }
    }

    /// A host request's id, as the server role hands one out.
    fn host_request_id() -> HostRequestId {
        use mcp_smol::proto::server::{ServerConfig, ServerConnection, ServerEvent};
        let now = std::time::Instant::now();
        let mut connection = ServerConnection::new(now, ServerConfig::default());
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "t", "_meta": meta}});
        connection.handle_bytes(now, format!("{request}\n").as_bytes());
        std::iter::from_fn(|| connection.poll_event())
            .find_map(|event| match event {
                ServerEvent::Request(request) => Some(request.id),
                _ => None,
            })
            .unwrap()
    }

    /// A host request with no connection to send progress on.
    fn to() -> ReplyTo {
        ReplyTo {
            id: host_request_id(),
            server: None,
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_question_becomes_a_round_and_the_retry_brings_the_answer() {
        let executor = Arc::new(async_executor::Executor::new());
        let rounds = Rounds::new(&no_env);
        futures_lite::future::block_on(executor.run(async {
            let origin = "tools/call fx__ask".to_owned();
            let start = asking(&executor, 1);
            let round = rounds
                .answer(&executor, origin.clone(), to(), None, start)
                .await
                .unwrap();
            assert_eq!(round["resultType"], "input_required");
            let (key, form) = round["inputRequests"]
                .as_object()
                .unwrap()
                .iter()
                .next()
                .unwrap();
            assert_eq!(form["method"], "elicitation/create");
            assert_eq!(form["params"]["message"], "question 0");
            assert_eq!(rounds.parked(), 1);
            let state = round["requestState"].as_str().unwrap().to_owned();

            // Another tool's retry cannot take it; an unknown state is refused.
            let answer = json!({"action": "accept", "content": {"name": "Ada"}});
            let input = |state: &str| HostInput {
                responses: [(key.clone(), answer.clone())].into_iter().collect(),
                state: Some(state.to_owned()),
            };
            let never = |_, _| unreachable!("a retry starts nothing");
            let other = "tools/call fx__echo".to_owned();
            let refused = rounds
                .answer(&executor, other, to(), Some(input(&state)), never)
                .await;
            assert_eq!(refused.unwrap_err().code, RpcError::INVALID_PARAMS);
            let unknown = rounds.answer(&executor, origin.clone(), to(), Some(input("x")), never);
            assert_eq!(unknown.await.unwrap_err().code, RpcError::INVALID_PARAMS);
            assert_eq!(rounds.parked(), 1);

            let done = rounds
                .answer(&executor, origin, to(), Some(input(&state)), never)
                .await;
            assert_eq!(done.unwrap(), json!([answer]));
            assert_eq!(rounds.parked(), 0);
        }));
    }

    #[test]
    fn a_host_that_never_retries_cannot_park_without_end() {
        let executor = Arc::new(async_executor::Executor::new());
        let rounds = Rounds::new(&no_env);
        futures_lite::future::block_on(executor.run(async {
            for n in 0..MAX_PARKED {
                let origin = format!("tools/call t{n}");
                let round = rounds.answer(&executor, origin, to(), None, asking(&executor, 1));
                assert_eq!(round.await.unwrap()["resultType"], "input_required");
            }
            let origin = "tools/call one-more".to_owned();
            let refused = rounds.answer(&executor, origin, to(), None, asking(&executor, 1));
            let refused = refused.await.unwrap();
            assert_eq!(refused["isError"], true, "{refused}");
            assert_eq!(rounds.parked(), MAX_PARKED);
        }));
    }

    #[test]
    fn a_request_that_keeps_asking_ends_with_a_tool_error_or_an_error() {
        let executor = Arc::new(async_executor::Executor::new());
        let rounds = Rounds::new(&no_env);
        futures_lite::future::block_on(executor.run(async {
            let mut ended = Vec::new();
            for origin in ["tools/call loop", "prompts/get loop"] {
                let origin = origin.to_owned();
                let start = asking(&executor, usize::MAX);
                let mut round = (rounds.answer(&executor, origin.clone(), to(), None, start)).await;
                for _ in 0..MAX_ROUNDS {
                    let asked = round.unwrap();
                    assert_eq!(asked["resultType"], "input_required", "{asked}");
                    // The host answers nothing: each question is cancelled, and asked again.
                    let input = HostInput {
                        responses: serde_json::Map::new(),
                        state: asked["requestState"].as_str().map(str::to_owned),
                    };
                    let never = |_, _| unreachable!("a retry starts nothing");
                    let retried =
                        rounds.answer(&executor, origin.clone(), to(), Some(input), never);
                    round = retried.await;
                }
                ended.push(round);
                assert_eq!(rounds.parked(), 0);
            }
            // A call's ends as a tool error the model reads; a prompt's, as an error.
            let called = ended[0].as_ref().unwrap();
            assert_eq!(called["isError"], true, "{called}");
            let error = ended[1].as_ref().unwrap_err();
            assert_eq!(error.code, -32603);
            assert!(
                error
                    .message
                    .starts_with("prompts/get loop: the server asked"),
                "{error:?}"
            );
        }));
    }

    #[test]
    fn a_roots_question_is_a_round_and_left_unanswered_names_no_roots() {
        let executor = Arc::new(async_executor::Executor::new());
        let rounds = Rounds::new(&no_env);
        futures_lite::future::block_on(executor.run(async {
            let origin = "tools/call fx__show_roots".to_owned();
            let spawner = executor.clone();
            let start = move |questions: Sender<Question>, _| {
                spawner.spawn(async move {
                    let (answer, answered) = async_channel::bounded(1);
                    let asked = Asked::Roots;
                    questions.send(Question { asked, answer }).await.unwrap();
                    Ok(answered.recv().await.unwrap())
                })
            };
            let round = rounds.answer(&executor, origin.clone(), to(), None, start);
            let round = round.await.unwrap();
            let requests = round["inputRequests"].as_object().unwrap();
            let request = requests.values().next().unwrap();
            assert_eq!(request, &json!({"method": "roots/list"}));
            let input = HostInput {
                responses: serde_json::Map::new(),
                state: round["requestState"].as_str().map(str::to_owned),
            };
            let never = |_, _| unreachable!("a retry starts nothing");
            let done = rounds.answer(&executor, origin, to(), Some(input), never);
            assert_eq!(done.await.unwrap(), json!({"roots": []}));
        }));
    }
}
