//! Config files (DESIGN §5.4): the native TOML, the host formats people already have, variable
//! expansion, discovery, and the built-in presets.
//!
//! Every format is read into one shape, [`Server`]. A file that cannot be read as its format is
//! an error naming the file, the line and the key; an entry that parses but cannot be used (no
//! command, an unset variable) is kept as [`Entry::Invalid`] so the other servers still work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_smol::ServerCommand;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

/// One server the config can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub name: String,
    pub command: ServerCommand,
    /// Budget for spawn plus handshake.
    pub handshake_timeout: Option<Duration>,
    /// Per-call timeout, restarted by progress.
    pub call_timeout: Option<Duration>,
}

/// What a configured name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Enabled(ServerSpec),
    Disabled(ServerSpec),
    /// A server reached over HTTP: listed, not started, until there is a transport for it.
    Remote {
        url: String,
    },
    /// An entry that parsed but cannot be used; the reason says why.
    Invalid {
        reason: String,
    },
}

/// Where an entry came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    Preset,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub entry: Entry,
    pub source: Source,
}

/// A config file that exists but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Reads environment variables; injectable so tests need not touch the real environment.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

// ----- discovery -----

/// The files to read, in order (later ones win by server name), and whether each must exist.
pub fn discover(explicit: &[PathBuf], env: Env<'_>, cwd: &Path) -> Vec<(PathBuf, bool)> {
    if !explicit.is_empty() {
        return explicit.iter().map(|path| (path.clone(), true)).collect();
    }
    if let Some(path) = env("MCP_CLI_CONFIG").filter(|p| !p.is_empty()) {
        return vec![(PathBuf::from(path), true)];
    }
    let config_home = match env("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env("HOME").unwrap_or_default()).join(".config"),
    };
    vec![
        (config_home.join("mcp-cli/config.toml"), false),
        (cwd.join(".mcp-cli.toml"), false),
        (cwd.join(".mcp.json"), false),
    ]
}

/// Reads the discovered files and adds the presets; servers come back sorted by name.
pub fn load(
    files: &[(PathBuf, bool)],
    env: Env<'_>,
    cwd: &Path,
) -> Result<Vec<Server>, ConfigError> {
    let mut servers: BTreeMap<String, Server> = BTreeMap::new();
    for (path, required) in files {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && !required => continue,
            Err(error) => {
                return Err(ConfigError(format!(
                    "cannot read config {}: {error}",
                    path.display()
                )));
            }
        };
        for server in parse_file(path, &text, env)? {
            servers.insert(server.name.clone(), server);
        }
    }
    for preset in presets(env, cwd) {
        servers.entry(preset.name.clone()).or_insert(preset);
    }
    Ok(servers.into_values().collect())
}

/// Handshake budget of a preset run through `npx`, which may have to download it first.
pub const NPX_HANDSHAKE: Duration = Duration::from_secs(120);

/// The built-in servers, used for names no file defines. With `MCP_CLI_NPM_PREFIX` set they
/// run the binaries installed under that npm prefix instead of going through `npx`.
pub fn presets(env: Env<'_>, cwd: &Path) -> Vec<Server> {
    let prefix = env("MCP_CLI_NPM_PREFIX").filter(|p| !p.is_empty());
    let preset = |name: &str, package: &str, extra: Vec<String>| {
        let command = match &prefix {
            Some(prefix) => {
                let bin = Path::new(prefix)
                    .join("node_modules/.bin")
                    .join(format!("mcp-server-{name}"));
                ServerCommand::new(bin.to_string_lossy()).args(extra)
            }
            None => ServerCommand::new("npx")
                .args(["-y".to_owned(), package.to_owned()])
                .args(extra),
        };
        // The first `npx -y` of a package downloads it, which can take far longer than a
        // handshake should; an installed binary gets the usual budget.
        let handshake_timeout = prefix.is_none().then_some(NPX_HANDSHAKE);
        let spec = ServerSpec {
            name: name.to_owned(),
            command,
            handshake_timeout,
            call_timeout: None,
        };
        Server {
            name: name.to_owned(),
            entry: Entry::Enabled(spec),
            source: Source::Preset,
        }
    };
    vec![
        preset(
            "filesystem",
            "@modelcontextprotocol/server-filesystem",
            vec![cwd.to_string_lossy().into_owned()],
        ),
        preset(
            "everything",
            "@modelcontextprotocol/server-everything",
            vec![],
        ),
        preset("memory", "@modelcontextprotocol/server-memory", vec![]),
    ]
}

