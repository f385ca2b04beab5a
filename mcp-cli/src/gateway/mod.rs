//! The gateway: one MCP server, on any byte stream, standing for many servers through the
//! [`Hub`]. Tools, resources, prompts and skills under the hub's names; calls routed; progress and
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
//! - `mod.rs`: the `Gateway`: one host served, each request sent where it goes
//! - `call.rs`: a request to one backend: its plan (what, and how the host is asked) and runner
//! - `errors.rs`: what a host is told when something fails
//! - `host.rs`: the gateway's side of its host, and the `Relay` of servers' questions
//! - `stdio.rs`: the host's end of `serve` on stdio
//! - `listen.rs`: `serve --listen`: the gateway over Streamable HTTP
//! - `listen/`: its clock, connection cap, posted bodies and bearer token
//! - `bridge.rs`: one `--listen` host in memory, its answers routed to their HTTP requests
//! - `keepalive.rs`: keep-alive comments on `--listen`'s event streams
//! - `rounds.rs`: multi-round-trip requests for a stateless-era host
//! - `sealed.rs`: what a host brings back sealed, so any replica can trust it
//! - `replicas.rs`: replicas behind a load balancer: task handles that name theirs
//! - `url_elicitation.rs`: URL-mode elicitation (links) through the gateway
//! - `tasks.rs`: tasks for a host that asks for them, in either era
//! - `proxy.rs`: `serve --proxy`: one tool, `mcp`
//! - `search.rs`: `serve --search`: `search_tools`, `describe_tool`, `call_tool`
//! - `large.rs`: a host's size limit on tool results (`maxResultSizeChars`)
//! - `lists.rs`: `tools/list`: what the catalogue has, the wait, a list that goes on
//! - `features.rs`: resources and prompts: their lists, `prompts/get`, `resources/read`
//! - `skills.rs`: skills: `skills/list`, `skills/get`, their files read under their server

mod bridge;
mod call;
mod errors;
mod features;
mod host;
mod keepalive;
mod large;
pub(crate) mod listen;
mod lists;
mod proxy;
pub(crate) mod replicas;
mod rounds;
pub(crate) mod sealed;
mod search;
mod skills;
pub(crate) mod stdio;
mod tasks;
mod url_elicitation;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::{StreamExt, stream};
use mcp_smol::proto::{
    ListCapability, Notification, RawResult, ResourcesCapability, RpcError, ServerCapabilities,
    SkillsCapability, TasksCapability,
    server::{ClientInfo, HostRequestId, ServerConfig, ServerEvent},
};
use serde_json::{Value, json};

use crate::host::{ConfigFiles, Watch};
use crate::hub::{Hub, HubEvent, ToolEntry};
use errors::{invalid_params, tool_error, unknown_tool};

pub(crate) use host::{Host, HostLink, Relay, Takes};
pub(crate) use rounds::{Asked, Question};

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
    /// `serve --listen` as one of several replicas: where this one is, what they share.
    pub(crate) replicas: Option<replicas::Replicas>,
}

/// How long `tools/list` waits for servers never listed: `MCP_CLI_LIST_WAIT_MS`, else
/// [`lists::LIST_WAIT`].
pub(crate) fn list_wait(env: crate::config::Env<'_>) -> Duration {
    let millis = env("MCP_CLI_LIST_WAIT_MS").and_then(|text| text.trim().parse().ok());
    millis.map_or(lists::LIST_WAIT, Duration::from_millis)
}

/// The capabilities the gateway declares: every list may change; tasks for hosts that ask, in
/// either era ([`tasks`]: the handshake era's for any backend, a call answered at once
/// becoming a task of the gateway's own).
pub(crate) fn server_config() -> ServerConfig {
    let changing = Some(ListCapability { list_changed: true });
    let capabilities = ServerCapabilities {
        tools: changing,
        resources: Some(ResourcesCapability {
            subscribe: false,
            list_changed: true,
        }),
        prompts: changing,
        // Skills are served whatever the servers offer (a list may be empty), so that a
        // server added later can offer them; they change as resources do.
        skills: Some(SkillsCapability::default()),
        tasks: TasksCapability {
            tool_calls: true,
            list: true,
            cancel: true,
            extension: true,
        },
        ..ServerCapabilities::default()
    };
    ServerConfig {
        name: "mcp-cli".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        capabilities,
        ..ServerConfig::default()
    }
}

