//! One configured server's life in the hub: started on first use, watched while it runs,
//! restarted with backoff after a crash, and given up on after too many restarts a minute.
//!
//! Beside it, in `slot/`:
//!
//! - `connect.rs`: how a slot starts its server and connects to it

use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures_lite::FutureExt;
use mcp_smol::Client;
use mcp_smol::proto::{ListenFilter, Notification, Protocol, Tool};

use crate::config::{Entry, Server, ServerSpec};
use crate::hub::cache::Freshness;
use crate::hub::eras;
use crate::hub::features::Features;
use crate::hub::listen::Listening;
use crate::hub::options::{self, Basis};
use crate::hub::proxy::InFlight;
use crate::hub::stored::Judged;
use crate::hub::{HubError, HubEvent, Inner, ServerStatus, State};

mod connect;

pub(crate) use connect::auth_settings;
use connect::list_tools;

/// At most this many restarts in a minute; after that the server stays `failed` until
/// [`Hub::restart`](crate::hub::Hub::restart).
pub(crate) const MAX_RESTARTS: usize = 3;

/// The wait before the Nth restart within a minute: the first is immediate, so a crash costs
/// an interactive user nothing, and a server that keeps crashing is not spun on.
const BACKOFF: [Duration; MAX_RESTARTS] = [
    Duration::ZERO,
    Duration::from_millis(250),
    Duration::from_secs(1),
];

const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// Numbers connections, so that news of an old one (which may share pid 0 with the new one
/// over HTTP) never lands on its successor.
static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

/// A listing of a server's tools, what was judged of them and until when it may be used.
type Listed = (Arc<Vec<Tool>>, Arc<Judged>, Freshness);

/// A connection that finished its handshake, with the tools it offers (policy not applied)
/// and, once something needed them, its resources and prompts.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub(crate) client: Client,
    /// This connection's number, from [`CONNECTIONS`].
    conn: u64,
    /// The revision it speaks.
    protocol: String,
    /// Whether a tool call asks to be a task with the `task` parameter: a handshake-era
    /// server that declared tasks for calls (a stateless one decides itself). Kept here so
    /// that a call need not ask the driver for the server's info.
    pub(crate) asks_for_tasks: bool,
    pub(crate) tools: Arc<Vec<Tool>>,
    /// What was judged of `tools` as they were listed (their digests and scans), kept with
    /// them in the catalogue on disk and used in place of judging them again.
    judged: Arc<Judged>,
    /// Until when `tools` may be used without listing them again.
    tools_fresh: Freshness,
    /// Its `subscriptions/listen`, in the stateless era.
    listening: Option<Listening>,
    /// Listed on first need ([`Slot::features`]): a command that only calls tools does not
    /// wait for lists it never shows.
    features: Option<Arc<Features>>,
    /// Its tool calls under way, which the proxy names when it refuses a connection.
    pub(crate) calls: Arc<InFlight>,
    /// The forms of calls' input rounds declined or dismissed so far
    /// ([`Answers::declined`](crate::hub::server_requests::Answers)).
    pub(crate) declined: Arc<std::sync::atomic::AtomicU64>,
}

enum Phase {
    Stopped,
    /// Spawned, handshake or first listing under way; `restart` once it has run before.
    Starting {
        client: Option<Client>,
        restart: bool,
    },
    Running(Live),
    Failed {
        reason: String,
        stderr: Vec<String>,
        /// A remote server refused us for want of a login.
        needs_auth: bool,
    },
}

/// What the first listing of a connection owes: someone was given a catalogue without this
/// server's tools (or its resources and prompts) while it was starting, so the first listing
/// is a change for them, told as one.
#[derive(Debug, Default, Clone, Copy)]
struct Owed {
    tools: bool,
    features: bool,
}

struct Life {
    phase: Phase,
    owed: Owed,
    /// When each restart of the last minute happened.
    restarts: VecDeque<Instant>,
    /// Too many restarts: no more until asked explicitly.
    gave_up: bool,
    /// The server has been started at least once, so the next start is a restart.
    started_before: bool,
}

