//! The gateway: one MCP server, on any byte stream, standing for many servers through the
//! [`Hub`]. Tools, resources and prompts under the hub's names; calls routed; progress and
//! cancellation passed on; list changes forwarded; a backend's failure is a tool error.
//!
//! Each host request runs as a task of its own, so a slow call never holds up the others; a
//! host's `notifications/cancelled` drops that task, which cancels the backend's request.
//!
//! A stateless-era host (2026-07-28) is served the same way, request by request: the core
//! reads each request's `_meta` and serves `subscriptions/listen` (list changes go to it), and
//! what a backend asks of the person reaches the host as `input_required` rounds ([`rounds`]).
//!
//! What lives here:
//!
//! - `mod.rs`: the `Gateway`: one host served, requests routed to the hub
//! - `host.rs`: the gateway's side of its host, and the `Relay` of servers' questions
//! - `stdio.rs`: the host's end of `serve` on stdio
//! - `listen.rs`: `serve --listen`: the gateway over Streamable HTTP
//! - `listen/`: its clock, connection cap, posted bodies and bearer token
//! - `bridge.rs`: one `--listen` host in memory, its answers routed to their HTTP requests
//! - `keepalive.rs`: keep-alive comments on `--listen`'s event streams
//! - `rounds.rs`: multi-round-trip requests for a stateless-era host
//! - `url_elicitation.rs`: URL-mode elicitation (links) through the gateway
//! - `tasks.rs`: tasks for a host that asks for them, in either era
//! - `proxy.rs`: `serve --proxy`: one tool, `mcp`
//! - `search.rs`: `serve --search`: `search_tools`, `describe_tool`, `call_tool`
//! - `large.rs`: a host's size limit on tool results (`maxResultSizeChars`)
//! - `lists.rs`: `tools/list`: what the catalogue has, the wait, a list that goes on

mod bridge;
mod host;
mod keepalive;
mod large;
pub(crate) mod listen;
mod lists;
mod proxy;
mod rounds;
mod search;
pub(crate) mod stdio;
mod tasks;
mod url_elicitation;

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use async_channel::Sender;
use futures_lite::{StreamExt, stream};
use mcp_smol::proto::{
    CacheScope, RawResult, Request, RpcError,
    server::{ClientInfo, HostInput, HostRequestId, ServerConfig, ServerEvent},
};
use serde_json::{Map, Value, json};

use crate::hints;
use crate::host::{ConfigFiles, Watch};
use crate::hub::{Catalogue, Hub, HubError, HubEvent, ToolEntry};

pub(crate) use host::{Host, HostLink, Relay, Takes};

/// How the gateway presents the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Every tool of every server, under `<server>__<tool>`.
    Tools,
    /// One tool, `mcp`, that lists, searches and calls the others.
    Proxy,
    /// Three tools that search, describe and call the others.
    Search,
}

/// The namespace of the methods an [`Extension`] answers.
pub(crate) const EXTENSION_PREFIX: &str = "mcp-cli/";

/// Methods of the program's own that a gateway answers beside MCP (the daemon's `mcp-cli/run`,
/// `status` and `stop`), and a clock that hears of every host request.
pub(crate) trait Extension: Send + Sync {
    /// A host asked something.
    fn touch(&self);

    /// The answer to `method` (under [`EXTENSION_PREFIX`]), if it is one of these.
    fn handle(&self, method: &str, params: Option<Value>) -> BoxFuture<'_, Option<Answer>>;
}

/// What a host request is answered with.
pub(crate) type Answer = Result<Value, RpcError>;

/// A future an [`Extension`] answers with.
pub(crate) type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the gateway stands for.
pub(crate) struct Gateway {
    pub(crate) hub: Hub,
    /// The servers named on the command line; every default one when empty.
    pub(crate) named: Vec<String>,
    pub(crate) mode: Mode,
    /// Passes the hub's servers' forms up to the hosts waiting on them.
    pub(crate) relay: Relay,
    /// How long `tools/list` waits for servers never listed.
    pub(crate) list_wait: Duration,
    /// Each tool call's own timeout (`serve --timeout`), instead of its server's.
    pub(crate) call_timeout: Option<Duration>,
    /// Methods of the program's own (`mcp-cli/...`), on the daemon's socket.
    pub(crate) extension: Option<Arc<dyn Extension>>,
    /// Runs the gateway's tasks: the hub's executor, so that a call stays on one thread.
    pub(crate) executor: Arc<async_executor::Executor<'static>>,
    /// Where results cut to a host's `maxResultSizeChars` are kept whole, for it to read.
    pub(crate) results: std::path::PathBuf,
    /// The tasks handed to hosts, for `tasks/list` ([`tasks`]).
    pub(crate) handed: tasks::Handed,
}

