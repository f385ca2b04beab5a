//! Edits to JSON config files (comments and trailing commas allowed) confined to one server's
//! entry: a value replaced, or one member inserted or removed, every other byte left as it was.
//!
//! The structure is found in the text with its comments blanked out (same length, so offsets
//! match the original); the edits are applied to the original text.

use super::change::Refusal;
use super::strip_json_comments;

/// One `"key": value` of an object, as byte offsets.
#[derive(Debug)]
struct Member {
    key: String,
    key_start: usize,
    value_start: usize,
    value_end: usize,
}

/// An object: its braces' offsets and its members in file order.
#[derive(Debug)]
struct Object {
    open: usize,
    members: Vec<Member>,
}

/// Walks plain JSON (the comment-free copy); `None` wherever it is not what is expected.
struct Scanner<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn skip_space(&mut self) {
        while matches!(self.text.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Skips the value at `pos` (after any space), returning where it started.
    fn value(&mut self) -> Option<usize> {
        self.skip_space();
        let start = self.pos;
        match self.text.get(self.pos)? {
            b'{' => {
                self.object()?;
            }
            b'[' => {
                self.array()?;
            }
            b'"' => self.string()?,
            _ => {
                while !matches!(
                    self.text.get(self.pos),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.pos += 1;
                }
                if self.pos == start {
                    return None;
                }
            }
        }
        Some(start)
    }

    fn string(&mut self) -> Option<()> {
        self.pos += 1;
        loop {
            match self.text.get(self.pos)? {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => self.pos += 1,
            }
        }
    }

    fn object(&mut self) -> Option<Object> {
        let open = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip_space();
            match self.text.get(self.pos)? {
                b'}' => {
                    self.pos += 1;
                    return Some(Object { open, members });
                }
                b',' if !members.is_empty() => self.pos += 1,
                b'"' => {
                    let key_start = self.pos;
                    self.string()?;
                    let raw = std::str::from_utf8(self.text.get(key_start..self.pos)?).ok()?;
                    let key: String = serde_json::from_str(raw).ok()?;
                    self.skip_space();
                    if self.text.get(self.pos) != Some(&b':') {
                        return None;
                    }
                    self.pos += 1;
                    let value_start = self.value()?;
                    members.push(Member {
                        key,
                        key_start,
                        value_start,
                        value_end: self.pos,
                    });
                }
                _ => return None,
            }
        }
    }

    /// The items' start offsets.
    fn array(&mut self) -> Option<Vec<usize>> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_space();
            match self.text.get(self.pos)? {
                b']' => {
                    self.pos += 1;
                    return Some(items);
                }
                b',' if !items.is_empty() => self.pos += 1,
                _ => items.push(self.value()?),
            }
        }
    }
}

fn object_at(clean: &str, at: usize) -> Option<Object> {
    let mut scanner = Scanner {
        text: clean.as_bytes(),
        pos: at,
    };
    scanner.skip_space();
    if clean.as_bytes().get(scanner.pos) != Some(&b'{') {
        return None;
    }
    scanner.object()
}

fn array_at(clean: &str, at: usize) -> Option<Vec<usize>> {
    let mut scanner = Scanner {
        text: clean.as_bytes(),
        pos: at,
    };
    (clean.as_bytes().get(at) == Some(&b'[')).then(|| scanner.array())?
}

/// How a format spells "off": the key, its value when off, and whether the key is dropped
/// again when on (the default).
#[derive(Debug, Clone, Copy)]
struct Switch {
    key: &'static str,
    off: bool,
}

/// `mcpServers` and VS Code's `servers` say `disabled: true`; opencode, Zed and reeboot say
/// `enabled: false`.
const DISABLED: Switch = Switch {
    key: "disabled",
    off: true,
};
const ENABLED: Switch = Switch {
    key: "enabled",
    off: false,
};

