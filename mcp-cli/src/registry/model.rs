//! What a registry says of a server, read from its `/v0.1` answers (the `server.json` schema of
//! 2025-12-11 inside the API's `ServerResponse`): the parts we install and show from, each
//! entry checked on its own so that one bad entry costs only itself.

use serde::Deserialize;
use serde_json::Value;

/// The longest name the schema allows.
const MAX_NAME: usize = 200;

/// One version of one server as the registry answered it: the server's own description and
/// the registry's metadata (`_meta["io.modelcontextprotocol.registry/official"]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Listed {
    pub(crate) server: Server,
    pub(crate) official: Official,
    /// The answer as sent, for `registry show --json`.
    pub(crate) raw: Value,
}

/// `server`: what the publisher wrote.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Server {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: String,
    pub(crate) title: Option<String>,
    pub(crate) version: String,
    pub(crate) website_url: Option<String>,
    pub(crate) repository: Option<Repository>,
    #[serde(default)]
    pub(crate) packages: Vec<Package>,
    #[serde(default)]
    pub(crate) remotes: Vec<Transport>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Repository {
    #[serde(default)]
    pub(crate) url: String,
}

/// The registry's own record of the version: whether it is still offered, and when.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Official {
    #[serde(default)]
    pub(crate) status: Status,
    pub(crate) published_at: Option<String>,
    pub(crate) updated_at: Option<String>,
    pub(crate) is_latest: Option<bool>,
    /// Registries that number their servers and versions say so here.
    pub(crate) server_id: Option<String>,
    pub(crate) version_id: Option<String>,
}

/// A version's lifecycle: `active` unless the registry says otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    #[default]
    Active,
    Deprecated,
    Deleted,
    /// A status newer than the schema we read: shown as it is not `active`.
    #[serde(other)]
    Other,
}

impl Status {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Deprecated => "deprecated",
            Status::Deleted => "deleted",
            Status::Other => "unknown status",
        }
    }
}

/// One way to run the server from a package.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Package {
    pub(crate) registry_type: String,
    pub(crate) registry_base_url: Option<String>,
    pub(crate) identifier: String,
    pub(crate) version: Option<String>,
    pub(crate) file_sha256: Option<String>,
    pub(crate) runtime_hint: Option<String>,
    #[serde(default)]
    pub(crate) transport: Transport,
    #[serde(default)]
    pub(crate) runtime_arguments: Vec<Argument>,
    #[serde(default)]
    pub(crate) package_arguments: Vec<Argument>,
    #[serde(default)]
    pub(crate) environment_variables: Vec<Named>,
    #[serde(default)]
    pub(crate) post_install_instructions: Vec<Instruction>,
}

/// How a package or a remote is spoken to: `stdio`, or `streamable-http`/`sse` at a URL (a
/// template whose `{names}` are the inputs').
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Transport {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) url: Option<String>,
    #[serde(default)]
    pub(crate) headers: Vec<Named>,
    /// A remote's URL variables (`{tenant_id}`).
    #[serde(default)]
    pub(crate) variables: std::collections::BTreeMap<String, Input>,
}

impl Default for Transport {
    fn default() -> Self {
        Self {
            kind: "stdio".into(),
            url: None,
            headers: Vec::new(),
            variables: Default::default(),
        }
    }
}

/// A value the person may have to give: a command-line argument's, a variable's, a header's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Input {
    pub(crate) description: Option<String>,
    #[serde(default)]
    pub(crate) is_required: bool,
    /// `string` (the default), `number`, `boolean` or `filepath`.
    pub(crate) format: Option<String>,
    /// Fixed by the publisher: not asked.
    pub(crate) value: Option<String>,
    #[serde(default)]
    pub(crate) is_secret: bool,
    pub(crate) default: Option<String>,
    pub(crate) placeholder: Option<String>,
    #[serde(default)]
    pub(crate) choices: Vec<String>,
    /// The inputs `value`'s `{names}` stand for.
    #[serde(default)]
    pub(crate) variables: std::collections::BTreeMap<String, Input>,
}

/// An environment variable or a header: a name and its input.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Named {
    pub(crate) name: String,
    #[serde(flatten)]
    pub(crate) input: Input,
}

