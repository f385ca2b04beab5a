//! How to run one server: the core's settings plus what only the adapter decides.

use std::fmt;
use std::time::Duration;

use crate::process::StderrSink;

/// How to run one server.
///
/// The defaults: client name `mcp-smol`, either era ([`proto::Protocol::Auto`]: a
/// `server/discover` probe, then the stateless era or the `initialize` handshake), a
/// handshake budget of 10 s (spawn plus the probe, and again for `initialize` when the probe
/// goes unanswered), 60 s per request (restarted by progress, 600 s at most), messages up to
/// 64 MiB, no client capabilities declared; then 2 s for the server to exit once its stdin
/// closes, and 2 s between SIGTERM and SIGKILL.
pub struct Options {
    /// Every protocol setting: client name, handshake budget, request timeouts, line limit.
    pub core: proto::Config,
    /// How long the server gets to exit after its stdin closes, before SIGTERM.
    pub grace_period: Duration,
    /// How long after SIGTERM before SIGKILL.
    pub term_period: Duration,
    /// Receives a copy of everything the server writes to stderr.
    pub stderr_sink: Option<StderrSink>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            core: proto::Config {
                client_name: "mcp-smol".to_owned(),
                client_version: env!("CARGO_PKG_VERSION").to_owned(),
                ..proto::Config::default()
            },
            grace_period: Duration::from_secs(2),
            term_period: Duration::from_secs(2),
            stderr_sink: None,
        }
    }
}

/// The core's settings read and written through the options themselves:
/// `options.request_timeout` is `options.core.request_timeout`.
impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("core", &self.core)
            .field("grace_period", &self.grace_period)
            .field("term_period", &self.term_period)
            .field("stderr_sink", &self.stderr_sink.is_some())
            .finish()
    }
}
