//! `mcp-cli daemon`: warm runs print what cold runs print, servers stay warm, other users are
//! refused, and stop, SIGTERM, idle exit, a stale socket and a second start behave.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::{FIXTURE, Run, Scratch};

/// A scratch folder with its own runtime and state folders, and a daemon stopped on drop
/// (when the test fails, too).
struct Daemon {
    scratch: Scratch,
}

impl Daemon {
    /// The fixture (`fx`, with resources and prompts, calls time out after 1 s) and a server
    /// that fails its handshake (`broken`).
    fn new(name: &str) -> Self {
        let scratch = Scratch::new(&format!("daemon-{name}"));
        let config = format!(
            "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"resources\"]\ncall_timeout_sec = 1\n\n\
             [mcp.broken]\ncommand = {FIXTURE:?}\nargs = [\"exit-in-handshake\"]\n"
        );
        scratch.project_file(".mcp-cli.toml", &config);
        Self { scratch }
    }

    fn runtime(&self) -> PathBuf {
        self.scratch.0.join("run")
    }

    /// `mcp-cli args`, using the daemon when one runs.
    fn cli(&self, args: &[&str]) -> Run {
        let runtime = self.runtime();
        let runtime = runtime.to_str().unwrap();
        self.scratch
            .cli_with(args, &[("XDG_RUNTIME_DIR", runtime)], None)
    }

    /// `mcp-cli args` run cold, beside the daemon.
    fn cold(&self, args: &[&str]) -> Run {
        let runtime = self.runtime();
        let env = [
            ("XDG_RUNTIME_DIR", runtime.to_str().unwrap()),
            ("MCP_CLI_NO_DAEMON", "1"),
        ];
        self.scratch.cli_with(args, &env, None)
    }

    fn start(&self, extra: &[&str]) -> u32 {
        let mut args = vec!["daemon", "start"];
        args.extend(extra);
        let run = self.cli(&args);
        assert_eq!(run.code, 0, "{run:?}");
        self.status()["pid"].as_u64().unwrap() as u32
    }

    fn status(&self) -> serde_json::Value {
        let run = self.cli(&["--json", "daemon", "status"]);
        assert_eq!(run.code, 0, "{run:?}");
        serde_json::from_str(&run.stdout).unwrap()
    }

    fn socket(&self) -> PathBuf {
        let dir = self.runtime().join("mcp-cli");
        let mut sockets = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path());
        sockets
            .find(|path| path.extension().is_some_and(|ext| ext == "sock"))
            .unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.cli(&["daemon", "stop"]);
        // The daemon of the project file alone, which a test may start with `--config`.
        let config = self.scratch.0.join(".mcp-cli.toml");
        let _ = self.cli(&["--config", config.to_str().unwrap(), "daemon", "stop"]);
    }
}

/// Whether a process is gone (or only a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    mcp_tests::process_stat(pid).is_none_or(|stat| stat.state == 'Z')
}

