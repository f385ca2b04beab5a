//! How a slot starts its server: the program or the remote endpoint it is, the handshake,
//! the roots a server asks for first, and the first listing of its tools.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcp_smol::proto::{Listing, Notification, Protocol, Tool};
use mcp_smol::{Client, HttpServer, HttpTransport, ServerCommand};

use super::{CONNECTIONS, Live, Phase, Slot, watch};
use crate::auth;
use crate::config::{self, Remote, ServerSpec};
use crate::hub::cache::Freshness;
use crate::hub::proxy::{self, InFlight};
use crate::hub::{HubError, Inner, listen, options, server_requests};

/// How long a server with roots configured gets to ask for them before the hub's first request
/// goes anyway (a server may never ask).
const ROOTS_WAIT: Duration = Duration::from_secs(2);

/// How long a server gets to take in the roots once answered, before the hub's first request:
/// there is no acknowledgement to wait for, and server-filesystem checks each root on disk
/// (two file system calls through Node's thread pool) before it allows it.
const ROOTS_SETTLE: Duration = Duration::from_millis(50);

impl Slot {
    /// Spawns, records (so that a shutdown can find it), handshakes and lists the tools;
    /// `note` goes to the server's log first.
    pub(super) async fn connect(
        self: &Arc<Self>,
        hub: &Arc<Inner>,
        spec: &ServerSpec,
        protocol: Protocol,
        note: Option<String>,
    ) -> Result<Live, HubError> {
        let name = &self.server.name;
        let server_error = |error| HubError::Server {
            server: name.clone(),
            error,
        };
        let conn = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        let mut proxy_guest = None;
        let (client, ack_within, run_log) = {
            let mut life = self.life();
            if hub.is_stopping() {
                return Err(HubError::ShuttingDown {
                    server: name.clone(),
                });
            }
            if let Some(reason) = &hub.no_thread {
                return Err(server_error(mcp_smol::Error::Spawn {
                    program: spec.command.program.clone(),
                    reason: format!("the hub has no thread to run its driver on: {reason}"),
                }));
            }
            let (options, log) = hub.options(spec, protocol);
            if let (Some(note), Some(log)) = (note, &log) {
                let _ = writeln!(log.clone(), "mcp-cli: {note}");
            }
            // An acknowledgement is part of getting going: it gets the handshake's budget.
            let ack_within = options.core.handshake_timeout;
            let transport = match &spec.remote {
                // Marked, so that a server running mcp-cli's own gateway knows how deep it is.
                None => {
                    let marked = crate::nesting::marked(&spec.command);
                    mcp_smol::Transport::from(server_command(&marked))
                }
                Some(remote) => http_server(name, remote, &hub.settings.auth).into(),
            };
            let (client, driver) = mcp_smol::start(transport, options).map_err(server_error)?;
            if let Some(log) = &log {
                log.started(client.pid());
            }
            hub.spawn(driver).detach();
            if let Some(listener) = client.take_proxy_listener() {
                let allow = (spec.command.sandbox.as_ref()).map(|s| s.allow.clone());
                proxy_guest = Some((listener, allow.unwrap_or_default()));
            }
            if let Phase::Starting { client: slot, .. } = &mut life.phase {
                *slot = Some(client.clone());
            }
            (client, ack_within, log)
        };
        let calls = Arc::new(InFlight::default());
        if let Some((listener, allow)) = proxy_guest {
            let guest = proxy::Guest {
                allow,
                log: run_log.clone(),
                calls: calls.clone(),
            };
            let ended = client.notifications().await;
            let serve = proxy::serve(listener, guest, hub.executor.clone(), ended);
            hub.spawn_watcher(serve);
        }
        // Subscribed before the handshake ends, so no list change and no question is missed.
        let notes = client.notifications().await;
        let requests = client.server_requests().await;
        let (roots_answered, roots_known) = async_channel::bounded(1);
        let declined = Arc::<std::sync::atomic::AtomicU64>::default();
        let answers = server_requests::Answers {
            roots: spec.roots.clone(),
            host_roots: hub.settings.roots.clone(),
            elicit: hub.settings.elicit.clone(),
            declined: declined.clone(),
        };
        let answering = server_requests::serve(
            name.clone(),
            client.clone(),
            requests,
            answers,
            roots_answered,
        );
        hub.spawn_watcher(answering);
        let listed = async {
            let info = client.wait_ready().await?;
            if !spec.roots.is_empty() {
                // Servers ask for the roots after `initialized` and take the answer in on their
                // own time; server-filesystem refuses every path until then. Nothing goes to
                // the server before it has asked and been answered (or the wait is over).
                let answered = async {
                    if roots_known.recv().await.is_ok() {
                        async_io::Timer::after(ROOTS_SETTLE).await;
                    }
                };
                let waited = async {
                    async_io::Timer::after(ROOTS_WAIT).await;
                };
                futures_lite::future::or(answered, waited).await;
            }
            // A server that declares no tools is not asked for them (the spec's rule; some
            // answer such a request with nonsense).
            if info.capabilities.tools.is_none() {
                return Ok((info, Vec::new(), Freshness::default()));
            }
            let mut tools = list_tools(&client).await.map_err(|error| {
                match options::claimed_stateless(&info, "tools/list", &error) {
                    Some(reason) => {
                        mcp_smol::Error::Disconnected(Box::new(mcp_smol::Disconnect::bare(reason)))
                    }
                    None => error,
                }
            })?;
            // A change announced before the listing was answered (server-everything adds
            // tools once initialized) is already in the channel: list once more to catch it.
            let changed = std::iter::from_fn(|| notes.try_recv().ok())
                .any(|note| note.method == Notification::TOOLS_LIST_CHANGED);
            if changed {
                tools = list_tools(&client).await?;
            }
            Ok::<_, mcp_smol::Error>((info, tools.0, tools.1))
        };
        match listed.await {
            Ok((info, tools, tools_fresh)) => {
                if let (Some(fallback), Some(log)) = (&info.fallback, &run_log) {
                    let revision = &info.protocol_version;
                    let line = format!("mcp-cli: the handshake era ({revision}): {fallback}");
                    let _ = writeln!(log.clone(), "{line}");
                }
                let (acked, acks) = async_channel::unbounded();
                let listening = listen::filter(&info).map(|filter| {
                    listen::start(hub, client.clone(), filter, ack_within, run_log, acked)
                });
                let handshake = info.era() != Some(mcp_smol::proto::Era::Stateless);
                let judged = Arc::new(hub.judged(self.name(), &tools));
                let live = Live {
                    client: client.clone(),
                    conn,
                    asks_for_tasks: handshake && info.capabilities.tasks.tool_calls,
                    protocol: info.protocol_version,
                    tools: Arc::new(tools),
                    judged,
                    tools_fresh,
                    listening,
                    features: None,
                    calls,
                    declined,
                };
                let hub_weak = Arc::downgrade(hub);
                let watch = watch(hub_weak, self.clone(), client, conn, notes, acks);
                hub.spawn_watcher(watch);
                Ok(live)
            }
            Err(error) => {
                client.close().await;
                Err(server_error(error))
            }
        }
    }
}

