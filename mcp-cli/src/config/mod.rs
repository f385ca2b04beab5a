//! Config files: the native TOML, the host formats people already have, variable
//! expansion, discovery, the built-in presets, and the policy over servers and tools.
//!
//! Every format is read into one shape, [`Server`]. A file that cannot be read as its format is
//! an error naming the file, the line and the key; an entry that parses but cannot be used (no
//! command, an unset variable) is kept as [`Entry::Invalid`] so the other servers still work.
//!
//! Each syntax lists the top-level keys it knows in one place (`native.rs` for TOML, `json.rs`
//! for JSON), and each host's server entries are read in a file of their own, so adding a host
//! format is one new file and one line in that list (and its key in the error naming them).
//!
//! Across files ([`load`]) servers merge by name: a later file's entry replaces an earlier
//! one's, and with [`load_with_presets`] (the command line's choice) the presets fill in names
//! no file defines. Policies are concatenated in file
//! order instead. The first matching rule wins, so an earlier file's rule beats a later one's,
//! the user file's beats the project's: the safe way round, as a cloned project cannot allow
//! what the user denied. Denylists add up; a server must be in the allowlist of every file that has one, so a
//! project file cannot widen the user's. Every
//! server a policy names must exist, which is checked once all files and presets are in.
//!
//! What lives here:
//!
//! - `mod.rs`: `Config`, `Server`, `Entry`, `ServerSpec`; `load`, `load_with_presets`
//! - `discover.rs`: which config files to read, and in what order
//! - `tables.rs`: a file's top level, each key handed to the format that knows it
//! - `native.rs`: the native TOML (`[mcp.<name>]`) and what any TOML file may hold
//! - `hosts.rs`: the `mcpServers` table and VS Code's `servers`
//! - `json.rs`: JSON files: which key holds which host's servers; Claude Code's permissions
//! - `jsonc.rs`: JSON with comments and trailing commas, made plain JSON
//! - `codex.rs`: Codex CLI's `[mcp_servers.<name>]`
//! - `zed.rs`: Zed's `context_servers`
//! - `opencode.rs`: opencode's `mcp` table
//! - `reeboot.rs`: the JSON `mcp` key, which three hosts spell differently
//! - `units.rs`: values with a unit or a fixed set of spellings: timeouts, sizes, flags
//! - `expand.rs`: from the fields a format read to an `Entry`: `${VAR}` and the checks
//! - `command.rs`: how to reach a server: the program and its sandbox, or the URL
//! - `oauth.rs`: the OAuth choices an entry makes: token store, grant, private key
//! - `policy.rs`: globs, tool filters, allow- and denylists, rules
//! - `allowlist.rs`: `permissions.network`: the hosts a sandboxed server may reach
//! - `presets.rs`: the built-in servers, used for names no file defines
//! - `import.rs`: the servers other hosts configure on this machine
//! - `change.rs`: what an edit works with: the entry to write, why an edit is refused
//! - `edit.rs`: enable, disable, add and remove, in the file that defines the server
//! - `edit_json.rs`: edits to JSON files, confined to one server's bytes
//! - `edit_toml.rs`: edits to TOML files with `toml_edit`, layout kept
//! - `write.rs`: reading a file for an edit and writing it back atomically
//! - `errors.rs`: `ConfigError`, and the line an offset is on
//! - `testing.rs`: helpers the config tests share

mod allowlist;
mod change;
mod codex;
mod command;
mod discover;
mod edit;
mod edit_json;
mod edit_toml;
mod errors;
mod expand;
mod hosts;
mod import;
mod json;
mod jsonc;
mod native;
pub mod oauth;
mod opencode;
mod policy;
mod presets;
mod reeboot;
mod tables;
#[cfg(test)]
mod testing;
mod units;
mod write;
mod zed;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_proto::Protocol;

