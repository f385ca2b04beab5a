//! Edits to TOML config files with `toml_edit`, which keeps comments, order and layout: the
//! `enabled` switch of a native `[mcp.<name>]` or Codex `[mcp_servers.<name>]` entry, and
//! native entries added or removed.

use mcp_proto::Protocol;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, TableLike, Value, value};

use super::change::{NewServer, Refusal};

/// The tables servers live in: native, then Codex.
const SERVER_TABLES: [&str; 2] = ["mcp", "mcp_servers"];

/// A parsed file, and whether it ends its lines with `\r\n` throughout: `toml_edit` writes
/// `\n`, so such a file is edited as `\n` and given its `\r\n` back by [`Parsed::text`].
struct Parsed {
    doc: DocumentMut,
    crlf: bool,
}

impl Parsed {
    fn text(&self) -> String {
        let text = self.doc.to_string();
        if self.crlf {
            text.replace('\n', "\r\n")
        } else {
            text
        }
    }
}

/// Parses `text`, refusing files that `toml_edit` would not write back as they were.
fn document(text: &str) -> Result<Parsed, Refusal> {
    let crlf = text.contains("\r\n") && text.matches('\n').count() == text.matches("\r\n").count();
    let plain = if crlf {
        text.replace("\r\n", "\n")
    } else {
        text.to_owned()
    };
    let doc: DocumentMut = plain.parse().map_err(|_| Refusal::Unreadable)?;
    let parsed = Parsed { doc, crlf };
    if parsed.text() != text {
        return Err(Refusal::Unreadable);
    }
    Ok(parsed)
}

/// The one server table holding `name`.
fn holder(doc: &DocumentMut, name: &str) -> Result<&'static str, Refusal> {
    let holds = |table: &&str| {
        (doc.get(table).and_then(Item::as_table_like)).is_some_and(|t| t.contains_key(name))
    };
    let found: Vec<&str> = SERVER_TABLES.iter().copied().filter(holds).collect();
    match found[..] {
        [] => Err(Refusal::NotFound),
        [table] => Ok(table),
        _ => Err(Refusal::Ambiguous),
    }
}

fn entry_mut<'d>(
    doc: &'d mut DocumentMut,
    table: &str,
    name: &str,
) -> Result<&'d mut dyn TableLike, Refusal> {
    (doc.get_mut(table).and_then(Item::as_table_like_mut))
        .and_then(|servers| servers.get_mut(name))
        .and_then(Item::as_table_like_mut)
        .ok_or(Refusal::Unreadable)
}

/// `text` with server `name` switched on or off; `Ok(None)` when it already is. Off writes
/// `enabled = false`; on removes the key again (the default), or sets it to `true` when a
/// comment is attached to it.
pub(super) fn set_enabled(text: &str, name: &str, on: bool) -> Result<Option<String>, Refusal> {
    let mut parsed = document(text)?;
    let table = holder(&parsed.doc, name)?;
    let entry = entry_mut(&mut parsed.doc, table, name)?;
    let current = entry.get("enabled").map(|item| item.as_bool());
    match (current, on) {
        (None, true) | (Some(Some(true)), true) | (Some(Some(false)), false) => return Ok(None),
        (None, false) => {
            entry.insert("enabled", value(false));
        }
        (Some(_), true) if !has_comment(entry) => {
            entry.remove("enabled");
        }
        (Some(_), _) => {
            if let Some(current) = entry.get_mut("enabled").and_then(Item::as_value_mut) {
                let decor = current.decor().clone();
                *current = Value::from(on);
                *current.decor_mut() = decor;
            }
        }
    }
    Ok(Some(parsed.text()))
}

/// Whether a comment sits on the `enabled` line or just above it.
fn has_comment(entry: &dyn TableLike) -> bool {
    let key = entry
        .key("enabled")
        .and_then(|key| key.leaf_decor().prefix());
    let after = (entry.get("enabled").and_then(Item::as_value)).and_then(|v| v.decor().suffix());
    [key, after]
        .into_iter()
        .flatten()
        .any(|raw| raw.as_str().is_none_or(|text| text.contains('#')))
}

