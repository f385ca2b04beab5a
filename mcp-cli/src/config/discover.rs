//! Which config files to read, and in what order.

use std::path::{Path, PathBuf};

use super::{ConfigError, ConfigErrorKind, Env};

/// The files to read, in order (later ones win by server name), and whether each must exist.
pub fn discover(explicit: &[PathBuf], env: Env<'_>, cwd: &Path) -> Vec<(PathBuf, bool)> {
    if !explicit.is_empty() {
        return explicit.iter().map(|path| (path.clone(), true)).collect();
    }
    if let Some(path) = env("MCP_CLI_CONFIG").filter(|p| !p.is_empty()) {
        return vec![(PathBuf::from(path), true)];
    }
    let user = std::iter::once(user_file(env));
    let found = user.chain(project_files(explicit, env, cwd));
    found.map(|path| (path, false)).collect()
}

/// The files of [`discover`]'s list that were found in `cwd` rather than chosen by the user
/// (`.mcp-cli.toml`, `.mcp.json`): none when files are named with `--config` or
/// `$MCP_CLI_CONFIG`. A cloned repository brings them, so their servers wait for approval.
pub fn project_files(explicit: &[PathBuf], env: Env<'_>, cwd: &Path) -> Vec<PathBuf> {
    let chosen = !explicit.is_empty() || env("MCP_CLI_CONFIG").is_some_and(|p| !p.is_empty());
    match chosen {
        true => Vec::new(),
        false => vec![cwd.join(".mcp-cli.toml"), cwd.join(".mcp.json")],
    }
}

/// The file `add`, `remove` and `import --write` write to: the one `--config FILE` given, else
/// `$MCP_CLI_CONFIG`, else the user file.
pub fn native_file(explicit: &[PathBuf], env: Env<'_>) -> Result<PathBuf, ConfigError> {
    match explicit {
        [] => Ok(env("MCP_CLI_CONFIG")
            .filter(|p| !p.is_empty())
            .map_or_else(|| user_file(env), PathBuf::from)),
        [one] => Ok(one.clone()),
        _ => Err(ConfigError::new(
            ConfigErrorKind::EditRefused,
            "several --config files given; name the one to write with a single --config FILE",
        )),
    }
}

/// The user's own file: `$XDG_CONFIG_HOME/mcp-cli/config.toml`, default
/// `~/.config/mcp-cli/config.toml`.
pub fn user_file(env: Env<'_>) -> PathBuf {
    config_home(env).join("mcp-cli/config.toml")
}

/// `$XDG_CONFIG_HOME`, default `~/.config`.
pub(super) fn config_home(env: Env<'_>) -> PathBuf {
    match env("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env("HOME").unwrap_or_default()).join(".config"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::env;

    #[test]
    fn discovery_order() {
        let cwd = Path::new("/project");
        let explicit = [PathBuf::from("/a.toml"), PathBuf::from("/b.json")];
        assert_eq!(
            discover(&explicit, &env, cwd),
            [
                (PathBuf::from("/a.toml"), true),
                (PathBuf::from("/b.json"), true)
            ]
        );
        let with_var = |key: &str| (key == "MCP_CLI_CONFIG").then(|| "/env.toml".to_owned());
        assert_eq!(
            discover(&[], &with_var, cwd),
            [(PathBuf::from("/env.toml"), true)]
        );
        assert_eq!(
            discover(&[], &env, cwd),
            [
                (PathBuf::from("/home/u/.config/mcp-cli/config.toml"), false),
                (PathBuf::from("/project/.mcp-cli.toml"), false),
                (PathBuf::from("/project/.mcp.json"), false),
            ]
        );
        assert_eq!(
            project_files(&[], &env, cwd),
            [
                PathBuf::from("/project/.mcp-cli.toml"),
                PathBuf::from("/project/.mcp.json")
            ]
        );
        assert!(project_files(&explicit, &env, cwd).is_empty());
        assert!(project_files(&[], &with_var, cwd).is_empty());
    }
}
