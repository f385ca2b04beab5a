//! TOML files: the native `[mcp.<name>]` servers, and what any TOML file may hold, the
//! `[security]` server lists and the `[[permissions.rules]]`. Codex's servers are in `codex.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use mcp_proto::Protocol;
use serde::Deserialize;
use serde::de::MapAccess;
use toml::Spanned;

use super::errors::{file_error, no_servers_key, origin};
use super::expand::{Permissions as ServerPermissions, RawServer, RawServers};
use super::policy::{Action, AlwaysLoad, Glob, ListEntry, Rule, ToolFilter};
use super::tables::{Tables, TopLevel, add};
use super::units::{bytes, count, megabytes, protocol, seconds};
use super::{ConfigError, RawFile, codex};

/// What a TOML file may hold, by top-level key; other keys are the host's and are skipped.
/// Adding a TOML format: a file like `codex.rs`, a line in `read`, its key in [`SERVER_KEYS`].
#[derive(Default)]
struct TomlTables {
    /// `None` when no server table is there, so that a file holding none is an error.
    servers: Option<RawServers>,
    security: Option<Security>,
    permissions: Option<Permissions>,
    /// `token_store` (or Codex's `mcp_oauth_credentials_store`) at the top: the default of
    /// every remote server in the file.
    token_store: Option<String>,
    /// `registries`: the registries `registry` and `install` use (read there, from the user's
    /// own file); a file holding only them is ours too.
    registries: bool,
}

/// The server tables, for the error when a file holds none.
const SERVER_KEYS: &str = "mcp, mcp_servers";

impl Tables for TomlTables {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "mcp" => add(&mut self.servers, servers(map.next_value()?)),
            "mcp_servers" => add(&mut self.servers, codex::servers(map.next_value()?)),
            "security" => self.security = Some(map.next_value()?),
            "permissions" => self.permissions = Some(map.next_value()?),
            "token_store" | "mcp_oauth_credentials_store" => {
                self.token_store = Some(map.next_value()?);
            }
            "registries" => {
                let _: Vec<String> = map.next_value()?;
                self.registries = true;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    env_inherit: Option<bool>,
    #[serde(default)]
    env_pass: Vec<String>,
    cwd: Option<String>,
    enabled: Option<bool>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    bearer_token_env_var: Option<String>,
    transport: Option<Transport>,
    oauth_client_id: Option<String>,
    oauth_client_secret_env: Option<String>,
    oauth_client_metadata_url: Option<String>,
    #[serde(default)]
    oauth_scopes: Vec<String>,
    oauth_grant: Option<String>,
    oauth_private_key_file: Option<String>,
    oauth_signing_alg: Option<String>,
    oauth_assertion_file: Option<String>,
    oauth_assertion_env: Option<String>,
    oauth_idp_issuer: Option<String>,
    oauth_idp_client_id: Option<String>,
    oauth_idp_client_secret_env: Option<String>,
    oauth_id_token_file: Option<String>,
    oauth_id_token_env: Option<String>,
    oauth_dpop: Option<bool>,
    token_store: Option<String>,
    #[serde(default, deserialize_with = "seconds")]
    timeout_sec: Option<Duration>,
    #[serde(default, deserialize_with = "seconds")]
    call_timeout_sec: Option<Duration>,
    #[serde(default, deserialize_with = "megabytes")]
    max_message_mb: Option<usize>,
    #[serde(default, deserialize_with = "bytes")]
    max_result_bytes: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    max_listed: Option<usize>,
    validate_output: Option<bool>,
    enabled_tools: Option<Vec<Glob>>,
    #[serde(default)]
    disabled_tools: Vec<Glob>,
    always_load: Option<AlwaysLoad>,
    #[serde(default)]
    roots: Vec<String>,
    pin_tools: Option<bool>,
    scan_tools: Option<bool>,
    permissions: Option<ServerPermissions>,
    #[serde(default, deserialize_with = "protocol")]
    protocol: Option<Protocol>,
    registry: Option<super::RegistryOrigin>,
}

/// `transport`: how a remote server is spoken to. `http` (the default) is Streamable HTTP,
/// falling back to HTTP+SSE as the specification says; `sse` is HTTP+SSE only, VS Code's
/// `"type": "sse"`.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Transport {
    Http,
    Sse,
}

