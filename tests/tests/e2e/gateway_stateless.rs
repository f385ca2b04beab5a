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
pub(crate) fn serve(
    scratch: &Scratch,
    config: &std::path::Path,
    extra_env: &[(&str, &str)],
) -> ServerCommand {
    let dir = |name: &str| scratch.0.join(name).display().to_string();
    let mut command = ServerCommand::new(cli_binary().display().to_string()).args([
        "--config",
        &config.display().to_string(),
        "serve",
    ]);
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

/// A W3C trace context a host sends in `_meta`.
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

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
        let subscription = ack
            .subscription_id()
            .expect("the ack names the subscription");
        assert_eq!(
            ack.acknowledged().map(|agreed| agreed.tools_list_changed),
            Some(true)
        );

        let tools = client.list_all::<Tool>().await.unwrap();
        let names: Vec<&str> = tools.items.iter().map(|tool| tool.name.as_str()).collect();
        assert!(
            names.contains(&"fx__echo") && names.contains(&"fx__ask"),
            "{names:?}"
        );
        assert!(!names.contains(&"fx__extra"), "{names:?}");

        // The host's trace context goes on to the backend's call.
        let trace = json!({"traceparent": TRACEPARENT, "tracestate": "gw=1", "baggage": "k=v"});
        let call = Request::call_tool("fx__echo", json!({"text": "hi fx"}));
        let call = call.meta(trace.as_object().unwrap().clone());
        let echoed = client.request(call).await.unwrap();
        assert_eq!(text(&echoed), "hi fx");
        let changed = next_of(&notifications, "notifications/tools/list_changed").await;
        assert_eq!(changed.subscription_id(), Some(subscription));
        let tools = client.list_tools().await.unwrap();
        assert!(
            tools.iter().any(|tool| tool.name == "fx__extra"),
            "{tools:?}"
        );

        // The backend's form comes to us as an input round of our call, and our answer
        // reaches the backend, which also checks its own `requestState` came back whole.
        let asked = answer_forms(
            &client,
            json!({"action": "accept", "content": {"name": "Ada"}}),
        )
        .await;
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
    let traced = (received.lines())
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["params"]["name"] == "echo")
        .expect("the backend received the echo call");
    let meta = &traced["params"]["_meta"];
    assert_eq!(meta["traceparent"], TRACEPARENT, "{traced}");
    assert_eq!(
        (meta["tracestate"].clone(), meta["baggage"].clone()),
        (json!("gw=1"), json!("k=v"))
    );
}

/// A host that writes raw stateless-era lines to `serve` and reads its answers.
pub(crate) struct RawModernHost {
    serve: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    /// The lines read that answered none of our requests (notifications), in order.
    pub(crate) others: Vec<Value>,
}

impl RawModernHost {
    pub(crate) fn start(command: &ServerCommand) -> Self {
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
            others: Vec::new(),
        }
    }

    /// Sends request `id` with the era's `_meta` (at `version`, declaring forms) and reads
    /// lines until its answer.
    fn request(&mut self, id: u64, method: &str, params: Value, version: &str) -> Value {
        self.declaring(id, method, params, version, json!({"elicitation": {}}))
    }

    /// [`request`](Self::request), declaring `capabilities` in its `_meta`.
    pub(crate) fn declaring(
        &mut self,
        id: u64,
        method: &str,
        mut params: Value,
        version: &str,
        capabilities: Value,
    ) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
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
            self.others.push(line);
        }
    }
}

