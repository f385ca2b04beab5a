//! The revision each `auto` server spoke last (DESIGN §14), kept in the state folder
//! (`eras.json`) so that the next run connects in that era at once instead of probing.
//!
//! A verdict is keyed by what identifies the server: its name and a digest of its command,
//! arguments, environment and folder, or of its URL and headers. Edit the entry and it is a
//! new server, probed afresh. A verdict older than [`MAX_AGE`] is probed afresh too. The file
//! is a cache: one that cannot be read is taken as empty
//! (the caller notes why in the server's log) and replaced whole on the next verdict, and one
//! that cannot be written only costs the next run a probe.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp_proto::Protocol;
use serde::{Deserialize, Serialize};

use crate::config::{ServerSpec, read_private, write_private};

/// How long a verdict is trusted. A verdict that proves wrong is dropped at once, but one
/// that merely went out of date never fails: a server upgraded to the stateless era (an
/// `npx -y` entry that runs the latest release, a remote URL) still answers the handshake
/// era, and without an end it would be spoken to in that era for ever. A week bounds that,
/// at the cost of one probe a week per server.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// One server's verdict: the revision it spoke and when that was found out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Verdict {
    protocol: String,
    /// Seconds since the Unix epoch.
    at: u64,
}

impl Verdict {
    /// Whether it is still to be trusted at `now`. One dated after `now` (a clock set back)
    /// has no age to go by, so it is not.
    fn is_fresh(&self, now: SystemTime) -> bool {
        let at = UNIX_EPOCH + Duration::from_secs(self.at);
        now.duration_since(at).is_ok_and(|age| age < MAX_AGE)
    }
}

/// The cache file, read afresh on every use (several processes share it) and written
/// atomically.
#[derive(Debug)]
pub(crate) struct Eras {
    /// `None` caches nothing.
    path: Option<PathBuf>,
    /// Serialises this process's read-modify-write cycles.
    writing: Mutex<()>,
}

impl Eras {
    pub(crate) fn new(path: Option<PathBuf>) -> Self {
        Self {
            path,
            writing: Mutex::new(()),
        }
    }

    /// The revision `key` last spoke, if it is one we still speak and the verdict is younger
    /// than [`MAX_AGE`] at `now`; `Err` says why the file could not be read (then nothing is
    /// known).
    pub(crate) fn get(&self, key: &str, now: SystemTime) -> Result<Option<&'static str>, String> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let verdicts = read(path)?;
        let fresh = verdicts.get(key).filter(|v| v.is_fresh(now));
        let protocol = fresh.map(|v| Protocol::parse(&v.protocol));
        Ok(match protocol {
            Some(Ok(Protocol::Revision(revision))) => Some(revision),
            _ => None,
        })
    }

    /// Records that `key` spoke `revision` at `now`, unless a verdict still trusted says so
    /// already.
    pub(crate) fn record(&self, key: &str, revision: &str, now: SystemTime) {
        self.update(|verdicts| {
            let known = |v: &Verdict| v.protocol == revision && v.is_fresh(now);
            if verdicts.get(key).is_some_and(known) {
                return false;
            }
            let at = now.duration_since(UNIX_EPOCH);
            let verdict = Verdict {
                protocol: revision.to_owned(),
                at: at.map_or(0, |at| at.as_secs()),
            };
            verdicts.insert(key.to_owned(), verdict);
            true
        });
    }

    /// Forgets `key`'s verdict: it proved wrong, so the next connection finds out again.
    pub(crate) fn forget(&self, key: &str) {
        self.update(|verdicts| verdicts.remove(key).is_some());
    }

    /// Reads the file, lets `change` edit it, and writes it back if `change` says it changed.
    fn update(&self, change: impl FnOnce(&mut BTreeMap<String, Verdict>) -> bool) {
        let Some(path) = &self.path else { return };
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let Ok(original) = read_private(path) else {
            return;
        };
        let mut verdicts = parse(original.text.as_deref()).unwrap_or_default();
        if !change(&mut verdicts) {
            return;
        }
        let Ok(text) = serde_json::to_string_pretty(&verdicts) else {
            return;
        };
        // Another process may have written meanwhile; its verdict is as good as ours.
        let _ = write_private(&original, &(text + "\n"));
    }
}

