//! `daemon start|stop|status|run`: the gateway in the background on a per-user Unix socket,
//! used by the other commands while it runs (see [`crate::daemon`]); `run` is the daemon
//! process itself (`process.rs`).
//!
//! What lives here:
//!
//! - `mod.rs`: `daemon start`, `stop` and `status`
//! - `process.rs`: `daemon run`, the daemon itself
//! - `parking.rs`: the questions parked calls wait on there (`call --park`, `answer`)

mod parking;
mod process;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::cli::DaemonAction;
use crate::commands::Context;
use crate::daemon::{self, Place};
use crate::exit::{Exit, Failure};
use crate::output;

pub(crate) async fn run(ctx: &mut Context, action: DaemonAction) -> Result<Exit, Failure> {
    if ctx.adhoc.is_some() {
        return Err(Failure::usage(
            "the daemon serves configured servers; --stdio and --http are not supported with it",
        ));
    }
    if matches!(
        action,
        DaemonAction::Run { .. } | DaemonAction::Start { .. }
    ) {
        crate::nesting::check_depth().map_err(Failure::usage)?;
    }
    let env = |key: &str| std::env::var(key).ok();
    let place = Place::of(&ctx.files, &env);
    match action {
        DaemonAction::Run { idle } => process::run(ctx, Duration::from_secs(idle)).await,
        DaemonAction::Start { idle } => start(ctx, &place, idle).await,
        DaemonAction::Stop => stop(ctx, &place).await,
        DaemonAction::Status => status(ctx, &place).await,
    }
}

async fn start(ctx: &mut Context, place: &Place, idle: u64) -> Result<Exit, Failure> {
    if let Some(client) = daemon::connect(place).await {
        let status = daemon::ask(&client, "mcp-cli/status").await;
        client.close().await;
        let pid = status
            .map(|status| status["pid"].clone())
            .unwrap_or_default();
        ctx.out.line(&format!(
            "a daemon for these config files is already running (pid {pid}): {}",
            place.socket.display()
        ));
        return Ok(Exit::Success);
    }
    place.check_dir(true).map_err(Failure::usage)?;
    let log = ctx.state.daemon_log(&place.key);
    let cannot =
        |e: std::io::Error| Failure::new(Exit::Server, format!("cannot start the daemon: {e}"));
    if let Some(dir) = log.parent() {
        crate::files::private_dir(dir).map_err(cannot)?;
    }
    let log_file = crate::files::append_private(&log).map_err(cannot)?;
    let mut command = std::process::Command::new(std::env::current_exe().map_err(cannot)?);
    for config in &ctx.configs {
        command
            .arg("--config")
            .arg(std::path::absolute(config).map_err(cannot)?);
    }
    command
        .args(["daemon", "run", "--idle", &idle.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file);
    let mut child = command.spawn().map_err(cannot)?;
    // It says `ready` once its socket takes connections; EOF first means it gave up.
    let ready = blocking::unblock(move || {
        let stdout = child.stdout.take()?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).ok()?;
        let pid = child.id();
        if line.trim() == "ready" {
            return Some(pid);
        }
        // Reaped so it leaves no zombie while we report.
        let _ = child.wait();
        None
    })
    .await;
    match ready {
        Some(pid) => {
            ctx.out.line(&format!(
                "daemon started (pid {pid}): {}",
                place.socket.display()
            ));
            Ok(Exit::Success)
        }
        None => {
            let tail = crate::logs::tail(&log, 5).unwrap_or_default().join("\n");
            Err(Failure::new(
                Exit::Server,
                format!("the daemon did not start; {}:\n{tail}", log.display()),
            ))
        }
    }
}

/// Asks the daemon to stop (a request on its socket, not a signal) and waits until it is
/// gone: its answer comes once its servers are stopped, and the connection ends with it.
async fn stop(ctx: &mut Context, place: &Place) -> Result<Exit, Failure> {
    let Some(client) = daemon::connect(place).await else {
        ctx.out.line("no daemon is running for these config files");
        return Ok(Exit::Success);
    };
    let status = daemon::ask(&client, "mcp-cli/status").await?;
    let gone = client.notifications().await;
    daemon::ask(&client, "mcp-cli/stop").await?;
    // Closed by the driver when the daemon's end of the connection closes: at its exit.
    while gone.recv().await.is_ok() {}
    client.close().await;
    ctx.out
        .line(&format!("daemon stopped (pid {})", status["pid"]));
    Ok(Exit::Success)
}

async fn status(ctx: &mut Context, place: &Place) -> Result<Exit, Failure> {
    let Some(client) = daemon::connect(place).await else {
        return Err(Failure::new(
            Exit::Server,
            format!(
                "no daemon is running for these config files ({})",
                place.socket.display()
            ),
        ));
    };
    let status = daemon::ask(&client, "mcp-cli/status").await;
    client.close().await;
    let status = status?;
    if ctx.json {
        ctx.out.line(&output::pretty(&status));
        return Ok(Exit::Success);
    }
    let text = |key: &str| match &status[key] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    ctx.out.line(&format!("socket   {}", text("socket")));
    ctx.out.line(&format!("pid      {}", text("pid")));
    let configs: Vec<String> = (status["configs"].as_array().into_iter().flatten())
        .filter_map(|file| file.as_str().map(str::to_owned))
        .collect();
    ctx.out
        .line(&format!("configs  {}", configs.join("\n         ")));
    ctx.out.line(&format!(
        "idle     {}s (exits after {}s)",
        text("idleSeconds"),
        text("idleExitSeconds")
    ));
    if let Some(why) = status["cold"].as_str() {
        ctx.out
            .line(&format!("cold     every run bypasses the daemon: {why}"));
    }
    for line in (status["table"].as_array().into_iter().flatten()).filter_map(Value::as_str) {
        ctx.out.line(line);
    }
    Ok(Exit::Success)
}
