//! Results too large to print: the whole result streamed to a file in the state folder's
//! `results/` (mode 0600, written beside and renamed into place), the first part shown.
//!
//! Output is measured as it is made ([`Measure`]), never built whole a second time: a 200 MiB
//! result is held once, as the server's answer, while its size is found, its first part kept
//! and the whole of it written out. The folder keeps the newest [`KEEP_FILES`] results up to
//! [`KEEP_BYTES`] together (the one just written is always kept); each new result removes what
//! falls outside that, and temporary files a crash left behind once they are an hour old.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::output::Stdout;

/// What `call` prints on a terminal before it spills, when neither `--max-output` nor the
/// server's `max_result_bytes` says: a screenful many times over, far less than a scrollback
/// flooded with a megabyte of JSON.
pub(crate) const TERMINAL_DEFAULT: u64 = 64 * 1024;

/// How many spilled results are kept.
pub(crate) const KEEP_FILES: usize = 20;

/// How many bytes of spilled results are kept, together.
pub(crate) const KEEP_BYTES: u64 = 1024 * 1024 * 1024;

/// A temporary file older than this was left by a write that never finished.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// `--max-output`: a number of bytes, or no limit at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxOutput {
    Bytes(u64),
    Unlimited,
}

/// Reads `--max-output`: bytes (`65536`), with a binary suffix (`64K`, `1M`, `2G`), or
/// `none` for no limit.
pub(crate) fn parse_max_output(text: &str) -> Result<MaxOutput, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") {
        return Ok(MaxOutput::Unlimited);
    }
    let (digits, scale) = match text.char_indices().last() {
        Some((at, 'k' | 'K')) => (&text[..at], 1 << 10),
        Some((at, 'm' | 'M')) => (&text[..at], 1 << 20),
        Some((at, 'g' | 'G')) => (&text[..at], 1 << 30),
        _ => (text, 1),
    };
    let number: u64 = digits.parse().map_err(|_| {
        format!("{text:?} is not a number of bytes (such as 65536, 64K or 1M) or `none`")
    })?;
    match number.checked_mul(scale) {
        Some(0) => Err("must be at least 1 byte (`none` prints everything)".to_owned()),
        Some(bytes) => Ok(MaxOutput::Bytes(bytes)),
        None => Err(format!("{text:?} is too large")),
    }
}

/// The limit for one call: `--max-output`, else the server's `max_result_bytes`, else
/// [`TERMINAL_DEFAULT`] on a terminal, else none (a pipe or a file gets everything).
pub(crate) fn limit(flag: Option<MaxOutput>, server: Option<u64>, terminal: bool) -> Option<u64> {
    match (flag, server) {
        (Some(MaxOutput::Bytes(bytes)), _) => Some(bytes),
        (Some(MaxOutput::Unlimited), _) => None,
        (None, Some(bytes)) => Some(bytes),
        (None, None) => terminal.then_some(TERMINAL_DEFAULT),
    }
}

/// A writer that counts every byte written to it and keeps the first `keep`.
#[derive(Debug)]
pub(crate) struct Measure {
    pub(crate) head: Vec<u8>,
    pub(crate) total: u64,
    keep: usize,
}

impl Measure {
    pub(crate) fn new(keep: u64) -> Self {
        let keep = usize::try_from(keep).unwrap_or(usize::MAX);
        Self {
            head: Vec::with_capacity(keep.min(1 << 20)),
            total: 0,
            keep,
        }
    }

    /// The kept bytes as text, cut back to the last whole character.
    pub(crate) fn head_text(&self) -> &str {
        match std::str::from_utf8(&self.head) {
            Ok(text) => text,
            Err(error) => {
                let whole = &self.head[..error.valid_up_to()];
                std::str::from_utf8(whole).unwrap_or_default()
            }
        }
    }
}

impl Write for Measure {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.total += bytes.len() as u64;
        let room = self.keep.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where a result too large to print goes, and under what name.
#[derive(Debug)]
pub(crate) struct Spill<'a> {
    /// Past this many bytes the output is spilled; `None`: never.
    pub(crate) limit: Option<u64>,
    /// The folder of results.
    pub(crate) dir: &'a Path,
    /// Whose result it is: the tool's shown name.
    pub(crate) label: &'a str,
    /// `txt` or `json`.
    pub(crate) ext: &'a str,
}

impl Spill<'_> {
    /// When the output `write_all` makes is longer than the limit: writes it whole to a file,
    /// prints its first part (on stderr with `to_stderr`, as a tool error's text goes) and
    /// the file's path after it, and returns true. Within the limit, or when the file cannot
    /// be written (said on stderr; nothing is lost), returns false: print it as usual.
    pub(crate) fn spilled(
        &self,
        out: &mut Stdout,
        to_stderr: bool,
        write_all: &dyn Fn(&mut dyn Write) -> io::Result<()>,
    ) -> bool {
        let Some(limit) = self.limit else {
            return false;
        };
        let mut measure = Measure::new(limit);
        if write_all(&mut measure).is_err() || measure.total <= limit {
            return false;
        }
        let path = match write(self.dir, self.label, self.ext, write_all) {
            Ok(path) => path,
            Err(error) => {
                out.diagnostic(&format!(
                    "warning: the result is {} bytes, over the limit of {limit}, but {error}; \
                     printing all of it",
                    measure.total
                ));
                return false;
            }
        };
        let head = measure.head_text();
        let mut print = |line: &str| match to_stderr {
            true => out.diagnostic(line),
            false => out.line(line),
        };
        for line in head.strip_suffix('\n').unwrap_or(head).split('\n') {
            print(line);
        }
        print(&format!(
            "[output cut at {} of {} bytes; the whole result is in {}]",
            head.len(),
            measure.total,
            path.display()
        ));
        true
    }
}

