//! The host layer: many servers under one config and one policy, for any program that gives a
//! language model MCP tools. The command line is a thin view over it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcp_client_cli::hub::HubError> {
//! use mcp_client_cli::config::{Command, Config};
//! use mcp_client_cli::hub::{Hub, Settings};
//!
//! let mut config = Config::default();
//! config.add("everything", Command::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]));
//! let hub = Hub::new(config, Settings::default()); // nothing starts yet
//! let catalogue = hub.catalogue().await;            // every server starts, in parallel
//! for tool in &catalogue.tools {
//!     println!("{}", tool.name);                    // everything__echo, ...
//! }
//! let result = hub.call("everything__echo", serde_json::json!({"message": "hi"})).await?;
//! hub.shutdown().await;                             // every server stopped, in parallel
//! # Ok(()) }
//! ```
//!
//! - **Lazy and fail-soft**: nothing starts when the hub is made. A server starts on first use,
//!   or every one at once when the whole [`catalogue`](Hub::catalogue) is asked for, save
//!   those whose listing the catalogue on disk keeps ([`Settings::catalogue_dir`]). One that
//!   cannot start is recorded with its state and reason and never blocks the others.
//! - **Only what is configured**: the hub runs the servers of its [`Config`] and nothing else;
//!   a name no server of it has is [`HubError::UnknownServer`], listing the configured ones.
//!   Build the config from exactly the files you name ([`Config::from_files`],
//!   [`config::load`](crate::config::load)) or in code. The command line adds its presets
//!   ([`config::load_with_presets`](crate::config::load_with_presets)): they are listed, but
//!   join the catalogue (and start) only when no file defines any server, or when they are
//!   named.
//! - **Neutral**: servers hear [`Settings::client_name`] and [`Settings::client_version`]; no
//!   `MCP_CLI_*` variable changes what the hub does, and it prints nothing (a browser login's
//!   URL goes to [`auth::Settings::notice`](crate::auth::Settings::notice)). The one such
//!   variable it reads, `MCP_CLI_GATEWAY_DEPTH`, it passes to its servers one higher, so that
//!   a config whose server runs mcp-cli's own gateway cannot start itself without end.
//! - **Policy**: a server the allow/deny lists keep out is `denied` and never spawned; a tool
//!   that `enabled_tools`/`disabled_tools` or a `deny` rule leaves out is never listed and
//!   cannot be called; a tool an `ask` rule covers is called only once [`Settings::ask`]
//!   approves.
//! - **Crash and restart**: a server that dies fails its pending calls with its exit status
//!   and stderr tail; the next use restarts it, at once the first time and with a growing
//!   wait after that, at most 3 times a minute; then it stays `failed` until
//!   [`restart`](Hub::restart).
//! - **Change**: `notifications/tools/list_changed` refreshes that server's tools and is
//!   passed on to [`events`](Hub::events) as [`HubEvent::ToolsChanged`]; the resources and
//!   prompts ones likewise refresh those lists. A listing listed again because its `ttlMs`
//!   ran out that differs from the one held is told the same way, and so is the first
//!   listing of a server a catalogue was given up on while it started (the start goes on).
//! - **Resources and prompts** of every running server are in the catalogue beside its tools
//!   (prompts under `<server>__<prompt>` names), listed the first time something asks for
//!   them: [`tools_of`](Hub::tools_of), [`find_tool`](Hub::find_tool) and calls never wait
//!   for them. [`request`](Hub::request) reads, gets, completes and subscribes through the
//!   one request path.
//! - **Protocol revision**: a server's `protocol` is spoken as configured; an `auto` one
//!   speaks the revision it spoke last ([`Settings::era_file`]), else is probed, and the
//!   verdict is kept. A verdict that proves wrong is forgotten and the server probed once.
//! - **Client capabilities**: a server whose config names `roots` is offered them as
//!   `file://` URIs; with [`Settings::elicit`] the hub fills in servers' forms.
//! - **Output schemas**: a call's `structuredContent` is checked against its tool's
//!   `outputSchema` (compiled once per listing; 2020-12 unless the schema names its dialect;
//!   no `$ref` ever fetched) before [`Hub::call`] returns: a mismatch is
//!   [`HubError::OutputMismatch`], which carries the result beside the first failing path.
//!   A server's `validate_output = false`, or [`Call::validate_output`], turns it off.
//! - **Shutdown**: [`shutdown`](Hub::shutdown) closes every server in parallel through
//!   mcp-smol; [`terminate`](Hub::terminate) does it without the grace period (for signals).
//!
//! # Dropping and cancelling
//!
//! - **The hub**: every clone is a handle to one hub. When the last one is dropped without
//!   [`shutdown`](Hub::shutdown), each running server is closed all the same (stdin closed,
//!   the grace period, SIGTERM, SIGKILL to its process group), in the background on the
//!   hub's executor: its own thread, or [`Settings::executor`], which must then keep running
//!   until they are gone. Await [`shutdown`](Hub::shutdown) to know when they are.
//! - **A call's future** ([`Hub::call`]): dropped before the request is sent (while the server
//!   starts, or an `ask` handler decides), nothing is sent; dropped after, the server is sent
//!   `notifications/cancelled` for it and its answer, if one still comes, is discarded. The
//!   server keeps running; other calls to it go on. A call's own
//!   [`timeout`](Call::timeout) cancels it the same way and fails it as timed out.
//! - **An event receiver** ([`Hub::events`]): dropped, the hub stops sending to it; the other
//!   receivers are not affected. One that is kept but not read holds the newest 256 events:
//!   the oldest go, and its next receive says how many ([`HubEvent::Lagged`]) before the
//!   events it holds. Every receiver ends (after the events it holds) once the last clone of
//!   the hub is dropped.
//!
//! What lives here:
//!
//! - `mod.rs`: the `Hub`, its events (`HubEvent`) and each server's `State` and status
//! - `events.rs`: one listener's `Events`: the newest 256, and how many older ones went
//! - `settings.rs`: `Settings` and its builder: how the hub runs its servers
//! - `options.rs`: one server's connection options: timeouts, limits, log, protocol revision
//! - `slot.rs`: one configured server's life: started on first use, watched, restarted
//! - `slot/connect.rs`: how a slot starts its server: the program or endpoint, the handshake
//! - `catalogue.rs`: every server's tools as `SERVER__TOOL`, policy applied; finding one
//! - `call.rs`: `Hub::call` and its options (timeout, progress, tasks, output check)
//! - `features.rs`: resources, resource templates and prompts; `Hub::request`
//! - `found.rs`: tools found before, kept for the next lookup of the same name
//! - `cache.rs`: how long a listing held in memory stays fresh
//! - `stored.rs`: the catalogue on disk: each server's last listings
//! - `eras.rs`: the era verdicts: the revision each `auto` server spoke last
//! - `pins.rs`: tool pinning: a changed definition is withheld until `trust`
//! - `accepted.rs`: what `trust` accepted of prompts, resources and templates
//! - `scanning.rs`: the poisoning scan as the hub applies it: flagged items withheld
//! - `ask.rs`: asking a person (or a host) before a call an `ask` rule covers
//! - `server_requests.rs`: answering what servers ask: `roots/list`, forms
//! - `listen.rs`: `subscriptions/listen` on stateless-era servers: live list changes
//! - `tasks.rs`: tasks the servers run in the background, and their records on disk
//! - `validate.rs`: checking `structuredContent` against the tool's `outputSchema`
//! - `reload.rs`: applying an edited config to a running hub
//! - `sandbox.rs`: what a sandboxed server may read and run besides its own paths
//! - `proxy.rs`: the forward proxy, a sandboxed server's only way out
//! - `error.rs`: `HubError`: why the hub could not do what was asked

