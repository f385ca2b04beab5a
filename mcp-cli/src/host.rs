//! Assembling the host, one way for the cold command line, `serve` and the daemon: the config
//! files a run reads and the watcher that notices their edits, and the settings every hub of
//! this program starts from.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::approvals::Approvals;
use crate::auth;
use crate::config::{self, Config, ConfigError, Env, Source};
use crate::files::{Stamp, stamps};
use crate::hub::Settings;
use crate::state;

/// How often a [`Watch`] looks at the files while it waits.
const POLL: Duration = Duration::from_secs(1);

/// The config files a run reads (each with whether it must exist), and the folder relative
/// paths in them are taken from.
#[derive(Debug, Clone)]
pub(crate) struct ConfigFiles {
    files: Vec<(PathBuf, bool)>,
    /// Those of `files` found in the folder rather than chosen: their entries wait for a
    /// person's approval ([`crate::approvals`]).
    project: Vec<PathBuf>,
    cwd: PathBuf,
    /// Where the approvals are kept.
    approvals: PathBuf,
}

impl ConfigFiles {
    /// The `--config` files given, else those found from `cwd` (see [`config::discover`]).
    pub(crate) fn discover(configs: &[PathBuf], env: Env<'_>, cwd: PathBuf) -> Self {
        let files = config::discover(configs, env, &cwd);
        let project = config::project_files(configs, env, &cwd);
        let approvals = state::Folder::of_env(env).approvals();
        Self {
            files,
            project,
            cwd,
            approvals,
        }
    }

    /// The same files, none of them required: `add` creates the one it writes to.
    pub(crate) fn none_required(mut self) -> Self {
        self.files
            .iter_mut()
            .for_each(|(_, required)| *required = false);
        self
    }

    /// The files' full paths, whatever folder they were named from: `--config c.toml` and
    /// `--config /that/c.toml` must name one daemon.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        let full = |path: &PathBuf| {
            let joined = self.cwd.join(path);
            std::fs::canonicalize(&joined).unwrap_or(joined)
        };
        self.files.iter().map(|(path, _)| full(path)).collect()
    }

    /// Reads them as they are now, with the presets: the command line opts into them (an
    /// embedder's [`config::load`] has none). A project file's entry not approved for its
    /// folder as it now stands is held back ([`Config::pending`]), so that no command, `serve`
    /// or daemon starts it and it replaces no entry of the user's. An entry that would start
    /// our own gateway over them is refused here, before anything starts.
    pub(crate) fn load(&self, env: Env<'_>) -> Result<Config, ConfigError> {
        let approvals = Approvals::read(self.approvals.clone());
        let gate = |server: &config::Server, written: &[String]| match &server.source {
            Source::File(path) if self.project.contains(path) => approvals.admits(server, written),
            _ => true,
        };
        let mut config = config::load_with_presets(&self.files, env, &self.cwd, &gate)?;
        crate::nesting::refuse_loops(&mut config);
        Ok(config)
    }

    /// Where the approvals of project servers are kept.
    pub(crate) fn approvals(&self) -> Approvals {
        Approvals::read(self.approvals.clone())
    }

    /// A watcher of these files, which have not changed yet. An approval counts as an edit:
    /// the servers it lets in start without a restart.
    pub(crate) fn watch(&self) -> Watch {
        let mut paths = self.paths();
        paths.push(self.approvals.clone());
        Watch {
            seen: stamps(&paths),
            paths,
            files: self.clone(),
        }
    }
}

/// The one line `tools`, `search` and `serve` say on stderr while project servers wait for
/// approval, so that nobody wonders where they went; `None` when none waits. It points at
/// the table that lists them, which alone names the command a person approves them with.
pub(crate) fn pending_notice(pending: &[config::Pending]) -> Option<String> {
    let names: Vec<&str> = pending.iter().map(|p| p.server.name.as_str()).collect();
    let mut files: Vec<String> = (pending.iter())
        .map(|p| crate::hub::source_name(&p.server.source))
        .collect();
    files.dedup();
    let count = match names.len() {
        0 => return None,
        1 => "1 project server".to_owned(),
        n => format!("{n} project servers"),
    };
    Some(format!(
        "mcp-cli: {count} ({}) in {} wait for a person's approval and did not start; \
         `mcp-cli servers` lists them",
        names.join(", "),
        files.join(", ")
    ))
}