/// Every tool of `client`, and until when the listing is fresh.
pub(super) async fn list_tools(client: &Client) -> Result<(Vec<Tool>, Freshness), mcp_smol::Error> {
    let asked = Instant::now();
    let listing: Listing<Tool> = client.list_all().await?;
    Ok((listing.items, Freshness::of(listing.cache, asked)))
}

/// What the HTTP adapter needs for remote server `name`: the configured headers, and OAuth
/// unless the config supplies its own `Authorization`.
fn http_server(name: &str, remote: &Remote, base: &auth::Settings) -> HttpServer {
    let authorizer = (!remote.has_authorization()).then(|| {
        let settings = auth_settings(remote, base);
        auth::OAuth::new(name, &remote.url, settings) as Arc<dyn mcp_smol::Authorizer>
    });
    HttpServer {
        url: remote.url.clone(),
        headers: remote.headers.clone(),
        transport: match remote.transport {
            config::Transport::Auto => HttpTransport::Auto,
            config::Transport::Sse => HttpTransport::Sse,
        },
        authorizer,
    }
}

/// What mcp-smol runs for a configured program (the config holds it as plain data), with
/// what a confined server may read besides its own paths decided here, by the host, and for
/// one in a network namespace of its own, its launchers' offline switches and its proxy.
pub(crate) fn server_command(command: &config::Command) -> ServerCommand {
    let mut server = ServerCommand::new(&command.program).args(command.args.iter().cloned());
    server.cwd = command.cwd.clone();
    let isolated = (command.sandbox.as_ref()).filter(|sandbox| sandbox.isolate_network);
    // What the config's `env` sets wins over what the sandbox sets.
    server.env = isolated
        .map(crate::hub::sandbox::environment)
        .unwrap_or_default();
    server.env.extend(command.env.clone());
    server.inherit_env = command.env_inherit;
    server.env_pass.clone_from(&command.env_pass);
    server.sandbox = (command.sandbox.as_ref()).map(|sandbox| mcp_smol::Sandbox {
        isolate_network: sandbox.isolate_network,
        proxy_port: (sandbox.isolate_network && !sandbox.allow.is_empty())
            .then_some(crate::hub::proxy::PROXY_PORT),
        filesystem: sandbox.filesystem.clone(),
        readable: Vec::new(),
        hidden: crate::hub::sandbox::hidden_folders(),
        kept: crate::hub::sandbox::kept_folders(),
    });
    crate::hub::sandbox::with_readable(server)
}

/// A remote server's OAuth settings: the hub's, then the config entry's own client and
/// scopes over them.
pub(crate) fn auth_settings(remote: &Remote, base: &auth::Settings) -> auth::Settings {
    let mut settings = base.clone();
    if remote.oauth_client_id.is_some() {
        settings.client_id = remote.oauth_client_id.clone();
        settings.client_secret = remote.oauth_client_secret.clone();
    }
    if remote.oauth_client_metadata_url.is_some() {
        settings.client_metadata_url = remote.oauth_client_metadata_url.clone();
    }
    if !remote.oauth_scopes.is_empty() {
        settings.scopes = remote.oauth_scopes.clone();
    }
    if let Some(grant) = remote.oauth_grant {
        settings.grant = grant;
    }
    if remote.oauth_private_key.is_some() {
        settings.private_key = remote.oauth_private_key.clone();
    }
    if remote.oauth_assertion.is_some() {
        settings.assertion = remote.oauth_assertion.clone();
    }
    if remote.oauth_idp.is_some() {
        settings.idp = remote.oauth_idp.clone();
    }
    if remote.oauth_dpop.is_some() {
        settings.dpop = remote.oauth_dpop;
    }
    if let Some(store) = remote.token_store {
        settings.token_store = store;
    }
    settings
}
