//! JSON files: which top-level key holds which host's servers, and Claude Code's
//! `permissions`. Each host's server entries are read in a file of their own.

use std::path::Path;

use serde::Deserialize;
use serde::de::MapAccess;

use super::errors::{file_error, no_servers_key, offset_of, origin};
use super::expand::RawServers;
use super::policy::{Action, Glob, Rule};
use super::tables::{Tables, TopLevel, add};
use super::{ConfigError, RawFile, hosts, reeboot, strip_json_comments, zed};

/// What a JSON file may hold, by top-level key; other keys are the host's and are skipped.
/// Adding a JSON host: a file like `zed.rs`, a line in `read`, its key in [`SERVER_KEYS`].
#[derive(Default)]
struct JsonTables {
    /// `None` when no server table is there, so that a file holding none is an error.
    servers: Option<RawServers>,
    permissions: Option<ClaudePermissions>,
}

/// The server tables, for the error when a file holds none.
const SERVER_KEYS: &str = "mcpServers, servers, mcp, context_servers";

impl Tables for JsonTables {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "mcpServers" | "servers" => add(&mut self.servers, hosts::servers(map.next_value()?)),
            "mcp" => add(&mut self.servers, map.next_value::<reeboot::McpTable>()?.0),
            "context_servers" => add(&mut self.servers, zed::servers(map.next_value()?)),
            "permissions" => self.permissions = Some(map.next_value()?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Claude Code's `permissions`: globs on tool names, usually `mcp__<server>__<tool>`. Its other
/// keys (`defaultMode`, `additionalDirectories`, ...) are skipped.
#[derive(Deserialize)]
struct ClaudePermissions {
    #[serde(default)]
    allow: Vec<Glob>,
    #[serde(default)]
    deny: Vec<Glob>,
    #[serde(default)]
    ask: Vec<Glob>,
}

pub(super) fn read(path: &Path, text: &str) -> Result<RawFile, ConfigError> {
    // Comments are blanked out byte for byte, so lines and columns still match `text`.
    let cleaned = strip_json_comments(text);
    let json_error = |key: &str, error: serde_json::Error| {
        let offset = offset_of(text, error.line(), error.column());
        let message = error.to_string();
        let message = message.split(" at line ").next().unwrap_or(&message);
        file_error(path, text, Some(offset), key, message)
    };
    let mut deserializer = serde_json::Deserializer::from_str(&cleaned);
    let top: TopLevel<JsonTables> =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let key = error.path().to_string();
            json_error(if key == "." { "" } else { &key }, error.into_inner())
        })?;
    // Whatever follows the document (a second object, a stray brace) is an error, not ignored.
    deserializer.end().map_err(|error| json_error("", error))?;
    let JsonTables {
        servers,
        permissions,
    } = top.tables;
    // An empty object is a start, not a mistake; other keys only are.
    if servers.is_none() && permissions.is_none() && !top.empty {
        return Err(no_servers_key(path, SERVER_KEYS));
    }
    let mut servers = servers.unwrap_or_default();
    if hosts::is_gemini(path) {
        for (_, raw) in &mut servers {
            hosts::gemini_variables(raw);
        }
    }
    let mut file = RawFile {
        servers,
        ..RawFile::default()
    };
    if let Some(permissions) = permissions {
        claude_rules(permissions, &mut file, path, text, &cleaned);
    }
    Ok(file)
}

/// Claude Code's lists as rules, in its precedence: every deny, then every ask, then every
/// allow. Each rule's line is where its pattern is first written after its list's key.
fn claude_rules(
    permissions: ClaudePermissions,
    file: &mut RawFile,
    path: &Path,
    text: &str,
    cleaned: &str,
) {
    let lists = [
        ("deny", Action::Deny, permissions.deny),
        ("ask", Action::Ask, permissions.ask),
        ("allow", Action::Allow, permissions.allow),
    ];
    let permissions_at = find_key(cleaned, 0, "permissions");
    for (key, action, globs) in lists {
        let list_at = permissions_at.and_then(|at| find_key(cleaned, at, key));
        let mut from = list_at;
        for (index, glob) in globs.into_iter().enumerate() {
            let quoted = serde_json::to_string(glob.as_str()).unwrap_or_default();
            let at = from.and_then(|start| Some(start + cleaned.get(start..)?.find(&quoted)?));
            from = at.map(|at| at + quoted.len()).or(from);
            file.policy.rules.push(Rule {
                tool: server_wide(glob),
                action,
                origin: origin(path, text, at.or(list_at)),
                parkable: false,
            });
            file.rule_keys.push(format!("permissions.{key}[{index}]"));
        }
    }
}