fn read(path: &Path) -> Result<BTreeMap<String, Verdict>, String> {
    let original = read_private(path).map_err(|error| error.to_string())?;
    parse(original.text.as_deref())
        .map_err(|error| format!("{} is not an era cache, ignored: {error}", path.display()))
}

fn parse(text: Option<&str>) -> Result<BTreeMap<String, Verdict>, serde_json::Error> {
    text.map_or(Ok(BTreeMap::new()), serde_json::from_str)
}

/// What a server's verdict is kept under: its name (or, for an ad hoc server, its pin key,
/// which tells apart servers that share a display name) and a digest of what it runs or
/// where it is.
pub(crate) fn key(spec: &ServerSpec) -> String {
    let mut parts: Vec<String> = Vec::new();
    match &spec.remote {
        Some(remote) => {
            parts.push(remote.url.clone());
            let headers = remote.headers.iter().map(|(n, v)| format!("{n}: {v}"));
            parts.extend(headers);
        }
        None => {
            let command = &spec.command;
            parts.push(command.program.clone());
            parts.extend(command.args.iter().cloned());
            parts.extend(command.env.iter().map(|(k, v)| format!("env {k}={v}")));
            let cwd = command.cwd.as_deref().map(Path::display);
            parts.push(cwd.map_or_else(String::new, |cwd| format!("cwd {cwd}")));
        }
    }
    let name = spec.pin_key.as_deref().unwrap_or(&spec.name);
    format!(
        "{name}-{}",
        short_digest(parts.iter().map(String::as_bytes))
    )
}