impl Drop for RawModernHost {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

/// A host that declares no forms has its call run at once, and the backend's result passed on
/// as the text it sent: the backend's era's own members (its server identity) are gone, the
/// host's era's `resultType` is there, and the rest is as the backend sent it.
#[test]
fn a_result_passed_on_unread_carries_the_hosts_era_not_the_backends() {
    let scratch = Scratch::new("gateway-modern-unread");
    let (config, _) = config(&scratch);
    let command = serve(&scratch, &config, &[]);
    let mut host = RawModernHost::start(&command);
    for id in 1..=2 {
        let call = json!({"name": "fx__echo", "arguments": {"text": format!("hi {id}")}});
        let answer = host.declaring(id, "tools/call", call, "2026-07-28", json!({}));
        let expected = json!({
            "content": [{"type": "text", "text": format!("hi {id}")}],
            "resultType": "complete",
        });
        assert_eq!(answer["result"], expected, "{answer}");
    }
}

#[test]
fn a_raw_modern_host_gets_version_refusals_and_a_call_left_waiting_is_dropped() {
    let scratch = Scratch::new("gateway-modern-raw");
    let (config, _) = config(&scratch);
    let command = serve(&scratch, &config, &[("MCP_CLI_INPUT_WAIT_MS", "200")]);
    let mut host = RawModernHost::start(&command);

    let refused = host.request(1, "server/discover", json!({}), "2099-01-01");
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    let supported = &refused["error"]["data"]["supported"];
    assert!(
        supported.as_array().unwrap().contains(&json!("2026-07-28")),
        "{refused}"
    );
    let found = host.request(2, "server/discover", json!({}), "2026-07-28");
    assert_eq!(found["result"]["resultType"], "complete", "{found}");

    let call = json!({"name": "fx__ask", "arguments": {}});
    let round = host.request(3, "tools/call", call.clone(), "2026-07-28");
    let result = &round["result"];
    assert_eq!(result["resultType"], "input_required", "{round}");
    let (key, form) = result["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
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
    assert!(
        message.contains("belongs to tools/call fx__ask"),
        "{message}"
    );

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
        assert!(
            Instant::now() < deadline,
            "the parked call outlived its wait"
        );
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

/// A TypeScript SDK v2 host at `era` (a pinned revision, or `auto`): connect, listen for tool
/// changes, list, call, hear the change, list again, and a call whose backend asks for a form
/// (answered by the SDK's own `elicitation/create` handler through its input rounds).
const TS_HOST: &str = r#"
const [pkg, config, era] = process.argv.slice(2);
const { Client } = await import(`${pkg}/dist/index.mjs`);
const { StdioClientTransport } = await import(`${pkg}/dist/stdio.mjs`);
const print = (step, value) => console.log(JSON.stringify({ step, ...value }));
const text = (result) => result.content.map((item) => item.text ?? "").join("");

const transport = new StdioClientTransport({
  command: process.env.MCP_CLI,
  args: ["--config", config, "serve"],
  env: process.env,
  stderr: "inherit",
});
const mode = era === "auto" ? "auto" : { pin: era };
const client = new Client({ name: "ts-modern", version: "1" }, {
  capabilities: { elicitation: { form: {} } },
  versionNegotiation: { mode },
});
const forms = [];
client.setRequestHandler("elicitation/create", async (request) => {
  forms.push(request.params.message);
  return { action: "accept", content: { name: "Ada" } };
});
let changed = null;
const listChanged = new Promise((resolve) => { changed = resolve; });
client.setNotificationHandler("notifications/tools/list_changed", () => changed());
await client.connect(transport);
print("connected", { version: client.getNegotiatedProtocolVersion?.() ?? null });

const subscription = await client.listen({ toolsListChanged: true });
print("listen", { honored: subscription.honoredFilter });
const names = (await client.listTools()).tools.map((tool) => tool.name);
print("list", { names });
print("echo", { text: text(await client.callTool({ name: "fx__echo", arguments: { text: "hi ts" } })) });
const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("no list_changed within 20 s")), 20000));
await Promise.race([listChanged, timeout]);
const after = (await client.listTools({}, { cacheMode: "refresh" }).catch(() => client.listTools())).tools.map((tool) => tool.name);
print("list-changed", { names: after });
const asked = await client.callTool({ name: "fx__ask", arguments: {} });
print("ask", { text: text(asked), isError: asked.isError === true, forms });
await subscription.close();
await client.close();
"#;

/// The Python SDK 2.x host, which chooses the era itself: the same steps.
const PY_HOST: &str = r#"
import asyncio, json, os, sys
from mcp import Client, StdioServerParameters
from mcp import types

def show(step, **value):
    print(json.dumps({"step": step, **value}), flush=True)

def text(result):
    return "".join(getattr(item, "text", "") for item in result.content)