mod accepted;
mod ask;
mod cache;
mod call;
mod catalogue;
mod eras;
mod error;
mod events;
mod features;
mod found;
mod listen;
mod options;
mod pins;
mod proxy;
mod reload;
mod sandbox;
mod scanning;
mod server_requests;
mod settings;
mod slot;
mod stored;
mod tasks;
mod validate;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use async_channel::{Receiver, Sender};
use async_executor::Executor;
use mcp_smol::proto::Era;
use serde::Serialize;

pub use ask::{Approval, Ask, AskHandler};
pub use call::{Call, ToolRef};
pub use catalogue::{Catalogue, ToolEntry};
pub use error::HubError;
pub use events::Events;
pub use features::{PromptEntry, ResourceEntry, SkillEntry, Skipped, TemplateEntry};
pub use pins::{ApproveChanges, PinChange};
pub use scanning::{FeatureScan, ServerScan, ToolScan};
pub use server_requests::{ElicitAnswer, ElicitHandler, Elicitation, RootsHandler, UrlElicitation};
pub use settings::{Settings, SettingsBuilder};
pub use tasks::{Started, TaskHandle, TaskRecord};
pub use validate::OutputMismatch;

#[cfg(feature = "cli")]
pub(crate) use eras::short_digest;

use crate::config::{Config, Pending, Policy, Server, ServerSpec, Source};
use crate::logs::RunLog;
use crate::names;
use slot::Slot;

