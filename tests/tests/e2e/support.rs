//! Fixture commands and options with short timeouts, so every case ends quickly.

use std::time::{Duration, Instant};

use mcp_smol::{Client, Options, ServerCommand};

pub(crate) const FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-fixture");

/// How many tools the fixture offers in its `good` mode (see its module doc).
pub(crate) const FIXTURE_TOOLS: usize = 14;

/// The fixture server in `mode`, with extra arguments.
pub(crate) fn fixture(mode: &str, extra: &[&str]) -> ServerCommand {
    ServerCommand::new(FIXTURE)
        .arg(mode)
        .args(extra.iter().copied())
}

/// Short budgets: a misbehaving server costs a test about a second, not a minute.
pub(crate) fn quick() -> Options {
    let defaults = Options::default();
    Options {
        core: mcp_smol::proto::Config {
            handshake_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(3),
            ..defaults.core
        },
        grace_period: Duration::from_millis(300),
        term_period: Duration::from_millis(300),
        ..defaults
    }
}

/// Runs a test body on smol, failing it (rather than hanging the suite) if it outlives 60 s:
/// every case sets budgets of a few seconds, so only a lost wake-up can take that long.
pub(crate) fn bounded<T>(body: impl std::future::Future<Output = T>) -> T {
    use smol::future::FutureExt;
    let watchdog = async {
        smol::Timer::after(Duration::from_secs(60)).await;
        panic!("the test did not finish within 60 s: something waits forever");
    };
    smol::block_on(body.or(watchdog))
}

/// Starts a server with its driver on smol's executor, without waiting for the handshake.
pub(crate) fn start(command: &ServerCommand, options: Options) -> Client {
    let (client, driver) = mcp_smol::start(command, options).expect("spawn fixture");
    smol::spawn(driver).detach();
    client
}

/// Closes the client and checks that nothing of the server's process group is left.
pub(crate) async fn close_and_check(client: &Client) {
    client.close().await;
    assert_group_gone(client.pid());
}

/// After `close` returns, the group must already be empty; allow the kernel a moment to
/// finish tearing down processes that were SIGKILLed (they may linger as zombies of init).
pub(crate) fn assert_group_gone(pgid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while mcp_tests::group_alive(pgid) {
        assert!(
            Instant::now() < deadline,
            "process group {pgid} still has members after close"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The text of a one-text-item result.
pub(crate) fn text(result: &mcp_smol::proto::CallToolResult) -> String {
    match result.content.as_slice() {
        [mcp_smol::proto::Content::Text { text }] => text.clone(),
        other => panic!("expected one text item, got {other:?}"),
    }
}

pub(crate) fn echo_args(text: &str) -> serde_json::Value {
    serde_json::json!({ "text": text })
}

/// The `mcp-cli` binary, rebuilt once per test run so it is never stale.
pub(crate) fn cli_binary() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "mcp-client-cli",
                    "--bin",
                    "mcp-cli",
                ])
                .status()
                .expect("run cargo build");
            assert!(status.success(), "building mcp-cli failed");
            let me = std::env::current_exe().unwrap();
            me.parent().unwrap().parent().unwrap().join("mcp-cli")
        })
        .clone()
}

