//! Tasks through the `mcp-cli` binary, on the fixture's `tasks` mode in both eras: `call`
//! waiting for a task, `call --async` and `tasks get|wait|cancel` through the daemon, a
//! failed, a forgotten, an asking and a never-ending task, bounded poll intervals, and the
//! daemon watching its tasks again after a restart.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcp_smol::proto::{
    CallToolResult, ClientCapabilities, Era, Protocol, Request,
    tasks::{Task, TaskEnd, TaskWatch},
};
use mcp_smol::{Options, ServerCommand};
use serde_json::{Value, json};

use crate::support::{
    FIXTURE, Run, Scratch, bounded, cli_binary, close_and_check, quick, start, text,
};

pub(crate) const ERAS: [&str; 2] = ["handshake", "stateless"];

/// A scratch folder whose config has the task fixture as `fx` in `era`, with `extra`
/// arguments, logging what it receives to `received.log`; a daemon, if one is started, is
/// stopped on drop.
pub(crate) struct Tasks {
    pub(crate) scratch: Scratch,
}

impl Tasks {
    pub(crate) fn new(name: &str, era: &str, extra: &[&str]) -> Self {
        let scratch = Scratch::new(&format!("tasks-{name}-{era}"));
        let log = scratch.0.join("received.log");
        let mut args = vec![
            "tasks",
            "--era",
            era,
            "--log-received",
            log.to_str().unwrap(),
        ];
        args.extend(extra);
        let config = format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = {args:?}\n");
        scratch.project_file(".mcp-cli.toml", &config);
        Self { scratch }
    }

    fn runtime(&self) -> PathBuf {
        self.scratch.0.join("run")
    }

    /// `mcp-cli args`, through the daemon when one runs.
    fn cli(&self, args: &[&str]) -> Run {
        let runtime = self.runtime();
        let env = [("XDG_RUNTIME_DIR", runtime.to_str().unwrap())];
        self.scratch.cli_with(args, &env, None)
    }

    /// `mcp-cli args`, never through the daemon.
    fn cold(&self, args: &[&str]) -> Run {
        let runtime = self.runtime();
        let env = [
            ("XDG_RUNTIME_DIR", runtime.to_str().unwrap()),
            ("MCP_CLI_NO_DAEMON", "1"),
        ];
        self.scratch.cli_with(args, &env, None)
    }

    fn start_daemon(&self) {
        let run = self.cli(&["daemon", "start"]);
        assert_eq!(run.code, 0, "{run:?}");
    }

    /// How many lines the server received that name `method`.
    pub(crate) fn received(&self, method: &str) -> usize {
        let log = std::fs::read_to_string(self.scratch.0.join("received.log")).unwrap_or_default();
        let needle = format!("\"method\":\"{method}\"");
        log.lines().filter(|line| line.contains(&needle)).count()
    }

    /// The task records, as `tasks --json` prints them (never starting a server).
    fn records(&self) -> Vec<Value> {
        let run = self.cold(&["--json", "tasks"]);
        assert_eq!(run.code, 0, "{run:?}");
        serde_json::from_str::<Value>(&run.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    fn status_of(&self, id: &str) -> String {
        let records = self.records();
        let record = records.iter().find(|record| record["taskId"] == id);
        record.map_or_else(String::new, |record| {
            record["status"].as_str().unwrap().to_owned()
        })
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        let _ = self.cli(&["daemon", "stop"]);
    }
}

#[test]
fn a_call_waits_for_its_task_in_both_eras() {
    for era in ERAS {
        let tasks = Tasks::new("call", era, &[]);
        // Every task tool requires a task: called as one, not refused.
        let run = tasks.cold(&["call", "fx", "task_sleep", "ms=300"]);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "slept 300 ms\n"),
            "{era}: {run:?}"
        );
        assert!(tasks.received("tasks/get") >= 1, "{era}: polled");
        let records = tasks.records();
        assert_eq!(records.len(), 1, "{era}: {records:?}");
        assert_eq!(records[0]["server"], "fx");
        assert_eq!(records[0]["tool"], "fx__task_sleep");
        assert_eq!(records[0]["status"], "completed", "{era}");
        // Plain, a tool that may run as a task runs at once in the handshake era; the
        // stateless era's server decides for itself.
        let run = tasks.cold(&["call", "fx", "task_optional"]);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        let expected = match era {
            "handshake" => "ran task_optional at once\n",
            _ => "ran task_optional\n",
        };
        assert_eq!(run.stdout, expected, "{era}");
        let run = tasks.cold(&["tools", "fx"]);
        assert!(run.stdout.contains("fx__task_sleep  A task that ends after `ms` (never, with a huge one); with `bytes`, its result is that many bytes of text.  [runs as a task]"), "{run:?}");
    }
}

