//! The servers other hosts configure on this machine, from their standard places.
//! Only read here: another host's file is never written.

use std::path::{Path, PathBuf};

use super::discover::config_home;
use super::expand::RawServer;
use super::{ConfigError, ConfigErrorKind, Env, NewServer, read_raw, strip_json_comments};

/// One server another host configures.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The name the other host gives it (its key in that host's file).
    pub name: String,
    /// The host, with the project for Claude Code's per-project servers.
    pub host: String,
    /// The file it was read from.
    pub file: PathBuf,
    /// The entry as written, in native terms.
    pub server: NewServer,
    /// Why it cannot be used here whatever it says (a Zed extension's server).
    pub unusable: Option<String>,
    /// Configured for one project only: one of Claude Code's per-project (local-scope)
    /// servers, or a file in the current folder (which a cloned repository brings). Copied
    /// only when named, never by an `import --write` of everything.
    pub per_project: bool,
}

/// Each host's files, in the order they are looked at (and win on a name found twice), and
/// whether each is one project's (in the current folder) rather than the machine's.
fn places(env: Env<'_>, cwd: &Path) -> Vec<(&'static str, PathBuf, bool)> {
    let home = PathBuf::from(env("HOME").unwrap_or_default());
    let config = config_home(env);
    let codex = env("CODEX_HOME")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| home.join(".codex"), PathBuf::from);
    vec![
        (
            "Claude Desktop",
            config.join("Claude/claude_desktop_config.json"),
            false,
        ),
        ("Claude Code", home.join(".claude.json"), false),
        ("Cursor", home.join(".cursor/mcp.json"), false),
        ("Cursor", cwd.join(".cursor/mcp.json"), true),
        ("VS Code", config.join("Code/User/mcp.json"), false),
        ("VS Code", config.join("Code/User/settings.json"), false),
        ("VS Code", cwd.join(".vscode/mcp.json"), true),
        (
            "Windsurf",
            home.join(".codeium/windsurf/mcp_config.json"),
            false,
        ),
        ("Gemini CLI", home.join(".gemini/settings.json"), false),
        ("Gemini CLI", cwd.join(".gemini/settings.json"), true),
        ("Codex", codex.join("config.toml"), false),
        ("opencode", config.join("opencode/opencode.json"), false),
        ("opencode", config.join("opencode/opencode.jsonc"), false),
        ("opencode", cwd.join("opencode.json"), true),
        ("Zed", config.join("zed/settings.json"), false),
        ("packetcode", home.join(".packetcode/config.toml"), false),
        ("pi", home.join(".pi/agent/settings.json"), false),
        ("reeboot", home.join(".reeboot/config.json"), false),
        ("dispatch", cwd.join(".dispatch/mcp.json"), true),
    ]
}

/// Every server the other hosts configure, and an error for each of their files that exists
/// but cannot be read (the others are still listed).
pub fn import(env: Env<'_>, cwd: &Path) -> (Vec<Found>, Vec<ConfigError>) {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for (host, path, in_folder) in places(env, cwd) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut documents = vec![(host.to_owned(), text.clone(), in_folder)];
        if host == "Claude Code" {
            let projects = claude_projects(&text).into_iter();
            documents.extend(projects.map(|(host, text)| (host, text, true)));
        }
        for (host, text, per_project) in documents {
            match read_raw(&path, &text) {
                Ok(file) => found.extend(file.servers.into_iter().map(|(name, raw)| Found {
                    name,
                    host: host.clone(),
                    file: path.clone(),
                    unusable: raw.unusable.clone(),
                    server: native(raw),
                    per_project,
                })),
                // A host's settings without servers in them are nothing to import.
                Err(error) if error.kind == ConfigErrorKind::NoServers => {}
                Err(error) => errors.push(error),
            }
        }
    }
    (found, errors)
}

/// Claude Code's per-project servers in `~/.claude.json`, each as a document of its own.
fn claude_projects(text: &str) -> Vec<(String, String)> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&strip_json_comments(text)) else {
        return Vec::new();
    };
    let Some(projects) = value.get("projects").and_then(|p| p.as_object()) else {
        return Vec::new();
    };
    (projects.iter())
        .filter_map(|(project, settings)| {
            let servers = settings.get("mcpServers")?.as_object()?;
            let document = serde_json::json!({ "mcpServers": servers }).to_string();
            Some((format!("Claude Code project {project}"), document))
        })
        .collect()
}

fn native(raw: RawServer) -> NewServer {
    let globs = |globs: Vec<super::Glob>| globs.iter().map(|g| g.as_str().to_owned()).collect();
    NewServer {
        command: raw.command,
        args: raw.args,
        env: raw.env,
        cwd: raw.cwd,
        url: raw.url,
        headers: raw.headers,
        bearer_token_env_var: raw.bearer_token_env_var,
        sse: raw.transport == super::Transport::Sse,
        timeout_sec: raw.handshake_timeout.map(|d| d.as_secs_f64()),
        call_timeout_sec: raw.call_timeout.map(|d| d.as_secs_f64()),
        enabled_tools: raw.tools.enabled.map(globs),
        disabled_tools: globs(raw.tools.disabled),
        disabled: !raw.enabled,
        protocol: raw.protocol,
        // Another host's sandbox and origin are its own: not carried over.
        permissions: None,
        env_pass: Vec::new(),
        registry: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_revision_is_imported_as_written() {
        let revision = mcp_proto::Protocol::Revision("2025-11-25");
        let raw = RawServer {
            command: Some("x".to_owned()),
            enabled: true,
            protocol: revision,
            ..RawServer::default()
        };
        assert_eq!(native(raw).protocol, revision);
    }

    #[test]
    fn hosts_files_are_found_in_their_places() {
        let home = std::env::temp_dir().join(format!("mcp-cli-import-{}", std::process::id()));
        let cwd = home.join("project");
        let write = |path: &str, text: &str| {
            let path = home.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            ".claude.json",
            r#"{"numStartups": 3, "projects": {"/p": {"mcpServers": {"proj": {"command": "p"}}}}}"#,
        );
        write(
            ".codex/config.toml",
            "[mcp_servers.git]\ncommand = \"uvx\"\nargs = [\"mcp-server-git\"]\nenabled = false\n",
        );
        write(
            ".cursor/mcp.json",
            "{\"mcpServers\": {\"bad\": {\"args\": 5}}}",
        );
        write(
            "project/.dispatch/mcp.json",
            r#"{"mcpServers": {"web": {"url": "https://x.invalid", "headers": {"A": "${T}"}}}}"#,
        );
        let home_text = home.to_str().unwrap().to_owned();
        let env = |key: &str| (key == "HOME").then(|| home_text.clone());
        let (found, errors) = import(&env, &cwd);
        let names: Vec<_> = (found.iter())
            .map(|f| (f.name.as_str(), f.host.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("proj", "Claude Code project /p"),
                ("git", "Codex"),
                ("web", "dispatch")
            ]
        );
        assert!(found[1].server.disabled);
        assert_eq!(found[2].server.headers["A"], "${T}");
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].to_string().contains(".cursor/mcp.json"),
            "{}",
            errors[0]
        );
        std::fs::remove_dir_all(home).unwrap();
    }
}