pub(crate) struct Slot {
    pub(crate) server: Server,
    /// Why the policy keeps it from starting, if it does.
    pub(crate) denied: Option<String>,
    /// Held while starting or refreshing, so concurrent users wait for one start.
    start: async_lock::Mutex<()>,
    life: Mutex<Life>,
}

impl Slot {
    pub(crate) fn new(server: Server, denied: Option<String>) -> Self {
        Self {
            server,
            denied,
            start: async_lock::Mutex::new(()),
            life: Mutex::new(Life {
                phase: Phase::Stopped,
                owed: Owed::default(),
                restarts: VecDeque::new(),
                gave_up: false,
                started_before: false,
            }),
        }
    }

    fn life(&self) -> MutexGuard<'_, Life> {
        // The state stays consistent whatever panicked while holding the lock.
        self.life.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn name(&self) -> &str {
        &self.server.name
    }

    /// The spec to start, or why this entry can never start.
    pub(crate) fn spec(&self) -> Result<&ServerSpec, HubError> {
        let unavailable = |state: State, reason: String| HubError::Unavailable {
            server: self.server.name.clone(),
            state,
            reason,
        };
        if let Some(reason) = &self.denied {
            return Err(unavailable(State::Denied, reason.clone()));
        }
        match &self.server.entry {
            Entry::Enabled(spec) => Ok(spec),
            Entry::Disabled(_) => Err(unavailable(
                State::Disabled,
                "disabled in the config".to_owned(),
            )),
            Entry::Invalid { reason, .. } => Err(unavailable(State::Invalid, reason.clone())),
        }
    }

    /// What `servers` shows: the truth at this moment (a server that has just died is
    /// `failed`, not `running`).
    pub(crate) fn status(&self) -> ServerStatus {
        let server = &self.server;
        let mut status = ServerStatus::of(server, State::Stopped);
        if let Err(HubError::Unavailable { state, reason, .. }) = self.spec() {
            status.state = state;
            status.reason = (state != State::Disabled).then_some(reason);
            return status;
        }
        let life = self.life();
        match &life.phase {
            Phase::Stopped => {}
            Phase::Starting { client, restart } => {
                status.state = if *restart {
                    State::Restarting
                } else {
                    State::Starting
                };
                status.pid = client.as_ref().map(Client::pid).filter(|pid| *pid != 0);
            }
            Phase::Running(live) => match live.client.disconnect() {
                None => {
                    status.state = State::Running;
                    status.pid = Some(live.client.pid()).filter(|pid| *pid != 0);
                    status.tools = Some(live.tools.len());
                }
                Some(disconnect) => {
                    status.state = State::Failed;
                    status.reason = Some(disconnect.to_string());
                }
            },
            Phase::Failed {
                reason,
                stderr,
                needs_auth,
            } => {
                status.state = if *needs_auth {
                    State::NeedsAuth
                } else {
                    State::Failed
                };
                status.reason = Some(reason.clone());
                status.stderr = stderr.clone();
            }
        }
        status
    }

    /// The running connection, starting (or restarting) the server first if needed.
    pub(crate) async fn ensure_running(
        self: &Arc<Self>,
        hub: &Arc<Inner>,
    ) -> Result<Live, HubError> {
        // Every call comes here: a running server is answered at once, and the future of a
        // start (kilobytes of state) is boxed, not carried by every call's.
        self.spec()?;
        if let Phase::Running(live) = &self.life().phase
            && live.client.disconnect().is_none()
        {
            return Ok(live.clone());
        }
        Box::pin(self.start_if_needed(hub)).await
    }

