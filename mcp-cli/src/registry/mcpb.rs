//! MCP bundles (`.mcpb`): a zip archive holding a server and its `manifest.json`. `install`
//! downloads one, checks it against the registry's `fileSha256` before reading a byte of it,
//! unpacks it into the state folder, and runs what its manifest's `mcp_config` says, with its
//! `user_config` values asked as a package's are.
//!
//! The archive is read with bounds a hostile one cannot pass: files only beneath the bundle's
//! folder (no absolute path, no `..`, no link), at most [`MAX_FILES`] of them and
//! [`MAX_UNPACKED`] bytes in all, each inflated no further than the size it declares.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::model::Input;

/// The largest bundle downloaded.
pub(crate) const MAX_DOWNLOAD: usize = 256 * 1024 * 1024;
/// The most files a bundle may hold.
const MAX_FILES: usize = 50_000;
/// The most bytes a bundle may unpack to.
const MAX_UNPACKED: u64 = 1024 * 1024 * 1024;

/// The SHA-256 of `bytes` in lowercase hex, as `fileSha256` writes it.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Fails unless `bytes` are what `expected` (the registry's `fileSha256`) says.
pub(crate) fn verify(bytes: &[u8], expected: &str) -> Result<(), String> {
    let actual = sha256_hex(bytes);
    match actual == expected.to_ascii_lowercase() {
        true => Ok(()),
        false => Err(format!(
            "the bundle's SHA-256 is {actual}, not the {expected} the registry gives: not unpacked"
        )),
    }
}

/// One file of the archive, from its central directory.
struct Member {
    name: String,
    method: u16,
    compressed: u64,
    size: u64,
    local_header: u64,
    /// Its Unix mode, when the archive was made on Unix.
    mode: Option<u32>,
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The members of zip archive `bytes`, from its central directory.
fn members(bytes: &[u8]) -> Result<Vec<Member>, String> {
    let broken = |why: &str| format!("the bundle is not a zip archive we can read: {why}");
    // The end of central directory record: the last `PK\5\6`, within the 64 KiB comment.
    let earliest = bytes.len().saturating_sub(22 + 65_535);
    let end = (earliest..=bytes.len().saturating_sub(22))
        .rev()
        .find(|&at| bytes.get(at..at + 4) == Some(b"PK\x05\x06"))
        .ok_or_else(|| broken("no end of central directory"))?;
    let count = usize::from(u16_at(bytes, end + 10).ok_or_else(|| broken("cut short"))?);
    let start = u32_at(bytes, end + 16).ok_or_else(|| broken("cut short"))? as usize;
    if count == 0xffff || start == 0xffff_ffff {
        return Err(broken(
            "it is a ZIP64 archive, larger than a bundle should be",
        ));
    }
    if count > MAX_FILES {
        return Err(format!(
            "the bundle holds {count} files, over the {MAX_FILES} unpacked"
        ));
    }
    let mut members = Vec::with_capacity(count);
    let mut at = start;
    for _ in 0..count {
        if bytes.get(at..at + 4) != Some(b"PK\x01\x02") {
            return Err(broken("a damaged central directory"));
        }
        let field = |offset: usize| u16_at(bytes, at + offset).ok_or_else(|| broken("cut short"));
        let long = |offset: usize| u32_at(bytes, at + offset).ok_or_else(|| broken("cut short"));
        let made_on = field(4)? >> 8;
        let flags = field(8)?;
        let method = field(10)?;
        let compressed = u64::from(long(20)?);
        let size = u64::from(long(24)?);
        let (name_len, extra_len, comment_len) = (field(28)?, field(30)?, field(32)?);
        let external = long(38)?;
        let local_header = u64::from(long(42)?);
        let name_at = at + 46;
        let name = bytes
            .get(name_at..name_at + usize::from(name_len))
            .ok_or_else(|| broken("cut short"))?;
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| broken("a file name that is not UTF-8"))?;
        if flags & 1 != 0 {
            return Err(format!("the bundle's {name} is encrypted"));
        }
        members.push(Member {
            name,
            method,
            compressed,
            size,
            local_header,
            // Made on Unix (3): the mode is in the high half.
            mode: (made_on == 3).then_some(external >> 16),
        });
        at = name_at + usize::from(name_len) + usize::from(extra_len) + usize::from(comment_len);
    }
    Ok(members)
}