/// A command-line argument: `positional` (its value alone) or `named` (`--flag` and value).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Argument {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// A named argument's flag, dashes included.
    pub(crate) name: Option<String>,
    /// A positional argument's label.
    pub(crate) value_hint: Option<String>,
    #[serde(default)]
    pub(crate) is_repeated: bool,
    #[serde(flatten)]
    pub(crate) input: Input,
}

/// A step the person may take after installing: shown, never run.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Instruction {
    #[serde(default)]
    pub(crate) description: String,
    pub(crate) command: Option<String>,
    pub(crate) documentation: Option<String>,
    #[serde(default)]
    pub(crate) optional: bool,
}

impl Listed {
    /// One element of a registry's `servers` array; the error says what is wrong with it.
    pub(crate) fn read(raw: Value) -> Result<Self, String> {
        let server = raw.get("server").ok_or("it has no `server`")?;
        let server = Server::deserialize(server).map_err(|error| {
            match raw.pointer("/server/name").and_then(Value::as_str) {
                Some(name) => format!("{}: {error}", crate::auth::http::printable(name)),
                None => error.to_string(),
            }
        })?;
        check_name(&server.name)?;
        if server.version.is_empty() || server.version.len() > 255 {
            return Err(format!("{}: its version is empty or too long", server.name));
        }
        let official = raw
            .pointer("/_meta/io.modelcontextprotocol.registry~1official")
            .map(|meta| Official::deserialize(meta).map_err(|error| error.to_string()))
            .transpose()
            .map_err(|error| format!("{}: its registry metadata: {error}", server.name))?
            .unwrap_or_default();
        Ok(Self {
            server,
            official,
            raw,
        })
    }

    /// `name@version`.
    pub(crate) fn label(&self) -> String {
        format!("{}@{}", self.server.name, self.server.version)
    }
}

/// A server name as the schema has it: `namespace/name`, of letters, digits and `.-_`, with
/// exactly one slash. Names end up in file names and commands, so nothing else passes.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char, extra: &str| c.is_ascii_alphanumeric() || extra.contains(c);
    let fine = match name.split_once('/') {
        Some((space, rest)) => {
            !space.is_empty()
                && !rest.is_empty()
                && space.chars().all(|c| allowed(c, ".-"))
                && rest.chars().all(|c| allowed(c, "._-"))
        }
        None => false,
    };
    match fine && name.len() <= MAX_NAME {
        true => Ok(()),
        false => Err(format!(
            "{:?} is not a registry server name (namespace/name)",
            crate::auth::http::printable(name)
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_entry_reads_with_its_packages_and_status() {
        let listed = Listed::read(json!({
            "server": {
                "name": "io.github.example/weather",
                "description": "Forecasts",
                "version": "1.2.0",
                "packages": [{
                    "registryType": "npm",
                    "identifier": "@example/weather",
                    "version": "1.2.0",
                    "transport": {"type": "stdio"},
                    "environmentVariables": [{"name": "API_KEY", "isSecret": true, "isRequired": true}],
                    "packageArguments": [{"type": "named", "name": "--units", "choices": ["metric", "imperial"]}]
                }]
            },
            "_meta": {"io.modelcontextprotocol.registry/official": {
                "status": "deprecated", "publishedAt": "2026-01-02T03:04:05Z", "isLatest": true
            }}
        }))
        .unwrap();
        assert_eq!(listed.label(), "io.github.example/weather@1.2.0");
        assert_eq!(listed.official.status, Status::Deprecated);
        let package = &listed.server.packages[0];
        assert!(package.environment_variables[0].input.is_secret);
        assert_eq!(
            package.package_arguments[0].input.choices,
            ["metric", "imperial"]
        );
    }

    #[test]
    fn bad_entries_say_why() {
        let no_server = Listed::read(json!({"name": "x/y"})).unwrap_err();
        assert!(no_server.contains("no `server`"), "{no_server}");
        for name in ["noslash", "a/b/c", "../etc/passwd", "a b/c", "/x", "x/"] {
            let error =
                Listed::read(json!({"server": {"name": name, "version": "1"}})).unwrap_err();
            assert!(
                error.contains("not a registry server name"),
                "{name}: {error}"
            );
        }
        let no_version = Listed::read(json!({"server": {"name": "a/b"}})).unwrap_err();
        assert!(no_version.contains("version"), "{no_version}");
    }
}