    async fn start_if_needed(self: &Arc<Self>, hub: &Arc<Inner>) -> Result<Live, HubError> {
        let spec = self.spec()?;
        let _starting = self.start.lock().await;
        let backoff = {
            let mut life = self.life();
            if let Phase::Running(live) = &life.phase {
                match live.client.disconnect() {
                    None => return Ok(live.clone()),
                    Some(disconnect) => {
                        life.phase = Phase::Failed {
                            reason: disconnect.to_string(),
                            stderr: disconnect.stderr.clone(),
                            needs_auth: false,
                        }
                    }
                }
            }
            self.plan_start(&mut life)?
        };
        if !backoff.is_zero() {
            async_io::Timer::after(backoff).await;
        }
        let started = match self.start(hub, spec).await {
            Err(HubError::Server {
                server,
                error: error @ mcp_smol::Error::Disconnected(_),
            }) => Err(launcher_refused(spec, server, error)),
            started => started,
        };
        // A listing kept on disk may have been served for this server before it started: if
        // the server now lists other tools, that is a list change.
        let differs = (started.as_ref()).is_ok_and(|live| self.store_tools(hub, live));
        let mut life = self.life();
        match started {
            Ok(live) => {
                life.phase = Phase::Running(live.clone());
                // So is any listing to someone given none of it while this one started.
                let owed = std::mem::take(&mut life.owed.tools);
                drop(life);
                if differs || (owed && !live.tools.is_empty()) {
                    hub.emit(HubEvent::ToolsChanged {
                        server: self.name().to_owned(),
                    });
                }
                Ok(live)
            }
            Err(error) => {
                let stderr = match &error {
                    HubError::Server {
                        error: mcp_smol::Error::Disconnected(disconnect),
                        ..
                    }
                    | HubError::WrongProtocol {
                        error: mcp_smol::Error::Disconnected(disconnect),
                        ..
                    }
                    | HubError::LauncherCacheRefused {
                        error: mcp_smol::Error::Disconnected(disconnect),
                        ..
                    } => disconnect.stderr.clone(),
                    _ => Vec::new(),
                };
                let needs_auth = matches!(
                    error,
                    HubError::Server {
                        error: mcp_smol::Error::Unauthorized { .. },
                        ..
                    }
                );
                let reason = match &error {
                    HubError::Server { error, .. } => error.to_string(),
                    other => other.to_string(),
                };
                life.phase = Phase::Failed {
                    reason,
                    stderr,
                    needs_auth,
                };
                Err(error)
            }
        }
    }

    /// Decides whether a start may go ahead now and after what wait; counts restarts.
    fn plan_start(&self, life: &mut Life) -> Result<Duration, HubError> {
        let failed = |reason: String| HubError::Unavailable {
            server: self.server.name.clone(),
            state: State::Failed,
            reason,
        };
        if life.gave_up {
            let last = match &life.phase {
                Phase::Failed { reason, .. } => reason.clone(),
                _ => String::new(),
            };
            return Err(failed(format!(
                "restarted {MAX_RESTARTS} times within a minute, not again until asked; \
                 last failure: {last}"
            )));
        }
        let restart = life.started_before;
        let mut backoff = Duration::ZERO;
        if restart {
            let now = Instant::now();
            while (life.restarts.front()).is_some_and(|at| now.duration_since(*at) > RESTART_WINDOW)
            {
                life.restarts.pop_front();
            }
            if life.restarts.len() >= MAX_RESTARTS {
                life.gave_up = true;
                return self.plan_start(life);
            }
            backoff = BACKOFF[life.restarts.len()];
            life.restarts.push_back(now);
        }
        life.started_before = true;
        life.phase = Phase::Starting {
            client: None,
            restart,
        };
        Ok(backoff)
    }

