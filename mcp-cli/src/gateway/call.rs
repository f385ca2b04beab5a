//! A host request that goes to one backend (a tool call, a call as a task, a `prompts/get`, a
//! `resources/read`): a [`Plan`] made once, from what the request asks and what its host can
//! be asked, and one runner, [`Gateway::run`].
//!
//! A `tools/call` is planned in the gateway's mode: the tool named, or the one named inside
//! `--search`'s `call_tool` or `--proxy`'s `mcp`; their other tools answer at once.
//!
//! The plan is the work ([`Work`]) and its route ([`Route`]): how the backend's questions,
//! progress and -32042 (links to open first) reach the host. A handshake-era host is asked as
//! the work runs, by requests of ours; a stateless-era host that declared it takes questions,
//! or that brings answers (a retry), is asked in `input_required` rounds while the work waits
//! in a task of its own; any other stateless-era request runs where it came, with nothing to
//! ask.

use std::sync::{Arc, PoisonError};

use async_channel::Sender;

use mcp_smol::proto::{
    RawResult, Request, RpcError,
    server::{ClientInfo, HostInput, HostRequestId},
};
use serde_json::{Map, Value, json};

use super::errors::{
    backend_error, failed_call, invalid_params, link_required, read_result, tool_error,
};
use super::rounds::{self, Answering, Called, Question, ReplyTo};
use super::url_elicitation::{self, Unopened};
use super::{Gateway, HostLink, Mode, Takes, large, proxy, search, tasks};
use crate::hub::ToolEntry;

/// One host request's way to its backend.
pub(crate) struct Plan {
    pub(crate) work: Work,
    pub(crate) route: Route,
}

/// What goes to the backend.
#[derive(Clone)]
pub(crate) enum Work {
    /// A tool call, with the host's trace context ([`trace_context`]).
    Call {
        entry: ToolEntry,
        arguments: Value,
        trace: Map<String, Value>,
    },
    /// A tool call the host asked to have as a task; `handshake`: as a handshake-era host
    /// takes it (`{"task": ...}`, and a task of the gateway's own for a call answered at once).
    Task {
        entry: ToolEntry,
        arguments: Value,
        trace: Map<String, Value>,
        handshake: bool,
    },
    /// Another request (`prompts/get`, `resources/read`); `origin` names it in messages.
    Request {
        server: String,
        origin: String,
        request: Request<Value>,
    },
}

/// How the backend's questions and progress reach the host, and its -32042.
pub(crate) enum Route {
    /// Handshake era: forms go to the host as requests of ours while the work runs, and
    /// progress when the host sent a token.
    Relayed { progress: bool },
    /// Stateless era, a request that takes no questions and brings no answers: it runs here,
    /// not parked in a task of its own (one hand-off fewer per call); progress goes to it.
    Direct,
    /// Stateless era: the work waits in a task of its own, and what its backend asks becomes
    /// `input_required` rounds of the request and of its retries (`input`: what a retry
    /// brings), as far as the request declared it `takes` them.
    InRounds {
        takes: Takes,
        input: Option<HostInput>,
        /// What its retries must match ([`rounds::bind`]).
        bind: String,
    },
}

impl Route {
    /// The route of a host's `method` request with `params`; `era` is what a stateless-era
    /// request's `_meta` said of the host (`None` in the handshake era).
    pub(crate) fn of(era: Option<&ClientInfo>, method: &str, params: &Value) -> Self {
        let Some(era) = era else {
            return Route::Relayed {
                progress: asks_progress(params),
            };
        };
        let takes = Takes::of(era);
        match HostInput::of(method, Some(params)) {
            None if !takes.any() => Route::Direct,
            input => Route::InRounds {
                takes,
                input,
                bind: rounds::bind(&era.client.name, method, params),
            },
        }
    }
}

/// Where a backend's progress goes: the host request the work answers when it comes.
type ProgressTo<'a> = &'a (dyn Fn() -> ReplyTo + Sync);