/// `name` as a path beneath the bundle's folder, or why it cannot be one.
fn relative(name: &str) -> Result<PathBuf, String> {
    let path = Path::new(name);
    let fine = !name.is_empty()
        && !name.contains(['\\', '\0'])
        && path
            .components()
            .all(|part| matches!(part, Component::Normal(_)));
    match fine {
        true => Ok(path.to_owned()),
        false => Err(format!(
            "the bundle holds {name:?}, a path outside its own folder"
        )),
    }
}

/// Unpacks zip archive `bytes` into `dir`, which must not exist yet: into a temporary folder
/// beside it first, renamed into place once every file is out, so a failure leaves nothing.
pub(crate) fn unpack(bytes: &[u8], dir: &Path) -> Result<(), String> {
    let parent = dir.parent().ok_or("the bundle's folder has no parent")?;
    crate::files::private_dir(parent)
        .map_err(|error| format!("cannot make {}: {error}", parent.display()))?;
    let partial = parent.join(format!(
        ".{}.partial-{}",
        dir.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&partial);
    let unpacked = unpack_into(bytes, &partial).and_then(|()| {
        std::fs::rename(&partial, dir)
            .map_err(|error| format!("cannot move the bundle into {}: {error}", dir.display()))
    });
    if unpacked.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    unpacked
}

fn unpack_into(bytes: &[u8], dir: &Path) -> Result<(), String> {
    let members = members(bytes)?;
    let total: u64 = members.iter().map(|member| member.size).sum();
    if total > MAX_UNPACKED {
        return Err(format!(
            "the bundle unpacks to {total} bytes, over the {MAX_UNPACKED} allowed"
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|error| format!("cannot make {}: {error}", dir.display()))?;
    let cannot =
        |path: &Path, error: std::io::Error| format!("cannot write {}: {error}", path.display());
    for member in &members {
        let path = dir.join(relative(member.name.trim_end_matches('/'))?);
        let kind = member.mode.map(|mode| mode & 0o170_000);
        if member.name.ends_with('/') || kind == Some(0o040_000) {
            std::fs::create_dir_all(&path).map_err(|error| cannot(&path, error))?;
            continue;
        }
        if kind.is_some_and(|kind| kind != 0o100_000 && kind != 0) {
            return Err(format!(
                "the bundle's {} is not a plain file (a link?)",
                member.name
            ));
        }
        let data = contents(bytes, member)?;
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(|error| cannot(folder, error))?;
        }
        let executable = member.mode.is_some_and(|mode| mode & 0o111 != 0);
        let mode = if executable { 0o755 } else { 0o644 };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .map_err(|error| cannot(&path, error))?;
        file.write_all(&data)
            .map_err(|error| cannot(&path, error))?;
    }
    Ok(())
}

/// A member's bytes: stored, or inflated to no more than the size it declares.
fn contents(bytes: &[u8], member: &Member) -> Result<Vec<u8>, String> {
    let broken = || format!("the bundle's {} is damaged", member.name);
    let at = usize::try_from(member.local_header).map_err(|_| broken())?;
    if bytes.get(at..at + 4) != Some(b"PK\x03\x04") {
        return Err(broken());
    }
    let name_len = usize::from(u16_at(bytes, at + 26).ok_or_else(broken)?);
    let extra_len = usize::from(u16_at(bytes, at + 28).ok_or_else(broken)?);
    let start = at + 30 + name_len + extra_len;
    let length = usize::try_from(member.compressed).map_err(|_| broken())?;
    let data = bytes.get(start..start + length).ok_or_else(broken)?;
    let size = usize::try_from(member.size).map_err(|_| broken())?;
    let out = match member.method {
        0 => data.to_vec(),
        8 => {
            miniz_oxide::inflate::decompress_to_vec_with_limit(data, size).map_err(|_| broken())?
        }
        other => {
            return Err(format!(
                "the bundle's {} is compressed by method {other}, which we do not read",
                member.name
            ));
        }
    };
    match out.len() == size {
        true => Ok(out),
        false => Err(broken()),
    }
}

/// What a bundle's `manifest.json` says of how to run it.
#[derive(Debug, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) version: String,
    pub(crate) server: ManifestServer,
    #[serde(default)]
    pub(crate) user_config: BTreeMap<String, UserConfig>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ManifestServer {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) mcp_config: Option<McpConfig>,
}

#[derive(Debug, Deserialize, Clone)]
pub(crate) struct McpConfig {
    pub(crate) command: String,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) platform_overrides: BTreeMap<String, Value>,
}