/// Where a server stands, as [`Hub::status`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum State {
    /// Not started yet (or stopped by the hub).
    Stopped,
    /// Spawned; handshake or first listing under way.
    Starting,
    /// Ready to call.
    Running,
    /// Could not start, or crashed; the reason says which.
    Failed,
    /// Starting again after a failure.
    Restarting,
    /// `enabled = false` (or the format's own spelling) in the config.
    Disabled,
    /// Kept out by the allow/deny lists.
    Denied,
    /// The entry cannot be used as written.
    Invalid,
    /// A remote server that refused us for want of a login: a token from a login (see
    /// [`auth::Settings::login`](crate::auth::Settings::login)) lets it start.
    NeedsAuth,
    /// Held back by the host until a person approves it ([`Config::pending`]); never started.
    Pending,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_value(self).ok();
        f.write_str(text.as_ref().and_then(|v| v.as_str()).unwrap_or("?"))
    }
}

/// One server of [`Hub::status`]: its state and what goes with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// Where it stands.
    pub state: State,
    /// A built-in preset rather than a configured server.
    pub preset: bool,
    /// The command line (or URL) as configured.
    pub command: String,
    /// Its process id while it runs.
    pub pid: Option<u32>,
    /// The protocol revision it speaks: the running connection's, else the configured one,
    /// else the one it spoke last (the cached verdict); `None` when unknown.
    pub protocol: Option<String>,
    /// That revision's era.
    #[serde(serialize_with = "era_name")]
    pub era: Option<Era>,
    /// How many of its tools the catalogue offers while it runs: those the policy and the
    /// pins let through, as [`Hub::tools_of`] lists them.
    pub tools: Option<usize>,
    /// How many seconds ago its tools were listed and kept in the catalogue on disk, from which
    /// listings are answered while it is not running; `None` when none is kept (never listed,
    /// or no catalogue folder).
    pub catalogue_age: Option<u64>,
    /// Why it failed, is denied or is invalid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its last stderr lines, when it failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stderr: Vec<String>,
}

/// The status row of an entry held back: where it comes from, and what it would replace.
fn pending_status(pending: &Pending) -> ServerStatus {
    let server = &pending.server;
    let from = source_name(&server.source);
    let mut reason = format!("from {from}, not approved for this folder");
    if let Some(replaced) = &pending.replaces {
        let replaced = source_name(&replaced.source);
        reason.push_str(&format!(
            "; until then the entry from {replaced} stays in effect"
        ));
    }
    ServerStatus {
        reason: Some(reason),
        ..ServerStatus::of(server, State::Pending)
    }
}