pub use allowlist::{HostPattern, REGISTRIES};
pub use change::{NewPermissions, NewServer};
pub use command::{Command, Sandbox, Transport};
pub use discover::{discover, native_file, project_files, user_file};
pub use edit::{add_server, remove_server, set_enabled};
pub use errors::{ConfigError, ConfigErrorKind};
pub use expand::expand;
pub use import::{Found, import};
pub use jsonc::strip_json_comments;
pub use policy::{Action, Glob, ListEntry, Policy, Rule, ToolFilter};
pub use presets::{NPX_HANDSHAKE, presets};
pub use write::{Original, read_original, read_private, write_back, write_private};

use expand::{RawServers, finish};

/// One server the config can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The configured name: its key in the config, and the prefix of its tools' shown names.
    pub name: String,
    /// The program, its arguments, environment, folder and sandbox (for a remote server, the
    /// URL only, for display).
    pub command: Command,
    /// Budget for spawn plus handshake.
    pub handshake_timeout: Option<Duration>,
    /// Per-call timeout, restarted by progress.
    pub call_timeout: Option<Duration>,
    /// Longest message accepted from this server, in bytes (`max_message_mb`); `None` = default.
    pub max_message_len: Option<usize>,
    /// How many bytes of a call's result `call` prints before it writes the whole result to
    /// a file instead (`max_result_bytes`); `None`: the command line's default.
    pub max_result_bytes: Option<u64>,
    /// At most this many tools, resources, resource templates and prompts (each) are kept
    /// of this server's listings (`max_listed`); `None`: the default, 5000.
    pub max_listed: Option<usize>,
    /// Whether `structuredContent` is checked against the tool's `outputSchema`
    /// (`validate_output`, default true).
    pub validate_output: bool,
    /// Which of the server's own tool names may be shown and called.
    pub tools: ToolFilter,
    /// Globs of the server's own tool names that `serve --search` lists beside its search
    /// tools (`always_load`: `true` is every tool); none when empty.
    pub always_load: Vec<Glob>,
    /// Absolute directories offered to the server as MCP roots; none declared when empty.
    pub roots: Vec<std::path::PathBuf>,
    /// Whether its tool definitions are pinned (`pin_tools`, default true).
    pub pin_tools: bool,
    /// Whether its tools are scanned for poisoning when first seen or changed (`scan_tools`,
    /// default true).
    pub scan_tools: bool,
    /// The name its pins are kept under, when not its own: an ad hoc server's name (its host,
    /// its program) is shared by servers that have nothing else in common, so its pins are
    /// kept under what identifies it instead.
    pub pin_key: Option<String>,
    /// Which revision to speak (`protocol`): [`Protocol::Auto`] (the default) finds out, and
    /// the hub caches what it found; a revision is spoken as configured, never probed.
    pub protocol: Protocol,
    /// Set for a server reached over HTTP (an entry with a `url`); `command` then holds the
    /// URL, for display only.
    pub remote: Option<Remote>,
    /// Where `install` found it (`registry = {...}`); `None` for an entry written by hand.
    pub registry: Option<RegistryOrigin>,
}

/// Where an installed entry came from, as `install` writes it (`registry = { url, name,
/// version, published_at, server_id, version_id }`): `servers` shows what that registry now
/// says of it (deprecated, deleted).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryOrigin {
    /// The registry's base URL.
    pub url: String,
    /// The server's name there (`io.github.owner/name`).
    pub name: String,
    /// The version installed.
    pub version: String,
    /// When the registry says that version was published.
    pub published_at: Option<String>,
    /// The registry's own ids of the server and the version, when it gives them.
    pub server_id: Option<String>,
    /// See [`server_id`](Self::server_id).
    pub version_id: Option<String>,
}