/// The server entries named `name` in the file, with the switch each format uses.
fn entries(clean: &str, name: &str) -> Option<Vec<(Object, Switch)>> {
    let top = object_at(clean, 0)?;
    let mut found = Vec::new();
    for table in &top.members {
        let switch = match table.key.as_str() {
            "mcpServers" | "servers" => DISABLED,
            "mcp" | "context_servers" => ENABLED,
            _ => continue,
        };
        let Some(servers) = object_at(clean, table.value_start) else {
            continue;
        };
        let reeboot = (table.key == "mcp")
            .then(|| servers.members.iter().find(|m| m.key == "servers"))
            .flatten()
            .filter(|m| clean.as_bytes().get(m.value_start) == Some(&b'['));
        if let Some(list) = reeboot {
            // reeboot: `{"mcp": {"servers": [{"name": ...}, ...]}}`.
            for item in array_at(clean, list.value_start)? {
                let Some(entry) = object_at(clean, item) else {
                    continue;
                };
                let named = entry.members.iter().any(|m| {
                    m.key == "name"
                        && serde_json::from_str::<String>(&clean[m.value_start..m.value_end])
                            .is_ok_and(|n| n == name)
                });
                if named {
                    found.push((entry, ENABLED));
                }
            }
            continue;
        }
        for member in servers.members.iter().filter(|m| m.key == name) {
            if let Some(entry) = object_at(clean, member.value_start) {
                found.push((entry, switch));
            }
        }
    }
    Some(found)
}

/// `text` with server `name` switched on or off; `Ok(None)` when it already is.
pub(super) fn set_enabled(text: &str, name: &str, on: bool) -> Result<Option<String>, Refusal> {
    let clean = strip_json_comments(text);
    let mut found = entries(&clean, name).ok_or(Refusal::Unreadable)?;
    let (entry, switch) = match found.len() {
        0 => return Err(Refusal::NotFound),
        1 => found.remove(0),
        _ => return Err(Refusal::Ambiguous),
    };
    let current = (entry.members.iter().enumerate()).rfind(|(_, m)| m.key == switch.key);
    let is_off = |m: &Member| clean[m.value_start..m.value_end] == *switch.off.to_string();
    let off = switch.off.to_string();
    let edited = match (current, on) {
        (None, true) => return Ok(None),
        (Some((_, member)), false) if is_off(member) => return Ok(None),
        (Some((_, member)), false) => replace(text, member, &off),
        (None, false) => insert(text, &entry, switch.key, &off),
        // Back to the default: the key goes, unless that would take a comment with it.
        (Some((index, member)), true) => remove(text, &clean, &entry, index)
            .unwrap_or_else(|| replace(text, member, &(!switch.off).to_string())),
    };
    Ok(Some(edited))
}

fn replace(text: &str, member: &Member, value: &str) -> String {
    let mut out = text.to_owned();
    out.replace_range(member.value_start..member.value_end, value);
    out
}

/// Adds `"key": value` after the last member, laid out like that member: on a line of its own
/// with the same indent if it has one, else after a space.
fn insert(text: &str, entry: &Object, key: &str, value: &str) -> String {
    let mut out = text.to_owned();
    let member = format!("{}: {value}", serde_json::Value::from(key));
    let Some(last) = entry.members.last() else {
        out.insert_str(entry.open + 1, &member);
        return out;
    };
    let line_start = text[..last.key_start].rfind('\n').map_or(0, |at| at + 1);
    let indent = &text[line_start..last.key_start];
    let separator = if line_start > 0 && indent.trim().is_empty() {
        let newline = if text[..line_start].ends_with("\r\n") {
            "\r\n"
        } else {
            "\n"
        };
        format!("{newline}{indent}")
    } else {
        " ".to_owned()
    };
    out.insert_str(last.value_end, &format!(",{separator}{member}"));
    out
}