// ----- one file -----

/// The fields every format maps onto, before variables are expanded.
#[derive(Debug, Default)]
struct RawServer {
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    enabled: bool,
    url: Option<String>,
    handshake_timeout: Option<Duration>,
    call_timeout: Option<Duration>,
    /// A reason this entry cannot be used whatever its fields say.
    unusable: Option<String>,
}

pub fn parse_file(path: &Path, text: &str, env: Env<'_>) -> Result<Vec<Server>, ConfigError> {
    let is_json = path
        .extension()
        .is_some_and(|ext| ext == "json" || ext == "jsonc")
        || (path.extension().is_none_or(|ext| ext != "toml") && text.trim_start().starts_with('{'));
    let raw = if is_json {
        parse_json(path, text)?
    } else {
        parse_toml(path, text)?
    };
    let base = path.parent().unwrap_or(Path::new("."));
    Ok(raw
        .into_iter()
        .map(|(name, raw)| Server {
            entry: finish(&name, raw, env, base),
            name,
            source: Source::File(path.to_owned()),
        })
        .collect())
}

fn finish(name: &str, raw: RawServer, env: Env<'_>, base: &Path) -> Entry {
    if let Some(reason) = raw.unusable {
        return Entry::Invalid { reason };
    }
    if let Some(url) = raw.url {
        return Entry::Remote { url };
    }
    if !raw.enabled {
        // Never started, so its variables need not be set: shown as written.
        let mut command = ServerCommand::new(raw.command.unwrap_or_default()).args(raw.args);
        command.env = raw.env;
        command.cwd = raw.cwd.map(|cwd| base.join(cwd));
        return Entry::Disabled(ServerSpec {
            name: name.to_owned(),
            command,
            handshake_timeout: raw.handshake_timeout,
            call_timeout: raw.call_timeout,
        });
    }
    let expanded = (|| -> Result<ServerSpec, String> {
        let command = raw.command.as_deref().filter(|c| !c.trim().is_empty());
        let command = expand(command.ok_or("no command given")?, env)?;
        let mut spec = ServerCommand::new(command);
        for arg in &raw.args {
            spec.args.push(expand(arg, env)?);
        }
        for (key, value) in &raw.env {
            spec.env.insert(key.clone(), expand(value, env)?);
        }
        if let Some(cwd) = &raw.cwd {
            spec.cwd = Some(base.join(expand(cwd, env)?));
        }
        Ok(ServerSpec {
            name: name.to_owned(),
            command: spec,
            handshake_timeout: raw.handshake_timeout,
            call_timeout: raw.call_timeout,
        })
    })();
    match expanded {
        Ok(spec) => Entry::Enabled(spec),
        Err(reason) => Entry::Invalid { reason },
    }
}

/// Expands `${VAR}` and `${VAR:-default}`; `$` not followed by `{` stays as it is.
pub fn expand(text: &str, env: Env<'_>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            return Err(format!("unclosed `${{` in {text:?}"));
        };
        let inner = &rest[start + 2..start + end];
        let (variable, default) = match inner.split_once(":-") {
            Some((variable, default)) => (variable, Some(default)),
            None => (inner, None),
        };
        match (
            env(variable).filter(|v| default.is_none() || !v.is_empty()),
            default,
        ) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "environment variable {variable} is not set (used in {text:?})"
                ));
            }
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

// ----- TOML: native `[mcp.<name>]` and Codex `[mcp_servers.<name>]` -----

/// Missing tables are `None`, not empty, so that a file holding neither is an error.
#[derive(Deserialize)]
struct TomlFile {
    mcp: Option<BTreeMap<String, NativeServer>>,
    mcp_servers: Option<BTreeMap<String, CodexServer>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    enabled: Option<bool>,
    url: Option<String>,
    #[serde(default, deserialize_with = "seconds")]
    timeout_sec: Option<Duration>,
    #[serde(default, deserialize_with = "seconds")]
    call_timeout_sec: Option<Duration>,
}

