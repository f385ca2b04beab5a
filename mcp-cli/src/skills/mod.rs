//! A skill a server offers (the skills extension, SEP-2640), fetched: its files read with
//! `resources/read`, one at a time, each checked against the server's entry before the next
//! is asked for, and kept in memory until every one has passed; only then may they be
//! written (`folder.rs`). A server is the party this guards against: an entry describes the
//! files a person approves, and what arrives must be exactly those.
//!
//! - `frontmatter.rs`: a `SKILL.md`'s YAML frontmatter, read and compared with the entry's
//! - `folder.rs`: where agents read skills from, and the write that leaves all or nothing

pub(crate) mod folder;
pub(crate) mod frontmatter;

use mcp_smol::proto::skills::{Skill, SkillResources};
use mcp_smol::proto::{ReadResourceResult, Request};
use percent_encoding::percent_decode_str;

use crate::exit::{Exit, Failure};
use crate::hub::Hub;

/// The most files a skill may have, `SKILL.md` among them: the extension's limit.
pub(crate) const MAX_FILES: usize = 512;

/// The most bytes a skill's files may hold together: the extension's limit, 16 MiB.
pub(crate) const MAX_BYTES: u64 = 16 * 1024 * 1024;

/// A skill's files, each checked against its entry.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// The skill's name, which names its folder.
    pub(crate) name: String,
    /// Each file's path in the folder (`SKILL.md` first, then `references/FORMS.md`, ...)
    /// and its bytes.
    pub(crate) files: Vec<(String, Vec<u8>)>,
    /// Files the entry does not list, so not fetched: a `dynamic` skill's, besides its
    /// `SKILL.md`.
    pub(crate) unlisted: bool,
}

impl Fetched {
    /// The `SKILL.md`, as text (it was read as such to check its frontmatter).
    pub(crate) fn manifest(&self) -> &str {
        std::str::from_utf8(&self.files[0].1).unwrap_or_default()
    }
}

/// Fetches `skill` from `server`: its `SKILL.md` alone, or with `all` every file its entry
/// lists. Nothing is read before every file name has been checked, and nothing after the
/// first file that fails its check; the error names the file and what differed.
pub(crate) async fn fetch(
    hub: &Hub,
    server: &str,
    skill: &Skill,
    all: bool,
) -> Result<Fetched, Failure> {
    let failure = |what: String| {
        let name = skill.name();
        Failure::new(
            Exit::Server,
            format!("skill {name} of server {server}: {what}; nothing was written"),
        )
    };
    let wanted = wanted(skill, all).map_err(failure)?;
    let mut files = Vec::with_capacity(wanted.len());
    for (path, uri, expected) in wanted {
        let read = hub.request(server, Request::read_resource(&uri)).await;
        let read = read.map_err(|error| failure(format!("{path} could not be read: {error}")))?;
        let bytes = contents(&uri, read).map_err(|why| failure(format!("{path}: {why}")))?;
        if let Some((size, digest)) = expected {
            check(&bytes, size, &digest).map_err(|why| failure(format!("{path} {why}")))?;
        }
        if files.is_empty() {
            check_manifest(skill, &bytes).map_err(|why| failure(format!("{path} {why}")))?;
        }
        files.push((path, bytes));
    }
    Ok(Fetched {
        name: skill.name().to_owned(),
        files,
        unlisted: all && skill.resources == SkillResources::Dynamic,
    })
}

/// A file to fetch: its path in the skill's folder, its URI, and the size and digest its
/// entry gives (none for a `dynamic` skill).
type Wanted = (String, String, Option<(u64, String)>);

