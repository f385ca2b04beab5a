//! What a registry sends, checked before it reaches a command line or a config entry:
//! package identifiers and versions that look like their registry's (so `--exec=...` can
//! never pose as an npm package), image references, values against their choices and
//! formats, and no publisher's text holding `${`, which the config would expand from the
//! person's own environment.

use super::model::Input;

/// Whether `url` is plain HTTP to this machine (a registry of one's own, a test's).
pub(crate) fn is_loopback(url: &url::Url) -> bool {
    url.scheme() == "http" && matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"))
}

/// A value checked against its input's choices and format, as written into the entry: a
/// `filepath` is made absolute (from the folder `install` runs in, `~/` from the home), since
/// the server would read a relative one from wherever it is started.
pub(super) fn checked_value(
    key: &str,
    input: &Input,
    value: String,
    what: &str,
) -> Result<String, String> {
    if !input.choices.is_empty() && !input.choices.contains(&value) {
        return Err(format!(
            "{what} {key} is one of {}, not {value:?}",
            input.choices.join(", ")
        ));
    }
    if value.contains(['\n', '\r', '\0']) {
        return Err(format!("{what} {key} holds a line break"));
    }
    let format = input.format.as_deref().unwrap_or("string");
    match format {
        "number" if !value.parse::<f64>().is_ok_and(f64::is_finite) => {}
        "boolean" if !matches!(value.as_str(), "true" | "false") => {}
        "filepath" => return Ok(absolute(value)),
        _ => return Ok(value),
    }
    Err(format!("{what} {key} is a {format}, not {value:?}"))
}

/// `path` from the current folder, or `~/...` from the home folder.
pub(super) fn absolute(path: String) -> String {
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return std::path::Path::new(&home)
            .join(rest)
            .to_string_lossy()
            .into_owned();
    }
    match std::path::Path::new(&path).is_absolute() || path.contains("${") {
        true => path,
        false => (std::env::current_dir().unwrap_or_default().join(&path))
            .to_string_lossy()
            .into_owned(),
    }
}

/// Refuses a publisher's text holding `${`: the config would expand it from the person's
/// environment (a registry entry must not read `${GITHUB_TOKEN}` into a server's arguments).
pub(super) fn no_expansion(key: &str, text: &str) -> Result<(), String> {
    match text.contains("${") {
        true => Err(format!(
            "the registry's value for {key} holds `${{`, which the config would expand from your environment"
        )),
        false => Ok(()),
    }
}

/// An npm package name: `name` or `@scope/name`, lowercase URL-safe characters.
pub(super) fn check_npm(identifier: &str) -> Result<(), String> {
    let part = |text: &str| {
        !text.is_empty()
            && !text.starts_with(['.', '_', '-'])
            && text
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._~".contains(c))
    };
    let fine = match identifier.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('/')
            .is_some_and(|(scope, name)| part(scope) && part(name)),
        None => part(identifier),
    };
    match fine && identifier.len() <= 214 {
        true => Ok(()),
        false => Err(format!("{identifier:?} is not an npm package name")),
    }
}

/// A PyPI project name (PEP 508's form).
pub(super) fn check_pypi(identifier: &str) -> Result<(), String> {
    let fine = identifier.starts_with(|c: char| c.is_ascii_alphanumeric())
        && identifier.len() <= 200
        && identifier
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
    match fine {
        true => Ok(()),
        false => Err(format!("{identifier:?} is not a PyPI package name")),
    }
}

/// A container image reference: `registry/name:tag` or `@sha256:...`.
pub(super) fn check_image(identifier: &str) -> Result<(), String> {
    let fine = identifier.starts_with(|c: char| c.is_ascii_alphanumeric())
        && identifier.len() <= 500
        && identifier
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._/:@".contains(c));
    match fine {
        true => Ok(()),
        false => Err(format!("{identifier:?} is not a container image reference")),
    }
}

/// An exact version: no range, nothing a command line could read as a flag.
pub(super) fn check_version(version: &str) -> Result<&str, String> {
    let fine = version.starts_with(|c: char| c.is_ascii_alphanumeric())
        && version.len() <= 100
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+-_".contains(c));
    match fine {
        true => Ok(version),
        false => Err(format!("{version:?} is not an exact package version")),
    }
}
