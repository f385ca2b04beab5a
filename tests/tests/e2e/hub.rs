//! The host layer embedded as an agent would: lazy starts, crash and restart, the restart
//! limit, list changes, parallel starts, policy and shutdown.

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use mcp_client_cli::config::{Command, Config, Entry, Policy, Server, ServerSpec, Source};
use mcp_client_cli::hub::{
    Ask, AskHandler, ElicitAnswer, Hub, HubError, HubEvent, Settings, State,
};
use mcp_smol::ServerCommand;
use serde_json::{Value, json};

use crate::support::{FIXTURE, Scratch, assert_group_gone, bounded, echo_args, fixture};

/// The fixture commands carry a program and arguments, which is all the config's need.
fn server(name: &str, command: ServerCommand) -> Server {
    let command = Command::new(command.program).args(command.args);
    Server {
        name: name.to_owned(),
        entry: Entry::Enabled(ServerSpec::new(name, command)),
        source: Source::File("/test/config.toml".into()),
    }
}

fn hub_of(servers: Vec<Server>, policy: Policy, ask: Option<AskHandler>) -> Hub {
    let settings = Settings {
        ask,
        term_period: Duration::from_millis(300),
        ..Settings::default()
    };
    Hub::new(
        Config {
            servers,
            policy,
            ..Config::default()
        },
        settings,
    )
}

fn state_of(hub: &Hub, name: &str) -> (State, Option<String>) {
    let status = hub.status().into_iter().find(|s| s.name == name).unwrap();
    (status.state, status.reason)
}

fn pid_of(hub: &Hub, name: &str) -> u32 {
    let status = hub.status().into_iter().find(|s| s.name == name).unwrap();
    status
        .pid
        .unwrap_or_else(|| panic!("{name} is not running: {status:?}"))
}

/// Stops the hub and checks that the server's process group went with it.
async fn shut_down(hub: &Hub, name: &str) {
    let pid = pid_of(hub, name);
    hub.shutdown().await;
    assert_group_gone(pid);
}

async fn echo(hub: &Hub, name: &str, text: &str) -> Result<Value, HubError> {
    let tool = hub.find(&format!("{name}__echo")).await?;
    hub.call(&tool, json!({ "text": text })).await
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn nothing_starts_until_used() {
    let dir = Scratch::new("hub-lazy");
    let log = dir.0.join("received");
    let command = fixture("good", &["--log-received", log.to_str().unwrap()]);
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], Policy::default(), None);
        assert_eq!(state_of(&hub, "fx").0, State::Stopped);
        smol::Timer::after(Duration::from_millis(200)).await;
        assert!(!log.exists(), "the server was started before it was used");
        assert_eq!(text_of(&echo(&hub, "fx", "lazy").await.unwrap()), "lazy");
        let pid = pid_of(&hub, "fx");
        assert_eq!(state_of(&hub, "fx").0, State::Running);
        hub.shutdown().await;
        assert_group_gone(pid);
        assert_eq!(state_of(&hub, "fx").0, State::Stopped);
    });
}

#[test]
fn a_crash_fails_the_call_and_the_next_use_restarts() {
    let dir = Scratch::new("hub-crash");
    let marker = dir.0.join("crashed");
    let command = fixture("exit-mid-call", &["--crash-once", marker.to_str().unwrap()]);
    bounded(async {
        let hub = hub_of(vec![server("fx", command)], Policy::default(), None);
        let events = hub.events();
        let first = echo(&hub, "fx", "one").await.unwrap_err();
        let HubError::Server { error, .. } = &first else {
            panic!("{first:?}")
        };
        let mcp_smol::Error::Disconnected(disconnect) = error else {
            panic!("{error:?}")
        };
        assert_eq!(disconnect.exit_status.and_then(|s| s.code()), Some(3));
        assert!(first.to_string().contains("crashing now"), "{first}");
        // The hub notices the crash by itself, before anyone uses the server again.
        let event = events.recv().await.unwrap();
        assert!(
            matches!(&event, HubEvent::Failed { server, reason } if server == "fx" && reason.contains("exit status: 3")),
            "{event:?}"
        );
        let (state, reason) = state_of(&hub, "fx");
        assert_eq!(state, State::Failed);
        assert!(reason.unwrap().contains("crashing now"));

        let second = echo(&hub, "fx", "two").await.unwrap();
        assert_eq!(text_of(&second), "two");
        assert_eq!(state_of(&hub, "fx").0, State::Running);
        shut_down(&hub, "fx").await;
    });
}

