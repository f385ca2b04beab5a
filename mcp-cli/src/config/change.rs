//! What an edit of a config file works with: the native entry to write, and why an edit
//! may be refused. A file of its own so the format editors (`edit_json.rs`, `edit_toml.rs`)
//! and the checked front (`edit.rs`) all take them from below.

use std::collections::BTreeMap;

use mcp_proto::Protocol;

/// Why an edit could not be made; `edit.rs` phrases it with the file's name.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    NotFound,
    /// The name is there more than once (two tables, or twice in one).
    Ambiguous,
    /// The structure is not one the editor can change without touching other bytes.
    Unreadable,
    Exists,
}

/// A native entry to write, with its values as they should appear in the file (`${VAR}`
/// left unexpanded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewServer {
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub bearer_token_env_var: Option<String>,
    /// Written as `transport = "sse"`: the older HTTP+SSE transport only.
    pub sse: bool,
    pub timeout_sec: Option<f64>,
    pub call_timeout_sec: Option<f64>,
    pub enabled_tools: Option<Vec<String>>,
    pub disabled_tools: Vec<String>,
    /// Written as `enabled = false`.
    pub disabled: bool,
    /// Written as `protocol = "..."` unless it is [`Protocol::Auto`], the default.
    pub protocol: Protocol,
}