/// Waits for a process to go, up to a generous deadline (it exits on its own).
fn wait_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !gone(pid) {
        assert!(Instant::now() < deadline, "process {pid} is still running");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Process ids differ between a cold and a warm run; everything else must not.
/// (Every run of three digits or more stands for one: tool counts and exit statuses are less.)
fn without_pids(text: &str) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    for c in text.chars().chain(['\n']) {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        out.push_str(if digits.len() >= 3 { "PID" } else { &digits });
        digits.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// A listing's age in the catalogue on disk (`servers`' LISTED column, `catalogue_age` in its
/// JSON) counts the whole seconds since a run listed the server, and the warm run of a case
/// comes after the cold one, which listed it: over a second after on a loaded machine. So
/// the age itself is left out; whether there is one is kept.
fn without_listing_ages(text: &str) -> String {
    let mut listed_column = None;
    let lines = text.lines().map(|line| {
        if line.starts_with("NAME ") {
            listed_column = line.find(" LISTED ").map(|at| at + 1);
            return line.to_owned();
        }
        let json_age = line.split_once("\"catalogue_age\": ");
        if let Some((key, age)) = json_age
            && age.starts_with(|c: char| c.is_ascii_digit())
        {
            let rest = age.trim_start_matches(|c: char| c.is_ascii_digit());
            return format!("{key}\"catalogue_age\": AGE{rest}");
        }
        let Some(column) = listed_column.filter(|&at| line.is_char_boundary(at)) else {
            return line.to_owned();
        };
        let (before, cell) = line.split_at(column);
        let rest = cell.trim_start_matches(|c: char| !c.is_whitespace());
        match &cell[..cell.len() - rest.len()] {
            "-" | "" => line.to_owned(),
            _ => format!("{before}AGE{rest}"),
        }
    });
    let mut out = lines.collect::<Vec<_>>().join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// What must read the same whether a command ran cold or warm. A table's columns are as wide
/// as their widest cell, and a server's pid in one run may have a digit more than in the other
/// (past 99999 on a busy machine: the flake issue 49 reported), so the spaces between cells
/// are compared as two.
fn comparable(text: &str) -> String {
    let text = without_listing_ages(&without_pids(text));
    let mut out = String::with_capacity(text.len());
    for piece in text.split_inclusive('\n') {
        let (line, end) = match piece.strip_suffix('\n') {
            Some(line) => (line, "\n"),
            None => (piece, ""),
        };
        let cells: Vec<&str> = line.split("  ").filter(|cell| !cell.is_empty()).collect();
        match cells.len() > 1 && !line.starts_with(' ') {
            true => out.push_str(
                &cells
                    .iter()
                    .map(|cell| cell.trim_start())
                    .collect::<Vec<_>>()
                    .join("  "),
            ),
            false => out.push_str(line),
        }
        out.push_str(end);
    }
    out
}

#[test]
fn table_columns_compare_whatever_their_widths() {
    let narrow = "NAME  PID   COMMAND\nfx    PID  run\n";
    let wide = "NAME  PID    COMMAND\nfx    PID  run\n";
    assert_eq!(comparable(narrow), comparable(wide));
    assert_ne!(comparable("fx  running"), comparable("fx  stopped"));
}

#[test]
fn only_listing_ages_are_left_out() {
    let table = "NAME    STATE    TOOLS  LISTED  PID\n\
                 broken  failed   -      -       -\n\
                 fx      running  14     12s     4242\n";
    assert_eq!(
        without_listing_ages(table),
        "NAME    STATE    TOOLS  LISTED  PID\n\
         broken  failed   -      -       -\n\
         fx      running  14     AGE     4242\n"
    );
    let json = "  \"catalogue_age\": 3,\n  \"catalogue_age\": null\n";
    let expected = "  \"catalogue_age\": AGE,\n  \"catalogue_age\": null\n";
    assert_eq!(without_listing_ages(json), expected);
    let timeout = "mcp-cli: fx__sleep: no response within 1s";
    assert_eq!(without_listing_ages(timeout), timeout);
}

#[test]
fn warm_runs_print_what_cold_runs_print() {
    let daemon = Daemon::new("same");
    daemon.start(&[]);
    let cases: &[(&[&str], i32)] = &[
        (&["call", "fx", "echo", "text=hi"], 0),
        (&["--json", "call", "fx", "add", "a=1", "b=2"], 0),
        (&["call", "fx", "fail"], 1),
        (&["call", "fx", "nope"], 2),
        (&["call", "fx", "echo", "nottext=1"], 2),
        (&["call", "broken", "echo"], 3),
        (&["call", "fx", "sleep", "ms=5000"], 4),
        (&["tools", "fx"], 0),
        (&["tools"], 3),
        (&["search", "echo", "the", "text"], 3),
        (&["--json", "search", "--limit", "2", "add"], 3),
        (&["servers"], 3),
        (&["--json", "servers"], 3),
        (&["resources", "fx"], 0),
        (&["read", "fx", "fixture://nowhere"], 2),
        (&["prompts", "fx"], 0),
        (&["prompt", "fx", "greet", "name=Ada"], 0),
        (&["prompt", "fx", "greet"], 2),
    ];
    for &(args, code) in cases {
        let cold = daemon.cold(args);
        let warm = daemon.cli(args);
        assert_eq!(warm.code, code, "{args:?}: {warm:?}");
        assert_eq!(warm.code, cold.code, "{args:?}");
        assert_eq!(
            comparable(&warm.stdout),
            comparable(&cold.stdout),
            "{args:?}"
        );
        assert_eq!(
            comparable(&warm.stderr),
            comparable(&cold.stderr),
            "{args:?}"
        );
    }
    // The resources fixture's first resource, read by URI, as a cold run reads it.
    let listed = daemon.cold(&["--json", "resources", "fx"]);
    let listed: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let uri = listed["resources"][0]["uri"].as_str().unwrap().to_owned();
    let cold = daemon.cold(&["read", "fx", &uri]);
    let warm = daemon.cli(&["read", "fx", &uri]);
    assert_eq!((warm.code, &warm.stdout), (0, &cold.stdout));
}

/// `--timeout` runs warm: it travels with the call, so the daemon's `fx` (whose own call
/// timeout is 1 s) serves it and stays as it was for the next run.
/// `call`'s output limit follows the caller's stdout through the daemon: 64 KiB by default on
/// a terminal, everything into a pipe, `--max-output` as given.
#[test]
fn a_warm_call_limits_its_output_as_a_cold_one_does() {
    let daemon = Daemon::new("large");
    daemon.start(&[]);
    let runtime = daemon.runtime();
    let env = [("XDG_RUNTIME_DIR", runtime.to_str().unwrap())];
    let args = ["call", "fx", "blob", "bytes=100000"];
    let shown = daemon.scratch.on_terminal_with(&args, &env, true, None);
    assert_eq!(shown.code, 0, "{}", shown.screen);
    let notice = "[output cut at 65536 of 100001 bytes; the whole result is in ";
    assert!(
        shown.screen.contains(notice),
        "no notice at the end of the screen"
    );
    let piped = daemon.cli(&args);
    assert_eq!(
        (piped.code, piped.stdout.len()),
        (0, 100_001),
        "{}",
        piped.stderr
    );
    let limited = daemon.cli(&["call", "fx", "blob", "bytes=100000", "--max-output", "10"]);
    assert!(
        limited
            .stdout
            .starts_with("xxxxxxxxxx\n[output cut at 10 of 100001 bytes")
    );
    // The daemon's server ran the calls: a cold run would have started one of its own.
    let servers = daemon.status()["servers"].clone();
    let fx = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fx")
        .cloned();
    assert_eq!(fx.unwrap()["state"], "running");
}

#[test]
fn a_run_with_its_own_timeout_is_served_warm() {
    let daemon = Daemon::new("timeout");
    daemon.start(&[]);
    let fx = |daemon: &Daemon| {
        let servers = daemon.status()["servers"].clone();
        let servers = servers.as_array().unwrap().clone();
        servers.into_iter().find(|s| s["name"] == "fx").unwrap()
    };
    assert_eq!(fx(&daemon)["state"], "stopped");
    let run = daemon.cli(&["--timeout", "0.3", "call", "fx", "sleep", "ms=5000"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("no response within 0.3"), "{run:?}");
    // The daemon's server ran the call: a cold run would have started one of its own.
    assert_eq!(fx(&daemon)["state"], "running");
    let run = daemon.cli(&["call", "fx", "sleep", "ms=5000"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("no response within 1"), "{run:?}");
}

#[test]
fn a_server_stays_warm_between_calls() {
    let daemon = Daemon::new("warm");
    daemon.start(&[]);
    assert_eq!(daemon.cli(&["call", "fx", "echo", "text=1"]).code, 0);
    let pid = |daemon: &Daemon| {
        let servers = &daemon.status()["servers"];
        let fx = servers
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "fx");
        fx.unwrap()["pid"].as_u64().unwrap()
    };
    let first = pid(&daemon);
    assert_eq!(daemon.cli(&["call", "fx", "echo", "text=2"]).stdout, "2\n");
    assert_eq!(pid(&daemon), first);
}

#[test]
fn another_user_cannot_connect() {
    let daemon = Daemon::new("uid");
    daemon.start(&[]);
    let socket = daemon.socket();
    // Reachable for the other user, so that only the daemon's own check stands in the way.
    let mode = |path: &PathBuf, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(&socket.parent().unwrap().to_path_buf(), 0o711);
    mode(&daemon.runtime(), 0o711);
    mode(&socket, 0o777);
    // Sends `initialize` and prints whatever comes back before the connection ends (a reset
    // when our line was left unread, a broken pipe when it was closed before we wrote).
    let script = "import socket,sys\n\
        s=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n\
        try:\n  s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\\n')\n  print(s.makefile().readline().strip() or 'closed')\n\
        except (BrokenPipeError, ConnectionResetError):\n  print('closed')\n";
    let connect = |as_other: bool| {
        let mut command = if as_other {
            let mut c = std::process::Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/usr/bin/python3",
            ]);
            c
        } else {
            std::process::Command::new("/usr/bin/python3")
        };
        let output = command
            .args(["-c", script, socket.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "the connecting script failed: {stderr}"
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    assert!(
        connect(false).contains("\"result\""),
        "our own user is served"
    );
    assert_eq!(connect(true), "closed", "another user is refused");
    mode(&socket.parent().unwrap().to_path_buf(), 0o700);
}

#[test]
fn stop_leaves_no_process_behind() {
    let daemon = Daemon::new("stop");
    let pid = daemon.start(&[]);
    assert_eq!(daemon.cli(&["servers"]).code, 3);
    let servers = daemon.status()["servers"].clone();
    let fx = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fx");
    let server = fx.unwrap()["pid"].as_u64().unwrap() as u32;
    let run = daemon.cli(&["daemon", "stop"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(gone(pid), "the daemon is gone once stop returns");
    assert!(
        !mcp_tests::group_alive(server),
        "the server's group is gone"
    );
    assert!(!daemon.socket_exists());
    // Later commands run cold, as before.
    assert_eq!(
        daemon.cli(&["call", "fx", "echo", "text=cold"]).stdout,
        "cold\n"
    );
}

#[test]
fn a_config_named_relatively_or_absolutely_reaches_one_daemon() {
    let daemon = Daemon::new("relative");
    let absolute = daemon.scratch.0.join(".mcp-cli.toml");
    let absolute = absolute.to_str().unwrap();
    let start = |config: &str| daemon.cli(&["--config", config, "daemon", "start"]);
    let started = start(".mcp-cli.toml");
    assert_eq!(started.code, 0, "{started:?}");
    let run = daemon.cli(&["--json", "--config", absolute, "daemon", "status"]);
    assert_eq!(run.code, 0, "{run:?}");
    let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let pid = status["pid"].as_u64().unwrap() as u32;
    let again = start(absolute);
    let running = format!("already running (pid {pid})");
    assert!(again.stdout.contains(&running), "{again:?}");
    for config in [".mcp-cli.toml", "./.mcp-cli.toml", absolute] {
        let run = daemon.cli(&["--json", "--config", config, "daemon", "status"]);
        assert_eq!(run.code, 0, "{config}: {run:?}");
        let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(status["pid"].as_u64(), Some(u64::from(pid)), "{config}");
    }
    let run = daemon.cli(&["--config", ".mcp-cli.toml", "daemon", "stop"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(gone(pid), "the relative name stopped the daemon");
}

#[test]
fn sigterm_takes_the_daemon_and_its_servers_down() {
    // A server that ignores its stdin closing and SIGTERM: only the daemon's termination
    // (SIGKILL to its group) takes it down.
    let daemon = Daemon::new("sigterm");
    let config = format!("[mcp.stubborn]\ncommand = {FIXTURE:?}\nargs = [\"ignore-sigterm\"]\n");
    daemon.scratch.project_file(".mcp-cli.toml", &config);
    let pid = daemon.start(&[]);
    let run = daemon.cli(&["call", "stubborn", "echo", "text=warm"]);
    assert_eq!(run.stdout, "warm\n", "{run:?}");
    let servers = daemon.status()["servers"].clone();
    let stubborn = (servers.as_array().unwrap().iter()).find(|s| s["name"] == "stubborn");
    let server = stubborn.unwrap()["pid"].as_u64().unwrap() as u32;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_gone(pid);
    assert!(
        !mcp_tests::group_alive(server),
        "the server's group is gone"
    );
    assert!(!daemon.socket_exists());
}

impl Daemon {
    fn socket_exists(&self) -> bool {
        let dir = self.runtime().join("mcp-cli");
        (std::fs::read_dir(dir).unwrap().flatten())
            .any(|e| e.path().extension().is_some_and(|ext| ext == "sock"))
    }
}

#[test]
fn an_idle_daemon_exits_and_stops_its_servers() {
    let daemon = Daemon::new("idle");
    let pid = daemon.start(&["--idle", "1"]);
    assert_eq!(daemon.cli(&["call", "fx", "echo", "text=1"]).code, 0);
    let servers = daemon.status()["servers"].clone();
    let fx = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fx");
    let server = fx.unwrap()["pid"].as_u64().unwrap() as u32;
    wait_gone(pid);
    assert!(
        !mcp_tests::group_alive(server),
        "the server's group is gone"
    );
    assert!(!daemon.socket_exists());
}

#[test]
fn a_stale_socket_is_replaced_and_a_second_start_is_refused_politely() {
    let daemon = Daemon::new("stale");
    let pid = daemon.start(&[]);
    let socket = daemon.socket();
    // A socket with nobody behind it, as a crash leaves it.
    let _ = daemon.cli(&["daemon", "stop"]);
    wait_gone(pid);
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    assert_eq!(daemon.cli(&["call", "fx", "echo", "text=cold"]).code, 0);
    let second = daemon.start(&[]);
    assert_ne!(second, pid);
    let again = daemon.cli(&["daemon", "start"]);
    assert_eq!(again.code, 0);
    assert!(again.stdout.contains("already running"), "{again:?}");
    assert!(again.stdout.contains(&second.to_string()), "{again:?}");
}

#[test]
fn status_and_stop_reach_the_daemon_while_a_config_file_is_broken() {
    let daemon = Daemon::new("broken-config");
    let pid = daemon.start(&[]);
    assert_eq!(daemon.cli(&["call", "fx", "echo", "text=1"]).code, 0);
    let servers = daemon.status()["servers"].clone();
    let fx = (servers.as_array().unwrap().iter()).find(|s| s["name"] == "fx");
    let server = fx.unwrap()["pid"].as_u64().unwrap() as u32;
    daemon
        .scratch
        .project_file(".mcp-cli.toml", "[mcp.fx\ncommand = ");
    let run = daemon.cli(&["daemon", "status"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(&pid.to_string()), "{run:?}");
    let run = daemon.cli(&["daemon", "stop"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("daemon stopped"), "{run:?}");
    assert!(gone(pid), "the daemon is gone once stop returns");
    assert!(
        !mcp_tests::group_alive(server),
        "the server's group is gone"
    );
    assert!(!daemon.socket_exists());
}

#[test]
fn status_says_when_and_why_runs_bypass_the_daemon() {
    let daemon = Daemon::new("cold-reason");
    daemon.start(&[]);
    assert!(daemon.status()["cold"].is_null());
    let run = daemon.cli(&["daemon", "status"]);
    assert!(!run.stdout.contains("bypasses"), "{run:?}");
    let config = std::fs::read_to_string(daemon.scratch.0.join(".mcp-cli.toml")).unwrap();
    let rule = "\n[[permissions.rules]]\ntool = \"fx__add\"\naction = \"deny\"\n";
    daemon
        .scratch
        .project_file(".mcp-cli.toml", &format!("{config}{rule}"));
    let run = daemon.cli(&["daemon", "status"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("every run bypasses the daemon: the policy changed"),
        "{run:?}"
    );
    assert!(run.stdout.contains("mcp-cli daemon stop"), "{run:?}");
    daemon
        .scratch
        .project_file(".mcp-cli.toml", "[mcp.fx\ncommand = ");
    let cold = daemon.status()["cold"].as_str().unwrap().to_owned();
    assert!(cold.starts_with("the config does not read"), "{cold}");
    // Once it reads again under the policy it started with, runs are warm again.
    daemon.scratch.project_file(".mcp-cli.toml", &config);
    assert!(daemon.status()["cold"].is_null());
}

/// `mcp-http-fixture MODE` with extra arguments, killed on drop.
struct HttpFixture {
    child: std::process::Child,
    port: u16,
}

impl HttpFixture {
    fn new(mode: &str, extra: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-http-fixture"))
            .arg(mode)
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
        Self { child, port }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_remote_server_restarted_is_joined_again_warm() {
    let daemon = Daemon::new("http-restart");
    let before = daemon.scratch.0.join("before.log");
    let after = daemon.scratch.0.join("after.log");
    let first = HttpFixture::new("session-400", &["--log", before.to_str().unwrap()]);
    let port = first.port.to_string();
    let config = format!("[mcp.remote]\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    daemon.scratch.project_file(".mcp-cli.toml", &config);
    let pid = daemon.start(&[]);
    let run = daemon.cli(&["call", "remote", "echo", "message=one"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "one\n"), "{run:?}");
    // The server restarts where it was, knowing no session: it answers the old one with 400.
    drop(first);
    let log = after.to_str().unwrap();
    let _again = HttpFixture::new("session-400", &["--port", &port, "--log", log]);
    let run = daemon.cli(&["call", "remote", "echo", "message=two"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "two\n"), "{run:?}");
    let run = daemon.cli(&["call", "remote", "echo", "message=three"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "three\n"), "{run:?}");
    assert_eq!(daemon.status()["pid"], pid);
    // The daemon's old session was refused once, then one new session served every call.
    let requests = std::fs::read_to_string(&after).unwrap();
    assert!(
        requests.starts_with("POST /mcp rpc=tools/call session=s1 "),
        "{requests}"
    );
    assert_eq!(requests.matches("rpc=initialize").count(), 1, "{requests}");
    assert_eq!(requests.matches("rpc=tools/call").count(), 3, "{requests}");
}

#[test]
fn a_remote_server_that_keeps_refusing_the_session_is_reported_not_retried_for_ever() {
    let daemon = Daemon::new("http-refusing");
    let log = daemon.scratch.0.join("requests.log");
    let server = HttpFixture::new("call-400", &["--log", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    daemon
        .scratch
        .project_file(".mcp-cli.toml", &format!("[mcp.remote]\nurl = \"{url}\"\n"));
    daemon.start(&[]);
    let run = daemon.cli(&["call", "remote", "echo", "message=one"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("HTTP 400 Bad Request")
            && run.stderr.contains("No valid session ID provided")
            && run.stderr.contains("in a new session too"),
        "{run:?}"
    );
    let requests = std::fs::read_to_string(&log).unwrap();
    assert_eq!(requests.matches("rpc=initialize").count(), 2, "{requests}");
    assert_eq!(requests.matches("rpc=tools/call").count(), 2, "{requests}");
    // The daemon is still there, and serves the server's other requests.
    let run = daemon.cli(&["tools", "remote"]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// The daemon's socket takes a bounded number of connections: one past the cap is closed at
/// once and said in its log, its command line runs cold and prints what it would, and once
/// the others close the daemon serves again.
#[test]
fn connections_past_the_cap_are_closed_and_their_runs_go_cold() {
    use std::io::Read;
    let daemon = Daemon::new("cap");
    daemon.start(&[]);
    let socket = daemon.socket();
    let held: Vec<_> = (0..256)
        .map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap())
        .collect();
    // Each held one is counted when accepted: the next is closed unanswered.
    let mut past = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    past.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut byte = [0; 1];
    assert_eq!(past.read(&mut byte).unwrap(), 0, "closed at once");
    let cold = daemon.cli(&["call", "fx", "echo", "text=hi"]);
    assert_eq!((cold.code, cold.stdout.as_str()), (0, "hi\n"), "{cold:?}");
    let logs = std::fs::read_dir(daemon.scratch.0.join("state/mcp-cli")).unwrap();
    let log: String = (logs.flatten())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("daemon-"))
        .map(|entry| std::fs::read_to_string(entry.path()).unwrap_or_default())
        .collect();
    assert!(
        log.contains("refused a connection: 256 are open already"),
        "{log}"
    );
    drop(held);
    // The daemon counts them closed as each session ends: then it answers again, this status
    // request being its one connection.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = daemon.cli(&["--json", "daemon", "status"]);
        let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
        if run.code == 0 && status["connections"] == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "never served again: {run:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
