//! The server process: finding and spawning it in its own group through `async-process`,
//! reading its stdout and stderr and watching its exit on the driver, and stopping it
//! (grace period, SIGTERM and SIGKILL to its group, reaped).

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::ffi::OsString;
use std::future::{Future, poll_fn};
use std::io::{self, PipeReader, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use async_channel::Receiver;
use async_io::Timer;
use async_process::{ChildStderr, ChildStdin};
use futures_lite::future::FutureExt;
use futures_lite::io::AsyncRead;
use rustix::process::Signal;

use crate::Error;
use crate::buffer::ReadBuffer;
use crate::pipe::PipeInput;
use crate::sandbox::{self, Sandbox, TempDir};
use crate::tree;
/// How to start a server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerCommand {
    /// A path, or a bare name looked up on `PATH` (the configured one if `env` sets it).
    pub program: String,
    /// Its arguments, passed as they are (no shell).
    pub args: Vec<String>,
    /// Merged over the inherited environment; these values win.
    pub env: BTreeMap<String, String>,
    /// Whether the server inherits our whole environment. `None` (the default): it does,
    /// unless it is sandboxed; then it gets only [`MINIMAL_ENVIRONMENT`] (and what `env` and
    /// [`env_pass`](Self::env_pass) add), so that our secrets do not reach it.
    pub inherit_env: Option<bool>,
    /// Without the whole environment: the names of more of our variables to pass on.
    pub env_pass: Vec<String>,
    /// The working directory; ours when `None`.
    pub cwd: Option<PathBuf>,
    /// Confines the server and everything it starts (Linux); `None` confines nothing.
    pub sandbox: Option<Sandbox>,
}