/// How to reach a remote server: its URL and headers with `${VAR}` expanded, and what its
/// OAuth login needs beyond that.
#[derive(Clone, PartialEq, Eq)]
pub struct Remote {
    /// The endpoint (`url`), variables expanded.
    pub url: String,
    /// Static headers, `bearer_token_env_var`'s `Authorization` among them.
    pub headers: Vec<(String, String)>,
    /// Which HTTP transport to speak (`transport`): Streamable HTTP with the fallback, or
    /// HTTP+SSE only.
    pub transport: Transport,
    /// `oauth_client_id`: a client registered by hand.
    pub oauth_client_id: Option<String>,
    /// The secret read from the variable `oauth_client_secret_env` names.
    pub oauth_client_secret: Option<String>,
    /// `oauth_client_metadata_url`: an https URL serving our client ID metadata document.
    pub oauth_client_metadata_url: Option<String>,
    /// `oauth_scopes`: asked for when the server's challenge names none.
    pub oauth_scopes: Vec<String>,
    /// `oauth_grant`: how tokens are obtained; `None` is the authorization code grant.
    pub oauth_grant: Option<crate::config::oauth::Grant>,
    /// `oauth_private_key_file` and `oauth_signing_alg`: the client authenticates with a
    /// private-key JWT instead of a secret.
    pub oauth_private_key: Option<crate::config::oauth::PrivateKey>,
    /// `oauth_assertion_file` or `oauth_assertion_env`: the workload's JWT, for
    /// `oauth_grant = "jwt_bearer"`.
    pub oauth_assertion: Option<crate::config::oauth::Jwt>,
    /// `oauth_idp_*` and `oauth_id_token_*`: the identity provider, for
    /// `oauth_grant = "enterprise"`.
    pub oauth_idp: Option<crate::config::oauth::IdentityProvider>,
    /// `oauth_dpop`: DPoP-bound tokens always (`true`), never (`false`), or, unset, when both
    /// the server and its authorization server offer them.
    pub oauth_dpop: Option<bool>,
    /// `token_store`: where this server's tokens are kept, over the global choice.
    pub token_store: Option<crate::config::oauth::TokenStore>,
}

impl Remote {
    /// A server at `url` with nothing else configured.
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            headers: Vec::new(),
            transport: Transport::Auto,
            oauth_client_id: None,
            oauth_client_secret: None,
            oauth_client_metadata_url: None,
            oauth_scopes: Vec::new(),
            oauth_grant: None,
            oauth_private_key: None,
            oauth_assertion: None,
            oauth_idp: None,
            oauth_dpop: None,
            token_store: None,
        }
    }

    /// Whether the config supplies its own `Authorization` header (then OAuth stays out).
    pub fn has_authorization(&self) -> bool {
        (self.headers.iter()).any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    }
}

/// Header values and the client secret are credentials: never printed, even in debug output.
impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("header_names", &names)
            .field("transport", &self.transport)
            .field("oauth_client_id", &self.oauth_client_id)
            .field("oauth_client_secret", &self.oauth_client_secret.is_some())
            .field("oauth_client_metadata_url", &self.oauth_client_metadata_url)
            .field("oauth_scopes", &self.oauth_scopes)
            .field("oauth_grant", &self.oauth_grant)
            .field("oauth_private_key", &self.oauth_private_key)
            .field("oauth_assertion", &self.oauth_assertion)
            .field("oauth_idp", &self.oauth_idp)
            .field("oauth_dpop", &self.oauth_dpop)
            .field("token_store", &self.token_store)
            .finish()
    }
}

impl ServerSpec {
    /// Whether its tool `tool` (its own name) is always loaded (`always_load`).
    pub fn always_loads(&self, tool: &str) -> bool {
        self.tools.allows(tool) && self.always_load.iter().any(|glob| glob.matches(tool))
    }

    /// A server run by `command`, every other setting at its default.
    pub fn new(name: &str, command: Command) -> ServerSpec {
        ServerSpec {
            name: name.to_owned(),
            command,
            handshake_timeout: None,
            call_timeout: None,
            max_message_len: None,
            max_result_bytes: None,
            max_listed: None,
            validate_output: true,
            tools: ToolFilter::default(),
            always_load: Vec::new(),
            roots: Vec::new(),
            pin_tools: true,
            scan_tools: true,
            pin_key: None,
            protocol: Protocol::Auto,
            remote: None,
            registry: None,
        }
    }