/// What one `mcp-cli` run printed and returned.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// A scratch folder for one test: config files, logs, data.
pub(crate) struct Scratch(pub(crate) std::path::PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mcp-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes a project file (`.mcp-cli.toml`, `.mcp.json`) into this folder and approves its
    /// servers as they now are, as the person whose project it is would with `mcp-cli approve
    /// --yes`: for tests whose subject is not the approval. A file that does not read
    /// approves nothing, and the runs after it report why.
    pub(crate) fn project_file(&self, name: &str, text: &str) -> std::path::PathBuf {
        let path = self.write(name, text);
        let _ = self.cli(&["approve", "--yes"]);
        path
    }

    /// Runs `mcp-cli` with this folder as its working directory and state home, and presets
    /// pointed at a prefix that does not exist (so no test reaches for npx by accident).
    pub(crate) fn cli(&self, args: &[&str]) -> Run {
        self.cli_with(args, &[], None)
    }

    /// `mcp-cli args` in this folder's isolated environment, not started yet: for tests that
    /// need the running process rather than only its output.
    pub(crate) fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(cli_binary());
        command
            .args(args)
            .current_dir(&self.0)
            .env("XDG_STATE_HOME", self.0.join("state"))
            .env("XDG_CONFIG_HOME", self.0.join("config-home"))
            // No search model but the one a test names: search ranks by words alone.
            .env("XDG_DATA_HOME", self.0.join("data-home"))
            .env_remove("MCP_CLI_SEARCH_MODEL")
            .env("MCP_CLI_NPM_PREFIX", self.0.join("no-npm"))
            // Logins go to a file in the scratch folder, never a developer's own keychain.
            .env("MCP_CLI_TOKEN_STORE", "file")
            .env_remove("MCP_CLI_CONFIG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    }

    pub(crate) fn cli_with(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
        use std::io::Write;
        let mut command = self.command(args);
        command.stdin(std::process::Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        let pid = child.id();
        // A hung CLI must fail the test, not hang the suite.
        let (done, finished) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let waited = finished.recv_timeout(Duration::from_secs(120));
            if waited == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        });
        let output = child.wait_with_output().unwrap();
        drop(done);
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// What a run on a pseudo-terminal printed and returned.
#[derive(Debug)]
pub(crate) struct TerminalRun {
    pub(crate) code: i32,
    /// stdout, when it was a pipe rather than the terminal.
    pub(crate) stdout: String,
    /// Everything the terminal showed.
    pub(crate) screen: String,
}

impl Scratch {
    /// Runs `mcp-cli args` with stdin and stderr (and stdout too, if `stdout_on_terminal`) on a
    /// new pseudo-terminal, as a person at a terminal would; types `reply.1` once the screen
    /// shows `reply.0`.
    pub(crate) fn on_terminal(
        &self,
        args: &[&str],
        stdout_on_terminal: bool,
        reply: Option<(&str, &str)>,
    ) -> TerminalRun {
        self.on_terminal_with(args, &[], stdout_on_terminal, reply)
    }

    /// [`on_terminal`](Self::on_terminal) with `env` added to the environment.
    pub(crate) fn on_terminal_with(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        stdout_on_terminal: bool,
        reply: Option<(&str, &str)>,
    ) -> TerminalRun {
        self.on_terminal_replying(args, env, stdout_on_terminal, reply.as_slice())
    }

    /// [`on_terminal_with`](Self::on_terminal_with) answering several questions in turn: types
    /// each `reply.1` once the screen shows its `reply.0` after the one before.
    pub(crate) fn on_terminal_replying(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        stdout_on_terminal: bool,
        replies: &[(&str, &str)],
    ) -> TerminalRun {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        use std::io::{Read, Write};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let terminal = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .unwrap();
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        command
            .stdin(terminal.try_clone().unwrap())
            .stderr(terminal.try_clone().unwrap());
        if stdout_on_terminal {
            command.stdout(terminal.try_clone().unwrap());
        }
        let child = command.spawn().unwrap();
        // The command holds copies of the terminal too: all must go for the end to show.
        drop(command);
        drop(terminal);
        let mut master = std::fs::File::from(master);
        let mut reader = master.try_clone().unwrap();
        let (shown_sender, shown) = std::sync::mpsc::channel::<Vec<u8>>();
        std::thread::spawn(move || {
            let mut buffer = [0; 4096];
            // Ends with an error (EIO) once every holder of the terminal is gone.
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                if shown_sender.send(buffer[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let mut screen = String::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let read_until = |screen: &mut String, wanted: Option<&str>| {
            while wanted.is_none_or(|wanted| !screen.contains(wanted)) {
                let left = deadline.saturating_duration_since(Instant::now());
                match shown.recv_timeout(left) {
                    Ok(bytes) => screen.push_str(&String::from_utf8_lossy(&bytes)),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) if wanted.is_none() => {
                        return;
                    }
                    Err(error) => panic!("{error}: waiting for {wanted:?} on {screen:?}"),
                }
            }
        };
        let mut seen = 0;
        for (prompt, answer) in replies {
            let mut rest = screen.split_off(seen);
            read_until(&mut rest, Some(prompt));
            let at = rest.find(prompt).unwrap_or(0) + prompt.len();
            screen.push_str(&rest);
            seen += at;
            master.write_all(answer.as_bytes()).unwrap();
        }
        let output = child.wait_with_output().unwrap();
        read_until(&mut screen, None);
        TerminalRun {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            screen,
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A native config naming the fixture in `mode` as server `name`.
pub(crate) fn fixture_block(name: &str, mode: &str) -> String {
    format!("[mcp.{name}]\ncommand = {FIXTURE:?}\nargs = [{mode:?}]\n")
}