impl ServerStatus {
    /// `server` in `state`, with nothing known of it yet but its entry.
    pub(crate) fn of(server: &Server, state: State) -> Self {
        ServerStatus {
            name: server.name.clone(),
            state,
            preset: server.source == Source::Preset,
            command: server.entry.command_line(),
            pid: None,
            protocol: None,
            era: None,
            tools: None,
            catalogue_age: None,
            reason: None,
            stderr: Vec::new(),
        }
    }
}

/// Where an entry comes from, for messages: its file, or what made it.
pub(crate) fn source_name(source: &Source) -> String {
    match source {
        Source::File(path) => path.display().to_string(),
        Source::Preset => "the built-in presets".to_owned(),
        Source::Code => "the program".to_owned(),
    }
}

/// An era as `servers --json` spells it: `"stateless"`, `"handshake"` or null.
fn era_name<S: serde::Serializer>(era: &Option<Era>, serializer: S) -> Result<S::Ok, S::Error> {
    match era {
        Some(era) => serializer.collect_str(era),
        None => serializer.serialize_none(),
    }
}

/// What the hub tells its listeners.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubEvent {
    /// A server's tools changed: it sent `notifications/tools/list_changed`, or a listing
    /// listed again once its `ttlMs` ran out differs from the one held, or it listed for the
    /// first time after a catalogue was given up on while it started (and so lacked them).
    /// The catalogue already has the new list.
    ToolsChanged {
        /// The server.
        server: String,
    },
    /// A server's resources or resource templates changed
    /// (`notifications/resources/list_changed`, or found on listing them again once their
    /// `ttlMs` ran out); the catalogue already has the new list.
    ResourcesChanged {
        /// The server.
        server: String,
    },
    /// A server's prompts changed (`notifications/prompts/list_changed`, or found on listing
    /// them again once their `ttlMs` ran out).
    PromptsChanged {
        /// The server.
        server: String,
    },
    /// A resource subscribed to with `Request::subscribe` changed
    /// (`notifications/resources/updated`).
    ResourceUpdated {
        /// The server.
        server: String,
        /// The resource.
        uri: String,
    },
    /// A server says the interaction it sent the person to with a URL-mode elicitation has
    /// finished (`notifications/elicitation/complete`).
    ElicitationComplete {
        /// The server.
        server: String,
        /// The `elicitationId` of its request.
        id: String,
    },
    /// A running server ended by itself.
    Failed {
        /// The server.
        server: String,
        /// Its exit status and last stderr lines.
        reason: String,
    },
    /// This listener fell behind: it holds the newest 256 events, and this many older ones
    /// were dropped to make room. Comes before the events it still holds, which follow in
    /// order. A missed list change is not lost for good: the catalogue is always current, so
    /// read it again.
    Lagged {
        /// How many events were dropped since it last took one.
        missed: u64,
    },
}

/// Many servers under one config and one policy. Cheap to clone; every clone is the same hub.
#[derive(Clone, Debug)]
pub struct Hub {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    slots: RwLock<BTreeMap<String, Arc<Slot>>>,
    /// The entries the host held back, shown and never started.
    pending: RwLock<Vec<Pending>>,
    policy: Policy,
    pins: pins::Pins,
    scans: scanning::Scans,
    /// The cached era verdicts.
    pub(crate) eras: eras::Eras,
    /// The catalogue on disk.
    pub(crate) stored: stored::Stored,
    /// The task records.
    pub(crate) tasks: tasks::Records,
    settings: Settings,
    stopping: AtomicBool,
    listeners: Mutex<Vec<events::Listener>>,
    /// Never sent on: dropped with the hub, which ends every watcher waiting on `gone`.
    _alive: Sender<()>,
    gone: Receiver<()>,
    /// Where the hub's tasks run: the host's executor, or the hub's own.
    executor: Arc<Executor<'static>>,
    /// Why the hub's own executor has no thread, if it could not get one: then no server
    /// starts, rather than one whose driver nobody would run.
    pub(crate) no_thread: Option<String>,
    /// Counts the progress tokens of the hub's calls.
    progress_tokens: std::sync::atomic::AtomicU64,
    /// Each server's listing as last looked up in.
    looked: Mutex<BTreeMap<String, Arc<catalogue::Looked>>>,
    /// The tools' output schemas, compiled once per listing.
    validators: validate::Validators,
    /// The tools found before, while nothing their finding stands on changed.
    found: found::Found,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("servers", &self.slots().len())
            .finish_non_exhaustive()
    }
}