#[test]
fn too_many_restarts_leave_it_failed_until_asked_again() {
    bounded(async {
        let hub = hub_of(
            vec![server("fx", fixture("exit-mid-call", &[]))],
            Policy::default(),
            None,
        );
        // The first start and three restarts: each call crashes the server.
        for round in 0..4 {
            let error = echo(&hub, "fx", "boom").await.unwrap_err();
            assert!(
                matches!(&error, HubError::Server { .. }),
                "round {round}: {error:?}"
            );
        }
        let error = echo(&hub, "fx", "boom").await.unwrap_err();
        assert!(
            matches!(&error, HubError::Unavailable { state: State::Failed, reason, .. }
                if reason.contains("restarted 3 times within a minute") && reason.contains("crashing now")),
            "{error:?}"
        );
        assert_eq!(state_of(&hub, "fx").0, State::Failed);
        // Asked explicitly, it starts again.
        hub.restart("fx").await.unwrap();
        assert_eq!(state_of(&hub, "fx").0, State::Running);
        shut_down(&hub, "fx").await;
    });
}

#[test]
fn list_changed_refreshes_the_catalogue() {
    bounded(async {
        let hub = hub_of(
            vec![server("fx", fixture("list-changed", &[]))],
            Policy::default(),
            None,
        );
        let events = hub.events();
        let before = hub.catalogue().await;
        assert!(before.get("fx__extra").is_none());
        assert!(before.get("fx__echo").is_some());
        // The first call makes the fixture announce a new tool.
        echo(&hub, "fx", "go").await.unwrap();
        let event = events.recv().await.unwrap();
        assert_eq!(
            event,
            HubEvent::ToolsChanged {
                server: "fx".into()
            }
        );
        let after = hub.catalogue().await;
        assert!(after.get("fx__extra").is_some(), "{:?}", after.tools);
        shut_down(&hub, "fx").await;
    });
}

#[test]
fn a_catalogue_given_up_on_while_a_server_starts_is_told_of_its_first_listing() {
    let dir = Scratch::new("hub-first-listing");
    let started = dir.0.join("may-start");
    let args = [
        "--start-after",
        started.to_str().unwrap(),
        "--grow-at-start",
        "1",
    ];
    bounded(async {
        let hub = hub_of(
            vec![server("fx", fixture("resources", &args))],
            Policy::default(),
            None,
        );
        let events = hub.events();
        // An embedder that gives the catalogue 300 ms, in which the server cannot start.
        let catalogue = async { Some(hub.catalogue().await) };
        let deadline = async {
            smol::Timer::after(Duration::from_millis(300)).await;
            None
        };
        assert!(smol::future::or(catalogue, deadline).await.is_none());
        assert_eq!(state_of(&hub, "fx").0, State::Starting);

        // It starts, and says while starting that it gained a tool: what the embedder was
        // given none of is told as changed, its resources and prompts as well.
        std::fs::write(&started, "").unwrap();
        let server = || "fx".to_owned();
        let mut owed = vec![
            HubEvent::ToolsChanged { server: server() },
            HubEvent::ResourcesChanged { server: server() },
            HubEvent::PromptsChanged { server: server() },
        ];
        let told = async {
            while !owed.is_empty() {
                let event = events.recv().await.unwrap();
                owed.retain(|owed| *owed != event);
            }
        };
        let late = async {
            smol::Timer::after(Duration::from_secs(20)).await;
            panic!("not told of the first listing within 20 s");
        };
        smol::future::or(told, late).await;
        let catalogue = hub.catalogue().await;
        assert!(
            catalogue.get("fx__extra").is_some(),
            "{:?}",
            catalogue.tools
        );
        assert!(!catalogue.prompts.is_empty() && !catalogue.resources.is_empty());
        shut_down(&hub, "fx").await;
    });
}

