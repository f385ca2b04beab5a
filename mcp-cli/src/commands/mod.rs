//! The commands, one module each: thin views over the [`Hub`](crate::hub::Hub).
//!
//! A new command is one new module here and one arm in [`dispatch`].
//!
//! What lives here, one file a command:
//!
//! - `call.rs`: `call`; `call_result.rs`: how its result is shown
//! - `tools.rs`: `tools`
//! - `search.rs`: `search`
//! - `servers.rs`: `servers`
//! - `logs.rs`: `logs`
//! - `resources.rs`: `resources`
//! - `read.rs`: `read`
//! - `prompts.rs`: `prompts`
//! - `prompt.rs`: `prompt`
//! - `skills.rs`: `skills`; `skill.rs`: `skill`
//! - `tasks.rs`: `tasks` and `tasks get|wait|cancel`
//! - `parked.rs`: `answer` and `parked`, the questions parked calls wait on (`call --park`)
//! - `serve.rs`: `serve`, `serve --listen`, `serve --print-token`
//! - `daemon/`: `daemon start|stop|status`, and the daemon process (`process.rs`)
//! - `enable.rs`: `enable` and `disable`
//! - `add.rs`: `add`
//! - `remove.rs`: `remove`
//! - `import.rs`: `import`
//! - `registry.rs`: `registry sync|search|show`; `install.rs`: `install`
//! - `auth.rs`: `auth`
//! - `trust.rs`: `trust`
//! - `approve.rs`: `approve`
//! - `scan.rs`: `scan`
//! - `completions.rs`: `completions` and the hidden `__servers`
//! - `manual.rs`: `manual`
//! - `agent_help.rs`: `agent-help`, the Agent Skill that teaches agents to drive us

mod add;
mod agent_help;
mod approve;
mod auth;
pub(crate) mod call;
mod call_result;
mod completions;
mod daemon;
mod enable;
mod import;
mod install;
mod logs;
mod manual;
pub(crate) mod parked;
mod prompt;
mod prompts;
mod read;
mod registry;
mod remove;
mod resources;
mod scan;
pub(crate) mod search;
mod serve;
pub(crate) mod servers;
mod skill;
mod skills;
mod tasks;
mod tools;
mod trust;

use std::path::PathBuf;

use mcp_smol::proto::FromResult;
use serde_json::Value;

use crate::cli::Command;
use crate::exit::{Exit, Failure};
use crate::hints::Naming;
use crate::hub::{Catalogue, Hub};
use crate::output::Stdout;

/// What the commands need from the world around them.
pub(crate) struct Context {
    pub(crate) hub: Hub,
    pub(crate) json: bool,
    /// Where logs, pins and tokens are kept.
    pub(crate) state: crate::state::Folder,
    pub(crate) out: Stdout,
    /// The `--config` files given, for the commands that edit them.
    pub(crate) configs: Vec<PathBuf>,
    /// The config files this run reads, for the commands that read them again (`serve` and
    /// the daemon watch them).
    pub(crate) files: crate::host::ConfigFiles,
    /// The ad hoc server's name, under `--stdio`.
    pub(crate) adhoc: Option<String>,
    /// How the commands this run suggests name its servers.
    pub(crate) naming: Naming,
    /// `--yes`: what only the person may decide (`trust`, `approve`) is decided yes.
    pub(crate) yes: bool,
    /// `--timeout`: each tool call's own timeout, carried on its request.
    pub(crate) call_timeout: Option<std::time::Duration>,
    /// Runs the hub's servers, on the command's thread. A command that builds a hub of its own
    /// gives it this executor and puts it in [`hub`](Self::hub), so that a signal stops it.
    pub(crate) executor: std::sync::Arc<async_executor::Executor<'static>>,
    /// Says when Ctrl-C or SIGTERM asks a command that stops gracefully (`serve --listen`)
    /// to stop; other commands are dropped where they stand.
    pub(crate) stop: Option<async_channel::Receiver<()>>,
    /// Whether the hub's servers keep running once the command ends (it runs in the daemon),
    /// so that a task a local server runs can be waited for later.
    pub(crate) servers_outlive_command: bool,
}