    /// A remote server at `remote.url`, every other setting at its default.
    pub fn remote(name: &str, remote: Remote) -> ServerSpec {
        ServerSpec {
            remote: Some(remote.clone()),
            ..ServerSpec::new(name, Command::new(remote.url))
        }
    }
}

/// What a configured name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entry {
    /// A usable entry that starts when asked for.
    Enabled(ServerSpec),
    /// A usable entry turned off in its file (`enabled = false`, `disabled: true`, `mcp-cli
    /// disable`): listed, never started.
    Disabled(ServerSpec),
    /// An entry that parsed but cannot be used; the reason says why.
    Invalid {
        /// What is wrong with it, shown in listings and in the error a call to it gets.
        reason: String,
        /// Its program and arguments, or its URL, as written (variables unexpanded).
        command: String,
    },
}

impl Entry {
    /// Its command line (or URL) as a person reads it, for tables and messages.
    pub fn command_line(&self) -> String {
        match self {
            Entry::Enabled(spec) | Entry::Disabled(spec) => match &spec.remote {
                Some(remote) => remote.url.clone(),
                None => spec.command.display(),
            },
            Entry::Invalid { command, .. } => command.clone(),
        }
    }
}

/// Where an entry came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// Written in this config file.
    File(PathBuf),
    /// One of the built-in presets ([`presets`]), which a file's entry of the same name
    /// replaces.
    Preset,
    /// Added by the program itself, through [`Config::add`].
    Code,
}

/// One configured name: what it stands for and where that was said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// The configured name.
    pub name: String,
    /// What it stands for: a server that starts, one turned off, or one that cannot be used.
    pub entry: Entry,
    /// The file (or preset, or code) the entry came from.
    pub source: Source,
}

/// Everything the config says: the servers and the policy over them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Every configured name, once each (a later file's entry replaces an earlier one),
    /// sorted by name.
    pub servers: Vec<Server>,
    /// The allow- and denylists and the tool rules of every file, concatenated.
    pub policy: Policy,
    /// Entries a [`Gate`] held back: never started, shown so that a person can approve them.
    pub pending: Vec<Pending>,
}

/// An entry a [`Gate`] held back (the command line's: a project file's entry not approved for
/// its folder). It replaces nothing while it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The held-back entry, as it would be configured once approved.
    pub server: Server,
    /// What decides what it runs, as its file writes it (variables not expanded), one part a
    /// line: what a person approves ([`Gate`]).
    pub written: Vec<String>,
    /// The entry of the same name that stays in effect meanwhile (an earlier file's or a
    /// preset), which approving this one would replace.
    pub replaces: Option<Server>,
}

/// Whether an entry read from a file takes effect, given the entry and what decides what it
/// runs as its file writes it ([`Pending::written`]); the entries it refuses are kept in
/// [`Config::pending`] instead, and replace nothing.
pub type Gate<'a> = &'a dyn Fn(&Server, &[String]) -> bool;

impl Config {
    /// The servers and policy of exactly `paths`, each of which must exist, with `${VAR}`s
    /// expanded from the process environment: [`load`] for an embedder that names its files.
    pub fn from_files(paths: &[impl AsRef<Path>]) -> Result<Self, ConfigError> {
        let files: Vec<(PathBuf, bool)> = (paths.iter())
            .map(|path| (path.as_ref().to_owned(), true))
            .collect();
        load(&files, &|key: &str| std::env::var(key).ok())
    }

    /// Adds a server defined in code, replacing any of the same name.
    pub fn add(&mut self, name: &str, command: Command) {
        self.add_spec(ServerSpec::new(name, command));
    }

    /// Adds a remote server defined in code, replacing any of the same name.
    pub fn add_remote(&mut self, name: &str, remote: Remote) {
        self.add_spec(ServerSpec::remote(name, remote));
    }

    /// Adds a server with settings of its own, replacing any of the same name.
    pub fn add_spec(&mut self, spec: ServerSpec) {
        let name = spec.name.clone();
        self.servers.retain(|server| server.name != name);
        self.servers.push(Server {
            name,
            entry: Entry::Enabled(spec),
            source: Source::Code,
        });
    }
}