/// What a server that does not inherit our whole environment gets of it: the set the official
/// MCP SDKs pass to a stdio server by default (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`,
/// `USER`), and the locale and temporary folder programs look for.
pub const MINIMAL_ENVIRONMENT: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR",
];

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

    /// Whether the server inherits our whole environment (see
    /// [`inherit_env`](Self::inherit_env)).
    pub fn inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = Some(inherit);
        self
    }

    /// Whether the server gets our whole environment, or only the minimal one.
    fn inherits_env(&self) -> bool {
        self.inherit_env.unwrap_or(self.sandbox.is_none())
    }

    /// The variables of ours a server that does not inherit them all gets: the minimal set and
    /// those `env_pass` names, where we have them. As the SDKs, a value that is a shell
    /// function (`() {`) is left out.
    fn passed_env(&self) -> Vec<(OsString, OsString)> {
        let names = MINIMAL_ENVIRONMENT.iter().copied();
        let names = names.chain(self.env_pass.iter().map(String::as_str));
        let mut passed: Vec<(OsString, OsString)> = Vec::new();
        for name in names {
            let value = std::env::var_os(name).filter(|v| !v.as_encoded_bytes().starts_with(b"()"));
            if let Some(value) = value
                && !passed.iter().any(|(seen, _)| seen == name)
            {
                passed.push((name.into(), value));
            }
        }
        passed
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

/// How long close waits for a SIGKILLed server to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// After the server exits, how long its stdout and stderr may take to deliver what it wrote.
const EXIT_DRAIN: Duration = Duration::from_millis(250);

/// async-process's reaper, as [`async_process::driver`] hands it out.
type Reaper = Pin<Box<dyn Future<Output = Infallible> + Send>>;

/// The process's exit, as [`async_process::Child::status`] hands it out.
type Exit = Pin<Box<dyn Future<Output = io::Result<ExitStatus>> + Send>>;

/// A running server, the leader of its own process group. Its stdout and stderr are read, its
/// exit watched and async-process's reaper driven, all on the driver: no thread waits on it.
/// Dropped, it takes the whole group down.
pub(crate) struct ServerProcess {
    pid: u32,
    /// Read with our own reader, which asks the kernel only when something is likely there
    /// (see [`crate::pipe`]).
    stdout: PipeInput,
    /// Set once it has exited: until then stdout may still deliver what it wrote.
    drain: Option<Timer>,
    watch: Watch,
    /// `None` only while dropping, so that it goes before the reaper's last turn.
    child: Option<async_process::Child>,
    /// Marks the processes the server starts, so that they stop with it.
    tree: tree::Mark,
    /// Set once [`stop`](Self::stop) has killed the tree: nothing of it is left to start
    /// anything, so the drop need not search `/proc` for it again (a read of every process's
    /// `stat`, a millisecond of a one-shot run's close).
    tree_killed: bool,
    /// The sandbox's temporary folder lives as long as the group.
    _temporary: Option<TempDir>,
    /// The proxy's listener inside the server's namespace, until the host takes it.
    pub(crate) proxy_listener: Option<std::net::TcpListener>,
}

/// What is watched beside whatever the driver waits for.
struct Watch {
    stderr: StderrReader,
    /// Resolves (and reaps) once the process has exited; `None` from then on.
    exit: Option<Gated<Exit>>,
    status: Option<ExitStatus>,
    /// While some reaper is driven, async-process starts no thread of its own; and where the
    /// kernel has no pidfds, the reaper is what sees exits.
    reaper: Gated<Reaper>,
}

/// Spawns the server with piped stdio as the leader of a new process group, so that the group
/// id is its pid and everything it starts can be signalled together. Returns it and its
/// stdin; what it writes to stderr goes to `tail` and `sink`.
pub(crate) fn spawn(
    command: &ServerCommand,
    tail: Arc<Mutex<StderrTail>>,
    sink: Option<StderrSink>,
) -> Result<(ServerProcess, ChildStdin), Error> {
    let mut program = resolve_program(command)?;
    if command.sandbox.is_some() {
        program = real_folder(program);
    }
    let spawn_error = |reason: String| Error::Spawn {
        program: command.program.clone(),
        reason,
    };
    let mut prepared = match &command.sandbox {
        Some(wanted) => {
            Some(sandbox::prepare(wanted, command.cwd.as_deref()).map_err(spawn_error)?)
        }
        None => None,
    };
    let mut std_command = std::process::Command::new(&program);
    std_command.args(&command.args);
    if !command.inherits_env() {
        std_command.env_clear().envs(command.passed_env());
    }
    std_command.envs(&command.env);
    let tree = tree::Mark::new();
    std_command.env(tree::VARIABLE, tree.value());
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
    let mut async_command = async_process::Command::from(std_command);
    async_command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Driven once before the spawn: a process registered while no reaper is driven would
    // start async-process's own thread.
    let mut reaper = Gated::new(Box::pin(async_process::driver()) as Reaper);
    let _ = reaper.poll_with(&mut Context::from_waker(Waker::noop()), |reaper, cx| {
        reaper.as_mut().poll(cx)
    });
    let mut child = async_command.spawn().map_err(|error| {
        spawn_error(match &command.cwd {
            Some(cwd) if !cwd.is_dir() => format!("working directory {} not found", cwd.display()),
            _ if command.sandbox.is_some() => sandbox::refused(prepared.as_ref(), &program, &error),
            _ => error.to_string(),
        })
    })?;
    // Dropped on an error, the child is killed and reaped.
    let proxy_listener = sandbox::proxy_listener(prepared.as_ref()).map_err(spawn_error)?;
    // Stdout is read by our own reader, over the pipe async-process made (see `crate::pipe`).
    let stdout = child.stdout.take().map(|pipe| {
        let pipe = PipeReader::from(OwnedFd::try_from(pipe)?);
        PipeInput::new(pipe)
    });
    let stdout = (stdout.transpose())
        .map_err(|error| spawn_error(format!("cannot watch its stdout: {error}")))?;
    let pipes = (child.stdin.take(), stdout, child.stderr.take());
    let exit = Gated::new(Box::pin(child.status()) as Exit);
    let process = |stdout, stderr| ServerProcess {
        pid: child.id(),
        stdout,
        drain: None,
        watch: Watch {
            stderr: StderrReader {
                pipe: Some(Gated::new(stderr)),
                tail,
                sink,
                buffer: ReadBuffer::new(1024, 16 * 1024),
            },
            exit: Some(exit),
            status: None,
            reaper,
        },
        tree: tree.led_by(child.id()),
        tree_killed: false,
        child: Some(child),
        _temporary: prepared.and_then(|prepared| prepared.temporary),
        proxy_listener,
    };
    match pipes {
        (Some(stdin), Some(stdout), Some(stderr)) => Ok((process(stdout, stderr), stdin)),
        // Not expected: all three were asked for. Dropped, the process is killed and reaped.
        _ => {
            drop(process);
            Err(spawn_error("stdio pipes missing".to_owned()))
        }
    }
}

/// What ended a wait beside the process.
enum Step<T> {
    Done(T),
    Stderr,
    Exited,
}

impl ServerProcess {
    /// Its process id, which is also its group's.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// We just wrote to the server, which may have answered already: the next read tries
    /// its stdout before asking the reactor.
    pub(crate) fn expect(&mut self) {
        self.stdout.expect();
    }

    /// Reads the server's stdout; `Ok(0)` at its end. Meanwhile stderr is passed on and the
    /// exit watched: once the server has exited, what it left in its group gets SIGTERM (it
    /// must not hold stdout open), and stdout has [`EXIT_DRAIN`] to deliver the rest before
    /// it reads as ended.
    pub(crate) async fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        loop {
            let (stdout, drain) = (&mut self.stdout, &mut self.drain);
            let read = poll_fn(|cx| {
                if let Some(drain) = drain
                    && Pin::new(drain).poll(cx).is_ready()
                {
                    return Poll::Ready(Ok(0));
                }
                stdout.poll_read(cx, buffer)
            });
            match self.watch.beside(read).await {
                Step::Done(read) => return read,
                Step::Stderr => {}
                Step::Exited => {
                    signal_group(self.pid, Signal::TERM);
                    self.drain = Some(Timer::after(EXIT_DRAIN));
                }
            }
        }
    }

    /// How the server ended, once the connection has closed: one that closed its stdout
    /// (`closed_stdout`) gets [`EXIT_DRAIN`] to exit; once it has, its last words on stderr
    /// are read before anyone quotes them.
    pub(crate) async fn settle(&mut self, closed_stdout: bool) -> Option<ExitStatus> {
        if closed_stdout {
            self.watch.exited_within(EXIT_DRAIN).await;
        }
        if self.watch.exit.is_none() {
            self.watch.stderr.drained().await;
        }
        self.watch.status
    }

    /// Stops the server, whose stdin is closed: the grace period (cut short by a message on
    /// `terminated`), SIGTERM to the group, the term period, SIGKILL to the group, reaped.
    /// Then what it left in the group is killed and the rest of stderr read.
    pub(crate) async fn stop(
        &mut self,
        grace: Duration,
        term: Duration,
        terminated: &Receiver<()>,
    ) {
        let exited = self.watch.exit.is_none()
            || (!terminated.is_full() && {
                let cut_short = async {
                    let _ = terminated.recv().await;
                    false
                };
                self.watch.exited_within(grace).or(cut_short).await
            });
        if !exited {
            signal_group(self.pid, Signal::TERM);
            if !self.watch.exited_within(term).await {
                signal_group(self.pid, Signal::KILL);
                // SIGKILL cannot be ignored, but a process stuck in the kernel (a dead network
                // mount) takes it only when it wakes: close must not wait for that. It is
                // reaped once it does, by async-process.
                self.watch.exited_within(KILL_WAIT).await;
            }
        }
        // The leader is gone; whatever it started and left behind goes too, in its group or
        // out of it.
        signal_group(self.pid, Signal::KILL);
        self.tree.kill_tree(self.pid);
        self.tree_killed = true;
        // So stderr ends now: the sink gets the server's last lines before close returns.
        self.watch.stderr.drained().await;
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        signal_group(self.pid, Signal::KILL);
        if !self.tree_killed {
            self.tree.kill_tree(self.pid);
        }
        // The child goes first (a running one is killed and handed to the reaper), then one
        // more turn of the reaper reaps what has exited. One it could not reap yet makes
        // async-process start its thread when the reaper is dropped.
        self.watch.exit = None;
        self.child = None;
        let _ = (self.watch.reaper).poll_with(&mut Context::from_waker(Waker::noop()), |r, cx| {
            r.as_mut().poll(cx)
        });
    }
}

