//! The settings of the server role, and what the host says of itself: below both the role's
//! machine (`server.rs`) and its stateless-era half (`server_stateless.rs`), which read them.

use std::time::Duration;

use serde_json::Value;

use crate::model::capabilities::ServerCapabilities;
use crate::model::types::Implementation;

/// Settings of a [`ServerConnection`](super::ServerConnection), fixed for its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Sent as `serverInfo.name`.
    pub name: String,
    /// Sent as `serverInfo.version`.
    pub version: String,
    /// Sent as `capabilities`; a `subscriptions/listen` is granted only the list changes
    /// declared here.
    pub capabilities: ServerCapabilities,
    /// Sent as `instructions`, if any.
    pub instructions: Option<String>,
    /// Longest line accepted from the host, in bytes, without its newline.
    pub max_line_len: usize,
    /// At most this many host requests wait for
    /// [`ServerConnection::respond`](super::ServerConnection::respond); more are refused at
    /// once with error -32000.
    pub max_open_requests: usize,
    /// Deadline of each request we send the host (an elicitation waits for a person).
    pub request_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            name: "mcp-proto".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            capabilities: ServerCapabilities::default(),
            instructions: None,
            max_line_len: 64 * 1024 * 1024,
            max_open_requests: 256,
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// What the host said about itself: in `initialize`, or in a stateless-era request's `_meta`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The negotiated revision, or in the stateless era the request's: one of
    /// [`SUPPORTED_PROTOCOL_VERSIONS`](crate::SUPPORTED_PROTOCOL_VERSIONS).
    pub protocol_version: String,
    /// The host's `clientInfo`; empty names when it sent none.
    pub client: Implementation,
    /// The host's `capabilities` object, as sent.
    pub capabilities: Value,
}

impl ClientInfo {
    /// Whether the host declared capability `name` (`elicitation`, `roots`, `sampling`).
    pub fn declares(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|c| !c.is_null())
    }

    /// Whether the host takes URL-mode elicitations (2025-11-25: `elicitation.url`); a bare
    /// `elicitation: {}` means forms only.
    pub fn takes_url_elicitation(&self) -> bool {
        let elicitation = self.capabilities.get("elicitation");
        elicitation
            .and_then(|e| e.get("url"))
            .is_some_and(Value::is_object)
    }
}
