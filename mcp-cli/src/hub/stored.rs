//! The catalogue on disk: each server's tools, and its resources, resource templates, prompts
//! and skills, as last listed, with the listing's cache hint and the time it was listed, so that
//! listing and searching need no server start (DESIGN §15).
//!
//! One file per server in the catalogue folder, named and keyed like the era verdicts
//! ([`eras::key`]): the server's name and a digest of what it runs or where it is, so an
//! edited entry is a new server and never reuses the old one's listing; then a digest of what
//! the hub offers it (forms, roots), since a server may list other tools to a client that can
//! fill in forms. A live listing under one such key drops the server's listings under the
//! others: they may predate a change it shows.
//!
//! A listing is served for *listing* (what tools there are, for `tools`, `search` and a host's
//! `tools/list`) for [`MAX_AGE`], whatever its `ttlMs`: the hint says how long the server's
//! definitions may be reused, and no call ever reuses these (a call lists its server live and
//! checks what it lists against the pins), while a list that leaves a server out until it
//! starts is what one-shot hosts got wrong (DESIGN §19). A listing marked
//! `cacheScope: private` is kept too: the folder is one user's own (0700, files 0600), read by
//! nobody else, and every listing in it was made under that user's one set of credentials for
//! the server, which is the 2026-07-28 revision's private cache, reused "for the same
//! authorization context" only. The files are a cache: one that cannot be read or written only
//! costs a server start.
//!
//! Beside its tools a listing keeps what was judged of them when it was kept ([`Judged`]):
//! each one's pin digest and whether the poisoning scan found it clean, so that a search
//! reads them instead of making them again for every tool. A file is parsed again only when
//! its stamp changes: the daemon searches the same catalogue again and again.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp_smol::proto::skills::Skill;
use mcp_smol::proto::{CacheHint, Prompt, Resource, ResourceTemplate, Tool};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::ServerSpec;
use crate::files;
use crate::hub::cache::Freshness;
use crate::hub::eras;
use crate::hub::features::Features;

/// How long a listing is served, whatever its `ttlMs`: a server upgraded meanwhile (an `npx
/// -y` entry) is listed again at least this often, and every time one of its tools is called.
/// (The era verdicts' own bound, for the same reason.)
pub(crate) const MAX_AGE: Duration = crate::hub::eras::MAX_AGE;

/// One listing as kept: when it was listed, for how long it is fresh, and what it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed<T> {
    /// Milliseconds since the Unix epoch.
    listed_at: u64,
    /// The listing's `ttlMs`, if it had one: kept as the server said it, though listings
    /// are served for [`MAX_AGE`] whatever it says (see the module's doc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
    items: T,
}

impl<T> Listed<T> {
    /// Whether it may be served at `now`: listed less than [`MAX_AGE`] before. One dated
    /// after `now` (a clock set back) has no age to go by, so it may not.
    fn is_fresh(&self, now: SystemTime) -> bool {
        self.age(now).is_some_and(|age| age < MAX_AGE)
    }

    fn age(&self, now: SystemTime) -> Option<Duration> {
        let listed = UNIX_EPOCH + Duration::from_millis(self.listed_at);
        now.duration_since(listed).ok()
    }
}

/// What `spec`'s listings are kept under, when the hub offers forms (`elicit`) or not.
///
/// The values of its `env_pass` variables are part of it: they are how an entry is given the
/// credentials of the shell it runs from (a `GITHUB_TOKEN`), and a private listing made under
/// one token is not another's (the rest of an entry's environment is in [`eras::key`]).
pub(crate) fn key(spec: &ServerSpec, elicit: bool) -> String {
    let roots = spec
        .roots
        .iter()
        .map(|root| root.as_os_str().as_encoded_bytes());
    let passed: Vec<Vec<u8>> = (spec.command.env_pass.iter())
        .map(|name| {
            let value = std::env::var_os(name).unwrap_or_default();
            [name.as_bytes(), b"=", value.as_encoded_bytes()].concat()
        })
        .collect();
    let offered = [&b"elicitation"[..], if elicit { b"yes" } else { b"no" }];
    let offered = offered.into_iter().chain(roots);
    let offered = eras::short_digest(offered.chain(passed.iter().map(Vec::as_slice)));
    format!("{}-{offered}", eras::key(spec))
}

