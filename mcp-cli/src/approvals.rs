//! Which servers of project files a person approved, and for which folder: `approvals.json`
//! in the state folder. A cloned repository's `.mcp.json` must not run anything on the first
//! command there, so the host holds every entry of a project file until it is approved, and
//! an approval holds only while the entry stays as it was approved.
//!
//! An approval is kept under the file's path (its folder resolved, so that two spellings of
//! one folder are one) and the entry's name, with a digest of everything that decides what
//! runs, as the file writes it ([`Pending::written`]): the command, its arguments,
//! environment (and what it passes on from ours), working folder and sandbox, or the URL and
//! headers. An entry that changes in any of these is pending again; a variable it names that
//! now expands otherwise (a rotated token) is not a change of the entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{self, Pending, Server, Source};
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

    /// Whether `server`, an entry of a project file written as `written`, was approved as it
    /// is now.
    pub(crate) fn admits(&self, server: &Server, written: &[String]) -> bool {
        let Some(file) = file_key(&server.source) else {
            return false;
        };
        let approved = self.approved.get(&file);
        approved.and_then(|names| names.get(&server.name)) == Some(&digest(written))
    }

    /// Approves each of `entries` as it is now and writes the file; the error names it.
    pub(crate) fn approve(&mut self, entries: &[&Pending]) -> Result<(), String> {
        // Read again just before the write: another run may have approved others meanwhile.
        let original = config::read_private(&self.path).map_err(|error| error.to_string())?;
        if let Some(text) = &original.text {
            self.approved = serde_json::from_str(text).unwrap_or_default();
        }
        for pending in entries {
            let server = &pending.server;
            let Some(file) = file_key(&server.source) else {
                continue;
            };
            let names = self.approved.entry(file).or_default();
            names.insert(server.name.clone(), digest(&pending.written));
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

/// A digest of an entry as written ([`Pending::written`]).
fn digest(written: &[String]) -> String {
    short_digest(written.iter().map(String::as_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Command, Entry, ServerSpec};

    /// `entry` of the project file `file`, as the command line reads it.
    fn pending(file: &Path, name: &str, written: &[&str]) -> Pending {
        let spec = ServerSpec::new(name, Command::new("x"));
        Pending {
            server: Server {
                name: name.to_owned(),
                entry: Entry::Enabled(spec),
                source: Source::File(file.to_owned()),
            },
            written: written.iter().map(|part| (*part).to_owned()).collect(),
            replaces: None,
        }
    }

    #[test]
    fn an_approval_holds_while_the_entry_stays_as_approved() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-approvals-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = dir.join("approvals.json");
        let file = dir.join(".mcp.json");
        let notes = pending(
            &file,
            "notes",
            &["command \"notes-server\"", "args [\"x\"]"],
        );
        let admits = |approvals: &Approvals, p: &Pending| approvals.admits(&p.server, &p.written);

        let mut approvals = Approvals::read(store.clone());
        assert!(!admits(&approvals, &notes));
        approvals.approve(&[&notes]).unwrap();
        assert!(admits(&approvals, &notes));
        // Read again by another run, as the next command would.
        let again = Approvals::read(store.clone());
        assert!(again.admits(&notes.server, &notes.written));

        // Any change to what it runs voids it; so does the same entry in another folder, or
        // under another name.
        let changed = [
            pending(
                &file,
                "notes",
                &["command \"notes-server\"", "args [\"y\"]"],
            ),
            pending(&file, "notes", &["command \"sh\"", "args [\"x\"]"]),
            pending(
                &dir.join("sub/.mcp.json"),
                "notes",
                &["command \"notes-server\"", "args [\"x\"]"],
            ),
            pending(
                &file,
                "notes2",
                &["command \"notes-server\"", "args [\"x\"]"],
            ),
        ];
        for other in &changed {
            assert!(!admits(&again, other), "{other:?}");
        }

        std::fs::write(&store, "not json").unwrap();
        assert!(!admits(&Approvals::read(store), &notes));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn what_is_approved_is_the_entry_as_written() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-written-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(".mcp.json");
        let read = |text: &str, token: &str| {
            std::fs::write(&file, text).unwrap();
            let env = |key: &str| (key == "TOKEN").then(|| token.to_owned());
            let held =
                crate::config::load_with_presets(&[(file.clone(), true)], &env, &dir, &|_, _| {
                    false
                });
            held.unwrap().pending.remove(0)
        };
        let text = r#"{"mcpServers": {"gh": {"command": "gh-mcp", "env": {"T": "${TOKEN}"}}}}"#;
        let mut approvals = Approvals::read(dir.join("approvals.json"));
        approvals.approve(&[&read(text, "one")]).unwrap();
        // The variable now expands otherwise: the entry is as it was approved.
        let rotated = read(text, "two");
        assert!(approvals.admits(&rotated.server, &rotated.written));
        // The environment it asks for, or whether it is on, as written.
        let more = r#"{"mcpServers": {"gh": {"command": "gh-mcp", "env": {"T": "${TOKEN}", "LD_PRELOAD": "/x.so"}}}}"#;
        let more = read(more, "two");
        assert!(!approvals.admits(&more.server, &more.written));
        let off = r#"{"mcpServers": {"gh": {"command": "gh-mcp", "env": {"T": "${TOKEN}"}, "disabled": true}}}"#;
        let off = read(off, "two");
        assert!(approvals.admits(&off.server, &off.written));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
