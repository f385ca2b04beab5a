//! How the hub runs its servers, and a builder that spells it out a knob at a time.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_executor::Executor;

use crate::hub::{
    Approval, Ask, AskHandler, ElicitAnswer, ElicitHandler, Elicitation, RootsHandler,
};

/// How the hub runs its servers. Build it with [`Settings::builder`], or as a struct literal
/// over [`Settings::default`]:
///
/// ```
/// use mcp_client_cli::hub::{Ask, Settings};
/// let settings = Settings::builder()
///     .client("my-agent", "0.1.0")
///     .ask(|ask: Ask| async move { Err(format!("{} is not allowed today", ask.tool)) })
///     .build();
/// let same_name = Settings {
///     client_name: "my-agent".to_owned(),
///     ..Settings::default()
/// };
/// assert_eq!(settings.client_name, same_name.client_name);
/// ```
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where each server's stderr log goes (`<name>.log`); `None` keeps only the tail.
    pub log_dir: Option<PathBuf>,
    /// Sent to servers as `clientInfo.name`: the embedder's own name; the crate's by default.
    pub client_name: String,
    /// Sent to servers as `clientInfo.version`; the crate's by default.
    pub client_version: String,
    /// How long a server gets to exit after its stdin closes, before SIGTERM.
    pub grace_period: Duration,
    /// How long a server gets between SIGTERM and SIGKILL when it is stopped.
    pub term_period: Duration,
    /// The handshake budget of servers whose entry sets none (hosts' `MCP_TIMEOUT`); else
    /// 10 s, or 120 s for launchers that install on first use (`npx`, `uvx`, ...).
    pub handshake_timeout: Option<Duration>,
    /// Runs the servers' drivers and the hub's watchers. The caller must run it; `None` gives
    /// the hub an executor of its own, on a thread of its own.
    pub executor: Option<Arc<Executor<'static>>>,
    /// Decides on calls that an `ask` rule covers; `None` refuses them.
    pub ask: Option<AskHandler>,
    /// Fills in forms servers ask for; with it, every server is told the hub can
    /// (`elicitation` capability). `None` declares nothing and servers do not ask.
    pub elicit: Option<ElicitHandler>,
    /// Names the roots of servers with none configured (a gateway's host's own); with it,
    /// every server is told the hub has roots. `None`: only servers with roots configured
    /// are told, and given those.
    pub roots: Option<RootsHandler>,
    /// Where tool definitions are pinned (`<server>.json`): a pinned tool whose definition
    /// changes is withheld until [`Hub::trust`](crate::hub::Hub::trust). `None` pins nothing.
    pub pin_dir: Option<PathBuf>,
    /// Where the revision each `auto` server spoke last is kept (`eras.json`), so that the
    /// next connection speaks it at once instead of probing. `None` keeps nothing.
    pub era_file: Option<PathBuf>,
    /// Where each server's listings are kept (the catalogue on disk, one file per server), so
    /// that [`Hub::catalogue`](crate::hub::Hub::catalogue), [`tools_of`](crate::hub::Hub::tools_of)
    /// and what is built on them answer without starting a server that is not running.
    /// `None` keeps nothing: every listing starts its servers.
    pub catalogue_dir: Option<PathBuf>,
    /// Where the tasks of calls that servers run in the background are recorded (one file
    /// each), so that a later process can wait for them ([`Hub::wait_task`]) and the daemon
    /// can resume watching them. `None` keeps nothing.
    ///
    /// [`Hub::wait_task`]: crate::hub::Hub::wait_task
    pub task_dir: Option<PathBuf>,
    /// The OAuth of remote servers: whether one asking for authorization may start a login
    /// ([`auth::Settings::login`](crate::auth::Settings::login)), where tokens are kept, who
    /// shows the login URL. Nothing here comes from `MCP_CLI_*` variables; a server entry's
    /// own client and scopes win over it.
    pub auth: crate::auth::Settings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            log_dir: None,
            client_name: env!("CARGO_PKG_NAME").to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            grace_period: Duration::from_secs(2),
            // Long enough to flush a file, short enough that Ctrl-C still feels immediate.
            term_period: Duration::from_millis(500),
            handshake_timeout: None,
            executor: None,
            ask: None,
            elicit: None,
            roots: None,
            pin_dir: None,
            era_file: None,
            catalogue_dir: None,
            task_dir: None,
            auth: crate::auth::Settings::default(),
        }
    }
}