/// A tool the connection rejected, and why.
pub(crate) type Rejected = (String, String);

/// A server's tools as kept, with those its connection rejected (and why), to be told again,
/// and what was judged of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredTools {
    /// Shared: the same file's tools are the same listing in memory until the file changes,
    /// so what is made once per listing (shown names, scans) is not made again.
    #[serde(with = "shared")]
    pub(crate) tools: Arc<Vec<Tool>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) rejected: Vec<Rejected>,
    /// The cap, when the server listed more tools than `max_listed` and these are the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) capped: Option<usize>,
    /// Empty in a listing kept before these were.
    #[serde(default, with = "shared", skip_serializing_if = "unjudged")]
    pub(crate) judged: Arc<Judged>,
}

/// What was judged of a listing's tools when it was kept, in the tools' order. It is written
/// in the same file as the tools, replaced whole with them, so it always speaks of the
/// definitions beside it; what it cannot stand for (the pins, which `trust` changes, and the
/// servers configured now) is checked on every use.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Judged {
    /// Each tool's pin digest ([`pins::sha256`]): the pins read now are compared with it.
    ///
    /// [`pins::sha256`]: crate::hub::pins::sha256
    pub(crate) sha256: Vec<String>,
    /// Whether the poisoning scan found each tool clean ...
    pub(crate) clean: Vec<bool>,
    /// ... against these other servers' names: a tool that names one shadows it, so the
    /// verdicts stand only while these are the other servers configured ...
    pub(crate) others: Vec<String>,
    /// ... and by this scanner ([`scanner`](crate::hub::scanning::scanner)): another build
    /// may scan by other rules.
    #[serde(default)]
    pub(crate) scanner: String,
}

impl Judged {
    /// The digest of the tool at `at` in a listing of `count` tools, and whether it is known
    /// to scan clean against `others` by `scanner`; `None` when nothing judged it (an older
    /// file).
    pub(crate) fn of(
        &self,
        at: usize,
        count: usize,
        others: &[String],
        scanner: Option<&str>,
    ) -> Option<(&str, bool)> {
        if self.sha256.len() != count || self.clean.len() != count {
            return None;
        }
        let same_scan = self.others == others && scanner == Some(self.scanner.as_str());
        Some((&self.sha256[at], self.clean[at] && same_scan))
    }

    /// Whether it still speaks for a listing of `count` tools, scanned against `others` by
    /// `scanner`: if not, what [`of`](Self::of) gives must be made again on every use.
    pub(crate) fn stands(&self, count: usize, others: &[String], scanner: Option<&str>) -> bool {
        self.sha256.len() == count
            && self.clean.len() == count
            && self.others == others
            && scanner == Some(self.scanner.as_str())
    }
}

fn unjudged(judged: &Arc<Judged>) -> bool {
    judged.sha256.is_empty()
}

/// Serde for a value shared in memory, written as the value itself.
mod shared {
    use super::{Arc, Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<T: Serialize, S: Serializer>(
        value: &Arc<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        T::serialize(value, serializer)
    }

    pub(super) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<T>, D::Error> {
        T::deserialize(deserializer).map(Arc::new)
    }
}

/// A server's features besides tools, as kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredFeatures {
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    skills: Vec<Skill>,
    /// The lists cut at `max_listed`, as [`Features::capped`] holds them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    capped: Vec<(String, usize)>,
}

impl From<StoredFeatures> for Features {
    fn from(stored: StoredFeatures) -> Self {
        Features {
            resources: stored.resources,
            templates: stored.templates,
            prompts: stored.prompts,
            skills: stored.skills,
            capped: stored.capped,
            skipped: Vec::new(),
            fresh: Freshness::default(),
        }
    }
}