/// How long `tools/list` waits for servers never listed: `MCP_CLI_LIST_WAIT_MS`, else
/// [`lists::LIST_WAIT`].
pub(crate) fn list_wait(env: crate::config::Env<'_>) -> Duration {
    let millis = env("MCP_CLI_LIST_WAIT_MS").and_then(|text| text.trim().parse().ok());
    millis.map_or(lists::LIST_WAIT, Duration::from_millis)
}

/// Who a backend request is made for: the host and its request, and, in the stateless era,
/// what the request declared and the answers it brings (a retry).
struct Asking<'a> {
    host: &'a HostLink,
    id: HostRequestId,
    era: Option<&'a ClientInfo>,
    input: Option<HostInput>,
}

impl<'a> Asking<'a> {
    fn new(
        host: &'a HostLink,
        id: HostRequestId,
        method: &str,
        params: &Value,
        era: Option<&'a ClientInfo>,
    ) -> Self {
        let input = era.and_then(|_| HostInput::of(method, Some(params)));
        Self {
            host,
            id,
            era,
            input,
        }
    }
}

/// The capabilities the gateway declares: every list may change.
pub(crate) fn server_config() -> ServerConfig {
    ServerConfig {
        name: "mcp-cli".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        capabilities: json!({
            "tools": {"listChanged": true},
            "resources": {"listChanged": true},
            "prompts": {"listChanged": true},
            // Hosts that ask may get tasks, in either era ([`tasks`]).
            "extensions": {mcp_smol::proto::TASKS_EXTENSION: {}},
            "tasks": tasks::handshake_capability(),
        }),
        ..ServerConfig::default()
    }
}

impl Gateway {
    /// Serves one host, its handshake done, until it hangs up; the hub's servers are left
    /// running (the caller stops them). `watch` applies config edits as they happen.
    pub(crate) async fn serve(self: Arc<Self>, host: Host, watch: Option<Watch>) {
        // A task of its own: the executor polls the command's future (whose part this is)
        // at each of its wake-ups, any task's, and this loop's `or` of three waits need not
        // be polled, and its listeners made again, for another task's message.
        let executor = self.executor.clone();
        executor.spawn(self.serve_host(host, watch)).await;
    }