impl Watch {
    /// Runs `future` while stderr is passed on, the exit watched and the reaper driven; ends
    /// with whichever of them comes first.
    async fn beside<T>(&mut self, future: impl Future<Output = T>) -> Step<T> {
        let Watch {
            stderr,
            exit,
            status,
            reaper,
        } = self;
        let done = async { Step::Done(future.await) };
        let stderr = async {
            stderr.pump().await;
            Step::Stderr
        };
        let exited = async {
            let Some(watched) = exit else {
                return std::future::pending().await;
            };
            let result = poll_fn(|cx| watched.poll_with(cx, |exit, cx| exit.as_mut().poll(cx)));
            *status = result.await.ok();
            *exit = None;
            Step::Exited
        };
        let reaper = async {
            match poll_fn(|cx| reaper.poll_with(cx, |reaper, cx| reaper.as_mut().poll(cx))).await {}
        };
        // Fairly between stdout and stderr: a server busy on one must not starve the other.
        done.race(stderr).or(exited).or(reaper).await
    }

    /// Waits up to `within` for the exit; whether it has come.
    async fn exited_within(&mut self, within: Duration) -> bool {
        let mut timer = Timer::after(within);
        while self.exit.is_some() {
            if let Step::Done(_) = self.beside(&mut timer).await {
                break;
            }
        }
        self.exit.is_none()
    }
}

