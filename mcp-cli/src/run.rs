//! The command line's entry: parses the arguments, sends a run to the warm daemon or runs it
//! cold on a hub of its own, and ends it on Ctrl-C, SIGTERM or SIGHUP.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use async_signal::{Signal, Signals};
use futures_lite::stream::StreamExt;

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::hub::{Hub, Settings};
use crate::{
    adhoc, approve, auth, cli, commands, config, daemon, elicit, hints, host, output, state,
};

/// Runs one command line; returns the process exit code (see [`Exit`]).
///
/// It catches SIGINT, SIGTERM and SIGHUP, to stop the servers it started before it returns
/// 128 + the signal's number. Like any use of `signal-hook-registry`, that leaves those signals
/// ignored by the process once it has returned: fine for the binary, which exits at once.
pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    run_args(args.into_iter().collect())
}

/// [`run`]'s body, not generic, so that it is compiled once, here, rather than again in every
/// crate that calls `run` (the binary took ten seconds of a release build to compile it).
fn run_args(args: Vec<OsString>) -> i32 {
    let cli = match <cli::Cli as clap::Parser>::try_parse_from(&args) {
        Ok(cli) => cli,
        // --help and --version are clap "errors" that print to stdout and succeed.
        Err(error) if !error.use_stderr() => {
            let _ = error.print();
            return Exit::Success.code();
        }
        Err(error) if asks_for_json(&args) => {
            let text = error.render().to_string();
            let message = text.trim().trim_start_matches("error: ");
            Failure::usage(message).report(true, &hints::Naming::Configured);
            return Exit::Usage.code();
        }
        Err(error) => {
            let _ = error.print();
            return Exit::Usage.code();
        }
    };
    // What a server leaves behind when it stops (a `setsid` grandchild) comes to us, to be
    // killed and reaped before we exit. Without it (no such prctl), it is killed all the same
    // and reaped by init.
    let _ = mcp_smol::adopt_orphans();
    // Watch before any server starts, so that none can outlive a signal.
    let signals = match Signals::new([Signal::Int, Signal::Term, Signal::Hup]) {
        Ok(signals) => signals,
        // Only when out of file descriptors, where no server could start either.
        Err(error) => {
            let failure = Failure::new(
                Exit::Server,
                format!("cannot watch for Ctrl-C, SIGTERM and SIGHUP: {error}"),
            );
            failure.report(cli.json, &hints::Naming::Configured);
            return failure.exit.code();
        }
    };
    // One `block_on` for the whole run: in a gap between two, async-io's own thread takes
    // the reactor and keeps it until an event comes, which then hops to this thread.
    async_io::block_on(run_command(cli, args, signals))
}