/// The files to read, `SKILL.md` first, each with its checked path: refused whole, before any
/// read, if a name could land outside the folder or the skill is over the limits.
fn wanted(skill: &Skill, all: bool) -> Result<Vec<Wanted>, String> {
    let manifest = || {
        (
            mcp_smol::proto::skills::MANIFEST.to_owned(),
            skill.uri.clone(),
        )
    };
    let SkillResources::Files(listed) = &skill.resources else {
        let (path, uri) = manifest();
        return Ok(vec![(path, uri, None)]);
    };
    if listed.len() > MAX_FILES {
        return Err(format!(
            "it has {} files, over the limit of {MAX_FILES}",
            listed.len()
        ));
    }
    let total: u64 = listed
        .iter()
        .map(|file| file.size)
        .fold(0, u64::saturating_add);
    if total > MAX_BYTES {
        return Err(format!(
            "its files hold {total} bytes, over the limit of {MAX_BYTES}"
        ));
    }
    let mut wanted: Vec<Wanted> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for file in listed {
        let expected = Some((file.size, file.digest.clone()));
        if file.uri == skill.uri {
            let (path, uri) = manifest();
            wanted.insert(0, (path, uri, expected));
            continue;
        }
        let spelled = skill.path_of(&file.uri).unwrap_or(&file.uri);
        let path = safe_path(spelled).map_err(|why| format!("file {spelled} {why}"))?;
        // Two spellings of one path (`a%41` and `aA`) would write one file over the other.
        if !seen.insert(path.to_lowercase()) {
            return Err(format!("file {path} is listed twice"));
        }
        if all {
            wanted.push((path, file.uri.clone(), expected));
        }
    }
    Ok(wanted)
}

/// A file's path inside its skill's folder, percent-decoded, if it stays there: relative,
/// with no empty, `.` or `..` segment, and no backslash or control character in a name.
fn safe_path(spelled: &str) -> Result<String, &'static str> {
    let decoded = percent_decode_str(spelled).decode_utf8();
    let path = decoded.map_err(|_| "is not UTF-8 once decoded")?;
    if path.starts_with('/') {
        return Err("is an absolute path");
    }
    for segment in path.split('/') {
        if matches!(segment, "" | "." | "..") {
            return Err("leaves the skill's folder");
        }
        if segment.chars().any(|c| c == '\\' || c.is_control()) {
            return Err("has a backslash or a control character in its name");
        }
        if segment.eq_ignore_ascii_case(mcp_smol::proto::skills::MANIFEST) && path == segment {
            return Err("would replace the skill's own SKILL.md");
        }
    }
    Ok(path.into_owned())
}

/// The bytes of the one item a read of `uri` answered: its text as UTF-8, or its blob decoded.
fn contents(uri: &str, read: ReadResourceResult) -> Result<Vec<u8>, String> {
    let mut items = read.contents.into_iter();
    let item = match (items.next(), items.next()) {
        (Some(item), None) => item,
        (None, _) => return Err("the server answered no contents".to_owned()),
        (Some(_), Some(_)) => return Err("the server answered more than one item".to_owned()),
    };
    if item.uri != uri {
        return Err(format!("the server answered {} instead", item.uri));
    }
    if let Some(text) = item.text {
        return Ok(text.into_bytes());
    }
    match item.blob_bytes() {
        Some(bytes) => bytes.map_err(|error| format!("its blob is not base64: {error}")),
        None => Err("the server answered neither text nor blob".to_owned()),
    }
}

/// Whether `bytes` are what the entry promised: the size first, so that a file of the wrong
/// length fails without being hashed, then the digest.
fn check(bytes: &[u8], size: u64, digest: &str) -> Result<(), String> {
    if bytes.len() as u64 != size {
        return Err(format!("is {} bytes, the entry says {size}", bytes.len()));
    }
    let actual = ring::digest::digest(&ring::digest::SHA256, bytes);
    let actual: String = (actual.as_ref().iter())
        .map(|b| format!("{b:02x}"))
        .collect();
    if digest.strip_prefix("sha256:") != Some(actual.as_str()) {
        return Err(format!(
            "has digest sha256:{actual}, the entry says {digest}"
        ));
    }
    Ok(())
}

