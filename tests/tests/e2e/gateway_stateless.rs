//! `mcp-cli serve` before hosts of the stateless era (2026-07-28): our own client fixed at that
//! revision, raw lines for what no client would send, and the TypeScript SDK v2 and Python SDK
//! 2.x clients. A backend's form reaches the host as an `input_required` round and its answer
//! goes back; a backend's list change reaches the host's `subscriptions/listen`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_smol::proto::{ClientCapabilities, ListenFilter, Protocol, Request, Tool};
use mcp_smol::serde_json::{Value, json};
use mcp_smol::{Client, Options, ServerCommand};

use crate::support::{FIXTURE, Scratch, bounded, cli_binary, close_and_check, quick, text};

/// A config with the fixture as `fx`, a stateless-era backend whose `ask` tool wants a form
/// and whose tool list changes after its first call; every line it receives is logged.
fn config(scratch: &Scratch) -> (PathBuf, PathBuf) {
    let log = scratch.0.join("received.log");
    let text = format!(
        "[mcp.fx]\ncommand = {FIXTURE:?}\n\
         args = [\"list-changed\", \"--era\", \"stateless\", \"--log-received\", {log:?}]\n"
    );
    (scratch.write("gateway.toml", &text), log)
}

/// `mcp-cli serve` on `config`, in the scratch folder's isolated environment.
fn serve(scratch: &Scratch, config: &std::path::Path, extra_env: &[(&str, &str)]) -> ServerCommand {
    let dir = |name: &str| scratch.0.join(name).display().to_string();
    let mut command = ServerCommand::new(cli_binary().display().to_string())
        .args(["--config", &config.display().to_string(), "serve"]);
    command.cwd = Some(scratch.0.clone());
    let env = [
        ("XDG_STATE_HOME", dir("state")),
        ("XDG_CONFIG_HOME", dir("config-home")),
        ("MCP_CLI_NPM_PREFIX", dir("no-npm")),
        ("MCP_CLI_LIST_WAIT_MS", "120000".to_owned()),
    ];
    for (key, value) in env {
        command.env.insert(key.to_owned(), value);
    }
    for (key, value) in extra_env {
        command.env.insert((*key).to_owned(), (*value).to_owned());
    }
    command
}

/// Our client at the stateless revision, declaring elicitation, patient with a backend that
/// starts on a loaded machine.
fn modern_host() -> Options {
    let mut options = quick();
    options.core.protocol = Protocol::Revision("2026-07-28");
    options.core.handshake_timeout = Duration::from_secs(30);
    options.core.request_timeout = Duration::from_secs(30);
    options.core.capabilities = ClientCapabilities {
        elicitation: true,
        ..ClientCapabilities::default()
    };
    options
}

async fn next_of(
    notifications: &async_channel_like::Receiver<mcp_smol::Notification>,
    method: &str,
) -> mcp_smol::Notification {
    loop {
        let notification = notifications.recv().await.unwrap();
        if notification.method == method {
            return notification;
        }
    }
}

mod async_channel_like {
    pub(crate) use smol::channel::Receiver;
}

/// Answers every form with `answer`, counting them.
async fn answer_forms(client: &Client, answer: Value) -> Arc<AtomicUsize> {
    let asked = client.server_requests().await;
    let count = Arc::new(AtomicUsize::new(0));
    let (counted, client) = (count.clone(), client.clone());
    smol::spawn(async move {
        while let Ok(request) = asked.recv().await {
            assert_eq!(request.method, "elicitation/create");
            counted.fetch_add(1, Ordering::SeqCst);
            client.respond(request.id, Ok(answer.clone())).await;
        }
    })
    .detach();
    count
}

