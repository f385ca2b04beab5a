//! Helpers the config tests share: a fixed environment and one-file parsing.

use std::path::Path;

use super::{Config, ConfigError, Entry, Server, ServerSpec, parse_file};

pub(super) fn env(key: &str) -> Option<String> {
    match key {
        "HOME" => Some("/home/u".into()),
        "TOKEN" => Some("secret".into()),
        "EMPTY" => Some(String::new()),
        "secret:weather/API_KEY" => Some("k-weather".into()),
        _ => None,
    }
}

/// Parses `text` as the file `/cfg/<name>`.
pub(super) fn parse(name: &str, text: &str) -> Result<Config, ConfigError> {
    parse_file(Path::new(&format!("/cfg/{name}")), text, &env)
}

pub(super) fn entry<'a>(servers: &'a [Server], name: &str) -> &'a Entry {
    &servers.iter().find(|s| s.name == name).unwrap().entry
}

pub(super) fn spec<'a>(servers: &'a [Server], name: &str) -> &'a ServerSpec {
    match entry(servers, name) {
        Entry::Enabled(spec) | Entry::Disabled(spec) => spec,
        other => panic!("{name}: {other:?}"),
    }
}

/// The remote settings of an enabled remote entry.
pub(super) fn remote<'a>(servers: &'a [Server], name: &str) -> &'a super::Remote {
    match entry(servers, name) {
        Entry::Enabled(ServerSpec {
            remote: Some(remote),
            ..
        }) => remote,
        other => panic!("{name}: {other:?}"),
    }
}