    async fn serve_host(self: Arc<Self>, host: Host, watch: Option<Watch>) {
        let Host {
            link,
            events,
            driver,
        } = host;
        let server = link.server.clone();
        let changes = self.hub.events();
        // The config files are looked at on a timer of their own: looking at each turn of
        // the loop below cost every request a stat of each file and a timer.
        let (edited, edits) = async_channel::bounded(1);
        let _watching = watch.map(|mut watch| {
            let gateway = self.clone();
            self.executor.spawn(async move {
                loop {
                    watch.changed().await;
                    if gateway.apply(watch.files()) {
                        let _ = edited.try_send(());
                    }
                }
            })
        });
        let mut running: BTreeMap<HostRequestId, async_executor::Task<()>> = BTreeMap::new();
        // One lives at a time, for one turn of the loop below: not worth a box per request.
        #[allow(clippy::large_enum_variant)]
        enum Wake {
            /// `None` once the host hung up.
            Host(Option<ServerEvent>),
            Hub(HubEvent),
            ConfigChanged,
        }
        // Each source a stream, polled where it left off: a turn of the loop makes no
        // listener of its own on each. The host's come first. Only the host's end ends the
        // loop: the merged stream ends as soon as a later one does, so those never end (with
        // nothing watched, the edits' ends at once).
        let host_wakes =
            (events.map(|event| Wake::Host(Some(event)))).chain(stream::once(Wake::Host(None)));
        let hub_wakes = changes.map(Wake::Hub).chain(stream::pending());
        let edit_wakes = (edits.map(|()| Wake::ConfigChanged)).chain(stream::pending());
        let mut wakes = std::pin::pin!(host_wakes.or(hub_wakes).or(edit_wakes));
        while let Some(wake) = wakes.next().await {
            match wake {
                Wake::Host(Some(ServerEvent::Request(request))) => {
                    running.retain(|_, task| !task.is_finished());
                    let gateway = self.clone();
                    let link = link.clone();
                    let id = request.id;
                    let task = self.executor.spawn(async move {
                        let mut request = request;
                        let params = request.params.take();
                        let method = request.method.as_str();
                        let era = request.client.as_ref();
                        let result = (gateway.handle(&link, id, method, params, era)).await;
                        link.server.respond_raw(id, result);
                    });
                    running.insert(id, task);
                }
                // Dropping the task drops the backend call, which cancels it there too.
                Wake::Host(Some(ServerEvent::Cancelled { id, .. })) => _ = running.remove(&id),
                // The servers given this host's roots ask for them again.
                Wake::Host(Some(ServerEvent::Notification(note)))
                    if note.method == "notifications/roots/list_changed" =>
                {
                    self.hub.roots_changed(&self.relay.given_roots_of(&link));
                }
                Wake::Host(Some(ServerEvent::Closed(_)) | None) => break,
                Wake::Host(Some(_)) => {}
                Wake::Hub(event) => {
                    let lists: &[&str] = match event {
                        HubEvent::ToolsChanged { .. } => &["tools"],
                        HubEvent::ResourcesChanged { .. } => &["resources"],
                        HubEvent::PromptsChanged { .. } => &["prompts"],
                        // Whatever changed among the missed events, the host reads it again.
                        HubEvent::Lagged { .. } => &["tools", "resources", "prompts"],
                        HubEvent::ElicitationComplete { id, .. } => {
                            url_elicitation::complete(&link, &id);
                            continue;
                        }
                        _ => continue,
                    };
                    for list in lists {
                        server.notify(&format!("notifications/{list}/list_changed"), None);
                    }
                }
                Wake::ConfigChanged => {
                    for list in ["tools", "resources", "prompts"] {
                        server.notify(&format!("notifications/{list}/list_changed"), None);
                    }
                }
            }
        }
        drop(running);
        driver.await;
    }

    /// Stateless era: a listing or a read carries `ttlMs` and `cacheScope`. A backend's read
    /// keeps its own; a listing made of several servers' gets the strictest of theirs; with
    /// none to go by, it is fresh for no time and private, which is never wrong.
    fn add_cache_hint(&self, method: &str, result: &mut Value) {
        let features = match method {
            "tools/list" => false,
            "resources/list" | "resources/templates/list" | "prompts/list" | "resources/read" => {
                true
            }
            _ => return,
        };
        let Value::Object(result) = result else {
            return;
        };
        if result.contains_key("ttlMs") {
            return;
        }
        let hint = match method {
            "resources/read" => None,
            _ => self.hub.cache_hint(&self.servers(), features),
        };
        let (ttl, scope) = match hint {
            Some(hint) => (hint.ttl.as_millis(), hint.scope),
            None => (0, CacheScope::Private),
        };
        let scope = match scope {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        };
        result.insert(
            "ttlMs".to_owned(),
            json!(u64::try_from(ttl).unwrap_or(u64::MAX)),
        );
        result.insert("cacheScope".to_owned(), json!(scope));
    }

    /// Whether this gateway stands for `server` (a configured name).
    fn serves(&self, server: &str) -> bool {
        match self.named.is_empty() {
            true => self.hub.is_default_server(server),
            false => self.servers().iter().any(|name| name == server),
        }
    }

    /// The configured names this gateway stands for.
    fn servers(&self) -> Vec<String> {
        if self.named.is_empty() {
            return self.hub.default_servers();
        }
        (self.named.iter())
            .filter_map(|name| self.hub.resolve(name).ok())
            .collect()
    }