/// Writes a result to a new file in `dir` (created 0700 if need be), named after `label`
/// (a shown tool name) with extension `ext`, through `write`; then prunes the folder.
/// Returns the file's path.
pub(crate) fn write(
    dir: &Path,
    label: &str,
    ext: &str,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<PathBuf, String> {
    crate::files::private_dir(dir).map_err(|e| e.to_string())?;
    let path = dir.join(file_name(label, ext));
    crate::files::replace_with(&path, 0o600, write, || Ok::<(), ()>(())).map_err(|error| {
        let error = match error {
            crate::files::ReplaceError::Write { error, .. }
            | crate::files::ReplaceError::Rename(error) => error.to_string(),
            crate::files::ReplaceError::Refused(()) => "refused".to_owned(),
        };
        format!("cannot write {}: {error}", path.display())
    })?;
    prune(dir, &path);
    Ok(path)
}

/// `<seconds since 1970>-<label>-<32 hex digits>.<ext>`: sorted by time, saying whose
/// result it is, and not to be guessed (a gateway's hosts read theirs by this name).
fn file_name(label: &str, ext: &str) -> String {
    let seconds = (SystemTime::now().duration_since(SystemTime::UNIX_EPOCH))
        .map_or(0, |elapsed| elapsed.as_secs());
    let label: String = (label.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{seconds}-{label}-{}.{ext}", random_hex())
}

/// 16 random bytes as hex; from the clock and the pid if the system has no random source.
fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::getrandom(&mut bytes).is_err() {
        let nanos = (SystemTime::now().duration_since(SystemTime::UNIX_EPOCH))
            .map_or(0, |elapsed| elapsed.as_nanos());
        bytes = (nanos ^ u128::from(std::process::id())).to_le_bytes();
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Whether `name` is one [`write`] could have made: what a gateway's host may ask to read.
pub(crate) fn is_result_name(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    !name.is_empty() && !name.starts_with('.') && !name.contains("..") && name.chars().all(allowed)
}

/// Keeps the newest results within [`KEEP_FILES`] and [`KEEP_BYTES`] (and always `newest`),
/// removes the rest and stale temporary files. Best effort: a file another process removed
/// meanwhile is no error.
fn prune(dir: &Path, newest: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let mut results = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            let age = now.duration_since(modified).unwrap_or_default();
            if age > STALE_TEMPORARY {
                let _ = fs::remove_file(&path);
            }
        } else if meta.is_file() {
            results.push((path != newest, modified, meta.len(), path));
        }
    }
    // The one just written first, then newest first.
    results.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut kept_bytes = 0u64;
    for (count, (not_newest, _, len, path)) in results.into_iter().enumerate() {
        kept_bytes = kept_bytes.saturating_add(len);
        if not_newest && (count >= KEEP_FILES || kept_bytes > KEEP_BYTES) {
            let _ = fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_output_reads_bytes_suffixes_and_none() {
        assert_eq!(parse_max_output("65536"), Ok(MaxOutput::Bytes(65536)));
        assert_eq!(parse_max_output("64K"), Ok(MaxOutput::Bytes(65536)));
        assert_eq!(parse_max_output("2m"), Ok(MaxOutput::Bytes(2 << 20)));
        assert_eq!(parse_max_output("none"), Ok(MaxOutput::Unlimited));
        assert!(
            parse_max_output("0")
                .unwrap_err()
                .contains("at least 1 byte")
        );
        assert!(parse_max_output("-5").unwrap_err().contains("not a number"));
        assert!(
            parse_max_output("lots")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            parse_max_output("99999999999G")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn the_flag_wins_then_the_server_then_the_terminal() {
        let flag = Some(MaxOutput::Bytes(10));
        assert_eq!(limit(flag, Some(20), true), Some(10));
        assert_eq!(limit(Some(MaxOutput::Unlimited), Some(20), true), None);
        assert_eq!(limit(None, Some(20), false), Some(20));
        assert_eq!(limit(None, None, true), Some(TERMINAL_DEFAULT));
        assert_eq!(limit(None, None, false), None);
    }

    #[test]
    fn measure_keeps_the_head_and_cuts_at_a_whole_character() {
        let mut measure = Measure::new(4);
        measure.write_all("ab".as_bytes()).unwrap();
        measure.write_all("cé€".as_bytes()).unwrap();
        assert_eq!(measure.total, 8);
        // "abcé" is 5 bytes: the é does not fit whole in 4.
        assert_eq!(measure.head_text(), "abc");
    }

    #[test]
    fn the_folder_keeps_the_newest_results_only() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-spill-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut paths = Vec::new();
        for n in 0..KEEP_FILES + 3 {
            let path = write(&dir, "fx__blob", "txt", |out| write!(out, "result {n}")).unwrap();
            // Distinct modification times, oldest first, whatever the clock's resolution.
            let file = fs::File::options().write(true).open(&path).unwrap();
            let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + n as u64);
            file.set_modified(when).unwrap();
            paths.push(path);
        }
        let last = paths.last().unwrap();
        assert_eq!(
            fs::read_to_string(last).unwrap(),
            format!("result {}", KEEP_FILES + 2)
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(last).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(is_result_name(&last.file_name().unwrap().to_string_lossy()));
        assert!(!is_result_name("../config.toml") && !is_result_name(".hidden"));
        let left = fs::read_dir(&dir).unwrap().count();
        assert_eq!(left, KEEP_FILES);
        assert!(!paths[0].exists() && !paths[1].exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
