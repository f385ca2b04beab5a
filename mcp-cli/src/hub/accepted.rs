//! What `mcp-cli trust SERVER` accepted of a server's prompts, resources and resource templates
//! that the poisoning scan flagged: a digest of each, by what identifies it (`prompt NAME`,
//! `resource URI`, `template URI-TEMPLATE`), in `<pin dir>/features/<key>.json`, kept apart
//! from the tools' pins so that their format stays theirs. An entry is accepted only while it
//! stays as it was when accepted; the file is small (flagged entries only) and read again at
//! each check, which happens only for a flagged entry.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::{read_original, write_back};
use crate::hub::pins::{canonical, digest};
use crate::logs::log_path;

#[derive(Debug, Default, Serialize, Deserialize)]
struct AcceptedFile {
    /// By identity, the SHA-256 of the entry as it was accepted.
    accepted: BTreeMap<String, String>,
}

/// The store, under the pin folder; without one nothing is ever accepted (nor withheld: the
/// hub scans only when it pins).
#[derive(Debug, Default)]
pub(crate) struct Accepted {
    dir: Option<PathBuf>,
}

/// The digest an entry is accepted under: of its whole definition as sent, keys sorted.
pub(crate) fn digest_of(entry: &impl Serialize) -> String {
    let value = serde_json::to_value(entry).unwrap_or_default();
    digest(&canonical(&value))
}

impl Accepted {
    pub(crate) fn new(pin_dir: Option<PathBuf>) -> Accepted {
        Accepted {
            dir: pin_dir.map(|dir| dir.join("features")),
        }
    }

    fn path(&self, key: &str) -> Option<PathBuf> {
        Some(log_path(self.dir.as_ref()?, key).with_extension("json"))
    }

    /// Whether `trust` accepted the entry `id` of the server pinned under `key` with this
    /// digest. An unreadable file accepts nothing.
    pub(crate) fn is_accepted(&self, key: &str, id: &str, sha256: &str) -> bool {
        let Some(path) = self.path(key) else {
            return false;
        };
        let read = read_original(&path).ok().and_then(|original| original.text);
        let file: Option<AcceptedFile> = read.and_then(|text| serde_json::from_str(&text).ok());
        file.is_some_and(|file| file.accepted.get(id).is_some_and(|kept| kept == sha256))
    }

    /// Replaces what is accepted of the server pinned under `key` with `entries` (identity,
    /// digest).
    pub(crate) fn accept(&self, key: &str, entries: Vec<(String, String)>) -> Result<(), String> {
        let Some(path) = self.path(key) else {
            return Ok(());
        };
        let original = read_original(&path).map_err(|error| error.to_string())?;
        if entries.is_empty() && original.text.is_none() {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            let mut folder = std::fs::DirBuilder::new();
            folder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut folder, 0o700);
            (folder.create(dir))
                .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        }
        let file = AcceptedFile {
            accepted: entries.into_iter().collect(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|error| error.to_string())? + "\n";
        write_back(&original, &text).map_err(|error| {
            format!(
                "cannot record what was accepted in {}: {error}",
                path.display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_what_was_accepted_and_only_while_unchanged() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-accepted-{}", std::process::id()));
        let store = Accepted::new(Some(dir.clone()));
        let (one, two) = (
            digest_of(&json!({"a": 1, "b": 2})),
            digest_of(&json!({"b": 2, "a": 1})),
        );
        assert_eq!(one, two, "key order does not matter");
        assert!(!store.is_accepted("s", "prompt p", &one));
        store
            .accept("s", vec![("prompt p".to_owned(), one.clone())])
            .unwrap();
        assert!(Accepted::new(Some(dir.clone())).is_accepted("s", "prompt p", &one));
        let changed = digest_of(&json!({"a": 1, "b": 3}));
        assert!(!store.is_accepted("s", "prompt p", &changed));
        assert!(!store.is_accepted("other", "prompt p", &one));
        store.accept("s", Vec::new()).unwrap();
        assert!(!store.is_accepted("s", "prompt p", &one));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