    /// Answers one host request; `era` is what a stateless-era request's `_meta` said of the
    /// host (`None` in the handshake era). A backend's tool result goes back as the text it
    /// sent, unread where nothing here needs to read it.
    async fn handle(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        method: &str,
        params: Option<Value>,
        era: Option<&ClientInfo>,
    ) -> Result<RawResult, RpcError> {
        if let Some(extension) = &self.extension {
            extension.touch();
            // A command line run here may call any server: its forms come back to this host.
            let _waiting = self.relay.wait_on(None, host);
            if method.starts_with(EXTENSION_PREFIX) {
                // A command line of a new process: it may follow a `trust` run elsewhere.
                self.hub.look_at_pins_again();
                if let Some(answer) = extension.handle(method, params.clone()).await {
                    return answer.map(RawResult::from);
                }
            }
        }
        let params = params.unwrap_or(Value::Null);
        if method == "tools/call" {
            return self.call_tool(host, id, params, era).await;
        }
        // The rarer requests are boxed: their state would otherwise be carried (and copied) by
        // every call's task.
        let mut result = Box::pin(self.answer(host, id, method, params, era)).await;
        if let (Some(_), Ok(result)) = (era, &mut result) {
            self.add_cache_hint(method, result);
        }
        result.map(RawResult::from)
    }

    /// A host's `tools/call`, in the gateway's mode.
    async fn call_tool(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        mut params: Value,
        era: Option<&ClientInfo>,
    ) -> Result<RawResult, RpcError> {
        let method = "tools/call";
        // Moved out, not copied: the rest of the request is read below.
        let arguments = (params.as_object_mut())
            .and_then(|params| params.remove("arguments"))
            .unwrap_or(json!({}));
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let trace = trace_context(&params);
        let input = HostInput::of(method, Some(&params));
        let max_chars = large::requested(&params);
        let called = match self.mode {
            Mode::Tools if tasks::wanted(era, &params) => {
                let call = (self.find(name).await?, arguments, trace);
                let called = Box::pin(self.call_as_task(host, id, call, era, input)).await;
                called.map(RawResult::from)
            }
            Mode::Tools => {
                let entry = self.find(name).await?;
                let call = HostCall {
                    entry,
                    arguments,
                    trace,
                    progress: asks_progress(&params),
                };
                self.call_for_host(host, id, call, era, input).await
            }
            // `call_tool` names the tool inside its arguments; a wrong name there is the
            // model's to correct, so a tool result, not a protocol error.
            Mode::Search if name == search::CALL => {
                let inner = arguments.get("name").and_then(Value::as_str);
                let entry = match self.find(inner.unwrap_or_default()).await {
                    Ok(entry) => entry,
                    Err(error) => return Ok(tool_error(&error.message).into()),
                };
                let call = HostCall {
                    entry,
                    arguments: arguments.get("arguments").cloned().unwrap_or(json!({})),
                    trace,
                    progress: asks_progress(&params),
                };
                self.call_for_host(host, id, call, era, input).await
            }
            Mode::Proxy if name == proxy::NAME => {
                let asked = proxy::Asked {
                    host,
                    id,
                    era,
                    rounds: input,
                    trace,
                };
                Box::pin(proxy::run(self, asked, arguments)).await
            }
            Mode::Proxy => Err(invalid_params(format!(
                "unknown tool {name}; in proxy mode the only tool is {}",
                proxy::NAME
            ))),
            Mode::Search => Box::pin(search::run(self, name, arguments))
                .await
                .map(RawResult::from),
        };
        // Cut to the host's size only when it asks: read for that.
        Ok(match max_chars {
            Some(max) => large::cut(read_result(called?), max, &self.results, name).into(),
            None => called?,
        })
    }

