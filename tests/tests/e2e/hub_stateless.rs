//! The host layer on servers of the stateless era (2026-07-28), against the fixture: live
//! updates through `subscriptions/listen`, listings kept for their `ttlMs`, a missing resource
//! told alike in both eras, schemas shown as sent, and nothing sent that the era removed.

use std::path::Path;
use std::time::{Duration, Instant};

use mcp_client_cli::config::{Command, Config, Entry, Policy, Server, ServerSpec, Source};
use mcp_client_cli::hub::{Events, Hub, HubEvent, Settings, State};
use mcp_smol::ServerCommand;
use mcp_tests::stateless::{SCHEMA_2020_INPUT, SCHEMA_2020_OUTPUT};
use serde_json::{Value, json};

use crate::support::{FIXTURE, Scratch, bounded, fixture};

fn server(name: &str, command: ServerCommand) -> Server {
    let command = Command::new(command.program).args(command.args);
    Server {
        name: name.to_owned(),
        entry: Entry::Enabled(ServerSpec::new(name, command)),
        source: Source::File("/test/config.toml".into()),
    }
}

/// A hub over `servers` whose server logs go to `logs`; an acknowledgement (like a handshake)
/// gets half a second.
fn hub_of(servers: Vec<Server>, logs: &Path) -> Hub {
    let settings = Settings {
        log_dir: Some(logs.to_owned()),
        handshake_timeout: Some(Duration::from_millis(500)),
        term_period: Duration::from_millis(300),
        ..Settings::default()
    };
    let policy = Policy::default();
    Hub::new(
        Config {
            servers,
            policy,
            ..Config::default()
        },
        settings,
    )
}

/// The fixture in `mode`, in the stateless era, logging what it receives to `received`.
fn stateless(mode: &str, received: &Path, extra: &[&str]) -> ServerCommand {
    let mut args = vec![
        "--era",
        "stateless",
        "--log-received",
        received.to_str().unwrap(),
    ];
    args.extend(extra);
    fixture(mode, &args)
}

/// How many requests of `method` the fixture received (each line is one message).
fn received(log: &Path, method: &str) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let needle = format!("\"method\":\"{method}\"");
    text.lines().filter(|line| line.contains(&needle)).count()
}

/// Waits until `done` holds, checking every 20 ms, for at most 20 s.
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        smol::Timer::after(Duration::from_millis(20)).await;
    }
}

async fn echo(hub: &Hub, name: &str) -> Result<Value, mcp_client_cli::hub::HubError> {
    let tool = hub.find(&format!("{name}__echo")).await?;
    hub.call(&tool, json!({ "text": "hi" })).await
}

#[test]
fn a_listen_brings_the_new_tool_without_a_restart() {
    let dir = Scratch::new("hub-st-listen");
    let log = dir.0.join("received");
    let command = stateless("list-changed", &log, &[]);
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], &dir.0);
        let events = hub.events();
        let before = hub.catalogue().await;
        assert!(before.failures.is_empty(), "{:?}", before.failures);
        assert!(before.get("fx__extra").is_none());
        let pid = hub.status()[0].pid.unwrap();
        until("the listen", || received(&log, "subscriptions/listen") == 1).await;
        // The first call makes the fixture announce a new tool on the listen stream.
        echo(&hub, "fx").await.unwrap();
        let event = events.recv().await.unwrap();
        let changed = HubEvent::ToolsChanged {
            server: "fx".into(),
        };
        assert_eq!(event, changed);
        let after = hub.catalogue().await;
        assert!(after.get("fx__extra").is_some(), "{:?}", after.tools);
        assert_eq!(hub.status()[0].pid, Some(pid), "the server was restarted");
        hub.shutdown().await;
        // Stopping the server cancels its listen first.
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("notifications/cancelled"), "{text}");
        assert_eq!(received(&log, "subscriptions/listen"), 1, "{text}");
    });
}

#[test]
fn a_change_before_the_listen_is_acknowledged_is_listed_once_it_is() {
    let dir = Scratch::new("hub-st-before-ack");
    let log = dir.0.join("received");
    // Gains `extra` between the first listing and the listen's acknowledgement, and tells
    // nobody: no stream is open yet.
    let command = stateless("good", &log, &["--grow-at-start", "1"]);
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], &dir.0);
        let events = hub.events();
        let before = hub.catalogue().await;
        assert!(before.failures.is_empty(), "{:?}", before.failures);
        // Listed before the listen was sent: the change is yet to come.
        assert!(before.get("fx__extra").is_none(), "{:?}", before.tools);
        let event = events.recv().await.unwrap();
        let changed = HubEvent::ToolsChanged {
            server: "fx".into(),
        };
        assert_eq!(event, changed);
        let after = hub.catalogue().await;
        assert!(after.get("fx__extra").is_some(), "{:?}", after.tools);
        hub.shutdown().await;
    });
}