/// Claude Code's `mcp__<server>` (no tool part) stands for every tool of that server.
fn server_wide(glob: Glob) -> Glob {
    match glob.as_str().strip_prefix("mcp__") {
        Some(server)
            if !server.is_empty()
                && !server.contains("__")
                && !server.contains(['*', '?', '[']) =>
        {
            Glob::new(&format!("{}__*", glob.as_str())).unwrap_or(glob)
        }
        _ => glob,
    }
}

/// Just past the first `"key"` at or after `from` that is written as an object key.
fn find_key(text: &str, from: usize, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    let mut start = from;
    loop {
        start += text.get(start..)?.find(&quoted)? + quoted.len();
        if text[start..].trim_start().starts_with(':') {
            return Some(start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::parse;

    #[test]
    fn json_errors_name_file_line_and_key() {
        let error = parse(".mcp.json", "{\n\"mcpServers\": {\n\"x\": {\"args\": 5}}}").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("invalid config /cfg/.mcp.json line 3: mcpServers.x.args: "),
            "{error}"
        );
        let error = parse(".mcp.json", "{\n\"mcpServers\": \n").unwrap_err();
        assert!(
            error.to_string().contains("line 3") || error.to_string().contains("line 2"),
            "{error}"
        );
    }

    #[test]
    fn trailing_text_after_a_json_document_is_an_error() {
        for text in [
            "{\"mcpServers\": {}}\n}",
            "{\"mcpServers\": {}}\n{\"servers\": {}}",
        ] {
            let error = parse(".mcp.json", text).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with("invalid config /cfg/.mcp.json line 2: trailing"),
                "{error}"
            );
        }
        // Comments and blank lines after the document are fine.
        parse("mcp.json", "{\"servers\": {}}\n// done\n\n").unwrap();
    }

    #[test]
    fn claude_permissions_become_rules_deny_first() {
        let text = r#"{
  "mcpServers": {"gh": {"command": "gh-mcp"}},
  "permissions": {
    "allow": ["mcp__gh__get_*", "Bash(npm run test:*)"],
    "defaultMode": "acceptEdits",
    "deny": [
      "mcp__gh__delete_*",
      "mcp__gh"
    ],
    "ask": ["mcp__gh__get_secret"]
  }
}"#;
        let config = parse("settings.json", text).unwrap();
        let rules: Vec<_> = (config.policy.rules.iter())
            .map(|r| (r.tool.as_str(), r.action, r.origin.as_str()))
            .collect();
        let at = |line: usize| format!("/cfg/settings.json line {line}");
        assert_eq!(
            rules,
            [
                ("mcp__gh__delete_*", Action::Deny, at(7).as_str()),
                ("mcp__gh__*", Action::Deny, at(8).as_str()),
                ("mcp__gh__get_secret", Action::Ask, at(10).as_str()),
                ("mcp__gh__get_*", Action::Allow, at(4).as_str()),
                ("Bash(npm run test:*)", Action::Allow, at(4).as_str()),
            ]
        );
        let policy = &config.policy;
        let action = |tool: &str| policy.rule_for(tool, "gh", tool).map(|r| r.action);
        assert_eq!(action("get_secret"), Some(Action::Deny));
        // Permissions alone make a file worth reading.
        let only = parse("settings.json", r#"{"permissions": {"deny": ["mcp__x"]}}"#).unwrap();
        assert_eq!(only.servers, []);
        assert_eq!(only.policy.rules[0].origin, "/cfg/settings.json line 1");
    }

    #[test]
    fn claude_permission_errors_name_file_line_and_key() {
        let text = "{\"permissions\": {\n\"deny\": [\"ok\",\n\"[abc\"]}}";
        let error = parse("settings.json", text).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid config /cfg/settings.json line 3: permissions.deny[1]: invalid glob \
             \"[abc\": unclosed `[`"
        );
    }

    #[test]
    fn rule_lines_come_from_the_list_not_from_elsewhere() {
        // The same text earlier in the file, and twice in one list.
        let text = "{\"mcpServers\": {\"x\": {\"command\": \"mcp__x__a\"}},\n\
                    \"permissions\": {\"allow\": [\"x\"],\n\
                    \"deny\": [\n\"mcp__x__a\",\n\"mcp__x__a\"]}}";
        let rules = parse("c.json", text).unwrap().policy.rules;
        let lines: Vec<_> = rules.iter().map(|r| r.origin.as_str()).collect();
        assert_eq!(
            lines,
            [
                "/cfg/c.json line 4",
                "/cfg/c.json line 5",
                "/cfg/c.json line 2"
            ]
        );
    }
}
