//! A registry's servers as last synced, kept in the state folder (`registry/<host>-<digest>.json`,
//! 0600) so that `registry search`, `registry show`, `install` and `servers` work offline.
//! Written whole and atomically: a sync that fails leaves the last good snapshot in place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::model::Listed;
use crate::files;

/// The largest snapshot read back: far above what the official registry holds (tens of
/// thousands of servers of a few kilobytes each), far below what would exhaust memory.
pub(crate) const MAX_BYTES: u64 = 512 * 1024 * 1024;

/// One registry's servers, the latest version of each, by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// The registry's base URL, as configured (no trailing slash).
    pub(crate) url: String,
    /// When it was last synced, in seconds since 1970.
    pub(crate) synced_at: u64,
    /// The newest `updatedAt` the registry gave: the next sync asks only for what changed
    /// since then (`updated_since`).
    pub(crate) since: Option<String>,
    pub(crate) servers: BTreeMap<String, Listed>,
}

impl Snapshot {
    pub(crate) fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            ..Self::default()
        }
    }

    /// The snapshot's file for registry `url` in `dir`: named by its host for people, and by
    /// a digest of the whole URL so that two registries on one host never share a file.
    pub(crate) fn path(dir: &Path, url: &str) -> PathBuf {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_else(|| "registry".into());
        let host: String = (host.chars())
            .map(
                |c| match c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    true => c,
                    false => '_',
                },
            )
            .collect();
        let digest = ring::digest::digest(&ring::digest::SHA256, url.as_bytes());
        let short: String = (digest.as_ref()[..4].iter())
            .map(|byte| format!("{byte:02x}"))
            .collect();
        dir.join(format!("{host}-{short}.json"))
    }

    /// The snapshot kept at `path`; `Ok(None)` when there is none.
    pub(crate) fn load(path: &Path) -> Result<Option<Self>, String> {
        let unreadable = |why: String| format!("the registry snapshot {}: {why}", path.display());
        let file = match files::open_private(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(unreadable(error.to_string())),
        };
        let size = file
            .metadata()
            .map_err(|e| unreadable(e.to_string()))?
            .len();
        if size > MAX_BYTES {
            return Err(unreadable(format!(
                "it is {size} bytes, over the {MAX_BYTES} read back"
            )));
        }
        let reader = std::io::BufReader::new(file);
        let value: Value =
            serde_json::from_reader(reader).map_err(|e| unreadable(e.to_string()))?;
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        let mut snapshot = Self {
            url: text("url").ok_or_else(|| unreadable("it names no registry".into()))?,
            synced_at: value.get("syncedAt").and_then(Value::as_u64).unwrap_or(0),
            since: text("since"),
            servers: BTreeMap::new(),
        };
        let servers = value.get("servers").and_then(Value::as_array);
        for raw in servers.into_iter().flatten() {
            // Only entries that read were kept; one that no longer does is left out.
            if let Ok(listed) = Listed::read(raw.clone()) {
                snapshot.servers.insert(listed.server.name.clone(), listed);
            }
        }
        Ok(Some(snapshot))
    }

    /// Replaces the file at `path` with this snapshot.
    pub(crate) fn save(&self, path: &Path) -> Result<(), String> {
        let failed = |why: String| {
            format!(
                "cannot keep the registry snapshot {}: {why}",
                path.display()
            )
        };
        if let Some(dir) = path.parent() {
            files::private_dir(dir).map_err(|e| failed(e.to_string()))?;
        }
        let servers: Vec<&Value> = self.servers.values().map(|listed| &listed.raw).collect();
        let value = json!({
            "url": self.url,
            "syncedAt": self.synced_at,
            "since": self.since,
            "servers": servers,
        });
        let write = |out: &mut dyn std::io::Write| {
            serde_json::to_writer(&mut *out, &value).map_err(std::io::Error::other)
        };
        files::replace_with(path, 0o600, write, || Ok::<(), ()>(())).map_err(|error| match error {
            files::ReplaceError::Write { temporary, error } => {
                failed(format!("writing {}: {error}", temporary.display()))
            }
            files::ReplaceError::Rename(error) => failed(error.to_string()),
            files::ReplaceError::Refused(()) => failed("refused".into()),
        })
    }

    /// How long ago it was synced, as a person says it: `3 minutes`, `2 days`.
    pub(crate) fn age(&self, now: u64) -> String {
        let seconds = now.saturating_sub(self.synced_at);
        let (count, unit) = match seconds {
            0..120 => (seconds, "second"),
            120..7200 => (seconds / 60, "minute"),
            7200..172_800 => (seconds / 3600, "hour"),
            _ => (seconds / 86_400, "day"),
        };
        match count {
            1 => format!("1 {unit}"),
            _ => format!("{count} {unit}s"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(name: &str) -> Listed {
        Listed::read(json!({"server": {"name": name, "version": "1.0.0", "description": "d"}}))
            .unwrap()
    }

    #[test]
    fn a_snapshot_is_kept_and_read_back_privately() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-snapshot-{}", std::process::id()));
        let path = Snapshot::path(&dir, "https://registry.example.com/");
        assert!(
            path.to_string_lossy().contains("registry.example.com-"),
            "{path:?}"
        );
        assert_ne!(
            path,
            Snapshot::path(&dir, "https://registry.example.com/other")
        );
        assert!(Snapshot::load(&path).unwrap().is_none());
        let mut snapshot = Snapshot::new("https://registry.example.com");
        snapshot.synced_at = 100;
        snapshot.since = Some("2026-01-01T00:00:00Z".into());
        for name in ["a.b/one", "a.b/two"] {
            snapshot.servers.insert(name.into(), listed(name));
        }
        snapshot.save(&path).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        let back = Snapshot::load(&path).unwrap().unwrap();
        assert_eq!(back.url, snapshot.url);
        assert_eq!(back.since, snapshot.since);
        assert_eq!(back.servers, snapshot.servers);
        std::fs::write(&path, "{not json").unwrap();
        let error = Snapshot::load(&path).unwrap_err();
        assert!(error.contains(&path.display().to_string()), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ages_read_as_people_say_them() {
        let snapshot = Snapshot {
            synced_at: 1000,
            ..Snapshot::default()
        };
        assert_eq!(snapshot.age(1001), "1 second");
        assert_eq!(snapshot.age(1000 + 600), "10 minutes");
        assert_eq!(snapshot.age(1000 + 3 * 3600), "3 hours");
        assert_eq!(snapshot.age(1000 + 5 * 86_400), "5 days");
    }
}