#[test]
fn a_listen_acknowledged_with_nothing_changed_tells_of_no_change() {
    let dir = Scratch::new("hub-st-ack-same");
    let log = dir.0.join("received");
    // One page a listing, so that each listing is one `tools/list`.
    let command = stateless("good", &log, &["--page-size", "1000"]);
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], &dir.0);
        let events = hub.events();
        let before = hub.catalogue().await;
        assert!(before.failures.is_empty(), "{:?}", before.failures);
        // The listing after the acknowledgement is the last thing the hub does unasked.
        until("the listing after the acknowledgement", || {
            received(&log, "tools/list") == 2
        })
        .await;
        echo(&hub, "fx").await.unwrap();
        hub.shutdown().await;
        let told: Vec<HubEvent> = std::iter::from_fn(|| events.try_recv())
            .filter(|event| matches!(event, HubEvent::ToolsChanged { .. }))
            .collect();
        assert!(told.is_empty(), "{told:?}");
    });
}

#[test]
fn an_unacknowledged_listen_is_logged_and_the_hub_goes_on() {
    let dir = Scratch::new("hub-st-no-ack");
    let log = dir.0.join("received");
    let command = stateless("listen-no-ack", &log, &[]);
    // Where the command line keeps the servers' logs, so that `mcp-cli logs` shows it.
    let logs = dir.0.join("state/mcp-cli/logs");
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], &logs);
        let catalogue = hub.catalogue().await;
        assert!(
            catalogue.get("fx__echo").is_some(),
            "{:?}",
            catalogue.failures
        );
        let server_log = logs.join("fx.log");
        let says = || std::fs::read_to_string(&server_log).unwrap_or_default();
        until("the note in the server's log", || {
            says().contains("live updates are off")
        })
        .await;
        assert!(says().contains("not acknowledged"), "{}", says());
        // Tools still work, and the listen was not tried again.
        let result = echo(&hub, "fx").await.unwrap();
        assert_eq!(result["content"][0]["text"], "hi");
        assert_eq!(received(&log, "subscriptions/listen"), 1);
        hub.shutdown().await;
    });
    dir.project_file(
        ".mcp-cli.toml",
        &format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"listen-no-ack\"]\n"),
    );
    let run = dir.cli(&["logs", "fx"]);
    assert!(run.stdout.contains("live updates are off"), "{run:?}");
}

#[test]
fn a_stream_that_ends_is_listened_to_again_once() {
    let dir = Scratch::new("hub-st-ends");
    let log = dir.0.join("received");
    let command = stateless("listen-ends", &log, &[]);
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], &dir.0);
        assert!(hub.catalogue().await.get("fx__echo").is_some());
        let says = || std::fs::read_to_string(dir.0.join("fx.log")).unwrap_or_default();
        let gave_up = "ended the stream again; live updates are off";
        until("the second end in the log", || says().contains(gave_up)).await;
        assert!(says().contains("listening again once"), "{}", says());
        // Once more, then no more.
        assert_eq!(received(&log, "subscriptions/listen"), 2);
        echo(&hub, "fx").await.unwrap();
        assert_eq!(received(&log, "subscriptions/listen"), 2);
        hub.shutdown().await;
    });
}

#[test]
fn a_restarted_server_is_listened_to_again() {
    let dir = Scratch::new("hub-st-relisten");
    let log = dir.0.join("received");
    let marker = dir.0.join("crashed");
    let command = stateless(
        "exit-mid-call",
        &log,
        &["--crash-once", marker.to_str().unwrap()],
    );
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], &dir.0);
        let events = hub.events();
        assert!(hub.catalogue().await.get("fx__echo").is_some());
        until("the first listen", || {
            received(&log, "subscriptions/listen") == 1
        })
        .await;
        assert!(echo(&hub, "fx").await.is_err(), "the first call crashes it");
        loop {
            if let HubEvent::Failed { .. } = events.recv().await.unwrap() {
                break;
            }
        }
        assert_eq!(hub.status()[0].state, State::Failed);
        // The next use starts it again, and the new connection listens again.
        echo(&hub, "fx").await.unwrap();
        until("the second listen", || {
            received(&log, "subscriptions/listen") == 2
        })
        .await;
        hub.shutdown().await;
    });
}

