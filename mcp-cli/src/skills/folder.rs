//! Where a fetched skill goes: the folder an agent reads its skills from (`--to claude`,
//! `--to codex`) or one the person names, and the write that leaves all of the skill there
//! or nothing.
//!
//! The files are written into a new hidden folder beside the destination, each created anew
//! (so no link planted there can redirect a write), and the folder is renamed into place at
//! the end: an agent never reads half a skill, and a failure leaves the destination as it was.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::exit::Failure;
use crate::skills::Fetched;

/// Where `--to` says to put skills: `claude`, `codex`, or a folder.
pub(crate) fn destination(to: &str) -> Result<PathBuf, Failure> {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or_else(|| Failure::usage(format!("--to {to} needs HOME to be set")))
    };
    Ok(match to {
        // Claude Code's personal skills, under its config folder.
        "claude" => match std::env::var_os("CLAUDE_CONFIG_DIR") {
            Some(dir) => PathBuf::from(dir).join("skills"),
            None => home()?.join(".claude/skills"),
        },
        // Codex's user skills (`$HOME/.agents/skills` since its 2026 releases).
        "codex" => home()?.join(".agents/skills"),
        folder => PathBuf::from(folder),
    })
}

/// Writes `skill` as `<dir>/<name>/`, all of it or nothing. An existing folder of that name
/// is replaced only with `replace`; a link in its place is never followed.
pub(crate) fn write(dir: &Path, skill: &Fetched, replace: bool) -> Result<PathBuf, Failure> {
    let cannot = |what: &str, path: &Path, error: std::io::Error| {
        Failure::usage(format!("cannot {what} {}: {error}", path.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| cannot("create", dir, e))?;
    let target = dir.join(&skill.name);
    match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(Failure::usage(format!(
                "{} is a symbolic link: not replaced",
                target.display()
            )));
        }
        Ok(_) if !replace => {
            return Err(Failure::usage(format!(
                "{} already exists: pass --force to replace it",
                target.display()
            )));
        }
        _ => {}
    }
    let staging = dir.join(format!(".{}.mcp-cli-{}", skill.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let written = write_files(&staging, skill);
    if let Err(error) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(cannot("write", &staging, error));
    }
    // The old folder is moved aside, not deleted first, so that a failed rename loses nothing.
    let aside = dir.join(format!(
        ".{}.mcp-cli-old-{}",
        skill.name,
        std::process::id()
    ));
    let moved_aside = target.exists() && std::fs::rename(&target, &aside).is_ok();
    if let Err(error) = std::fs::rename(&staging, &target) {
        if moved_aside {
            let _ = std::fs::rename(&aside, &target);
        }
        let _ = std::fs::remove_dir_all(&staging);
        return Err(cannot("move the skill to", &target, error));
    }
    if moved_aside {
        let _ = std::fs::remove_dir_all(&aside);
    }
    Ok(target)
}

fn write_files(staging: &Path, skill: &Fetched) -> std::io::Result<()> {
    std::fs::create_dir(staging)?;
    for (path, bytes) in &skill.files {
        let file = staging.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file)?;
        out.write_all(bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(files: &[(&str, &str)]) -> Fetched {
        Fetched {
            name: "s".to_owned(),
            files: (files.iter())
                .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec()))
                .collect(),
            unlisted: false,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mcp-cli-skills-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_skill_is_written_whole_and_replaced_only_when_asked() {
        let dir = scratch("write");
        let first = skill(&[("SKILL.md", "one"), ("refs/a.md", "a")]);
        let target = write(&dir, &first, false).unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("refs/a.md")).unwrap(),
            "a"
        );
        let second = skill(&[("SKILL.md", "two")]);
        let error = write(&dir, &second, false).unwrap_err();
        assert!(error.message.contains("--force"), "{}", error.message);
        assert_eq!(
            std::fs::read_to_string(target.join("SKILL.md")).unwrap(),
            "one"
        );
        write(&dir, &second, true).unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("SKILL.md")).unwrap(),
            "two"
        );
        assert!(!target.join("refs").exists(), "the old folder went whole");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s"], "nothing left beside it");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_in_the_skill_place_is_not_followed() {
        let dir = scratch("link");
        let elsewhere = scratch("link-target");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("s")).unwrap();
        let error = write(&dir, &skill(&[("SKILL.md", "x")]), true).unwrap_err();
        assert!(error.message.contains("symbolic link"), "{}", error.message);
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&elsewhere).unwrap();
    }

    #[test]
    fn agents_folders_follow_their_settings() {
        assert_eq!(destination("some/dir").unwrap(), PathBuf::from("some/dir"));
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        assert_eq!(destination("codex").unwrap(), home.join(".agents/skills"));
    }
}
