//! The settings of a client connection, and the client capabilities it declares.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::model::capabilities::TASKS_EXTENSION;
use crate::model::versions::Protocol;
#[cfg(doc)]
use crate::{
    machines::connection::{Connection, Event},
    model::error::RequestError,
};

/// The default of [`Config::max_listed`]: far more tools than a model can choose among (hosts
/// warn past about a hundred), and far fewer than a hostile server's million.
pub(crate) const DEFAULT_MAX_LISTED: usize = 5000;

/// Settings fixed for the life of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Sent as `clientInfo`.
    pub client_name: String,
    /// Sent as `clientInfo.version`.
    pub client_version: String,
    /// Budget for the `initialize` answer (on expiry the connection closes), for the
    /// `server/discover` probe's (on expiry the handshake era begins) and for the `server/discover`
    /// answer at a fixed stateless revision (on expiry the connection closes).
    pub handshake_timeout: Duration,
    /// Default deadline of each request, restarted by progress notifications.
    pub request_timeout: Duration,
    /// However much progress a server reports, a request fails after this long in total
    /// (or after its own timeout, if that is longer).
    pub max_request_time: Duration,
    /// Longest line accepted from the server, in bytes, without its newline.
    pub max_line_len: usize,
    /// At most this many entries of one listing (tools, resources, resource templates,
    /// prompts) are kept, over all its pages: a [`Pager`](crate::Pager) made with
    /// [`max_items`](crate::Pager::max_items) stops there and says so in
    /// [`Listing::capped`](crate::Listing::capped), and a long line is parsed keeping one
    /// more than this of a listing's entries, dropping the rest as they are read, so a
    /// listing of a million entries costs this many.
    pub max_listed: usize,
    /// What we offer the server; by default nothing, so every server request but `ping` is
    /// refused.
    pub capabilities: ClientCapabilities,
    /// How long a declared server request ([`Event::ServerRequest`]) waits for
    /// [`Connection::respond`] before it is refused (an input request of the stateless era is
    /// then left out of the retry's `inputResponses`).
    pub server_request_timeout: Duration,
    /// Which revision to speak: found out by a `server/discover` probe, or fixed.
    pub protocol: Protocol,
    /// Stateless era: the least severe log level the server should send
    /// (`io.modelcontextprotocol/logLevel` in every request's `_meta`); none when `None`. The
    /// handshake era sets it with `logging/setLevel` instead.
    pub log_level: Option<String>,
    /// Stateless era: at most this many `input_required` answers per request; one more fails
    /// it with [`RequestError::TooManyInputRounds`].
    pub max_input_rounds: u32,
}

/// Client capabilities the caller declares (in `initialize`, or in every stateless-era
/// request's `_meta`). Each one declared turns the matching server request (or stateless-era
/// input request) into an [`Event::ServerRequest`] for the caller to answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCapabilities {
    /// `roots/list`: the caller names the directories the server may work in.
    pub roots: bool,
    /// `elicitation/create`: the caller asks a person to fill in a form.
    pub elicitation: bool,
    /// With `elicitation`: URL mode too (2025-11-25), the caller shows a server's link and
    /// opens it once the person agrees. Declared `elicitation: {"form": {}, "url": {}}`;
    /// without it, `elicitation: {}`, which every revision reads as forms only.
    pub elicitation_url: bool,
    /// `sampling/createMessage`: the caller runs a language model for the server.
    pub sampling: bool,
    /// Stateless era: the tasks extension (`io.modelcontextprotocol/tasks`), so a
    /// `tools/call` may answer with a task ([`Task::created_by`](crate::tasks::Task::created_by)).
    /// The handshake era needs no declaration: a call asks with
    /// [`Request::as_task`](crate::Request::as_task).
    pub tasks: bool,
}

impl ClientCapabilities {
    pub(super) fn to_json(self, stateless: bool) -> Value {
        let declared = [
            ("roots", self.roots),
            ("elicitation", self.elicitation),
            ("sampling", self.sampling),
        ];
        let mut capabilities: Map<String, Value> = (declared.into_iter())
            .filter(|(_, on)| *on)
            .map(|(name, _)| (name.to_owned(), json!({})))
            .collect();
        if self.elicitation && self.elicitation_url {
            capabilities.insert("elicitation".to_owned(), json!({"form": {}, "url": {}}));
        }
        if stateless && self.tasks {
            let extensions = json!({ TASKS_EXTENSION: {} });
            capabilities.insert("extensions".to_owned(), extensions);
        }
        Value::Object(capabilities)
    }

    /// Whether a server request of this method is the caller's to answer.
    pub(super) fn covers(self, method: &str) -> bool {
        match method {
            "roots/list" => self.roots,
            "elicitation/create" => self.elicitation,
            "sampling/createMessage" => self.sampling,
            _ => false,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            client_name: "mcp-proto".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_request_time: Duration::from_secs(600),
            max_line_len: 64 * 1024 * 1024,
            max_listed: DEFAULT_MAX_LISTED,
            capabilities: ClientCapabilities::default(),
            // Long enough for a person to fill in a form.
            server_request_timeout: Duration::from_secs(300),
            protocol: Protocol::Auto,
            log_level: None,
            max_input_rounds: 8,
        }
    }
}