/// Notices edits of the config files by their stamps (time and length, [`crate::files`]):
/// polling is simple and portable, and a second is quick enough for an edit by hand.
/// Creating or removing a file is an edit too.
#[derive(Debug)]
pub(crate) struct Watch {
    files: ConfigFiles,
    paths: Vec<PathBuf>,
    seen: Vec<Option<Stamp>>,
}

impl Watch {
    /// Whether a file changed since the last look.
    pub(crate) fn look(&mut self) -> bool {
        let now = stamps(&self.paths);
        let changed = now != self.seen;
        self.seen = now;
        changed
    }

    /// Returns once a file has changed since the last look.
    pub(crate) async fn changed(&mut self) {
        while !self.look() {
            async_io::Timer::after(POLL).await;
        }
    }

    /// The files watched.
    pub(crate) fn files(&self) -> &ConfigFiles {
        &self.files
    }
}

/// What every hub of this program starts from, whether a command, `serve` or the daemon runs
/// it: the same state folder (logs, pins, eras, catalogue), the same handshake budget, the same executor, so
/// that a tool withheld from `call` is withheld from the gateway too, and the OAuth the
/// `MCP_CLI_*` variables ask for (the hub itself reads none). Each caller adds only how it
/// asks and answers.
pub(crate) fn settings(
    state: &state::Folder,
    executor: &Arc<async_executor::Executor<'static>>,
    env: Env<'_>,
) -> Settings {
    // One made open to others by an older version is closed now; the folders in it are as
    // they are made or used, and one that is not ours is refused there.
    let _ = crate::files::tighten_dir(state.root());
    Settings {
        log_dir: Some(state.logs()),
        pin_dir: Some(state.pins()),
        era_file: Some(state.eras()),
        catalogue_dir: Some(state.catalogue()),
        task_dir: Some(state.tasks()),
        client_name: "mcp-cli".to_owned(),
        handshake_timeout: mcp_timeout(env),
        executor: Some(executor.clone()),
        auth: auth::Settings {
            notice: Some(Arc::new(print_login)),
            ..auth::Settings::from_env(env)
        },
        ..Settings::default()
    }
}

/// A browser login's prompt, on stderr beside the command's other messages.
fn print_login(prompt: auth::LoginPrompt) {
    match prompt {
        auth::LoginPrompt::Opening { server, url, wait } => {
            let minutes = wait.as_secs().div_ceil(60);
            eprintln!(
                "To log in to {server}, open this URL in a browser (opening one now):\n  {url}\n\
                 Waiting up to {minutes} minutes for the browser to come back (Ctrl-C cancels)."
            );
        }
        auth::LoginPrompt::NoBrowser { .. } => {
            eprintln!("No browser could be opened: open the URL above yourself.");
        }
        auth::LoginPrompt::Paste { server, url } => {
            eprintln!(
                "To log in to {server}, open this URL in a browser on any machine:\n  {url}\n\
                 Once you approve, the browser goes to a 127.0.0.1 address that may not load: \
                 paste that whole address here and press Enter."
            );
        }
        auth::LoginPrompt::DeviceCode {
            server,
            user_code,
            verification_uri,
            verification_uri_complete,
            expires_in,
        } => {
            let minutes = expires_in.as_secs().div_ceil(60);
            eprintln!(
                "To log in to {server}, open {verification_uri} on any device and enter the \
                 code {user_code}"
            );
            if let Some(complete) = verification_uri_complete {
                eprintln!("(or open {complete}, which carries the code)");
            }
            eprintln!("Waiting up to {minutes} minutes for the approval (Ctrl-C cancels).");
        }
    }
}

/// `MCP_TIMEOUT`: the handshake budget in milliseconds, as other hosts read it.
fn mcp_timeout(env: Env<'_>) -> Option<Duration> {
    let millis: f64 = env("MCP_TIMEOUT")?.trim().parse().ok()?;
    Duration::try_from_secs_f64(millis / 1000.0)
        .ok()
        .filter(|budget| !budget.is_zero())
}
