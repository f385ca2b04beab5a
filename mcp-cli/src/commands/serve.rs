//! `serve [--proxy | --search] [SERVER]...`: one MCP server on stdin and stdout standing for the
//! configured servers (or the ones named), through a hub of its own whose `ask` rules ask the
//! host. The config files are watched and edits applied while it runs.

use std::sync::Arc;

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::gateway::{Gateway, Host, Mode, Relay, server_config};
use crate::hub::{Hub, Settings};

pub(crate) async fn run(ctx: &mut Context, mode: Mode, named: &[String]) -> Result<Exit, Failure> {
    if ctx.adhoc.is_some() {
        return Err(Failure::usage(
            "serve stands for configured servers; --stdio and --http are not supported with it",
        ));
    }
    crate::nesting::check_depth().map_err(Failure::usage)?;
    let env = |key: &str| std::env::var(key).ok();
    // Watched from before the first read: an edit made meanwhile is applied, not missed.
    let watch = ctx.files.watch();
    let config = (ctx.files.load(&env)).map_err(|error| Failure::usage(error.to_string()))?;
    // Mistyped names are found before the host connects.
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
    drop(names);
    let stdin = blocking::Unblock::new(std::io::stdin());
    let stdout = blocking::Unblock::new(std::io::stdout());
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
        ..crate::host::settings(&ctx.state, &ctx.executor, &env)
    };
    let hub = Hub::new(config, settings);
    // The command's hub from now on, which a signal terminates.
    ctx.hub = hub.clone();
    let gateway = Arc::new(Gateway {
        hub: hub.clone(),
        named: named.to_vec(),
        mode,
        relay,
        list_wait: crate::gateway::list_wait(&env),
        call_timeout: ctx.call_timeout,
        extension: None,
        executor: ctx.executor.clone(),
    });
    gateway.serve(host, Some(watch)).await;
    hub.shutdown().await;
    Ok(Exit::Success)
}
