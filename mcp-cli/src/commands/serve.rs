//! `serve [--proxy] [SERVER]...`: one MCP server on stdin and stdout standing for the
//! configured servers (or the ones named), through a hub of its own whose `ask` rules ask the
//! host. The config files are watched and edits applied while it runs.

use std::sync::Arc;

use crate::commands::Context;
use crate::config;
use crate::exit::{Exit, Failure};
use crate::gateway::{Gateway, HostLink, Mode, Watch};
use crate::hub::{Hub, Settings};

pub(crate) async fn run(ctx: &mut Context, proxy: bool, named: &[String]) -> Result<Exit, Failure> {
    if ctx.adhoc.is_some() {
        return Err(Failure::usage(
            "serve stands for configured servers; --stdio and --http are not supported with it",
        ));
    }
    crate::nesting::check_depth().map_err(Failure::usage)?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let env = |key: &str| std::env::var(key).ok();
    let files = config::discover(&ctx.configs, &env, &cwd);
    let load = {
        let (files, cwd) = (files.clone(), cwd.clone());
        move || config::load(&files, &|key: &str| std::env::var(key).ok(), &cwd)
    };
    let config = load().map_err(|error| Failure::usage(error.0))?;
    let link = HostLink::default();
    let settings = Settings {
        log_dir: Some(ctx.log_dir.clone()),
        handshake_timeout: crate::mcp_timeout(&env),
        call_timeout: ctx.call_timeout,
        ask: Some(link.ask_handler()),
        // The command's own executor, on its thread: a message crosses no thread on its way
        // through the gateway to a server and back.
        executor: Some(ctx.executor.clone()),
        ..Settings::default()
    };
    let hub = Hub::new(config, settings);
    // Mistyped names are found before the host connects.
    for name in named {
        hub.resolve(name)?;
    }
    // The command's hub from now on, which a signal terminates.
    ctx.hub = hub.clone();
    let watch = Watch::new(
        files.into_iter().map(|(path, _)| path).collect(),
        Box::new(load),
    );
    let gateway = Arc::new(Gateway {
        hub: hub.clone(),
        named: named.to_vec(),
        mode: if proxy { Mode::Proxy } else { Mode::Tools },
        link,
        daemon: None,
        executor: ctx.executor.clone(),
    });
    let stdin = blocking::Unblock::new(std::io::stdin());
    let stdout = blocking::Unblock::new(std::io::stdout());
    gateway.serve(stdin, stdout, Some(watch)).await;
    hub.shutdown().await;
    Ok(Exit::Success)
}
