//! The `mcpServers` table (Claude Desktop, Claude Code, Cursor, Gemini CLI) and VS Code's
//! `servers`, which share one entry shape.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::Transport;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::expand::{RawServer, RawServers};
use super::policy::{Glob, ToolFilter};
use super::units::{bytes, count, milliseconds};

/// Strict like the native format, so that a misspelt key is an error rather than silently
/// ignored; the keys other hosts define and this reader does not use are listed at the end.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct HostServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Ours, as the native `env_inherit`: `false` passes only the minimal environment.
    env_inherit: Option<bool>,
    /// Ours, as the native `env_pass`: variables passed by name without the whole environment.
    #[serde(default)]
    env_pass: Vec<String>,
    cwd: Option<String>,
    #[serde(default)]
    disabled: bool,
    url: Option<String>,
    http_url: Option<String>,
    server_url: Option<String>,
    /// Claude Code, Cursor, VS Code: remote servers' static headers.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Gemini CLI: per-request timeout in milliseconds.
    #[serde(default, deserialize_with = "milliseconds")]
    timeout: Option<Duration>,
    /// Gemini CLI: the tools to offer, and those to hide.
    include_tools: Option<Vec<Glob>>,
    #[serde(default)]
    exclude_tools: Vec<Glob>,
    /// Ours, as the native `scan_tools`: `false` turns the poisoning scan off.
    scan_tools: Option<bool>,
    /// Claude Code's, and our native `always_load`: `true`, or the tools that `serve
    /// --search` lists beside its search tools.
    always_load: Option<super::policy::AlwaysLoad>,
    /// Ours, as the native `max_result_bytes`: what `call` prints before it spills to a file.
    #[serde(default, deserialize_with = "bytes")]
    max_result_bytes: Option<u64>,
    /// Ours, as the native `validate_output`: `false` turns the outputSchema check off.
    validate_output: Option<bool>,
    /// Ours, as the native `max_listed`: how many entries of each listing are kept.
    #[serde(default, deserialize_with = "count")]
    max_listed: Option<usize>,
    // Known to other hosts, not used here: Cursor and VS Code `envFile`; Gemini CLI `trust`,
    // `description`, `oauth`, `authProviderType`, `targetAudience`, `targetServiceAccount`,
    // `tcp`, `cwd`-less `httpUrl` peers; VS Code `dev`, `gallery`, `version`; Cline and Roo
    // `autoApprove`, `alwaysAllow`, `disabledTools`, `transportType`, `networkTimeout`,
    // `watchPaths`; and the odd `name`, `id`, `enabled`, `metadata` some tools write.
    #[serde(default, rename = "envFile")]
    _env_file: IgnoredAny,
    #[serde(default, rename = "trust")]
    _trust: IgnoredAny,
    #[serde(default, rename = "description")]
    _description: IgnoredAny,
    #[serde(default, rename = "oauth")]
    _oauth: IgnoredAny,
    #[serde(default, rename = "authProviderType")]
    _auth_provider_type: IgnoredAny,
    #[serde(default, rename = "targetAudience")]
    _target_audience: IgnoredAny,
    #[serde(default, rename = "targetServiceAccount")]
    _target_service_account: IgnoredAny,
    #[serde(default, rename = "tcp")]
    _tcp: IgnoredAny,
    #[serde(default, rename = "dev")]
    _dev: IgnoredAny,
    #[serde(default, rename = "gallery")]
    _gallery: IgnoredAny,
    #[serde(default, rename = "version")]
    _version: IgnoredAny,
    #[serde(default, rename = "autoApprove")]
    _auto_approve: IgnoredAny,
    #[serde(default, rename = "alwaysAllow")]
    _always_allow: IgnoredAny,
    #[serde(default, rename = "disabledTools")]
    _disabled_tools: IgnoredAny,
    #[serde(default, rename = "transportType")]
    _transport_type: IgnoredAny,
    #[serde(default, rename = "networkTimeout")]
    _network_timeout: IgnoredAny,
    #[serde(default, rename = "watchPaths")]
    _watch_paths: IgnoredAny,
    #[serde(default, rename = "name")]
    _name: IgnoredAny,
    #[serde(default, rename = "id")]
    _id: IgnoredAny,
    #[serde(default, rename = "enabled")]
    _enabled: IgnoredAny,
    #[serde(default, rename = "metadata")]
    _metadata: IgnoredAny,
    /// Our native `protocol`, which no host of this shape has a key for: accepted, so that
    /// an entry copied between formats keeps working, and ignored.
    #[serde(default, rename = "protocol")]
    _protocol: IgnoredAny,
}