fn servers(table: BTreeMap<String, NativeServer>) -> RawServers {
    let raw = |s: NativeServer| RawServer {
        command: s.command,
        args: s.args,
        env: s.env,
        env_inherit: s.env_inherit,
        env_pass: s.env_pass,
        cwd: s.cwd,
        enabled: s.enabled.unwrap_or(true),
        url: s.url,
        headers: s.headers,
        bearer_token_env_var: s.bearer_token_env_var,
        transport: match s.transport {
            Some(Transport::Sse) => super::Transport::Sse,
            Some(Transport::Http) | None => super::Transport::Auto,
        },
        oauth_client_id: s.oauth_client_id,
        oauth_client_secret_env: s.oauth_client_secret_env,
        oauth_client_metadata_url: s.oauth_client_metadata_url,
        oauth_scopes: s.oauth_scopes,
        oauth_grant: s.oauth_grant,
        oauth_private_key_file: s.oauth_private_key_file,
        oauth_signing_alg: s.oauth_signing_alg,
        oauth_assertion_file: s.oauth_assertion_file,
        oauth_assertion_env: s.oauth_assertion_env,
        oauth_idp_issuer: s.oauth_idp_issuer,
        oauth_idp_client_id: s.oauth_idp_client_id,
        oauth_idp_client_secret_env: s.oauth_idp_client_secret_env,
        oauth_id_token_file: s.oauth_id_token_file,
        oauth_id_token_env: s.oauth_id_token_env,
        oauth_dpop: s.oauth_dpop,
        token_store: s.token_store,
        handshake_timeout: s.timeout_sec,
        call_timeout: s.call_timeout_sec,
        max_message_len: s.max_message_mb,
        max_result_bytes: s.max_result_bytes,
        max_listed: s.max_listed,
        validate_output: s.validate_output,
        tools: ToolFilter {
            enabled: s.enabled_tools,
            disabled: s.disabled_tools,
        },
        always_load: AlwaysLoad::globs(s.always_load),
        roots: s.roots,
        pin_tools: s.pin_tools,
        scan_tools: s.scan_tools,
        permissions: s.permissions,
        protocol: s.protocol.unwrap_or_default(),
        registry: s.registry,
        unusable: None,
    };
    table.into_iter().map(|(name, s)| (name, raw(s))).collect()
}

/// `[security]`: which servers may start at all.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Security {
    #[serde(default)]
    mcp_server_allowlist: Vec<Spanned<String>>,
    #[serde(default)]
    mcp_server_denylist: Vec<Spanned<String>>,
}