/// One value the bundle asks the person for.
#[derive(Debug, Deserialize)]
pub(crate) struct UserConfig {
    #[serde(rename = "type", default)]
    pub(crate) kind: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    #[serde(default)]
    pub(crate) required: bool,
    #[serde(default)]
    pub(crate) sensitive: bool,
    #[serde(default)]
    pub(crate) multiple: bool,
    pub(crate) default: Option<Value>,
}

impl UserConfig {
    /// As a registry input, for asking: its format from its type, its default as text with
    /// the home folder's variables filled in (`${HOME}/Desktop`).
    pub(crate) fn input(&self, home: &str) -> Input {
        let format = match self.kind.as_str() {
            "number" => "number",
            "boolean" => "boolean",
            // A list of paths is given as one text, split at commas.
            "directory" | "file" if !self.multiple => "filepath",
            _ => "string",
        };
        let default = self.default.as_ref().map(|value| match value {
            Value::String(text) => text.clone(),
            Value::Array(items) => {
                let items: Vec<String> = items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .map_or_else(|| item.to_string(), str::to_owned)
                    })
                    .collect();
                items.join(",")
            }
            other => other.to_string(),
        });
        let default = default.map(|text| {
            let folders = [
                ("${HOME}", home.to_owned()),
                ("${DESKTOP}", format!("{home}/Desktop")),
                ("${DOCUMENTS}", format!("{home}/Documents")),
                ("${DOWNLOADS}", format!("{home}/Downloads")),
            ];
            folders
                .iter()
                .fold(text, |text, (name, folder)| text.replace(name, folder))
        });
        let description = match (&self.title, &self.description) {
            (Some(title), Some(description)) => Some(format!("{title}: {description}")),
            (title, description) => title.clone().or(description.clone()),
        };
        Input {
            description,
            is_required: self.required,
            format: Some(format.to_owned()),
            is_secret: self.sensitive,
            default,
            ..Input::default()
        }
    }
}

/// Reads `dir/manifest.json`.
pub(crate) fn manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|error| format!("the bundle has no readable manifest.json: {error}"))?;
    serde_json::from_str(&text).map_err(|error| format!("the bundle's manifest.json: {error}"))
}

/// The `mcp_config` to run on Linux: the manifest's, with its `linux` override over it.
pub(crate) fn linux_config(manifest: &Manifest) -> Result<McpConfig, String> {
    let Some(mut config) = manifest.server.mcp_config.clone() else {
        return Err(format!(
            "the bundle's manifest gives no mcp_config (its server type is {:?}), which install needs to run it",
            manifest.server.kind
        ));
    };
    if let Some(linux) = config.platform_overrides.remove("linux") {
        if let Some(command) = linux.get("command").and_then(Value::as_str) {
            config.command = command.to_owned();
        }
        if let Some(args) = linux.get("args").and_then(Value::as_array) {
            config.args = args
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
        }
        if let Some(env) = linux.get("env").and_then(Value::as_object) {
            for (key, value) in env {
                if let Some(value) = value.as_str() {
                    config.env.insert(key.clone(), value.to_owned());
                }
            }
        }
    }
    Ok(config)
}