pub(super) fn servers(table: BTreeMap<String, HostServer>) -> RawServers {
    let raw = |s: HostServer| {
        let remote = s.url.or(s.http_url).or(s.server_url);
        let is_remote = matches!(s.kind.as_deref(), Some("http" | "sse" | "streamable-http"));
        RawServer {
            command: s.command,
            args: s.args,
            env: s.env,
            env_inherit: s.env_inherit,
            env_pass: s.env_pass,
            cwd: s.cwd,
            enabled: !s.disabled,
            url: if is_remote || remote.is_some() {
                Some(remote.unwrap_or_default())
            } else {
                None
            },
            headers: s.headers,
            transport: match s.kind.as_deref() {
                Some("sse") => Transport::Sse,
                _ => Transport::Auto,
            },
            call_timeout: s.timeout,
            tools: ToolFilter {
                enabled: s.include_tools,
                disabled: s.exclude_tools,
            },
            scan_tools: s.scan_tools,
            always_load: super::policy::AlwaysLoad::globs(s.always_load),
            max_result_bytes: s.max_result_bytes,
            validate_output: s.validate_output,
            max_listed: s.max_listed,
            ..RawServer::default()
        }
    };
    table.into_iter().map(|(name, s)| (name, raw(s))).collect()
}

/// Whether `path` is Gemini CLI's settings, `.gemini/settings.json` in the home or a project.
pub(super) fn is_gemini(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == "settings.json")
        && (path.parent().and_then(Path::file_name)).is_some_and(|folder| folder == ".gemini")
}

/// Gemini CLI expands `$VAR` as well as `${VAR}` in a server's `env`. Written `${VAR}`, it is
/// expanded (or named when unset) as every other variable is, and imported so.
pub(super) fn gemini_variables(raw: &mut RawServer) {
    for value in raw.env.values_mut() {
        *value = braced(value);
    }
}