/// Reads environment variables; injectable so tests need not touch the real environment.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Reads exactly `files` (each with whether it must exist) and nothing else: no presets, no
/// discovered files. Servers come back sorted by name, the policy concatenated in file order.
/// Nothing should start after an error here. `env` expands the files' `${VAR}`s.
///
/// This is the embedder's path: a hub built from it knows only the servers these files
/// define. [`load_with_presets`] is the command line's.
pub fn load(files: &[(PathBuf, bool)], env: Env<'_>) -> Result<Config, ConfigError> {
    merge(files, env, Vec::new(), &|_, _| true)
}

/// [`load`], with the built-in [`presets`] (`filesystem` rooted at `cwd`, `everything`,
/// `memory`) filling in names no file defines, and `gate` deciding which entries take effect:
/// the command line's choice, which holds a project file's entries until they are approved.
pub fn load_with_presets(
    files: &[(PathBuf, bool)],
    env: Env<'_>,
    cwd: &Path,
    gate: Gate<'_>,
) -> Result<Config, ConfigError> {
    merge(files, env, presets(env, cwd), gate)
}

/// The files merged in order (the entries `gate` refuses held apart), then `fallbacks` under
/// the names no file defines; policy names are checked against them all.
fn merge(
    files: &[(PathBuf, bool)],
    env: Env<'_>,
    fallbacks: Vec<Server>,
    gate: Gate<'_>,
) -> Result<Config, ConfigError> {
    let mut servers: BTreeMap<String, Server> = BTreeMap::new();
    let mut held = Vec::new();
    let mut policy = Policy::default();
    let mut rule_keys = Vec::new();
    for (path, required) in files {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && !required => continue,
            Err(error) => {
                return Err(ConfigError::unreadable(path, &error));
            }
        };
        let (file, keys, mut written) = read_file(path, &text, env)?;
        for server in file.servers {
            let written = written.remove(&server.name).unwrap_or_default();
            match gate(&server, &written) {
                true => servers.insert(server.name.clone(), server),
                false => {
                    held.push((server, written));
                    None
                }
            };
        }
        // What each name runs as this file leaves it is what its allowlist admits.
        let admitted = (file.policy.allowlist.into_iter()).map(|mut entry| {
            entry.admits = servers.get(&entry.server).map(|s| s.entry.clone());
            entry
        });
        policy.allowlist.extend(admitted);
        policy.denylist.extend(file.policy.denylist);
        policy.rules.extend(file.policy.rules);
        rule_keys.extend(keys);
    }
    for fallback in fallbacks {
        servers.entry(fallback.name.clone()).or_insert(fallback);
    }
    // A rule may name a server that waits for approval: it will apply once it is approved.
    let held_names = held
        .iter()
        .map(|(server, _): &(Server, _)| server.name.as_str());
    let names: Vec<&str> = servers
        .keys()
        .map(String::as_str)
        .chain(held_names)
        .collect();
    policy.check_names(&names, &rule_keys)?;
    let pending = (held.into_iter())
        .map(|(server, written)| Pending {
            replaces: servers.get(&server.name).cloned(),
            server,
            written,
        })
        .collect();
    Ok(Config {
        servers: servers.into_values().collect(),
        policy,
        pending,
    })
}

/// One file's servers and policy, without the presets. Names in the policy are not checked
/// here, as they may be defined in another file.
pub fn parse_file(path: &Path, text: &str, env: Env<'_>) -> Result<Config, ConfigError> {
    read_file(path, text, env).map(|(config, _, _)| config)
}

/// One file as its syntax read it, its servers not yet finished.
#[derive(Default)]
struct RawFile {
    servers: RawServers,
    policy: Policy,
    /// The key each of `policy.rules` is written under, for errors found once every file is read.
    rule_keys: Vec<String>,
}

