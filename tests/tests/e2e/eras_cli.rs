//! The fixtures' stateless-era misbehaviours through the `mcp-cli` binary: each ends in the
//! right fallback or a clear error with the documented exit code, never a hang or a loop.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use mcp_smol::proto::LATEST_PROTOCOL_VERSION;
use serde_json::Value;

use crate::support::{FIXTURE, Run, Scratch};

const HTTP_FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-http-fixture");

/// A scratch folder whose config names the stdio fixture in `mode` as server `fx`, logging
/// every line it receives (across runs) to `received.log`.
fn stdio_fixture(test: &str, mode: &str, extra: &str) -> (Scratch, PathBuf) {
    let scratch = Scratch::new(test);
    let log = scratch.0.join("received.log");
    scratch.project_file(
        ".mcp-cli.toml",
        &format!(
            "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [{mode:?}, \"--log-received\", {log:?}]\n{extra}"
        ),
    );
    (scratch, log)
}

/// How many lines of the log name `method` (the stdio fixture's JSON lines, or the HTTP
/// fixture's `rpc=METHOD` lines).
fn count(log: &PathBuf, method: &str) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let stdio = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["method"] == method)
        .count();
    let http = format!("rpc={method} ");
    stdio + text.lines().filter(|line| line.contains(&http)).count()
}

fn ok(scratch: &Scratch, args: &[&str]) -> Run {
    let run = scratch.cli(args);
    assert_eq!(run.code, 0, "{args:?}: {run:?}");
    run
}

/// The PROTOCOL and era `servers --json` shows for `fx`.
fn era(scratch: &Scratch) -> (Value, Value) {
    let run = ok(scratch, &["--json", "servers"]);
    let rows: Value = serde_json::from_str(&run.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "fx");
    let row = row.unwrap_or_else(|| panic!("{rows:#}"));
    (row["protocol"].clone(), row["era"].clone())
}

#[test]
fn a_server_that_exits_on_the_probe_works_and_is_not_probed_again() {
    let (scratch, log) = stdio_fixture("eras-cli-exit", "exit-on-discover", "");
    let run = ok(&scratch, &["call", "fx", "echo", "text=first"]);
    assert_eq!(run.stdout, "first\n");
    assert_eq!(count(&log, "server/discover"), 1);
    let run = ok(&scratch, &["call", "fx", "echo", "text=second"]);
    assert_eq!(run.stdout, "second\n");
    assert_eq!(count(&log, "server/discover"), 1, "the verdict was cached");
    assert_eq!(count(&log, "initialize"), 2);
    let (protocol, era) = era(&scratch);
    assert_eq!(
        (protocol.as_str(), era.as_str()),
        (Some("2025-11-25"), Some("handshake"))
    );
    let ended = format!(
        "mcp-cli: the handshake era ({LATEST_PROTOCOL_VERSION}): the server ended on the \
         `server/discover` probe"
    );
    assert_eq!(era_choices(&scratch), [ended]);
}

/// The lines of `mcp-cli logs fx` that say which era the probe chose and why.
fn era_choices(scratch: &Scratch) -> Vec<String> {
    let run = ok(scratch, &["logs", "fx"]);
    let chosen = |line: &&str| line.starts_with("mcp-cli: ") && line.contains("era (");
    run.stdout
        .lines()
        .filter(chosen)
        .map(str::to_owned)
        .collect()
}

