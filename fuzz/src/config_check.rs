//! Config parsing must never panic, whatever the file holds; and the editor, given any file,
//! either edits it or refuses, never corrupts: the edited file parses, the one server is
//! switched as asked, and every other server reads as before.

use std::path::Path;

use crate::config::{Config, Entry, parse_file, set_enabled};

/// The first byte picks the file name (and so the format guess); the rest is the file.
pub fn check_config(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let name = match selector % 4 {
        0 => "config.toml",
        1 => ".mcp.json",
        2 => "settings.jsonc",
        _ => "noextension",
    };
    let path = Path::new(name);
    let env = |key: &str| (key == "SET").then(|| "value".to_owned());
    let parsed = parse_file(path, text, &env);
    let stripped = crate::config::strip_json_comments(text);
    assert_eq!(stripped.matches('\n').count(), text.matches('\n').count());
    // The selector's upper bits pick which server to switch.
    let Some(server) = parsed.ok().and_then(|config| {
        let count = config.servers.len();
        (count > 0).then(|| {
            config.servers[usize::from(selector / 4) % count]
                .name
                .clone()
        })
    }) else {
        return;
    };
    for on in [false, true] {
        check_edit(path, text, &server, on);
    }
}

fn check_edit(path: &Path, text: &str, server: &str, on: bool) {
    let Ok(Some(edited)) = set_enabled(path, text, server, on) else {
        return;
    };
    let env = |_: &str| None;
    let before = parse_file(path, text, &env).expect("the original parses");
    let after = parse_file(path, &edited, &env).expect("an edited file parses");
    let others = |config: &Config| {
        (config.servers.iter())
            .filter(|s| s.name != server)
            .map(|s| (s.name.clone(), s.entry.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(others(&before), others(&after), "only {server} changes");
    let mine: Vec<&Entry> = (after.servers.iter())
        .filter(|s| s.name == server)
        .map(|s| &s.entry)
        .collect();
    assert_eq!(mine.len(), 1, "{server} is still there once");
    assert_eq!(
        !matches!(mine[0], Entry::Disabled(_)),
        on,
        "{server} switched"
    );
}