#[test]
fn a_failed_task_exits_1_and_a_forgotten_one_3() {
    for era in ERAS {
        let tasks = Tasks::new("failed", era, &[]);
        let run = tasks.cold(&["call", "fx", "task_fail"]);
        assert_eq!(run.code, 1, "{era}: {run:?}");
        assert!(
            run.stderr.contains("failed: the work failed: disk full"),
            "{era}: {run:?}"
        );
        let run = tasks.cold(&["--json", "call", "fx", "task_fail"]);
        let error: Value = serde_json::from_str(&run.stderr).unwrap();
        assert_eq!(error["error"]["kind"], "tool_error", "{era}");

        let forgetful = Tasks::new("forgotten", era, &["--forget", "1"]);
        let run = forgetful.cold(&["call", "fx", "task_sleep", "ms=10"]);
        assert_eq!(run.code, 3, "{era}: {run:?}");
        assert!(
            run.stderr.contains("server fx does not know task task-"),
            "{era}: {run:?}"
        );
        assert!(run.stderr.contains("Unknown task"), "{era}: {run:?}");
        assert_eq!(forgetful.records()[0]["status"], "lost", "{era}");
    }
}

#[test]
fn a_task_that_asks_for_input_mid_way_gets_its_answer() {
    for era in ERAS {
        let tasks = Tasks::new("ask", era, &[]);
        // `--yes` answers forms with their defaults.
        let run = tasks.cold(&["--yes", "call", "fx", "task_ask"]);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "hello Ada\n"),
            "{era}: {run:?}"
        );
        let method = match era {
            "stateless" => "tasks/update",
            _ => "tasks/result",
        };
        assert_eq!(tasks.received(method), 1, "{era}");
    }
}

#[test]
fn a_task_that_never_ends_is_ended_by_the_timeout_and_the_cancel_reaches_the_server() {
    for era in ERAS {
        let tasks = Tasks::new("never", era, &[]);
        let run = tasks.cold(&[
            "--timeout",
            "1",
            "call",
            "fx",
            "task_sleep",
            "ms=1000000000",
        ]);
        assert_eq!(run.code, 4, "{era}: {run:?}");
        assert!(
            run.stderr
                .contains("is still working after 1s; it was cancelled"),
            "{era}: {run:?}"
        );
        assert_eq!(tasks.received("tasks/cancel"), 1, "{era}");
        assert_eq!(tasks.records()[0]["status"], "cancelled", "{era}");
    }
}

#[test]
fn poll_intervals_of_zero_and_an_hour_are_bounded() {
    // 0 ms: a second's task is polled at most every 100 ms, not in a busy loop.
    let tasks = Tasks::new("poll-zero", "handshake", &["--poll-ms", "0"]);
    let run = tasks.cold(&["call", "fx", "task_sleep", "ms=1000"]);
    assert_eq!(run.code, 0, "{run:?}");
    let polls = tasks.received("tasks/get");
    assert!((1..=15).contains(&polls), "{polls} polls");
    // An hour: polled within 30 s all the same, well inside the wait's 50 (in the handshake
    // era, where no notification comes to end the wait sooner).
    let tasks = Tasks::new("poll-hour", "handshake", &["--poll-ms", "3600000"]);
    let run = tasks.cold(&["--timeout", "50", "call", "fx", "task_sleep", "ms=100"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "slept 100 ms\n"),
        "{run:?}"
    );
}

