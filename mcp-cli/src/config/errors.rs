//! Saying where in a file something is: the line for an offset, and errors that name the
//! file, the line and the key.

use std::path::Path;

use super::ConfigError;

/// `FILE line N` for byte `offset` of `text`, or `FILE` when the place is unknown.
pub(super) fn origin(path: &Path, text: &str, offset: Option<usize>) -> String {
    let Some(offset) = offset else {
        return path.display().to_string();
    };
    // Bytes, not a str slice: a parser's offset may fall inside a multi-byte character.
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&byte| byte == b'\n').count() + 1;
    format!("{} line {line}", path.display())
}

pub(super) fn file_error(
    path: &Path,
    text: &str,
    offset: Option<usize>,
    key: &str,
    message: &str,
) -> ConfigError {
    let mut error = format!("invalid config {}: ", origin(path, text, offset));
    if !key.is_empty() {
        error.push_str(&format!("{key}: "));
    }
    error.push_str(&with_suggestion(message.trim()));
    ConfigError(error)
}

/// serde's "unknown field `comand`, expected one of `command`, ..." as a person wants it:
/// the key that is wrong and the one it most likely meant.
fn with_suggestion(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message.to_owned();
    };
    let Some((key, expected)) = rest.split_once('`') else {
        return message.to_owned();
    };
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    match crate::names::nearest(key, known) {
        Some(nearest) => format!("unknown key `{key}`; did you mean `{nearest}`?"),
        None => format!("unknown key `{key}`{expected}"),
    }
}

pub(super) fn no_servers_key(path: &Path, keys: &str) -> ConfigError {
    ConfigError(format!(
        "invalid config {}: it names no servers: none of the top-level keys {keys} is there",
        path.display()
    ))
}

/// The byte offset of a 1-based line and column, as serde_json reports them.
pub(super) fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    line_start + column.saturating_sub(1)
}
