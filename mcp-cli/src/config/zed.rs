//! Zed's `context_servers`: `{"command": "prog", "args": [], "env": {}}`, or the older
//! `{"command": {"path", "args", "env"}}`, or a server an extension provides.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::command::{CommandLine, split_command};
use super::expand::{RawServer, RawServers};

#[derive(Deserialize)]
pub(super) struct ZedServer {
    command: Option<CommandLine>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    source: Option<String>,
    enabled: Option<bool>,
}

pub(super) fn servers(table: BTreeMap<String, ZedServer>) -> RawServers {
    let raw = |s: ZedServer| {
        let (command, mut args, env) = split_command(s.command);
        args.extend(s.args);
        let unusable = match (&command, &s.url, &s.source) {
            (None, None, Some(source)) => Some(format!(
                "provided by a Zed {source}; configure it with a command to use it here"
            )),
            _ => None,
        };
        RawServer {
            command,
            args,
            env: env.into_iter().chain(s.env).collect(),
            enabled: s.enabled.unwrap_or(true),
            url: s.url,
            unusable,
            ..RawServer::default()
        }
    };
    table.into_iter().map(|(name, s)| (name, raw(s))).collect()
}

#[cfg(test)]
mod tests {
    use crate::config::Entry;
    use crate::config::testing::{entry, parse, spec};

    #[test]
    fn zed_context_servers() {
        let text = r#"{"theme": "One Dark", "context_servers": {
            "new": {"command": "p", "args": ["1"], "env": {"E": "e"}},
            "old": {"command": {"path": "q", "args": ["2"], "env": {"F": "f"}}},
            "ext": {"source": "extension", "settings": {}}}}"#;
        let servers = parse("settings.json", text).unwrap().servers;
        assert_eq!(spec(&servers, "new").command.args, ["1"]);
        assert_eq!(spec(&servers, "old").command.program, "q");
        assert_eq!(spec(&servers, "old").command.env["F"], "f");
        assert!(matches!(entry(&servers, "ext"), Entry::Invalid { .. }));
    }
}
