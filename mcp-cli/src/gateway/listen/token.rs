//! The bearer token `serve --listen` requires of its hosts: made on first use, kept in the
//! state folder, and never used from a file others could have read or swapped.

use std::convert::Infallible;

/// The bearer token in `path`, made on first use: 32 random bytes as hex, kept mode 0600.
/// A token file that others could have read or swapped (a symbolic link, another user's, open
/// to group or others) is never used: a new token replaces it, and stderr says why.
pub(crate) fn token(path: &std::path::Path) -> Result<String, String> {
    match kept_token(path) {
        Ok(Some(token)) => return Ok(token),
        Ok(None) => {}
        Err(why) => eprintln!(
            "mcp-cli serve: {} {why}; it is replaced by a new token (hosts need the new one)",
            path.display()
        ),
    }
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| format!("no random bytes for a token: {e}"))?;
    let token: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    if let Some(folder) = path.parent() {
        crate::files::private_dir(folder).map_err(|e| e.to_string())?;
    }
    // A new file (O_EXCL, O_NOFOLLOW, 0600) renamed over whatever stood there, a link too.
    let written = crate::files::replace(path, format!("{token}\n").as_bytes(), 0o600, || {
        Ok::<(), Infallible>(())
    });
    written.map_err(|_| format!("cannot write the token to {}", path.display()))?;
    Ok(token)
}

/// The token kept in `path`, if there is a usable one: `Ok(None)` when there is none (or it
/// is too short to be ours), `Err(why)` when the file must not be trusted.
fn kept_token(path: &std::path::Path) -> Result<Option<String>, &'static str> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let no_follow = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow.bits() as i32)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err("is a symbolic link");
        }
        Err(_) => return Err("cannot be read"),
    };
    // Checked on the file opened, so nothing can be swapped in between.
    let metadata = file.metadata().map_err(|_| "cannot be read")?;
    if !metadata.is_file() {
        return Err("is not a regular file");
    }
    if metadata.uid() != rustix::process::geteuid().as_raw() {
        return Err("belongs to another user");
    }
    if metadata.mode() & 0o077 != 0 {
        return Err("was readable or writable by others than its owner");
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|_| "cannot be read")?;
    let token = text.trim();
    Ok((token.len() >= 32).then(|| token.to_owned()))
}

/// The token of an `Authorization` value of the Bearer scheme, whose name is
/// case-insensitive (RFC 9110 §11.1): `bearer` and `BEARER` are `Bearer`.
pub(super) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-cli-token-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    const PLANTED: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_scheme_is_any_case_and_the_token_must_follow() {
        for value in ["Bearer abc", "bearer abc", "BEARER abc", "bEaReR abc"] {
            assert_eq!(bearer(value), Some("abc"), "{value}");
        }
        for value in ["Basic abc", "Bearerabc", "abc", "Bearer"] {
            assert_eq!(bearer(value), None, "{value}");
        }
    }

    #[test]
    fn a_private_token_is_kept() {
        let dir = scratch("kept");
        let path = dir.join("listen-token");
        let made = token(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(token(&path).unwrap(), made);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_token_others_could_read_is_replaced() {
        let dir = scratch("open");
        let path = dir.join("listen-token");
        std::fs::write(&path, PLANTED).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let made = token(&path).unwrap();
        assert_ne!(made, PLANTED);
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), made);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_token_behind_a_link_is_replaced_and_the_target_untouched() {
        let dir = scratch("link");
        let target = dir.join("elsewhere");
        std::fs::write(&target, PLANTED).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let path = dir.join("listen-token");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let made = token(&path).unwrap();
        assert_ne!(made, PLANTED);
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), PLANTED);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn another_users_token_is_replaced() {
        if !rustix::process::geteuid().is_root() {
            // Only root can give a file away: one of root's shows the check.
            let theirs = std::path::Path::new("/etc/passwd");
            assert_eq!(kept_token(theirs), Err("belongs to another user"));
            return;
        }
        let dir = scratch("owner");
        let path = dir.join("listen-token");
        std::fs::write(&path, PLANTED).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        assert_eq!(kept_token(&path), Err("belongs to another user"));
        assert_ne!(token(&path).unwrap(), PLANTED);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