/// [`run_args`] once the signals are watched: the command, warm through a daemon or here.
async fn run_command(cli: cli::Cli, args: Vec<OsString>, mut signals: Signals) -> i32 {
    if cli.json {
        output::json_diagnostics();
    }
    // `${secret:NAME}` in a config file is a secret `install` kept in the keychain.
    let env = crate::secrets::lookup;
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let files = host::ConfigFiles::discover(&cli.configs, &env, cwd);
    // While a daemon serves these config files, it runs the command with its warm servers.
    let warm = daemon::run_warm(&cli, &args, &files, &env);
    let ending = futures_lite::future::or(async { warm.await.map(Ending::Warm) }, async {
        Some(Ending::Signal(next_signal(&mut signals).await))
    })
    .await;
    match ending {
        Some(Ending::Warm(code)) => return code,
        Some(Ending::Signal(signal)) => return 128 + signal as i32,
        _ => {}
    }
    let state = state::Folder::of_env(&env);
    let login = login_mode(&cli, &env);
    if let Err(message) = auth::check_env(&env) {
        Failure::usage(message).report(cli.json, &naming(&cli));
        return Exit::Usage.code();
    }
    // Drivers run on the main thread's executor, so a call crosses no thread on its way to
    // the server and back.
    let executor = Arc::new(async_executor::Executor::new());
    let loaded = match load_config(&cli, &files, &env) {
        // They find the daemon by the files' paths alone: a file that does not parse must not
        // leave a running daemon, and its servers, out of reach.
        Err(_) if finds_the_daemon_only(&cli) => Ok((config::Config::default(), None)),
        loaded => loaded,
    };
    let naming = naming(&cli);
    let outcome = match loaded {
        Ok((config, adhoc)) => {
            let base = host::settings(&state, &executor, &env);
            let settings = Settings {
                // A one-shot command should not wait out a server that ignores its stdin
                // closing: well-behaved servers exit on it within milliseconds.
                grace_period: Duration::from_millis(300),
                ask: Some(approve::handler(cli.yes)),
                elicit: Some(elicit::handler(cli.yes)),
                auth: auth::Settings {
                    login,
                    stored_only: stored_auth_only(&cli, &env),
                    ..base.auth
                },
                ..base
            };
            let mut ctx = Context {
                hub: Hub::new(config, settings),
                json: cli.json,
                state,
                out: output::Stdout::default(),
                configs: cli.configs.clone(),
                files,
                adhoc,
                naming: naming.clone(),
                yes: cli.yes,
                call_timeout: cli.timeout,
                executor: executor.clone(),
                stop: None,
                servers_outlive_command: false,
            };
            let ending = executor.run(until_signal(&mut ctx, cli.command, signals));
            Ok(match ending.await {
                // A server that needs a login: under --json, one is started for the person.
                Ending::Done(Err(failure)) => {
                    let start = commands::start_login_for(&ctx, failure);
                    Ending::Done(Err(executor.run(start).await))
                }
                ending => ending,
            })
        }
        Err(failure) => Err(failure),
    };
    match outcome {
        Ok(Ending::Done(Ok(exit))) => exit.code(),
        Ok(Ending::Done(Err(failure))) | Err(failure) => {
            failure.report(cli.json, &naming);
            failure.exit.code()
        }
        Ok(Ending::Warm(code)) => code,
        // The shells' convention for a process ended by a signal.
        Ok(Ending::Signal(signal)) => 128 + signal as i32,
    }
}

/// How this run names its servers in the commands it suggests: the ad hoc server has no
/// config entry, so the flag that made it stands for it.
fn naming(cli: &cli::Cli) -> hints::Naming {
    let flag = match (&cli.stdio, &cli.http) {
        (Some(line), _) => format!("--stdio {}", shell_words::quote(line)),
        (None, Some(url)) => format!("--http {url}"),
        (None, None) => return hints::Naming::Configured,
    };
    hints::Naming::Adhoc { flag }
}

/// `daemon status`, `daemon stop`, `answer` and `parked` (without `--stdio` or `--http`): they
/// need no config, only where the daemon is.
fn finds_the_daemon_only(cli: &cli::Cli) -> bool {
    let adhoc = cli.stdio.is_some() || cli.http.is_some();
    !adhoc
        && matches!(
            cli.command,
            cli::Command::Daemon {
                action: cli::DaemonAction::Status | cli::DaemonAction::Stop
            } | cli::Command::Answer { .. }
                | cli::Command::Parked
        )
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
    /// The daemon ran it; its exit code.
    Warm(i32),
    Signal(Signal),
}

/// The next of the signals we watch for.
async fn next_signal(signals: &mut Signals) -> Signal {
    while let Some(signal) = signals.next().await {
        if let Ok(signal) = signal {
            return signal;
        }
    }
    std::future::pending().await
}