#[test]
fn a_stateless_task_ends_on_its_notification_without_waiting_for_a_poll() {
    // The first poll would come after 30 s, past the wait's 20: only the notification the
    // listen asks for can end it in time.
    let tasks = Tasks::new("notified", "stateless", &["--poll-ms", "3600000"]);
    let run = tasks.cold(&["--timeout", "20", "call", "fx", "task_sleep", "ms=300"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "slept 300 ms\n"),
        "{run:?}"
    );
    // One listen for the task, beside the hub's own for list changes.
    let log = std::fs::read_to_string(tasks.scratch.0.join("received.log")).unwrap();
    let for_tasks = log
        .lines()
        .filter(|line| line.contains(r#""taskIds":["task-"#));
    assert_eq!(for_tasks.count(), 1, "{log}");
    assert_eq!(tasks.records()[0]["status"], "completed");
    // The handshake era has no such subscription.
    let tasks = Tasks::new("notified", "handshake", &[]);
    let run = tasks.cold(&["call", "fx", "task_sleep", "ms=100"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = std::fs::read_to_string(tasks.scratch.0.join("received.log")).unwrap();
    assert!(!log.contains("taskIds"), "{log}");
}

/// A local server stops with the daemon that started it: `tasks` shows the task lost at
/// once, with why, rather than `working` until a `tasks wait` finds it gone.
#[test]
fn a_task_whose_local_server_stopped_is_listed_as_lost() {
    let tasks = Tasks::new("lost", "handshake", &[]);
    tasks.start_daemon();
    let run = tasks.cli(&["call", "--async", "fx", "task_sleep", "ms=60000"]);
    assert_eq!(run.code, 0, "{run:?}");
    let id = run.stdout.trim().to_owned();
    let run = tasks.cli(&["daemon", "stop"]);
    assert_eq!(run.code, 0, "{run:?}");
    let records = tasks.records();
    let record = records
        .iter()
        .find(|record| record["taskId"] == id.as_str());
    let record = record.unwrap_or_else(|| panic!("{records:?}"));
    assert_eq!(record["status"], "lost", "{record}");
    let message = record["statusMessage"].as_str().unwrap_or_default();
    assert!(message.contains("has stopped since"), "{record}");
    let run = tasks.cold(&["tasks"]);
    assert!(
        run.stdout
            .contains(&format!("fx      {id}  fx__task_sleep  lost")),
        "{run:?}"
    );
}

#[test]
fn async_calls_are_waited_for_polled_and_cancelled_through_the_daemon() {
    for era in ERAS {
        let tasks = Tasks::new("async", era, &[]);
        tasks.start_daemon();
        let run = tasks.cli(&["call", "--async", "fx", "task_sleep", "ms=1500"]);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        let id = run.stdout.trim().to_owned();
        assert!(id.starts_with("task-"), "{era}: {run:?}");
        assert!(
            run.stderr
                .contains(&format!("`mcp-cli tasks wait fx {id}`")),
            "{run:?}"
        );
        // The daemon keeps the server, and so the task: nothing to warn of.
        assert!(!run.stderr.contains("warning"), "{era}: {run:?}");
        let run = tasks.cli(&["tasks"]);
        assert!(run.stdout.starts_with("SERVER  ID"), "{run:?}");
        assert!(
            run.stdout
                .contains(&format!("fx      {id}  fx__task_sleep  working")),
            "{era}: {run:?}"
        );
        let run = tasks.cli(&["--json", "tasks", "get", "fx", &id]);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        let task: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(
            (task["taskId"].as_str(), task["status"].as_str()),
            (Some(id.as_str()), Some("working"))
        );
        let run = tasks.cli(&["tasks", "wait", "fx", &id]);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "slept 1500 ms\n"),
            "{era}: {run:?}"
        );
        assert_eq!(tasks.status_of(&id), "completed");
        // Too late to cancel: the server says so, and the record keeps what it knew.
        let run = tasks.cli(&["tasks", "cancel", "fx", &id]);
        assert_eq!(run.code, 2, "{era}: {run:?}");
        assert!(run.stderr.contains("has already ended"), "{run:?}");
        assert_eq!(tasks.status_of(&id), "completed");

        // `tasks wait --max-output` cuts the result as `call --max-output` does.
        let args = ["call", "--async", "fx", "task_sleep", "ms=0", "bytes=3000"];
        let run = tasks.cli(&args);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        let large = run.stdout.trim().to_owned();
        let run = tasks.cli(&["tasks", "wait", "fx", &large, "--max-output", "1K"]);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        let mut lines = run.stdout.lines();
        assert_eq!(lines.next(), Some("x".repeat(1024).as_str()), "{era}");
        let notice = lines.next().unwrap_or_default();
        let cut = "[output cut at 1024 of 3001 bytes; the whole result is in ";
        assert!(notice.starts_with(cut), "{era}: {run:?}");

        let run = tasks.cli(&[
            "--json",
            "call",
            "--async",
            "fx",
            "task_sleep",
            "ms=1000000000",
        ]);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        let handle: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(handle["server"], "fx");
        assert_eq!(handle["tool"], "fx__task_sleep");
        assert_eq!(handle["task"]["status"], "working");
        let long = handle["taskId"].as_str().unwrap();
        // A wait that runs out leaves the task running.
        let run = tasks.cli(&["--timeout", "0.5", "tasks", "wait", "fx", long]);
        assert_eq!(run.code, 4, "{era}: {run:?}");
        assert!(run.stderr.contains("it runs on"), "{run:?}");
        // Only the one too late above so far.
        assert_eq!(tasks.received("tasks/cancel"), 1, "{era}");
        let run = tasks.cli(&["tasks", "cancel", "fx", long]);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        assert_eq!(tasks.received("tasks/cancel"), 2, "{era}");
        let run = tasks.cli(&["tasks", "wait", "fx", long]);
        assert_eq!(run.code, 130, "{era}: {run:?}");
        assert!(
            run.stderr.contains("was cancelled: cancelled by request"),
            "{run:?}"
        );
        assert_eq!(tasks.status_of(long), "cancelled");
        // An id the server never made: a clear error, not a hang.
        let run = tasks.cli(&["tasks", "wait", "fx", "no-such-task"]);
        assert_eq!(run.code, 3, "{era}: {run:?}");
        assert!(
            run.stderr
                .contains("server fx does not know task no-such-task"),
            "{run:?}"
        );
    }
}

#[test]
fn a_restarted_daemon_watches_its_tasks_again() {
    for era in ERAS {
        let tasks = Tasks::new("restart", era, &[]);
        // The server keeps its tasks on disk, so the one the new daemon starts knows them.
        let dir = tasks.scratch.0.join("server-tasks");
        let log = tasks.scratch.0.join("received.log");
        let args = [
            "tasks",
            "--era",
            era,
            "--log-received",
            log.to_str().unwrap(),
            "--task-dir",
            dir.to_str().unwrap(),
        ];
        tasks.scratch.project_file(
            ".mcp-cli.toml",
            &format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = {args:?}\n"),
        );
        tasks.start_daemon();
        let run = tasks.cli(&["call", "--async", "fx", "task_sleep", "ms=2000"]);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        let id = run.stdout.trim().to_owned();
        assert_eq!(tasks.cli(&["daemon", "stop"]).code, 0);
        // Its server stopped with the daemon: listed lost, though this one keeps its tasks.
        assert_eq!(tasks.status_of(&id), "lost");
        tasks.start_daemon();
        // Nobody waits: the daemon's own watch brings the record up to date.
        let deadline = Instant::now() + Duration::from_secs(60);
        while tasks.status_of(&id) != "completed" {
            assert!(Instant::now() < deadline, "{era}: {:?}", tasks.records());
            std::thread::sleep(Duration::from_millis(100));
        }
        let run = tasks.cli(&["tasks", "wait", "fx", &id]);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "slept 2000 ms\n"),
            "{era}: {run:?}"
        );
    }
}