/// Whether `slot` is one of the servers used when none are named: every usable configured
/// one, or the presets when nothing is configured (`configured` says which).
fn is_default(slot: &Slot, configured: bool) -> bool {
    (!configured || slot.server.source != Source::Preset) && slot.spec().is_ok()
}

/// An executor for a hub whose host brings none, run on a thread of its own until the hub is
/// dropped and every task on it (a server still closing) has finished.
fn own_executor(gone: Receiver<()>) -> (Arc<Executor<'static>>, Option<String>) {
    let executor = Arc::new(Executor::new());
    let running = executor.clone();
    let run = move || {
        let until_done = async {
            let _ = gone.recv().await;
            while !running.is_empty() {
                async_io::Timer::after(Duration::from_millis(20)).await;
            }
        };
        async_io::block_on(running.run(until_done));
    };
    let thread = std::thread::Builder::new().name("mcp-cli-hub".to_owned());
    let started = thread.spawn(run);
    (executor, started.err().map(|error| error.to_string()))
}

impl Hub {
    /// A hub for the servers and policy of `config`. Nothing starts until it is used.
    pub fn new(config: Config, settings: Settings) -> Self {
        let Config {
            servers,
            policy,
            pending,
        } = config;
        let (alive, gone) = async_channel::bounded(1);
        let (executor, no_thread) = match &settings.executor {
            Some(executor) => (executor.clone(), None),
            None => own_executor(gone.clone()),
        };
        let inner = Arc::new(Inner {
            slots: RwLock::new(BTreeMap::new()),
            pending: RwLock::new(pending),
            policy,
            pins: pins::Pins::new(settings.pin_dir.clone()),
            scans: scanning::Scans::new(settings.pin_dir.clone()),
            eras: eras::Eras::new(settings.era_file.clone()),
            stored: stored::Stored::new(settings.catalogue_dir.clone()),
            tasks: tasks::Records::new(settings.task_dir.clone()),
            settings,
            stopping: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
            looked: Mutex::default(),
            _alive: alive,
            gone,
            executor,
            no_thread,
            progress_tokens: std::sync::atomic::AtomicU64::new(0),
            validators: validate::Validators::default(),
            found: found::Found::default(),
        });
        let hub = Self { inner };
        for server in servers {
            hub.add(server);
        }
        hub
    }

    /// Adds a server (or replaces the one of that name, if it is not running).
    pub fn add(&self, mut server: Server) {
        let mut slots = self
            .inner
            .slots
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let others = slots.keys().map(String::as_str);
        if let Some(reason) = names::server_name_clash(&server.name, others) {
            let command = server.entry.command_line();
            server.entry = crate::config::Entry::Invalid { reason, command };
        }
        let denied = self.inner.policy.server_denied(&server);
        let slot = Arc::new(Slot::new(server, denied));
        // A server replaced while it runs is closed, not left behind.
        let old = slots.insert(slot.name().to_owned(), slot);
        self.inner.found.changed();
        if let Some(old) = old
            && let Some(closing) = old.stop()
        {
            self.inner
                .spawn(async move { closing.close(false).await })
                .detach();
        }
    }