/// Removes member `index` with the comma that joins it to its neighbour; `None` when that
/// would remove anything but the member, one comma and blanks (a comment, say).
fn remove(text: &str, clean: &str, entry: &Object, index: usize) -> Option<String> {
    let members = &entry.members;
    let member = members.get(index)?;
    let plain = |range: std::ops::Range<usize>| text.get(range.clone()) == clean.get(range);
    let joint = |range: std::ops::Range<usize>| {
        let between = text.get(range)?;
        let only_blanks_and_one_comma = between.matches(',').count() == 1
            && between.chars().all(|c| c == ',' || c.is_ascii_whitespace());
        only_blanks_and_one_comma.then_some(())
    };
    if !plain(member.key_start..member.value_end) {
        return None;
    }
    let range = if index > 0 {
        let before = &members[index - 1];
        joint(before.value_end..member.key_start)?;
        before.value_end..member.value_end
    } else if let Some(after) = members.get(1) {
        joint(member.value_end..after.key_start)?;
        member.key_start..after.key_start
    } else {
        let rest = text.get(member.value_end..)?;
        if !rest.trim_start().starts_with('}') {
            return None;
        }
        member.key_start..member.value_end
    };
    let mut out = text.to_owned();
    out.replace_range(range, "");
    Some(out)
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
    fn mcp_servers_on_lines_of_their_own() {
        let text = "{\n  // mine\n  \"mcpServers\": {\n    \"fx\": {\n      \"command\": \"x\", \
                    // the fixture\n      \"args\": [\"a\"]\n    },\n    \"other\": {\"command\": \"y\"}\n  }\n}\n";
        let off = round_trip(text, "fx");
        assert!(
            off.contains("\"args\": [\"a\"],\n      \"disabled\": true\n    },"),
            "{off}"
        );
    }

    #[test]
    fn one_line_entries_trailing_commas_and_crlf() {
        let text = "{\"servers\": {\"fx\": {\"type\": \"stdio\", \"command\": \"x\",},},}";
        let off = round_trip(text, "fx");
        assert!(
            off.contains("\"command\": \"x\", \"disabled\": true,}"),
            "{off}"
        );
        let text =
            "{\r\n\"context_servers\": {\r\n  \"fx\": {\r\n    \"command\": \"x\"\r\n  }\r\n}\r\n}";
        let off = round_trip(text, "fx");
        assert!(
            off.contains("\"command\": \"x\",\r\n    \"enabled\": false\r\n"),
            "{off}"
        );
        round_trip("{\"mcpServers\": {\"fx\": {}}}", "fx");
    }

    #[test]
    fn a_written_key_is_removed_only_with_blanks_around_it() {
        let text = "{\"mcp\": {\"fx\": {\"enabled\": false, \"command\": [\"x\"]}}}";
        let on = set_enabled(text, "fx", true).unwrap().unwrap();
        assert_eq!(on, "{\"mcp\": {\"fx\": {\"command\": [\"x\"]}}}");
        let text = "{\"mcp\": {\"fx\": {\"command\": [\"x\"], /* why */ \"enabled\": false}}}";
        let on = set_enabled(text, "fx", true).unwrap().unwrap();
        assert_eq!(
            on,
            "{\"mcp\": {\"fx\": {\"command\": [\"x\"], /* why */ \"enabled\": true}}}"
        );
    }

    #[test]
    fn reeboot_servers_are_found_by_their_name() {
        let text = r#"{"mcp": {"servers": [{"name": "a", "command": "x"}, {"name": "fx", "command": "y"}]}}"#;
        let off = round_trip(text, "fx");
        assert!(
            off.contains(r#"{"name": "fx", "command": "y", "enabled": false}"#),
            "{off}"
        );
    }

    #[test]
    fn missing_and_twice_named_servers_are_refused() {
        let text =
            r#"{"mcpServers": {"fx": {"command": "x"}}, "servers": {"fx": {"command": "y"}}}"#;
        assert_eq!(set_enabled(text, "fx", false), Err(Refusal::Ambiguous));
        assert_eq!(set_enabled(text, "fy", false), Err(Refusal::NotFound));
        assert_eq!(set_enabled("[1]", "fx", false), Err(Refusal::Unreadable));
    }
}
