//! The server process: finding and spawning it in its own group, watching for its exit,
//! signalling that group, and reading its stderr.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::future::Future;
use std::io::{self, PipeReader, PipeWriter, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use async_io::{Async, Timer};

use crate::Error;
use crate::buffer::ReadBuffer;
use crate::pipe::PipeInput;
use crate::sandbox::{self, Sandbox, TempDir};

/// How to start a server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerCommand {
    /// A path, or a bare name looked up on `PATH` (the configured one if `env` sets it).
    pub program: String,
    /// Its arguments, passed as they are (no shell).
    pub args: Vec<String>,
    /// Merged over the inherited environment; these values win.
    pub env: BTreeMap<String, String>,
    /// The working directory; ours when `None`.
    pub cwd: Option<PathBuf>,
    /// Confines the server and everything it starts (Linux); `None` confines nothing.
    pub sandbox: Option<Sandbox>,
}

impl ServerCommand {
    /// Runs `program` with no arguments.
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable over the inherited ones.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The command line as a person would type it in a shell, for tables and messages: words
    /// that need it are quoted.
    pub fn display(&self) -> String {
        let words: Vec<String> = std::iter::once(&self.program)
            .chain(&self.args)
            .map(|word| shell_quoted(word))
            .collect();
        words.join(" ")
    }
}

/// `word` as a POSIX shell reads it back: as it is when that is safe, else in single quotes.
fn shell_quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A server just started: its process, and our ends of its stdio pipes.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) stdin: PipeWriter,
    pub(crate) stdout: PipeReader,
    pub(crate) stderr: Stderr,
}

/// Spawns the server with piped stdio as the leader of a new process group, so that the group
/// id is its pid and everything it starts can be signalled together.
pub(crate) fn spawn(command: &ServerCommand) -> Result<Spawned, Error> {
    let program = resolve_program(command)?;
    let spawn_error = |reason: String| Error::Spawn {
        program: command.program.clone(),
        reason,
    };
    let mut prepared = match &command.sandbox {
        Some(wanted) => Some(sandbox::prepare(wanted).map_err(spawn_error)?),
        None => None,
    };
    let (stderr, stderr_writer) =
        std::io::pipe().map_err(|e| spawn_error(format!("cannot make a stderr pipe: {e}")))?;
    let mut std_command = std::process::Command::new(&program);
    std_command.args(&command.args);
    if command.sandbox.as_ref().is_some_and(|s| s.isolate_network) {
        std_command.envs(sandbox::OFFLINE_SWITCHES.iter().copied());
    }
    // After the offline switches: what the config sets wins.
    std_command.envs(&command.env);
    if let Some(cwd) = &command.cwd {
        std_command.current_dir(cwd);
    }
    std::os::unix::process::CommandExt::process_group(&mut std_command, 0);
    if let Some(prepared) = &mut prepared {
        if let Some(temporary) = &prepared.temporary {
            std_command.env("TMPDIR", &temporary.0);
        }
        sandbox::enter_in_child(&mut std_command, prepared);
    }
    std_command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr_writer));
    let mut child = std_command.spawn().map_err(|error| {
        spawn_error(match &command.cwd {
            Some(cwd) if !cwd.is_dir() => format!("working directory {} not found", cwd.display()),
            _ if command.sandbox.is_some() => sandbox::refused(prepared.as_ref(), &program, &error),
            _ => error.to_string(),
        })
    })?;
    // Our copy of the pipe's write end went with the command: EOF comes when the group is gone.
    drop(std_command);
    let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
    let child = Child::watch(child);
    let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
        return Err(spawn_error("stdio pipes missing".to_owned()));
    };
    let temporary = prepared.and_then(|prepared| prepared.temporary);
    Ok(Spawned {
        child,
        stdin: PipeWriter::from(OwnedFd::from(stdin)),
        stdout: PipeReader::from(OwnedFd::from(stdout)),
        stderr: Stderr {
            pipe: stderr,
            _temporary: temporary,
        },
    })
}

/// How often a process is checked for its exit where the kernel offers no pidfd.
const EXIT_POLL: Duration = Duration::from_millis(50);

/// The server's process. Its exit is watched through a pidfd on the reactor, so no thread
/// waits for it and a poll costs no system call until it has exited. Dropped while it still
/// runs, it is killed and reaped on a thread of its own, leaving no zombie behind.
#[derive(Debug)]
pub(crate) struct Child {
    process: std::process::Child,
    /// Readable once the process has exited; `None` where the kernel has no pidfds, and then
    /// `poll` paces the checks.
    pidfd: Option<Async<OwnedFd>>,
    poll: Option<Timer>,
    /// Whether something may have changed since the last `try_wait`.
    check: bool,
    status: Option<ExitStatus>,
}