/// `[permissions]`: only `rules` is ours. Other keys are skipped, not refused, because Codex
/// keeps its permission profiles in a table of the same name.
#[derive(Deserialize)]
struct Permissions {
    #[serde(default)]
    rules: Vec<TomlRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlRule {
    tool: Spanned<Glob>,
    action: Action,
    /// Only on an `ask` rule: its question may be parked (`call --park`) and answered later.
    park: Option<Spanned<bool>>,
}

pub(super) fn read(path: &Path, text: &str) -> Result<RawFile, ConfigError> {
    let syntax_error = |error: toml::de::Error| {
        file_error(
            path,
            text,
            error.span().map(|s| s.start),
            "",
            error.message(),
        )
    };
    let deserializer = toml::Deserializer::parse(text).map_err(syntax_error)?;
    let top: TopLevel<TomlTables> =
        serde_path_to_error::deserialize(deserializer).map_err(|error| {
            // `Spanned` reads its value under a private key of its own, which nobody wrote.
            let key = error.path().to_string();
            let key = key.replace(".$__serde_spanned_private_value", "");
            let inner = error.into_inner();
            file_error(
                path,
                text,
                inner.span().map(|s| s.start),
                &key,
                inner.message(),
            )
        })?;
    let TomlTables {
        mut servers,
        security,
        permissions,
        token_store,
        registries,
    } = top.tables;
    for (_, server) in servers.iter_mut().flatten() {
        if server.url.is_some() && server.token_store.is_none() {
            server.token_store.clone_from(&token_store);
        }
    }
    // A file with nothing in it yet is a start, not a mistake; other keys only are.
    let ours = servers.is_some() || security.is_some() || permissions.is_some() || registries;
    if !ours && !top.empty {
        return Err(no_servers_key(path, SERVER_KEYS));
    }
    let mut file = RawFile {
        servers: servers.unwrap_or_default(),
        ..RawFile::default()
    };
    let entry = |name: Spanned<String>| ListEntry {
        file: path.to_owned(),
        origin: origin(path, text, Some(name.span().start)),
        server: name.into_inner(),
        admits: None,
    };
    if let Some(security) = security {
        file.policy.allowlist = security
            .mcp_server_allowlist
            .into_iter()
            .map(entry)
            .collect();
        file.policy.denylist = security
            .mcp_server_denylist
            .into_iter()
            .map(entry)
            .collect();
    }
    let rules = permissions.map(|p| p.rules).unwrap_or_default();
    for (index, rule) in rules.into_iter().enumerate() {
        let parkable = rule.park.as_ref().is_some_and(|park| *park.get_ref());
        if let Some(park) = rule.park.as_ref().filter(|_| parkable)
            && rule.action != Action::Ask
        {
            return Err(file_error(
                path,
                text,
                Some(park.span().start),
                "",
                "`park = true` is for `ask` rules: only a question can wait for its answer",
            ));
        }
        file.policy.rules.push(Rule {
            origin: origin(path, text, Some(rule.tool.span().start)),
            tool: rule.tool.into_inner(),
            action: rule.action,
            parkable,
        });
        file.rule_keys
            .push(format!("permissions.rules[{index}].tool"));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Entry;
    use crate::config::testing::{entry, parse, spec};

    #[test]
    fn a_top_level_token_store_is_the_default_of_the_files_remote_servers() {
        use crate::config::oauth::TokenStore;
        let text = "token_store = \"file\"\n\n[mcp.a]\nurl = \"https://a/mcp\"\n\n\
                    [mcp.b]\nurl = \"https://b/mcp\"\ntoken_store = \"keyring\"\n";
        let servers = parse("c.toml", text).unwrap().servers;
        let store = |name: &str| {
            spec(&servers, name)
                .remote
                .as_ref()
                .and_then(|r| r.token_store)
        };
        assert_eq!(store("a"), Some(TokenStore::File));
        assert_eq!(store("b"), Some(TokenStore::Keyring));
        // Codex's spelling, in Codex's file.
        let codex = "mcp_oauth_credentials_store = \"keyring\"\n\n\
                     [mcp_servers.c]\nurl = \"https://c/mcp\"\n";
        let servers = parse("config.toml", codex).unwrap().servers;
        let remote = spec(&servers, "c").remote.clone().expect("remote");
        assert_eq!(remote.token_store, Some(TokenStore::Keyring));
    }

    #[test]
    fn native_toml_maps_every_field() {
        let text = r#"
[mcp.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/src"]
env = { KEY = "${TOKEN}", PLAIN = "a$b" }
env_inherit = false
env_pass = ["GITHUB_TOKEN"]
cwd = "work"
timeout_sec = 5
call_timeout_sec = 90.5
max_message_mb = 64
enabled_tools = ["read_*", "list_*"]
disabled_tools = ["read_secret"]

[mcp.off]
command = "x"
enabled = false
"#;
        let servers = parse("c.toml", text).unwrap().servers;
        let fs = spec(&servers, "fs");
        assert_eq!(fs.command.program, "npx");
        assert_eq!(fs.command.args[2], "/home/u/src");
        assert_eq!(fs.command.env["KEY"], "secret");
        assert_eq!(fs.command.env["PLAIN"], "a$b");
        assert_eq!(fs.command.env_inherit, Some(false));
        assert_eq!(fs.command.env_pass, ["GITHUB_TOKEN"]);
        assert_eq!(spec(&servers, "off").command.env_inherit, None);
        assert_eq!(fs.command.cwd.as_deref(), Some(Path::new("/cfg/work")));
        assert_eq!(fs.handshake_timeout, Some(Duration::from_secs(5)));
        assert_eq!(fs.call_timeout, Some(Duration::from_millis(90_500)));
        assert_eq!(fs.max_message_len, Some(64 * 1024 * 1024));
        assert_eq!(
            fs.tools,
            ToolFilter {
                enabled: Some(vec![
                    Glob::new("read_*").unwrap(),
                    Glob::new("list_*").unwrap()
                ]),
                disabled: vec![Glob::new("read_secret").unwrap()],
            }
        );
        assert!(matches!(entry(&servers, "off"), Entry::Disabled(_)));
        let off = spec(&servers, "off");
        assert_eq!(
            (off.max_message_len, &off.tools),
            (None, &ToolFilter::default())
        );
    }

    #[test]
    fn native_errors_name_file_line_and_key() {
        let error = parse(
            "c.toml",
            "[mcp.fs]\ncommand = \"x\"\nargs = \"not a list\"\n",
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("invalid config /cfg/c.toml line 3: mcp.fs.args: "),
            "{error}"
        );
        let error = parse("c.toml", "[mcp.fs]\ncomand = \"x\"\n").unwrap_err();
        assert!(
            error.to_string().contains("line 2") && error.to_string().contains("comand"),
            "{error}"
        );
        let error = parse("c.toml", "[mcp.fs\n").unwrap_err();
        assert!(error.to_string().contains("line 1"), "{error}");
        let error = parse(
            "c.toml",
            "[mcp.fs]\ncommand = \"x\"\ndisabled_tools = [\"ok\", \"[abc\"]\n",
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid config /cfg/c.toml line 3: mcp.fs.disabled_tools[1]: invalid glob \
             \"[abc\": unclosed `[`"
        );
    }

    const POLICY: &str = r#"
[security]
mcp_server_allowlist = ["fs", "git"]
mcp_server_denylist = [
  "evil",
]

[[permissions.rules]]
tool = "fs__write_*"
action = "ask"

[[permissions.rules]]
action = "deny"
tool = "mcp__git__push"
"#;

    #[test]
    fn security_and_rules() {
        let policy = parse("c.toml", POLICY).unwrap().policy;
        let lists = |list: &[ListEntry]| {
            list.iter()
                .map(|e| format!("{} {}", e.server, e.origin))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            lists(&policy.allowlist),
            ["fs /cfg/c.toml line 3", "git /cfg/c.toml line 3"]
        );
        assert_eq!(lists(&policy.denylist), ["evil /cfg/c.toml line 5"]);
        let rules: Vec<_> = (policy.rules.iter())
            .map(|r| (r.tool.as_str(), r.action, r.origin.as_str()))
            .collect();
        assert_eq!(
            rules,
            [
                ("fs__write_*", Action::Ask, "/cfg/c.toml line 9"),
                ("mcp__git__push", Action::Deny, "/cfg/c.toml line 14"),
            ]
        );
        // Policy alone is a file worth having, and Codex's own permission profiles are
        // left alone.
        assert_eq!(parse("c.toml", POLICY).unwrap().servers, []);
        let codex = "[permissions.workspace]\nfilesystem = {}\n[mcp_servers.x]\ncommand = \"x\"\n";
        assert_eq!(parse("c.toml", codex).unwrap().policy.rules, []);
    }

    #[test]
    fn policy_errors_name_file_line_and_key() {
        let cases = [
            (
                "[[permissions.rules]]\ntool = \"[abc\"\naction = \"ask\"\n",
                "line 2: permissions.rules[0].tool: invalid glob \"[abc\": unclosed `[`",
            ),
            (
                "[[permissions.rules]]\ntool = \"x\"\naction = \"ask\"\n\n\
                 [[permissions.rules]]\ntool = \"y\"\naction = \"maybe\"\n",
                "line 7: permissions.rules[1].action: unknown variant `maybe`, expected one \
                 of `allow`, `deny`, `ask`",
            ),
            (
                "[[permissions.rules]]\ntool = \"x\"\naction = \"ask\"\nwhy = \"no\"\n",
                "line 4: permissions.rules[0].why: unknown key `why`, expected one of `tool`, `action`, `park`",
            ),
            (
                "[security]\nmcp_server_allowlist = [\"a\"]\nallowlist = [\"b\"]\n",
                "line 3: security.allowlist: unknown key `allowlist`; did you mean \
                 `mcp_server_allowlist`?",
            ),
            (
                "[security]\nmcp_server_denylist = \"a\"\n",
                "line 2: security.mcp_server_denylist: invalid type",
            ),
        ];
        for (text, expected) in cases {
            let error = parse("c.toml", text).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("invalid config /cfg/c.toml {expected}")),
                "{error}"
            );
        }
    }
}