/// The probe waits out the server's start budget (`timeout_sec`), then the handshake begins;
/// the verdict is cached, so the next run waits for nothing.
#[test]
fn a_server_silent_on_the_probe_works_after_the_probe_timeout() {
    let (scratch, log) =
        stdio_fixture("eras-cli-silent", "silent-on-discover", "timeout_sec = 1\n");
    let run = ok(&scratch, &["call", "fx", "echo", "text=late"]);
    assert_eq!(run.stdout, "late\n");
    assert_eq!(count(&log, "initialize"), 1);
    let handshake = format!("mcp-cli: the handshake era ({LATEST_PROTOCOL_VERSION}): ");
    let why = "the server did not answer `server/discover` within 1s";
    assert_eq!(era_choices(&scratch), [format!("{handshake}{why}")]);
    let run = ok(&scratch, &["call", "fx", "echo", "text=soon"]);
    assert_eq!(run.stdout, "soon\n");
    assert_eq!(count(&log, "server/discover"), 1, "the verdict was cached");
    // The cached verdict was not chosen by a probe: nothing more to say.
    assert_eq!(era_choices(&scratch).len(), 1);
}

#[test]
fn a_server_refusing_the_probe_is_logged_with_the_refusal() {
    let (scratch, log) = stdio_fixture("eras-cli-refused", "good", "");
    let run = ok(&scratch, &["call", "fx", "echo", "text=hi"]);
    assert_eq!(run.stdout, "hi\n");
    assert_eq!(count(&log, "server/discover"), 1);
    let choices = era_choices(&scratch);
    let handshake = format!("mcp-cli: the handshake era ({LATEST_PROTOCOL_VERSION}): ");
    let why = "the server refused `server/discover`: ";
    assert_eq!(choices.len(), 1, "{choices:?}");
    assert!(
        choices[0].starts_with(&format!("{handshake}{why}")),
        "{choices:?}"
    );
    assert!(choices[0].contains("server/discover"), "{choices:?}");
}

#[test]
fn a_server_that_claims_the_stateless_era_and_is_not_is_spoken_to_in_the_handshake_era() {
    let (scratch, log) = stdio_fixture("eras-cli-claims", "claims-stateless", "");
    let run = ok(&scratch, &["call", "fx", "echo", "text=x"]);
    assert_eq!(run.stdout.trim(), "x", "{run:?}");
    // Probed once; its first listing asked for `initialize`, so the handshake followed.
    assert_eq!(count(&log, "server/discover"), 1, "{log:?}");
    assert_eq!(count(&log, "initialize"), 1, "{log:?}");
    let logs = ok(&scratch, &["logs", "fx"]);
    assert!(
        logs.stdout
            .contains("claimed revision 2026-07-28 in `server/discover`"),
        "{logs:?}"
    );
    // The verdict kept is the handshake era's: the next run does not probe.
    ok(&scratch, &["call", "fx", "echo", "text=y"]);
    assert_eq!(count(&log, "server/discover"), 1, "{log:?}");
}

#[test]
fn a_server_configured_stateless_that_asks_for_initialize_fails_saying_so() {
    let protocol = "protocol = \"2026-07-28\"\n";
    let (scratch, log) = stdio_fixture("eras-cli-claims-fixed", "claims-stateless", protocol);
    let run = scratch.cli(&["call", "fx", "echo", "text=x"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("2026-07-28"), "{run:?}");
    assert!(run.stderr.contains("before `initialize`"), "{run:?}");
    assert_eq!(count(&log, "initialize"), 0, "{log:?}");
}

#[test]
fn an_input_loop_after_a_declined_form_is_a_refused_call() {
    let (scratch, log) = stdio_fixture("eras-cli-loop", "input-loop", "");
    // `--yes` cannot fill the form (its field has no default): declined, each round.
    let run = scratch.cli(&["--yes", "call", "fx", "ask"]);
    // Asked again what was declined: the person's no, so a refused call's exit code, not a
    // server failure's.
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "tool fx__ask: its server asked again for input that was declined (a form, 8 rounds)"
        ),
        "{run:?}"
    );
    // The call and its eight retries, each answering the round before.
    assert_eq!(count(&log, "tools/call"), 9);
    let json = scratch.cli(&["--yes", "--json", "call", "fx", "ask"]);
    assert!(json.stderr.contains("\"exitCode\":2"), "{json:?}");
}