/// `text` with a native `[mcp.<name>]` entry for `server`; one already there is an error
/// unless `force`, which replaces it.
pub(super) fn add(
    text: &str,
    name: &str,
    server: &NewServer,
    force: bool,
) -> Result<String, Refusal> {
    let mut parsed = document(text)?;
    let doc = &mut parsed.doc;
    match holder(doc, name) {
        Err(Refusal::NotFound) => {}
        // Only a native entry is replaced: a Codex one of the same name would still win.
        Ok("mcp") if force => {}
        Err(Refusal::Unreadable) => return Err(Refusal::Unreadable),
        _ => return Err(Refusal::Exists),
    }
    let blank_line_before = !text.trim().is_empty();
    let servers = doc.entry("mcp").or_insert_with(|| {
        let mut table = Table::new();
        // No `[mcp]` header of its own: the entries' headers say `[mcp.<name>]`.
        table.set_implicit(true);
        Item::Table(table)
    });
    let servers = servers.as_table_like_mut().ok_or(Refusal::Unreadable)?;
    let mut entry = native_table(server);
    match servers.get(name).and_then(Item::as_table) {
        // A replaced entry keeps its place and the comments above it.
        Some(old) => {
            *entry.decor_mut() = old.decor().clone();
            entry.set_position(old.position());
        }
        None if blank_line_before => entry.decor_mut().set_prefix("\n"),
        None => {}
    }
    servers.insert(name, Item::Table(entry));
    Ok(parsed.text())
}

/// `text` without server `name`'s entry (native or Codex).
pub(super) fn remove(text: &str, name: &str) -> Result<String, Refusal> {
    let mut parsed = document(text)?;
    let table = holder(&parsed.doc, name)?;
    (parsed.doc.get_mut(table).and_then(Item::as_table_like_mut))
        .and_then(|servers| servers.remove(name))
        .ok_or(Refusal::Unreadable)?;
    Ok(parsed.text())
}