#[test]
fn eight_servers_start_in_parallel() {
    let dir = Scratch::new("hub-barrier");
    let barrier = dir.0.join("arrived");
    std::fs::create_dir_all(&barrier).unwrap();
    let barrier = barrier.to_str().unwrap();
    // Each server answers `initialize` only once all eight have received theirs, so started
    // one after another the first would never get past its handshake.
    let servers: Vec<Server> = (0..8)
        .map(|i| {
            let command = fixture("barrier", &["--dir", barrier, "--count", "8"]);
            server(&format!("s{i}"), command)
        })
        .collect();
    bounded(async {
        let hub = hub_of(servers, Policy::default(), None);
        let catalogue = hub.catalogue().await;
        assert!(catalogue.failures.is_empty(), "{:?}", catalogue.failures);
        let pids: Vec<u32> = (0..8).map(|i| pid_of(&hub, &format!("s{i}"))).collect();
        let per_server = (catalogue.tools.iter())
            .filter(|t| t.server == "s0")
            .count();
        assert!(per_server > 0);
        assert_eq!(catalogue.tools.len(), 8 * per_server);
        hub.shutdown().await;
        pids.into_iter().for_each(assert_group_gone);
    });
}

#[test]
fn policy_denies_servers_and_tools_and_asks_for_others() {
    let dir = Scratch::new("hub-policy");
    let log = dir.0.join("denied-received");
    let config = format!(
        "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\ndisabled_tools = [\"blob\"]\n\n\
         [mcp.nope]\ncommand = {FIXTURE:?}\nargs = [\"good\", \"--log-received\", {log:?}]\n\n\
         [security]\nmcp_server_denylist = [\"nope\"]\n\n\
         [[permissions.rules]]\ntool = \"fx__fail\"\naction = \"deny\"\n\n\
         [[permissions.rules]]\ntool = \"mcp__fx__add\"\naction = \"ask\"\n"
    );
    let path = dir.write("config.toml", &config);
    let env = |_: &str| None;
    let config = mcp_client_cli::config::load(&[(path, true)], &env).unwrap();
    let asked = Arc::new(std::sync::Mutex::new(Vec::<Ask>::new()));
    let record = asked.clone();
    let handler = AskHandler::new(move |ask: Ask| {
        let allow = ask.arguments["a"] == 1;
        record.lock().unwrap().push(ask);
        async move {
            if allow {
                Ok(())
            } else {
                Err("declined".into())
            }
        }
    });
    bounded(async {
        let hub = Hub::new(
            config,
            Settings {
                ask: Some(handler),
                ..Settings::default()
            },
        );
        let catalogue = hub.catalogue().await;
        let names: Vec<&str> = catalogue.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(
            names.contains(&"fx__echo") && names.contains(&"fx__add"),
            "{names:?}"
        );
        assert!(
            !names.contains(&"fx__blob") && !names.contains(&"fx__fail"),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.starts_with("nope__")), "{names:?}");
        // The denied server is listed as such and was never spawned.
        let (state, reason) = state_of(&hub, "nope");
        assert_eq!(state, State::Denied);
        assert!(reason.unwrap().contains("mcp_server_denylist"));
        assert!(!log.exists(), "a denied server was spawned");
        assert!(matches!(
            hub.find("nope__echo").await,
            Err(HubError::Unavailable {
                state: State::Denied,
                ..
            })
        ));

        let denied = hub.find("fx__fail").await.unwrap_err();
        assert!(
            matches!(&denied, HubError::ToolDenied { rule, .. } if rule.origin.contains("line")),
            "{denied:?}"
        );
        assert!(denied.to_string().contains("fx__fail"), "{denied}");
        let filtered = hub.find("fx__blob").await.unwrap_err();
        assert!(
            matches!(filtered, HubError::ToolFiltered { .. }),
            "{filtered:?}"
        );

        let add = hub.find("fx__add").await.unwrap();
        assert!(add.ask.is_some());
        let sum = hub.call(&add, json!({"a": 1, "b": 2})).await.unwrap();
        assert_eq!(text_of(&sum), "3");
        let refused = hub.call(&add, json!({"a": 2, "b": 2})).await;
        assert!(
            matches!(&refused, Err(HubError::NotApproved { why, .. }) if why == "declined"),
            "{refused:?}"
        );
        assert_eq!(asked.lock().unwrap().len(), 2);
        assert_eq!(asked.lock().unwrap()[0].tool, "fx__add");
        // A call nobody is asked about is not held up.
        assert_eq!(text_of(&echo(&hub, "fx", "free").await.unwrap()), "free");
        shut_down(&hub, "fx").await;
    });
}