    /// Answers a host request other than `tools/call`.
    async fn answer(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        method: &str,
        params: Value,
        era: Option<&ClientInfo>,
    ) -> Result<Value, RpcError> {
        match (method, self.mode) {
            ("tools/list", Mode::Tools) => Box::pin(self.list_tools(host, &params, era)).await,
            ("tools/list", Mode::Proxy) => Ok(json!({ "tools": [proxy::tool()] })),
            ("tools/list", Mode::Search) => Ok(json!({ "tools": search::tools() })),
            ("resources/list", _) => {
                let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
                let resources: Vec<Value> = (catalogue.resources.iter())
                    .map(|entry| serde_json::to_value(&entry.resource).unwrap_or_default())
                    .collect();
                Ok(json!({ "resources": resources }))
            }
            ("resources/templates/list", _) => {
                let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
                let templates: Vec<Value> = (catalogue.templates.iter())
                    .map(|entry| serde_json::to_value(&entry.template).unwrap_or_default())
                    .collect();
                Ok(json!({ "resourceTemplates": templates }))
            }
            ("resources/read", _) => Box::pin(self.read(host, id, params, era)).await,
            ("prompts/list", _) => {
                let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
                let prompts: Vec<Value> = (catalogue.prompts.iter())
                    .map(|entry| {
                        let mut prompt = serde_json::to_value(&entry.prompt).unwrap_or_default();
                        prompt["name"] = json!(entry.name);
                        prompt
                    })
                    .collect();
                Ok(json!({ "prompts": prompts }))
            }
            ("prompts/get", _) => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
                let Some(entry) = catalogue.prompts.iter().find(|p| p.name == name) else {
                    return Err(invalid_params(match withheld(&catalogue, "prompt", name) {
                        true => withheld_message("prompt", name),
                        false => format!("unknown prompt {name}"),
                    }));
                };
                let arguments = match params.get("arguments") {
                    Some(Value::Object(arguments)) => arguments.clone(),
                    _ => Map::new(),
                };
                let request = Request::get_prompt(&entry.prompt.name, arguments).untyped();
                let origin = format!("prompts/get {name}");
                let asking = Asking::new(host, id, method, &params, era);
                let requested = self.request_for_host(asking, origin, &entry.server, request);
                Box::pin(requested).await
            }
            ("logging/setLevel", _) => Ok(json!({})),
            (method, _) if tasks::METHODS.contains(&method) => {
                Box::pin(self.handle_task(host, method, &params, era)).await
            }
            _ => Err(RpcError::method_not_found(method)),
        }
    }

    /// Reads the edited config and applies it to the hub; `true` if the servers changed. A
    /// config that no longer reads is reported and changes nothing.
    pub(crate) fn apply(&self, files: &ConfigFiles) -> bool {
        match files.load(&|key: &str| std::env::var(key).ok()) {
            Ok(config) => {
                // An entry that appeared while we run waits like any other: say so once.
                let known = self.hub.pending();
                let new: Vec<_> = (config.pending.iter())
                    .filter(|pending| !known.contains(pending))
                    .cloned()
                    .collect();
                if let Some(notice) = crate::host::pending_notice(&new) {
                    crate::output::diagnostic(&notice);
                }
                self.hub.apply(config)
            }
            Err(error) => {
                let message = format!("mcp-cli serve: config not applied: {error}");
                crate::output::diagnostic(&message);
                false
            }
        }
    }

    /// The tool a host names, if it is one of the served servers' and the policy lets it be
    /// called; an unknown name is the host's mistake (-32602), as the spec says.
    async fn find(&self, name: &str) -> Result<ToolEntry, RpcError> {
        // Checked before the lookup, which would start the server.
        let located = self.hub.locate(name);
        if let Ok((server, _)) = &located
            && !self.serves(server)
        {
            return Err(invalid_params(format!(
                "unknown tool {name}: server {server} is not served here"
            )));
        }
        let found = match located {
            Ok((server, tool)) => self.hub.find_tool(&server, &tool).await,
            Err(error) => Err(error),
        };
        let entry = found.map_err(|error| match error {
            HubError::Server { .. }
            | HubError::WrongProtocol { .. }
            | HubError::Unavailable { .. } => {
                // The server is known but down: still a tool call the host may retry.
                invalid_params(format!("{name}: {}", hints::explained(&error)))
            }
            other => invalid_params(hints::explained(&other)),
        })?;
        Ok(entry)
    }

    /// A host's call of one tool: in input rounds for a stateless-era host, relayed as it
    /// runs for a handshake-era one.
    async fn call_for_host(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        call: HostCall,
        era: Option<&ClientInfo>,
        input: Option<HostInput>,
    ) -> Result<RawResult, RpcError> {
        if era.is_some() {
            return Box::pin(self.call_in_rounds(host, id, call, era, input)).await;
        }
        let HostCall {
            entry,
            arguments,
            trace,
            progress,
        } = call;
        self.call(host, id, &entry, arguments, trace, progress)
            .await
    }

    /// A stateless-era host's tool call: a retry resumes the call it answers; otherwise the
    /// call starts, and the forms its server asks for while it runs come back to the host as
    /// `input_required` rounds, when this request declared elicitation (else they are
    /// declined, as for a handshake-era host that cannot show them).
    async fn call_in_rounds(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        call: HostCall,
        era: Option<&ClientInfo>,
        input: Option<HostInput>,
    ) -> Result<RawResult, RpcError> {
        let HostCall {
            entry,
            arguments,
            trace,
            ..
        } = call;
        let takes = era.map(Takes::of).unwrap_or_default();
        if !takes.any() && input.is_none() {
            // A new call whose host cannot be asked has no rounds to wait in: it runs here,
            // not parked in a task of its own (one more hand-off per call).
            let reply_to = host.reply_to(id);
            let progress_to = || reply_to.clone();
            let (progress_to, found) = (Some(&progress_to as _), Found::JustNow);
            let called = self.call_unrelayed(progress_to, &entry, found, arguments, trace);
            let called = called.await;
            let explained = |error| url_elicitation::explained(&entry.name, &error).into();
            return Ok(called.unwrap_or_else(explained));
        }
        let origin = format!("tools/call {}", entry.name);
        let gateway = self.clone();
        let start = move |questions: Sender<rounds::Question>, answering: rounds::Answering| {
            self.executor.spawn(async move {
                let relay = &gateway.relay;
                let _waiting = takes
                    .any()
                    .then(|| relay.wait_in_rounds(&entry.server, questions.clone(), takes));
                // Progress goes to the request the call answers now: the latest retry.
                let progress_to = || {
                    answering
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone()
                };
                // A -32042 is put to the host as links, and the call made again once opened.
                let links = takes.urls.then_some(&questions);
                let mut each_try = url_elicitation::each_try((arguments, trace), takes.urls);
                let called = url_elicitation::call_in_rounds(links, &entry.name, || {
                    let (arguments, trace) = each_try();
                    let called = gateway.call_unrelayed(
                        Some(&progress_to),
                        &entry,
                        Found::Before,
                        arguments,
                        trace,
                    );
                    async move { called.await.map(read_result) }
                })
                .await;
                Ok(called)
            })
        };
        let answered =
            (host.rounds).answer(&self.executor, origin, host.reply_to(id), input, start);
        answered.await.map(RawResult::from)
    }

    /// Calls through the hub with the host's `trace` context, and progress passed on when
    /// the host asked for it (`progress`); every failure but the backend's own JSON-RPC error
    /// is a tool result with `isError`, so the model sees why.
    async fn call(
        &self,
        host: &HostLink,
        id: HostRequestId,
        entry: &ToolEntry,
        arguments: Value,
        trace: Map<String, Value>,
        progress: bool,
    ) -> Result<RawResult, RpcError> {
        // What the server asks of a person while the call runs goes to this host.
        let _waiting = self.relay.wait_on(Some(&entry.server), host);
        let reply_to = || host.reply_to(id);
        let progress_to = progress.then_some(&reply_to as &(dyn Fn() -> _ + Sync));
        // Found by [`find`](Self::find) a moment ago: the hub's gate need not look again.
        let found = Found::JustNow;
        let called = self.call_unrelayed(progress_to, entry, found, arguments, trace);
        url_elicitation::for_handshake_host(called.await, host, &entry.name)
    }

    /// [`call`](Self::call), the caller having told the relay where forms go; progress goes
    /// to the host request `progress_to` names when it comes (none without it). A backend's
    /// -32042 (URL elicitation required) is the error, for the caller to pass on or explain
    /// as its host can take it ([`url_elicitation`]).
    async fn call_unrelayed(
        &self,
        progress_to: Option<&(dyn Fn() -> rounds::ReplyTo + Sync)>,
        entry: &ToolEntry,
        found: Found,
        arguments: Value,
        trace: Map<String, Value>,
    ) -> Result<RawResult, RpcError> {
        let mut call = (self.hub.call(entry, arguments))
            .timeout(self.call_timeout)
            .meta(trace);
        if found == Found::JustNow {
            call = call.found_just_now();
        }
        if let Some(progress_to) = progress_to {
            call = call.on_progress(move |progress| progress_to().progress(progress));
        }
        let failed = match call.raw().await {
            Ok(result) => return Ok(result),
            Err(HubError::Server {
                error: mcp_smol::Error::Request(mcp_smol::proto::RequestError::Remote(rpc)),
                ..
            }) if rpc.code == RpcError::URL_ELICITATION_REQUIRED => return Err(rpc),
            Err(HubError::Server {
                error: mcp_smol::Error::Request(mcp_smol::proto::RequestError::Remote(rpc)),
                ..
            }) => tool_error(&format!("{} failed: {}", entry.name, rpc.text())),
            Err(error @ HubError::OutputMismatch { .. }) => mismatched(error),
            Err(error) => tool_error(&hints::explained(&error)),
        };
        Ok(RawResult::from(failed))
    }

    /// A host's `resources/read`: a result the gateway kept, or the server's whose resource
    /// or template it is; what the server asks of the person meanwhile goes to `host`.
    async fn read(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        params: Value,
        era: Option<&ClientInfo>,
    ) -> Result<Value, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(kept) = large::read(uri, &self.results) {
            return kept.map_err(|message| RpcError {
                code: -32002,
                message,
                data: None,
            });
        }
        let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
        if withheld(&catalogue, "resource", uri) {
            return Err(invalid_params(withheld_message("resource", uri)));
        }
        let listed = catalogue.resources.iter().find(|e| e.resource.uri == uri);
        let server = match listed {
            Some(entry) => entry.server.clone(),
            // A URI from a template: the first server whose template scheme matches.
            None => {
                let scheme = uri.split(':').next().unwrap_or_default();
                let templated = (catalogue.templates.iter())
                    .find(|e| e.template.uri_template.split(':').next() == Some(scheme));
                match templated {
                    Some(entry) => entry.server.clone(),
                    None => {
                        return Err(RpcError {
                            code: -32002,
                            message: format!("resource not found: {uri}"),
                            data: None,
                        });
                    }
                }
            }
        };
        let request = Request::read_resource(uri).untyped();
        let origin = format!("resources/read {uri}");
        let asking = Asking::new(host, id, "resources/read", &params, era);
        self.request_for_host(asking, origin, &server, request)
            .await
    }

    /// Sends `request` (a host's `prompts/get` or `resources/read`, which `origin` names) to
    /// `server`; what the server asks of the person meanwhile goes to the host: as requests
    /// of ours in the handshake era, as `input_required` rounds in the stateless era when the
    /// request declared it takes them (a retry resumes the request it answers).
    async fn request_for_host(
        self: &Arc<Self>,
        asking: Asking<'_>,
        origin: String,
        server: &str,
        request: Request<Value>,
    ) -> Result<Value, RpcError> {
        let Asking {
            host,
            id,
            era,
            input,
        } = asking;
        let takes = era.map(Takes::of).unwrap_or_default();
        if era.is_none() || (!takes.any() && input.is_none()) {
            let _waiting = self.relay.wait_on(Some(server), host);
            return (self.hub.request(server, request).await).map_err(backend_error);
        }
        let (gateway, server) = (self.clone(), server.to_owned());
        let start = move |questions: Sender<rounds::Question>, _: rounds::Answering| {
            self.executor.spawn(async move {
                let relay = &gateway.relay;
                let _waiting =
                    (takes.any()).then(|| relay.wait_in_rounds(&server, questions.clone(), takes));
                // A -32042 is put to the host as links, and the request made again once opened.
                let links = takes.urls.then_some(&questions);
                let made = url_elicitation::again_once_opened(links, || {
                    let (hub, request) = (&gateway.hub, request.clone());
                    async { hub.request(&server, request).await.map_err(backend_error) }
                });
                made.await.map_err(url_elicitation::Unopened::into_error)
            })
        };
        let reply_to = host.reply_to(id);
        (host.rounds)
            .answer(&self.executor, origin, reply_to, input, start)
            .await
    }
}

