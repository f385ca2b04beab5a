//! How the hub runs one server: its timeouts and limits, its log, and what it is offered.

use std::path::Path;
use std::time::Duration;

use mcp_smol::Options;

use crate::config::{Command, ServerSpec};
use crate::hub::Settings;
use crate::logs::{self, RunLog};

/// The handshake budget of a launcher that may download the server on its first run: a fresh
/// `npx -y` or `uvx` install easily outlasts the usual 10 s.
pub(crate) const INSTALLING_HANDSHAKE: Duration = Duration::from_secs(120);

/// The handshake budget of a remote server that may log in through the browser on the way:
/// the auth module's five minutes for the login, and some for the handshake itself.
pub(crate) const BROWSER_LOGIN_HANDSHAKE: Duration = Duration::from_secs(330);

/// Programs that fetch and install what they run the first time.
const INSTALLING_LAUNCHERS: &[&str] = &["npx", "uvx", "pipx", "bunx", "pnpx", "docker"];

/// Options for one server, and its log (whose marker line wants the pid once it is known).
pub(crate) fn for_server(spec: &ServerSpec, settings: &Settings) -> (Options, Option<RunLog>) {
    let defaults = Options::default();
    // A remote server has no stderr to keep.
    let log_dir = settings.log_dir.as_ref().filter(|_| spec.remote.is_none());
    let log = log_dir.and_then(|dir| {
        let path = logs::log_path(dir, &spec.name);
        // A log that cannot be opened must not stop the server; the tail still reaches errors.
        RunLog::open(path, &spec.command.display()).ok()
    });
    let mut handshake_timeout = (spec.handshake_timeout.or(settings.handshake_timeout))
        .or_else(|| installs_on_first_use(&spec.command).then_some(INSTALLING_HANDSHAKE))
        .unwrap_or(defaults.core.handshake_timeout);
    // A login in the browser happens inside the handshake: the person gets the time it takes.
    if spec.remote.is_some() && settings.auth.login == crate::auth::Login::Browser {
        handshake_timeout = handshake_timeout.max(BROWSER_LOGIN_HANDSHAKE);
    }
    let options = Options {
        core: mcp_smol::proto::Config {
            client_name: settings.client_name.clone(),
            client_version: settings.client_version.clone(),
            handshake_timeout,
            // The default of every request; a call that brings a timeout of its own
            // (`--timeout`) carries it on its request instead.
            request_timeout: spec.call_timeout.unwrap_or(defaults.core.request_timeout),
            max_line_len: spec.max_message_len.unwrap_or(defaults.core.max_line_len),
            capabilities: mcp_smol::proto::ClientCapabilities {
                roots: !spec.roots.is_empty(),
                elicitation: settings.elicit.is_some(),
                sampling: false,
            },
            ..defaults.core
        },
        grace_period: settings.grace_period,
        term_period: settings.term_period,
        stderr_sink: log.clone().map(|log| Box::new(log) as mcp_smol::StderrSink),
    };
    (options, log)
}

/// Whether the command runs through a launcher that installs on first use (`npx -y pkg`,
/// `uvx pkg`, `pipx run pkg`, `docker run image`), by the program's file name.
fn installs_on_first_use(command: &Command) -> bool {
    let program = Path::new(&command.program).file_name();
    let program = program.and_then(|name| name.to_str()).unwrap_or_default();
    INSTALLING_LAUNCHERS.contains(&program)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(program: &str, configured: Option<Duration>, from_env: Option<Duration>) -> Duration {
        let mut spec = ServerSpec::new("s", Command::new(program));
        spec.handshake_timeout = configured;
        let settings = Settings {
            handshake_timeout: from_env,
            ..Settings::default()
        };
        for_server(&spec, &settings).0.core.handshake_timeout
    }

    #[test]
    fn launchers_that_install_get_a_longer_handshake() {
        let ten = Duration::from_secs(10);
        assert_eq!(budget("npx", None, None), INSTALLING_HANDSHAKE);
        assert_eq!(
            budget("/usr/local/bin/uvx", None, None),
            INSTALLING_HANDSHAKE
        );
        assert_eq!(budget("node", None, None), ten);
        // MCP_TIMEOUT (through the settings) and the entry's own key win, the entry first.
        assert_eq!(
            budget("npx", None, Some(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
        assert_eq!(budget("npx", Some(ten), Some(Duration::from_secs(5))), ten);
    }

    #[test]
    fn servers_hear_the_embedders_name_and_version() {
        let spec = ServerSpec::new("s", Command::new("node"));
        let core = for_server(&spec, &Settings::default()).0.core;
        let crate_own = (core.client_name, core.client_version);
        assert_eq!(
            crate_own,
            ("mcp-cli".to_owned(), env!("CARGO_PKG_VERSION").to_owned())
        );
        let settings = Settings {
            client_name: "agent".to_owned(),
            client_version: "1.2.3".to_owned(),
            ..Settings::default()
        };
        let core = for_server(&spec, &settings).0.core;
        assert_eq!(
            (core.client_name.as_str(), core.client_version.as_str()),
            ("agent", "1.2.3")
        );
    }

    #[test]
    fn a_browser_login_fits_in_a_remote_handshake() {
        let spec = ServerSpec::remote("r", crate::config::Remote::new("https://x.invalid/mcp"));
        let mut settings = Settings::default();
        let ten = Duration::from_secs(10);
        assert_eq!(for_server(&spec, &settings).0.core.handshake_timeout, ten);
        settings.auth.login = crate::auth::Login::Browser;
        let budget = for_server(&spec, &settings).0.core.handshake_timeout;
        assert_eq!(budget, BROWSER_LOGIN_HANDSHAKE);
        // A program logs in to nothing.
        let program = ServerSpec::new("p", Command::new("node"));
        assert_eq!(
            for_server(&program, &settings).0.core.handshake_timeout,
            ten
        );
    }
}