/// When a call's tool entry was found, for the hub's gate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    /// With no wait since: the policy and pins it was found under still hold.
    JustNow,
    /// Before a wait (parked in rounds): the hub looks it up again.
    Before,
}

impl Work {
    fn server(&self) -> &str {
        match self {
            Work::Call { entry, .. } | Work::Task { entry, .. } => &entry.server,
            Work::Request { server, .. } => server,
        }
    }

    /// The request as input rounds name it.
    fn origin(&self) -> String {
        match self {
            Work::Call { entry, .. } | Work::Task { entry, .. } => {
                format!("tools/call {}", entry.name)
            }
            Work::Request { origin, .. } => origin.clone(),
        }
    }

    /// What the work ends in when the backend's links stay unopened.
    fn ending(&self) -> Ending {
        match self {
            Work::Call { entry, .. } | Work::Task { entry, .. } => Ending::Tool {
                name: entry.name.clone(),
                as_task: matches!(
                    self,
                    Work::Task {
                        handshake: true,
                        ..
                    }
                ),
            },
            Work::Request { .. } => Ending::Request,
        }
    }

    /// One try at the backend: its result (a call's failure is a tool error), or a JSON-RPC
    /// error: a -32042, or a request's error as the backend sent it.
    async fn attempt(
        self,
        gateway: &Gateway,
        progress_to: Option<ProgressTo<'_>>,
        found: Found,
    ) -> Result<RawResult, RpcError> {
        match self {
            Work::Call {
                entry,
                arguments,
                trace,
            } => {
                let mut call = (gateway.hub.call(&entry, arguments))
                    .timeout(gateway.call_timeout)
                    .meta(trace);
                if found == Found::JustNow {
                    call = call.found_just_now();
                }
                if let Some(progress_to) = progress_to {
                    call = call.on_progress(move |progress| progress_to().progress(progress));
                }
                match call.raw().await {
                    Ok(result) => Ok(result),
                    Err(error) => (link_required(error))
                        .map_or_else(|error| Ok(failed_call(&entry.name, error).into()), Err),
                }
            }
            // Rarer: boxed, so that a call's future does not carry their state.
            Work::Task {
                entry,
                arguments,
                trace,
                handshake,
            } => {
                let started = gateway.start_task_for_host(&entry, arguments, trace, handshake);
                Box::pin(started).await.map(RawResult::from)
            }
            Work::Request {
                server, request, ..
            } => {
                let made = Box::pin(gateway.hub.request(&server, request)).await;
                made.map(RawResult::from).map_err(backend_error)
            }
        }
    }
}

/// What a plan ends in when its backend's links could not be opened.
enum Ending {
    /// A tool result that says why (for a handshake-era task, inside the task of the
    /// gateway's own that the host asked for).
    Tool { name: String, as_task: bool },
    /// The backend's error, which names the links.
    Request,
}

impl Ending {
    fn unopened(&self, gateway: &Gateway, unopened: Unopened) -> Result<RawResult, RpcError> {
        match self {
            Ending::Tool { name, as_task } => {
                let explained = unopened.for_tool(name);
                Ok(match as_task {
                    true => json!({ "task": gateway.own_task(explained) }).into(),
                    false => explained.into(),
                })
            }
            Ending::Request => Err(unopened.into_error()),
        }
    }
}

