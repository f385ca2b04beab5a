//! Where the program keeps what outlives a run, named in one place: the state folder
//! (`$XDG_STATE_HOME/mcp-cli`, default `~/.local/state/mcp-cli`) with the servers' logs, the
//! tool pins, the OAuth tokens, the servers' protocol eras, the catalogue of their listings
//! and their tools' vectors for search, the records of their tasks, results too large to
//! print, and the daemons' own logs; and the per-user runtime folder that holds the daemons'
//! sockets. Every folder here is made 0700 and
//! every file 0600, never opened through a symbolic link (`crate::files`).

use std::path::{Path, PathBuf};

use crate::config::Env;

/// The state folder and what lives in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    root: PathBuf,
}

impl Folder {
    /// `$XDG_STATE_HOME/mcp-cli`, default `~/.local/state/mcp-cli`.
    pub fn of_env(env: Env<'_>) -> Self {
        let state = match env("XDG_STATE_HOME").filter(|dir| !dir.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(env("HOME").unwrap_or_default()).join(".local/state"),
        };
        Self {
            root: state.join("mcp-cli"),
        }
    }

    /// The state folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Each server's stderr log, `<name>.log`.
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// The pinned tool definitions, `<server>.json`.
    pub fn pins(&self) -> PathBuf {
        self.root.join("pins")
    }

    /// The OAuth tokens and client registrations, one file per server.
    pub fn tokens(&self) -> PathBuf {
        self.root.join("auth")
    }

    /// The revision each `auto` server spoke last, `eras.json`.
    pub fn eras(&self) -> PathBuf {
        self.root.join("eras.json")
    }

    /// Each server's listings as last listed (the catalogue on disk), one file per server.
    pub fn catalogue(&self) -> PathBuf {
        self.root.join("catalogue")
    }

    /// The tools' vectors under a search model that is a sentence encoder, one file per model.
    pub fn search_vectors(&self) -> PathBuf {
        self.root.join("search-vectors")
    }

    /// The tasks servers run for calls, one record each.
    pub fn tasks(&self) -> PathBuf {
        self.root.join("tasks")
    }

    /// Tool results too large to print (or to hand a gateway's host) whole, one file each.
    pub fn results(&self) -> PathBuf {
        self.root.join("results")
    }

    /// Which servers of project files were approved for their folders, `approvals.json`.
    pub fn approvals(&self) -> PathBuf {
        self.root.join("approvals.json")
    }

    /// The bearer token `serve --listen` requires of its hosts.
    pub fn listen_token(&self) -> PathBuf {
        self.root.join("listen-token")
    }

    /// The secrets `${secret:NAME}` names, where no keychain keeps them, one file each.
    pub fn secrets(&self) -> PathBuf {
        self.root.join("secrets")
    }

    /// The registries' snapshots (`registry sync`), one file each.
    pub fn registry(&self) -> PathBuf {
        self.root.join("registry")
    }

    /// The stderr of the daemon whose socket is named `key`.
    pub fn daemon_log(&self, key: &str) -> PathBuf {
        self.root.join(format!("daemon-{key}.log"))
    }
}

/// Where the daemons' sockets live: `$XDG_RUNTIME_DIR/mcp-cli`, else `/tmp/mcp-cli-<uid>`.
#[cfg(feature = "cli")]
pub(crate) fn sockets(env: Env<'_>) -> PathBuf {
    match env("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("mcp-cli"),
        None => PathBuf::from(format!("/tmp/mcp-cli-{}", rustix::process::getuid())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_lives_under_one_folder() {
        let env = |key: &str| (key == "HOME").then(|| "/home/u".to_owned());
        let state = Folder::of_env(&env);
        assert_eq!(
            state.logs(),
            PathBuf::from("/home/u/.local/state/mcp-cli/logs")
        );
        assert_eq!(
            state.pins(),
            PathBuf::from("/home/u/.local/state/mcp-cli/pins")
        );
        assert_eq!(
            state.tokens(),
            PathBuf::from("/home/u/.local/state/mcp-cli/auth")
        );
        assert_eq!(
            state.eras(),
            PathBuf::from("/home/u/.local/state/mcp-cli/eras.json")
        );
        assert_eq!(
            state.catalogue(),
            PathBuf::from("/home/u/.local/state/mcp-cli/catalogue")
        );
        let env = |key: &str| (key == "XDG_STATE_HOME").then(|| "/s".to_owned());
        let state = Folder::of_env(&env);
        assert_eq!(
            state.daemon_log("ab"),
            PathBuf::from("/s/mcp-cli/daemon-ab.log")
        );
    }
}