/// Whether the file is read as JSON: by its extension, else by its first character.
fn is_json(path: &Path, text: &str) -> bool {
    path.extension()
        .is_some_and(|ext| ext == "json" || ext == "jsonc")
        || (path.extension().is_none_or(|ext| ext != "toml") && text.trim_start().starts_with('{'))
}

/// One file in its syntax, its servers as written (variables not expanded).
fn read_raw(path: &Path, text: &str) -> Result<RawFile, ConfigError> {
    // Editors on some systems start files with a byte order mark; it is not content.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if is_json(path, text) {
        json::read(path, text)
    } else {
        native::read(path, text)
    }
}

/// One file's servers, with what decides what each runs as written (by name).
type ReadFile = (Config, Vec<String>, BTreeMap<String, Vec<String>>);

/// [`parse_file`], plus the key each rule was written under and each server as written.
fn read_file(path: &Path, text: &str, env: Env<'_>) -> Result<ReadFile, ConfigError> {
    let file = read_raw(path, text)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let written = (file.servers.iter())
        .map(|(name, raw)| (name.clone(), raw.written()))
        .collect();
    let servers = (file.servers.into_iter())
        .map(|(name, raw)| Server {
            // An unusable entry says which file to fix.
            entry: match finish(&name, raw, env, base) {
                Entry::Invalid { reason, command } => Entry::Invalid {
                    reason: format!("{reason} (in {})", path.display()),
                    command,
                },
                entry => entry,
            },
            name,
            source: Source::File(path.to_owned()),
        })
        .collect();
    let config = Config {
        servers,
        policy: file.policy,
        pending: Vec::new(),
    };
    Ok((config, file.rule_keys, written))
}

#[cfg(test)]
mod tests {
    use super::testing::{env, parse, spec};
    use super::*;