impl Gateway {
    /// A host's `tools/call`, in the gateway's mode: the tool it names and how the call
    /// reaches its backend, planned here and run by [`run`](Self::run).
    pub(crate) async fn call_tool(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        mut params: Value,
        era: Option<&ClientInfo>,
    ) -> Result<RawResult, RpcError> {
        // Before the arguments are moved out: rounds are bound to them.
        let route = Route::of(era, "tools/call", &params);
        // Moved out, not copied: the rest of the request is read below.
        let arguments = (params.as_object_mut())
            .and_then(|params| params.remove("arguments"))
            .unwrap_or(json!({}));
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let trace = trace_context(&params);
        // Cut to the host's size only when it asks: read for that.
        let cut = |called: RawResult| match large::requested(&params) {
            Some(max) => large::cut(read_result(called), max, &self.results, name).into(),
            None => called,
        };
        let work = match self.mode {
            Mode::Tools => {
                let entry = self.find(name).await?;
                match tasks::wanted(era, &params) {
                    true => Work::Task {
                        entry,
                        arguments,
                        trace,
                        handshake: era.is_none(),
                    },
                    false => Work::Call {
                        entry,
                        arguments,
                        trace,
                    },
                }
            }
            // `call_tool` names the tool inside its arguments; a wrong name there is the
            // model's to correct, so a tool result, not a protocol error.
            Mode::Search if name == search::CALL => {
                let inner = arguments.get("name").and_then(Value::as_str);
                match self.find(inner.unwrap_or_default()).await {
                    Ok(entry) => Work::Call {
                        entry,
                        arguments: arguments.get("arguments").cloned().unwrap_or(json!({})),
                        trace,
                    },
                    Err(error) => return Ok(tool_error(&error.message).into()),
                }
            }
            // A tool its config always loads is listed beside the three, and called by name.
            Mode::Search if ![search::SEARCH, search::DESCRIBE].contains(&name) => {
                let found = self.find(name).await.ok();
                let found = found.filter(|entry| search::is_always_loaded(self, entry));
                let Some(entry) = found else {
                    return Err(search::unknown(name));
                };
                Work::Call {
                    entry,
                    arguments,
                    trace,
                }
            }
            Mode::Search => {
                let answer = Box::pin(search::run(self, name, arguments)).await?;
                return Ok(cut(answer.into()));
            }
            Mode::Proxy if name == proxy::NAME => {
                match Box::pin(proxy::run(self, arguments)).await {
                    proxy::Step::Call(entry, arguments) => Work::Call {
                        entry: *entry,
                        arguments,
                        trace,
                    },
                    proxy::Step::Answered(answer) => return Ok(cut(answer.into())),
                }
            }
            Mode::Proxy => {
                return Err(invalid_params(format!(
                    "unknown tool {name}; in proxy mode the only tool is {}",
                    proxy::NAME
                )));
            }
        };
        Ok(cut(self.run(host, id, Plan { work, route }).await?))
    }

    /// Runs `plan` for request `id` of `host`.
    pub(crate) async fn run(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        plan: Plan,
    ) -> Result<RawResult, RpcError> {
        let Plan { work, route } = plan;
        let ending = work.ending();
        let unopened = |error: RpcError| match error.code == RpcError::URL_ELICITATION_REQUIRED {
            true => ending.unopened(self, Unopened::Failed(error)),
            false => Err(error),
        };
        match route {
            Route::Relayed { progress } => {
                // What the server asks of a person while the work runs goes to this host.
                let _waiting = self.relay.wait_on(Some(work.server()), host);
                let reply_to = || host.reply_to(id);
                let progress_to = progress.then_some(&reply_to as ProgressTo);
                // Found by the caller a moment ago: the hub's gate need not look again.
                match work.attempt(self, progress_to, Found::JustNow).await {
                    // A host that takes links gets the -32042 as it came.
                    Err(required) if Takes::of(&host.client).urls => Err(required),
                    tried => tried.or_else(unopened),
                }
            }
            Route::Direct => {
                let reply_to = host.reply_to(id);
                let progress_to = || reply_to.clone();
                let tried = work.attempt(self, Some(&progress_to), Found::JustNow).await;
                tried.or_else(unopened)
            }
            Route::InRounds { takes, input, bind } => {
                let called = Called {
                    origin: work.origin(),
                    bind,
                    host: host.client.client.name.clone(),
                };
                let gateway = self.clone();
                let start = move |questions: Sender<Question>, answering: Answering| {
                    self.executor.spawn(async move {
                        let relay = &gateway.relay;
                        // Progress goes to the request the work answers now: the latest retry.
                        let progress_to = || {
                            let answering = answering.lock();
                            answering.unwrap_or_else(PoisonError::into_inner).clone()
                        };
                        // A -32042 is put to the host as links, and the work made again once
                        // they are open.
                        let links = takes.urls.then_some(&questions);
                        let server = work.server().to_owned();
                        let _waiting = (takes.any())
                            .then(|| relay.wait_in_rounds(&server, questions.clone(), takes));
                        let progress_to = &progress_to as ProgressTo;
                        let made = url_elicitation::again_once_opened(links, work, |work| {
                            let tried = work.attempt(&gateway, Some(progress_to), Found::Before);
                            async { tried.await.map(read_result) }
                        });
                        let made = made.await;
                        made.or_else(|unopened| {
                            ending.unopened(&gateway, unopened).map(read_result)
                        })
                    })
                };
                let reply_to = host.reply_to(id);
                let answered = (host.rounds).answer(&self.executor, called, reply_to, input, start);
                // Boxed: this future is two thirds of `run`'s, which every call's task would
                // otherwise carry (and copy at each move) whatever its route.
                Box::pin(answered).await.map(RawResult::from)
            }
        }
    }
}