/// The three lists a host reads again after a change it cannot tell apart.
const EVERY_LIST: [&str; 3] = [
    Notification::TOOLS_LIST_CHANGED,
    Notification::RESOURCES_LIST_CHANGED,
    Notification::PROMPTS_LIST_CHANGED,
];

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
        // Shared, not cloned, by each request's task: a clone copied the host's `ClientInfo`
        // (its strings and capabilities) for every request, and dropped it after.
        let link = Arc::new(link);
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
                    let link = Arc::clone(&link);
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
                    if note.method == Notification::ROOTS_LIST_CHANGED =>
                {
                    self.hub.roots_changed(&self.relay.given_roots_of(&link));
                }
                Wake::Host(Some(ServerEvent::Closed(_)) | None) => break,
                Wake::Host(Some(_)) => {}
                Wake::Hub(event) => {
                    let lists: &[&str] = match event {
                        HubEvent::ToolsChanged { .. } => &[Notification::TOOLS_LIST_CHANGED],
                        HubEvent::ResourcesChanged { .. } => {
                            &[Notification::RESOURCES_LIST_CHANGED]
                        }
                        HubEvent::PromptsChanged { .. } => &[Notification::PROMPTS_LIST_CHANGED],
                        // Whatever changed among the missed events, the host reads it again.
                        HubEvent::Lagged { .. } => &EVERY_LIST,
                        HubEvent::ElicitationComplete { id, .. } => {
                            url_elicitation::complete(&link, &id);
                            continue;
                        }
                        _ => continue,
                    };
                    for list in lists {
                        server.notify(list, None);
                    }
                }
                Wake::ConfigChanged => {
                    for list in EVERY_LIST {
                        server.notify(list, None);
                    }
                }
            }
        }
        drop(running);
        driver.await;
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
        // The rarer requests are boxed: their state would otherwise be carried (and copied) by
        // every call's task.
        match (method, self.mode) {
            // Boxed too, though the common one: the request's task then stays small, where
            // it was copied whole (kilobytes) when spawned and again when first polled.
            ("tools/call", _) => Box::pin(self.call_tool(host, id, params, era)).await,
            ("tools/list", Mode::Tools) => {
                (Box::pin(self.list_tools(&params, era)).await).map(RawResult::from)
            }
            ("tools/list", Mode::Proxy) => Ok(self.fixed_tools(json!([proxy::tool()]), era)),
            ("tools/list", Mode::Search) => {
                let mut tools = search::tools();
                let always = Box::pin(search::always_loaded(self)).await;
                if let Value::Array(tools) = &mut tools {
                    tools.extend(always);
                }
                Ok(self.fixed_tools(tools, era))
            }
            ("resources/list" | "resources/templates/list" | "prompts/list", _) => {
                (Box::pin(self.list_features(method, era)).await).map(RawResult::from)
            }
            ("resources/read", _) => Box::pin(self.read(host, id, &params, era)).await,
            ("skills/list", _) => (Box::pin(self.list_skills(era)).await).map(RawResult::from),
            ("skills/get", _) => {
                (Box::pin(self.get_skill(&params, era)).await).map(RawResult::from)
            }
            ("prompts/get", _) => Box::pin(self.get_prompt(host, id, &params, era)).await,
            ("logging/setLevel", _) => Ok(json!({}).into()),
            (method, _) if tasks::METHODS.contains(&method) => {
                let answer = Box::pin(self.handle_task(host, method, &params, era)).await;
                answer.map(RawResult::from)
            }
            _ => Err(RpcError::method_not_found(method)),
        }
    }

    /// The one list of tools of `--proxy` and `--search`.
    fn fixed_tools(&self, tools: Value, era: Option<&ClientInfo>) -> RawResult {
        let mut page = serde_json::Map::from_iter([("tools".to_owned(), tools)]);
        if let Some(hint) = self.list_hint(era, false) {
            hint.insert_into(&mut page);
        }
        Value::Object(page).into()
    }

    /// Reads the edited config and applies it to the hub; `true` if the servers changed. A
    /// config that no longer reads is reported and changes nothing.
    pub(crate) fn apply(&self, files: &ConfigFiles) -> bool {
        match files.load(&crate::secrets::lookup) {
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
        found.map_err(|error| unknown_tool(name, error))
    }
}
