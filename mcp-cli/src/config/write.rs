//! Reading a config file for an edit and writing it back: atomically (a temporary file in the
//! same folder, renamed over it), keeping its mode, and never over a change made on disk
//! since it was read.

use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{ConfigError, ConfigErrorKind};
use crate::files::{self, ReplaceError};

/// A file as read for an edit: where it really is (symbolic links followed, so a link into a
/// dotfiles folder stays a link) and its text, `None` when it does not exist yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    /// The file's real path, the one written back.
    pub path: PathBuf,
    /// Its contents when read; `None` when there was no file, so the edit creates one.
    pub text: Option<String>,
}

/// Reads `path` for an edit.
pub fn read_original(path: &Path) -> Result<Original, ConfigError> {
    let cannot = |error: std::io::Error| ConfigError::unreadable(path, &error);
    let resolved = match fs::canonicalize(path) {
        Ok(resolved) => resolved,
        Err(error) if error.kind() == ErrorKind::NotFound => path.to_owned(),
        Err(error) => return Err(cannot(error)),
    };
    let text = match fs::read_to_string(&resolved) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == ErrorKind::NotFound => None,
        Err(error) => return Err(cannot(error)),
    };
    Ok(Original {
        path: resolved,
        text,
    })
}

/// Reads the state file `path` (pins, era verdicts) for an edit: never through a symbolic
/// link, and only a file of ours (see `files::read_private`).
pub fn read_private(path: &Path) -> Result<Original, ConfigError> {
    let text = match files::read_private_text(path) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == ErrorKind::NotFound => None,
        Err(error) => return Err(ConfigError::unreadable(path, &error)),
    };
    Ok(Original {
        path: path.to_owned(),
        text,
    })
}

/// Replaces a state file read by [`read_private`] with `text`, mode 0600 whatever it was,
/// its folder made private first; never over a change made on disk since it was read.
pub fn write_private(original: &Original, text: &str) -> Result<(), ConfigError> {
    let path = &original.path;
    let fail = |what: String| {
        let message = format!("{what}; {} left as it was", path.display());
        ConfigError::new(ConfigErrorKind::NotWritten, message).in_file(path)
    };
    if let Some(folder) = path
        .parent()
        .filter(|folder| !folder.as_os_str().is_empty())
    {
        files::private_dir(folder).map_err(|error| fail(error.to_string()))?;
    }
    let unchanged = || unchanged_as(original, files::read_private_text);
    unchanged()?;
    let replaced = files::replace(path, text.as_bytes(), 0o600, unchanged);
    replaced.map_err(|error| match error {
        ReplaceError::Write { temporary, error } => {
            fail(format!("cannot write {}: {error}", temporary.display()))
        }
        ReplaceError::Refused(changed) => changed,
        ReplaceError::Rename(error) => fail(format!("cannot replace {}: {error}", path.display())),
    })
}

/// Replaces `original`'s file with `text`. A file marked read-only is refused even where the
/// system would let us write it (as root): the mark is the owner's wish. A new file gets mode
/// 0600, as entries may hold tokens.
pub fn write_back(original: &Original, text: &str) -> Result<(), ConfigError> {
    let path = &original.path;
    let fail = |what: String| {
        let message = format!("{what}; {} left as it was", path.display());
        ConfigError::new(ConfigErrorKind::NotWritten, message).in_file(path)
    };
    let mode = match fs::metadata(path) {
        Ok(metadata) if metadata.permissions().readonly() => {
            return Err(fail(format!("{} is read-only", path.display())));
        }
        Ok(metadata) => metadata.permissions().mode() & 0o7777,
        Err(error) if error.kind() == ErrorKind::NotFound => 0o600,
        Err(error) => return Err(fail(format!("cannot write {}: {error}", path.display()))),
    };
    if original.text.is_some() {
        OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|error| fail(format!("cannot write {}: {error}", path.display())))?;
    }
    unchanged(original)?;
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder.to_owned(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&folder)
        .map_err(|error| fail(format!("cannot create {}: {error}", folder.display())))?;
    let replaced = files::replace(path, text.as_bytes(), mode, || unchanged(original));
    replaced.map_err(|error| match error {
        ReplaceError::Write { temporary, error } => {
            fail(format!("cannot write {}: {error}", temporary.display()))
        }
        ReplaceError::Refused(changed) => changed,
        ReplaceError::Rename(error) => fail(format!("cannot replace {}: {error}", path.display())),
    })
}

/// Fails when the file on disk is no longer what was read.
fn unchanged(original: &Original) -> Result<(), ConfigError> {
    unchanged_as(original, |path| fs::read_to_string(path))
}

/// [`unchanged`], the file read by `read`.
fn unchanged_as(
    original: &Original,
    read: impl Fn(&Path) -> std::io::Result<String>,
) -> Result<(), ConfigError> {
    let now = match read(&original.path) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == ErrorKind::NotFound => None,
        Err(error) => {
            return Err(ConfigError::unreadable(&original.path, &error));
        }
    };
    if now == original.text {
        Ok(())
    } else {
        let message = format!(
            "{} changed on disk while it was being edited; left as it is, run the command again",
            original.path.display()
        );
        Err(ConfigError::new(ConfigErrorKind::NotWritten, message).in_file(&original.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_keep_the_mode_and_refuse_what_changed_meanwhile() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-write-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        fs::write(&path, "a").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let original = read_original(&path).unwrap();
        write_back(&original, "b").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "b");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);

        // `original` still says "a": the file changed since.
        let error = write_back(&original, "c").unwrap_err();
        assert!(error.to_string().contains("changed on disk"), "{error}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "b");

        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
        let error = write_back(&read_original(&path).unwrap(), "d").unwrap_err();
        assert!(error.to_string().contains("c.toml is read-only"), "{error}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "b");

        let fresh = dir.join("sub/new.toml");
        let original = read_original(&fresh).unwrap();
        assert_eq!(original.text, None);
        write_back(&original, "e").unwrap();
        let mode = fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let leftovers = fs::read_dir(&dir).unwrap().count();
        assert_eq!(leftovers, 2, "no temporary file is left behind");
        fs::remove_dir_all(dir).unwrap();
    }
}