    /// The resources and prompts of the running connection (starting the server if it must),
    /// listed the first time they are asked for; later list changes refresh them.
    pub(crate) async fn features(
        self: &Arc<Self>,
        hub: &Arc<Inner>,
    ) -> Result<Arc<Features>, HubError> {
        let live = self.ensure_running(hub).await?;
        let fresh = |features: &Arc<Features>| !features.fresh.is_stale(Instant::now());
        if let Some(features) = live.features.filter(fresh) {
            return Ok(features);
        }
        // Held like a start, so that a list change's refresh and a second asker wait for this
        // listing instead of sending their own beside it.
        let _listing = self.start.lock().await;
        let held = self.listed_features(live.conn);
        if let Some(features) = held.clone().filter(fresh) {
            return Ok(features);
        }
        let listed = async {
            let info = live.client.wait_ready().await?;
            Features::list(&live.client, &info).await
        };
        match listed.await {
            Ok(features) => {
                let features = Arc::new(features);
                let current = self.set_features(live.conn, features.clone());
                let kept = match current {
                    true => self.store_features(hub, &features),
                    false => None,
                };
                // Listed again because the old listing's ttl ran out, or for the first time
                // since one kept on disk may have been served, or none was to someone who
                // could not wait: what differs is a list change the server had no way to
                // announce.
                let owed = current && self.take_owed_features();
                let before = (held.map(|held| (*held).clone()).or(kept))
                    .or_else(|| owed.then(Features::default));
                if current && let Some(before) = before {
                    for event in before.changes(&features, self.name()) {
                        hub.emit(event);
                    }
                }
                Ok(features)
            }
            Err(error) => Err(HubError::Server {
                server: self.server.name.clone(),
                error,
            }),
        }
    }

    /// The running connection (starting the server if it must) with its tools fresh: listed
    /// again first if their cache hint has run out.
    pub(crate) async fn listed(self: &Arc<Self>, hub: &Arc<Inner>) -> Result<Live, HubError> {
        let live = self.ensure_running(hub).await?;
        if !live.tools_fresh.is_stale(Instant::now()) {
            return Ok(live);
        }
        Box::pin(self.list_again(hub, live)).await
    }

    /// [`listed`](Self::listed) when the listing `live` holds is stale.
    async fn list_again(self: &Arc<Self>, hub: &Arc<Inner>, live: Live) -> Result<Live, HubError> {
        let _listing = self.start.lock().await;
        let live = match &self.life().phase {
            Phase::Running(now) if now.conn == live.conn => now.clone(),
            // Gone meanwhile: the next use starts it again.
            _ => return Ok(live),
        };
        if !live.tools_fresh.is_stale(Instant::now()) {
            return Ok(live);
        }
        let (tools, fresh) = list_tools(&live.client)
            .await
            .map_err(|error| HubError::Server {
                server: self.server.name.clone(),
                error,
            })?;
        let judged = Arc::new(hub.judged(self.name(), &tools));
        let listed = (Arc::new(tools), judged, fresh);
        let Some((changed, now)) = self.set_tools(live.conn, listed.clone()) else {
            // Gone meanwhile: this listing is still the one asked for.
            let (tools, judged, tools_fresh) = listed;
            return Ok(Live {
                tools,
                judged,
                tools_fresh,
                ..live
            });
        };
        self.store_tools(hub, &now);
        // What differs is a list change the server had no way to announce.
        if changed {
            hub.emit(HubEvent::ToolsChanged {
                server: self.name().to_owned(),
            });
        }
        Ok(now)
    }

    /// Keeps `live`'s listing of this server's tools, what was judged of them and those its
    /// client rejected, in the catalogue on disk; returns whether the listing kept before
    /// held other tools.
    fn store_tools(&self, hub: &Inner, live: &Live) -> bool {
        let Ok(spec) = self.spec() else { return false };
        let rejected = (live.client.rejected_tools().into_iter())
            .map(|rejected| (rejected.name, rejected.reason.to_string()))
            .collect();
        let key = hub.catalogue_key(spec);
        let listed = (live.tools.clone(), rejected, live.client.capped::<Tool>());
        let (judged, fresh) = (live.judged.clone(), live.tools_fresh);
        (hub.stored).save_tools(&key, listed, judged, fresh, SystemTime::now())
    }