#[derive(Deserialize)]
struct CodexServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    enabled: Option<bool>,
    url: Option<String>,
    #[serde(default, deserialize_with = "seconds")]
    startup_timeout_sec: Option<Duration>,
    #[serde(default, deserialize_with = "milliseconds")]
    startup_timeout_ms: Option<Duration>,
    #[serde(default, deserialize_with = "seconds")]
    tool_timeout_sec: Option<Duration>,
}

fn parse_toml(path: &Path, text: &str) -> Result<Vec<(String, RawServer)>, ConfigError> {
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
    let file: TomlFile = serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let key = error.path().to_string();
        let inner = error.into_inner();
        file_error(
            path,
            text,
            inner.span().map(|s| s.start),
            &key,
            inner.message(),
        )
    })?;
    if file.mcp.is_none() && file.mcp_servers.is_none() {
        // A file with nothing in it yet is a start, not a mistake; other keys only are.
        let empty = toml::from_str::<toml::Table>(text).is_ok_and(|table| table.is_empty());
        if empty {
            return Ok(Vec::new());
        }
        return Err(no_servers_key(path, "mcp, mcp_servers"));
    }
    let native = file.mcp.into_iter().flatten().map(|(name, s)| {
        let raw = RawServer {
            command: s.command,
            args: s.args,
            env: s.env,
            cwd: s.cwd,
            enabled: s.enabled.unwrap_or(true),
            url: s.url,
            handshake_timeout: s.timeout_sec,
            call_timeout: s.call_timeout_sec,
            unusable: None,
        };
        (name, raw)
    });
    let codex = file.mcp_servers.into_iter().flatten().map(|(name, s)| {
        let raw = RawServer {
            command: s.command,
            args: s.args,
            env: s.env,
            cwd: s.cwd,
            enabled: s.enabled.unwrap_or(true),
            url: s.url,
            handshake_timeout: s.startup_timeout_sec.or(s.startup_timeout_ms),
            call_timeout: s.tool_timeout_sec,
            unusable: None,
        };
        (name, raw)
    });
    Ok(native.chain(codex).collect())
}

/// A timeout in seconds, which must be positive and finite: anything else makes the file
/// invalid rather than silently meaning "the default".
fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    timeout(deserializer, 1.0, "seconds")
}

/// A timeout in milliseconds (Gemini CLI, opencode, Codex's `_ms` keys); see [`seconds`].
fn milliseconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    timeout(deserializer, 1000.0, "milliseconds")
}

fn timeout<'de, D: Deserializer<'de>>(
    deserializer: D,
    per_second: f64,
    unit: &str,
) -> Result<Option<Duration>, D::Error> {
    let Some(value) = Option::<f64>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let duration = Duration::try_from_secs_f64(value / per_second).ok();
    match duration.filter(|d| !d.is_zero()) {
        Some(duration) => Ok(Some(duration)),
        None => Err(D::Error::custom(format!(
            "{value} is not a positive number of {unit}"
        ))),
    }
}

// ----- JSON: mcpServers, VS Code `servers`, opencode `mcp`, Zed `context_servers` -----

/// Missing tables are `None`, not empty, so that a file holding none of them is an error.
#[derive(Deserialize)]
struct JsonFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<BTreeMap<String, HostServer>>,
    servers: Option<BTreeMap<String, HostServer>>,
    mcp: Option<BTreeMap<String, OpencodeServer>>,
    context_servers: Option<BTreeMap<String, ZedServer>>,
}

/// Claude Desktop, Claude Code, Cursor, Gemini CLI (`mcpServers`) and VS Code (`servers`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HostServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    #[serde(default)]
    disabled: bool,
    url: Option<String>,
    http_url: Option<String>,
    server_url: Option<String>,
    /// Gemini CLI: per-request timeout in milliseconds.
    #[serde(default, deserialize_with = "milliseconds")]
    timeout: Option<Duration>,
}

