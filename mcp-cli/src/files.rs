//! The files this program keeps: replaced whole, the one way it rewrites one (config files,
//! tokens, pins), so that a crash leaves the old file or the new one, never half of either;
//! and the one way it tells, without reading it, that a file changed.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A file's modification time and length: an edit changes one or the other (within the
/// clock's resolution, the length mostly). Looking it up costs one `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp(SystemTime, u64);

/// `path`'s stamp, `None` when it is missing.
pub(crate) fn stamp(path: &Path) -> Option<Stamp> {
    let metadata = fs::metadata(path).ok()?;
    Some(Stamp(metadata.modified().ok()?, metadata.len()))
}

/// Each file's [`stamp`].
#[cfg(feature = "cli")]
pub(crate) fn stamps(paths: &[PathBuf]) -> Vec<Option<Stamp>> {
    paths.iter().map(|path| stamp(path)).collect()
}

/// Where [`replace`] failed.
#[derive(Debug)]
pub(crate) enum ReplaceError<E> {
    /// Writing the temporary file beside the target.
    Write {
        temporary: PathBuf,
        error: io::Error,
    },
    /// `ready` said no; nothing was replaced.
    Refused(E),
    /// Renaming the temporary file over the target.
    Rename(io::Error),
}

/// Replaces `path` with `bytes`: written to a temporary file in the same folder with `mode`
/// (whatever the umask), synced, then renamed over `path`. `ready` runs just before the
/// rename and may still refuse (a file changed on disk meanwhile). The temporary file never
/// outlives a failure.
pub(crate) fn replace<E>(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    ready: impl FnOnce() -> Result<(), E>,
) -> Result<(), ReplaceError<E>> {
    replace_with(path, mode, |file| file.write_all(bytes), ready)
}

/// [`replace`] with the contents written by `write`, through a buffer, as they are made: a
/// large file (a spilled tool result) is never held whole in memory.
pub(crate) fn replace_with<E>(
    path: &Path,
    mode: u32,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ready: impl FnOnce() -> Result<(), E>,
) -> Result<(), ReplaceError<E>> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = path.with_file_name(format!(".{name}.mcp-cli-{}.tmp", std::process::id()));
    let written = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temporary)?;
        let mut buffered = io::BufWriter::with_capacity(64 * 1024, file);
        write(&mut buffered)?;
        let file = buffered
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        // The umask may have narrowed the mode asked for at creation.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.sync_all()
    })();
    let replaced = match written {
        Err(error) => Err(ReplaceError::Write {
            temporary: temporary.clone(),
            error,
        }),
        Ok(()) => (ready().map_err(ReplaceError::Refused))
            .and_then(|()| fs::rename(&temporary, path).map_err(ReplaceError::Rename)),
    };
    if replaced.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    replaced
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_leaves_the_old_file_and_no_temporary_one() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-files-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kept.json");
        fs::write(&path, "old").unwrap();
        let refused = replace(&path, b"new", 0o600, || Err("changed meanwhile"));
        assert!(matches!(
            refused,
            Err(ReplaceError::Refused("changed meanwhile"))
        ));
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        replace(&path, b"new", 0o640, || Ok::<(), ()>(())).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