    /// Keeps a listing of this server's resources and prompts, as [`store_tools`] does;
    /// returns the one kept before.
    ///
    /// [`store_tools`]: Self::store_tools
    fn store_features(&self, hub: &Inner, features: &Features) -> Option<Features> {
        let spec = self.spec().ok()?;
        (hub.stored).save_features(&hub.catalogue_key(spec), features, SystemTime::now())
    }

    /// Records that a catalogue without this server's listing was given out, with `features`
    /// its resources and prompts too, because its start was not waited for: its first
    /// listing is told as a change. Told at once for what is listed already.
    pub(crate) fn owe_listing(&self, hub: &Inner, features: bool) {
        let listed = {
            let mut life = self.life();
            match &life.phase {
                Phase::Running(live) if live.client.disconnect().is_none() => {
                    let listed = (live.tools.clone(), live.features.clone());
                    life.owed.features |= features && listed.1.is_none();
                    Some(listed)
                }
                _ => {
                    life.owed.tools = true;
                    life.owed.features |= features;
                    None
                }
            }
        };
        let Some((tools, listed_features)) = listed else {
            return;
        };
        if !tools.is_empty() {
            hub.emit(HubEvent::ToolsChanged {
                server: self.name().to_owned(),
            });
        }
        if let Some(listed) = listed_features.filter(|_| features) {
            for event in Features::default().changes(&listed, self.name()) {
                hub.emit(event);
            }
        }
    }

    /// Whether the resources and prompts the running connection lists next are owed as a
    /// change ([`owe_listing`](Self::owe_listing)); no longer once asked.
    fn take_owed_features(&self) -> bool {
        std::mem::take(&mut self.life().owed.features)
    }

    /// Forgets the restart count: the next use starts the server again even after it gave up.
    pub(crate) fn reset(&self) {
        let mut life = self.life();
        life.gave_up = false;
        life.restarts.clear();
    }

    /// Connects in the revision [`options::choose`] picks, and again as
    /// [`options::after_failure`] says when that fails; a verdict found is cached.
    async fn start(
        self: &Arc<Self>,
        hub: &Arc<Inner>,
        spec: &ServerSpec,
    ) -> Result<Live, HubError> {
        let key = eras::key(spec);
        let (cached, mut note) = match hub.eras.get(&key, SystemTime::now()) {
            Ok(cached) => (cached, None),
            Err(note) => (None, Some(note)),
        };
        let (mut protocol, mut basis) = options::choose(spec.protocol, cached);
        loop {
            let error = match self.connect(hub, spec, protocol, note.take()).await {
                Ok(live) => {
                    if basis.is_verdict() {
                        hub.eras.record(&key, &live.protocol, SystemTime::now());
                    }
                    return Ok(live);
                }
                Err(error) => error,
            };
            let reason = match &error {
                HubError::Server {
                    error: mcp_smol::Error::Disconnected(disconnect),
                    ..
                } => Some(&disconnect.reason),
                _ => None,
            };
            let next = reason.and_then(|reason| {
                let next = options::after_failure(basis, protocol, reason)?;
                Some((next, options::handshake_after(next.0, reason)))
            });
            let Some((next, handshake_note)) = next else {
                let mismatch = reason.is_some_and(|reason| options::era_mismatch(protocol, reason));
                return Err(match error {
                    HubError::Server { server, error }
                        if basis == Basis::Configured && mismatch =>
                    {
                        HubError::WrongProtocol {
                            server,
                            configured: protocol.to_string(),
                            error,
                        }
                    }
                    error => error,
                });
            };
            if basis == Basis::Cached {
                hub.eras.forget(&key);
            }
            (protocol, basis) = next;
            if basis == Basis::AfterProbe {
                note = Some(handshake_note);
            }
        }
    }

    /// The revision the running connection speaks, else the configured one, else the cached
    /// verdict while it is trusted.
    pub(crate) fn protocol(&self, eras: &eras::Eras) -> Option<String> {
        if let Phase::Running(live) = &self.life().phase {
            return Some(live.protocol.clone());
        }
        let spec = self.spec().ok()?;
        match spec.protocol {
            Protocol::Revision(revision) => Some(revision.to_owned()),
            Protocol::Auto => {
                let cached = eras.get(&eras::key(spec), SystemTime::now());
                cached.ok().flatten().map(str::to_owned)
            }
        }
    }

