//! The MCP Registry (`/v0.1`, the `server.json` schema of 2025-12-11) and the registries that
//! speak its API: a snapshot of each kept in the state folder (`sync.rs`, `snapshot.rs`),
//! searched and shown offline, and turned into a config entry by `install` (`install.rs`).
//!
//! Which registries: `registries = ["https://..."]` at the top of the user's own file (or the
//! one `--config` names), else the official one. A project's file never chooses them: a
//! cloned repository must not decide where the next `install` comes from.
//!
//! - `model.rs`: a registry's answer, read entry by entry
//! - `snapshot.rs`: the snapshot file
//! - `sync.rs`: pages, cursors, `updated_since` deltas and the bounds on all three
//! - `install.rs`: from a package or a remote to a native entry, asking for its values
//! - `checks.rs`: what a registry sends, checked before it reaches a command line
//! - `values.rs`: the values an entry needs, given, asked or defaulted, secrets kept aside
//! - `mcpb.rs`: MCP bundles: checked against their digest, unpacked, their manifest read

pub(crate) mod checks;
pub(crate) mod install;
pub(crate) mod mcpb;
pub(crate) mod model;
pub(crate) mod snapshot;
pub(crate) mod sync;
mod values;

use std::path::Path;
use std::sync::Arc;

use mcp_proto::Tool;
use serde_json::{Value, json};

use crate::config::Env;
use crate::hub::ToolEntry;
use model::{Listed, Status};
use snapshot::Snapshot;

/// The official registry, used when the user's file names none.
pub(crate) const OFFICIAL: &str = "https://registry.modelcontextprotocol.io";

/// The registries to use, in order: `given` (`--url`), else the `registries` list of the
/// user's file at `user_file`, else the official one.
pub(crate) fn configured(given: Option<&str>, user_file: &Path) -> Result<Vec<String>, String> {
    if let Some(url) = given {
        return Ok(vec![checked_url(url)?]);
    }
    let text = match std::fs::read_to_string(user_file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(format!("cannot read {}: {error}", user_file.display())),
    };
    // Only our own TOML file holds the list; a JSON file (another host's) has none.
    let table: toml::Table = match user_file.extension().is_some_and(|ext| ext == "json") {
        true => toml::Table::new(),
        false => {
            toml::from_str(&text).map_err(|error| format!("{}: {error}", user_file.display()))?
        }
    };
    let Some(list) = table.get("registries") else {
        return Ok(vec![OFFICIAL.to_owned()]);
    };
    let urls = list
        .as_array()
        .ok_or_else(|| format!("{}: registries is a list of URLs", user_file.display()))?;
    (urls.iter())
        .map(|url| match url.as_str() {
            Some(url) => checked_url(url),
            None => Err(format!(
                "{}: registries is a list of URLs",
                user_file.display()
            )),
        })
        .collect()
}

/// `url` without its trailing slash, if it is an http or https URL.
fn checked_url(url: &str) -> Result<String, String> {
    match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {
            Ok(url.trim_end_matches('/').to_owned())
        }
        _ => Err(format!("{url:?} is not a registry URL (http or https)")),
    }
}

/// The snapshots kept for `urls`, in their order; a registry never synced is left out, one
/// whose snapshot is unreadable is an error (the file is named).
pub(crate) fn snapshots(dir: &Path, urls: &[String]) -> Result<Vec<Snapshot>, String> {
    let mut kept = Vec::new();
    for url in urls {
        if let Some(snapshot) = Snapshot::load(&Snapshot::path(dir, url))? {
            kept.push(snapshot);
        }
    }
    Ok(kept)
}

/// `name` or `name@version` as a person types it.
pub(crate) fn split_version(given: &str) -> (&str, Option<&str>) {
    match given.rsplit_once('@') {
        Some((name, version)) if !name.is_empty() && !version.is_empty() => (name, Some(version)),
        _ => (given, None),
    }
}

/// The server named `name` in the first snapshot that has it, with its registry's URL.
pub(crate) fn find<'a>(snapshots: &'a [Snapshot], name: &str) -> Option<(&'a str, &'a Listed)> {
    (snapshots.iter()).find_map(|snapshot| {
        let listed = snapshot.servers.get(name)?;
        Some((snapshot.url.as_str(), listed))
    })
}

/// The servers of `snapshots` a person may install (not deleted), as documents for the
/// tool search's ranking: the name's namespace as the server and its last part as the tool,
/// the title, the description, and the packages' identifiers and variables as parameters.
pub(crate) fn documents(snapshots: &[Snapshot]) -> Vec<ToolEntry> {
    let mut seen = std::collections::HashSet::new();
    let mut documents = Vec::new();
    for snapshot in snapshots {
        for listed in sync::offered(snapshot) {
            if !seen.insert(listed.server.name.clone()) {
                continue;
            }
            documents.push(document(listed));
        }
    }
    documents
}

fn document(listed: &Listed) -> ToolEntry {
    let server = &listed.server;
    let (space, last) = server.name.split_once('/').unwrap_or(("", &server.name));
    let mut properties = serde_json::Map::new();
    for package in &server.packages {
        properties.insert(
            package.identifier.clone(),
            json!({"description": package.registry_type}),
        );
        for variable in &package.environment_variables {
            let description = variable.input.description.clone().unwrap_or_default();
            properties.insert(variable.name.clone(), json!({"description": description}));
        }
    }
    let mut description = server.description.clone();
    if listed.official.status == Status::Deprecated {
        description.push_str(" (deprecated)");
    }
    let tool = json!({
        "name": last,
        "title": server.title,
        "description": description,
        "inputSchema": {"type": "object", "properties": Value::Object(properties)},
    });
    let tool: Tool =
        serde_json::from_value(tool).unwrap_or_else(|_| unreachable!("a tool's fields"));
    ToolEntry {
        server: space.to_owned(),
        name: server.name.clone(),
        tool: Arc::new(tool),
        ask: None,
    }
}

/// Seconds since 1970, now.
pub(crate) fn now() -> u64 {
    (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .map_or(0, |since| since.as_secs())
}

/// The user's native file, where `registries` and installed entries live.
pub(crate) fn user_file(
    configs: &[std::path::PathBuf],
    env: Env<'_>,
) -> Result<std::path::PathBuf, String> {
    crate::config::native_file(configs, env).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_come_from_the_flag_the_user_file_or_the_official_default() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-registries-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        assert_eq!(configured(None, &file).unwrap(), [OFFICIAL]);
        std::fs::write(
            &file,
            "registries = [\"https://a.example/\", \"http://127.0.0.1:9/r\"]\n",
        )
        .unwrap();
        assert_eq!(
            configured(None, &file).unwrap(),
            ["https://a.example", "http://127.0.0.1:9/r"]
        );
        assert_eq!(
            configured(Some("https://b.example"), &file).unwrap(),
            ["https://b.example"]
        );
        std::fs::write(&file, "registries = [\"file:///etc\"]\n").unwrap();
        assert!(
            configured(None, &file)
                .unwrap_err()
                .contains("not a registry URL")
        );
        std::fs::write(&file, "registries = \"https://a.example\"\n").unwrap();
        assert!(
            configured(None, &file)
                .unwrap_err()
                .contains("list of URLs")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_and_versions_split_at_the_last_at() {
        assert_eq!(
            split_version("io.github.x/y@1.2.3"),
            ("io.github.x/y", Some("1.2.3"))
        );
        assert_eq!(split_version("io.github.x/y"), ("io.github.x/y", None));
        assert_eq!(split_version("x/y@"), ("x/y@", None));
    }
}
