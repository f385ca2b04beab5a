//! Codex CLI's servers: `[mcp_servers.<name>]` in its `config.toml`.

use std::collections::BTreeMap;
use std::time::Duration;

use mcp_proto::Protocol;
use serde::Deserialize;

use super::expand::{RawServer, RawServers};
use super::policy::{Glob, ToolFilter};
use super::units::{bytes, count, milliseconds, protocol, seconds};

/// Unknown keys are skipped: Codex has more than this reader needs (`tools`, `env_vars`, ...).
#[derive(Deserialize)]
pub(super) struct CodexServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    enabled: Option<bool>,
    url: Option<String>,
    #[serde(default)]
    http_headers: BTreeMap<String, String>,
    /// Header name to the environment variable holding its value.
    #[serde(default)]
    env_http_headers: BTreeMap<String, String>,
    bearer_token_env_var: Option<String>,
    #[serde(default, deserialize_with = "seconds")]
    startup_timeout_sec: Option<Duration>,
    #[serde(default, deserialize_with = "milliseconds")]
    startup_timeout_ms: Option<Duration>,
    #[serde(default, deserialize_with = "seconds")]
    tool_timeout_sec: Option<Duration>,
    enabled_tools: Option<Vec<Glob>>,
    #[serde(default)]
    disabled_tools: Vec<Glob>,
    /// Ours, not Codex's (which ignores keys it does not know): the revision to speak.
    #[serde(default, deserialize_with = "protocol")]
    protocol: Option<Protocol>,
    /// Ours too: what `call` prints before it writes the result to a file.
    #[serde(default, deserialize_with = "bytes")]
    max_result_bytes: Option<u64>,
    /// Ours too: `false` turns the outputSchema check off.
    validate_output: Option<bool>,
    /// Ours too: how many entries of each listing are kept.
    #[serde(default, deserialize_with = "count")]
    max_listed: Option<usize>,
}

pub(super) fn servers(table: BTreeMap<String, CodexServer>) -> RawServers {
    let raw = |mut s: CodexServer| RawServer {
        headers: {
            // The same as writing `${VAR}` as the value, which expands (or names the variable).
            let from_env = (s.env_http_headers.iter())
                .map(|(name, variable)| (name.clone(), format!("${{{variable}}}")));
            s.http_headers.extend(from_env);
            s.http_headers
        },
        command: s.command,
        args: s.args,
        env: s.env,
        cwd: s.cwd,
        enabled: s.enabled.unwrap_or(true),
        url: s.url,
        bearer_token_env_var: s.bearer_token_env_var,
        handshake_timeout: s.startup_timeout_sec.or(s.startup_timeout_ms),
        call_timeout: s.tool_timeout_sec,
        tools: ToolFilter {
            enabled: s.enabled_tools,
            disabled: s.disabled_tools,
        },
        protocol: s.protocol.unwrap_or_default(),
        max_result_bytes: s.max_result_bytes,
        validate_output: s.validate_output,
        max_listed: s.max_listed,
        ..RawServer::default()
    };
    table.into_iter().map(|(name, s)| (name, raw(s))).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::testing::{entry, parse, remote, spec};
    use crate::config::{Entry, Glob};

    #[test]
    fn codex_toml() {
        let text = r#"
model = "o3"

[mcp_servers.git]
command = "uvx"
args = ["mcp-server-git"]
startup_timeout_ms = 2500
tool_timeout_sec = 30
enabled = false

[mcp_servers.remote]
url = "https://example.invalid/mcp"
http_headers = { X-Team = "core" }
env_http_headers = { X-Key = "TOKEN" }

[mcp_servers.fs]
command = "fs"
enabled_tools = ["read_*"]
disabled_tools = ["read_secret", "read_other"]
"#;
        let servers = parse("config.toml", text).unwrap().servers;
        let git = spec(&servers, "git");
        assert_eq!(git.handshake_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(git.call_timeout, Some(Duration::from_secs(30)));
        assert!(matches!(entry(&servers, "git"), Entry::Disabled(_)));
        let web = remote(&servers, "remote");
        assert_eq!(web.url, "https://example.invalid/mcp");
        let headers = [("X-Key", "secret"), ("X-Team", "core")];
        assert_eq!(
            web.headers,
            headers.map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
        let tools = &spec(&servers, "fs").tools;
        assert_eq!(tools.enabled, Some(vec![Glob::new("read_*").unwrap()]));
        assert_eq!(tools.disabled.len(), 2);
        assert!(tools.allows("read_file") && !tools.allows("read_other"));
    }

    #[test]
    fn codex_tool_lists_must_be_globs() {
        let text = "[mcp_servers.fs]\ncommand = \"fs\"\nenabled_tools = [\"[\"]\n";
        let error = parse("config.toml", text).unwrap_err();
        assert!(
            error.to_string().starts_with(
                "invalid config /cfg/config.toml line 3: mcp_servers.fs.enabled_tools[0]: \
                 invalid glob"
            ),
            "{error}"
        );
    }
}