pub(crate) async fn dispatch(ctx: &mut Context, command: Command) -> Result<Exit, Failure> {
    match command {
        Command::Call { .. }
        | Command::Tasks { .. }
        | Command::Tools { .. }
        | Command::Search { .. }
        | Command::Servers
        | Command::Resources { .. }
        | Command::Read { .. }
        | Command::Prompts { .. }
        | Command::Prompt { .. }
        | Command::Skills { .. }
        | Command::Skill { .. } => dispatch_warm(ctx, command).await,
        Command::Completions { shell } => completions::run(ctx, shell),
        Command::Manual { command } => manual::run(ctx, &command),
        Command::AgentHelp { skill, to, force } => {
            agent_help::run(ctx, skill, to.as_deref(), force)
        }
        Command::ServerNames => completions::server_names(ctx),
        Command::Logs { server, lines } => logs::run(ctx, &server, lines),
        Command::Serve {
            proxy,
            search,
            listen,
            print_token,
            max_connections,
            replica_key,
            replica_url,
            allowed_hosts,
            servers,
        } => {
            if print_token {
                return serve::print_token(ctx);
            }
            let mode = match (proxy, search) {
                (true, _) => crate::gateway::Mode::Proxy,
                (false, true) => crate::gateway::Mode::Search,
                (false, false) => crate::gateway::Mode::Tools,
            };
            match listen {
                Some(address) => {
                    let at = serve::ListenAt {
                        address: &address,
                        max_connections: max_connections as usize,
                        replica_key,
                        replica_url,
                        allowed_hosts,
                    };
                    serve::listen(ctx, mode, &servers, at).await
                }
                None => serve::run(ctx, mode, &servers).await,
            }
        }
        Command::Enable { server } => enable::run(ctx, &server, true),
        Command::Disable { server } => enable::run(ctx, &server, false),
        Command::Add {
            name,
            env,
            cwd,
            url,
            headers,
            protocol,
            force,
            command,
        } => add::run(
            ctx,
            &name,
            add::Given {
                env,
                cwd,
                url,
                headers,
                protocol,
                command,
            },
            force,
        ),
        Command::Remove { name } => remove::run(ctx, &name),
        Command::Registry { action } => registry::run(ctx, action).await,
        Command::Install {
            name,
            as_name,
            package,
            set,
            sandbox,
            no_check,
            force,
            registry,
        } => {
            let given = install::Given {
                name,
                as_name,
                package,
                set,
                sandbox,
                no_check,
                force,
                registry,
            };
            install::run(ctx, given).await
        }
        Command::Import {
            write,
            force,
            names,
        } => import::run(ctx, write.then_some(&names[..]), force),
        Command::Trust { server } => {
            let server = ctx.named_or_adhoc(server.as_deref(), "trust SERVER")?;
            trust::run(ctx, &server).await
        }
        Command::Scan { servers } => scan::run(ctx, &servers).await,
        Command::Approve { names } => approve::run(ctx, &names),
        Command::Auth {
            server,
            reset,
            device,
            no_browser,
            start,
            redirect,
            resume,
        } => {
            let how = match (reset, device, no_browser) {
                _ if start => auth::How::Start { device },
                _ if redirect.is_some() || resume => auth::How::Finish { redirect },
                (true, _, _) => auth::How::Reset,
                (_, true, _) => auth::How::Device,
                (_, _, true) => auth::How::Paste,
                _ => auth::How::Browser,
            };
            run_auth(ctx, server.as_deref(), how).await
        }
        Command::Daemon { action } => daemon::run(ctx, action).await,
        Command::Answer {
            id,
            pairs,
            decline,
            cancel,
            open,
        } => {
            let action = match (decline, cancel) {
                (true, _) => "decline",
                (_, true) => "cancel",
                _ => "accept",
            };
            parked::answer(ctx, &id, &pairs, action, open).await
        }
        Command::Parked => parked::list(ctx).await,
    }
}

/// The commands a daemon may run for a caller: those that only talk to servers. Their future
/// is `Send`, so the daemon runs each as a task of its own.
pub(crate) async fn dispatch_warm(ctx: &mut Context, command: Command) -> Result<Exit, Failure> {
    match command {
        Command::Call {
            server,
            rest,
            args_json,
            detach,
            park: _,
            output,
        } => call::run(ctx, &server, &rest, args_json.as_deref(), detach, &output).await,
        Command::Tasks { action, server } => tasks::run(ctx, action, server.as_deref()).await,
        Command::Tools { servers, refresh } => tools::run(ctx, &servers, refresh).await,
        Command::Search {
            query,
            limit,
            refresh,
            explain,
        } => search::run(ctx, &query.join(" "), limit, refresh, explain).await,
        Command::Servers => servers::run(ctx).await,
        Command::Resources { servers } => resources::run(ctx, &servers).await,
        Command::Read {
            server,
            uri,
            output,
        } => {
            let server = ctx.named_or_adhoc(server.as_deref(), "read SERVER URI")?;
            read::run(ctx, &server, &uri, output.as_deref()).await
        }
        Command::Prompts { servers } => prompts::run(ctx, &servers).await,
        Command::Skills { servers } => skills::run(ctx, &servers).await,
        Command::Skill {
            server,
            name,
            to,
            force,
        } => {
            let server = ctx.named_or_adhoc(server.as_deref(), "skill SERVER NAME")?;
            skill::run(ctx, &server, &name, to.as_deref(), force).await
        }
        Command::Prompt { server, rest } => {
            let (server, name, arguments) = prompt::words(ctx.adhoc.as_deref(), server, rest)?;
            prompt::run(ctx, &server, &name, &arguments).await
        }
        _ => Err(Failure::usage(
            "the daemon runs only commands that talk to servers",
        )),
    }
}

