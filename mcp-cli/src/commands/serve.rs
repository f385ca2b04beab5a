//! `serve [--proxy | --search] [--listen [ADDR]] [SERVER]...`: one MCP server on stdin and
//! stdout (or over Streamable HTTP) standing for the configured servers (or the ones named),
//! through a hub of its own whose `ask` rules ask the host. The config files are watched and
//! edits applied while it runs. `serve --print-token` shows the HTTP hosts' bearer token.

use std::sync::Arc;

use crate::commands::Context;
use crate::config::Config;
use crate::exit::{Exit, Failure};
use crate::gateway::replicas;
use crate::gateway::sealed::Seal;
use crate::gateway::{Gateway, Host, Mode, Relay, listen, server_config};
use crate::host::Watch;
use crate::hub::{Hub, Settings};

pub(crate) async fn run(ctx: &mut Context, mode: Mode, named: &[String]) -> Result<Exit, Failure> {
    let (watch, config) = load(ctx, named)?;
    let env = |key: &str| std::env::var(key).ok();
    let (stdin, stdout) = crate::gateway::stdio::host_stdio();
    let Some(host) = Host::connect(stdin, stdout, server_config(), &ctx.executor).await else {
        return Ok(Exit::Success);
    };
    let relay = Relay::default();
    // The command's own executor, on its thread: a message crosses no thread on its way
    // through the gateway to a server and back.
    let settings = Settings {
        ask: Some(host.link.ask_handler(&relay)),
        // Servers may ask for a form only when the host can show one.
        elicit: (host.link.client.declares("elicitation")).then(|| relay.handler()),
        // Servers with no roots configured are given the host's.
        roots: host.link.roots_handler(&relay),
        ..crate::host::settings(&ctx.state, &ctx.executor, &env)
    };
    let (hub, gateway) = gateway(ctx, config, settings, (mode, named), relay, None);
    gateway.serve(host, Some(watch)).await;
    hub.shutdown().await;
    Ok(Exit::Success)
}

/// The hub on `config` (the command's from now on, which a signal terminates) and the
/// gateway standing for it.
fn gateway(
    ctx: &mut Context,
    config: Config,
    settings: Settings,
    (mode, named): (Mode, &[String]),
    relay: Relay,
    replicas: Option<replicas::Replicas>,
) -> (Hub, Arc<Gateway>) {
    let hub = Hub::new(config, settings);
    ctx.hub = hub.clone();
    let env = |key: &str| std::env::var(key).ok();
    let gateway = Arc::new(Gateway {
        hub: hub.clone(),
        named: named.to_vec(),
        mode,
        relay,
        list_wait: crate::gateway::list_wait(&env),
        call_timeout: ctx.call_timeout,
        extension: None,
        executor: ctx.executor.clone(),
        results: ctx.state.results(),
        handed: Default::default(),
        replicas,
    });
    (hub, gateway)
}

/// The config to serve, checked, and its watch (made before the first read: an edit made
/// meanwhile is applied, not missed). Mistyped names are found before any host connects.
fn load(ctx: &Context, named: &[String]) -> Result<(Watch, Config), Failure> {
    if ctx.adhoc.is_some() {
        return Err(Failure::usage(
            "serve stands for configured servers; --stdio and --http are not supported with it",
        ));
    }
    crate::nesting::check_depth().map_err(Failure::usage)?;
    let env = crate::secrets::lookup;
    let watch = ctx.files.watch();
    let config = (ctx.files.load(&env)).map_err(|error| Failure::usage(error.to_string()))?;
    if let Some(notice) = crate::host::pending_notice(&config.pending) {
        crate::output::diagnostic(&notice);
    }
    let executor = Some(ctx.executor.clone());
    let names = Hub::new(
        config.clone(),
        Settings {
            executor,
            ..Settings::default()
        },
    );
    for name in named {
        names.resolve(name)?;
    }
    Ok((watch, config))
}

/// The names `--allowed-host` and `MCP_CLI_ALLOWED_HOSTS` (comma-separated) give, lower case.
fn allowed_hosts(given: &[String], env: crate::config::Env<'_>) -> Vec<String> {
    let listed = env("MCP_CLI_ALLOWED_HOSTS").unwrap_or_default();
    let listed = listed.split(',').map(str::trim).map(str::to_owned);
    (given.iter().cloned().chain(listed))
        .filter(|name| !name.is_empty())
        .map(|name| name.to_ascii_lowercase())
        .collect()
}