#[test]
fn a_listing_is_kept_for_its_ttl_and_listed_again_after() {
    let dir = Scratch::new("hub-st-ttl");
    let (modern, old) = (dir.0.join("modern"), dir.0.join("old"));
    let ttl = Duration::from_millis(1500);
    let ttl_ms = ttl.as_millis().to_string();
    let one_page = ["--page-size", "100"];
    let modern_command = stateless(
        "good",
        &modern,
        &[&one_page[..], &["--ttl-ms", &ttl_ms]].concat(),
    );
    let old_log = old.to_str().unwrap();
    let old_command = fixture(
        "good",
        &[&one_page[..], &["--log-received", old_log]].concat(),
    );
    let names = ["fx".to_owned(), "old".to_owned()];
    bounded(async {
        let servers = vec![server("fx", modern_command), server("old", old_command)];
        let hub = hub_of(servers, &dir.0);
        let first = hub.tools_of(&names).await;
        assert!(first.failures.is_empty(), "{:?}", first.failures);
        assert_eq!(received(&old, "tools/list"), 1);
        // The stateless server is listed once more when its listen is acknowledged (what
        // changed before was on no stream); its ttl runs from that listing.
        until("the listing after the acknowledgement", || {
            received(&modern, "tools/list") == 2
        })
        .await;
        let asked = Instant::now();
        // Within the ttl, the listing is served from memory (a call consults it too).
        hub.tools_of(&names).await;
        echo(&hub, "fx").await.unwrap();
        if asked.elapsed() < ttl {
            assert_eq!(
                received(&modern, "tools/list"),
                2,
                "listed again within its ttl"
            );
        }
        smol::Timer::at(asked + ttl + Duration::from_millis(50)).await;
        // Past it, the next use lists again; a listing without a hint stays as it was.
        let again = hub.tools_of(&names).await;
        assert_eq!(again.tools.len(), first.tools.len());
        assert_eq!(
            (
                received(&modern, "tools/list"),
                received(&old, "tools/list")
            ),
            (3, 1)
        );
        hub.shutdown().await;
    });
}

/// The events `events` holds now, without waiting.
fn held(events: &Events) -> Vec<HubEvent> {
    std::iter::from_fn(|| events.try_recv()).collect()
}

#[test]
fn a_listing_listed_again_for_its_ttl_tells_what_changed() {
    let dir = Scratch::new("hub-st-ttl-changed");
    let log = dir.0.join("received");
    let describe = dir.write("description.txt", "Says hello.");
    // A ttl of 0: every use lists again.
    let extra = ["--ttl-ms", "0", "--describe", describe.to_str().unwrap()];
    let command = stateless("resources", &log, &extra);
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], &dir.0);
        let events = hub.events();
        let first = hub.catalogue().await;
        assert!(first.failures.is_empty(), "{:?}", first.failures);
        // Listed again and found the same: nothing to tell.
        let (tools, prompts) = (received(&log, "tools/list"), received(&log, "prompts/list"));
        hub.catalogue().await;
        assert!(received(&log, "tools/list") > tools, "not listed again");
        assert!(received(&log, "prompts/list") > prompts, "not listed again");
        assert_eq!(held(&events), []);
        // Listed again and found changed: told as a list change would be, once each.
        dir.write("description.txt", "Says goodbye.");
        let after = hub.catalogue().await;
        let server = || "fx".to_owned();
        assert_eq!(
            held(&events),
            [
                HubEvent::ToolsChanged { server: server() },
                HubEvent::ResourcesChanged { server: server() },
                HubEvent::PromptsChanged { server: server() },
            ]
        );
        let tool = after.get("fx__shifty").unwrap();
        assert_eq!(tool.tool.description.as_deref(), Some("Says goodbye."));
        hub.catalogue().await;
        assert_eq!(held(&events), []);
        hub.shutdown().await;
    });
}

#[test]
fn a_missing_resource_reads_alike_in_both_eras() {
    let dir = Scratch::new("hub-st-missing");
    let config = format!(
        "[mcp.old]\ncommand = {FIXTURE:?}\nargs = [\"resources\"]\n\n\
         [mcp.new]\ncommand = {FIXTURE:?}\nargs = [\"resources\", \"--era\", \"stateless\"]\n"
    );
    dir.project_file(".mcp-cli.toml", &config);
    let old = dir.cli(&["read", "old", "fx://missing"]);
    let new = dir.cli(&["read", "new", "fx://missing"]);
    assert_eq!((old.code, new.code), (2, 2), "{old:?}\n{new:?}");
    assert!(
        old.stderr.contains("resource not found: fx://missing"),
        "{old:?}"
    );
    assert_eq!(old.stderr, new.stderr.replace("server new", "server old"));
}

