//! How the hub runs one server: its timeouts and limits, its log, what it is offered, and
//! which protocol revision each connection speaks.

use std::path::Path;
use std::time::Duration;

use mcp_smol::Options;
use mcp_smol::proto::{
    CloseReason, Era, LATEST_PROTOCOL_VERSION, Protocol, RequestError, ServerInfo,
};

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
pub(crate) fn for_server(
    spec: &ServerSpec,
    settings: &Settings,
    protocol: Protocol,
) -> (Options, Option<RunLog>) {
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
            max_listed: spec.max_listed.unwrap_or(defaults.core.max_listed),
            capabilities: mcp_smol::proto::ClientCapabilities {
                roots: !spec.roots.is_empty() || settings.roots.is_some(),
                elicitation: settings.elicit.is_some(),
                elicitation_url: (settings.elicit.as_ref()).is_some_and(|e| e.takes_urls()),
                sampling: false,
                // The hub takes a task wherever a call may become one: it waits for it, or
                // hands it to a caller that asked for it.
                tasks: true,
            },
            protocol,
            ..defaults.core
        },
        grace_period: settings.grace_period,
        term_period: settings.term_period,
        stderr_sink: log.clone().map(|log| Box::new(log) as mcp_smol::StderrSink),
    };
    (options, log)
}

/// Where a connection's revision came from, which decides whether it is cached and what a
/// failure to connect means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Basis {
    /// Named in the config: spoken as is, never probed, never cached; a server that does
    /// not speak it fails with an error naming it.
    Configured,
    /// An earlier run's verdict, to be forgotten if the connection shows it wrong.
    Cached,
    /// Found out on this connection ([`Protocol::Auto`]).
    Probe,
    /// The handshake era, for a server that ended on the probe.
    AfterProbe,
}

impl Basis {
    /// Whether the revision a connection of this basis speaks is the server's verdict.
    pub(crate) fn is_verdict(self) -> bool {
        matches!(self, Self::Cached | Self::Probe | Self::AfterProbe)
    }
}

/// The revision to connect with. A configured revision is spoken as configured; `auto` speaks
/// the cached verdict if there is one, and finds out (a probe) if not, over stdio and HTTP
/// alike.
pub(crate) fn choose(configured: Protocol, cached: Option<&'static str>) -> (Protocol, Basis) {
    match (configured, cached) {
        (Protocol::Revision(_), _) => (configured, Basis::Configured),
        (Protocol::Auto, Some(revision)) => (Protocol::Revision(revision), Basis::Cached),
        (Protocol::Auto, None) => (Protocol::Auto, Basis::Probe),
    }
}

/// What to connect with after a connection of `basis` speaking `protocol` ended with `reason`
/// before it was ready; `None` reports the failure. A cached verdict the failure shows wrong
/// is dropped for one probe ([`Protocol::Auto`]); a server that ended on the probe, or that
/// the probe found stateless and whose first listing then asked for `initialize`
/// ([`claimed_stateless`]), is started again in the handshake era. Neither step leads back to
/// itself, so at most two retries follow a failure and nothing loops.
pub(crate) fn after_failure(
    basis: Basis,
    protocol: Protocol,
    reason: &CloseReason,
) -> Option<(Protocol, Basis)> {
    match basis {
        Basis::Cached if era_mismatch(protocol, reason) => Some((Protocol::Auto, Basis::Probe)),
        Basis::Probe
            if matches!(
                reason,
                CloseReason::EndedOnProbe | CloseReason::NotStateless(_)
            ) =>
        {
            Some((
                Protocol::Revision(LATEST_PROTOCOL_VERSION),
                Basis::AfterProbe,
            ))
        }
        _ => None,
    }
}

/// Whether a connection speaking `protocol` (cached or configured) ended in a way that says
/// the server does not speak that era: in the handshake era, its handshake refused or answered with a
/// revision we do not speak; in the stateless era, `server/discover` showing a handshake-era
/// server; in either, the server ending on the probe. A crash or a timeout says nothing about
/// the era.
pub(crate) fn era_mismatch(protocol: Protocol, reason: &CloseReason) -> bool {
    matches!(
        (protocol.era(), reason),
        (_, CloseReason::EndedOnProbe)
            | (
                Some(Era::Handshake),
                CloseReason::InitializeFailed(_) | CloseReason::UnsupportedVersion { .. }
            )
            | (Some(Era::Stateless), CloseReason::NotStateless(_))
    )
}