/// `mcp-cli serve` on the scratch folder's config, in its isolated environment.
/// The result of the task a stateless-era host got from the gateway in `raw`, for a backend's
/// task (`fx/task-N`), once the gateway says it completed.
pub(crate) async fn completed_through_the_gateway(
    client: &mcp_smol::Client,
    raw: &Value,
    era: &str,
) -> CallToolResult {
    let task = Task::created_by(raw).unwrap().unwrap();
    assert!(task.id.starts_with("fx/task-"), "{era}: {raw}");
    let mut watch = TaskWatch::new(Instant::now(), Era::Stateless, task);
    let end = client.wait_task(&mut watch, None, &|_| {}).await.unwrap();
    let TaskEnd::Completed(result) = end else {
        panic!("{era}: {end:?}")
    };
    CallToolResult::from_value(result).unwrap()
}

pub(crate) fn gateway(scratch: &Scratch) -> ServerCommand {
    let dir = |name: &str| scratch.0.join(name).display().to_string();
    let config = scratch.0.join(".mcp-cli.toml").display().to_string();
    let mut command =
        ServerCommand::new(cli_binary().display().to_string()).args(["--config", &config, "serve"]);
    command.cwd = Some(scratch.0.clone());
    for (key, value) in [
        ("XDG_STATE_HOME", dir("state")),
        ("XDG_CONFIG_HOME", dir("config-home")),
        ("MCP_CLI_NPM_PREFIX", dir("no-npm")),
        ("MCP_CLI_NO_DAEMON", "1".to_owned()),
    ] {
        command.env.insert(key.to_owned(), value);
    }
    command
}

