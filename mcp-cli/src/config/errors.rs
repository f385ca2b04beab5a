//! Config errors, and saying where in a file something is: the line for an offset, and
//! errors that name the file, the line and the key.

use std::path::{Path, PathBuf};

/// A config file that cannot be used, or an edit of one that cannot be made. It reads as one
/// sentence for a person; a program matches [`kind`](Self::kind) and reads the place from
/// [`file`](Self::file), [`line`](Self::line) and [`key`](Self::key), which are set where known.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// What went wrong.
    pub kind: ConfigErrorKind,
    /// The file at fault.
    pub file: Option<PathBuf>,
    /// The 1-based line in [`file`](Self::file).
    pub line: Option<usize>,
    /// The key path at fault, as written (`mcpServers.fs.args`, `security.mcp_server_allowlist`).
    pub key: Option<String>,
    message: String,
}

/// What kind of problem a [`ConfigError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The file exists but cannot be read.
    Unreadable,
    /// The file does not parse, or a value in it has the wrong shape or is out of range.
    Invalid,
    /// The file has none of the top-level keys that hold servers.
    NoServers,
    /// A policy list or rule names a server that no file defines.
    UnknownServer,
    /// An edit (add, remove, enable, disable, import) that the file or the request does not
    /// allow: no such server, one already there, a JSON file, several files named.
    EditRefused,
    /// An edited file could not be written back; it was left as it was.
    NotWritten,
}

impl ConfigError {
    /// An error of `kind` that reads as `message` and names no place.
    pub(super) fn new(kind: ConfigErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            file: None,
            line: None,
            key: None,
            message: message.into(),
        }
    }

    /// Names `path` as the file at fault.
    pub(super) fn in_file(mut self, path: &Path) -> Self {
        self.file = Some(path.to_owned());
        self
    }

    /// `path` exists but reading it failed with `error`.
    pub(super) fn unreadable(path: &Path, error: &std::io::Error) -> Self {
        let message = format!("cannot read config {}: {error}", path.display());
        Self::new(ConfigErrorKind::Unreadable, message).in_file(path)
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// `FILE line N` for byte `offset` of `text`, or `FILE` when the place is unknown.
pub(super) fn origin(path: &Path, text: &str, offset: Option<usize>) -> String {
    match offset {
        Some(offset) => format!("{} line {}", path.display(), line_of(text, offset)),
        None => path.display().to_string(),
    }
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    // Bytes, not a str slice: a parser's offset may fall inside a multi-byte character.
    let before = &text.as_bytes()[..offset.min(text.len())];
    before.iter().filter(|&&byte| byte == b'\n').count() + 1
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
    ConfigError {
        line: offset.map(|offset| line_of(text, offset)),
        key: (!key.is_empty()).then(|| key.to_owned()),
        ..ConfigError::new(ConfigErrorKind::Invalid, error).in_file(path)
    }
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
    let message = format!(
        "invalid config {}: it names no servers: none of the top-level keys {keys} is there",
        path.display()
    );
    ConfigError::new(ConfigErrorKind::NoServers, message).in_file(path)
}

/// A policy entry or rule written at `origin` (`FILE line N`, from [`origin`]) under `key`
/// names `server`, which no file defines.
pub(super) fn unknown_server(origin: &str, key: &str, server: &str, known: &[&str]) -> ConfigError {
    let message = format!(
        "invalid config {origin}: {key}: no server named {server:?} (known: {})",
        known.join(", ")
    );
    let (file, line) = match origin.rsplit_once(" line ") {
        Some((file, line)) if line.parse::<usize>().is_ok() => (file, line.parse().ok()),
        _ => (origin, None),
    };
    ConfigError {
        line,
        key: Some(key.to_owned()),
        ..ConfigError::new(ConfigErrorKind::UnknownServer, message).in_file(Path::new(file))
    }
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::testing::parse;
    use super::*;

    #[test]
    fn an_invalid_value_is_matched_by_kind_file_line_and_key() {
        let error = parse(
            "c.toml",
            "[mcp.fs]\ncommand = \"x\"\nargs = \"not a list\"\n",
        )
        .unwrap_err();
        assert_eq!(error.kind, ConfigErrorKind::Invalid);
        assert_eq!(error.file, Some(PathBuf::from("/cfg/c.toml")));
        assert_eq!(error.line, Some(3));
        assert_eq!(error.key.as_deref(), Some("mcp.fs.args"));
        // A syntax error has a place but no key.
        let error = parse("c.toml", "\n[mcp.fs\n").unwrap_err();
        assert_eq!(
            (error.kind, error.line, error.key),
            (ConfigErrorKind::Invalid, Some(2), None)
        );
    }

    #[test]
    fn a_file_without_servers_and_an_unknown_server_have_kinds_of_their_own() {
        let error = parse("c.toml", "[other]\nx = 1\n").unwrap_err();
        assert_eq!(error.kind, ConfigErrorKind::NoServers);
        assert_eq!(error.file, Some(PathBuf::from("/cfg/c.toml")));
        let error = unknown_server("/cfg/c.toml line 7", "permissions.deny[0]", "fx", &["fy"]);
        assert_eq!(error.kind, ConfigErrorKind::UnknownServer);
        assert_eq!(error.file.as_deref(), Some(Path::new("/cfg/c.toml")));
        assert_eq!(error.line, Some(7));
        assert_eq!(error.key.as_deref(), Some("permissions.deny[0]"));
    }
}
