//! Writing servers back into config files: enable and disable in the file that
//! defines a server, in that file's own format; native entries added and removed.
//!
//! Each edit is confined to one entry (`edit_toml.rs`, `edit_json.rs`) and then checked by
//! reading the result back: the file must still be valid, the one server must have changed as
//! asked, and every other server and the policy must read exactly as before. An edit that
//! fails the check is refused, so a file is edited or left alone, never corrupted.

use std::path::Path;

use super::change::{NewServer, Refusal};
use super::{
    Config, ConfigError, ConfigErrorKind, Entry, edit_json, edit_toml, is_json, parse_file,
};

/// What the edited file must say about the server.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    On,
    Off,
    Present,
    Absent,
}

/// `text` (the file at `path`) with server `name` enabled or disabled in the file's own
/// spelling; `Ok(None)` when it already is.
pub fn set_enabled(
    path: &Path,
    text: &str,
    name: &str,
    on: bool,
) -> Result<Option<String>, ConfigError> {
    let before = parse_file(path, text, &no_env)?;
    let (bom, body) = split_bom(text);
    let edited = if is_json(path, body) {
        edit_json::set_enabled(body, name, on)
    } else {
        edit_toml::set_enabled(body, name, on)
    };
    let Some(after) = edited.map_err(|refusal| refused(path, name, refusal))? else {
        return Ok(None);
    };
    let after = format!("{bom}{after}");
    let expect = if on { Expect::On } else { Expect::Off };
    check(path, &before, &after, name, expect)?;
    Ok(Some(after))
}

/// `text` with a native `[mcp.<name>]` entry for `server`; an existing one is an error unless
/// `force`.
pub fn add_server(
    path: &Path,
    text: &str,
    name: &str,
    server: &NewServer,
    force: bool,
) -> Result<String, ConfigError> {
    let before = native(path, text)?;
    let (bom, body) = split_bom(text);
    let after = edit_toml::add(body, name, server, force).map_err(|r| refused(path, name, r))?;
    let after = format!("{bom}{after}");
    check(path, &before, &after, name, Expect::Present)?;
    Ok(after)
}

/// `text` without server `name`'s TOML entry.
pub fn remove_server(path: &Path, text: &str, name: &str) -> Result<String, ConfigError> {
    let before = native(path, text)?;
    let (bom, body) = split_bom(text);
    let after = edit_toml::remove(body, name).map_err(|r| refused(path, name, r))?;
    let after = format!("{bom}{after}");
    check(path, &before, &after, name, Expect::Absent)?;
    Ok(after)
}

/// A leading byte order mark, kept as it is, and the text the editors work on.
fn split_bom(text: &str) -> (&str, &str) {
    match text.strip_prefix('\u{feff}') {
        Some(body) => ("\u{feff}", body),
        None => ("", text),
    }
}

/// Variables are left unset when checking: the same entries read the same either way.
fn no_env(_: &str) -> Option<String> {
    None
}

/// The file read as TOML, the only syntax native entries are written in.
fn native(path: &Path, text: &str) -> Result<Config, ConfigError> {
    if is_json(path, text) {
        let message = format!(
            "{} is JSON; add and remove write native TOML entries, so name a .toml file",
            path.display()
        );
        return Err(ConfigError::new(ConfigErrorKind::EditRefused, message).in_file(path));
    }
    parse_file(path, text, &no_env)
}

fn refused(path: &Path, name: &str, refusal: Refusal) -> ConfigError {
    let file = path.display();
    let message = match refusal {
        Refusal::NotFound => format!("no server named {name} in {file}"),
        Refusal::Ambiguous => {
            format!("{file} defines {name} more than once; edit it by hand")
        }
        Refusal::Unreadable => format!(
            "cannot edit {name} in {file} without changing the rest of the file; edit it by hand"
        ),
        Refusal::Exists => {
            format!("{file} already defines {name}; use --force to replace it")
        }
    };
    ConfigError::new(ConfigErrorKind::EditRefused, message).in_file(path)
}

/// Reads the edited text back and compares it with the file before the edit.
fn check(
    path: &Path,
    before: &Config,
    after: &str,
    name: &str,
    expect: Expect,
) -> Result<(), ConfigError> {
    let refuse = || {
        let message = format!(
            "editing {} would change more than {name}'s entry; left as it was, edit it by hand",
            path.display()
        );
        ConfigError::new(ConfigErrorKind::EditRefused, message).in_file(path)
    };
    let after = parse_file(path, after, &no_env).map_err(|_| refuse())?;
    let mine: Vec<&Entry> = (after.servers.iter())
        .filter(|server| server.name == name)
        .map(|server| &server.entry)
        .collect();
    let as_expected = match (expect, &mine[..]) {
        (Expect::Off, [Entry::Disabled(_)]) => true,
        (Expect::On, [entry]) => !matches!(entry, Entry::Disabled(_)),
        (Expect::Present, [_]) => true,
        (Expect::Absent, []) => true,
        _ => false,
    };
    if as_expected && others(before, name) == others(&after, name) {
        Ok(())
    } else {
        Err(refuse())
    }
}