/// Why a server found to speak the stateless era is not one after all, when its first listing
/// (`error`) is refused as a handshake-era server refuses requests before `initialize`: it
/// claimed the revision in `server/discover` and then asked for the handshake.
pub(crate) fn claimed_stateless(
    server: &ServerInfo,
    method: &str,
    error: &mcp_smol::Error,
) -> Option<CloseReason> {
    let mcp_smol::Error::Request(RequestError::Remote(refusal)) = error else {
        return None;
    };
    let asks_for_handshake = refusal.message.to_ascii_lowercase().contains("initializ");
    (server.era() == Some(Era::Stateless) && asks_for_handshake).then(|| {
        CloseReason::NotStateless(format!(
            "it claimed revision {} in `server/discover`, then refused `{method}` as a \
             handshake-era server does before `initialize`: {refusal}",
            server.protocol_version
        ))
    })
}

/// The line the server's log gets when it is started again in the handshake era after
/// `reason`.
pub(crate) fn handshake_after(protocol: Protocol, reason: &CloseReason) -> String {
    let why = match reason {
        CloseReason::NotStateless(detail) => detail.as_str(),
        _ => "the server ended on the `server/discover` probe",
    };
    format!("the handshake era ({protocol}): {why}")
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

    const OLD: Protocol = Protocol::Revision("2025-06-18");
    const NEW: Protocol = Protocol::Revision("2026-07-28");

    #[test]
    fn the_configured_revision_wins_then_the_cached_one_then_a_probe() {
        assert_eq!(choose(OLD, None), (OLD, Basis::Configured));
        assert_eq!(choose(OLD, Some("2026-07-28")), (OLD, Basis::Configured));
        assert_eq!(choose(NEW, None), (NEW, Basis::Configured));
        assert_eq!(
            choose(Protocol::Auto, Some("2026-07-28")),
            (NEW, Basis::Cached)
        );
        assert_eq!(choose(Protocol::Auto, None), (Protocol::Auto, Basis::Probe));
        // Only what a server told us is its verdict.
        let verdicts = [Basis::Cached, Basis::Probe, Basis::AfterProbe];
        for basis in [Basis::Configured].into_iter().chain(verdicts) {
            assert_eq!(basis.is_verdict(), verdicts.contains(&basis), "{basis:?}");
        }
    }

    #[test]
    fn a_wrong_cached_verdict_is_probed_once_and_a_second_failure_reported() {
        let refused = CloseReason::InitializeFailed(mcp_smol::proto::RpcError {
            code: -32602,
            message: "unsupported".to_owned(),
            data: None,
        });
        let unsupported = CloseReason::UnsupportedVersion {
            requested: "2025-06-18".to_owned(),
            offered: "2099-01-01".to_owned(),
        };
        let not_stateless = CloseReason::NotStateless("it answered -32601".to_owned());
        let wrong = [(OLD, &refused), (OLD, &unsupported), (NEW, &not_stateless)];
        for (cached, reason) in wrong.into_iter().chain([
            (OLD, &CloseReason::EndedOnProbe),
            (NEW, &CloseReason::EndedOnProbe),
        ]) {
            let retry = after_failure(Basis::Cached, cached, reason);
            assert_eq!(retry, Some((Protocol::Auto, Basis::Probe)), "{reason}");
        }
        // The other era's failures say nothing about a verdict.
        assert_eq!(after_failure(Basis::Cached, OLD, &not_stateless), None);
        assert_eq!(after_failure(Basis::Cached, NEW, &refused), None);
        for reason in [&refused, &unsupported, &not_stateless] {
            let cached = if *reason == not_stateless { NEW } else { OLD };
            let retry = after_failure(Basis::Cached, cached, reason);
            assert_eq!(retry, Some((Protocol::Auto, Basis::Probe)));
            // The probe fails the same way: reported, not retried. (A probe ends with
            // `NotStateless` only when the server claimed the era and then asked for
            // `initialize`: the handshake follows, below.)
            if *reason != not_stateless {
                assert_eq!(after_failure(Basis::Probe, Protocol::Auto, reason), None);
            }
            // Configured: the server's error, as it is.
            assert_eq!(after_failure(Basis::Configured, cached, reason), None);
            assert_eq!(after_failure(Basis::AfterProbe, OLD, reason), None);
        }
        // A server that ends on the probe is started again in the handshake era, once.
        let ended = CloseReason::EndedOnProbe;
        let handshake = Protocol::Revision(LATEST_PROTOCOL_VERSION);
        assert_eq!(
            after_failure(Basis::Probe, Protocol::Auto, &ended),
            Some((handshake, Basis::AfterProbe))
        );
        assert_eq!(after_failure(Basis::AfterProbe, handshake, &ended), None);
        // So is one that claimed the stateless era and then asked for `initialize`.
        assert_eq!(
            after_failure(Basis::Probe, Protocol::Auto, &not_stateless),
            Some((handshake, Basis::AfterProbe))
        );
        assert_eq!(
            after_failure(Basis::AfterProbe, handshake, &not_stateless),
            None
        );
        assert_eq!(after_failure(Basis::Configured, NEW, &ended), None);
        // A crash or a timeout says nothing about the era.
        let crash = [
            CloseReason::Eof,
            CloseReason::HandshakeTimedOut {
                after: Duration::from_secs(10),
            },
            CloseReason::Transport("refused".to_owned()),
        ];
        for reason in &crash {
            assert_eq!(after_failure(Basis::Cached, OLD, reason), None, "{reason}");
            assert_eq!(after_failure(Basis::Probe, Protocol::Auto, reason), None);
        }
    }

    #[test]
    fn no_failure_is_retried_more_than_twice() {
        let reasons = [
            CloseReason::Eof,
            CloseReason::EndedOnProbe,
            CloseReason::NotStateless("no".to_owned()),
            CloseReason::InitializeFailed(mcp_smol::proto::RpcError::method_not_found("x")),
            CloseReason::UnsupportedVersion {
                requested: "a".to_owned(),
                offered: "b".to_owned(),
            },
        ];
        for cached in [None, Some("2025-11-25"), Some("2026-07-28")] {
            for reason in &reasons {
                let (mut protocol, mut basis) = choose(Protocol::Auto, cached);
                let mut attempts = 1;
                while let Some(next) = after_failure(basis, protocol, reason) {
                    (protocol, basis) = next;
                    attempts += 1;
                    assert!(attempts <= 3, "{cached:?} {reason}: {basis:?}");
                }
            }
        }
    }

    #[test]
    fn a_stateless_server_that_asks_for_initialize_claimed_the_era_wrongly() {
        let speaking = |revision: &str| ServerInfo {
            protocol_version: revision.to_owned(),
            supported_versions: Vec::new(),
            server: Default::default(),
            capabilities: Default::default(),
            instructions: None,
            fallback: None,
        };
        let (stateless, handshake) = (speaking("2026-07-28"), speaking(LATEST_PROTOCOL_VERSION));
        let refusal = |message: &str| {
            mcp_smol::Error::Request(RequestError::Remote(mcp_smol::proto::RpcError {
                code: -32600,
                message: message.to_owned(),
                data: None,
            }))
        };
        let not_initialized = refusal("Server not initialized");
        let reason = claimed_stateless(&stateless, "tools/list", &not_initialized);
        let Some(CloseReason::NotStateless(detail)) = reason else {
            panic!("{reason:?}");
        };
        assert!(detail.contains("claimed revision 2026-07-28"), "{detail}");
        assert!(detail.contains("Server not initialized"), "{detail}");
        // Another refusal, or the handshake era, says nothing about the era.
        let other = refusal("Invalid request");
        assert_eq!(claimed_stateless(&stateless, "tools/list", &other), None);
        assert_eq!(
            claimed_stateless(&handshake, "tools/list", &not_initialized),
            None
        );
    }

    fn budget(program: &str, configured: Option<Duration>, from_env: Option<Duration>) -> Duration {
        let mut spec = ServerSpec::new("s", Command::new(program));
        spec.handshake_timeout = configured;
        let settings = Settings {
            handshake_timeout: from_env,
            ..Settings::default()
        };
        for_server(&spec, &settings, Protocol::Auto)
            .0
            .core
            .handshake_timeout
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
        let core = for_server(&spec, &Settings::default(), Protocol::Auto)
            .0
            .core;
        let crate_own = (core.client_name, core.client_version);
        assert_eq!(
            crate_own,
            (
                "mcp-client-cli".to_owned(),
                env!("CARGO_PKG_VERSION").to_owned()
            )
        );
        let settings = Settings {
            client_name: "agent".to_owned(),
            client_version: "1.2.3".to_owned(),
            ..Settings::default()
        };
        let core = for_server(&spec, &settings, Protocol::Auto).0.core;
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
        assert_eq!(
            for_server(&spec, &settings, Protocol::Auto)
                .0
                .core
                .handshake_timeout,
            ten
        );
        settings.auth.login = crate::auth::Login::Browser;
        let budget = for_server(&spec, &settings, Protocol::Auto)
            .0
            .core
            .handshake_timeout;
        assert_eq!(budget, BROWSER_LOGIN_HANDSHAKE);
        // A program logs in to nothing.
        let program = ServerSpec::new("p", Command::new("node"));
        assert_eq!(
            for_server(&program, &settings, Protocol::Auto)
                .0
                .core
                .handshake_timeout,
            ten
        );
    }
}