/// A host's tool call, as it goes to the backend.
struct HostCall {
    entry: ToolEntry,
    arguments: Value,
    /// The host's trace context, from [`trace_context`].
    trace: Map<String, Value>,
    /// The host sent a progress token: the backend's progress is passed on (a handshake-era
    /// host; a stateless-era call's progress goes to its latest retry in any case).
    progress: bool,
}

/// When a call's tool entry was found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    /// With no wait since: the policy and pins it was found under still hold.
    JustNow,
    /// Before a wait (a parked stateless-era call): the hub looks it up again.
    Before,
}

/// Whether a host request's `_meta` carries a progress token.
fn asks_progress(params: &Value) -> bool {
    // Not `pointer`, which parses its path on every call (a fiftieth of a call's CPU).
    (params.get("_meta")).is_some_and(|meta| meta.get("progressToken").is_some())
}

/// The members of a host request's `_meta` that carry its trace context (W3C Trace Context
/// and Baggage, as the 2026-07-28 revision names them), to pass on to the backend's call.
fn trace_context(params: &Value) -> Map<String, Value> {
    const TRACE_KEYS: [&str; 3] = ["traceparent", "tracestate", "baggage"];
    let meta = params.get("_meta");
    (TRACE_KEYS.iter())
        .filter_map(|key| {
            let value = meta?.get(*key)?.as_str()?;
            Some(((*key).to_owned(), json!(value)))
        })
        .collect()
}