/// One server's file.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// The key it was written under: two names that make the same file name are told apart.
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<Listed<StoredTools>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    features: Option<Listed<StoredFeatures>>,
}

/// The catalogue folder, read afresh on every use (several processes share it) and each file
/// replaced whole.
#[derive(Debug)]
pub(crate) struct Stored {
    /// `None` keeps nothing.
    dir: Option<PathBuf>,
    /// Serialises this process's read-modify-write cycles.
    writing: Mutex<()>,
    /// Each file as last parsed, by its stamp then.
    parsed: Mutex<HashMap<PathBuf, (FileStamp, Arc<Entry>)>>,
}

/// What tells a file's versions apart without reading it: a file is replaced whole (a new
/// file renamed over it, so a new inode and change time), and one edited in place has a new
/// change time too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl FileStamp {
    /// `path`'s stamp, not following a link (which [`files::read_private`] refuses).
    fn of(path: &Path) -> Option<FileStamp> {
        let metadata = std::fs::symlink_metadata(path).ok()?;
        Some(FileStamp {
            inode: metadata.ino(),
            len: metadata.len(),
            modified: (metadata.mtime(), metadata.mtime_nsec()),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        })
    }
}

impl Stored {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            writing: Mutex::new(()),
            parsed: Mutex::default(),
        }
    }

    /// The tools kept under `key`, if they may still be served at `now`, the names of
    /// those the connection rejected, with why, and the cap they were cut at, if they were.
    pub(crate) fn tools(&self, key: &str, now: SystemTime) -> Option<StoredTools> {
        let entry = self.read(key)?;
        let tools = entry.tools.as_ref()?;
        tools.is_fresh(now).then(|| tools.items.clone())
    }

    /// The tools kept under `key` however old they are: for a host that cannot wait for the
    /// server to list them again, which an old listing serves better than none.
    #[cfg(any(feature = "cli", test))]
    pub(crate) fn last_tools(&self, key: &str) -> Option<StoredTools> {
        Some(self.read(key)?.tools.as_ref()?.items.clone())
    }

    /// The resources, templates and prompts kept under `key`, if they may still be served.
    pub(crate) fn features(&self, key: &str, now: SystemTime) -> Option<Features> {
        let entry = self.read(key)?;
        let features = entry.features.as_ref()?;
        features
            .is_fresh(now)
            .then(|| features.items.clone().into())
    }

    /// How long ago the tools kept under `key` were listed, fresh or not.
    pub(crate) fn age(&self, key: &str, now: SystemTime) -> Option<Duration> {
        self.read(key)?.tools.as_ref()?.age(now)
    }

    /// Keeps `tools`, listed at `now` with `fresh`'s hint, and what was `judged` of them
    /// (made from these very tools). Returns whether a listing kept before held other tools:
    /// one that may have been served for them.
    pub(crate) fn save_tools(
        &self,
        key: &str,
        (tools, rejected, capped): (Arc<Vec<Tool>>, Vec<Rejected>, Option<usize>),
        judged: Arc<Judged>,
        fresh: Freshness,
        now: SystemTime,
    ) -> bool {
        let listed = Some(kept(fresh.hint(), now, || StoredTools {
            tools: tools.clone(),
            rejected,
            capped,
            judged,
        }));
        let mut differs = false;
        self.update(key, |entry| {
            let before = std::mem::replace(&mut entry.tools, listed);
            differs = before.is_some_and(|before| before.items.tools != tools);
        });
        self.forget_others(key);
        differs
    }

    /// Replaces what was judged of the tools kept under `key` with `judged`, made again for
    /// these very `tools`: a listing kept by an older build, or before the servers configured
    /// changed, is then judged once, not on every read of it. Nothing is written if another
    /// listing has replaced it meanwhile.
    pub(crate) fn judge_again(&self, key: &str, tools: &Arc<Vec<Tool>>, judged: Arc<Judged>) {
        self.update(key, |entry| {
            if let Some(kept) = &mut entry.tools
                && kept.items.tools == *tools
            {
                kept.items.judged = judged;
            }
        });
    }

    /// Removes the listings kept for the same server under what another client offered
    /// (forms or not): a live listing is the newest word on the server, and one of theirs may
    /// predate a change (a tool's description rewritten) that this one shows.
    fn forget_others(&self, key: &str) {
        let (Some(dir), Some(path)) = (&self.dir, self.path(key)) else {
            return;
        };
        let Some(mine) = path.file_name().and_then(|name| name.to_str()) else {
            return;
        };
        let Some((server, _)) = mine.rsplit_once('-') else {
            return;
        };
        let server = format!("{server}-");
        let Ok(files) = std::fs::read_dir(dir) else {
            return;
        };
        for file in files.flatten() {
            let name = file.file_name();
            let Some(name) = name.to_str() else { continue };
            let offered = name
                .strip_prefix(&server)
                .and_then(|rest| rest.strip_suffix(".json"));
            // Only this server's: another whose name ends like this one's digest has two more.
            if offered.is_some_and(|offered| !offered.contains('-')) && name != mine {
                let _ = std::fs::remove_file(file.path());
            }
        }
    }

    /// Keeps `features` as [`save_tools`](Self::save_tools) keeps tools; returns the ones
    /// kept before, if any.
    pub(crate) fn save_features(
        &self,
        key: &str,
        features: &Features,
        now: SystemTime,
    ) -> Option<Features> {
        let listed = Some(kept(features.fresh.hint(), now, || StoredFeatures {
            resources: features.resources.clone(),
            templates: features.templates.clone(),
            prompts: features.prompts.clone(),
            skills: features.skills.clone(),
            capped: features.capped.clone(),
        }));
        let mut before = None;
        self.update(key, |entry| {
            before = std::mem::replace(&mut entry.features, listed);
        });
        before.map(|before| before.items.into())
    }

    fn path(&self, key: &str) -> Option<PathBuf> {
        let name: String = (key.chars())
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
                _ => '_',
            })
            .collect();
        // A leading dot would hide it; a name that differs only there is told apart by the
        // key inside.
        let name = name.trim_start_matches('.');
        Some(self.dir.as_ref()?.join(format!("{name}.json")))
    }

    /// `key`'s file, parsed again only if its stamp changed since it was last parsed.
    fn read(&self, key: &str) -> Option<Arc<Entry>> {
        let path = self.path(key)?;
        // Taken before reading: a file replaced meanwhile is read again next time.
        let stamp = FileStamp::of(&path)?;
        let mut parsed = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = match parsed.get(&path) {
            Some((seen, entry)) if *seen == stamp => entry.clone(),
            _ => {
                let text = files::read_private(&path).ok()?;
                let entry: Arc<Entry> = Arc::new(serde_json::from_slice(&text).ok()?);
                parsed.insert(path, (stamp, entry.clone()));
                entry
            }
        };
        (entry.key == key).then_some(entry)
    }

    /// Reads `key`'s file, lets `change` edit it, and writes it back (or removes it, once it
    /// holds nothing).
    fn update(&self, key: &str, change: impl FnOnce(&mut Entry)) {
        let (Some(dir), Some(path)) = (&self.dir, self.path(key)) else {
            return;
        };
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let before = self.read(key);
        let mut entry = before.as_deref().cloned().unwrap_or_else(|| Entry {
            key: key.to_owned(),
            ..Entry::default()
        });
        change(&mut entry);
        if before.as_deref() == Some(&entry) {
            return;
        }
        if entry.tools.is_none() && entry.features.is_none() {
            let _ = std::fs::remove_file(&path);
            return;
        }
        let Ok(text) = serde_json::to_vec(&entry) else {
            return;
        };
        let _ = write(dir, &path, &text);
    }
}

