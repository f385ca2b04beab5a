//! opencode's `mcp` table: `{"type": "local", "command": ["prog", "arg"], "environment": {}}`,
//! or `{"type": "remote", "url": ...}`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::command::{CommandLine, split_command};
use super::expand::RawServer;
use super::units::milliseconds;

#[derive(Deserialize)]
pub(super) struct OpencodeServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<CommandLine>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default, alias = "env")]
    environment: BTreeMap<String, String>,
    enabled: Option<bool>,
    url: Option<String>,
    /// Milliseconds to wait for the server's tools.
    #[serde(default, deserialize_with = "milliseconds")]
    timeout: Option<Duration>,
}

pub(super) fn raw(s: OpencodeServer) -> RawServer {
    let (command, mut args, env) = split_command(s.command);
    args.extend(s.args);
    RawServer {
        command,
        args,
        env: env.into_iter().chain(s.environment).collect(),
        enabled: s.enabled.unwrap_or(true),
        url: if s.kind.as_deref() == Some("remote") {
            Some(s.url.unwrap_or_default())
        } else {
            s.url
        },
        handshake_timeout: s.timeout,
        ..RawServer::default()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Entry;
    use crate::config::testing::{entry, parse, remote, spec};

    #[test]
    fn opencode_mcp() {
        let text = r#"{"$schema": "https://opencode.ai/config.json", "mcp": {
            "local": {"type": "local", "command": ["bun", "x", "--flag"], "environment": {"K": "v"}, "enabled": true},
            "remote": {"type": "remote", "url": "https://x.invalid"},
            "off": {"type": "local", "command": ["x"], "enabled": false}}}"#;
        let servers = parse("opencode.json", text).unwrap().servers;
        let local = spec(&servers, "local");
        assert_eq!(
            (local.command.program.as_str(), &local.command.args[..]),
            ("bun", &["x".to_owned(), "--flag".to_owned()][..])
        );
        assert_eq!(local.command.env["K"], "v");
        assert_eq!(remote(&servers, "remote").url, "https://x.invalid");
        assert!(matches!(entry(&servers, "off"), Entry::Disabled(_)));
    }
}