/// The `schemas` tool as `tools --json` shows it, for the fixture in `era`.
fn schemas_tool(dir: &Scratch, server: &str) -> Value {
    let run = dir.cli(&["--json", "tools", server]);
    assert_eq!(run.code, 0, "{run:?}");
    let tools: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    (tools.into_iter())
        .find(|tool| tool["name"] == "schemas")
        .unwrap_or_else(|| panic!("no schemas tool: {}", run.stdout))
}

#[test]
fn schemas_are_shown_and_passed_on_as_sent() {
    let dir = Scratch::new("hub-st-schemas");
    let config = format!(
        "[mcp.old]\ncommand = {FIXTURE:?}\nargs = [\"odd-tools\"]\n\n\
         [mcp.new]\ncommand = {FIXTURE:?}\nargs = [\"odd-tools\", \"--era\", \"stateless\"]\n"
    );
    dir.project_file(".mcp-cli.toml", &config);
    for server in ["old", "new"] {
        let tool = schemas_tool(&dir, server);
        // Byte for byte: every keyword, in the server's order, nothing resolved.
        assert_eq!(
            tool["inputSchema"].to_string(),
            SCHEMA_2020_INPUT,
            "{server}"
        );
        assert_eq!(
            tool["outputSchema"].to_string(),
            SCHEMA_2020_OUTPUT,
            "{server}"
        );
    }
    // The gateway's `tools/list` passes them on the same way.
    let listed = gateway_tools(&dir);
    let tool = (listed.iter())
        .find(|tool| tool["name"] == "new__schemas")
        .unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(tool["inputSchema"].to_string(), SCHEMA_2020_INPUT);
    assert_eq!(tool["outputSchema"].to_string(), SCHEMA_2020_OUTPUT);
}

/// The tools `mcp-cli serve` lists to a host.
fn gateway_tools(dir: &Scratch) -> Vec<Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut command = dir.command(&["serve"]);
    command.env("MCP_CLI_LIST_WAIT_MS", "120000");
    let mut serve = (command.stdin(std::process::Stdio::piped()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = serve.stdin.take().unwrap();
    let mut stdout = BufReader::new(serve.stdout.take().unwrap());
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    let tools = loop {
        let mut line = String::new();
        assert_ne!(stdout.read_line(&mut line).unwrap(), 0, "serve ended");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message["result"]["tools"].as_array().unwrap().clone();
        }
    };
    drop(stdin);
    serve.wait().unwrap();
    tools
}

#[test]
fn nothing_the_era_removed_reaches_a_stateless_server_through_the_daemon() {
    let dir = Scratch::new("hub-st-daemon");
    let log = dir.0.join("received");
    let config = format!(
        "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"resources\", \"--era\", \"stateless\", \
         \"--log-received\", {:?}]\n",
        log.to_str().unwrap()
    );
    dir.project_file(".mcp-cli.toml", &config);
    let runtime = dir.0.join("run");
    let env = [("XDG_RUNTIME_DIR", runtime.to_str().unwrap())];
    let daemon = Stop(&dir, &env);
    let run = dir.cli_with(&["daemon", "start"], &env, None);
    assert_eq!(run.code, 0, "{run:?}");
    for args in [
        &["tools", "fx"][..],
        &["call", "fx", "echo", "text=hi"],
        &["resources", "fx"],
        &["read", "fx", "fx://text/hello"],
        &["servers"],
        &["--json", "daemon", "status"],
    ] {
        let run = dir.cli_with(args, &env, None);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
    }
    drop(daemon);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(received(&log, "tools/call") >= 1, "{text}");
    for removed in [
        "ping",
        "logging/setLevel",
        "initialize",
        "resources/subscribe",
    ] {
        assert_eq!(received(&log, removed), 0, "{removed} was sent:\n{text}");
    }
}

/// Stops the daemon of a scratch folder when dropped (when the test fails, too).
struct Stop<'a>(&'a Scratch, &'a [(&'a str, &'a str)]);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        let run = self.0.cli_with(&["daemon", "stop"], self.1, None);
        assert_eq!(run.code, 0, "{run:?}");
    }
}