    #[test]
    fn a_file_without_any_servers_key_is_an_error() {
        let error = parse("settings.json", "{\"theme\": \"One Dark\"}").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid config /cfg/settings.json: it names no servers: none of the top-level keys \
             mcpServers, servers, mcp, context_servers is there"
        );
        for text in ["title = \"mine\"\n", "[server.fx]\ncommand = \"x\"\n"] {
            let error = parse("c.toml", text).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with("invalid config /cfg/c.toml: it names no servers")
                    && error
                        .to_string()
                        .ends_with("keys mcp, mcp_servers is there"),
                "{error}"
            );
        }
        // An empty table is a choice, and an empty file a start: neither is a mistake.
        assert_eq!(parse("c.toml", "[mcp]\n").unwrap(), Config::default());
        assert_eq!(
            parse("c.json", "{\"mcpServers\": {}}").unwrap(),
            Config::default()
        );
        for text in ["", "# servers go here\n"] {
            assert_eq!(parse("c.toml", text).unwrap(), Config::default());
        }
        assert_eq!(parse("c.json", " {} ").unwrap(), Config::default());
    }

    #[test]
    fn servers_can_be_added_in_code() {
        let mut config = Config::default();
        config.add("a", Command::new("one"));
        config.add("b", Command::new("two"));
        config.add("a", Command::new("three"));
        let names: Vec<_> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(spec(&config.servers, "a").command.program, "three");
        assert_eq!(
            spec(&config.servers, "a"),
            &ServerSpec::new("a", Command::new("three"))
        );
        assert_eq!(config.servers[1].source, Source::Code);
    }

    /// A fresh folder for one test's files.
    fn folder(test: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mcp-cli-config-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn later_files_win_and_presets_fill_the_gaps() {
        let dir = folder("merge");
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
        assert!(load(&files, &env).unwrap().servers.len() == 2);
        let servers = load_with_presets(&files, &env, &dir, &|_, _| true)
            .unwrap()
            .servers;
        assert_eq!(spec(&servers, "a").command.program, "two");
        assert_eq!(spec(&servers, "memory").command.program, "mine");
        let filesystem = servers.iter().find(|s| s.name == "filesystem").unwrap();
        assert_eq!(filesystem.source, Source::Preset);
        let Entry::Enabled(spec) = &filesystem.entry else {
            panic!()
        };
        assert_eq!(spec.command.args.last().map(String::as_str), dir.to_str());

        let missing = load(&[(dir.join("absent.toml"), true)], &env).unwrap_err();
        assert!(missing.to_string().contains("absent.toml"), "{missing}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn policies_add_up_in_file_order() {
        let dir = folder("policy");
        let user = dir.join("config.toml");
        let project = dir.join(".mcp.json");
        std::fs::write(
            &user,
            "[mcp.gh]\ncommand = \"gh\"\n\n[security]\nmcp_server_denylist = [\"memory\"]\n\n\
             [[permissions.rules]]\ntool = \"gh__delete_*\"\naction = \"deny\"\n",
        )
        .unwrap();
        std::fs::write(
            &project,
            r#"{"permissions": {"allow": ["mcp__gh__*"], "deny": ["mcp__filesystem"]}}"#,
        )
        .unwrap();
        let files = [(user.clone(), true), (project, true)];
        let policy = load_with_presets(&files, &env, &dir, &|_, _| true)
            .unwrap()
            .policy;
        let tools: Vec<_> = policy.rules.iter().map(|r| r.tool.as_str()).collect();
        assert_eq!(tools, ["gh__delete_*", "mcp__filesystem__*", "mcp__gh__*"]);
        // The user's deny beats the project's allow.
        let rule = policy
            .rule_for("gh__delete_repo", "gh", "delete_repo")
            .unwrap();
        assert_eq!(rule.action, Action::Deny);
        assert_eq!(rule.origin, format!("{} line 8", user.display()));
        assert!(
            policy
                .server_denied(&policy::tests::named("memory"))
                .is_some()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn policy_names_must_name_servers() {
        let dir = folder("names");
        let toml = dir.join("c.toml");
        let json = dir.join("settings.json");
        let cases = [
            (
                &toml,
                "[mcp.gh]\ncommand = \"gh\"\n\n[security]\nmcp_server_allowlist = [\n  \"gh\",\n  \"githb\",\n]\n",
                "line 7: security.mcp_server_allowlist: no server named \"githb\"",
            ),
            (
                &toml,
                "[security]\n\nmcp_server_denylist = [\"githb\"]\n",
                "line 3: security.mcp_server_denylist: no server named \"githb\"",
            ),
            (
                &toml,
                "[[permissions.rules]]\ntool = \"memory__*\"\naction = \"ask\"\n\n\
                 [[permissions.rules]]\naction = \"deny\"\ntool = \"githb__*\"\n",
                "line 7: permissions.rules[1].tool: no server named \"githb\"",
            ),
            (
                &json,
                "{\"permissions\": {\n\"deny\": [\n\"mcp__memory__x\",\n\"mcp__githb__x\"]}}",
                "line 4: permissions.deny[1]: no server named \"githb\"",
            ),
        ];
        for (path, text, expected) in cases {
            std::fs::write(path, text).unwrap();
            let error =
                load_with_presets(&[(path.clone(), true)], &env, &dir, &|_, _| true).unwrap_err();
            let expected = format!(
                "invalid config {} {expected} (known: everything, filesystem, ",
                path.display()
            );
            assert!(
                error.to_string().starts_with(&expected),
                "{error}\n{expected}"
            );
        }
        // A server of another file, a preset, and a provider-safe name all count.
        std::fs::write(&toml, "[mcp.\"my.git\"]\ncommand = \"git\"\n").unwrap();
        std::fs::write(
            &json,
            r#"{"permissions": {"ask": ["my_git__*", "mcp__my.git__x", "memory__*", "*"]}}"#,
        )
        .unwrap();
        let files = [(toml, true), (json, true)];
        load_with_presets(&files, &env, &dir, &|_, _| true).unwrap();
        // Without the presets, a rule naming one names nothing.
        let error = load(&files, &env).unwrap_err();
        assert!(
            error.to_string().contains("no server named \"memory\""),
            "{error}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