/// Every route to a tool passes one gate: `Hub::request` with a `tools/call` (typed or raw)
/// and `Hub::call` with an entry made by hand are refused and asked exactly as `find` and
/// `call` are, and nothing the policy stops reaches the server.
#[test]
fn every_route_to_a_tool_passes_the_policy() {
    use mcp_smol::proto::Request;
    let dir = Scratch::new("hub-one-gate");
    let log = dir.0.join("received");
    let config = format!(
        "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\", \"--log-received\", {log:?}]\n\
         disabled_tools = [\"blob\"]\n\n\
         [[permissions.rules]]\ntool = \"fx__fail\"\naction = \"deny\"\n\n\
         [[permissions.rules]]\ntool = \"fx__add\"\naction = \"ask\"\n"
    );
    let path = dir.write("config.toml", &config);
    let env = |_: &str| None;
    let config = mcp_client_cli::config::load(&[(path, true)], &env).unwrap();
    let hub = hub_of(config.servers, config.policy, None);
    bounded(async {
        let typed = hub
            .request("fx", Request::call_tool("fail", json!({})))
            .await;
        assert!(
            matches!(typed, Err(HubError::ToolDenied { .. })),
            "{typed:?}"
        );
        let raw = Request::new("tools/call", Some(json!({"name": "blob", "arguments": {}})));
        let raw = hub.request("fx", raw).await;
        assert!(matches!(raw, Err(HubError::ToolFiltered { .. })), "{raw:?}");
        let asked = hub
            .request("fx", Request::call_tool("add", json!({"a": 1, "b": 2})))
            .await;
        assert!(
            matches!(asked, Err(HubError::NotApproved { .. })),
            "{asked:?}"
        );

        // An entry made by hand, claiming no `ask` rule covers it, is asked all the same.
        let mut forged = hub.find("fx__echo").await.unwrap();
        std::sync::Arc::make_mut(&mut forged.tool).name = "add".to_owned();
        forged.name = "fx__echo".to_owned();
        let called = hub.call(&forged, json!({"a": 1, "b": 2})).await;
        assert!(
            matches!(called, Err(HubError::NotApproved { .. })),
            "{called:?}"
        );

        // The name a model gives goes through the same gate, and so does a name that
        // reaches a tool only once made provider-safe.
        let by_name = hub.call("fx__fail", json!({})).await;
        assert!(
            matches!(by_name, Err(HubError::ToolDenied { .. })),
            "{by_name:?}"
        );
        let by_name = hub.call("fx.blob", json!({})).await;
        let filtered = matches!(by_name, Err(HubError::ToolFiltered { .. }));
        assert!(filtered, "{by_name:?}");
        let by_name = hub.call("fx__add", json!({"a": 1, "b": 2})).await;
        let refused = matches!(by_name, Err(HubError::NotApproved { .. }));
        assert!(refused, "{by_name:?}");
        let name = String::from("fx__echo");
        let echoed = hub.call(&name, echo_args("by name")).await.unwrap();
        assert_eq!(text_of(&echoed), "by name");

        // What the gate lets through still goes the request way.
        let echoed = hub
            .request("fx", Request::call_tool("echo", echo_args("fine")))
            .await
            .unwrap();
        assert_eq!(crate::support::text(&echoed), "fine");
        shut_down(&hub, "fx").await;
    });
    let received = std::fs::read_to_string(&log).unwrap();
    assert!(received.contains("\"echo\""), "{received}");
    for stopped in ["\"fail\"", "\"blob\"", "\"add\""] {
        assert!(
            !received.contains(stopped),
            "{stopped} reached the server: {received}"
        );
    }
}