/// A stateless-era host (our own client), declaring the tasks extension or not.
fn host(takes_tasks: bool) -> Options {
    let mut options = quick();
    options.core.protocol = Protocol::Revision("2026-07-28");
    options.core.handshake_timeout = Duration::from_secs(30);
    options.core.request_timeout = Duration::from_secs(30);
    options.core.capabilities = ClientCapabilities {
        tasks: takes_tasks,
        ..ClientCapabilities::default()
    };
    options
}

#[test]
fn the_gateway_hands_tasks_to_a_host_that_takes_them_and_waits_for_one_that_does_not() {
    for era in ERAS {
        let tasks = Tasks::new("gateway", era, &[]);
        let command = gateway(&tasks.scratch);
        bounded(async {
            // Declared: the task itself, under an id naming the backend, driven to its end
            // through the gateway's `tasks/get`.
            let client = start(&command, host(true));
            let call = Request::call_tool("fx__task_sleep", json!({"ms": 300})).untyped();
            let raw = client.request(call).await.unwrap();
            let result = completed_through_the_gateway(&client, &raw, era).await;
            assert_eq!(text(&result), "slept 300 ms", "{era}");
            // Cancelled through the gateway, the backend hears of it.
            let call = Request::call_tool("fx__task_sleep", json!({"ms": 1_000_000_000}));
            let raw = client.request(call.untyped()).await.unwrap();
            let long = Task::created_by(&raw).unwrap().unwrap();
            client.cancel_task(&long.id).await.unwrap();
            assert_eq!(
                client.get_task(&long.id).await.unwrap().status.as_str(),
                "cancelled"
            );
            // An id the gateway never gave out.
            let refused = client.get_task("nope/task-1").await.unwrap_err();
            assert!(
                refused.to_string().contains("unknown task nope/task-1"),
                "{refused}"
            );
            close_and_check(&client).await;

            // Not declared: the gateway waits for the task and answers with its result.
            let client = start(&command, host(false));
            let call = Request::call_tool("fx__task_sleep", json!({"ms": 300}));
            let result = client.request(call).await.unwrap();
            assert_eq!(text(&result), "slept 300 ms", "{era}");
            close_and_check(&client).await;
        });
        assert_eq!(tasks.received("tasks/cancel"), 1, "{era}");
    }
}

impl Tasks {
    /// A scratch folder whose config is `config`, for the real peers.
    fn with_config(name: &str, config: &str) -> Self {
        let scratch = Scratch::new(&format!("tasks-{name}"));
        scratch.project_file(".mcp-cli.toml", config);
        Self { scratch }
    }
}

