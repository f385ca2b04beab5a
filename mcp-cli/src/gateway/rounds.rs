//! Multi-round-trip requests for a stateless-era host, which takes no requests of ours: what a
//! backend asks of the person while the host's call, `prompts/get` or `resources/read` runs (a
//! form, a link to open, the roots) goes back to the host as an `input_required` result, and
//! the backend request waits, parked under the `requestState` we gave. The host's retry
//! brings the answers, and the request goes on where it waited. A host that never retries
//! does not hold the backend request for ever: it is dropped (and so cancelled) when its wait
//! ends, when the rounds run out, or when the host hangs up.
//!
//! The `requestState` is sealed ([`Seal`]) and carries every answer given so far, so a retry
//! that reaches a replica where the request is not parked (behind a load balancer, or after
//! the replica that parked it stopped) is answered all the same: the request is made again,
//! and the backend's questions are answered from the state, in the order they were asked,
//! until it asks one the host has not answered yet. That is how a stateless-era server is
//! driven anyway; a handshake-era backend's tool that acts before it asks acts again. The
//! state is bound to the request (its host, method and params) and expires with the wait.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_channel::{Receiver, Sender};
use futures_lite::future::FutureExt;
use mcp_smol::proto::{
    Request, RpcError,
    server::{HostInput, HostRequestId, InputRequired},
};
use serde_json::{Value, json};

use crate::gateway::errors::{internal_error, tool_error};
use crate::gateway::sealed::Seal;

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
    /// What it asks, as a state records it: a call made again is given an answer only for
    /// the question it was given for (a form with the same message and schema, a link to the
    /// same page, the roots), never one the person did not see.
    fn fingerprint(&self) -> String {
        match self {
            Asked::Roots => ROOTS.to_owned(),
            Asked::Elicitation(params) if params["mode"] == "url" => {
                format!("link {}", params["url"].as_str().unwrap_or_default())
            }
            Asked::Elicitation(params) => {
                let asked = json!([
                    params["message"],
                    canonical(params["requestedSchema"].clone())
                ]);
                let digest =
                    ring::digest::digest(&ring::digest::SHA256, asked.to_string().as_bytes());
                let short: String = digest.as_ref()[..8]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("form {short}")
            }
        }
    }

    /// The input request that asks it.
    fn request(self) -> Request {
        match self {
            Asked::Elicitation(params) => Request::new("elicitation/create", Some(params)),
            Asked::Roots => Request::new("roots/list", None),
        }
    }
}

/// A `roots/list` question, as a state records it.
const ROOTS: &str = "roots";

/// The answer taken when the host's retry leaves a question out (`fingerprint`, as
/// [`Asked::fingerprint`] gave it): it has not said yes, and named no roots.
fn unanswered(fingerprint: &str) -> Value {
    match fingerprint {
        ROOTS => json!({"roots": []}),
        _ => json!({"action": "cancel"}),
    }
}

/// A host request in rounds, as its retries must name it again.
pub(crate) struct Called {
    /// The method and the tool (or prompt, or URI), for messages.
    pub(crate) origin: String,
    /// What [`bind`] made of the request.
    pub(crate) bind: String,
    /// The name the host gives itself: its share of the parked calls is counted by it.
    pub(crate) host: String,
}