/// Whether a host request's `_meta` carries a progress token.
fn asks_progress(params: &Value) -> bool {
    // Not `pointer`, which parses its path on every call (a fiftieth of a call's CPU).
    (params.get("_meta")).is_some_and(|meta| meta.get("progressToken").is_some())
}

/// The members of a host request's `_meta` that carry its trace context (W3C Trace Context
/// and Baggage, as the 2026-07-28 revision names them), to pass on to the backend's call.
pub(crate) fn trace_context(params: &Value) -> Map<String, Value> {
    const TRACE_KEYS: [&str; 3] = ["traceparent", "tracestate", "baggage"];
    let meta = params.get("_meta");
    (TRACE_KEYS.iter())
        .filter_map(|key| {
            let value = meta?.get(*key)?.as_str()?;
            Some(((*key).to_owned(), json!(value)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_smol::proto::Implementation;

    fn stateless(capabilities: Value) -> ClientInfo {
        ClientInfo {
            protocol_version: "2026-07-28".to_owned(),
            client: Implementation::default(),
            capabilities,
        }
    }

    #[test]
    fn a_route_follows_the_era_and_what_the_request_declared() {
        let token = json!({"name": "t", "_meta": {"progressToken": 1}});
        let plain = json!({"name": "t"});
        let retry = json!({"name": "t", "requestState": "s"});
        let route = |era: Option<&ClientInfo>, params: &Value| Route::of(era, "tools/call", params);

        assert!(matches!(
            route(None, &token),
            Route::Relayed { progress: true }
        ));
        assert!(matches!(
            route(None, &plain),
            Route::Relayed { progress: false }
        ));

        let asks_nothing = stateless(json!({}));
        assert!(matches!(route(Some(&asks_nothing), &plain), Route::Direct));
        assert!(matches!(route(Some(&asks_nothing), &token), Route::Direct));
        let resumed = route(Some(&asks_nothing), &retry);
        assert!(matches!(resumed, Route::InRounds { input: Some(_), .. }));
        // A retry is bound to what the first request asked, whatever order its members
        // come in, and not to other arguments.
        let bound = |params: Value| match Route::of(Some(&asks_nothing), "tools/call", &params) {
            Route::InRounds { bind, .. } => bind,
            _ => unreachable!("a retry goes in rounds"),
        };
        let one = bound(json!({"name": "t", "arguments": {"a": 1, "b": 2}, "requestState": "s"}));
        let same = bound(json!({"requestState": "x", "arguments": {"b": 2, "a": 1}, "name": "t"}));
        let other = bound(json!({"name": "t", "arguments": {"a": 2, "b": 2}, "requestState": "s"}));
        assert_eq!(one, same);
        assert_ne!(one, other);

        let takes_forms = stateless(json!({"elicitation": {}}));
        let asked = route(Some(&takes_forms), &plain);
        assert!(
            matches!(asked, Route::InRounds { takes, input: None, .. } if takes.forms && !takes.urls)
        );
        // A method that has no rounds brings no answers, whatever its params say.
        let listed = Route::of(Some(&asks_nothing), "tools/list", &retry);
        assert!(matches!(listed, Route::Direct));
    }
}