    /// The entries the config held back ([`Config::pending`]): they never start.
    pub fn pending(&self) -> Vec<Pending> {
        (self.inner.pending.read())
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every server's status, by name, then the entries held back; starts nothing.
    pub fn status(&self) -> Vec<ServerStatus> {
        let pending = self.pending();
        let pending = pending.iter().map(pending_status);
        (self.inner.slots().iter())
            .map(|slot| {
                let mut status = slot.status();
                status.protocol = slot.protocol(&self.inner.eras);
                status.era = status.protocol.as_deref().and_then(Era::of);
                // As `tools` counts them, not as the server sent them.
                if status.tools.is_some() {
                    status.tools = self.shown_count(&status.name);
                }
                status.catalogue_age = self.stored_age(&status.name).map(|age| age.as_secs());
                status
            })
            .chain(pending)
            .collect()
    }

    /// The servers the whole catalogue stands for: every configured one that may start
    /// (not disabled, denied, invalid or remote), and the presets only when no file defines
    /// any server (entries waiting for approval count).
    pub fn default_servers(&self) -> Vec<String> {
        let (slots, configured) = self.slots_and_whether_configured();
        (slots.values())
            .filter(|slot| is_default(slot, configured))
            .map(|slot| slot.name().to_owned())
            .collect()
    }

    /// Whether `server` (a configured name) is one of the
    /// [`default_servers`](Self::default_servers); asked on every call a gateway relays.
    #[cfg(feature = "cli")]
    pub(crate) fn is_default_server(&self, server: &str) -> bool {
        let (slots, configured) = self.slots_and_whether_configured();
        (slots.get(server)).is_some_and(|slot| is_default(slot, configured))
    }

    /// The slots, and whether any server is configured in a file (presets stand for the
    /// catalogue only when none is).
    fn slots_and_whether_configured(
        &self,
    ) -> (RwLockReadGuard<'_, BTreeMap<String, Arc<Slot>>>, bool) {
        let slots = (self.inner.slots.read()).unwrap_or_else(PoisonError::into_inner);
        // An entry waiting for approval was configured too: the presets do not stand in
        // for a folder's servers that wait.
        let waiting = !(self.inner.pending.read())
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        let configured =
            waiting || (slots.values()).any(|slot| slot.server.source != Source::Preset);
        (slots, configured)
    }

    /// The configured name that `given` stands for: the exact name, else the one whose
    /// provider-safe form (as tool names show it) is `given`.
    pub fn resolve(&self, given: &str) -> Result<String, HubError> {
        if (self
            .inner
            .slots
            .read()
            .unwrap_or_else(PoisonError::into_inner))
        .contains_key(given)
        {
            return Ok(given.to_owned());
        }
        let slots = self.inner.slots();
        let matching: Vec<String> = (slots.iter())
            .filter(|slot| names::safe(slot.name()) == given)
            .map(|slot| slot.name().to_owned())
            .collect();
        let pending = self.pending();
        let held = (pending.iter())
            .find(|p| p.server.name == given || names::safe(&p.server.name) == given);
        match <[String; 1]>::try_from(matching) {
            Ok([name]) => Ok(name),
            Err(matching) if matching.is_empty() && held.is_some() => {
                let status = pending_status(held.expect("checked"));
                Err(HubError::Unavailable {
                    server: status.name,
                    state: State::Pending,
                    reason: status.reason.unwrap_or_default(),
                })
            }
            Err(matching) if matching.is_empty() => Err(HubError::UnknownServer {
                given: given.to_owned(),
                known: slots.iter().map(|slot| slot.name().to_owned()).collect(),
            }),
            Err(candidates) => Err(HubError::AmbiguousServer {
                given: given.to_owned(),
                candidates,
            }),
        }
    }

    /// The OAuth settings of remote server `remote`: the hub's ([`Settings::auth`]), then the
    /// entry's own client and scopes over them.
    pub fn auth_settings(&self, remote: &crate::config::Remote) -> crate::auth::Settings {
        slot::auth_settings(remote, &self.inner.settings.auth)
    }

    /// Server `given`'s name and remote settings, for a login to it; `None` for a server
    /// that is not remote.
    pub fn remote(&self, given: &str) -> Result<(String, Option<crate::config::Remote>), HubError> {
        let name = self.resolve(given)?;
        let slot = self.inner.slot(&name)?;
        let remote = match &slot.server.entry {
            crate::config::Entry::Enabled(spec) | crate::config::Entry::Disabled(spec) => {
                spec.remote.clone()
            }
            crate::config::Entry::Invalid { .. } => {
                return Err(slot.spec().err().unwrap_or(HubError::UnknownServer {
                    given: given.to_owned(),
                    known: Vec::new(),
                }));
            }
        };
        Ok((name, remote))
    }

    /// The servers a command names: each given name resolved and checked usable, or the
    /// [`default_servers`](Self::default_servers) when none is given.
    pub fn named_or_default(&self, given: &[String]) -> Result<Vec<String>, HubError> {
        if given.is_empty() {
            return Ok(self.default_servers());
        }
        (given.iter())
            .map(|name| {
                let server = self.resolve(name)?;
                self.check(&server)?;
                Ok(server)
            })
            .collect()
    }

    /// Server `server`'s settings as configured (`max_result_bytes`, `validate_output`, ...).
    pub fn server_spec(&self, server: &str) -> Result<ServerSpec, HubError> {
        self.inner.slot(server)?.spec().cloned()
    }

    /// Makes the next lookup of each server's tools read its pin file afresh, however recently
    /// one did: a long-lived hub (the daemon's) about to run a new command line, which may
    /// follow a `trust` run elsewhere.
    #[cfg(feature = "cli")]
    pub(crate) fn look_at_pins_again(&self) {
        self.inner.pins.look_again();
        self.inner.found.changed();
    }

    /// Whether `server` can be used at all (not disabled, denied, invalid or remote); starts
    /// nothing.
    pub fn check(&self, server: &str) -> Result<(), HubError> {
        self.inner.slot(server)?.spec().map(|_| ())
    }

    /// Starts `servers` (those not running yet) in parallel, each within its own budget;
    /// one that fails is recorded and does not stop the others. Returns each one's outcome.
    pub async fn start(&self, servers: &[String]) -> Vec<(String, Result<(), HubError>)> {
        let started = self.start_listing(servers, false).await;
        (started.into_iter())
            .map(|(name, started, _)| (name, started))
            .collect()
    }

    /// Starts `servers` as [`start`](Self::start) does and, with `features`, lists the
    /// resources and prompts of each one that started, in the same parallel tasks. A caller
    /// that stops waiting leaves them running: a start half done goes on to its end.
    async fn start_listing(&self, servers: &[String], features: bool) -> Vec<Listed> {
        let tasks: Vec<Finishing<Listed>> = (servers.iter())
            .map(|name| {
                let inner = self.inner.clone();
                let name = name.clone();
                self.inner.spawn(async move {
                    let slot = match inner.slot(&name) {
                        Ok(slot) => slot,
                        Err(error) => return (name, Err(error), None),
                    };
                    if let Err(error) = slot.listed(&inner).await {
                        return (name, Err(error), None);
                    }
                    let listed = if features {
                        Some(slot.features(&inner).await)
                    } else {
                        None
                    };
                    (name, Ok(()), listed)
                })
            })
            .map(|task| Finishing(Some(task)))
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await);
        }
        outcomes
    }

    /// Starts the server if it must, and forgets earlier failures: after too many restarts
    /// a server waits for this before it starts again.
    pub async fn restart(&self, server: &str) -> Result<(), HubError> {
        let slot = self.inner.slot(server)?;
        slot.reset();
        slot.ensure_running(&self.inner).await.map(|_| ())
    }

    /// Listens to what happens from now on: tool list changes, crashes. The receiver holds
    /// the newest 256 events; one that falls behind loses the oldest, and its next receive
    /// is [`HubEvent::Lagged`] with how many, then the events it holds. Dropping the
    /// receiver stops the listening.
    pub fn events(&self) -> Events {
        let (listener, events) = events::listen();
        (self
            .inner
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner))
        .push(listener);
        events
    }

    /// Closes every server in parallel (stdin, grace period, SIGTERM, SIGKILL); starts
    /// nothing afterwards. A server that ignores its closed stdin costs up to
    /// [`Settings::grace_period`] and [`Settings::term_period`] (2 s and 500 ms by default):
    /// server-everything with a cancelled long-running call waits out the whole grace.
    /// [`terminate`](Self::terminate) stops them at once.
    pub async fn shutdown(&self) {
        self.stop_all(false).await;
    }

    /// Stops every server now and in parallel, without the grace period: for a program that
    /// is itself being stopped.
    pub async fn terminate(&self) {
        self.stop_all(true).await;
    }

    async fn stop_all(&self, now: bool) {
        // Set before the slots are read: a start either sees it or is seen.
        self.inner.stopping.store(true, Ordering::SeqCst);
        let stops: Vec<_> = (self.inner.slots().into_iter())
            .filter_map(|slot| slot.stop())
            .map(|closing| self.inner.spawn(closing.close(now)))
            .collect();
        for stop in stops {
            stop.await;
        }
    }
}