/// A digest of the host's name, the method and the params but for the answers: a retry with
/// other arguments, or another host's, cannot take the request's answers.
pub(crate) fn bind(host: &str, method: &str, params: &Value) -> String {
    let mut params = params.clone();
    if let Value::Object(params) = &mut params {
        for answers in ["requestState", "inputResponses", "_meta"] {
            params.remove(answers);
        }
    }
    let bound = json!([host, method, canonical(params)]);
    let digest = ring::digest::digest(&ring::digest::SHA256, bound.to_string().as_bytes());
    digest
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `value` with every object's members in order, so that the same params digest the same
/// whatever order a host wrote them in.
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(object) => {
            let sorted: BTreeMap<String, Value> = object.into_iter().collect();
            let members = sorted.into_iter().map(|(k, v)| (k, canonical(v)));
            Value::Object(members.collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
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

/// At most this many calls of one host (by the name it gives) wait for its answers at once; a
/// call that would be one more ends with a tool error instead, so a host that starts calls
/// and never retries them cannot grow our memory.
const MAX_PARKED_PER_HOST: usize = 64;

/// At most this many calls of all hosts wait at once: one more (of a host that names itself
/// anew each time, say) takes the place of the one parked longest. Its state still holds: its
/// retry makes the call again, as on another replica.
const MAX_PARKED: usize = 256;

/// The answer to a request whose rounds ended in `why`: a tool error for a call, which the
/// model reads; an internal error (-32603) for a prompt or a read.
fn gave_up(origin: &str, why: String) -> Result<Value, RpcError> {
    match origin.starts_with("tools/call") {
        true => Ok(tool_error(&why)),
        false => Err(internal_error(format!("{origin}: {why}"))),
    }
}

/// The calls of one host parked on its answers, by the key their `requestState` names.
#[derive(Clone)]
pub(crate) struct Rounds {
    inner: Arc<Mutex<Parking>>,
    wait: Duration,
    seal: Arc<Seal>,
}

#[derive(Default)]
struct Parking {
    parked: BTreeMap<String, Parked>,
    /// The keys in the order they were parked, the oldest first (with some of calls gone).
    order: VecDeque<String>,
}

/// A backend call between rounds.
struct Parked {
    called: Called,
    call: async_executor::Task<Result<Value, RpcError>>,
    answering: Answering,
    questions: Receiver<Question>,
    /// The answers the call waits for, by the key the host answers under, with what it
    /// takes when the host leaves one out.
    waiting: BTreeMap<String, (Sender<Value>, Value)>,
    /// Every answer the call was given, in the order it asked: what its state carries (of
    /// a call made again, only those it asked for again).
    answered: Vec<(String, Value)>,
    /// A call made again on a retry: the answers it was given before, for its questions in
    /// turn, before any goes to the host.
    replayed: VecDeque<(String, Value)>,
    rounds: u32,
    /// Drops this call when the host has not retried in time.
    _expiry: Option<async_executor::Task<()>>,
}

/// What a state says: the call's parked key, what it was bound to, when it expires (ms
/// since the epoch), its round, the answers given so far (each with what it answered) and the
/// questions of this round (key, and what each asks: [`Asked::fingerprint`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct State {
    park: String,
    origin: String,
    bind: String,
    expires: u64,
    round: u32,
    answered: Vec<(String, Value)>,
    asked: Vec<(String, String)>,
}

/// What a retry resumes.
enum Resumed {
    /// The call parked here, given the retry's answers.
    Here(Parked),
    /// A call parked elsewhere (or no more): made again, with these answers for its
    /// questions, after this many rounds.
    Elsewhere {
        rounds: u32,
        answered: Vec<(String, Value)>,
    },
}

/// The kind of text a [`State`] is sealed as.
const SEALED_AS: &str = "mcp-cli-round1";

fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    since.map_or(0, |since| since.as_millis() as u64)
}

impl Rounds {
    /// Rounds whose states only this process opens: `MCP_CLI_INPUT_WAIT_MS` (for tests) is
    /// how long a call waits, else five minutes.
    pub(crate) fn new(env: crate::config::Env<'_>) -> Self {
        Self::sealed_by(env, Arc::new(Seal::of_this_process()))
    }

    /// [`new`](Self::new), with states that every replica holding `seal`'s keys opens.
    pub(crate) fn sealed_by(env: crate::config::Env<'_>, seal: Arc<Seal>) -> Self {
        let millis = env("MCP_CLI_INPUT_WAIT_MS").and_then(|text| text.trim().parse().ok());
        Self {
            inner: Arc::default(),
            wait: millis.map_or(INPUT_WAIT, Duration::from_millis),
            seal,
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
    /// resumes its parked call with the host's answers (or makes it again with all of them,
    /// when it is parked elsewhere); anything else starts a call with `start`, which is given
    /// where the call's questions go. Either way the answer is the call's result, or
    /// `input_required` when it asks something first. `called` names what is called, so that
    /// a retry cannot resume another call; `to` is the host request this answers, which the
    /// call is told of through [`Answering`].
    pub(crate) async fn answer<F>(
        &self,
        executor: &Arc<async_executor::Executor<'static>>,
        called: Called,
        to: ReplyTo,
        input: Option<HostInput>,
        start: F,
    ) -> Result<Value, RpcError>
    where
        F: FnOnce(Sender<Question>, Answering) -> async_executor::Task<Result<Value, RpcError>>,
    {
        let (rounds, answered) = match input {
            None => (0, Vec::new()),
            Some(input) => match self.resume(&called, input)? {
                Resumed::Here(parked) => return self.go_on(executor, parked, to).await,
                Resumed::Elsewhere { rounds, answered } => (rounds, answered),
            },
        };
        let (questions, asked) = async_channel::unbounded();
        let answering = Arc::new(Mutex::new(to.clone()));
        let parked = Parked {
            called,
            call: start(questions, answering.clone()),
            answering,
            questions: asked,
            waiting: BTreeMap::new(),
            // Each answer is the call's again once its question is asked again.
            replayed: answered.into(),
            answered: Vec::new(),
            rounds,
            _expiry: None,
        };
        self.go_on(executor, parked, to).await
    }

    /// Runs `parked` until it ends, or asks what the host must answer.
    async fn go_on(
        &self,
        executor: &Arc<async_executor::Executor<'static>>,
        mut parked: Parked,
        to: ReplyTo,
    ) -> Result<Value, RpcError> {
        *(parked.answering.lock()).unwrap_or_else(PoisonError::into_inner) = to;
        enum Next {
            Done(Result<Value, RpcError>),
            Asked(Question),
        }
        let first = loop {
            let next = {
                let done = async { Next::Done((&mut parked.call).await) };
                let asked = async {
                    match parked.questions.recv().await {
                        Ok(question) => Next::Asked(question),
                        // The call holds the sender until it ends, which `done` sees.
                        Err(_) => std::future::pending().await,
                    }
                };
                done.or(asked).await
            };
            let question = match next {
                Next::Done(result) => return result,
                Next::Asked(question) => question,
            };
            // A call made again is given the answers it was given before, in turn, as long
            // as it asks what it asked then.
            match parked.replayed.pop_front() {
                Some((asked, answer)) if asked == question.asked.fingerprint() => {
                    let _ = question.answer.try_send(answer.clone());
                    parked.answered.push((asked, answer));
                }
                Some(_) => {
                    parked.replayed.clear();
                    break question;
                }
                None => break question,
            }
        };
        parked.rounds += 1;
        if parked.rounds > MAX_ROUNDS {
            // Dropping the call cancels it on the backend.
            return gave_up(
                &parked.called.origin,
                format!("the server asked for input more than {MAX_ROUNDS} times; gave up"),
            );
        }
        let questions =
            std::iter::once(first).chain(std::iter::from_fn(|| parked.questions.try_recv().ok()));
        let mut round = InputRequired::default();
        let mut asked = Vec::new();
        for (n, question) in questions.enumerate() {
            let key = format!("input-{}-{n}", parked.rounds);
            let fingerprint = question.asked.fingerprint();
            let unanswered = unanswered(&fingerprint);
            round.requests.insert(key.clone(), question.asked.request());
            parked
                .waiting
                .insert(key.clone(), (question.answer, unanswered));
            asked.push((key, fingerprint));
        }
        let origin = parked.called.origin.clone();
        match self.park(executor, parked, asked) {
            Some(state) => {
                round.state = Some(state);
                Ok(round.to_result())
            }
            None => gave_up(
                &origin,
                format!(
                    "the server asked for input, and {MAX_PARKED_PER_HOST} requests of this host \
                     already wait for theirs; answer or abandon those first"
                ),
            ),
        }
    }

    /// Opens the state a retry brings: the call parked here, given the host's answers, or
    /// every answer so far for a call to be made again.
    fn resume(&self, called: &Called, input: HostInput) -> Result<Resumed, RpcError> {
        let invalid = |message: String| RpcError {
            code: RpcError::INVALID_PARAMS,
            message,
            data: None,
        };
        let Some(text) = input.state else {
            return Err(invalid(
                "`inputResponses` without the `requestState` they answer".to_owned(),
            ));
        };
        let opened = (self.seal.open(SEALED_AS, &text))
            .map_err(|why| invalid(format!("`requestState` {why}; call again without it")));
        let state: State = serde_json::from_value(opened?)
            .map_err(|_| invalid("`requestState` is not one this gateway made".to_owned()))?;
        if state.expires <= now_ms() {
            return Err(invalid(format!(
                "`requestState` names no call waiting for input: it waited longer than {} s; \
                 call again without it",
                self.wait.as_secs_f64()
            )));
        }
        if state.origin != called.origin {
            return Err(invalid(format!(
                "`requestState` belongs to {}, not to {}",
                state.origin, called.origin
            )));
        }
        if state.bind != called.bind {
            return Err(invalid(format!(
                "`requestState` belongs to {} with other arguments, or of another host; call \
                 again without it",
                state.origin
            )));
        }
        let mut answered = state.answered;
        for (key, asked) in &state.asked {
            let answer = input.responses.get(key).cloned();
            answered.push((asked.clone(), answer.unwrap_or_else(|| unanswered(asked))));
        }
        let Some(mut parked) = self.parking().parked.remove(&state.park) else {
            let rounds = state.round;
            return Ok(Resumed::Elsewhere { rounds, answered });
        };
        for (key, (answer, unanswered)) in std::mem::take(&mut parked.waiting) {
            let response = input.responses.get(&key).cloned().unwrap_or(unanswered);
            let _ = answer.try_send(response);
        }
        parked.answered = answered;
        parked._expiry = None;
        Ok(Resumed::Here(parked))
    }

    /// Keeps `parked`, which asked `asked` (key and fingerprint), until the host retries or its
    /// wait ends; returns its `requestState`, or `None` (and drops it) when
    /// [`MAX_PARKED_PER_HOST`] calls of its host wait already.
    fn park(
        &self,
        executor: &Arc<async_executor::Executor<'static>>,
        mut parked: Parked,
        asked: Vec<(String, String)>,
    ) -> Option<String> {
        let mut parking = self.parking();
        let host = &parked.called.host;
        let of_host = parking.parked.values().filter(|p| p.called.host == *host);
        if of_host.count() >= MAX_PARKED_PER_HOST {
            return None;
        }
        // Dropped once the lock is given up: dropping a call cancels it at its backend.
        let mut evicted = Vec::new();
        while parking.parked.len() >= MAX_PARKED {
            let Some(oldest) = parking.order.pop_front() else {
                break;
            };
            evicted.extend(parking.parked.remove(&oldest));
        }
        if parking.order.len() > 2 * MAX_PARKED {
            let Parking { parked, order } = &mut *parking;
            order.retain(|key| parked.contains_key(key));
        }
        // Unique among replicas, not only here: a retry on another replica must not resume
        // a call of that one's under the same key.
        let mut secret = [0u8; 16];
        let _ = getrandom::getrandom(&mut secret);
        let key: String = secret.iter().map(|byte| format!("{byte:02x}")).collect();
        let state = State {
            park: key.clone(),
            origin: parked.called.origin.clone(),
            bind: parked.called.bind.clone(),
            expires: now_ms() + self.wait.as_millis() as u64,
            round: parked.rounds,
            answered: parked.answered.clone(),
            asked,
        };
        let sealed = (self.seal).seal(SEALED_AS, &serde_json::to_value(state).ok()?);
        let inner: Weak<Mutex<Parking>> = Arc::downgrade(&self.inner);
        let (expiring, wait) = (key.clone(), self.wait);
        parked._expiry = Some(executor.spawn(async move {
            async_io::Timer::after(wait).await;
            if let Some(inner) = inner.upgrade() {
                let expired = (inner.lock().unwrap_or_else(PoisonError::into_inner))
                    .parked
                    .remove(&expiring);
                if let Some(mut expired) = expired {
                    // Not this task's own handle: it is running, and ends on its own.
                    if let Some(expiry) = expired._expiry.take() {
                        expiry.detach();
                    }
                    drop(expired);
                }
            }
        }));
        parking.order.push_back(key.clone());
        parking.parked.insert(key, parked);
        drop(parking);
        drop(evicted);
        Some(sealed)
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

    /// `origin` as a call with no params of host `h`.
    fn called(origin: &str) -> Called {
        called_by("h", origin)
    }

    /// `origin` as a call with no params of `host`.
    fn called_by(host: &str, origin: &str) -> Called {
        Called {
            origin: origin.to_owned(),
            bind: bind(host, origin, &json!({})),
            host: host.to_owned(),
        }
    }

    #[test]
    fn a_question_becomes_a_round_and_the_retry_brings_the_answer() {
        let executor = Arc::new(async_executor::Executor::new());
        let rounds = Rounds::new(&no_env);
        futures_lite::future::block_on(executor.run(async {
            let origin = "tools/call fx__ask";
            let start = asking(&executor, 1);
            let round = rounds
                .answer(&executor, called(origin), to(), None, start)
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
            let other = called("tools/call fx__echo");
            let refused = rounds
                .answer(&executor, other, to(), Some(input(&state)), never)
                .await;
            assert_eq!(refused.unwrap_err().code, RpcError::INVALID_PARAMS);
            let unknown = rounds.answer(&executor, called(origin), to(), Some(input("x")), never);
            assert_eq!(unknown.await.unwrap_err().code, RpcError::INVALID_PARAMS);
            // The same tool with other arguments cannot take its answers either.
            let mut argued = called(origin);
            argued.bind = bind("h", origin, &json!({"arguments": {"path": "/etc"}}));
            let refused = rounds.answer(&executor, argued, to(), Some(input(&state)), never);
            let message = refused.await.unwrap_err().message;
            assert!(message.contains("with other arguments"), "{message}");
            assert_eq!(rounds.parked(), 1);

            let done = rounds
                .answer(&executor, called(origin), to(), Some(input(&state)), never)
                .await;
            assert_eq!(done.unwrap(), json!([answer]));
            assert_eq!(rounds.parked(), 0);
        }));
    }

    /// Two replicas' rounds: their own parked calls, one seal.
    fn replicas() -> (Rounds, Rounds) {
        let seal = Arc::new(Seal::of_this_process());
        let one = Rounds::sealed_by(&no_env, seal.clone());
        (one, Rounds::sealed_by(&no_env, seal))
    }

    /// `round`'s state, its one question answered with `answer`.
    fn answering(round: &Value, answer: Value) -> HostInput {
        let requests = round["inputRequests"].as_object().unwrap();
        assert_eq!(requests.len(), 1, "{round}");
        let key = requests.keys().next().unwrap().clone();
        HostInput {
            responses: [(key, answer)].into_iter().collect(),
            state: round["requestState"].as_str().map(str::to_owned),
        }
    }

    #[test]
    fn a_retry_on_another_replica_makes_the_call_again_with_every_answer_so_far() {
        let executor = Arc::new(async_executor::Executor::new());
        let (here, there) = replicas();
        futures_lite::future::block_on(executor.run(async {
            let origin = "tools/call fx__two_questions";
            let round = (here.answer(&executor, called(origin), to(), None, asking(&executor, 2)))
                .await
                .unwrap();
            assert_eq!(
                round["inputRequests"]["input-1-0"]["params"]["message"],
                "question 0"
            );
            let first = json!({"action": "accept", "content": {"n": 0}});
            // The other replica has nothing parked: it asks again from the start, and its
            // first question takes the first answer without going to the host.
            let made_again = asking(&executor, 2);
            let input = answering(&round, first.clone());
            let round = (there.answer(&executor, called(origin), to(), Some(input), made_again))
                .await
                .unwrap();
            let asked = &round["inputRequests"]["input-2-0"];
            assert_eq!(asked["params"]["message"], "question 1", "{round}");
            assert_eq!((here.parked(), there.parked()), (1, 1));
            // Back on the first replica, whose own parked call is of the first round: the
            // call is made once more with both answers and ends.
            let second = json!({"action": "accept", "content": {"n": 1}});
            let input = answering(&round, second.clone());
            let once_more = asking(&executor, 2);
            let done = here.answer(&executor, called(origin), to(), Some(input), once_more);
            assert_eq!(done.await.unwrap(), json!([first, second]));

            // Another deployment's rounds (another key) open none of these states.
            let foreign = Rounds::new(&no_env);
            let input = answering(&round, json!({"action": "decline"}));
            let never = |_, _| unreachable!("a foreign state starts nothing");
            let refused = foreign.answer(&executor, called(origin), to(), Some(input), never);
            let message = refused.await.unwrap_err().message;
            assert!(
                message.contains("key this gateway no longer holds"),
                "{message}"
            );
        }));
    }

    #[test]
    fn a_call_made_again_that_asks_something_else_asks_the_host() {
        let executor = Arc::new(async_executor::Executor::new());
        let (here, there) = replicas();
        futures_lite::future::block_on(executor.run(async {
            let origin = "tools/call fx__changes_its_mind";
            let round = (here.answer(&executor, called(origin), to(), None, asking(&executor, 1)))
                .await
                .unwrap();
            // Made again, the call asks for the roots where it asked a form: the form's
            // answer is not given to it; the host is asked.
            let spawner = executor.clone();
            let roots_first = move |questions: Sender<Question>, _| {
                spawner.spawn(async move {
                    let (answer, answered) = async_channel::bounded(1);
                    let asked = Asked::Roots;
                    questions.send(Question { asked, answer }).await.unwrap();
                    Ok(answered.recv().await.unwrap())
                })
            };
            let input = answering(&round, json!({"action": "accept", "content": {}}));
            let asked = there.answer(&executor, called(origin), to(), Some(input), roots_first);
            let asked = asked.await.unwrap();
            assert_eq!(
                asked["inputRequests"]["input-2-0"],
                json!({"method": "roots/list"})
            );
            // The form's answer the call did not take is not carried on: made again once
            // more, the call asking for the roots gets the roots.
            let roots = json!({"roots": [{"uri": "file:///work"}]});
            let input = answering(&asked, roots.clone());
            let spawner = executor.clone();
            let roots_again = move |questions: Sender<Question>, _| {
                spawner.spawn(async move {
                    let (answer, answered) = async_channel::bounded(1);
                    let asked = Asked::Roots;
                    questions.send(Question { asked, answer }).await.unwrap();
                    Ok(answered.recv().await.unwrap())
                })
            };
            let third = Rounds::sealed_by(&no_env, here.seal.clone());
            let done = third.answer(&executor, called(origin), to(), Some(input), roots_again);
            assert_eq!(done.await.unwrap(), roots);
        }));
    }

    /// A call that asks one elicitation with `params`, and returns its answer.
    fn asking_with(
        executor: &Arc<async_executor::Executor<'static>>,
        params: Value,
    ) -> impl FnOnce(Sender<Question>, Answering) -> async_executor::Task<Result<Value, RpcError>>
    {
        let executor = executor.clone();
        move |questions, _| {
            executor.spawn(async move {
                let (answer, answered) = async_channel::bounded(1);
                let asked = Asked::Elicitation(params);
                questions.send(Question { asked, answer }).await.unwrap();
                Ok(answered.recv().await.unwrap())
            })
        }
    }

    #[test]
    fn an_answer_is_given_again_only_to_the_form_or_link_it_answered() {
        let executor = Arc::new(async_executor::Executor::new());
        let (here, there) = replicas();
        futures_lite::future::block_on(executor.run(async {
            let origin = "tools/call fx__confirm";
            let yes = json!({"action": "accept", "content": {"ok": true}});
            let form = |message: &str| {
                json!({"message": message, "requestedSchema": {"type": "object",
                    "properties": {"ok": {"type": "boolean"}}}})
            };
            let link = |url: &str| json!({"mode": "url", "message": "Sign in", "url": url});
            for (first, again, same) in [
                (form("Delete a.txt?"), form("Delete a.txt?"), true),
                (form("Delete a.txt?"), form("Delete b.txt?"), false),
                (
                    link("https://a.example/1"),
                    link("https://a.example/1"),
                    true,
                ),
                (
                    link("https://a.example/1"),
                    link("https://a.example/2"),
                    false,
                ),
                (form("Open it?"), link("https://a.example/1"), false),
            ] {
                let start = asking_with(&executor, first.clone());
                let round = here.answer(&executor, called(origin), to(), None, start);
                let round = round.await.unwrap();
                let input = answering(&round, yes.clone());
                let made_again = asking_with(&executor, again.clone());
                let retried =
                    there.answer(&executor, called(origin), to(), Some(input), made_again);
                let retried = retried.await.unwrap();
                match same {
                    true => assert_eq!(retried, yes, "{first} then {again}"),
                    false => assert_eq!(
                        retried["resultType"], "input_required",
                        "{first} then {again}: asked anew"
                    ),
                }
            }
        }));
    }

    #[test]
    fn a_host_that_never_retries_cannot_park_without_end() {
        let executor = Arc::new(async_executor::Executor::new());
        let rounds = Rounds::new(&no_env);
        futures_lite::future::block_on(executor.run(async {
            for n in 0..MAX_PARKED_PER_HOST {
                let origin = called(&format!("tools/call t{n}"));
                let round = rounds.answer(&executor, origin, to(), None, asking(&executor, 1));
                assert_eq!(round.await.unwrap()["resultType"], "input_required");
            }
            let origin = called("tools/call one-more");
            let refused = rounds.answer(&executor, origin, to(), None, asking(&executor, 1));
            let refused = refused.await.unwrap();
            assert_eq!(refused["isError"], true, "{refused}");
            assert_eq!(rounds.parked(), MAX_PARKED_PER_HOST);

            // Hosts that name themselves anew each time take the place of the calls parked
            // longest, whose states still hold: a retry makes the call again.
            let first = called_by("other-0", "tools/call first");
            let round = rounds.answer(&executor, first, to(), None, asking(&executor, 1));
            let first_round = round.await.unwrap();
            for n in 1..=MAX_PARKED {
                let origin = called_by(&format!("other-{n}"), "tools/call t");
                let round = rounds.answer(&executor, origin, to(), None, asking(&executor, 1));
                assert_eq!(round.await.unwrap()["resultType"], "input_required");
            }
            assert_eq!(rounds.parked(), MAX_PARKED);
            let input = answering(&first_round, json!({"action": "decline"}));
            let first = called_by("other-0", "tools/call first");
            let made = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (making, start) = (made.clone(), asking(&executor, 1));
            let made_again = move |questions, answering| {
                making.store(true, std::sync::atomic::Ordering::SeqCst);
                start(questions, answering)
            };
            let done = rounds.answer(&executor, first, to(), Some(input), made_again);
            assert_eq!(done.await.unwrap(), json!([{"action": "decline"}]));
            assert!(
                made.load(std::sync::atomic::Ordering::SeqCst),
                "it was evicted"
            );
        }));
    }

    #[test]
    fn a_request_that_keeps_asking_ends_with_a_tool_error_or_an_error() {
        let executor = Arc::new(async_executor::Executor::new());
        let rounds = Rounds::new(&no_env);
        futures_lite::future::block_on(executor.run(async {
            let mut ended = Vec::new();
            for origin in ["tools/call loop", "prompts/get loop"] {
                let start = asking(&executor, usize::MAX);
                let mut round = (rounds.answer(&executor, called(origin), to(), None, start)).await;
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
                        rounds.answer(&executor, called(origin), to(), Some(input), never);
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
            let origin = "tools/call fx__show_roots";
            let spawner = executor.clone();
            let start = move |questions: Sender<Question>, _| {
                spawner.spawn(async move {
                    let (answer, answered) = async_channel::bounded(1);
                    let asked = Asked::Roots;
                    questions.send(Question { asked, answer }).await.unwrap();
                    Ok(answered.recv().await.unwrap())
                })
            };
            let round = rounds.answer(&executor, called(origin), to(), None, start);
            let round = round.await.unwrap();
            let requests = round["inputRequests"].as_object().unwrap();
            let request = requests.values().next().unwrap();
            assert_eq!(request, &json!({"method": "roots/list"}));
            let input = HostInput {
                responses: serde_json::Map::new(),
                state: round["requestState"].as_str().map(str::to_owned),
            };
            let never = |_, _| unreachable!("a retry starts nothing");
            let done = rounds.answer(&executor, called(origin), to(), Some(input), never);
            assert_eq!(done.await.unwrap(), json!({"roots": []}));
        }));
    }
}