/// Twelve hex digits of the SHA-256 of `parts`, each after the first preceded by a NUL so
/// that no two lists of parts run together into the same bytes.
pub(crate) fn short_digest<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
    for (index, part) in parts.into_iter().enumerate() {
        if index > 0 {
            hash.update(&[0]);
        }
        hash.update(part);
    }
    (hash.finish().as_ref().iter().take(6))
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Command, Remote};
    use crate::hub::options::{self, Basis};

    fn now() -> SystemTime {
        SystemTime::now()
    }

    fn temp_file(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-cli-eras-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("eras.json")
    }

    #[test]
    fn verdicts_round_trip_and_are_forgotten() {
        let path = temp_file("round");
        let eras = Eras::new(Some(path.clone()));
        assert_eq!(
            eras.get("fx-1", now()),
            Ok(None),
            "no file yet: nothing known"
        );
        eras.record("fx-1", "2026-07-28", now());
        eras.record("old-2", "2025-06-18", now());
        // Another process (a new `Eras`) reads what this one wrote.
        let again = Eras::new(Some(path.clone()));
        assert_eq!(again.get("fx-1", now()), Ok(Some("2026-07-28")));
        assert_eq!(again.get("old-2", now()), Ok(Some("2025-06-18")));
        let text = std::fs::read_to_string(&path).unwrap();
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(file["fx-1"]["protocol"], "2026-07-28");
        assert!(
            file["fx-1"]["at"].as_u64().unwrap() > 1_700_000_000,
            "{text}"
        );
        again.forget("fx-1");
        assert_eq!(eras.get("fx-1", now()), Ok(None));
        assert_eq!(eras.get("old-2", now()), Ok(Some("2025-06-18")));
        // A revision we no longer speak is no verdict.
        std::fs::write(&path, r#"{"x": {"protocol": "2099-01-01", "at": 1}}"#).unwrap();
        assert_eq!(eras.get("x", now()), Ok(None));
        // Without a file, nothing is kept.
        let none = Eras::new(None);
        none.record("fx-1", "2026-07-28", now());
        assert_eq!(none.get("fx-1", now()), Ok(None));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn an_old_verdict_is_probed_again_and_replaced() {
        let path = temp_file("old");
        let eras = Eras::new(Some(path.clone()));
        let then = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let second = Duration::from_secs(1);
        let at = || {
            let text = std::fs::read_to_string(&path).unwrap();
            let file: serde_json::Value = serde_json::from_str(&text).unwrap();
            file["fx-1"]["at"].as_u64().unwrap()
        };
        eras.record("fx-1", "2025-11-25", then);
        let trusted = eras.get("fx-1", then + MAX_AGE - second).unwrap();
        assert_eq!(trusted, Some("2025-11-25"));
        // Too old: not trusted, so an `auto` server is probed.
        let expired = then + MAX_AGE;
        assert_eq!(eras.get("fx-1", expired), Ok(None));
        let (protocol, basis) = options::choose(Protocol::Auto, eras.get("fx-1", expired).unwrap());
        assert_eq!((protocol, basis), (Protocol::Auto, Basis::Probe));
        // The probe's verdict replaces it, even when it says the same.
        eras.record("fx-1", "2025-11-25", expired);
        assert_eq!(at(), 1_800_000_000 + MAX_AGE.as_secs());
        let trusted = eras.get("fx-1", expired + MAX_AGE - second).unwrap();
        assert_eq!(trusted, Some("2025-11-25"));
        // While it is trusted, saying the same again does not make it younger.
        eras.record("fx-1", "2025-11-25", expired + second);
        assert_eq!(at(), 1_800_000_000 + MAX_AGE.as_secs());
        let later = expired + MAX_AGE * 3;
        eras.record("fx-1", "2026-07-28", later);
        assert_eq!(eras.get("fx-1", later), Ok(Some("2026-07-28")));
        // A verdict dated after now (a clock set back) has no age to trust.
        assert_eq!(eras.get("fx-1", then), Ok(None));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_empty_and_replaced() {
        let path = temp_file("corrupt");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"fx-1\": {\"protocol\": ").unwrap();
        let eras = Eras::new(Some(path.clone()));
        let note = eras.get("fx-1", now()).unwrap_err();
        assert!(
            note.contains("eras.json is not an era cache, ignored: "),
            "{note}"
        );
        eras.record("fx-1", "2025-11-25", now());
        assert_eq!(eras.get("fx-1", now()), Ok(Some("2025-11-25")));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_changed_entry_is_another_key() {
        let base = ServerSpec::new("fx", Command::new("node").args(["server.js"]));
        let changed = |edit: &dyn Fn(&mut ServerSpec)| {
            let mut spec = base.clone();
            edit(&mut spec);
            key(&spec)
        };
        assert!(key(&base).starts_with("fx-"), "{}", key(&base));
        assert_eq!(changed(&|_| {}), key(&base));
        // What does not change the server does not change its key.
        assert_eq!(
            changed(&|s| s.call_timeout = Some(Default::default())),
            key(&base)
        );
        let edits: [&dyn Fn(&mut ServerSpec); 6] = [
            &|s| s.command.program = "bun".into(),
            &|s| s.command.args.push("--v2".into()),
            &|s| _ = s.command.env.insert("MODE".into(), "new".into()),
            &|s| s.command.cwd = Some("/elsewhere".into()),
            &|s| s.name = "other".into(),
            &|s| s.pin_key = Some("node-abc".into()),
        ];
        for edit in edits {
            assert_ne!(changed(edit), key(&base));
        }
        let web = ServerSpec::remote("web", Remote::new("https://a.invalid/mcp"));
        let moved = ServerSpec::remote("web", Remote::new("https://b.invalid/mcp"));
        assert_ne!(key(&web), key(&moved));
        let mut with_header = web.clone();
        let header = ("X-Tenant".to_owned(), "blue".to_owned());
        with_header.remote.as_mut().unwrap().headers.push(header);
        assert_ne!(key(&web), key(&with_header));
    }
}
