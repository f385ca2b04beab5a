//! Config parsing must never panic, whatever the file holds.

use std::path::Path;

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
    let env = |key: &str| (key == "SET").then(|| "value".to_owned());
    let _ = mcp_cli::config::parse_file(Path::new(name), text, &env);
    let stripped = mcp_cli::config::strip_json_comments(text);
    assert_eq!(stripped.matches('\n').count(), text.matches('\n').count());
}