/// Everything a file says apart from server `name`. Origins (line numbers) are left out, as
/// an edit above a rule moves it.
fn others<'c>(config: &'c Config, name: &str) -> impl PartialEq + use<'c> {
    let servers: Vec<_> = (config.servers.iter())
        .filter(|server| server.name != name)
        .map(|server| (server.name.clone(), server.entry.clone()))
        .collect();
    let policy = &config.policy;
    let list = |list: &'c [super::ListEntry]| list.iter().map(|e| e.server.as_str()).collect();
    let allow: Vec<&str> = list(&policy.allowlist);
    let deny: Vec<&str> = list(&policy.denylist);
    let rules: Vec<_> = (policy.rules.iter())
        .map(|rule| (rule.tool.as_str(), rule.action))
        .collect();
    (servers, allow, deny, rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_round_trips_byte_for_byte() {
        let files = [
            (
                "config.toml",
                "# native\n[mcp.fx]\ncommand = \"x\"   # why\nargs=['a']\n\n[mcp.other]\ncommand = \"y\"\n",
            ),
            (
                "config.toml",
                "model = \"o3\"\n[mcp_servers.fx]\n  command = \"x\"\n  [mcp_servers.fx.env]\n  K = \"v\"\n",
            ),
            (
                ".mcp.json",
                "{\n    \"mcpServers\": {\n        \"fx\": { \"command\": \"x\",\n                \"args\": [] },\n        \"other\": {\"command\": \"y\"}\n    }\n}\n",
            ),
            (
                "mcp.json",
                "{\n\t// VS Code\n\t\"servers\": {\n\t\t\"fx\": {\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"x\", /* the fixture */\n\t\t},\n\t},\n\t\"inputs\": [],\n}\n",
            ),
            (
                "opencode.json",
                "{\"$schema\": \"https://opencode.ai/config.json\",\n \"mcp\": {\"fx\": {\"type\": \"local\", \"command\": [\"x\"]}}}",
            ),
            (
                "settings.json",
                "// Zed settings\n{\n  \"theme\": \"One\",\n  \"context_servers\": {\n    \"fx\": {\n      \"command\": \"x\",\n      \"args\": [],\n    },\n  },\n}\n",
            ),
            (
                "config.json",
                "{\"mcp\": {\"servers\": [\n  {\"name\": \"fx\", \"command\": \"x\", \"args\": []}\n]}}\n",
            ),
        ];
        // Each also with a byte order mark in front, which stays where it is.
        let with_bom = files.map(|(name, text)| (name, format!("\u{feff}{text}")));
        let files = files.map(|(name, text)| (name, text.to_owned()));
        for (name, text) in files.iter().chain(&with_bom) {
            let (name, text) = (*name, text.as_str());
            let path = Path::new("/cfg").join(name);
            let off = set_enabled(&path, text, "fx", false).unwrap().unwrap();
            let servers = parse_file(&path, &off, &no_env).unwrap().servers;
            let fx = servers.iter().find(|s| s.name == "fx").unwrap();
            assert!(matches!(fx.entry, Entry::Disabled(_)), "{name}: {off}");
            assert_eq!(set_enabled(&path, &off, "fx", false).unwrap(), None);
            let on = set_enabled(&path, &off, "fx", true).unwrap().unwrap();
            assert_eq!(on, text, "{name}");
            assert_eq!(set_enabled(&path, text, "fx", true).unwrap(), None);
        }
    }

    #[test]
    fn bad_files_and_names_are_errors_naming_the_file() {
        let path = Path::new("/cfg/c.toml");
        let error = set_enabled(path, "[mcp.fx\n", "fx", false).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("invalid config /cfg/c.toml line 1"),
            "{error}"
        );
        let error = set_enabled(path, "[mcp.fx]\ncommand = \"x\"\n", "fy", false).unwrap_err();
        assert_eq!(error.to_string(), "no server named fy in /cfg/c.toml");
        let twice = "[mcp.fx]\ncommand = \"x\"\n[mcp_servers.fx]\ncommand = \"y\"\n";
        let error = set_enabled(path, twice, "fx", false).unwrap_err();
        assert_eq!(
            error.to_string(),
            "/cfg/c.toml defines fx more than once; edit it by hand"
        );
        let json = Path::new("/cfg/c.json");
        let error = add_server(json, "{}", "fx", &NewServer::default(), false).unwrap_err();
        assert!(
            error.to_string().starts_with("/cfg/c.json is JSON"),
            "{error}"
        );
    }

    #[test]
    fn added_entries_read_back_as_written() {
        let path = Path::new("/cfg/c.toml");
        let server = NewServer {
            url: Some("https://x.invalid/mcp".into()),
            headers: [("Authorization".to_owned(), "Bearer ${TOKEN}".to_owned())].into(),
            ..NewServer::default()
        };
        let text = add_server(path, "", "web", &server, false).unwrap();
        assert_eq!(
            text,
            "[mcp.web]\nurl = \"https://x.invalid/mcp\"\nheaders = { Authorization = \"Bearer ${TOKEN}\" }\n"
        );
        let error = add_server(path, &text, "web", &server, false).unwrap_err();
        assert!(error.to_string().contains("already defines web"), "{error}");
        let local = NewServer {
            command: Some("x".into()),
            ..NewServer::default()
        };
        let replaced = add_server(path, &text, "web", &local, true).unwrap();
        assert_eq!(replaced, "[mcp.web]\ncommand = \"x\"\n");
        assert_eq!(remove_server(path, &replaced, "web").unwrap(), "");
        let pinned = NewServer {
            protocol: mcp_proto::Protocol::Revision("2025-11-25"),
            ..local
        };
        let text = add_server(path, "", "old", &pinned, false).unwrap();
        assert_eq!(
            text,
            "[mcp.old]\ncommand = \"x\"\nprotocol = \"2025-11-25\"\n"
        );
        let config = native(path, &text).unwrap();
        let crate::config::Entry::Enabled(spec) = &config.servers[0].entry else {
            panic!("{config:?}")
        };
        assert_eq!(spec.protocol, pinned.protocol);
    }
}