/// A call whose future is dropped, and one whose own timeout runs out, are cancelled on the
/// server (`notifications/cancelled` naming each call's request), and the server goes on
/// serving.
#[test]
fn a_dropped_or_timed_out_call_is_cancelled_on_the_server() {
    let dir = Scratch::new("hub-cancel");
    let log = dir.0.join("received");
    let command = fixture("good", &["--log-received", log.to_str().unwrap()]);
    let hub = hub_of(vec![server("fx", command)], Policy::default(), None);
    bounded(async {
        // Dropped once its first progress report shows the server is working on it.
        let (working, first_report) = smol::channel::bounded(1);
        let call = (hub.call("fx__progress", json!({"steps": 1000, "ms": 20})))
            .on_progress(move |_| _ = working.try_send(()))
            .into_future();
        let gave_up = async {
            first_report.recv().await.unwrap();
            None
        };
        let finished = futures_lite::future::or(async { Some(call.await) }, gave_up).await;
        assert!(finished.is_none(), "{finished:?}");
        let timed_out = (hub.call("fx__sleep", json!({"ms": 10_000})))
            .timeout(Duration::from_millis(200))
            .await;
        assert!(
            matches!(
                timed_out,
                Err(HubError::Server {
                    error: mcp_client_cli::smol::Error::Request(
                        mcp_client_cli::RequestError::TimedOut { .. }
                    ),
                    ..
                })
            ),
            "{timed_out:?}"
        );
        assert_eq!(text_of(&echo(&hub, "fx", "after").await.unwrap()), "after");
        shut_down(&hub, "fx").await;
    });
    let received: Vec<Value> = (std::fs::read_to_string(&log).unwrap().lines())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let call_id = |tool: &str| {
        let call = received.iter().find(|m| m["params"]["name"] == tool);
        call.map(|message| message["id"].clone())
    };
    let cancelled: Vec<Value> = (received.iter())
        .filter(|message| message["method"] == "notifications/cancelled")
        .map(|message| message["params"]["requestId"].clone())
        .collect();
    let (progress, sleep) = (call_id("progress").unwrap(), call_id("sleep").unwrap());
    assert_eq!(cancelled, [progress, sleep], "{received:?}");
}

#[test]
fn ask_without_a_handler_is_refused() {
    bounded(async {
        let mut policy = Policy::default();
        let config = format!(
            "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\n\n\
             [[permissions.rules]]\ntool = \"fx__*\"\naction = \"ask\"\n"
        );
        let env = |_: &str| None;
        let parsed =
            mcp_client_cli::config::parse_file(std::path::Path::new("/t/c.toml"), &config, &env)
                .unwrap();
        policy.rules = parsed.policy.rules;
        let hub = hub_of(parsed.servers, policy, None);
        let error = echo(&hub, "fx", "x").await.unwrap_err();
        assert!(matches!(error, HubError::NotApproved { .. }), "{error:?}");
        hub.shutdown().await;
    });
}

#[test]
fn a_hub_dropped_without_shutdown_still_lets_its_servers_go() {
    bounded(async {
        let hub = hub_of(
            vec![server("fx", fixture("good", &[]))],
            Policy::default(),
            None,
        );
        assert!(hub.catalogue().await.failures.is_empty());
        let pid = pid_of(&hub, "fx");
        // Replacing a running server closes the old one.
        hub.add(server("fx", fixture("good", &[])));
        assert_group_gone(pid);
        assert_eq!(text_of(&echo(&hub, "fx", "again").await.unwrap()), "again");
        let pid = pid_of(&hub, "fx");
        let events = hub.events();
        drop(hub);
        assert_group_gone(pid);
        // The event stream ends with the hub.
        while events.recv().await.is_some() {}
    });
}