/// opencode: `{"type": "local", "command": ["prog", "arg"], "environment": {}}` or remote.
#[derive(Deserialize)]
struct OpencodeServer {
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

/// Zed: `{"command": "prog", "args": [], "env": {}}`, or the older `{"command": {"path", "args", "env"}}`.
#[derive(Deserialize)]
struct ZedServer {
    command: Option<CommandLine>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    source: Option<String>,
}

/// A command given as a string, an array (program first), or Zed's `{path, args, env}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum CommandLine {
    Program(String),
    Words(Vec<String>),
    Zed {
        path: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
}

fn parse_json(path: &Path, text: &str) -> Result<Vec<(String, RawServer)>, ConfigError> {
    // Comments are blanked out byte for byte, so lines and columns still match `text`.
    let cleaned = strip_json_comments(text);
    let json_error = |key: &str, error: serde_json::Error| {
        let offset = offset_of(text, error.line(), error.column());
        let message = error.to_string();
        let message = message.split(" at line ").next().unwrap_or(&message);
        file_error(path, text, Some(offset), key, message)
    };
    let mut deserializer = serde_json::Deserializer::from_str(&cleaned);
    let file: JsonFile = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let key = error.path().to_string();
        json_error(if key == "." { "" } else { &key }, error.into_inner())
    })?;
    // Whatever follows the document (a second object, a stray brace) is an error, not ignored.
    deserializer.end().map_err(|error| json_error("", error))?;
    let tables = [
        file.mcp_servers.is_some(),
        file.servers.is_some(),
        file.mcp.is_some(),
        file.context_servers.is_some(),
    ];
    if !tables.contains(&true) {
        let empty = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&cleaned)
            .is_ok_and(|object| object.is_empty());
        if empty {
            return Ok(Vec::new());
        }
        return Err(no_servers_key(
            path,
            "mcpServers, servers, mcp, context_servers",
        ));
    }
    let mut servers = Vec::new();
    let hosts = file.mcp_servers.into_iter().chain(file.servers).flatten();
    for (name, s) in hosts {
        let remote = s.url.or(s.http_url).or(s.server_url);
        let is_remote = matches!(s.kind.as_deref(), Some("http" | "sse" | "streamable-http"));
        let raw = RawServer {
            command: s.command,
            args: s.args,
            env: s.env,
            cwd: s.cwd,
            enabled: !s.disabled,
            url: if is_remote || remote.is_some() {
                Some(remote.unwrap_or_default())
            } else {
                None
            },
            handshake_timeout: None,
            call_timeout: s.timeout,
            unusable: None,
        };
        servers.push((name, raw));
    }
    for (name, s) in file.mcp.into_iter().flatten() {
        let (command, mut args, env) = split_command(s.command);
        args.extend(s.args);
        let raw = RawServer {
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
        };
        servers.push((name, raw));
    }
    for (name, s) in file.context_servers.into_iter().flatten() {
        let (command, mut args, env) = split_command(s.command);
        args.extend(s.args);
        let unusable = match (&command, &s.url, &s.source) {
            (None, None, Some(source)) => Some(format!(
                "provided by a Zed {source}; configure it with a command to use it here"
            )),
            _ => None,
        };
        let raw = RawServer {
            command,
            args,
            env: env.into_iter().chain(s.env).collect(),
            enabled: true,
            url: s.url,
            unusable,
            ..RawServer::default()
        };
        servers.push((name, raw));
    }
    Ok(servers)
}

type Split = (Option<String>, Vec<String>, BTreeMap<String, String>);

fn split_command(command: Option<CommandLine>) -> Split {
    match command {
        None => (None, Vec::new(), BTreeMap::new()),
        Some(CommandLine::Program(program)) => (Some(program), Vec::new(), BTreeMap::new()),
        Some(CommandLine::Words(words)) => {
            let mut words = words.into_iter();
            (words.next(), words.collect(), BTreeMap::new())
        }
        Some(CommandLine::Zed { path, args, env }) => (Some(path), args, env),
    }
}