/// A task that runs to its end even when whoever awaits it stops waiting (an
/// `async_executor::Task` dropped is cancelled).
struct Finishing<T>(Option<async_executor::Task<T>>);

impl<T> Future for Finishing<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.0.as_mut() {
            Some(task) => Pin::new(task).poll(cx),
            None => Poll::Pending,
        }
    }
}

impl<T> Drop for Finishing<T> {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.detach();
        }
    }
}

/// One server's start, and its resources and prompts when they were asked for.
type Listed = (
    String,
    Result<(), HubError>,
    Option<Result<Arc<features::Features>, HubError>>,
);

impl Inner {
    fn slots(&self) -> Vec<Arc<Slot>> {
        let slots = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        slots.values().cloned().collect()
    }

    fn slot(&self, name: &str) -> Result<Arc<Slot>, HubError> {
        let slots = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        slots
            .get(name)
            .cloned()
            .ok_or_else(|| HubError::UnknownServer {
                given: name.to_owned(),
                known: slots.keys().cloned().collect(),
            })
    }

    /// What `spec`'s listings are kept under in the catalogue on disk.
    pub(crate) fn catalogue_key(&self, spec: &ServerSpec) -> String {
        stored::key(spec, self.settings.elicit.is_some())
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub(crate) fn options(
        &self,
        spec: &ServerSpec,
        protocol: mcp_smol::proto::Protocol,
    ) -> (mcp_smol::Options, Option<RunLog>) {
        options::for_server(spec, &self.settings, protocol)
    }

    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> async_executor::Task<T> {
        self.executor.spawn(task)
    }

    /// Runs a task that follows one connection (its notifications, its requests) until the
    /// connection ends or the hub is dropped: such a task holds a handle, and a hub dropped
    /// without [`Hub::shutdown`] must still let its servers close.
    pub(crate) fn spawn_watcher(&self, task: impl Future<Output = ()> + Send + 'static) {
        let gone = self.gone.clone();
        let until_gone = async move {
            let _ = gone.recv().await;
        };
        self.spawn(futures_lite::future::or(task, until_gone))
            .detach();
    }

    /// A number for the next call's progress token, never used twice by this hub.
    pub(crate) fn next_progress_token(&self) -> u64 {
        self.progress_tokens.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn emit(&self, event: HubEvent) {
        let mut listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A listener that went away is forgotten; one that fell behind drops its oldest.
        listeners.retain(|listener| !listener.is_gone());
        for listener in listeners.iter() {
            listener.send(&event);
        }
    }
}