/// `text` with each `$NAME` written `${NAME}`; `${...}` and a `$` before anything else stay.
fn braced(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let name = match after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            true => after
                .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .unwrap_or(after.len()),
            false => 0,
        };
        match name {
            0 => out.push('$'),
            _ => out.push_str(&format!("${{{}}}", &after[..name])),
        }
        rest = &after[name..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Entry;
    use crate::config::testing::{entry, parse, remote, spec};

    #[test]
    fn a_byte_order_mark_is_not_content() {
        for (name, text) in [
            (
                ".mcp.json",
                "\u{feff}{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}",
            ),
            ("c.toml", "\u{feff}[mcp.a]\ncommand = \"x\"\n"),
        ] {
            assert_eq!(
                spec(&parse(name, text).unwrap().servers, "a")
                    .command
                    .program,
                "x"
            );
        }
    }

    #[test]
    fn a_misspelt_key_is_an_error_with_the_likely_one() {
        let text = "{\"mcpServers\": {\n  \"fs\": {\n    \"comand\": \"npx\"}}}";
        let error = parse(".mcp.json", text).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid config /cfg/.mcp.json line 3: mcpServers.fs.comand: unknown key `comand`; \
             did you mean `command`?"
        );
        // Keys other hosts use are not mistakes.
        let text = r#"{"mcpServers": {"fs": {"command": "x", "trust": true, "envFile": ".env",
            "autoApprove": ["a"], "description": "d", "dev": {"watch": "*.ts"}}}}"#;
        assert!(parse(".mcp.json", text).is_ok());
    }

    #[test]
    fn claude_cursor_gemini_mcp_servers() {
        let text = r#"{
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "x"], "env": {"A": "${TOKEN}"}, "timeout": 30000},
    "off": {"command": "x", "disabled": true},
    "web": {"type": "http", "url": "https://x.invalid/mcp"},
    "gem": {"httpUrl": "https://y.invalid/mcp"},
    "broken": {"command": "x", "env": {"B": "${MISSING}"}}
  },
  "otherSetting": 1
}"#;
        let servers = parse(".mcp.json", text).unwrap().servers;
        assert_eq!(spec(&servers, "fs").command.env["A"], "secret");
        assert_eq!(
            spec(&servers, "fs").call_timeout,
            Some(Duration::from_secs(30))
        );
        assert!(matches!(entry(&servers, "off"), Entry::Disabled(_)));
        assert_eq!(remote(&servers, "web").url, "https://x.invalid/mcp");
        assert_eq!(remote(&servers, "web").transport, Transport::Auto);
        assert_eq!(remote(&servers, "gem").url, "https://y.invalid/mcp");
        let Entry::Invalid { reason, .. } = entry(&servers, "broken") else {
            panic!()
        };
        assert!(reason.contains("MISSING"), "{reason}");
    }

    #[test]
    fn gemini_expands_dollar_variables_in_env() {
        assert_eq!(
            braced("$TOKEN:${HOME}/$_x1-$$ $1 $"),
            "${TOKEN}:${HOME}/${_x1}-$$ $1 $"
        );
        let text = r#"{"mcpServers": {"g": {"command": "x", "args": ["$TOKEN"], "env": {"A": "k-$TOKEN"}}}}"#;
        let servers = parse(".gemini/settings.json", text).unwrap().servers;
        assert_eq!(spec(&servers, "g").command.env["A"], "k-secret");
        // Only Gemini's files: elsewhere `$` is as written, and so are Gemini's args.
        assert_eq!(spec(&servers, "g").command.args, ["$TOKEN"]);
        let servers = parse(".mcp.json", text).unwrap().servers;
        assert_eq!(spec(&servers, "g").command.env["A"], "k-$TOKEN");
    }

    #[test]
    fn gemini_include_and_exclude_tools() {
        let text = r#"{"mcpServers": {
            "fs": {"command": "x", "includeTools": ["read_file", "list_*"], "excludeTools": ["list_secrets"]},
            "all": {"command": "y"}}}"#;
        let servers = parse("settings.json", text).unwrap().servers;
        let tools = &spec(&servers, "fs").tools;
        assert_eq!(
            tools.enabled,
            Some(vec![
                Glob::new("read_file").unwrap(),
                Glob::new("list_*").unwrap()
            ])
        );
        assert_eq!(tools.disabled, [Glob::new("list_secrets").unwrap()]);
        assert!(tools.allows("list_dir") && !tools.allows("list_secrets"));
        assert!(!tools.allows("write_file"));
        assert_eq!(spec(&servers, "all").tools, ToolFilter::default());

        let text = "{\"mcpServers\": {\"fs\": {\"command\": \"x\",\n\"excludeTools\": [\"[a\"]}}}";
        let error = parse("settings.json", text).unwrap_err();
        assert!(
            error.to_string().starts_with(
                "invalid config /cfg/settings.json line 2: mcpServers.fs.excludeTools[0]: \
                 invalid glob \"[a\""
            ),
            "{error}"
        );
    }

    #[test]
    fn vscode_servers_with_comments_and_trailing_commas() {
        let text = r#"{
  // VS Code allows comments
  "servers": {
    "a": {"type": "stdio", "command": "node", "args": ["s.js",],},
    /* and blocks */ "b": {"type": "sse", "url": "http://x/sse"},
  },
  "inputs": [{"id": "key", "type": "promptString", "description": "// not a comment"}],
}"#;
        let servers = parse("mcp.json", text).unwrap().servers;
        assert_eq!(spec(&servers, "a").command.args, ["s.js"]);
        assert_eq!(remote(&servers, "b").transport, Transport::Sse);
        // The native spelling, which `import` writes.
        let servers = parse(
            "c.toml",
            "[mcp.b]\nurl = \"http://x/sse\"\ntransport = \"sse\"\n",
        )
        .unwrap()
        .servers;
        assert_eq!(remote(&servers, "b").transport, Transport::Sse);
        let error = parse(
            "c.toml",
            "[mcp.b]\nurl = \"http://x\"\ntransport = \"ws\"\n",
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("expected `http` or `sse`"),
            "{error}"
        );
    }
}