#[test]
fn every_progress_report_reaches_the_caller() {
    bounded(async {
        let hub = hub_of(
            vec![server("fx", fixture("good", &[]))],
            Policy::default(),
            None,
        );
        let tool = hub.find("fx__progress").await.unwrap();
        // Reports sent right before the answer must not be lost to it.
        for _ in 0..20 {
            let seen = std::sync::atomic::AtomicUsize::new(0);
            let count = |_| {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            };
            let result = hub
                .call(&tool, json!({"steps": 3, "ms": 0}))
                .on_progress(count)
                .await;
            assert_eq!(text_of(&result.unwrap()), "done 3 steps");
            assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 3);
        }
        shut_down(&hub, "fx").await;
    });
}

#[test]
fn calls_side_by_side_each_hear_their_own_progress() {
    bounded(async {
        let hub = hub_of(
            vec![server("fx", fixture("good", &[]))],
            Policy::default(),
            None,
        );
        let tool = hub.find("fx__progress").await.unwrap();
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let (three, five) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let on_three = |_| _ = three.fetch_add(1, SeqCst);
        let on_five = |_| _ = five.fetch_add(1, SeqCst);
        let a = (hub.call(&tool, json!({"steps": 3, "ms": 20})))
            .on_progress(on_three)
            .into_future();
        let b = (hub.call(&tool, json!({"steps": 5, "ms": 20})))
            .on_progress(on_five)
            .into_future();
        let (a, b) = futures_lite::future::zip(a, b).await;
        assert_eq!(text_of(&a.unwrap()), "done 3 steps");
        assert_eq!(text_of(&b.unwrap()), "done 5 steps");
        assert_eq!(three.load(SeqCst), 3);
        assert_eq!(five.load(SeqCst), 5);
        shut_down(&hub, "fx").await;
    });
}

/// An embedder matches a server's JSON-RPC error by its code and a broken config by its key,
/// naming the types through `mcp_client_cli` alone and reading neither message.
#[test]
fn errors_are_matched_by_code_and_key_not_by_text() {
    bounded(async {
        let hub = hub_of(
            vec![server("fx", fixture("good", &[]))],
            Policy::default(),
            None,
        );
        let fail = hub.find("fx__fail").await.unwrap();
        let error = (hub.call(&fail, json!({ "rpc": true })).await).unwrap_err();
        assert_eq!(error.rpc_code(), Some(-32603));
        assert!(matches!(
            error.rpc_error(),
            Some(mcp_client_cli::RpcError { code: -32603, .. })
        ));
        // A tool's own failure is a result, decoded with the re-exported type; no code.
        let result = hub.call(&fail, json!({})).await.unwrap();
        assert!(
            mcp_client_cli::CallToolResult::from_value(result)
                .unwrap()
                .is_error
        );
        assert_eq!(hub.find("fx__nope").await.unwrap_err().rpc_code(), None);
        shut_down(&hub, "fx").await;
    });
    let env = |_: &str| -> Option<String> { None };
    let text = "[mcp.fx]\ncommand = \"x\"\nargs = \"not a list\"\n";
    let error = mcp_client_cli::config::parse_file(std::path::Path::new("/t/c.toml"), text, &env)
        .unwrap_err();
    assert_eq!(error.kind, mcp_client_cli::config::ConfigErrorKind::Invalid);
    assert_eq!(error.key.as_deref(), Some("mcp.fx.args"));
    assert_eq!(error.line, Some(3));
}

