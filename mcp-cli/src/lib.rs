//! The `mcp-cli` library: config, argument typing and commands, driven by `main.rs`.
//!
//! [`run`] takes the command line and returns the exit code, so tests can drive the whole
//! program in-process or through the binary.

pub mod arguments;
mod cli;
mod commands;
pub mod config;
pub mod exit;
pub mod logs;
pub mod names;
pub mod output;
mod running;
mod spinner;

use std::ffi::OsString;

use async_signal::{Signal, Signals};
use clap::Parser;
use smol::stream::StreamExt;

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::running::Running;

/// Runs one command line; returns the process exit code (DESIGN §5.3).
///
/// It catches SIGINT, SIGTERM and SIGHUP, to stop the servers it started before it returns
/// 128 + the signal's number. Like any use of `signal-hook-registry`, that leaves those signals
/// ignored by the process once it has returned: fine for the binary, which exits at once.
pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        // --help and --version are clap "errors" that print to stdout and succeed.
        Err(error) if !error.use_stderr() => {
            let _ = error.print();
            return Exit::Success.code();
        }
        Err(error) if asks_for_json(&args) => {
            let text = error.render().to_string();
            let message = text.trim().trim_start_matches("error: ");
            commands::report(true, &Failure::usage(message));
            return Exit::Usage.code();
        }
        Err(error) => {
            let _ = error.print();
            return Exit::Usage.code();
        }
    };
    let env = |key: &str| std::env::var(key).ok();
    let mut ctx = Context {
        servers: Vec::new(),
        json: cli.json,
        timeout: cli.timeout,
        log_dir: logs::log_dir(&env),
        out: output::Stdout::default(),
        running: Running::default(),
    };
    // Watch before any server starts, so that none can outlive a signal.
    let signals = match Signals::new([Signal::Int, Signal::Term, Signal::Hup]) {
        Ok(signals) => signals,
        // Only when out of file descriptors, where no server could start either.
        Err(error) => {
            let failure = Failure {
                exit: Exit::Server,
                message: format!("cannot watch for Ctrl-C, SIGTERM and SIGHUP: {error}"),
            };
            commands::report(ctx.json, &failure);
            return failure.exit.code();
        }
    };
    let outcome = load_servers(&cli, &env).map(|servers| {
        ctx.servers = servers;
        let executor = ctx.running.executor();
        smol::block_on(executor.run(until_signal(&mut ctx, cli.command, signals)))
    });
    match outcome {
        Ok(Ending::Done(Ok(exit))) => exit.code(),
        Ok(Ending::Done(Err(failure))) | Err(failure) => {
            commands::report(ctx.json, &failure);
            failure.exit.code()
        }
        // The shells' convention for a process ended by a signal.
        Ok(Ending::Signal(signal)) => 128 + signal as i32,
    }
}

/// Whether `--json` is among the options, for errors found before clap could say so. Words
/// after `--` are operands, not options.
fn asks_for_json(args: &[OsString]) -> bool {
    (args.iter().skip(1))
        .take_while(|arg| *arg != "--")
        .any(|arg| arg == "--json")
}

enum Ending {
    Done(Result<Exit, Failure>),
    Signal(Signal),
}

/// Runs the command unless SIGINT, SIGTERM or SIGHUP comes first; then the command is dropped
/// where it stands and every server it started is stopped before we return.
async fn until_signal(ctx: &mut Context, command: cli::Command, mut signals: Signals) -> Ending {
    let running = ctx.running.clone();
    let done = async { Ending::Done(dispatch(ctx, command).await) };
    let signalled = async {
        while let Some(signal) = signals.next().await {
            if let Ok(signal) = signal {
                return Ending::Signal(signal);
            }
        }
        std::future::pending().await
    };
    // The command is dropped as soon as a signal wins, so it prints nothing more.
    let ending = smol::future::or(done, signalled).await;
    if matches!(ending, Ending::Signal(_)) {
        running.stop_all().await;
    }
    ending
}

async fn dispatch(ctx: &mut Context, command: cli::Command) -> Result<Exit, Failure> {
    match command {
        cli::Command::Call {
            server,
            rest,
            args_json,
        } => commands::call(ctx, &server, &rest, args_json.as_deref()).await,
        cli::Command::Tools { servers } => commands::tools(ctx, &servers).await,
        cli::Command::Servers => commands::servers(ctx).await,
        cli::Command::Logs { server, lines } => commands::show_logs(ctx, &server, lines),
    }
}

fn load_servers(cli: &cli::Cli, env: config::Env<'_>) -> Result<Vec<config::Server>, Failure> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let files = config::discover(&cli.configs, env, &cwd);
    config::load(&files, env, &cwd).map_err(|error| Failure::usage(error.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_asked_for_anywhere_before_a_double_dash() {
        let asks =
            |args: &[&str]| asks_for_json(&args.iter().map(OsString::from).collect::<Vec<_>>());
        assert!(asks(&["mcp-cli", "--json", "--bad"]));
        assert!(asks(&["mcp-cli", "logs", "--json"]));
        assert!(!asks(&["mcp-cli", "call", "fx", "--", "--json"]));
        assert!(!asks(&["mcp-cli", "call", "fx", "text=--json"]));
    }
}