/// `text` with the manifest's variables replaced: `${__dirname}` (the bundle's folder),
/// `${HOME}`, `${DESKTOP}`, `${DOCUMENTS}`, `${DOWNLOADS}`, `${/}` and `${pathSeparator}`, and
/// `${user_config.KEY}` from `values` (each value as written into the entry). Any other `${`
/// is an error: the config would expand it from the person's environment.
pub(crate) fn substitute(
    text: &str,
    dir: &Path,
    home: &str,
    values: &BTreeMap<String, String>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .ok_or_else(|| format!("the bundle's manifest has an unclosed `${{` in {text:?}"))?;
        let name = &rest[start + 2..start + end];
        let value = match name {
            "__dirname" => dir.to_string_lossy().into_owned(),
            "HOME" => home.to_owned(),
            "DESKTOP" => format!("{home}/Desktop"),
            "DOCUMENTS" => format!("{home}/Documents"),
            "DOWNLOADS" => format!("{home}/Downloads"),
            "/" | "pathSeparator" => "/".to_owned(),
            _ => match name
                .strip_prefix("user_config.")
                .and_then(|key| values.get(key))
            {
                Some(value) => value.clone(),
                None if name.starts_with("user_config.") => String::new(),
                None => {
                    return Err(format!(
                        "the bundle's manifest uses ${{{name}}}, which install does not fill in"
                    ));
                }
            },
        };
        out.push_str(&value);
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A zip archive of `files` (name, bytes, Unix mode), each deflated unless its mode says
    /// 0 (stored); for tests, with CRCs left 0 since `unpack` trusts the archive's digest.
    pub(crate) fn zip(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data, mode) in files {
            let (method, body) = match data.len() {
                0..16 => (0u16, data.to_vec()),
                _ => (8u16, miniz_oxide::deflate::compress_to_vec(data, 6)),
            };
            let offset = out.len() as u32;
            out.extend(b"PK\x03\x04");
            out.extend(20u16.to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(method.to_le_bytes());
            out.extend([0; 8]);
            out.extend((body.len() as u32).to_le_bytes());
            out.extend((data.len() as u32).to_le_bytes());
            out.extend((name.len() as u16).to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(name.as_bytes());
            out.extend(&body);
            central.extend(b"PK\x01\x02");
            central.extend((3u16 << 8 | 20).to_le_bytes());
            central.extend(20u16.to_le_bytes());
            central.extend(0u16.to_le_bytes());
            central.extend(method.to_le_bytes());
            central.extend([0; 8]);
            central.extend((body.len() as u32).to_le_bytes());
            central.extend((data.len() as u32).to_le_bytes());
            central.extend((name.len() as u16).to_le_bytes());
            central.extend([0; 8]);
            central.extend((mode << 16).to_le_bytes());
            central.extend(offset.to_le_bytes());
            central.extend(name.as_bytes());
        }
        let start = out.len() as u32;
        out.extend(&central);
        out.extend(b"PK\x05\x06");
        out.extend([0; 4]);
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((central.len() as u32).to_le_bytes());
        out.extend(start.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-cli-mcpb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_bundle_unpacks_with_its_modes_and_manifest() {
        let dir = scratch("good");
        let manifest = br#"{"name": "hello", "version": "1.0.0", "server": {"type": "binary",
            "mcp_config": {"command": "${__dirname}/server/run", "args": ["--dirs", "${user_config.dirs}"],
            "env": {"KEY": "${user_config.key}"}, "platform_overrides": {"linux": {"env": {"OS": "linux"}}}}},
            "user_config": {"key": {"type": "string", "sensitive": true, "required": true, "title": "Key"},
                            "dirs": {"type": "directory", "multiple": true, "default": ["${HOME}/a", "${HOME}/b"]}}}"#;
        let script = b"#!/bin/sh\nexec echo hello from a bundle, long enough to be deflated\n";
        let archive = zip(&[
            ("manifest.json", manifest, 0o100_644),
            ("server/", b"", 0o040_755),
            ("server/run", script, 0o100_755),
        ]);
        let target = dir.join("hello");
        unpack(&archive, &target).unwrap();
        let run = target.join("server/run");
        assert_eq!(std::fs::read(&run).unwrap(), script);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&run).unwrap().permissions(),
        );
        assert_eq!(mode & 0o111, 0o111, "its executable bit is kept");
        let manifest = super::manifest(&target).unwrap();
        let config = linux_config(&manifest).unwrap();
        assert_eq!(config.env["OS"], "linux");
        let values = BTreeMap::from([("key".to_owned(), "${secret:hello/key}".to_owned())]);
        let command = substitute(&config.command, &target, "/home/u", &values).unwrap();
        assert_eq!(command, format!("{}/server/run", target.display()));
        assert_eq!(
            substitute(&config.env["KEY"], &target, "/home/u", &values).unwrap(),
            "${secret:hello/key}"
        );
        let error = substitute("${GITHUB_TOKEN}", &target, "/home/u", &values).unwrap_err();
        assert!(error.contains("does not fill in"), "{error}");
        let key = manifest.user_config["key"].input("/home/u");
        assert!(key.is_secret && key.is_required);
        let dirs = manifest.user_config["dirs"].input("/home/u");
        assert_eq!(dirs.default.as_deref(), Some("/home/u/a,/home/u/b"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every file under `dir`, links included, as found.
    fn everything_under(dir: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut folders = vec![dir.to_owned()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                let kind = entry.file_type().unwrap();
                assert!(!kind.is_symlink(), "a link was made: {:?}", entry.path());
                if kind.is_dir() {
                    folders.push(entry.path());
                }
                found.push(entry.path());
            }
        }
        found
    }

    #[test]
    fn damaged_archives_never_panic_and_never_write_outside() {
        let dir = scratch("damaged");
        let manifest = br#"{"name": "x", "server": {"type": "binary"}, "padding": "a long enough text to deflate"}"#;
        let valid = zip(&[
            ("manifest.json", manifest, 0o100_644),
            (
                "server/run",
                b"#!/bin/sh\necho a script long enough to be deflated too\n",
                0o100_755,
            ),
        ]);
        // A fixed sequence of pseudo-random damage: the same every run.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..3000 {
            let mut archive = valid.clone();
            for _ in 0..(next() % 4 + 1) {
                let at = (next() as usize) % archive.len();
                archive[at] = next() as u8;
            }
            if round % 5 == 0 {
                archive.truncate((next() as usize) % archive.len());
            }
            let target = dir.join(format!("r{round}"));
            if unpack(&archive, &target).is_ok() {
                for path in everything_under(&target) {
                    assert!(path.starts_with(&target), "round {round}: {path:?}");
                }
            }
        }
        let outside: Vec<PathBuf> = (std::fs::read_dir(&dir).unwrap().flatten())
            .map(|entry| entry.path())
            .filter(|path| !path.file_name().unwrap().to_string_lossy().starts_with('r'))
            .collect();
        assert!(outside.is_empty(), "only the rounds' folders: {outside:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hostile_archives_are_refused_and_leave_nothing() {
        let dir = scratch("hostile");
        let cases: [(&str, Vec<u8>, &str); 5] = [
            (
                "slip",
                zip(&[("../../evil", b"x", 0o100_644)]),
                "outside its own folder",
            ),
            (
                "absolute",
                zip(&[("/etc/evil", b"x", 0o100_644)]),
                "outside its own folder",
            ),
            (
                "link",
                zip(&[("link", b"/etc/passwd", 0o120_777)]),
                "not a plain file",
            ),
            (
                "garbage",
                b"not a zip at all".to_vec(),
                "no end of central directory",
            ),
            (
                "cut",
                zip(&[("manifest.json", &[b'x'; 100], 0o100_644)])[..60].to_vec(),
                "not a zip archive",
            ),
        ];
        for (name, archive, why) in cases {
            let target = dir.join(name);
            let error = unpack(&archive, &target).unwrap_err();
            assert!(error.contains(why), "{name}: {error}");
            assert!(!target.exists(), "{name}: nothing is left");
        }
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(
            leftovers.is_empty(),
            "no partial folder is left: {leftovers:?}"
        );
        assert!(verify(b"abc", &sha256_hex(b"abc")).is_ok());
        let error = verify(b"abd", &sha256_hex(b"abc")).unwrap_err();
        assert!(error.contains("not unpacked"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