    /// How fresh the running connection's listings are: its tools, and with `features` its
    /// resources and prompts too (when listed); `None` when it is not running.
    pub(crate) fn freshness(&self, features: bool) -> Option<Freshness> {
        match &self.life().phase {
            Phase::Running(live) => {
                let listed = (live.features.as_ref()).filter(|_| features);
                Some(listed.map_or(live.tools_fresh, |f| live.tools_fresh.and(f.fresh)))
            }
            _ => None,
        }
    }

    /// Whether `listing` is the running connection's, fresh at `now`: what was found in it
    /// stands, as [`listed`](Self::listed) would give it again.
    pub(crate) fn still_lists(&self, listing: &Arc<Vec<Tool>>, now: Instant) -> bool {
        match &self.life().phase {
            Phase::Running(live) => {
                Arc::ptr_eq(&live.tools, listing)
                    && !live.tools_fresh.is_stale(now)
                    && live.client.disconnect().is_none()
            }
            _ => false,
        }
    }

    /// The tools of the running connection, if it is running and alive.
    pub(crate) fn client_tools(&self) -> Option<Arc<Vec<Tool>>> {
        self.client_listing().map(|(tools, _)| tools)
    }

    /// [`client_tools`](Self::client_tools), with what was judged of them as they were listed.
    pub(crate) fn client_listing(&self) -> Option<(Arc<Vec<Tool>>, Arc<Judged>)> {
        match &self.life().phase {
            Phase::Running(live) if live.client.disconnect().is_none() => {
                Some((live.tools.clone(), live.judged.clone()))
            }
            _ => None,
        }
    }

    /// The tools the running connection's last listing left out for invalid `x-mcp-header`
    /// annotations, as errors that say why, and the cap, had it listed more than
    /// `max_listed`.
    pub(crate) fn rejected_tools(&self) -> Vec<HubError> {
        let Phase::Running(live) = &self.life().phase else {
            return Vec::new();
        };
        let capped = (live.client.capped::<Tool>()).map(|cap| HubError::ListingCapped {
            server: self.name().to_owned(),
            list: "tool".to_owned(),
            cap,
        });
        (live.client.rejected_tools().into_iter())
            .map(|rejected| HubError::ToolRejected {
                server: self.name().to_owned(),
                tool: rejected.name,
                reason: rejected.reason.to_string(),
            })
            .chain(capped)
            .collect()
    }

    /// Marks the slot stopped, as the hub is about to close its connection on purpose;
    /// returns that connection, if one was running or starting.
    pub(crate) fn stop(&self) -> Option<Closing> {
        let mut life = self.life();
        let closing = match &life.phase {
            Phase::Running(live) => Some(Closing {
                client: live.client.clone(),
                listening: live.listening.clone(),
            }),
            Phase::Starting { client, .. } => client.clone().map(|client| Closing {
                client,
                listening: None,
            }),
            _ => None,
        };
        if closing.is_some() {
            life.phase = Phase::Stopped;
        }
        closing
    }

    /// The resources and prompts of connection `conn`, if it is still the running one and
    /// they have been listed.
    fn listed_features(&self, conn: u64) -> Option<Arc<Features>> {
        match &self.life().phase {
            Phase::Running(live) if live.conn == conn => live.features.clone(),
            _ => None,
        }
    }

    /// Whether connection `conn` is the running one.
    fn runs(&self, conn: u64) -> bool {
        matches!(&self.life().phase, Phase::Running(live) if live.conn == conn)
    }

    /// Replaces the resources and prompts of connection `conn`, if it is still the running
    /// one.
    fn set_features(&self, conn: u64, features: Arc<Features>) -> bool {
        let mut life = self.life();
        match &mut life.phase {
            Phase::Running(live) if live.conn == conn => {
                live.features = Some(features);
                true
            }
            _ => false,
        }
    }

