//! Per-server stderr logs (DESIGN §5.5): appended, private (0600), rotated past a size cap.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Past this size the log is renamed to `<name>.log.1` (replacing an older one) and restarted.
pub const ROTATE_BYTES: u64 = 4 * 1024 * 1024;

/// `$XDG_STATE_HOME/mcp-cli/logs`, default `~/.local/state/mcp-cli/logs`.
pub fn log_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let state = match env("XDG_STATE_HOME").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env("HOME").unwrap_or_default()).join(".local/state"),
    };
    state.join("mcp-cli").join("logs")
}

pub fn log_path(dir: &Path, server: &str) -> PathBuf {
    // Server names come from config keys; keep them from escaping the folder.
    let safe: String = server
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("{}.log", safe.trim_start_matches('.')))
}

/// An append-only log that rotates itself.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: File,
    size: u64,
    cap: u64,
}

impl LogFile {
    pub fn open(path: PathBuf, cap: u64) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let file = open_private(&path)?;
        let size = file.metadata()?.len();
        Ok(Self {
            path,
            file,
            size,
            cap,
        })
    }

    fn rotate(&mut self) -> io::Result<()> {
        fs::rename(&self.path, rotated(&self.path))?;
        self.file = open_private(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

fn open_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl Write for LogFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.size >= self.cap {
            self.rotate()?;
        }
        let written = self.file.write(bytes)?;
        self.size += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Where a log goes when it is rotated.
fn rotated(path: &Path) -> PathBuf {
    let mut old = path.to_path_buf().into_os_string();
    old.push(".1");
    PathBuf::from(old)
}

/// The last `count` lines of a server's log, reaching into the rotated file when the current
/// one, just restarted, holds fewer.
pub fn last_lines(path: &Path, count: usize) -> io::Result<Vec<String>> {
    let recent = tail(path, count)?;
    let missing = count - recent.len().min(count);
    match tail(&rotated(path), missing) {
        Ok(mut older) if missing > 0 => {
            older.extend(recent);
            Ok(older)
        }
        _ => Ok(recent),
    }
}

/// The last `count` lines of a log, reading no more than the end of the file needs.
pub fn tail(path: &Path, count: usize) -> io::Result<Vec<String>> {
    let mut file = File::open(path)?;
    let length = file.metadata()?.len();
    let mut window = 64 * 1024;
    loop {
        let start = length.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes);
        let mut lines: Vec<&str> = text.lines().collect();
        // The first line may be cut in half unless the window reaches the file's start.
        let complete = if start == 0 {
            lines.len()
        } else {
            lines.len().saturating_sub(1)
        };
        if complete >= count || start == 0 {
            let skip = lines.len() - complete.min(count).min(lines.len());
            lines.drain(..skip);
            return Ok(lines.into_iter().map(str::to_owned).collect());
        }
        window *= 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-cli-logs-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn last_lines_reach_into_the_rotated_log() {
        let dir = temp_dir("last-lines");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("srv.log");
        fs::write(dir.join("srv.log.1"), "old 1\nold 2\nold 3\n").unwrap();
        fs::write(&path, "new 1\n").unwrap();
        assert_eq!(last_lines(&path, 3).unwrap(), ["old 2", "old 3", "new 1"]);
        assert_eq!(last_lines(&path, 1).unwrap(), ["new 1"]);
        fs::remove_file(dir.join("srv.log.1")).unwrap();
        assert_eq!(last_lines(&path, 3).unwrap(), ["new 1"]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn log_is_private_and_rotates() {
        let dir = temp_dir("rotate");
        let path = log_path(&dir, "srv");
        let mut log = LogFile::open(path.clone(), 10).unwrap();
        log.write_all(b"0123456789ab\n").unwrap();
        log.write_all(b"after\n").unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(fs::read_to_string(&path).unwrap(), "after\n");
        assert_eq!(
            fs::read_to_string(dir.join("srv.log.1")).unwrap(),
            "0123456789ab\n"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn tail_returns_the_last_lines() {
        let dir = temp_dir("tail");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.log");
        let text: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
        fs::write(&path, text).unwrap();
        assert_eq!(tail(&path, 2).unwrap(), ["line 49998", "line 49999"]);
        assert_eq!(tail(&path, 50_001).unwrap().len(), 50_000);
        fs::write(&path, "a\nb").unwrap();
        assert_eq!(tail(&path, 5).unwrap(), ["a", "b"]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn names_cannot_escape_the_folder() {
        let dir = Path::new("/logs");
        assert_eq!(log_path(dir, "../etc/x"), Path::new("/logs/_etc_x.log"));
        assert_eq!(log_path(dir, "git"), Path::new("/logs/git.log"));
    }
}