#[test]
fn a_request_state_of_a_mebibyte_completes() {
    let (scratch, _) = stdio_fixture("eras-cli-huge", "huge-state", "");
    let run = scratch.cli(&["--yes", "call", "fx", "ask"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("decline"), "{run:?}");
}

#[test]
fn a_subscription_never_acknowledged_leaves_the_commands_working() {
    let (scratch, _) = stdio_fixture("eras-cli-no-ack", "listen-no-ack", "");
    let run = ok(&scratch, &["call", "fx", "echo", "text=still"]);
    assert_eq!(run.stdout, "still\n");
    let run = ok(&scratch, &["tools", "fx"]);
    assert!(run.stdout.contains("fx__echo"), "{run:?}");
}

/// `mcp-http-fixture MODE --log FILE`, killed when dropped.
struct HttpFixture {
    child: Child,
    log: PathBuf,
}

impl HttpFixture {
    fn start(scratch: &Scratch, mode: &str) -> Self {
        let log = scratch.0.join("requests.log");
        let mut child = Command::new(HTTP_FIXTURE)
            .args([mode, "--log", log.to_str().unwrap()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().strip_prefix("PORT ").unwrap();
        let url = format!("http://127.0.0.1:{port}/mcp");
        scratch.project_file(".mcp-cli.toml", &format!("[mcp.fx]\nurl = {url:?}\n"));
        HttpFixture { child, log }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_legacy_server_refusing_the_probe_with_a_400_gets_the_handshake() {
    let scratch = Scratch::new("eras-cli-legacy-400");
    let server = HttpFixture::start(&scratch, "legacy-400");
    let run = ok(&scratch, &["call", "fx", "echo", "message=old"]);
    assert!(run.stdout.contains("old"), "{run:?}");
    assert_eq!(count(&server.log, "server/discover"), 1);
    let (protocol, era) = era(&scratch);
    assert_eq!(
        (protocol.as_str(), era.as_str()),
        (Some("2025-11-25"), Some("handshake"))
    );
    assert_eq!(
        count(&server.log, "server/discover"),
        1,
        "the verdict was cached"
    );
}

#[test]
fn the_stateless_http_fixture_mirrors_arguments_into_headers() {
    let scratch = Scratch::new("eras-cli-stateless-http");
    let server = HttpFixture::start(&scratch, "stateless");
    let run = ok(&scratch, &["call", "fx", "region", "region=eu", "query=q"]);
    assert!(run.stderr.is_empty(), "{run:?}");
    let log = std::fs::read_to_string(&server.log).unwrap();
    let call = log.lines().find(|line| line.contains("rpc=tools/call "));
    let call = call.unwrap_or_else(|| panic!("{log}"));
    assert!(call.contains("mcp-param-region=eu"), "{log}");

    let run = ok(&scratch, &["tools", "fx"]);
    assert!(run.stdout.contains("fx__region"), "{run:?}");
    assert!(!run.stdout.contains("weigh"), "{run:?}");
    assert!(run.stderr.contains("tool weigh of server fx"), "{run:?}");
    let (protocol, era) = era(&scratch);
    assert_eq!(
        (protocol.as_str(), era.as_str()),
        (Some("2026-07-28"), Some("stateless"))
    );
}

/// A server of a draft stateless revision only: a clear error naming its revision, exit 3,
/// and no loop. (The probe's -32022 names nothing we speak, and the core then tries the
/// handshake once, which this server refuses too.)
#[test]
fn a_server_on_a_draft_revision_fails_naming_it() {
    let scratch = Scratch::new("eras-cli-old-version");
    let server = HttpFixture::start(&scratch, "stateless-old-version");
    let run = scratch.cli(&["call", "fx", "echo", "message=x"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("DRAFT-2026-v1"), "{run:?}");
    assert_eq!(count(&server.log, "server/discover"), 1, "{run:?}");
    assert!(count(&server.log, "initialize") <= 1, "{run:?}");
}