/// Whether the `SKILL.md` is text whose frontmatter is the entry's, field by field.
fn check_manifest(skill: &Skill, bytes: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_owned())?;
    let read = frontmatter::read(text).map_err(|why| format!("is refused: {why}"))?;
    let differences = frontmatter::differences(&read, &skill.frontmatter);
    if !differences.is_empty() {
        let differences = differences.join("; ");
        return Err(format!(
            "has another frontmatter than the entry: {differences}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sha(bytes: &[u8]) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    fn skill(files: serde_json::Value) -> Skill {
        serde_json::from_value(json!({
            "uri": "skill://s/SKILL.md",
            "frontmatter": {"name": "s", "description": "d"},
            "resources": files,
        }))
        .unwrap()
    }

    #[test]
    fn a_file_is_checked_by_size_before_its_digest() {
        let digest = sha(b"abc");
        assert_eq!(check(b"abc", 3, &digest), Ok(()));
        let long = check(b"abcd", 3, &digest).unwrap_err();
        assert_eq!(long, "is 4 bytes, the entry says 3");
        let other = check(b"abd", 3, &digest).unwrap_err();
        assert!(
            other.starts_with("has digest sha256:") && other.contains(&digest),
            "{other}"
        );
    }

    #[test]
    fn the_manifest_must_carry_the_entry_frontmatter() {
        let skill = skill(json!("dynamic"));
        let good = b"---\nname: s\ndescription: d\n---\nbody\n";
        assert_eq!(check_manifest(&skill, good), Ok(()));
        let other = check_manifest(&skill, b"---\nname: s\ndescription: evil\n---\n");
        assert_eq!(
            other.unwrap_err(),
            "has another frontmatter than the entry: description: file \"evil\", entry \"d\""
        );
        assert!(
            check_manifest(&skill, b"body only")
                .unwrap_err()
                .contains("refused")
        );
        assert!(
            check_manifest(&skill, b"\xff")
                .unwrap_err()
                .contains("UTF-8")
        );
    }

    #[test]
    fn names_that_would_leave_the_folder_are_refused_before_any_read() {
        for (spelled, why) in [
            ("%2e%2e/escape", "leaves"),
            ("a/%2E/b", "leaves"),
            ("a/%2fetc", "leaves"),
            ("%2fetc/passwd", "absolute"),
            ("a%5Cb", "backslash"),
            ("a%0Ab", "control"),
            ("%ff", "UTF-8"),
            ("skill.md", "SKILL.md"),
        ] {
            let error = safe_path(spelled).unwrap_err();
            assert!(error.contains(why), "{spelled}: {error}");
        }
        assert_eq!(
            safe_path("references/A%20B.md").unwrap(),
            "references/A B.md"
        );
        let twice = skill(json!([
            {"uri": "skill://s/SKILL.md", "digest": sha(b""), "size": 0},
            {"uri": "skill://s/a%41", "digest": sha(b""), "size": 0},
            {"uri": "skill://s/aA", "digest": sha(b""), "size": 0},
        ]));
        assert!(wanted(&twice, true).unwrap_err().contains("twice"));
    }

    #[test]
    fn the_manifest_comes_first_and_only_it_without_all() {
        let files = skill(json!([
            {"uri": "skill://s/refs/b.md", "digest": sha(b"b"), "size": 1},
            {"uri": "skill://s/SKILL.md", "digest": sha(b"m"), "size": 1},
        ]));
        let paths = |all| -> Vec<String> {
            (wanted(&files, all).unwrap().into_iter())
                .map(|(path, ..)| path)
                .collect()
        };
        assert_eq!(paths(true), ["SKILL.md", "refs/b.md"]);
        assert_eq!(paths(false), ["SKILL.md"]);
        let big = skill(json!([
            {"uri": "skill://s/SKILL.md", "digest": sha(b"m"), "size": MAX_BYTES},
            {"uri": "skill://s/x", "digest": sha(b"m"), "size": 1},
        ]));
        assert!(wanted(&big, false).unwrap_err().contains("over the limit"));
    }
}