/// `serve --print-token`: the bearer token HTTP hosts must send, made on first use.
pub(crate) fn print_token(ctx: &mut Context) -> Result<Exit, Failure> {
    let token = listen::token(&ctx.state.listen_token()).map_err(Failure::usage)?;
    ctx.out.line(&token);
    Ok(Exit::Success)
}

/// Where and how `serve --listen` listens.
pub(crate) struct ListenAt<'a> {
    pub(crate) address: &'a str,
    pub(crate) max_connections: usize,
    /// The replicas' shared keys (`--replica-key`), when given.
    pub(crate) replica_key: Option<std::path::PathBuf>,
    /// Where the other replicas reach this one (`--replica-url`), when given.
    pub(crate) replica_url: Option<String>,
    /// The names a proxy in front reaches it by (`--allowed-host`).
    pub(crate) allowed_hosts: Vec<String>,
}

/// `serve --listen ADDR [--max-connections N] [--allowed-host NAME]... [--replica-key FILE
/// [--replica-url URL]]`: the gateway over Streamable HTTP for up to N connections at once, one
/// hub for all. Prints the bound address on stderr (`listening on http://IP:PORT/mcp`); stops
/// on Ctrl-C or SIGTERM once the calls in flight are answered.
pub(crate) async fn listen(
    ctx: &mut Context,
    mode: Mode,
    named: &[String],
    at: ListenAt<'_>,
) -> Result<Exit, Failure> {
    let address = listen::parse_address(at.address).map_err(Failure::usage)?;
    let (mut watch, config) = load(ctx, named)?;
    let token = listen::token(&ctx.state.listen_token()).map_err(Failure::usage)?;
    let env = |key: &str| std::env::var(key).ok();
    let allowed_hosts = allowed_hosts(&at.allowed_hosts, &env);
    let replica_key =
        (at.replica_key).or_else(|| env("MCP_CLI_REPLICA_KEY_FILE").map(std::path::PathBuf::from));
    if replica_key.is_none() && at.replica_url.is_some() {
        return Err(Failure::usage(
            "--replica-url names this replica to the others: give it with --replica-key FILE, \
             the key they share"
                .to_owned(),
        ));
    }
    let seal = Arc::new(match &replica_key {
        Some(path) => Seal::from_file(path).map_err(Failure::usage)?,
        None => Seal::of_this_process(),
    });
    let listener = async_net::TcpListener::bind(address)
        .await
        .map_err(|error| Failure::usage(format!("cannot listen on {address}: {error}")))?;
    let bound = listener.local_addr().unwrap_or(address);
    let replicas = match replica_key {
        Some(_) => {
            let given = at.replica_url.or_else(|| env("MCP_CLI_REPLICA_URL"));
            let me = replicas::own_url(given.as_deref(), (bound, listen::ENDPOINT))
                .map_err(Failure::usage)?;
            let (token, seal) = (token.clone(), seal.clone());
            Some(replicas::Replicas { me, token, seal })
        }
        None => None,
    };
    if !bound.ip().is_loopback() {
        crate::output::diagnostic(&format!(
            "mcp-cli serve: warning: listening on {bound}, which other machines can reach; \
             only the bearer token keeps them out"
        ));
    }
    crate::output::diagnostic(&format!(
        "mcp-cli serve: listening on http://{bound}{}",
        listen::ENDPOINT
    ));
    let relay = Relay::default();
    // Many hosts share the hub: a server's form, and an `ask` rule's question, go to the
    // host whose call waits on it.
    let settings = Settings {
        ask: Some(relay.ask_handler()),
        elicit: Some(relay.handler()),
        roots: Some(relay.roots_handler()),
        ..crate::host::settings(&ctx.state, &ctx.executor, &env)
    };
    let (hub, gateway) = gateway(ctx, config, settings, (mode, named), relay, replicas);
    let applying = gateway.clone();
    let edits = ctx.executor.spawn(async move {
        loop {
            watch.changed().await;
            applying.apply(watch.files());
        }
    });
    let stop = ctx
        .stop
        .take()
        .unwrap_or_else(|| async_channel::bounded(1).1);
    let admission = listen::Admission {
        token,
        allowed_hosts,
        seal,
    };
    listen::serve(gateway, listener, admission, at.max_connections, stop).await;
    drop(edits);
    hub.shutdown().await;
    Ok(Exit::Success)
}