/// The listing to keep, public or private alike (see the module's doc).
fn kept<T>(hint: Option<CacheHint>, now: SystemTime, items: impl FnOnce() -> T) -> Listed<T> {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    Listed {
        listed_at: u64::try_from(since.as_millis()).unwrap_or(u64::MAX),
        ttl_ms: hint.map(|hint| u64::try_from(hint.ttl.as_millis()).unwrap_or(u64::MAX)),
        items: items(),
    }
}

/// Writes `path` in `dir`, made (0700) if missing; the listings are the user's own (0600).
fn write(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), String> {
    files::private_dir(dir).map_err(|error| error.to_string())?;
    files::replace(path, bytes, 0o600, || Ok::<(), ()>(())).map_err(|_| "not written".to_owned())
}

#[cfg(test)]
mod tests {
    use mcp_smol::proto::CacheScope;
    use serde_json::Value;

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mcp-cli-stored-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn tool(name: &str) -> Tool {
        serde_json::from_value(serde_json::json!({"name": name, "inputSchema": {"type": "object"}}))
            .unwrap()
    }

    /// The listing `save_tools` keeps of `tools` with nothing judged.
    fn unjudged_listing(tools: &[Tool]) -> StoredTools {
        StoredTools {
            tools: Arc::new(tools.to_vec()),
            rejected: Vec::new(),
            capped: None,
            judged: Arc::default(),
        }
    }

