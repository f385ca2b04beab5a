//! The files this program keeps: replaced whole, the one way it rewrites one (config files,
//! tokens, pins), so that a crash leaves the old file or the new one, never half of either;
//! the one way it tells, without reading it, that a file changed; and the one way it makes
//! and opens what it keeps in the state folder (folders 0700, files 0600, never through a
//! symbolic link, never another user's), so that what we own stays ours.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// `O_NOFOLLOW`: opening a symbolic link fails (`ELOOP`) instead of opening what it names.
fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Makes the state folder `dir` (and any missing parent) with mode 0700, or tightens one that
/// exists open to others (an older version made them 0755). A folder of another user is
/// refused: whoever owns it can swap what we keep there.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    (fs::DirBuilder::new().recursive(true).mode(0o700))
        .create(dir)
        .map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("cannot create {}: {error}", dir.display()),
            )
        })?;
    tighten_dir(dir)
}

/// [`private_dir`] for a folder that must already exist: checked and tightened, never made.
pub(crate) fn tighten_dir(dir: &Path) -> io::Result<()> {
    let metadata = fs::metadata(dir)?;
    if !metadata.is_dir() {
        return Err(refusal(
            io::ErrorKind::InvalidInput,
            dir,
            "it is not a folder",
        ));
    }
    ours(dir, &metadata)?;
    if metadata.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|error| {
            refusal(
                error.kind(),
                dir,
                &format!("it is open to others and cannot be closed ({error})"),
            )
        })?;
    }
    Ok(())
}

/// Opens the state file `path` for appending (a log), made 0600 when missing.
pub(crate) fn append_private(path: &Path) -> io::Result<File> {
    let opened = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(no_follow())
        .open(path);
    private(path, opened)
}

/// Opens the state file `path` for reading. A missing file is `NotFound`, as from
/// [`File::open`].
pub(crate) fn open_private(path: &Path) -> io::Result<File> {
    // Non-blocking, so that a FIFO stood in for the file cannot hang the open; refused below.
    let flags = no_follow() | rustix::fs::OFlags::NONBLOCK.bits() as i32;
    let opened = OpenOptions::new().read(true).custom_flags(flags).open(path);
    private(path, opened)
}