impl Child {
    fn watch(process: std::process::Child) -> Self {
        let pid = rustix::process::Pid::from_child(&process);
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            .ok()
            .and_then(|pidfd| Async::new(pidfd).ok());
        Self {
            process,
            pidfd,
            poll: None,
            check: true,
            status: None,
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.process.id()
    }

    /// Waits for the process to exit and reaps it; at once if it already has.
    pub(crate) async fn exit(&mut self) -> io::Result<ExitStatus> {
        std::future::poll_fn(|cx| self.poll_exit(cx)).await
    }

    fn poll_exit(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        loop {
            if let Some(status) = self.status {
                return Poll::Ready(Ok(status));
            }
            if self.check {
                self.check = false;
                self.status = self.process.try_wait()?;
                continue;
            }
            match &self.pidfd {
                Some(pidfd) => ready!(pidfd.poll_readable(cx))?,
                None => {
                    let timer = self.poll.get_or_insert_with(|| Timer::after(EXIT_POLL));
                    ready!(Pin::new(timer).poll(cx));
                    self.poll = None;
                }
            }
            self.check = true;
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let _ = self.process.kill();
        if !matches!(self.process.try_wait(), Ok(Some(_))) {
            // SIGKILL is not instant (a process stuck in the kernel takes it when it wakes):
            // the wait must not hold up whoever dropped us.
            let pid = rustix::process::Pid::from_child(&self.process);
            let reap = move || {
                let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            };
            let _ = std::thread::Builder::new()
                .name("mcp-reaper".to_owned())
                .spawn(reap);
        }
    }
}

/// The server's stderr, and what lives as long as its process group: the sandbox's
/// temporary folder.
#[derive(Debug)]
pub(crate) struct Stderr {
    pipe: PipeReader,
    _temporary: Option<TempDir>,
}

/// Finds a bare program name on `PATH` ourselves, so "not found" can name what was searched.
fn resolve_program(command: &ServerCommand) -> Result<PathBuf, Error> {
    if command.program.contains('/') {
        let path = PathBuf::from(&command.program);
        return match &command.cwd {
            Some(cwd) if path.is_relative() => Ok(cwd.join(path)),
            _ => Ok(path),
        };
    }
    let path: OsString = match command.env.get("PATH") {
        Some(path) => path.into(),
        None => std::env::var_os("PATH").unwrap_or_default(),
    };
    std::env::split_paths(&path)
        .map(|dir| dir.join(&command.program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| Error::NotFound {
            program: command.program.clone(),
            path: path.to_string_lossy().into_owned(),
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Sends `signal` to every process in the server's group. A group that is already empty is
/// not an error.
pub(crate) fn signal_group(pid: u32, signal: rustix::process::Signal) {
    let group = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(group) = group {
        let _ = rustix::process::kill_process_group(group, signal);
    }
}

/// The last lines the server wrote to stderr, for error messages.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: VecDeque<String>,
    partial: Vec<u8>,
}

impl StderrTail {
    const LINES: usize = 20;
    const LINE_BYTES: usize = 512;

    fn push(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            let room = Self::LINE_BYTES.saturating_sub(self.partial.len());
            let (content, ended) = match piece.strip_suffix(b"\n") {
                Some(content) => (content, true),
                None => (piece, false),
            };
            self.partial
                .extend_from_slice(&content[..content.len().min(room)]);
            if ended {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        let line = String::from_utf8_lossy(&self.partial).trim_end().to_owned();
        self.partial.clear();
        if line.is_empty() {
            return;
        }
        if self.lines.len() == Self::LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        let partial = String::from_utf8_lossy(&self.partial).trim_end().to_owned();
        let partial = (!partial.is_empty()).then_some(partial);
        self.lines.iter().cloned().chain(partial).collect()
    }
}

/// Where a server's stderr is copied, besides the tail kept for errors.
pub type StderrSink = Box<dyn Write + Send>;

/// The server's stderr, read on the reactor beside its stdout: each piece goes to the tail
/// kept for error messages and to the sink. The driver reads it on every turn and while it
/// waits for the server to exit, so the server never blocks on a full pipe while it runs.
pub(crate) struct StderrReader {
    /// `None` once at EOF: the last process holding the pipe is gone.
    pipe: Option<PipeInput>,
    tail: Arc<Mutex<StderrTail>>,
    sink: Option<StderrSink>,
    buffer: ReadBuffer,
    _temporary: Option<TempDir>,
}

impl StderrReader {
    pub(crate) fn new(
        stderr: Stderr,
        tail: Arc<Mutex<StderrTail>>,
        sink: Option<StderrSink>,
    ) -> io::Result<Self> {
        Ok(Self {
            pipe: Some(PipeInput::new(stderr.pipe)?),
            tail,
            sink,
            buffer: ReadBuffer::new(1024, 16 * 1024),
            _temporary: stderr._temporary,
        })
    }

    /// Whether EOF has come.
    pub(crate) fn is_closed(&self) -> bool {
        self.pipe.is_none()
    }

    /// Reads and passes on one piece; never finishes once the pipe is closed.
    pub(crate) async fn pump(&mut self) {
        let Some(pipe) = &mut self.pipe else {
            return std::future::pending().await;
        };
        let n = match pipe.read(&mut self.buffer).await {
            Ok(n @ 1..) => n,
            Ok(0) | Err(_) => {
                self.pipe = None;
                return;
            }
        };
        let bytes = &self.buffer[..n];
        if let Ok(mut tail) = self.tail.lock() {
            tail.push(bytes);
        }
        // A failing log sink must not stop the reading.
        if let Some(writer) = &mut self.sink
            && writer
                .write_all(bytes)
                .and_then(|()| writer.flush())
                .is_err()
        {
            self.sink = None;
        }
        self.buffer.grow_if_filled(n);
    }

    /// Reads until EOF.
    pub(crate) async fn drain(&mut self) {
        while !self.is_closed() {
            self.pump().await;
        }
    }

    /// Reads for as long as `future` runs, and returns its output.
    pub(crate) async fn beside<T>(&mut self, future: impl Future<Output = T>) -> T {
        use futures_lite::future::FutureExt;
        let reading = async {
            loop {
                self.pump().await;
            }
        };
        future.or(reading).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that exits with `code` once `release` is written to (so that the wait starts
    /// before the exit), watched through a pidfd or, as where the kernel has none, by timer.
    fn exit_seen(code: i32, with_pidfd: bool) -> Option<i32> {
        let mut process = std::process::Command::new("sh")
            .args(["-c", &format!("read line; exit {code}")])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut release = process.stdin.take().unwrap();
        let mut child = Child::watch(process);
        if !with_pidfd {
            child.pidfd = None;
        }
        async_io::block_on(async {
            let exit = child.exit();
            let release = async {
                release.write_all(b"go\n").unwrap();
                futures_lite::future::pending::<std::io::Result<ExitStatus>>().await
            };
            futures_lite::future::or(exit, release)
                .await
                .unwrap()
                .code()
        })
    }

    #[test]
    fn exits_are_seen_through_the_pidfd_and_without_one() {
        assert_eq!(exit_seen(3, true), Some(3));
        assert_eq!(exit_seen(4, false), Some(4));
    }

    #[test]
    fn a_child_dropped_while_running_is_killed_and_reaped() {
        let process = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap();
        let pid = process.id();
        drop(Child::watch(process));
        // Reaped, not left a zombie: its /proc entry goes (within seconds at the very most).
        let gone = (0..500).any(|_| {
            let exists = Path::new(&format!("/proc/{pid}")).exists();
            if exists {
                std::thread::sleep(Duration::from_millis(10));
            }
            !exists
        });
        assert!(gone, "process {pid} still there");
    }

    #[test]
    fn tail_keeps_the_last_lines_and_bounds_each() {
        let mut tail = StderrTail::default();
        for i in 0..30 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        tail.push(b"half");
        tail.push(b" done\r\n\nlast without newline");
        let lines = tail.lines();
        assert_eq!(lines.len(), 21);
        assert_eq!(lines[0], "line 11");
        assert_eq!(lines[19], "half done");
        assert_eq!(lines[20], "last without newline");

        let mut tail = StderrTail::default();
        tail.push(&[b'x'; 10_000]);
        tail.push(b"\n");
        assert_eq!(tail.lines()[0].len(), StderrTail::LINE_BYTES);
    }

    #[test]
    fn commands_display_as_a_shell_reads_them() {
        let command = ServerCommand::new("/opt/my server/run").args([
            "-y",
            "@scope/pkg@1.2",
            "it's",
            "",
            "a$b",
            "--x=1",
        ]);
        assert_eq!(
            command.display(),
            r"'/opt/my server/run' -y @scope/pkg@1.2 'it'\''s' '' 'a$b' --x=1"
        );
    }

    #[test]
    fn bare_names_are_looked_up_on_the_configured_path() {
        let command = ServerCommand::new("sh").env("PATH", "/nonexistent:/bin:/usr/bin");
        assert!(resolve_program(&command).unwrap().ends_with("sh"));

        let command = ServerCommand::new("no-such-server-xyz").env("PATH", "/nonexistent:/bin");
        let error = resolve_program(&command).unwrap_err();
        assert_eq!(
            error.to_string(),
            "cannot start no-such-server-xyz: not found on PATH (/nonexistent:/bin)"
        );
    }
}
