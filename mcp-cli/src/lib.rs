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
mod spinner;

use std::ffi::OsString;

use clap::Parser;

use crate::commands::Context;
use crate::exit::{Exit, Failure};

/// Runs one command line; returns the process exit code (DESIGN §5.3).
pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            // --help and --version are clap "errors" that print to stdout and succeed.
            let _ = error.print();
            return if error.use_stderr() {
                Exit::Usage.code()
            } else {
                Exit::Success.code()
            };
        }
    };
    let env = |key: &str| std::env::var(key).ok();
    let mut ctx = Context {
        servers: Vec::new(),
        json: cli.json,
        timeout: cli.timeout,
        log_dir: logs::log_dir(&env),
        out: output::Stdout::default(),
    };
    let outcome = load_servers(&cli, &env).and_then(|servers| {
        ctx.servers = servers;
        smol::block_on(dispatch(&mut ctx, cli.command))
    });
    match outcome {
        Ok(exit) => exit.code(),
        Err(failure) => {
            commands::report(&ctx, &failure);
            failure.exit.code()
        }
    }
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
