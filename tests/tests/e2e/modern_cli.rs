//! The modern (2026-07-28) peers through the `mcp-cli` binary, over stdio and over HTTP: every
//! command, an elicitation answered through `input_required`, the era shown and cached, the
//! gateway as their client, and a call cancelled by its timeout.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use mcp_tests::Peer;
use serde_json::{Value, json};

use crate::gateway::RawHost;
use crate::support::{Run, Scratch};

const REVISION: &str = "2026-07-28";

/// How long a peer may take to say something: a generous watchdog (Node and Python start cold
/// on a busy machine), so a peer that never does fails the test instead of hanging it.
const WATCHDOG: Duration = Duration::from_secs(60);

/// A peer serving HTTP, started by the test (the hub only connects to it); killed when dropped.
struct HttpPeer {
    child: Child,
    url: String,
    stderr: Receiver<String>,
}

impl HttpPeer {
    fn start(peer: &Peer) -> Self {
        let mut child = peer
            .command()
            .args(["--http", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("start {peer:?}: {error}"));
        let (urls, url) = channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = urls.send(line);
            }
        });
        let (lines, stderr) = channel();
        let reader = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let url = url
            .recv_timeout(WATCHDOG)
            .unwrap_or_else(|error| panic!("{peer:?} said no URL: {error}"));
        HttpPeer { child, url, stderr }
    }

    /// Waits until the peer has written a line containing `wanted` on stderr.
    fn stderr_says(&self, wanted: &str) {
        let mut seen = Vec::new();
        while !seen
            .last()
            .is_some_and(|line: &String| line.contains(wanted))
        {
            match self.stderr.recv_timeout(WATCHDOG) {
                Ok(line) => seen.push(line),
                Err(error) => panic!("{error} waiting for {wanted:?} on stderr: {seen:#?}"),
            }
        }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One peer configured as server `peer` in a scratch folder's `.mcp-cli.toml`.
struct Configured {
    scratch: Scratch,
    /// Over HTTP, the peer process; over stdio the hub starts it for each run.
    http: Option<HttpPeer>,
    /// Over stdio, every line the hub wrote to the peer, across runs.
    received: PathBuf,
}

impl Configured {
    /// Over stdio, the peer's command runs behind `tee`, which keeps what the hub sends.
    fn stdio(peer: &Peer, test: &str) -> Self {
        let scratch = Scratch::new(test);
        let received = scratch.0.join("received.log");
        let mut args = vec![
            "-c".to_owned(),
            r#"tee -a "$0" | exec "$@""#.to_owned(),
            received.display().to_string(),
            peer.program.display().to_string(),
        ];
        args.extend(
            peer.args
                .iter()
                .map(|arg| arg.to_string_lossy().into_owned()),
        );
        scratch.project_file(
            ".mcp-cli.toml",
            &format!("[mcp.peer]\ncommand = \"sh\"\nargs = {args:?}\ntimeout_sec = 60\n"),
        );
        Configured {
            scratch,
            http: None,
            received,
        }
    }

    fn http(peer: &Peer, test: &str) -> Self {
        let scratch = Scratch::new(test);
        let http = HttpPeer::start(peer);
        scratch.project_file(
            ".mcp-cli.toml",
            &format!("[mcp.peer]\nurl = {:?}\ntimeout_sec = 60\n", http.url),
        );
        let received = scratch.0.join("received.log");
        Configured {
            scratch,
            http: Some(http),
            received,
        }
    }

    /// `mcp-cli args`, which must succeed.
    fn ok(&self, args: &[&str]) -> Run {
        let run = self.scratch.cli(args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        run
    }

    /// How many times the hub has sent the peer `method` (stdio only).
    fn sent(&self, method: &str) -> usize {
        let log = std::fs::read_to_string(&self.received).unwrap_or_default();
        let lines = log
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap());
        lines.filter(|line| line["method"] == method).count()
    }

    /// Waits until the peer has written `wanted` on stderr (over stdio the hub keeps it in the
    /// server's log, read by `logs` until it shows, within the watchdog).
    fn stderr_says(&self, wanted: &str) {
        if let Some(http) = &self.http {
            return http.stderr_says(wanted);
        }
        let deadline = Instant::now() + WATCHDOG;
        loop {
            let logs = self.ok(&["logs", "peer"]);
            if logs.stdout.contains(wanted) {
                return;
            }
            assert!(Instant::now() < deadline, "no {wanted:?} in {logs:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The cached verdicts, as `eras.json` has them.
fn verdicts(scratch: &Scratch) -> Value {
    let path = scratch.0.join("state/mcp-cli/eras.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Every command against one peer: `name` is the name the peer gives itself.
fn through_every_command(served: &Configured, name: &str) {
    // The first run finds the era and caches the verdict.
    let run = served.ok(&["servers"]);
    let row = run.stdout.lines().find(|line| line.starts_with("peer "));
    let row = row.unwrap_or_else(|| panic!("{run:?}"));
    assert!(row.contains(REVISION), "{run:?}");
    let cached = verdicts(&served.scratch);
    let cached = cached.as_object().unwrap();
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(
        cached.values().all(|v| v["protocol"] == REVISION),
        "{cached:?}"
    );

    // A second run speaks the cached revision at once: over stdio the peer got one
    // `server/discover` per run (the stateless era's own), never a probe before it.
    let run = served.ok(&["--json", "servers"]);
    let rows: Value = serde_json::from_str(&run.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "peer");
    let row = row.unwrap_or_else(|| panic!("{rows:#}"));
    assert_eq!(row["protocol"], REVISION, "{row}");
    assert_eq!(row["era"], "stateless", "{row}");
    if served.http.is_none() {
        assert_eq!(served.sent("server/discover"), 2);
        assert_eq!(served.sent("initialize"), 0);
    }

    let run = served.ok(&["tools", "peer"]);
    for tool in ["peer__add", "peer__confirm", "peer__sleep"] {
        assert!(run.stdout.contains(tool), "{run:?}");
    }
    let run = served.ok(&["--json", "tools", "peer"]);
    let tools: Value = serde_json::from_str(&run.stdout).unwrap();
    let add = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["qualifiedName"] == "peer__add");
    let add = add.unwrap_or_else(|| panic!("{tools:#}"));
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]), "{add}");

    let run = served.ok(&["call", "peer", "add", "a=2", "b=3"]);
    assert_eq!(run.stdout.trim(), "5", "{run:?}");

    // The form comes through `input_required` and is answered on the terminal.
    let run = served.scratch.on_terminal(
        &["call", "peer", "confirm", "action=deploy"],
        false,
        Some(("Fill in the form? [Y/n]", "y\ntrue\n")),
    );
    assert_eq!(run.code, 0, "{}", run.screen);
    assert!(run.stdout.starts_with("confirmed deploy"), "{run:?}");

    let run = served.ok(&["resources", "peer"]);
    assert!(run.stdout.contains("peer://greeting"), "{run:?}");
    let run = served.ok(&["read", "peer", "peer://greeting"]);
    assert_eq!(run.stdout, format!("hello from {name}\n"));
    let run = served.ok(&["prompts", "peer"]);
    assert!(run.stdout.contains("greet"), "{run:?}");
    let run = served.ok(&["prompt", "peer", "greet", "name=Ada"]);
    assert_eq!(run.stdout, "user: Say hello to Ada.\n");
}

/// `serve` as a client of the peer: a host lists the peer's tools through it, calls one, and
/// cancels a call once it runs, which reaches the peer.
fn through_the_gateway(served: &Configured, name: &str) {
    let (mut serve, mut host) = RawHost::start_patient(&served.scratch, &["serve"], "{}");
    let names = host.tool_names(1);
    assert!(names.contains(&"peer__add".to_owned()), "{names:?}");
    let call = json!({"name": "peer__add", "arguments": {"a": 2, "b": 3}});
    let answer = host.request(2, "tools/call", call);
    assert_eq!(answer["result"]["content"][0]["text"], "5", "{answer}");

    let sleep = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "peer__sleep", "arguments": {"ms": 600_000}, "_meta": {"progressToken": "s"}}});
    host.send(&sleep.to_string());
    // The peer reports progress once it sleeps.
    while host.next()["method"] != "notifications/progress" {}
    host.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#);
    served.stderr_says(&format!("{name}: sleep cancelled"));
    let call = json!({"name": "peer__add", "arguments": {"a": 1, "b": 1}});
    let answer = host.request(4, "tools/call", call);
    assert_eq!(answer["result"]["content"][0]["text"], "2", "{answer}");
    drop(host);
    assert!(serve.wait().unwrap().success());
}

fn over_stdio(peer: Peer, name: &str) {
    let served = Configured::stdio(&peer, &format!("modern-cli-{name}"));
    through_every_command(&served, name);
    through_the_gateway(&served, name);
}

fn over_http(peer: Peer, name: &str) {
    let served = Configured::http(&peer, &format!("modern-cli-http-{name}"));
    through_every_command(&served, name);
    through_the_gateway(&served, name);
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_typescript_sdk_peer_over_stdio() {
    over_stdio(mcp_tests::ts_peer(), "ts-peer");
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_typescript_sdk_peer_over_http() {
    over_http(mcp_tests::ts_peer(), "ts-peer");
}

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn the_python_sdk_peer_over_stdio() {
    over_stdio(mcp_tests::mcpserver_peer(), "mcpserver-peer");
}

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn the_python_sdk_peer_over_http() {
    over_http(mcp_tests::mcpserver_peer(), "mcpserver-peer");
}

#[test]
fn the_rmcp_peer_over_stdio() {
    over_stdio(mcp_tests::rmcp_peer(), "rmcp-peer");
}

#[test]
fn the_rmcp_peer_over_http() {
    over_http(mcp_tests::rmcp_peer(), "rmcp-peer");
}