/// Polls what it holds only after that asked to be woken and was. async-process asks the
/// kernel on every poll (`waitid` for an exit, `read` on a pipe), and the driver's wait is
/// polled again on a wake-up of any of its parts: each would cost a system call per turn.
struct Gated<T> {
    inner: T,
    gate: Arc<Gate>,
    /// The gate as a waker, made once.
    waker: Waker,
}

struct Gate {
    woken: AtomicBool,
    /// Who polled last, to be woken in turn.
    outer: Mutex<Option<Waker>>,
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        let outer = self.outer.lock().ok().and_then(|mut outer| outer.take());
        if let Some(outer) = outer {
            outer.wake();
        }
    }
}

impl<T> Gated<T> {
    fn new(inner: T) -> Self {
        let gate = Arc::new(Gate {
            // Polled at least once, so that it can register.
            woken: AtomicBool::new(true),
            outer: Mutex::new(None),
        });
        let waker = Waker::from(gate.clone());
        Self { inner, gate, waker }
    }

    /// Polls with `poll` if woken since it last returned pending; else pending at once.
    fn poll_with<R>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut T, &mut Context<'_>) -> Poll<R>,
    ) -> Poll<R> {
        if let Ok(mut outer) = self.gate.outer.lock()
            && !outer.as_ref().is_some_and(|o| o.will_wake(cx.waker()))
        {
            *outer = Some(cx.waker().clone());
        }
        if !self.gate.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let result = poll(&mut self.inner, &mut Context::from_waker(&self.waker));
        if result.is_ready() {
            // Whatever was ready may be again.
            self.gate.woken.store(true, Ordering::Release);
        }
        result
    }
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

/// `program` with its folder's `..` and links resolved but not its own link (a venv's
/// `python` finds its environment from where it is named): in a sandbox the folders such a
/// path passes through may be covered, the real ones are kept.
fn real_folder(program: PathBuf) -> PathBuf {
    let real = (program.parent())
        .and_then(|folder| std::fs::canonicalize(folder).ok())
        .zip(program.file_name())
        .map(|(folder, name)| folder.join(name));
    real.unwrap_or(program)
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

/// The last lines the server wrote to stderr, for error messages; and where the lines that
/// are news begin (see [`mark`](Self::mark)).
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: VecDeque<String>,
    partial: Vec<u8>,
    /// How many lines have ended since the start, those dropped from `lines` too.
    ended: u64,
    /// The count of `ended` at the last [`mark`](Self::mark).
    marked: u64,
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
        self.ended += 1;
    }

    /// Every line kept, old or new.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines_from(0)
    }

    /// The lines are news from here on: those before it were written while requests that have
    /// been answered ran (or before them), so they do not explain what fails next. A line
    /// under way is news.
    pub(crate) fn mark(&mut self) {
        self.marked = self.ended;
    }

    /// The lines kept that were written since the last [`mark`](Self::mark): what a failure
    /// is reported with.
    pub(crate) fn recent(&self) -> Vec<String> {
        let first_kept = self.ended - self.lines.len() as u64;
        let old = usize::try_from(self.marked.saturating_sub(first_kept)).unwrap_or(usize::MAX);
        self.lines_from(old)
    }

    fn lines_from(&self, skip: usize) -> Vec<String> {
        let partial = String::from_utf8_lossy(&self.partial).trim_end().to_owned();
        let partial = (!partial.is_empty()).then_some(partial);
        (self.lines.iter().skip(skip).cloned())
            .chain(partial)
            .collect()
    }
}

/// Where a server's stderr is copied, besides the tail kept for errors.
pub type StderrSink = Box<dyn Write + Send>;

/// The server's stderr, read on the reactor beside its stdout: each piece goes to the tail
/// kept for error messages and to the sink. It is read whenever the driver waits, and while
/// it waits for the server to exit, so the server never blocks on a full pipe.
struct StderrReader {
    /// `None` once at EOF: the last process holding the pipe is gone.
    pipe: Option<Gated<ChildStderr>>,
    tail: Arc<Mutex<StderrTail>>,
    sink: Option<StderrSink>,
    buffer: ReadBuffer,
}