fn native_table(server: &NewServer) -> Table {
    let strings = |items: &[String]| Array::from_iter(items.iter().map(String::as_str));
    let map = |pairs: &std::collections::BTreeMap<String, String>| {
        InlineTable::from_iter(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    };
    let mut table = Table::new();
    if let Some(command) = &server.command {
        table.insert("command", value(command));
    }
    if !server.args.is_empty() {
        table.insert("args", value(strings(&server.args)));
    }
    if !server.env.is_empty() {
        table.insert("env", value(map(&server.env)));
    }
    if let Some(cwd) = &server.cwd {
        table.insert("cwd", value(cwd));
    }
    if let Some(url) = &server.url {
        table.insert("url", value(url));
    }
    if !server.headers.is_empty() {
        table.insert("headers", value(map(&server.headers)));
    }
    if let Some(variable) = &server.bearer_token_env_var {
        table.insert("bearer_token_env_var", value(variable));
    }
    if server.sse {
        table.insert("transport", value("sse"));
    }
    if let Some(seconds) = server.timeout_sec {
        table.insert("timeout_sec", number(seconds));
    }
    if let Some(seconds) = server.call_timeout_sec {
        table.insert("call_timeout_sec", number(seconds));
    }
    if let Some(tools) = &server.enabled_tools {
        table.insert("enabled_tools", value(strings(tools)));
    }
    if !server.disabled_tools.is_empty() {
        table.insert("disabled_tools", value(strings(&server.disabled_tools)));
    }
    if let Protocol::Revision(revision) = server.protocol {
        table.insert("protocol", value(revision));
    }
    if !server.env_pass.is_empty() {
        table.insert("env_pass", value(strings(&server.env_pass)));
    }
    if let Some(permissions) = &server.permissions {
        let mut inline = InlineTable::new();
        inline.insert("network", strings(&permissions.network).into());
        inline.insert("filesystem", strings(&permissions.filesystem).into());
        table.insert("permissions", value(inline));
    }
    if let Some(origin) = &server.registry {
        let mut inline = InlineTable::new();
        inline.insert("url", origin.url.as_str().into());
        inline.insert("name", origin.name.as_str().into());
        inline.insert("version", origin.version.as_str().into());
        let optional = [
            ("published_at", &origin.published_at),
            ("server_id", &origin.server_id),
            ("version_id", &origin.version_id),
        ];
        for (key, text) in optional {
            if let Some(text) = text {
                inline.insert(key, text.as_str().into());
            }
        }
        table.insert("registry", value(inline));
    }
    if server.disabled {
        table.insert("enabled", value(false));
    }
    table
}

/// Whole seconds as an integer (`10`, not `10.0`), as a person would write them.
fn number(seconds: f64) -> Item {
    if seconds.fract() == 0.0 && seconds.abs() < 1e15 {
        value(seconds as i64)
    } else {
        value(seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str, name: &str) -> String {
        let off = set_enabled(text, name, false).unwrap().unwrap();
        assert_eq!(set_enabled(&off, name, false).unwrap(), None, "{off}");
        let on = set_enabled(&off, name, true).unwrap().unwrap();
        assert_eq!(on, text);
        off
    }

    #[test]
    fn native_entries_with_comments_and_odd_layout() {
        let text = "# my servers\n\n[mcp.fx]   # the fixture\ncommand=\"x\"\n  args = [ \"a\",\n    \"b\" ] # two\n\n\n[mcp.other]\ncommand = 'y'\n\n[security]\nmcp_server_denylist = []\n";
        let off = round_trip(text, "fx");
        assert!(
            off.contains("    \"b\" ] # two\nenabled = false\n\n\n[mcp.other]"),
            "{off}"
        );
        round_trip("[mcp]\nfx = { command = \"x\" }  # inline\n", "fx");
        round_trip(
            "[mcp]\nfx.command = \"x\"\nfx.args = []\nother.command = \"y\"\n",
            "fx",
        );
    }

    #[test]
    fn codex_entries() {
        let text = "model = \"o3\"\r\n\r\n[mcp_servers.fx]\r\ncommand = \"x\"\r\n\r\n[mcp_servers.fx.env]\r\nA = \"1\"\r\n";
        round_trip(text, "fx");
    }

    #[test]
    fn a_written_switch_keeps_its_comment() {
        let text = "[mcp.fx]\ncommand = \"x\"\nenabled = false # flaky\n";
        let on = set_enabled(text, "fx", true).unwrap().unwrap();
        assert_eq!(on, "[mcp.fx]\ncommand = \"x\"\nenabled = true # flaky\n");
        let text = "[mcp.fx]\ncommand = \"x\"\nenabled = false\n";
        let on = set_enabled(text, "fx", true).unwrap().unwrap();
        assert_eq!(on, "[mcp.fx]\ncommand = \"x\"\n");
    }

    #[test]
    fn add_and_remove_native_entries() {
        let server = NewServer {
            command: Some("x".into()),
            args: vec!["a b".into()],
            env: [("K".to_owned(), "v".to_owned())].into(),
            ..NewServer::default()
        };
        let text = "# mine\n[mcp.fx]\ncommand = \"y\"\n\n[security]\nmcp_server_denylist = []\n";
        let added = add(text, "new", &server, false).unwrap();
        assert!(
            added
                .ends_with("\n[mcp.new]\ncommand = \"x\"\nargs = [\"a b\"]\nenv = { K = \"v\" }\n")
                || added.contains(
                    "\n\n[mcp.new]\ncommand = \"x\"\nargs = [\"a b\"]\nenv = { K = \"v\" }\n"
                ),
            "{added}"
        );
        assert_eq!(add(&added, "new", &server, false), Err(Refusal::Exists));
        assert_eq!(remove(&added, "new").unwrap(), text);
        let fresh = add("", "new", &server, false).unwrap();
        assert_eq!(
            fresh,
            "[mcp.new]\ncommand = \"x\"\nargs = [\"a b\"]\nenv = { K = \"v\" }\n"
        );
        assert_eq!(
            remove("[mcp.a]\ncommand = \"x\"\n", "b"),
            Err(Refusal::NotFound)
        );
    }
}
