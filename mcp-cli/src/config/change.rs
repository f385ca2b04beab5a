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
    /// The program to spawn (`command`); `None` for a remote entry.
    pub command: Option<String>,
    /// The program's arguments (`args`), in order.
    pub args: Vec<String>,
    /// Variables set for the program (`env`), values as written.
    pub env: BTreeMap<String, String>,
    /// The folder the program starts in (`cwd`); `None`: the caller's.
    pub cwd: Option<String>,
    /// The endpoint of a remote server (`url`); `None` for a program.
    pub url: Option<String>,
    /// Static HTTP headers sent to a remote server (`headers`).
    pub headers: BTreeMap<String, String>,
    /// The variable whose value is sent as `Authorization: Bearer ...`
    /// (`bearer_token_env_var`); the name is written, never the token.
    pub bearer_token_env_var: Option<String>,
    /// Written as `transport = "sse"`: the older HTTP+SSE transport only.
    pub sse: bool,
    /// The budget for spawn plus handshake, in seconds (`timeout_sec`).
    pub timeout_sec: Option<f64>,
    /// The budget of each call, in seconds, restarted by progress (`call_timeout_sec`).
    pub call_timeout_sec: Option<f64>,
    /// Globs of the only tool names shown and callable (`enabled_tools`); `None`: all.
    pub enabled_tools: Option<Vec<String>>,
    /// Globs of tool names hidden and refused (`disabled_tools`); wins over `enabled_tools`.
    pub disabled_tools: Vec<String>,
    /// Written as `enabled = false`.
    pub disabled: bool,
    /// Written as `protocol = "..."` unless it is [`Protocol::Auto`], the default.
    pub protocol: Protocol,
    /// Written as `permissions = { network = [...], filesystem = [...] }`: the sandbox.
    pub permissions: Option<NewPermissions>,
    /// Written as `env_pass = [...]`: our variables a sandboxed server gets by name.
    pub env_pass: Vec<String>,
    /// Written as `registry = {...}`: where `install` found the server.
    pub registry: Option<super::RegistryOrigin>,
}

/// A sandbox for a new entry: the hosts it may reach and the folders it may write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewPermissions {
    /// `host:port` patterns, reached through the hub's proxy.
    pub network: Vec<String>,
    /// Folders it may read and write, `${HOME}` and the like unexpanded.
    pub filesystem: Vec<String>,
}