#[test]
fn our_client_at_2026_07_28_lists_calls_answers_a_form_and_hears_a_list_change() {
    let scratch = Scratch::new("gateway-modern-ours");
    let (config, log) = config(&scratch);
    let command = serve(&scratch, &config, &[]);
    bounded(async {
        let (client, driver) = mcp_smol::start(&command, modern_host()).unwrap();
        smol::spawn(driver).detach();
        let info = client.wait_ready().await.unwrap();
        assert_eq!(info.protocol_version, "2026-07-28");
        assert_eq!(info.server.name, "mcp-cli");
        assert!(info.capabilities.tools.is_some(), "{info:?}");

        // Listening before the first call, which changes the backend's tools.
        let notifications = client.notifications().await;
        let filter = ListenFilter {
            tools_list_changed: true,
            ..ListenFilter::default()
        };
        let listening = client.clone();
        let listen = smol::spawn(async move { listening.request(Request::listen(&filter)).await });
        let ack = next_of(&notifications, "notifications/subscriptions/acknowledged").await;
        let subscription = ack.subscription_id().expect("the ack names the subscription");
        assert_eq!(ack.acknowledged().map(|agreed| agreed.tools_list_changed), Some(true));

        let tools = client.list_all::<Tool>().await.unwrap();
        let names: Vec<&str> = tools.items.iter().map(|tool| tool.name.as_str()).collect();
        assert!(names.contains(&"fx__echo") && names.contains(&"fx__ask"), "{names:?}");
        assert!(!names.contains(&"fx__extra"), "{names:?}");

        let echoed = client.call_tool("fx__echo", json!({"text": "hi fx"})).await.unwrap();
        assert_eq!(text(&echoed), "hi fx");
        let changed = next_of(&notifications, "notifications/tools/list_changed").await;
        assert_eq!(changed.subscription_id(), Some(subscription));
        let tools = client.list_tools().await.unwrap();
        assert!(tools.iter().any(|tool| tool.name == "fx__extra"), "{tools:?}");

        // The backend's form comes to us as an input round of our call, and our answer
        // reaches the backend, which also checks its own `requestState` came back whole.
        let asked = answer_forms(&client, json!({"action": "accept", "content": {"name": "Ada"}})).await;
        let greeted = client.call_tool("fx__ask", json!({})).await.unwrap();
        assert!(!greeted.is_error, "{greeted:?}");
        assert_eq!(text(&greeted), r#"accept {"name":"Ada"}"#);
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        drop(listen);
        close_and_check(&client).await;
    });
    // The backend's own round went to it with its state; our host never saw that state.
    let received = std::fs::read_to_string(log).unwrap();
    assert!(received.contains("inputResponses"), "{received}");
}

/// A host that writes raw stateless-era lines to `serve` and reads its answers.
struct RawModernHost {
    serve: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl RawModernHost {
    fn start(command: &ServerCommand) -> Self {
        let mut serve = std::process::Command::new(&command.program)
            .args(&command.args)
            .envs(&command.env)
            .current_dir(command.cwd.as_ref().unwrap())
            .env_remove("MCP_CLI_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = serve.stdin.take().unwrap();
        let stdout = BufReader::new(serve.stdout.take().unwrap());
        Self {
            serve,
            stdin,
            stdout,
        }
    }

    /// Sends request `id` with the era's `_meta` (at `version`) and reads lines until its
    /// answer.
    fn request(&mut self, id: u64, method: &str, mut params: Value, version: &str) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "0"},
        });
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{request}").unwrap();
        loop {
            let mut line = String::new();
            self.stdout.read_line(&mut line).unwrap();
            let line: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("{line:?}"));
            if line["id"] == id {
                return line;
            }
        }
    }
}

impl Drop for RawModernHost {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

#[test]
fn a_raw_modern_host_gets_version_refusals_and_a_call_left_waiting_is_cancelled() {
    let scratch = Scratch::new("gateway-modern-raw");
    let (config, _) = config(&scratch);
    let command = serve(&scratch, &config, &[("MCP_CLI_INPUT_WAIT_MS", "200")]);
    let mut host = RawModernHost::start(&command);

    let refused = host.request(1, "server/discover", json!({}), "2099-01-01");
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    let supported = &refused["error"]["data"]["supported"];
    assert!(supported.as_array().unwrap().contains(&json!("2026-07-28")), "{refused}");
    let found = host.request(2, "server/discover", json!({}), "2026-07-28");
    assert_eq!(found["result"]["resultType"], "complete", "{found}");

    let call = json!({"name": "fx__ask", "arguments": {}});
    let round = host.request(3, "tools/call", call.clone(), "2026-07-28");
    let result = &round["result"];
    assert_eq!(result["resultType"], "input_required", "{round}");
    let (key, form) = result["inputRequests"].as_object().unwrap().iter().next().unwrap();
    assert_eq!(form["method"], "elicitation/create");
    assert_eq!(form["params"]["message"], "What is your name?");
    // Our own state, not the backend's: that one stays between the gateway and the backend.
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert!(!state.contains("ask/1"), "{state}");
    // A retry of another tool cannot take this call over, nor does it end it.
    let mut wrong = json!({"name": "fx__echo", "arguments": {"text": "x"}});
    wrong["requestState"] = json!(state);
    wrong["inputResponses"] = json!({ key: {"action": "accept", "content": {"name": "Eve"}} });
    let refused = host.request(4, "tools/call", wrong.clone(), "2026-07-28");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("belongs to tools/call fx__ask"), "{message}");

    // The host never retries: once its wait ends, the call is dropped (a stateless-era
    // backend holds nothing for it; a handshake-era one would be sent a cancellation).
    let deadline = Instant::now() + Duration::from_secs(30);
    for id in 5.. {
        let refused = host.request(id, "tools/call", wrong.clone(), "2026-07-28");
        let message = refused["error"]["message"].as_str().unwrap().to_owned();
        if message.contains("no call waiting") {
            break;
        }
        assert!(message.contains("belongs to"), "{message}");
        assert!(Instant::now() < deadline, "the parked call outlived its wait");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut late = call;
    late["requestState"] = json!(state);
    late["inputResponses"] = json!({ key: {"action": "accept", "content": {"name": "Ada"}} });
    let expired = host.request(1000, "tools/call", late, "2026-07-28");
    assert_eq!(expired["error"]["code"], -32602, "{expired}");
    let message = expired["error"]["message"].as_str().unwrap();
    assert!(message.contains("no call waiting"), "{message}");
}