impl Settings {
    /// A builder starting from [`Settings::default`]; each method sets the field of its name.
    pub fn builder() -> SettingsBuilder {
        SettingsBuilder {
            settings: Self::default(),
        }
    }
}

/// Builds [`Settings`] one knob at a time; see [`Settings::builder`].
#[derive(Debug, Clone)]
#[must_use = "call build() to get the settings"]
pub struct SettingsBuilder {
    settings: Settings,
}

impl SettingsBuilder {
    /// The name and version servers hear in `clientInfo`: the embedder's own.
    pub fn client(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.settings.client_name = name.into();
        self.settings.client_version = version.into();
        self
    }

    /// Decides on calls that an `ask` rule covers ([`AskHandler::new`]).
    pub fn ask<F, Fut>(mut self, decide: F) -> Self
    where
        F: Fn(Ask) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Approval> + Send + 'static,
    {
        self.settings.ask = Some(AskHandler::new(decide));
        self
    }

    /// Fills in servers' forms ([`ElicitHandler::new`]); servers are told the hub can.
    pub fn elicit<F, Fut>(mut self, fill: F) -> Self
    where
        F: Fn(Elicitation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ElicitAnswer> + Send + 'static,
    {
        self.settings.elicit = Some(ElicitHandler::new(fill));
        self
    }

    /// Fills in servers' forms, and with [`ElicitHandler::taking_urls`] opens their links too
    /// ([`Settings::elicit`]): `.elicit_handler(ElicitHandler::new(fill).taking_urls())`.
    pub fn elicit_handler(mut self, handler: ElicitHandler) -> Self {
        self.settings.elicit = Some(handler);
        self
    }

    /// Names the roots of servers with none configured ([`RootsHandler::new`],
    /// [`Settings::roots`]); servers are told the hub has roots.
    pub fn roots<F, Fut>(mut self, list: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<serde_json::Value>> + Send + 'static,
    {
        self.settings.roots = Some(RootsHandler::new(list));
        self
    }

    /// Records the tasks of calls in `dir` ([`Settings::task_dir`]).
    pub fn task_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.task_dir = Some(dir.into());
        self
    }

    /// Keeps each server's stderr in `<dir>/<name>.log` ([`Settings::log_dir`]).
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.log_dir = Some(dir.into());
        self
    }