    /// Replaces the tools of connection `conn`, what was judged of them and their freshness
    /// with `listed`, if it is still the running one (`None` if not); whether they changed,
    /// and the connection as it now is.
    fn set_tools(&self, conn: u64, listed: Listed) -> Option<(bool, Live)> {
        let mut life = self.life();
        match &mut life.phase {
            Phase::Running(live) if live.conn == conn => {
                let changed = live.tools != listed.0;
                (live.tools, live.judged, live.tools_fresh) = listed;
                Some((changed, live.clone()))
            }
            _ => None,
        }
    }

    /// Records that connection `conn` ended by itself; returns the reason if it was running.
    fn crashed(&self, conn: u64, client: &Client) -> Option<String> {
        let mut life = self.life();
        match &life.phase {
            Phase::Running(live) if live.conn == conn => {
                let disconnect = client.disconnect();
                let reason = disconnect
                    .as_ref()
                    .map_or_else(|| "the connection ended".to_owned(), ToString::to_string);
                let stderr = disconnect.map(|d| d.stderr).unwrap_or_default();
                life.phase = Phase::Failed {
                    reason: reason.clone(),
                    stderr,
                    needs_auth: false,
                };
                Some(reason)
            }
            _ => None,
        }
    }
}

/// Follows one connection's notifications: a tool list change refreshes the slot's tools, and
/// the end of the stream (the driver is gone) marks an unexpected end as a crash. `acks` brings
/// what each `subscriptions/listen` was acknowledged for (the stateless era): a change made
/// between the first listing and the acknowledgement was on no stream, so those lists are
/// listed again then, and a change is told only if there was one.
async fn watch(
    hub: std::sync::Weak<Inner>,
    slot: Arc<Slot>,
    client: Client,
    conn: u64,
    notes: async_channel::Receiver<Notification>,
    acks: async_channel::Receiver<ListenFilter>,
) {
    let server = || slot.name().to_owned();
    let emit = |event: HubEvent| {
        if let Some(hub) = hub.upgrade() {
            hub.emit(event);
        }
    };
    enum Heard {
        Note(Option<Notification>),
        Ack(Option<ListenFilter>),
    }
    // Once the listening ends, its end of `acks` is not waited on again.
    let mut acks = Some(acks);
    loop {
        let heard = match &acks {
            Some(acks) => {
                let note = async { Heard::Note(notes.recv().await.ok()) };
                note.or(async { Heard::Ack(acks.recv().await.ok()) }).await
            }
            None => Heard::Note(notes.recv().await.ok()),
        };
        let note = match heard {
            Heard::Note(Some(note)) => note,
            Heard::Note(None) => break,
            Heard::Ack(None) => {
                acks = None;
                continue;
            }
            Heard::Ack(Some(agreed)) => {
                let tools = agreed.tools_list_changed;
                if tools && refresh_tools(&hub, &slot, &client, conn).await == Some(true) {
                    emit(HubEvent::ToolsChanged { server: server() });
                }
                let features = agreed.resources_list_changed || agreed.prompts_list_changed;
                if let Some((resources, prompts)) = match features {
                    true => refresh_features(&hub, &slot, &client, conn).await,
                    false => None,
                } {
                    if resources {
                        emit(HubEvent::ResourcesChanged { server: server() });
                    }
                    if prompts {
                        emit(HubEvent::PromptsChanged { server: server() });
                    }
                }
                continue;
            }
        };
        if let Some(uri) = note.resource_updated() {
            let uri = uri.to_owned();
            emit(HubEvent::ResourceUpdated {
                server: server(),
                uri,
            });
            continue;
        }
        if let Some(event) = super::server_requests::elicitation_complete(&note, server) {
            emit(event);
            continue;
        }
        let features_changed = match note.method.as_str() {
            Notification::RESOURCES_LIST_CHANGED => {
                Some(HubEvent::ResourcesChanged { server: server() })
            }
            Notification::PROMPTS_LIST_CHANGED => {
                Some(HubEvent::PromptsChanged { server: server() })
            }
            _ => None,
        };
        if let Some(event) = features_changed {
            let refreshed = match slot.listed_features(conn) {
                Some(_) => refresh_features(&hub, &slot, &client, conn).await.is_some(),
                // Never listed: the first to ask lists the new ones.
                None => slot.runs(conn),
            };
            if refreshed {
                emit(event);
            }
            continue;
        }
        if note.method == Notification::TOOLS_LIST_CHANGED
            && refresh_tools(&hub, &slot, &client, conn).await.is_some()
        {
            emit(HubEvent::ToolsChanged { server: server() });
        }
    }
    let Some(hub) = hub.upgrade() else { return };
    if hub.is_stopping() {
        return;
    }
    if let Some(reason) = slot.crashed(conn, &client) {
        hub.emit(HubEvent::Failed {
            server: slot.name().to_owned(),
            reason,
        });
    }
}

