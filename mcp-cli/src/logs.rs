//! Per-server stderr logs: appended, private (0600, never through a symbolic link), rotated
//! past a size cap.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Past this size the log is renamed to `<name>.log.1` (replacing an older one) and restarted.
pub const ROTATE_BYTES: u64 = 4 * 1024 * 1024;

/// The log file of `server` in `dir`: `<name>.log`, the name with each character other than
/// letters, digits, `-`, `_` and `.` (and a leading dot) written as `%` and its UTF-8 bytes in
/// hex, so no name reaches outside `dir` and no two share a file. Pins and tokens use the same name
/// with another extension.
pub fn log_path(dir: &Path, server: &str) -> PathBuf {
    dir.join(format!("{}.log", file_stem(server)))
}

/// `server` as a file's name: letters, digits, `-`, `_` and `.` as they are, and every other
/// character, and a leading dot, as `%` and its UTF-8 bytes in hex (`a/b` is `a%2Fb`).
/// Server names come from config keys: this keeps them from escaping the folder or hiding in
/// it, and, as `%` is never kept, tells apart names that a plain `_` for each character would
/// make one (`a/b` and `a_b` shared their pins, tokens and log when they were both `a_b`).
pub(crate) fn file_stem(server: &str) -> String {
    let mut stem = String::with_capacity(server.len());
    for (at, c) in server.char_indices() {
        if (c.is_alphanumeric() || "-_".contains(c)) || (c == '.' && at > 0) {
            stem.push(c);
        } else {
            let mut bytes = [0; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                stem.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    stem
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
    /// Opens `path` for appending (creating it and its folder private), rotating once it
    /// passes `cap` bytes.
    pub fn open(path: PathBuf, cap: u64) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            crate::files::private_dir(dir)?;
        }
        let file = crate::files::append_private(&path)?;
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
        self.file = crate::files::append_private(&self.path)?;
        self.size = 0;
        Ok(())
    }
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

/// One run of a server in its log: a marker line with the time, the command and the pid
/// comes before anything the run writes, so runs can be told apart.
#[derive(Debug, Clone)]
pub struct RunLog {
    state: Arc<Mutex<RunState>>,
}

#[derive(Debug)]
struct RunState {
    file: LogFile,
    command: String,
    pid: Option<u32>,
    marked: bool,
}

impl RunLog {
    /// Opens the log for a run of `command`; the marker waits for [`started`](Self::started)
    /// or the first line of stderr, whichever comes first.
    pub fn open(path: PathBuf, command: &str) -> io::Result<Self> {
        let state = RunState {
            file: LogFile::open(path, ROTATE_BYTES)?,
            command: command.to_owned(),
            pid: None,
            marked: false,
        };
        Ok(Self {
            state: Arc::new(Mutex::new(state)),
        })
    }

    /// The run's process has started as `pid`: writes the marker if nothing came first.
    pub fn started(&self, pid: u32) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.pid = Some(pid);
        let _ = state.mark();
    }
}

impl RunState {
    fn mark(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.marked, true) {
            return Ok(());
        }
        let pid = self
            .pid
            .map_or_else(|| "?".to_owned(), |pid| pid.to_string());
        let line = format!(
            "--- {} started: {} (pid {pid}) ---\n",
            utc_now(),
            self.command
        );
        self.file.write_all(line.as_bytes())
    }
}

impl Write for RunLog {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.mark()?;
        state.file.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.file.flush()
    }
}

/// `2026-11-23 12:00:00 UTC`, from the system clock, without a date crate.
fn utc_now() -> String {
    let [year, month, day, hour, minute, second] = clock();
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02} UTC")
}

/// `2026-11-23T12:00:00Z` (ISO 8601), from the system clock: the protocol's timestamps.
#[cfg(feature = "cli")]
pub(crate) fn iso8601_now() -> String {
    let [year, month, day, hour, minute, second] = clock();
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}

/// The system clock as UTC year, month, day, hour, minute and second.
fn clock() -> [i64; 6] {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let (days, time) = (seconds / 86_400, (seconds % 86_400) as i64);
    let (year, month, day) = civil_from_days(days as i64);
    let (month, day) = (i64::from(month), i64::from(day));
    [year, month, day, time / 3600, time / 60 % 60, time % 60]
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard Hinnant's
/// well-known algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
    let mut file: File = crate::files::open_private(path)?;
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
    fn each_run_starts_with_a_marker_line() {
        let dir = temp_dir("marker");
        let path = log_path(&dir, "srv");
        let run = RunLog::open(path.clone(), "srv --flag").unwrap();
        run.started(4242);
        run.clone().write_all(b"hello\n").unwrap();
        let mut second = RunLog::open(path.clone(), "srv --flag").unwrap();
        second.write_all(b"before the pid was known\n").unwrap();
        second.started(4343);
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].starts_with("--- 20")
                && lines[0].ends_with(" UTC started: srv --flag (pid 4242) ---"),
            "{text}"
        );
        assert_eq!(lines[1], "hello");
        assert!(
            lines[2].ends_with("started: srv --flag (pid ?) ---"),
            "{text}"
        );
        assert_eq!(lines[3], "before the pid was known");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_416), (2025, 11, 24));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn names_cannot_escape_the_folder() {
        let dir = Path::new("/logs");
        assert_eq!(
            log_path(dir, "../etc/x"),
            Path::new("/logs/%2E.%2Fetc%2Fx.log")
        );
        assert_eq!(log_path(dir, ".hidden"), Path::new("/logs/%2Ehidden.log"));
        assert_eq!(log_path(dir, "git"), Path::new("/logs/git.log"));
        assert_eq!(
            log_path(dir, "my-srv_2.v1"),
            Path::new("/logs/my-srv_2.v1.log")
        );
        assert_eq!(log_path(dir, "café"), Path::new("/logs/café.log"));
    }

    #[test]
    fn names_never_share_a_file() {
        let dir = Path::new("/logs");
        let names = ["a/b", "a_b", "a b", "a%2Fb", ".a", "a", "%2Ea", "a:b"];
        let paths: std::collections::BTreeSet<PathBuf> =
            names.iter().map(|name| log_path(dir, name)).collect();
        assert_eq!(paths.len(), names.len(), "{paths:?}");
        assert_eq!(log_path(dir, "a/b"), Path::new("/logs/a%2Fb.log"));
        assert_eq!(log_path(dir, "a%2Fb"), Path::new("/logs/a%252Fb.log"));
    }
}
