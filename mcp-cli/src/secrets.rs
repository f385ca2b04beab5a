//! Values a person gave that never go into a config file (what a registry entry marks
//! `isSecret`: API keys, tokens in headers): kept in the system keychain, or, where none
//! answers or `MCP_CLI_TOKEN_STORE=file` says so, in a 0600 file of the state folder's
//! `secrets/`. A config names one as `${secret:NAME}`, expanded like a variable wherever the
//! entry is read, so the file holds the reference and never the value.

use std::path::PathBuf;

use crate::auth::keychain;
use crate::config::Env;
use crate::files;

/// Where a secret is kept, for messages.
#[cfg_attr(not(feature = "cli"), allow(dead_code))] // only `install` keeps secrets
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kept {
    Keychain,
    File(PathBuf),
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kept::Keychain => f.write_str("the system keychain"),
            Kept::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Whether `name` may name a secret: letters, digits and `._-/`, as the entries' names and
/// variables `install` makes them from are; nothing that could leave the folder.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let fine = !name.is_empty()
        && name.len() <= 200
        && (name.chars()).all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        && !name
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    match fine {
        true => Ok(()),
        false => Err(format!(
            "{name:?} cannot name a secret (letters, digits and ._-/)"
        )),
    }
}

fn use_keychain(env: Env<'_>) -> bool {
    let file_only = env("MCP_CLI_TOKEN_STORE").is_some_and(|store| store == "file");
    !file_only && keychain::available().is_ok()
}

fn file(name: &str, env: Env<'_>) -> PathBuf {
    let state = crate::state::Folder::of_env(env);
    state.secrets().join(name.replace('/', "__"))
}

/// This process's environment, in which variable `secret:NAME` is secret `NAME`: the `env`
/// the command line reads its config files with, so that `${secret:NAME}` expands.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) fn lookup(key: &str) -> Option<String> {
    let process = |key: &str| std::env::var(key).ok();
    match key.strip_prefix("secret:") {
        Some(name) => get(name, &process),
        None => process(key),
    }
}

/// The secret kept as `name`, from the keychain or its file; `None` when neither holds it.
pub(crate) fn get(name: &str, env: Env<'_>) -> Option<String> {
    check_name(name).ok()?;
    if use_keychain(env)
        && let Ok(Some(value)) = keychain::load_secret(name)
    {
        return Some(value);
    }
    files::read_private_text(&file(name, env)).ok()
}

/// Keeps `value` as secret `name`: in the keychain when one answers, else in its file.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) fn set(name: &str, value: &str, env: Env<'_>) -> Result<Kept, String> {
    check_name(name)?;
    if use_keychain(env) {
        return (keychain::save_secret(name, value).map(|()| Kept::Keychain)).map_err(
            |keychain::Unavailable(why)| {
                format!("cannot keep secret {name} in the system keychain: {why}")
            },
        );
    }
    let path = file(name, env);
    let failed = |why: String| format!("cannot keep secret {name} in {}: {why}", path.display());
    if let Some(dir) = path.parent() {
        files::private_dir(dir).map_err(|e| failed(e.to_string()))?;
    }
    let replaced = files::replace(&path, value.as_bytes(), 0o600, || Ok::<(), ()>(()));
    replaced.map_err(|error| match error {
        files::ReplaceError::Write { error, .. } | files::ReplaceError::Rename(error) => {
            failed(error.to_string())
        }
        files::ReplaceError::Refused(()) => failed("refused".into()),
    })?;
    Ok(Kept::File(path))
}

/// Forgets secret `name` in both places it may be kept; whether either held it.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) fn remove(name: &str, env: Env<'_>) -> Result<bool, String> {
    check_name(name)?;
    let path = file(name, env);
    let in_file = match std::fs::remove_file(&path) {
        Ok(()) => true,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => return Err(format!("cannot delete {}: {error}", path.display())),
    };
    // Nothing can be in a keychain that does not answer.
    let in_keychain = keychain::remove_secret(name).unwrap_or(false);
    Ok(in_file || in_keychain)
}

/// The secrets entry `name` of a TOML file's text names (`${secret:NAME/...}`: its own).
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) fn named_by_entry(text: &str, name: &str) -> Vec<String> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let entry = table.get("mcp").and_then(|servers| servers.get(name));
    let mut found = Vec::new();
    let mut values: Vec<&toml::Value> = entry.into_iter().collect();
    while let Some(value) = values.pop() {
        match value {
            toml::Value::String(text) => {
                for piece in text.split("${secret:").skip(1) {
                    if let Some((secret, _)) = piece.split_once('}')
                        && secret.starts_with(&format!("{name}/"))
                        && !found.iter().any(|known| known == secret)
                    {
                        found.push(secret.to_owned());
                    }
                }
            }
            toml::Value::Array(items) => values.extend(items),
            toml::Value::Table(table) => values.extend(table.values()),
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_kept_in_private_files_when_told_to() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-secrets-{}", std::process::id()));
        let state = dir.to_string_lossy().into_owned();
        let env = move |key: &str| match key {
            "XDG_STATE_HOME" => Some(state.clone()),
            "MCP_CLI_TOKEN_STORE" => Some("file".into()),
            _ => None,
        };
        assert_eq!(get("weather/API_KEY", &env), None);
        let kept = set("weather/API_KEY", "s3cret", &env).unwrap();
        let Kept::File(path) = kept else {
            panic!("{kept:?}")
        };
        assert!(path.ends_with("secrets/weather__API_KEY"), "{path:?}");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(get("weather/API_KEY", &env).as_deref(), Some("s3cret"));
        let config = "[mcp.w]\ncommand = \"w\"\nenv = { KEY = \"${secret:weather/API_KEY}\" }\n";
        let expand = |text: &str| {
            crate::config::expand(text, &|key: &str| match key.strip_prefix("secret:") {
                Some(name) => get(name, &env),
                None => None,
            })
        };
        assert!(config.contains("${secret:"));
        assert_eq!(expand("${secret:weather/API_KEY}").as_deref(), Ok("s3cret"));
        let missing = expand("${secret:weather/OTHER}").unwrap_err();
        assert!(
            missing.contains("secret weather/OTHER is not kept on this machine"),
            "{missing}"
        );
        let text = "[mcp.weather]\nenv = { KEY = \"${secret:weather/API_KEY}\", B = \"x ${secret:other/K}\" }\n\
                    headers = { A = \"Bearer ${secret:weather/token}\" }\n[mcp.other]\nargs = [\"${secret:other/K}\"]\n";
        let mut named = named_by_entry(text, "weather");
        named.sort();
        assert_eq!(named, ["weather/API_KEY", "weather/token"], "its own only");
        assert!(remove("weather/API_KEY", &env).unwrap());
        assert_eq!(get("weather/API_KEY", &env), None);
        assert!(!remove("weather/API_KEY", &env).unwrap());
        for bad in ["", "../x", "a//b", "a b", "a/./b", "${x}"] {
            assert!(set(bad, "v", &env).is_err(), "{bad:?}");
            assert_eq!(get(bad, &env), None);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