    /// Pins tool definitions in `dir` ([`Settings::pin_dir`]).
    pub fn pin_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.pin_dir = Some(dir.into());
        self
    }

    /// Keeps the revision each `auto` server spoke in `file` ([`Settings::era_file`]).
    pub fn era_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.settings.era_file = Some(file.into());
        self
    }

    /// Keeps each server's listings in `dir` ([`Settings::catalogue_dir`]).
    pub fn catalogue_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.catalogue_dir = Some(dir.into());
        self
    }

    /// [`Settings::grace_period`].
    pub fn grace_period(mut self, period: Duration) -> Self {
        self.settings.grace_period = period;
        self
    }

    /// [`Settings::term_period`].
    pub fn term_period(mut self, period: Duration) -> Self {
        self.settings.term_period = period;
        self
    }

    /// The handshake budget of servers whose entry sets none
    /// ([`Settings::handshake_timeout`]).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.settings.handshake_timeout = Some(timeout);
        self
    }

    /// Runs the hub's tasks on `executor`, which the caller runs ([`Settings::executor`]).
    pub fn executor(mut self, executor: Arc<Executor<'static>>) -> Self {
        self.settings.executor = Some(executor);
        self
    }

    /// The OAuth of remote servers ([`Settings::auth`]).
    pub fn auth(mut self, auth: crate::auth::Settings) -> Self {
        self.settings.auth = auth;
        self
    }

    /// The settings.
    pub fn build(self) -> Settings {
        self.settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Action, Glob, Rule};

    #[test]
    fn the_builder_sets_each_field_of_its_name_and_keeps_the_rest_default() {
        let settings = Settings::builder()
            .client("agent", "2.0.0")
            .log_dir("/logs")
            .pin_dir("/pins")
            .era_file("/eras.json")
            .catalogue_dir("/catalogue")
            .grace_period(Duration::from_secs(5))
            .term_period(Duration::from_secs(1))
            .handshake_timeout(Duration::from_secs(30))
            .ask(|ask: Ask| async move { Err(format!("no {}", ask.tool)) })
            .elicit(|_| async { ElicitAnswer::Decline })
            .build();
        assert_eq!(
            (
                settings.client_name.as_str(),
                settings.client_version.as_str()
            ),
            ("agent", "2.0.0")
        );
        assert_eq!(settings.log_dir, Some(PathBuf::from("/logs")));
        assert_eq!(settings.pin_dir, Some(PathBuf::from("/pins")));
        assert_eq!(settings.era_file, Some(PathBuf::from("/eras.json")));
        assert_eq!(settings.catalogue_dir, Some(PathBuf::from("/catalogue")));
        assert_eq!(settings.grace_period, Duration::from_secs(5));
        assert_eq!(settings.term_period, Duration::from_secs(1));
        assert_eq!(settings.handshake_timeout, Some(Duration::from_secs(30)));
        assert!(settings.executor.is_none());
        let ask = Ask {
            tool: "fx__add".to_owned(),
            arguments: serde_json::json!({}),
            rule: Rule {
                tool: Glob::new("fx__add").unwrap(),
                action: Action::Ask,
                origin: "/c.toml line 1".to_owned(),
                parkable: false,
            },
        };
        let handler = settings.ask.expect("an ask handler");
        let answer = futures_lite::future::block_on(handler.decide(ask));
        assert_eq!(answer, Err("no fx__add".to_owned()));
        assert!(settings.elicit.is_some());
        let plain = Settings::builder().build();
        assert_eq!(plain.client_name, Settings::default().client_name);
        assert!(plain.ask.is_none() && plain.elicit.is_none());
    }

    /// Every field has its method: the destructuring names them all, so a field added
    /// without one fails here first.
    #[test]
    fn the_builder_covers_every_setting() {
        let executor = Arc::new(Executor::new());
        let auth = crate::auth::Settings {
            scopes: vec!["read".to_owned()],
            ..crate::auth::Settings::default()
        };
        let Settings {
            log_dir,
            client_name,
            client_version,
            grace_period,
            term_period,
            handshake_timeout,
            executor: built_executor,
            ask,
            elicit,
            roots,
            pin_dir,
            era_file,
            catalogue_dir,
            task_dir,
            auth: built_auth,
        } = Settings::builder()
            .log_dir("/logs")
            .client("agent", "2.0.0")
            .grace_period(Duration::from_secs(5))
            .term_period(Duration::from_secs(1))
            .handshake_timeout(Duration::from_secs(30))
            .executor(executor.clone())
            .ask(|_| async { Ok(()) })
            .elicit_handler(ElicitHandler::new(|_| async { ElicitAnswer::Decline }).taking_urls())
            .roots(|_| async { Some(serde_json::json!({"roots": []})) })
            .pin_dir("/pins")
            .era_file("/eras.json")
            .catalogue_dir("/catalogue")
            .task_dir("/tasks")
            .auth(auth)
            .build();
        assert_eq!(log_dir, Some(PathBuf::from("/logs")));
        assert_eq!(
            (client_name.as_str(), client_version.as_str()),
            ("agent", "2.0.0")
        );
        assert_eq!(
            (grace_period, term_period, handshake_timeout),
            (
                Duration::from_secs(5),
                Duration::from_secs(1),
                Some(Duration::from_secs(30))
            )
        );
        assert!(built_executor.is_some_and(|built| Arc::ptr_eq(&built, &executor)));
        assert!(ask.is_some());
        assert!(elicit.is_some_and(|handler| handler.takes_urls()));
        assert!(roots.is_some());
        assert_eq!(pin_dir, Some(PathBuf::from("/pins")));
        assert_eq!(era_file, Some(PathBuf::from("/eras.json")));
        assert_eq!(catalogue_dir, Some(PathBuf::from("/catalogue")));
        assert_eq!(task_dir, Some(PathBuf::from("/tasks")));
        assert_eq!(built_auth.scopes, ["read"]);
    }
}