/// What every real task server goes through: a call that waits, `call --async` and `tasks
/// wait` through the daemon, `tasks cancel`, and a daemon restart (whose new server, with
/// its tasks in memory, no longer knows the task: a clear error, and the record says so).
fn drive_a_real_task_server(tasks: &Tasks, tool: &[&str], done: &str) {
    let call: Vec<&str> = ["call", "peer"].iter().chain(tool).copied().collect();
    let run = tasks.cold(&call);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(done), "{run:?}");
    assert_eq!(tasks.records()[0]["status"], "completed", "a task ran it");

    tasks.start_daemon();
    let detached: Vec<&str> = ["call", "--async", "peer"]
        .iter()
        .chain(tool)
        .copied()
        .collect();
    let run = tasks.cli(&detached);
    assert_eq!(run.code, 0, "{run:?}");
    let id = run.stdout.trim().to_owned();
    let run = tasks.cli(&["tasks", "peer"]);
    assert!(run.stdout.contains(&id), "{run:?}");
    let run = tasks.cli(&["tasks", "wait", "peer", &id]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(done), "{run:?}");
    assert_eq!(tasks.status_of(&id), "completed");

    let run = tasks.cli(&detached);
    let cancelled = run.stdout.trim().to_owned();
    assert_eq!(tasks.cli(&["tasks", "cancel", "peer", &cancelled]).code, 0);
    let run = tasks.cli(&["tasks", "wait", "peer", &cancelled]);
    assert_eq!(run.code, 130, "{run:?}");

    let run = tasks.cli(&detached);
    let orphan = run.stdout.trim().to_owned();
    assert_eq!(tasks.cli(&["daemon", "stop"]).code, 0);
    tasks.start_daemon();
    let run = tasks.cli(&["tasks", "wait", "peer", &orphan]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("server peer does not know task {orphan}")),
        "{run:?}"
    );
    assert_eq!(tasks.status_of(&orphan), "lost");
}

#[test]
fn rmcp_tasks_extension_through_the_binary() {
    let peer = mcp_tests::rmcp_peer();
    let config = format!("[mcp.peer]\ncommand = {:?}\n", peer.program);
    let tasks = Tasks::with_config("rmcp", &config);
    drive_a_real_task_server(&tasks, &["research", "ms=1500"], "researched 1500 ms");
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn server_everything_experimental_tasks_through_the_binary() {
    let bin = mcp_tests::npm_bin();
    let program = bin.join("mcp-server-everything");
    let config = format!("[mcp.peer]\ncommand = {program:?}\n");
    let tasks = Tasks::with_config("everything", &config);
    let tool = ["simulate-research-query", "topic=rust"];
    drive_a_real_task_server(&tasks, &tool, "# Research Report: rust");
    // Asking mid-way: its form goes out during `tasks/result` and `--yes` declines it (no
    // default to accept), which the report says.
    let run = tasks.cold(&[
        "--yes",
        "call",
        "peer",
        "simulate-research-query",
        "topic=py",
        "ambiguous=true",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("User declined - using default interpretation"),
        "{run:?}"
    );
}

#[test]
fn a_large_task_result_is_spilled_whole_past_max_output() {
    for era in ERAS {
        let tasks = Tasks::new("large", era, &[]);
        let run = tasks.cold(&[
            "call",
            "fx",
            "task_sleep",
            "ms=0",
            "bytes=300000",
            "--max-output",
            "64K",
        ]);
        assert_eq!(run.code, 0, "{era}: {run:?}");
        let mut lines = run.stdout.lines();
        assert_eq!(lines.next(), Some("x".repeat(65536).as_str()), "{era}");
        let notice = lines.next().unwrap_or_default();
        let prefix = "[output cut at 65536 of 300001 bytes; the whole result is in ";
        let path = (notice.strip_prefix(prefix))
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or_else(|| panic!("{era}: no spill notice in {notice:?}"));
        let whole = std::fs::read_to_string(path).unwrap();
        assert_eq!(whole, "x".repeat(300_000) + "\n", "{era}");
    }
}

/// Without the daemon, the server would stop with the command, and its task with it: the
/// call is refused before the server starts, naming the command that keeps it running.
#[test]
fn an_async_call_on_a_local_server_without_the_daemon_is_refused() {
    let tasks = Tasks::new("async-cold", "stateless", &[]);
    let run = tasks.cold(&["call", "--async", "fx", "task_sleep", "ms=100000"]);
    assert_eq!(run.code, 2, "{run:?}");
    let refusal = "mcp-cli: --async: fx is a local server that this command starts and stops \
                   when it ends, and its task with it; run `mcp-cli daemon start` first, which \
                   keeps its servers, and their tasks, running";
    assert_eq!(run.stderr.trim(), refusal, "{run:?}");
    assert_eq!(tasks.received("tools/call"), 0);
    assert!(tasks.records().is_empty());
}