/// Blanks out `//` and `/* */` comments and trailing commas (VS Code and Zed allow them),
/// keeping every newline so error line numbers still match the file. Two linear passes.
pub fn strip_json_comments(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    let mut strings = StringTracker::default();
    let mut i = 0;
    while i < out.len() {
        if strings.inside(&out, i) {
            i += 1;
            continue;
        }
        let end = match &out[i..] {
            [b'/', b'/', ..] => out[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(out.len(), |e| i + e),
            [b'/', b'*', ..] => (i + 2..out.len().saturating_sub(1))
                .find(|&e| &out[e..e + 2] == b"*/")
                .map_or(out.len(), |e| e + 2),
            _ => {
                i += 1;
                continue;
            }
        };
        for slot in &mut out[i..end] {
            if *slot != b'\n' {
                *slot = b' ';
            }
        }
        i = end;
    }
    let mut strings = StringTracker::default();
    for i in 0..out.len() {
        if !strings.inside(&out, i) && out[i] == b',' {
            let next = out[i + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                out[i] = b' ';
            }
        }
    }
    // Only ASCII bytes outside strings were replaced, so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// Follows JSON string boundaries as bytes are visited in order.
#[derive(Default)]
struct StringTracker {
    in_string: bool,
    escaped: bool,
}

impl StringTracker {
    /// Whether byte `i` belongs to a string (its quotes included). Call once per byte, in order.
    fn inside(&mut self, bytes: &[u8], i: usize) -> bool {
        let byte = bytes[i];
        if self.in_string {
            match (self.escaped, byte) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return true;
        }
        if byte == b'"' {
            self.in_string = true;
            return true;
        }
        false
    }
}

fn no_servers_key(path: &Path, keys: &str) -> ConfigError {
    ConfigError(format!(
        "invalid config {}: it names no servers: none of the top-level keys {keys} is there",
        path.display()
    ))
}

fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    line_start + column.saturating_sub(1)
}

fn file_error(
    path: &Path,
    text: &str,
    offset: Option<usize>,
    key: &str,
    message: &str,
) -> ConfigError {
    let mut error = format!("invalid config {}", path.display());
    if let Some(offset) = offset {
        // Bytes, not a str slice: a parser's offset may fall inside a multi-byte character.
        let before = &text.as_bytes()[..offset.min(text.len())];
        let line = before.iter().filter(|&&byte| byte == b'\n').count() + 1;
        error.push_str(&format!(" line {line}"));
    }
    error.push_str(": ");
    if !key.is_empty() {
        error.push_str(&format!("{key}: "));
    }
    error.push_str(message.trim());
    ConfigError(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(key: &str) -> Option<String> {
        match key {
            "HOME" => Some("/home/u".into()),
            "TOKEN" => Some("secret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn parse(name: &str, text: &str) -> Result<Vec<Server>, ConfigError> {
        parse_file(Path::new(&format!("/cfg/{name}")), text, &env)
    }

    fn entry<'a>(servers: &'a [Server], name: &str) -> &'a Entry {
        &servers.iter().find(|s| s.name == name).unwrap().entry
    }

    fn spec<'a>(servers: &'a [Server], name: &str) -> &'a ServerSpec {
        match entry(servers, name) {
            Entry::Enabled(spec) | Entry::Disabled(spec) => spec,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn native_toml_maps_every_field() {
        let text = r#"
[mcp.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/src"]
env = { KEY = "${TOKEN}", PLAIN = "a$b" }
cwd = "work"
timeout_sec = 5
call_timeout_sec = 90.5

[mcp.off]
command = "x"
enabled = false
"#;
        let servers = parse("c.toml", text).unwrap();
        let fs = spec(&servers, "fs");
        assert_eq!(fs.command.program, "npx");
        assert_eq!(fs.command.args[2], "/home/u/src");
        assert_eq!(fs.command.env["KEY"], "secret");
        assert_eq!(fs.command.env["PLAIN"], "a$b");
        assert_eq!(fs.command.cwd.as_deref(), Some(Path::new("/cfg/work")));
        assert_eq!(fs.handshake_timeout, Some(Duration::from_secs(5)));
        assert_eq!(fs.call_timeout, Some(Duration::from_millis(90_500)));
        assert!(matches!(entry(&servers, "off"), Entry::Disabled(_)));
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
                .0
                .starts_with("invalid config /cfg/c.toml line 3: mcp.fs.args: "),
            "{error}"
        );
        let error = parse("c.toml", "[mcp.fs]\ncomand = \"x\"\n").unwrap_err();
        assert!(
            error.0.contains("line 2") && error.0.contains("comand"),
            "{error}"
        );
        let error = parse("c.toml", "[mcp.fs\n").unwrap_err();
        assert!(error.0.contains("line 1"), "{error}");
    }

    #[test]
    fn codex_toml() {
        let text = r#"
[mcp_servers.git]
command = "uvx"
args = ["mcp-server-git"]
startup_timeout_ms = 2500
tool_timeout_sec = 30
enabled = false

[mcp_servers.remote]
url = "https://example.invalid/mcp"
"#;
        let servers = parse("config.toml", text).unwrap();
        let git = spec(&servers, "git");
        assert_eq!(git.handshake_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(git.call_timeout, Some(Duration::from_secs(30)));
        assert!(matches!(entry(&servers, "git"), Entry::Disabled(_)));
        assert_eq!(
            entry(&servers, "remote"),
            &Entry::Remote {
                url: "https://example.invalid/mcp".into()
            }
        );
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
        let servers = parse(".mcp.json", text).unwrap();
        assert_eq!(spec(&servers, "fs").command.env["A"], "secret");
        assert_eq!(
            spec(&servers, "fs").call_timeout,
            Some(Duration::from_secs(30))
        );
        assert!(matches!(entry(&servers, "off"), Entry::Disabled(_)));
        assert!(matches!(entry(&servers, "web"), Entry::Remote { .. }));
        assert!(matches!(entry(&servers, "gem"), Entry::Remote { .. }));
        let Entry::Invalid { reason } = entry(&servers, "broken") else {
            panic!()
        };
        assert!(reason.contains("MISSING"), "{reason}");
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
        let servers = parse("mcp.json", text).unwrap();
        assert_eq!(spec(&servers, "a").command.args, ["s.js"]);
        assert!(matches!(entry(&servers, "b"), Entry::Remote { .. }));
    }

    #[test]
    fn opencode_mcp() {
        let text = r#"{"$schema": "https://opencode.ai/config.json", "mcp": {
            "local": {"type": "local", "command": ["bun", "x", "--flag"], "environment": {"K": "v"}, "enabled": true},
            "remote": {"type": "remote", "url": "https://x.invalid"},
            "off": {"type": "local", "command": ["x"], "enabled": false}}}"#;
        let servers = parse("opencode.json", text).unwrap();
        let local = spec(&servers, "local");
        assert_eq!(
            (local.command.program.as_str(), &local.command.args[..]),
            ("bun", &["x".to_owned(), "--flag".to_owned()][..])
        );
        assert_eq!(local.command.env["K"], "v");
        assert!(matches!(entry(&servers, "remote"), Entry::Remote { .. }));
        assert!(matches!(entry(&servers, "off"), Entry::Disabled(_)));
    }

    #[test]
    fn zed_context_servers() {
        let text = r#"{"theme": "One Dark", "context_servers": {
            "new": {"command": "p", "args": ["1"], "env": {"E": "e"}},
            "old": {"command": {"path": "q", "args": ["2"], "env": {"F": "f"}}},
            "ext": {"source": "extension", "settings": {}}}}"#;
        let servers = parse("settings.json", text).unwrap();
        assert_eq!(spec(&servers, "new").command.args, ["1"]);
        assert_eq!(spec(&servers, "old").command.program, "q");
        assert_eq!(spec(&servers, "old").command.env["F"], "f");
        assert!(matches!(entry(&servers, "ext"), Entry::Invalid { .. }));
    }

    #[test]
    fn json_errors_name_file_line_and_key() {
        let error = parse(".mcp.json", "{\n\"mcpServers\": {\n\"x\": {\"args\": 5}}}").unwrap_err();
        assert!(
            error
                .0
                .starts_with("invalid config /cfg/.mcp.json line 3: mcpServers.x.args: "),
            "{error}"
        );
        let error = parse(".mcp.json", "{\n\"mcpServers\": \n").unwrap_err();
        assert!(
            error.0.contains("line 3") || error.0.contains("line 2"),
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
                    .0
                    .starts_with("invalid config /cfg/.mcp.json line 2: trailing"),
                "{error}"
            );
        }
        // Comments and blank lines after the document are fine.
        parse("mcp.json", "{\"servers\": {}}\n// done\n\n").unwrap();
    }

    #[test]
    fn a_file_without_any_servers_key_is_an_error() {
        let error = parse("settings.json", "{\"theme\": \"One Dark\"}").unwrap_err();
        assert_eq!(
            error.0,
            "invalid config /cfg/settings.json: it names no servers: none of the top-level keys \
             mcpServers, servers, mcp, context_servers is there"
        );
        for text in ["title = \"mine\"\n", "[server.fx]\ncommand = \"x\"\n"] {
            let error = parse("c.toml", text).unwrap_err();
            assert!(
                error
                    .0
                    .starts_with("invalid config /cfg/c.toml: it names no servers")
                    && error.0.ends_with("keys mcp, mcp_servers is there"),
                "{error}"
            );
        }
        // An empty table is a choice, and an empty file a start: neither is a mistake.
        assert_eq!(parse("c.toml", "[mcp]\n").unwrap(), []);
        assert_eq!(parse("c.json", "{\"mcpServers\": {}}").unwrap(), []);
        for text in ["", "# servers go here\n"] {
            assert_eq!(parse("c.toml", text).unwrap(), []);
        }
        assert_eq!(parse("c.json", " {} ").unwrap(), []);
    }

    #[test]
    fn timeouts_must_be_positive_and_finite() {
        for value in ["0", "-1", "nan", "inf", "-inf", "1e-12"] {
            let text = format!("[mcp.fx]\ncommand = \"x\"\ntimeout_sec = {value}\n");
            let error = parse("c.toml", &text).unwrap_err();
            assert!(
                error
                    .0
                    .starts_with("invalid config /cfg/c.toml line 3: mcp.fx.timeout_sec: "),
                "{value}: {error}"
            );
            assert!(
                error.0.contains("not a positive number of seconds"),
                "{error}"
            );
        }
        let error = parse(
            "c.toml",
            "[mcp_servers.fx]\ncommand = \"x\"\nstartup_timeout_ms = 0\n",
        )
        .unwrap_err();
        assert!(
            error.0.contains(
                "line 3: mcp_servers.fx.startup_timeout_ms: 0 is not a positive \
                 number of milliseconds"
            ),
            "{error}"
        );
        let error = parse(
            ".mcp.json",
            "{\"mcpServers\": {\n\"fx\": {\"command\": \"x\",\n\"timeout\": -5}}}",
        )
        .unwrap_err();
        assert!(
            error.0.starts_with(
                "invalid config /cfg/.mcp.json line 3: mcpServers.fx.timeout: -5 is not a \
                 positive number of milliseconds"
            ),
            "{error}"
        );
        let error = parse(
            "opencode.json",
            "{\"mcp\": {\"fx\": {\"command\": [\"x\"], \"timeout\": 0}}}",
        )
        .unwrap_err();
        assert!(error.0.contains("mcp.fx.timeout: 0 is not"), "{error}");
    }

    #[test]
    fn disabled_entries_are_disabled_whatever_their_variables() {
        let text = "[mcp.off]\ncommand = \"${NOPE}/bin\"\nargs = [\"${ALSO_NOPE}\"]\nenabled = false\n\n\
                    [mcp.bare]\nenabled = false\n";
        let servers = parse("c.toml", text).unwrap();
        let Entry::Disabled(off) = entry(&servers, "off") else {
            panic!("{:?}", entry(&servers, "off"))
        };
        assert_eq!(off.command.display(), "${NOPE}/bin ${ALSO_NOPE}");
        assert!(matches!(entry(&servers, "bare"), Entry::Disabled(_)));
        let json = r#"{"mcpServers": {"off": {"command": "x", "env": {"K": "${NOPE}"}, "disabled": true}}}"#;
        let servers = parse(".mcp.json", json).unwrap();
        let Entry::Disabled(off) = entry(&servers, "off") else {
            panic!("{:?}", entry(&servers, "off"))
        };
        assert_eq!(off.command.env["K"], "${NOPE}");
    }

    #[test]
    fn missing_command_is_an_invalid_entry() {
        let servers = parse("c.toml", "[mcp.x]\nargs = []\n").unwrap();
        assert_eq!(
            entry(&servers, "x"),
            &Entry::Invalid {
                reason: "no command given".into()
            }
        );
    }

    #[test]
    fn variable_expansion() {
        assert_eq!(
            expand("${TOKEN}-${NOPE:-dflt}-$HOME-$$", &env).unwrap(),
            "secret-dflt-$HOME-$$"
        );
        assert_eq!(expand("${EMPTY:-fallback}", &env).unwrap(), "fallback");
        assert_eq!(expand("${EMPTY}", &env).unwrap(), "");
        assert!(expand("${NOPE}", &env).unwrap_err().contains("NOPE"));
        assert!(expand("${UNCLOSED", &env).is_err());
    }

    #[test]
    fn discovery_order() {
        let cwd = Path::new("/project");
        let explicit = [PathBuf::from("/a.toml"), PathBuf::from("/b.json")];
        assert_eq!(
            discover(&explicit, &env, cwd),
            [
                (PathBuf::from("/a.toml"), true),
                (PathBuf::from("/b.json"), true)
            ]
        );
        let with_var = |key: &str| (key == "MCP_CLI_CONFIG").then(|| "/env.toml".to_owned());
        assert_eq!(
            discover(&[], &with_var, cwd),
            [(PathBuf::from("/env.toml"), true)]
        );
        assert_eq!(
            discover(&[], &env, cwd),
            [
                (PathBuf::from("/home/u/.config/mcp-cli/config.toml"), false),
                (PathBuf::from("/project/.mcp-cli.toml"), false),
                (PathBuf::from("/project/.mcp.json"), false),
            ]
        );
    }

    #[test]
    fn later_files_win_and_presets_fill_the_gaps() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = dir.join("first.toml");
        let second = dir.join("second.json");
        std::fs::write(
            &first,
            "[mcp.a]\ncommand = \"one\"\n[mcp.memory]\ncommand = \"mine\"\n",
        )
        .unwrap();
        std::fs::write(&second, r#"{"mcpServers": {"a": {"command": "two"}}}"#).unwrap();
        let files = [
            (first, true),
            (second, true),
            (dir.join("absent.toml"), false),
        ];
        let servers = load(&files, &env, &dir).unwrap();
        assert_eq!(spec(&servers, "a").command.program, "two");
        assert_eq!(spec(&servers, "memory").command.program, "mine");
        let filesystem = servers.iter().find(|s| s.name == "filesystem").unwrap();
        assert_eq!(filesystem.source, Source::Preset);
        let Entry::Enabled(spec) = &filesystem.entry else {
            panic!()
        };
        assert_eq!(spec.command.args.last().map(String::as_str), dir.to_str());

        let missing = load(&[(dir.join("absent.toml"), true)], &env, &dir).unwrap_err();
        assert!(missing.0.contains("absent.toml"), "{missing}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn presets_use_an_installed_prefix_when_given() {
        let prefix = |key: &str| (key == "MCP_CLI_NPM_PREFIX").then(|| "/opt/npm".to_owned());
        let presets = presets(&prefix, Path::new("/here"));
        let Entry::Enabled(spec) = &presets[0].entry else {
            panic!()
        };
        assert_eq!(
            spec.command.program,
            "/opt/npm/node_modules/.bin/mcp-server-filesystem"
        );
        assert_eq!(spec.command.args, ["/here"]);
        assert_eq!(spec.handshake_timeout, None);
    }

    #[test]
    fn comment_stripping_keeps_strings_and_lines() {
        let text =
            "{\"a\": \"x // y /* z */\", // c\n\"b\": [1,2,],\n/* multi\nline */ \"c\": \"\\\",\"}";
        let stripped = strip_json_comments(text);
        assert_eq!(stripped.matches('\n').count(), 3);
        let value: serde_json::Value = serde_json::from_str(&stripped).unwrap();
        assert_eq!(value["a"], "x // y /* z */");
        assert_eq!(value["b"], serde_json::json!([1, 2]));
        assert_eq!(value["c"], "\",");
    }
}