    fn hinted(ms: u64, scope: CacheScope) -> Freshness {
        let ttl = Duration::from_millis(ms);
        Freshness::of(Some(CacheHint { ttl, scope }), std::time::Instant::now())
    }

    #[test]
    fn tools_are_served_for_max_age_whatever_their_ttl() {
        let dir = temp_dir("ttl");
        let stored = Stored::new(Some(dir.clone()));
        let then = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let second = Duration::from_secs(1);
        assert_eq!(stored.tools("fx-1", then), None, "nothing kept yet");
        stored.save_tools(
            "fx-1",
            (Arc::new(vec![tool("echo")]), Vec::new(), None),
            Arc::default(),
            Freshness::default(),
            then,
        );
        // Another process (a new `Stored`) reads what this one wrote.
        let again = Stored::new(Some(dir.clone()));
        assert_eq!(
            again.tools("fx-1", then + second),
            Some(unjudged_listing(&[tool("echo")]))
        );
        assert_eq!(again.age("fx-1", then + second), Some(second));
        assert!(again.tools("fx-1", then + MAX_AGE - second).is_some());
        assert_eq!(again.tools("fx-1", then + MAX_AGE), None, "too old");
        assert_eq!(again.tools("fx-1", then - second), None, "clock set back");
        // A ttl, even of nothing, does not end it sooner: no call reuses what is kept.
        stored.save_tools(
            "fx-1",
            (Arc::new(vec![tool("add")]), Vec::new(), None),
            Arc::default(),
            hinted(0, CacheScope::Public),
            then,
        );
        assert_eq!(
            stored.tools("fx-1", then + MAX_AGE - second),
            Some(unjudged_listing(&[tool("add")]))
        );
        assert_eq!(stored.tools("fx-1", then + MAX_AGE), None);
        // Too old to serve, it is still there for a host that cannot wait for a new one.
        assert_eq!(
            stored.last_tools("fx-1"),
            Some(unjudged_listing(&[tool("add")]))
        );
        assert_eq!(stored.age("fx-1", then + second), Some(second));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.join("fx-1.json"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_was_judged_is_kept_with_the_tools_and_read_again_when_the_file_changes() {
        let dir = temp_dir("judged");
        let stored = Stored::new(Some(dir.clone()));
        let now = SystemTime::now();
        let judged = Judged {
            sha256: vec!["ab".repeat(32)],
            clean: vec![true],
            others: vec!["other".to_owned()],
            scanner: "mcp-cli 1".to_owned(),
        };
        let listed = (Arc::new(vec![tool("echo")]), Vec::new(), None);
        stored.save_tools(
            "fx-1",
            listed,
            Arc::new(judged.clone()),
            Freshness::default(),
            now,
        );
        let kept = stored.tools("fx-1", now).unwrap();
        assert_eq!(*kept.judged, judged);
        // Parsed once: the same listing in memory while the file stays as it is.
        let again = stored.tools("fx-1", now).unwrap();
        assert!(Arc::ptr_eq(&kept.tools, &again.tools));
        // Another process's listing, kept before verdicts were (no `judged`): read afresh.
        let file = dir.join("fx-1.json");
        let mut older: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        older["tools"]["items"]
            .as_object_mut()
            .unwrap()
            .remove("judged");
        older["tools"]["items"]["tools"][0]["name"] = "add".into();
        std::fs::write(&file, serde_json::to_vec(&older).unwrap()).unwrap();
        let older = stored.tools("fx-1", now).unwrap();
        assert_eq!(older, unjudged_listing(&[tool("add")]));
        let judged = older.judged.of(0, 1, &[], Some("mcp-cli 1"));
        assert_eq!(judged, None, "nothing judged: judged on reading");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_listing_judged_again_keeps_the_new_verdicts_unless_another_listing_replaced_it() {
        let dir = temp_dir("rejudged");
        let stored = Stored::new(Some(dir.clone()));
        let now = SystemTime::now();
        let listed = |name: &str| (Arc::new(vec![tool(name)]), Vec::new(), None);
        stored.save_tools(
            "fx-1",
            listed("echo"),
            Arc::default(),
            Freshness::default(),
            now,
        );
        let kept = stored.tools("fx-1", now).unwrap();
        assert!(!kept.judged.stands(1, &[], Some("mcp-cli 2")));
        let judged = Judged {
            sha256: vec!["cd".repeat(32)],
            clean: vec![true],
            others: Vec::new(),
            scanner: "mcp-cli 2".to_owned(),
        };
        stored.judge_again("fx-1", &kept.tools, Arc::new(judged.clone()));
        // Written to the file: another process reads the verdicts, not only this one.
        let other = Stored::new(Some(dir.clone()));
        let read = other.tools("fx-1", now).unwrap();
        assert_eq!(*read.judged, judged);
        assert!(read.judged.stands(1, &[], Some("mcp-cli 2")));
        assert!(
            !read
                .judged
                .stands(1, &["new".to_owned()], Some("mcp-cli 2"))
        );
        assert!(!read.judged.stands(1, &[], Some("mcp-cli 3")));
        assert!(!read.judged.stands(2, &[], Some("mcp-cli 2")));
        // Verdicts made for a listing that another has since replaced are not kept with it.
        other.save_tools(
            "fx-1",
            listed("add"),
            Arc::default(),
            Freshness::default(),
            now,
        );
        stored.judge_again("fx-1", &kept.tools, Arc::new(judged));
        let replaced = stored.tools("fx-1", now).unwrap();
        assert_eq!(replaced, unjudged_listing(&[tool("add")]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_verdict_stands_only_for_its_listing_and_the_servers_it_was_scanned_against() {
        let judged = Judged {
            sha256: vec!["a".to_owned(), "b".to_owned()],
            clean: vec![true, false],
            others: vec!["mail".to_owned()],
            scanner: "mcp-cli 1".to_owned(),
        };
        let (mail, by) = (["mail".to_owned()], Some("mcp-cli 1"));
        assert_eq!(judged.of(0, 2, &mail, by), Some(("a", true)));
        assert_eq!(judged.of(1, 2, &mail, by), Some(("b", false)));
        // Another server configured since: a clean tool may shadow it now.
        assert_eq!(judged.of(0, 2, &[], by), Some(("a", false)));
        // Another build, whose rules may flag it.
        assert_eq!(
            judged.of(0, 2, &mail, Some("mcp-cli 2")),
            Some(("a", false))
        );
        assert_eq!(judged.of(0, 2, &mail, None), Some(("a", false)));
        assert_eq!(judged.of(0, 3, &mail, by), None, "another listing's");
    }

    #[test]
    fn what_the_hub_offers_is_part_of_the_key() {
        let spec = ServerSpec::new("fx", crate::config::Command::new("node"));
        let plain = key(&spec, false);
        assert!(
            plain.starts_with(&format!("{}-", eras::key(&spec))),
            "{plain}"
        );
        assert_eq!(key(&spec, false), plain);
        assert_ne!(key(&spec, true), plain, "forms offered");
        let mut rooted = spec.clone();
        rooted.roots.push("/srv".into());
        assert_ne!(key(&rooted, false), plain, "roots offered");
        // A variable passed in: its value (unset, here) is part of the key.
        let mut passing = spec.clone();
        passing
            .command
            .env_pass
            .push("MCP_CLI_STORED_TEST_UNSET".into());
        assert_ne!(key(&passing, false), plain, "env_pass named");
    }

    #[test]
    fn a_live_listing_makes_the_same_servers_other_listings_go() {
        let dir = temp_dir("others");
        let stored = Stored::new(Some(dir.clone()));
        let now = SystemTime::now();
        let echo = [tool("echo")];
        let listed = || (Arc::new(echo.to_vec()), Vec::new(), None);
        stored.save_tools(
            "fx-aaa-forms",
            listed(),
            Arc::default(),
            Freshness::default(),
            now,
        );
        // A server whose name ends like fx's digest keeps its own.
        stored.save_tools(
            "fx-aaa-bbb-forms",
            listed(),
            Arc::default(),
            Freshness::default(),
            now,
        );
        stored.save_tools(
            "fx-aaa-plain",
            listed(),
            Arc::default(),
            Freshness::default(),
            now,
        );
        assert_eq!(
            stored.tools("fx-aaa-forms", now),
            None,
            "replaced by a newer one"
        );
        assert!(stored.tools("fx-aaa-plain", now).is_some());
        assert!(stored.tools("fx-aaa-bbb-forms", now).is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_private_listing_is_kept_as_a_public_one_is() {
        let dir = temp_dir("private");
        let stored = Stored::new(Some(dir.clone()));
        let now = SystemTime::now();
        // As servers on the Python SDK 2.x mark every listing.
        stored.save_tools(
            "fx-1",
            (Arc::new(vec![tool("echo")]), Vec::new(), None),
            Arc::default(),
            hinted(0, CacheScope::Private),
            now,
        );
        assert_eq!(
            stored.tools("fx-1", now + Duration::from_secs(60)),
            Some(unjudged_listing(&[tool("echo")]))
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.join("fx-1.json"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "the user's own");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_under_another_key_or_unreadable_is_nothing() {
        let dir = temp_dir("other");
        let stored = Stored::new(Some(dir.clone()));
        let now = SystemTime::now();
        // `a/b` and `a_b` make the same file name; the key inside tells them apart.
        stored.save_tools(
            "a/b-1",
            (Arc::new(vec![tool("echo")]), Vec::new(), None),
            Arc::default(),
            Freshness::default(),
            now,
        );
        assert_eq!(stored.tools("a_b-1", now), None);
        assert!(stored.tools("a/b-1", now).is_some());
        std::fs::write(dir.join("a_b-1.json"), "{\"key\": ").unwrap();
        assert_eq!(stored.tools("a/b-1", now), None);
        // Replaced whole on the next listing.
        stored.save_tools(
            "a/b-1",
            (Arc::new(vec![tool("echo")]), Vec::new(), None),
            Arc::default(),
            Freshness::default(),
            now,
        );
        assert!(stored.tools("a/b-1", now).is_some());
        // Without a folder, nothing is kept.
        let none = Stored::new(None);
        none.save_tools(
            "fx-1",
            (Arc::new(vec![tool("echo")]), Vec::new(), None),
            Arc::default(),
            Freshness::default(),
            now,
        );
        assert_eq!(none.tools("fx-1", now), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