/// Lists connection `conn`'s tools again and keeps them: `None` if it is no longer the
/// running one (or the listing failed: the connection is failing, its stream ends next), else
/// whether they changed.
async fn refresh_tools(
    hub: &std::sync::Weak<Inner>,
    slot: &Slot,
    client: &Client,
    conn: u64,
) -> Option<bool> {
    let _refreshing = slot.start.lock().await;
    let (tools, fresh) = list_tools(client).await.ok()?;
    // The hub gone, nobody is left to tell.
    let hub = hub.upgrade()?;
    let judged = Arc::new(hub.judged(slot.name(), &tools));
    let (changed, live) = slot.set_tools(conn, (Arc::new(tools), judged, fresh))?;
    slot.store_tools(&hub, &live);
    Some(changed)
}

/// Lists connection `conn`'s resources and prompts again, if they were listed before, and
/// keeps them: `None` if they were not, or it is no longer the running one; else whether the
/// resources (or templates) and whether the prompts changed.
async fn refresh_features(
    hub: &std::sync::Weak<Inner>,
    slot: &Slot,
    client: &Client,
    conn: u64,
) -> Option<(bool, bool)> {
    let _refreshing = slot.start.lock().await;
    let before = slot.listed_features(conn)?;
    let info = client.wait_ready().await.ok()?;
    let features = Arc::new(Features::list(client, &info).await.ok()?);
    if !slot.set_features(conn, features.clone()) {
        return None;
    }
    if let Some(hub) = hub.upgrade() {
        slot.store_features(&hub, &features);
    }
    let resources =
        before.resources != features.resources || before.templates != features.templates;
    Some((resources, before.prompts != features.prompts))
}

/// A connection the hub closes on purpose.
pub(crate) struct Closing {
    client: Client,
    listening: Option<Listening>,
}

impl Closing {
    /// Cancels its subscription, then closes it: with the grace period, or at once (`now`,
    /// [`Client::terminate`]).
    pub(crate) async fn close(self, now: bool) {
        if let Some(listening) = &self.listening {
            listening.stop().await;
        }
        if now {
            self.client.terminate().await;
        } else {
            self.client.close().await;
        }
    }
}

/// A start that failed as a confined launcher does when refused its cache: the error that
/// names the folder; any other failure as it is.
fn launcher_refused(spec: &ServerSpec, server: String, error: mcp_smol::Error) -> HubError {
    let mcp_smol::Error::Disconnected(disconnect) = &error else {
        return HubError::Server { server, error };
    };
    match crate::hub::sandbox::refused_cache(&spec.command, &disconnect.stderr) {
        Some(folder) => HubError::LauncherCacheRefused {
            server,
            launcher: (std::path::Path::new(&spec.command.program).file_name())
                .map_or_else(String::new, |name| name.to_string_lossy().into_owned()),
            folder,
            error,
        },
        None => HubError::Server { server, error },
    }
}