/// `auth [SERVER] [--reset]`: the server's URL and OAuth settings from its config entry (or
/// `--http`), then the auth module's login or reset.
async fn run_auth(
    ctx: &mut Context,
    server: Option<&str>,
    how: auth::How,
) -> Result<Exit, Failure> {
    let given = match (server, &ctx.adhoc) {
        (Some(given), _) => given.to_owned(),
        (None, Some(adhoc)) => adhoc.clone(),
        (None, None) => return Err(Failure::usage("auth needs the name of a remote server")),
    };
    let (name, remote) = ctx.hub.remote(&given)?;
    let Some(remote) = remote else {
        return Err(Failure::usage(format!(
            "{name} is not a remote server (it has a command, not a url): it needs no login"
        )));
    };
    let settings = ctx.hub.auth_settings(&remote);
    auth::run(ctx, &name, &remote.url, settings, how).await
}

pub(crate) use auth::start_for as start_login_for;

/// A server's answer read as `T`, beside the answer as sent (which `--json` prints whole).
pub(crate) fn with_raw<T: FromResult>(
    server: &str,
    method: &str,
    raw: Value,
) -> Result<(T, Value), Failure> {
    match T::from_result(raw.clone()) {
        Ok(result) => Ok((result, raw)),
        Err(error) => Err(Failure::new(
            Exit::Server,
            format!("server {server}: invalid {method} result: {error}"),
        )),
    }
}

impl Context {
    /// The server a command names, or under `--stdio` or `--http` the ad hoc one when it
    /// names none; `usage` is how the command is written with a name.
    fn named_or_adhoc(&self, given: Option<&str>, usage: &str) -> Result<String, Failure> {
        match (given, &self.adhoc) {
            (Some(given), _) => Ok(given.to_owned()),
            (None, Some(adhoc)) => Ok(adhoc.clone()),
            (None, None) => Err(Failure::usage(format!(
                "which server? use `mcp-cli {usage}`"
            ))),
        }
    }

    /// Reports a failure through this command's output, as [`Failure::report`] does.
    pub(crate) fn report(&mut self, failure: &Failure) {
        let text = failure.text(self.json, &self.naming);
        self.out.diagnostic(&text);
    }

    /// Reports what does not fail the command (a tool withheld, a listing cut) as a warning:
    /// under `--json`, `{"warning": {"kind", "message"}}`.
    pub(crate) fn warn(&mut self, failure: &Failure) {
        let text = failure.warning_text(self.json, &self.naming);
        self.out.diagnostic(&text);
    }

    /// A notice for the person (`mcp-cli: ...`); under `--json`, `{"warning": {"message"}}`
    /// without the prefix, so that every line a program reads on stderr is JSON.
    pub(crate) fn notice(&mut self, text: &str) {
        if !self.json {
            return self.out.diagnostic(text);
        }
        let message = text.strip_prefix("mcp-cli: ").unwrap_or(text);
        let message = message.strip_prefix("warning: ").unwrap_or(message);
        let warning = serde_json::json!({ "warning": { "message": message } });
        self.out.diagnostic(&warning.to_string());
    }

    /// Reports what a listing left out: withheld tools as warnings (the other tools are fine
    /// to use), and servers that could not be listed, whose failure is the exit code.
    pub(crate) fn report_left_out(&mut self, catalogue: &mut Catalogue) -> Exit {
        for error in std::mem::take(&mut catalogue.withheld) {
            self.warn(&Failure::from(error));
        }
        let mut exit = Exit::Success;
        for (_, error) in std::mem::take(&mut catalogue.failures) {
            let failure = Failure::from(error);
            self.report(&failure);
            exit = failure.exit;
        }
        exit
    }
}