/// An embedder's hub knows the servers of the file it names and nothing else: a preset's name
/// (a plausible guess by a model) and the servers of a `.mcp.json` or `.mcp-cli.toml` in the
/// folder reach nothing, while the command line still has its presets.
#[test]
fn an_embedders_hub_runs_only_the_servers_its_file_names() {
    let dir = Scratch::new("hub-only-named");
    let reached = dir.0.join("project-received");
    let project = format!(
        "[mcp.proj]\ncommand = {FIXTURE:?}\nargs = [\"good\", \"--log-received\", {reached:?}]\n"
    );
    dir.write(".mcp-cli.toml", &project);
    let args = json!(["good", "--log-received", reached]);
    let json = json!({"mcpServers": {"json": {"command": FIXTURE, "args": args}}});
    dir.write(".mcp.json", &json.to_string());
    let named = format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\n");
    let path = dir.write("agent.toml", &named);
    let config = Config::from_files(&[&path]).unwrap();
    bounded(async {
        let hub = Hub::new(config, Settings::default());
        let guesses = [
            ("filesystem__read_text_file", "filesystem"),
            ("everything__echo", "everything"),
            ("memory__read_graph", "memory"),
            ("proj__echo", "proj"),
            ("json__echo", "json"),
        ];
        for (guess, server) in guesses {
            match hub.find(guess).await {
                Err(HubError::UnknownServer { given, known }) => {
                    assert_eq!((given.as_str(), known), (server, vec!["fx".to_owned()]));
                }
                other => panic!("{guess}: {other:?}"),
            }
        }
        // Nothing started, and the status lists the named file's server alone.
        let status = hub.status();
        assert_eq!(status.len(), 1, "{status:?}");
        assert_eq!(
            (status[0].name.as_str(), status[0].state),
            ("fx", State::Stopped)
        );
        hub.find("fx__echo").await.unwrap();
        hub.shutdown().await;
    });
    assert!(!reached.exists(), "a project server was started");
    // The command line opts into the presets, beside the file it is given.
    let run = dir.cli(&["--config", path.to_str().unwrap(), "--json", "servers"]);
    let rows: Vec<Value> =
        serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{error}: {run:?}"));
    let names: Vec<&str> = rows.iter().filter_map(|row| row["name"].as_str()).collect();
    assert_eq!(
        names,
        ["everything", "filesystem", "fx", "memory"],
        "{run:?}"
    );
    assert!(
        rows.iter()
            .all(|row| row["preset"] == (row["name"] != "fx"))
    );
}

/// A server that asks again for a form its caller declined has the call refused as declined;
/// one that asks for ever whatever the answer still fails as a server that broke off.
#[test]
fn a_declined_form_asked_again_is_a_refusal_not_a_server_failure() {
    bounded(async {
        for (answer, declined) in [
            (ElicitAnswer::Decline, true),
            (ElicitAnswer::Cancel, true),
            // An answer that fits the form (its `name` is required): the server still asks.
            (
                ElicitAnswer::Accept(json!({"name": "Ada"}).as_object().unwrap().clone()),
                false,
            ),
        ] {
            let settings = Settings::builder()
                .elicit(move |_| {
                    let answer = answer.clone();
                    async move { answer }
                })
                .build();
            let config = Config {
                servers: vec![server("fx", fixture("input-loop", &[]))],
                ..Config::default()
            };
            let hub = Hub::new(config, settings);
            let tool = hub.find("fx__ask").await.unwrap();
            let error = hub.call(&tool, json!({})).await.unwrap_err();
            match (&error, declined) {
                (
                    HubError::FormDeclined {
                        server,
                        tool,
                        rounds,
                    },
                    true,
                ) => {
                    assert_eq!(
                        (server.as_str(), tool.as_str(), *rounds),
                        ("fx", "fx__ask", 8)
                    );
                    assert!(error.to_string().contains("declined"), "{error}");
                }
                (HubError::Server { .. }, false) => {
                    assert!(error.to_string().contains("after 8 rounds"), "{error}");
                }
                _ => panic!("declined {declined}: {error:?}"),
            }
            hub.shutdown().await;
        }
    });
}
