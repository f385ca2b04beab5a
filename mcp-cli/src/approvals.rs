//! Which servers of project files a person approved, and for which folder: `approvals.json`
//! in the state folder. A cloned repository's `.mcp.json` must not run anything on the first
//! command there, so the host holds every entry of a project file until it is approved, and
//! an approval holds only while the entry stays as it was approved.
//!
//! An approval is kept under the file's path (its folder resolved, so that two spellings of
//! one folder are one) and the entry's name, with a digest of everything that decides what
//! runs: the command, its arguments, environment, working folder and sandbox, or the URL and
//! headers. An entry that changes in any of these is pending again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{self, Entry, Server, Source};
use crate::hub::short_digest;

/// The approvals as read from the state folder: file, then name, then digest.
#[derive(Debug, Clone)]
pub(crate) struct Approvals {
    path: PathBuf,
    approved: BTreeMap<String, BTreeMap<String, String>>,
}

impl Approvals {
    /// Reads `path`; a missing or unreadable file approves nothing (a damaged one is said on
    /// stderr: every project server then waits again, which is the safe way to fail).
    pub(crate) fn read(path: PathBuf) -> Self {
        let approved = match config::read_private(&path) {
            Ok(original) => match original.text.as_deref().map(serde_json::from_str) {
                None => BTreeMap::new(),
                Some(Ok(approved)) => approved,
                Some(Err(error)) => {
                    let path = path.display();
                    crate::output::diagnostic(&format!(
                        "mcp-cli: {path} is not a file of approvals ({error}); no project \
                         server counts as approved until it is fixed or removed"
                    ));
                    BTreeMap::new()
                }
            },
            Err(_) => BTreeMap::new(),
        };
        Self { path, approved }
    }

    /// Whether `server`, an entry of a project file, was approved as it is now.
    pub(crate) fn admits(&self, server: &Server) -> bool {
        let Some(file) = file_key(&server.source) else {
            return false;
        };
        let approved = self.approved.get(&file);
        approved.and_then(|names| names.get(&server.name)) == Some(&digest(&server.entry))
    }

    /// Approves each of `servers` as it is now and writes the file; the error names it.
    pub(crate) fn approve(&mut self, servers: &[&Server]) -> Result<(), String> {
        // Read again just before the write: another run may have approved others meanwhile.
        let original = config::read_private(&self.path).map_err(|error| error.to_string())?;
        if let Some(text) = &original.text {
            self.approved = serde_json::from_str(text).unwrap_or_default();
        }
        for server in servers {
            let Some(file) = file_key(&server.source) else {
                continue;
            };
            let names = self.approved.entry(file).or_default();
            names.insert(server.name.clone(), digest(&server.entry));
        }
        let text = serde_json::to_string_pretty(&self.approved).map_err(|e| e.to_string())?;
        config::write_private(&original, &(text + "\n")).map_err(|error| error.to_string())
    }
}

/// What an approval of an entry of `source` is kept under: the file's path, its folder
/// resolved; `None` for an entry that comes from no file.
fn file_key(source: &Source) -> Option<String> {
    let Source::File(path) = source else {
        return None;
    };
    Some(resolved(path).display().to_string())
}

/// `path` with its folder's links and `..` resolved (the file itself may not exist).
pub(crate) fn resolved(path: &Path) -> PathBuf {
    let folder = path
        .parent()
        .and_then(|parent| std::fs::canonicalize(parent).ok());
    match (folder, path.file_name()) {
        (Some(folder), Some(name)) => folder.join(name),
        _ => path.to_owned(),
    }
}

/// A digest of what decides what an entry runs or reaches: its program, arguments,
/// environment, working folder and sandbox, or its URL and headers. Whether it is enabled is
/// left out: switching it on runs what was approved.
pub(crate) fn digest(entry: &Entry) -> String {
    let mut parts: Vec<String> = Vec::new();
    match entry {
        Entry::Enabled(spec) | Entry::Disabled(spec) => {
            let command = &spec.command;
            parts.extend(command.identity_parts());
            if let Some(sandbox) = &command.sandbox {
                parts.push(format!("network isolated {}", sandbox.isolate_network));
                parts.extend(sandbox.allow.iter().map(|host| format!("allow {host}")));
                let paths = sandbox.filesystem.iter().flatten();
                parts.extend(paths.map(|path| format!("filesystem {}", path.display())));
                if sandbox.filesystem.is_none() {
                    parts.push("filesystem open".to_owned());
                }
            }
            if let Some(remote) = &spec.remote {
                parts.push(format!("url {}", remote.url));
                let headers = remote.headers.iter();
                parts.extend(headers.map(|(name, value)| format!("header {name}: {value}")));
            }
        }
        Entry::Invalid { command, reason } => {
            parts.push(format!("invalid {command}"));
            parts.push(reason.clone());
        }
    }
    short_digest(parts.iter().map(String::as_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Command, ServerSpec};

    fn server(file: &Path, name: &str, command: Command) -> Server {
        Server {
            name: name.to_owned(),
            entry: Entry::Enabled(ServerSpec::new(name, command)),
            source: Source::File(file.to_owned()),
        }
    }

    #[test]
    fn an_approval_holds_while_the_entry_stays_as_approved() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-approvals-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = dir.join("approvals.json");
        let file = dir.join(".mcp.json");
        let notes = server(
            &file,
            "notes",
            Command::new("notes-server").args(["--db", "x"]),
        );

        let mut approvals = Approvals::read(store.clone());
        assert!(!approvals.admits(&notes));
        approvals.approve(&[&notes]).unwrap();
        assert!(approvals.admits(&notes));
        // Read again by another run, as the next command would.
        let again = Approvals::read(store.clone());
        assert!(again.admits(&notes));

        // Any change to what it runs voids it; so does the same entry in another folder.
        let changed = [
            server(
                &file,
                "notes",
                Command::new("notes-server").args(["--db", "y"]),
            ),
            server(&file, "notes", Command::new("sh").args(["-c", "touch x"])),
            server(&dir.join("sub/.mcp.json"), "notes", notes_command()),
            server(&file, "notes2", notes_command()),
        ];
        for other in &changed {
            assert!(!again.admits(other), "{other:?}");
        }
        let mut with_env = notes.clone();
        if let Entry::Enabled(spec) = &mut with_env.entry {
            spec.command
                .env
                .insert("LD_PRELOAD".into(), "/tmp/x.so".into());
        }
        assert!(!again.admits(&with_env));
        // Switching it off and on runs what was approved.
        let mut disabled = notes.clone();
        disabled.entry = match disabled.entry {
            Entry::Enabled(spec) => Entry::Disabled(spec),
            other => other,
        };
        assert!(again.admits(&disabled));

        std::fs::write(&store, "not json").unwrap();
        assert!(!Approvals::read(store).admits(&notes));
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn notes_command() -> Command {
        Command::new("notes-server").args(["--db", "x"])
    }
}