impl StderrReader {
    /// Reads and passes on one piece; never finishes once the pipe is closed.
    async fn pump(&mut self) {
        let Some(pipe) = &mut self.pipe else {
            return std::future::pending().await;
        };
        let buffer = &mut self.buffer;
        let read =
            poll_fn(|cx| pipe.poll_with(cx, |pipe, cx| Pin::new(pipe).poll_read(cx, buffer)));
        let n = match read.await {
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

    /// Reads until EOF, or [`EXIT_DRAIN`] at most (a process that left the group may hold
    /// the pipe open).
    async fn drained(&mut self) {
        let all = async {
            while self.pipe.is_some() {
                self.pump().await;
            }
        };
        all.or(async {
            Timer::after(EXIT_DRAIN).await;
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(command: ServerCommand) -> (ServerProcess, ChildStdin, Arc<Mutex<StderrTail>>) {
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let (process, stdin) = spawn(&command, tail.clone(), None).unwrap();
        (process, stdin, tail)
    }

    #[test]
    fn stdout_then_the_exit_status_and_the_last_stderr_lines() {
        let script = "read line; echo \"out $line\"; echo oops >&2; exit 3";
        let (mut process, stdin, tail) = started(ServerCommand::new("sh").args(["-c", script]));
        async_io::block_on(async {
            let mut stdin = stdin;
            futures_lite::io::AsyncWriteExt::write_all(&mut stdin, b"hi\n")
                .await
                .unwrap();
            let mut out = Vec::new();
            let mut buffer = [0; 64];
            loop {
                let n = process.read(&mut buffer).await.unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buffer[..n]);
            }
            assert_eq!(out, b"out hi\n");
            let status = process.settle(true).await;
            assert_eq!(status.and_then(|s| s.code()), Some(3));
        });
        assert_eq!(tail.lock().unwrap().lines(), ["oops"]);
    }

    #[test]
    fn stop_takes_down_a_server_that_ignores_its_stdin_closing() {
        let script = "trap '' TERM; sleep 600 & wait";
        let (mut process, stdin, _) = started(ServerCommand::new("sh").args(["-c", script]));
        let pid = process.pid();
        drop(stdin);
        let (_, never) = async_channel::bounded(1);
        let short = Duration::from_millis(50);
        async_io::block_on(process.stop(short, short, &never));
        // Reaped: no zombie is left under our pid.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn a_server_dropped_while_running_is_killed_and_reaped() {
        let (process, _stdin, _) = started(ServerCommand::new("sleep").arg("600"));
        let pid = process.pid();
        drop(process);
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
    fn recent_lines_are_those_since_the_mark() {
        let mut tail = StderrTail::default();
        tail.push(b"warning: unrelated, early\n");
        assert_eq!(tail.recent(), ["warning: unrelated, early"]);
        tail.push(b"half of a line");
        tail.mark();
        assert_eq!(tail.recent(), ["half of a line"]);
        tail.push(b", ended later\ncrashing now\n");
        assert_eq!(
            tail.recent(),
            ["half of a line, ended later", "crashing now"]
        );
        assert_eq!(tail.lines().len(), 3, "the whole tail is still kept");
        tail.mark();
        assert!(tail.recent().is_empty());
        // The mark holds however many lines come after it and push older ones out.
        for i in 0..30 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        assert_eq!(tail.recent().len(), StderrTail::LINES);
        assert_eq!(tail.recent()[0], "line 10");
    }

    #[test]
    fn a_server_without_our_environment_gets_the_minimal_set_its_env_and_env_pass() {
        let mut command = ServerCommand::new("sh")
            .args(["-c", "env; echo END; read line"])
            .env("GIVEN", "1")
            .inherit_env(false);
        // Ours while the tests run, and in no minimal set.
        command.env_pass = vec!["CARGO_MANIFEST_DIR".to_owned()];
        let (mut process, _stdin, _) = started(command);
        let mut out = Vec::new();
        let mut buffer = [0; 4096];
        async_io::block_on(async {
            while !out.ends_with(b"END\n") {
                let n = process.read(&mut buffer).await.unwrap();
                assert_ne!(n, 0, "{}", String::from_utf8_lossy(&out));
                out.extend_from_slice(&buffer[..n]);
            }
        });
        let text = String::from_utf8(out).unwrap();
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, _)| k)
            .collect();
        let allowed = |name: &str| {
            MINIMAL_ENVIRONMENT.contains(&name)
                || [
                    "GIVEN",
                    "CARGO_MANIFEST_DIR",
                    tree::VARIABLE,
                    "PWD",
                    "SHLVL",
                    "_",
                ]
                .contains(&name)
        };
        assert!(names.iter().all(|name| allowed(name)), "{names:?}");
        for wanted in ["PATH", "GIVEN", "CARGO_MANIFEST_DIR", tree::VARIABLE] {
            assert!(names.contains(&wanted), "{wanted}: {names:?}");
        }
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