async def main(config):
    forms = []
    async def elicit(context, params):
        forms.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})
    server = StdioServerParameters(command=os.environ["MCP_CLI"], args=["--config", config, "serve"], env=dict(os.environ))
    async with Client(server, elicitation_callback=elicit) as client:
        show("connected", version=client.protocol_version)
        async with client.listen(tools_list_changed=True) as sub:
            show("listen", honored=sub.honored.model_dump(exclude_none=True))
            names = [tool.name for tool in (await client.list_tools()).tools]
            show("list", names=names)
            show("echo", text=text(await client.call_tool("fx__echo", {"text": "hi py"})))
            event = await asyncio.wait_for(sub.__anext__(), 20)
            show("event", kind=type(event).__name__)
            names = [tool.name for tool in (await client.list_tools()).tools]
            show("list-changed", names=names)
        asked = await client.call_tool("fx__ask", {})
        show("ask", text=text(asked), isError=bool(asked.is_error), forms=forms)

asyncio.run(main(sys.argv[1]))
"#;

/// Runs a host script against `serve` on the test config; returns each JSON line it printed.
pub(crate) fn run_host(
    scratch: &Scratch,
    config: &std::path::Path,
    program: &std::path::Path,
    args: &[&str],
) -> Vec<Value> {
    let command = serve(scratch, config, &[]);
    let output = std::process::Command::new(program)
        .args(args)
        .current_dir(&scratch.0)
        .envs(&command.env)
        .env("MCP_CLI", &command.program)
        .env_remove("MCP_CLI_CONFIG")
        .output()
        .expect("run the host script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the host script failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// What every host must have seen: the stateless revision, the listen honoured, the tools,
/// the call, the change, and the form answered.
fn check_host_steps(lines: &[Value]) {
    let step = |name: &str| {
        (lines.iter().find(|line| line["step"] == name))
            .unwrap_or_else(|| panic!("no step {name} in {lines:#?}"))
    };
    assert_eq!(step("connected")["version"], "2026-07-28", "{lines:#?}");
    let names = step("list")["names"].as_array().unwrap();
    assert!(
        names.contains(&json!("fx__ask")) && !names.contains(&json!("fx__extra")),
        "{names:?}"
    );
    assert!(
        step("echo")["text"].as_str().unwrap().starts_with("hi "),
        "{lines:#?}"
    );
    let after = step("list-changed")["names"].as_array().unwrap();
    assert!(after.contains(&json!("fx__extra")), "{after:?}");
    let ask = step("ask");
    assert_eq!(ask["text"], r#"accept {"name":"Ada"}"#, "{ask}");
    assert_eq!(ask["isError"], false);
    assert_eq!(ask["forms"], json!(["What is your name?"]));
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn typescript_sdk_v2_host_pinned_and_auto() {
    let (node, package) = mcp_tests::ts_client();
    let package = package.display().to_string();
    // A state folder each: the second host would otherwise be served the first one's
    // listing from the catalogue on disk, taken after its call changed the tools.
    for (era, name) in [
        ("2026-07-28", "gateway-modern-ts"),
        ("auto", "gateway-auto-ts"),
    ] {
        let scratch = Scratch::new(name);
        let (config, _) = config(&scratch);
        let script = scratch.write("host.mjs", TS_HOST).display().to_string();
        let config_arg = config.display().to_string();
        let args = [script.as_str(), package.as_str(), config_arg.as_str(), era];
        let lines = run_host(&scratch, &config, &node, &args);
        check_host_steps(&lines);
    }
}

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn python_sdk_2_host_chooses_the_stateless_era() {
    let peer = mcp_tests::mcpserver_peer();
    let scratch = Scratch::new("gateway-modern-py");
    let (config, _) = config(&scratch);
    let script = scratch.write("host.py", PY_HOST);
    let (script, config_arg) = (script.display().to_string(), config.display().to_string());
    let lines = run_host(&scratch, &config, &peer.program, &[&script, &config_arg]);
    check_host_steps(&lines);
}

/// An `ask` rule before a stateless-era host: the yes-or-no comes as an input round of the
/// call it covers (accepted: the call goes through; declined: a tool error), and a request
/// that did not declare elicitation gets a tool error that says why.
#[test]
fn an_ask_rule_is_an_input_round_of_the_call() {
    let scratch = Scratch::new("gateway-modern-ask");
    let config = scratch.write(
        "ask.toml",
        &format!(
            "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\n\n\
             [[permissions.rules]]\ntool = \"fx__add\"\naction = \"ask\"\n"
        ),
    );
    let mut host = RawModernHost::start(&serve(&scratch, &config, &[]));
    let add = json!({"name": "fx__add", "arguments": {"a": 1, "b": 2}});
    for (id, action, sum) in [(1, "accept", Some("3")), (3, "decline", None)] {
        let round = host.request(id, "tools/call", add.clone(), "2026-07-28");
        let result = &round["result"];
        assert_eq!(result["resultType"], "input_required", "{round}");
        let (key, form) = result["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        assert!(
            form["params"]["message"]
                .as_str()
                .unwrap()
                .contains("fx__add"),
            "{form}"
        );
        let mut retry = add.clone();
        retry["requestState"] = result["requestState"].clone();
        retry["inputResponses"] = json!({ key: {"action": action} });
        let done = host.request(id + 1, "tools/call", retry, "2026-07-28");
        assert_eq!(done["result"]["resultType"], "complete", "{done}");
        match sum {
            Some(sum) => assert_eq!(done["result"]["content"][0]["text"], sum, "{done}"),
            None => assert_eq!(done["result"]["isError"], true, "{done}"),
        }
    }
    // Without elicitation in this request's `_meta`: refused, saying why.
    let mut bare = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": add});
    bare["params"]["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                      "io.modelcontextprotocol/clientCapabilities": {}});
    writeln!(host.stdin, "{bare}").unwrap();
    let refused = loop {
        let mut line = String::new();
        host.stdout.read_line(&mut line).unwrap();
        let line: Value = serde_json::from_str(&line).unwrap();
        if line["id"] == 9 {
            break line;
        }
    };
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let why = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(why.contains("elicitation"), "{why}");
}

/// Under `--search`, `call_tool` is a call like any other: a stateless-era host gets the
/// backend's form as an input round of it, and a wrong inner name is a tool error to correct.
#[test]
fn call_tool_under_search_takes_input_rounds() {
    let scratch = Scratch::new("gateway-modern-search");
    let (config, _log) = config(&scratch);
    let mut command = serve(&scratch, &config, &[]);
    command.args.push("--search".to_owned());
    bounded(async {
        let (client, driver) = mcp_smol::start(&command, modern_host()).unwrap();
        smol::spawn(driver).detach();
        client.wait_ready().await.unwrap();
        let asked = answer_forms(
            &client,
            json!({"action": "accept", "content": {"name": "Ada"}}),
        )
        .await;
        let greeted = (client.call_tool("call_tool", json!({"name": "fx__ask", "arguments": {}})))
            .await
            .unwrap();
        assert!(!greeted.is_error, "{greeted:?}");
        assert_eq!(text(&greeted), r#"accept {"name":"Ada"}"#);
        assert_eq!(asked.load(Ordering::SeqCst), 1);

        let wrong = (client.call_tool("call_tool", json!({"name": "fx__nope"})))
            .await
            .unwrap();
        assert!(wrong.is_error, "{wrong:?}");
        assert!(text(&wrong).contains("no tool nope"), "{}", text(&wrong));
        close_and_check(&client).await;
    });
}

/// Under `--proxy`, the `mcp` tool's `call` is a call like any other: a stateless-era host
/// gets the backend's form as an input round of it, and its answer reaches the backend.
#[test]
fn the_proxys_call_takes_input_rounds() {
    let scratch = Scratch::new("gateway-modern-proxy");
    let (config, log) = config(&scratch);
    let mut command = serve(&scratch, &config, &[]);
    command.args.push("--proxy".to_owned());
    bounded(async {
        let (client, driver) = mcp_smol::start(&command, modern_host()).unwrap();
        smol::spawn(driver).detach();
        client.wait_ready().await.unwrap();
        let asked = answer_forms(
            &client,
            json!({"action": "accept", "content": {"name": "Ada"}}),
        )
        .await;
        let call = json!({"action": "call", "server": "fx", "tool": "ask", "input": {}});
        let greeted = client.call_tool("mcp", call).await.unwrap();
        assert!(!greeted.is_error, "{greeted:?}");
        assert_eq!(text(&greeted), r#"accept {"name":"Ada"}"#);
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        close_and_check(&client).await;
    });
    let received = std::fs::read_to_string(log).unwrap();
    assert!(received.contains("inputResponses"), "{received}");
}