/// Runs the command unless SIGINT, SIGTERM or SIGHUP comes first; then the command is dropped
/// where it stands. Either way every server it started is stopped before we return: closed
/// in the ordinary way after the command, terminated after a signal.
async fn until_signal(ctx: &mut Context, command: cli::Command, mut signals: Signals) -> Ending {
    // `serve --listen` is told instead, and answers what it is answering before it returns.
    let graceful = matches!(
        &command,
        cli::Command::Serve {
            listen: Some(_),
            ..
        }
    );
    let (stop, stopped) = async_channel::bounded(1);
    if graceful {
        ctx.stop = Some(stopped);
    }
    // The signals are watched by a task of their own: polled beside the command, their pipe
    // was read (failing with EAGAIN) every time anything woke the command, once per message
    // for `serve`.
    let (caught, signal) = async_channel::bounded(2);
    let _watcher = ctx.executor.spawn(async move {
        loop {
            if caught.send(next_signal(&mut signals).await).await.is_err() {
                break;
            }
        }
    });
    let next = || async {
        match signal.recv().await {
            Ok(signal) => signal,
            Err(_) => std::future::pending().await,
        }
    };
    let done = async { Ending::Done(commands::dispatch(ctx, command).await) };
    let signalled = async {
        let signal = next().await;
        if graceful {
            let _ = stop.try_send(());
            // A second signal does not wait.
            return Ending::Signal(next().await);
        }
        Ending::Signal(signal)
    };
    // The command is dropped as soon as a signal wins, so it prints nothing more.
    let ending = futures_lite::future::or(done, signalled).await;
    // Read afterwards: `serve` and the daemon put a hub of their own in the context.
    let hub = ctx.hub.clone();
    match ending {
        Ending::Signal(_) => hub.terminate().await,
        Ending::Done(_) | Ending::Warm(_) => hub.shutdown().await,
    }
    ending
}

/// Whether a remote server that asks for a login may start one: never with
/// `--stored-auth-only` or `MCP_CLI_STORED_AUTH_ONLY=1`; unattended with `--auth-follow` or
/// `MCP_CLI_AUTH_FOLLOW=1`; through the browser for the ad hoc `--http` server on a terminal;
/// else never (a configured server is then listed `needs-auth`, to log in with `mcp-cli auth`).
fn login_mode(cli: &cli::Cli, env: config::Env<'_>) -> auth::Login {
    use std::io::IsTerminal;
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if stored_auth_only(cli, env) {
        auth::Login::Never
    } else if cli.auth_follow || auth::follow_requested(env) {
        auth::Login::Follow
    } else if cli.http.is_some() && terminal {
        auth::Login::Browser
    } else {
        auth::Login::Never
    }
}

/// `--stored-auth-only` or `MCP_CLI_STORED_AUTH_ONLY=1`.
pub(crate) fn stored_auth_only(cli: &cli::Cli, env: config::Env<'_>) -> bool {
    cli.stored_auth_only
        || env("MCP_CLI_STORED_AUTH_ONLY").is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
}

/// The config, and under `--stdio` or `--http` the ad hoc server's name: then that server is
/// the only one, while the files' policy still applies to it.
fn load_config(
    cli: &cli::Cli,
    files: &host::ConfigFiles,
    env: config::Env<'_>,
) -> Result<(config::Config, Option<String>), Failure> {
    let loaded = match cli.command.creates_config() {
        // The file `add` writes to is created as the user file is, so it need not exist yet.
        true => files.clone().none_required().load(env),
        false => files.load(env),
    };
    let mut config = loaded.map_err(|error| Failure::usage(error.to_string()))?;
    if cli.stdio.is_none() && cli.http.is_none() {
        return Ok((config, None));
    }
    if cli.command.edits_config() {
        return Err(Failure::usage(
            "--stdio and --http stand for a server with no config, so there is nothing to edit \
             or import",
        ));
    }
    config.servers.clear();
    let mut spec = match (&cli.stdio, &cli.http) {
        (Some(line), _) => {
            let (name, command) = adhoc::server(line)?;
            config::ServerSpec::new(&name, command)
        }
        (None, Some(url)) => {
            let (name, remote) = adhoc::remote(url, &cli.headers)?;
            config::ServerSpec::remote(&name, remote)
        }
        (None, None) => unreachable!("checked above"),
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    spec.pin_key = Some(adhoc::pin_key(&spec, &cwd));
    spec.protocol = cli.protocol.unwrap_or_default();
    let name = spec.name.clone();
    config.add_spec(spec);
    Ok((config, Some(name)))
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
