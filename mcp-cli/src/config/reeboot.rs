//! The JSON `mcp` key, which three hosts spell differently: opencode's servers by name,
//! reeboot's `{"servers": [{"name", "command", "args", "env", "permissions"}]}` list, and VS
//! Code's `settings.json` `{"servers": {<name>: ...}}`. Told apart by the shape under
//! `servers`, read in one pass so that errors keep their line numbers.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::expand::{Permissions, RawServer, RawServers};
use super::hosts::{self, HostServer};
use super::opencode;

/// Unknown keys are skipped; `permissions` is the per-server sandbox, as in native files.
#[derive(Deserialize)]
struct ReebootServer {
    name: String,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    enabled: Option<bool>,
    url: Option<String>,
    permissions: Option<Permissions>,
}

/// What the `mcp` key holds, as servers.
pub(super) struct McpTable(pub RawServers);

impl<'de> Deserialize<'de> for McpTable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(McpVisitor)
    }
}

struct McpVisitor;

impl<'de> Visitor<'de> for McpVisitor {
    type Value = McpTable;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of servers")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<McpTable, A::Error> {
        let mut by_name = BTreeMap::new();
        let mut listed = RawServers::new();
        while let Some(key) = map.next_key::<String>()? {
            if key != "servers" {
                by_name.insert(key, opencode::raw(map.next_value()?));
                continue;
            }
            match map.next_value::<Servers>()? {
                Servers::List(list) => listed.extend(list.into_iter().map(reeboot)),
                Servers::Named(table) => listed.extend(hosts::servers(table)),
            }
        }
        Ok(McpTable(by_name.into_iter().chain(listed).collect()))
    }
}

fn reeboot(s: ReebootServer) -> (String, RawServer) {
    let raw = RawServer {
        command: s.command,
        args: s.args,
        env: s.env,
        cwd: s.cwd,
        enabled: s.enabled.unwrap_or(true),
        url: s.url,
        permissions: s.permissions,
        ..RawServer::default()
    };
    (s.name, raw)
}

/// What `mcp.servers` holds: reeboot's list or VS Code's table.
enum Servers {
    List(Vec<ReebootServer>),
    Named(BTreeMap<String, HostServer>),
}

impl<'de> Deserialize<'de> for Servers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ServersVisitor)
    }
}

struct ServersVisitor;

impl<'de> Visitor<'de> for ServersVisitor {
    type Value = Servers;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of servers or a table of servers by name")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Servers, A::Error> {
        Deserialize::deserialize(SeqAccessDeserializer::new(seq)).map(Servers::List)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Servers, A::Error> {
        Deserialize::deserialize(MapAccessDeserializer::new(map)).map(Servers::Named)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Entry;
    use crate::config::testing::{entry, parse, spec};

    #[test]
    fn reeboot_list_and_vscode_settings() {
        let text = r#"{"mcp": {"servers": [
            {"name": "fs", "command": "npx", "args": ["-y", "x"], "env": {"K": "v"},
             "permissions": {"network": false}},
            {"name": "off", "command": "y", "enabled": false}]}}"#;
        let servers = parse("config.json", text).unwrap().servers;
        assert_eq!(spec(&servers, "fs").command.args, ["-y", "x"]);
        assert_eq!(spec(&servers, "fs").command.env["K"], "v");
        assert!(matches!(entry(&servers, "off"), Entry::Disabled(_)));

        let text = r#"{"editor.fontSize": 12, "mcp": {"servers": {"gh": {"command": "gh-mcp"}}}}"#;
        let servers = parse("settings.json", text).unwrap().servers;
        assert_eq!(spec(&servers, "gh").command.program, "gh-mcp");

        let text = "{\"mcp\": {\"servers\": [\n{\"command\": \"x\"}]}}";
        let error = parse("config.json", text).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("invalid config /cfg/config.json line 2: mcp.servers[0]"),
            "{error}"
        );
    }
}