/// Reads the state file `path` whole, as [`open_private`] opens it.
pub(crate) fn read_private(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_private(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read_private`] as text.
pub(crate) fn read_private_text(path: &Path) -> io::Result<String> {
    String::from_utf8(read_private(path)?)
        .map_err(|_| refusal(io::ErrorKind::InvalidData, path, "it is not UTF-8 text"))
}

/// Checks a state file just opened: a regular file of ours, its mode set to 0600 if it was
/// open to others. A symbolic link (refused by the open) is named as such.
fn private(path: &Path, opened: io::Result<File>) -> io::Result<File> {
    let file = opened.map_err(|error| {
        if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            refusal(
                io::ErrorKind::InvalidInput,
                path,
                "it is a symbolic link, which state files never are",
            )
        } else {
            error
        }
    })?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(refusal(
            io::ErrorKind::InvalidInput,
            path,
            "it is not a regular file",
        ));
    }
    ours(path, &metadata)?;
    if metadata.mode() & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Fails unless `path` (as `metadata` describes it) belongs to the user we run as.
fn ours(path: &Path, metadata: &fs::Metadata) -> io::Result<()> {
    let us = rustix::process::geteuid().as_raw();
    if metadata.uid() == us {
        return Ok(());
    }
    let why = format!(
        "it belongs to user {}, not to user {us} who runs this",
        metadata.uid()
    );
    Err(refusal(io::ErrorKind::PermissionDenied, path, &why))
}

/// `refusing to use PATH: WHY`.
fn refusal(kind: io::ErrorKind, path: &Path, why: &str) -> io::Error {
    io::Error::new(kind, format!("refusing to use {}: {why}", path.display()))
}

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
        // Never through a link someone stood there: `create_new` is `O_EXCL`.
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(no_follow())
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

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-cli-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Another user's file: one made here and given away when we run as root, else one of
    /// root's that every system has.
    fn foreign_file(dir: &Path) -> PathBuf {
        if rustix::process::geteuid().is_root() {
            let path = dir.join("foreign");
            fs::write(&path, "theirs").unwrap();
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
            path
        } else {
            PathBuf::from("/etc/passwd")
        }
    }

    #[test]
    fn a_state_file_behind_a_symbolic_link_is_never_opened() {
        let dir = scratch("link");
        let target = dir.join("elsewhere");
        fs::write(&target, "untouched").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.join("server.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for error in [
            append_private(&link).unwrap_err(),
            read_private(&link).unwrap_err(),
        ] {
            assert!(error.to_string().contains("symbolic link"), "{error}");
            assert!(
                error.to_string().contains(&link.display().to_string()),
                "{error}"
            );
        }
        assert_eq!(fs::read_to_string(&target).unwrap(), "untouched");
        assert_eq!(mode(&target), 0o644, "the link's target keeps its mode");
        // Replacing the file replaces the link itself, never what it names.
        replace(&link, b"new", 0o600, || Ok::<(), ()>(())).unwrap();
        assert!(!fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), "untouched");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_temporary_name_taken_by_a_link_fails_the_write_and_follows_nothing() {
        let dir = scratch("temporary");
        let target = dir.join("elsewhere");
        fs::write(&target, "untouched").unwrap();
        let path = dir.join("pins.json");
        let temporary = dir.join(format!(".pins.json.mcp-cli-{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&target, &temporary).unwrap();
        let written = replace(&path, b"new", 0o600, || Ok::<(), ()>(()));
        assert!(matches!(written, Err(ReplaceError::Write { .. })));
        assert_eq!(fs::read_to_string(&target).unwrap(), "untouched");
        assert!(!path.exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_file_open_to_others_is_closed_when_used() {
        let dir = scratch("mode");
        let log = dir.join("server.log");
        fs::write(&log, "old\n").unwrap();
        fs::set_permissions(&log, fs::Permissions::from_mode(0o666)).unwrap();
        append_private(&log).unwrap().write_all(b"new\n").unwrap();
        assert_eq!(mode(&log), 0o600);
        assert_eq!(fs::read_to_string(&log).unwrap(), "old\nnew\n");
        let pins = dir.join("pins.json");
        fs::write(&pins, "{}").unwrap();
        fs::set_permissions(&pins, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_private(&pins).unwrap(), b"{}");
        assert_eq!(mode(&pins), 0o600);
        let made = dir.join("made.log");
        drop(append_private(&made).unwrap());
        assert_eq!(mode(&made), 0o600);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn another_users_state_file_is_refused() {
        let dir = scratch("owner");
        let foreign = foreign_file(&dir);
        let error = read_private(&foreign).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied, "{error}");
        assert!(error.to_string().contains("belongs to user"), "{error}");
        assert!(
            error.to_string().contains(&foreign.display().to_string()),
            "{error}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn state_folders_are_made_private_and_old_ones_tightened() {
        let dir = scratch("folders");
        let made = dir.join("mcp-cli/logs");
        private_dir(&made).unwrap();
        assert_eq!(mode(&made), 0o700);
        assert_eq!(mode(made.parent().unwrap()), 0o700);
        let old = dir.join("old");
        fs::create_dir(&old).unwrap();
        fs::set_permissions(&old, fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&old).unwrap();
        assert_eq!(mode(&old), 0o700);
        if rustix::process::geteuid().is_root() {
            let theirs = dir.join("theirs");
            fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let error = private_dir(&theirs).unwrap_err();
            assert!(
                error.to_string().contains("belongs to user 65534"),
                "{error}"
            );
        } else {
            let error = tighten_dir(Path::new("/etc")).unwrap_err();
            assert!(error.to_string().contains("belongs to user 0"), "{error}");
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