/// Whether the poisoning scan withholds `feature` (`prompt`, by its shown name; `resource`, by
/// its URI) from the catalogue.
fn withheld(catalogue: &Catalogue, feature: &str, asked: &str) -> bool {
    (catalogue.withheld.iter()).any(|error| match error {
        HubError::FeatureFlagged {
            server,
            feature: flagged,
            name,
            ..
        } if *flagged == feature => match feature {
            "prompt" => crate::names::qualified(server, name) == asked,
            _ => name == asked,
        },
        _ => false,
    })
}

/// What a host is told of a withheld prompt or resource: that it is, and no more; neither the
/// flagged text nor the command that clears it, which are the person's to see and run.
fn withheld_message(feature: &str, asked: &str) -> String {
    format!(
        "{feature} {asked} is withheld: the poisoning scan flagged it; a person must review it on \
         the command line"
    )
}

fn invalid_params(message: String) -> RpcError {
    RpcError {
        code: RpcError::INVALID_PARAMS,
        message,
        data: None,
    }
}

/// A backend's JSON-RPC error passes through as it is; any other failure is an internal error
/// that names the server and the cause.
fn backend_error(error: HubError) -> RpcError {
    match error {
        HubError::Server {
            error: mcp_smol::Error::Request(mcp_smol::proto::RequestError::Remote(rpc)),
            ..
        } => rpc,
        other => RpcError {
            code: -32603,
            message: hints::explained(&other),
            data: None,
        },
    }
}

/// A tool result that reports a failure to the model.
/// A result whose `structuredContent` fails the tool's `outputSchema`, for the host: its
/// content kept, with why it failed first, as a tool error (which need not match the schema
/// the host was shown, so the structured content that breaks it is left out).
fn mismatched(error: HubError) -> Value {
    let message = error.to_string();
    let HubError::OutputMismatch { result, .. } = error else {
        return tool_error(&message);
    };
    let mut result = *result;
    let note = json!({"type": "text", "text": message});
    match result.as_object_mut() {
        Some(object) => {
            object.remove("structuredContent");
            object.insert("isError".to_owned(), json!(true));
            match object.get_mut("content").and_then(Value::as_array_mut) {
                Some(content) => content.insert(0, note),
                None => {
                    object.insert("content".to_owned(), json!([note]));
                }
            }
            result
        }
        None => tool_error(&message),
    }
}

/// A backend's result read as a value, to change or to hand on as one: one that cannot be
/// (nested too deep) is a tool error that says so.
fn read_result(result: RawResult) -> Value {
    (result.into_value())
        .unwrap_or_else(|error| tool_error(&format!("the tool's result cannot be read: {error}")))
}

pub(crate) fn tool_error(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}
