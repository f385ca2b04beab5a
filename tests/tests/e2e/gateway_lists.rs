//! Hosts that list once (DESIGN §19): `serve`'s first `tools/list` holds the tools of servers
//! slow to start, and, once the catalogue has seen them, every server's at once whatever its
//! cache hint (one marks its listings `ttlMs: 0, private`, as servers on the Python SDK 2.x
//! do); calls still start their server; past the wait the list says it goes on. The one-shot
//! hosts are raw lines, the Inspector's command line and scripts on both SDK clients.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_smol::proto::{ListenFilter, Request};
use mcp_smol::{Client, Notification, ServerCommand};
use serde_json::{Value, json};

use crate::catalogue::starts;
use crate::gateway::RawHost;
use crate::gateway_listen::{host, listen_on};
use crate::gateway_stateless::RawModernHost;
use crate::support::{FIXTURE, Scratch, bounded, cli_binary};

/// The revision a stateless-era host speaks.
const MODERN: &str = "2026-07-28";

/// The fixture with `args` as server `name`.
fn block(name: &str, args: &[&str]) -> String {
    format!("[mcp.{name}]\ncommand = {FIXTURE:?}\nargs = {args:?}\n\n")
}

/// Three servers that each take 3 s to start: one of the handshake era, one of the stateless
/// era marking its listings `ttlMs: 0, cacheScope: private`, one marking them public.
pub(crate) fn slow_config(scratch: &Scratch) -> PathBuf {
    let slow = ["--start-delay-ms", "3000"];
    let stateless = |ttl: &'static str, scope: &'static str| {
        let hints = [
            "--era",
            "stateless",
            "--ttl-ms",
            ttl,
            "--cache-scope",
            scope,
        ];
        [&["good"][..], &hints, &slow].concat()
    };
    let text = [
        block("hs", &[&["good"][..], &slow].concat()),
        block("py", &stateless("0", "private")),
        block("pub", &stateless("600000", "public")),
    ]
    .concat();
    scratch.write("slow.toml", &text)
}

/// `mcp-cli --config CONFIG serve` in the scratch folder, with `env` beside its own: no
/// `MCP_CLI_LIST_WAIT_MS` unless `env` sets it, so the wait is the one users get.
fn serve(scratch: &Scratch, config: &Path, env: &[(&str, &str)]) -> ServerCommand {
    let config = config.display().to_string();
    let mut command =
        ServerCommand::new(cli_binary().display().to_string()).args(["--config", &config, "serve"]);
    command.cwd = Some(scratch.0.clone());
    let dir = |name: &str| scratch.0.join(name).display().to_string();
    let own = [
        ("XDG_STATE_HOME", dir("state")),
        ("XDG_CONFIG_HOME", dir("config-home")),
        ("MCP_CLI_NPM_PREFIX", dir("no-npm")),
    ];
    for (key, value) in own {
        command.env.insert(key.to_owned(), value);
    }
    for (key, value) in env {
        command.env.insert((*key).to_owned(), (*value).to_owned());
    }
    command
}

/// The names a `tools/list` answer holds.
fn names(answer: &Value) -> Vec<String> {
    (answer["result"]["tools"].as_array())
        .unwrap_or_else(|| panic!("no tools in {answer}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Asserts that `names` holds the `echo` of each of `servers`.
fn assert_all(names: &[String], servers: &[&str], how: &str) {
    for server in servers {
        let echo = format!("{server}__echo");
        assert!(
            names.contains(&echo),
            "{how}: {echo} missing from {names:?}"
        );
    }
}

#[test]
fn a_host_that_lists_once_gets_every_tool_of_servers_slow_to_start() {
    let scratch = Scratch::new("lists-once");
    let config = slow_config(&scratch);
    let servers = ["hs", "py", "pub"];

    // Nothing kept yet: the one list a handshake-era host asks for waits for all three.
    let args = ["--config", config.to_str().unwrap(), "serve"];
    let (mut gateway, mut host) = RawHost::start(&scratch, &args, "{}");
    let cold = host.request(1, "tools/list", json!({}));
    assert_all(&names(&cold), &servers, "cold");
    assert!(cold["result"].get("nextCursor").is_none(), "{cold}");
    drop(host);
    assert!(gateway.wait().unwrap().success());
    assert_eq!(servers.map(|name| starts(&scratch, name)), [1, 1, 1]);

    // Kept: a stateless-era host's one list has them all, and starts none, the server whose
    // listings are `ttlMs: 0, private` included.
    let mut modern = RawModernHost::start(&serve(&scratch, &config, &[]));
    let warm = modern.declaring(1, "tools/list", json!({}), MODERN, json!({}));
    assert_eq!(names(&warm), names(&cold), "{warm}");
    assert!(warm["result"].get("nextCursor").is_none(), "{warm}");
    assert_eq!(servers.map(|name| starts(&scratch, name)), [1, 1, 1]);

    // A call goes to the server itself, started for it, and to what it lists now.
    let call = json!({"name": "py__echo", "arguments": {"text": "hi"}});
    let called = modern.declaring(2, "tools/call", call, MODERN, json!({}));
    assert_eq!(called["result"]["content"][0]["text"], "hi", "{called}");
    assert_eq!(starts(&scratch, "py"), 2);
}

#[test]
fn past_the_wait_the_list_says_it_goes_on_and_its_next_page_waits_again() {
    let scratch = Scratch::new("lists-go-on");
    let started = scratch.0.join("late-may-start");
    let late = [
        "good",
        "--era",
        "stateless",
        "--ttl-ms",
        "0",
        "--cache-scope",
        "private",
        "--start-after",
        started.to_str().unwrap(),
    ];
    let config = [block("fx", &["good"]), block("late", &late)].concat();
    let config = scratch.write("go-on.toml", &config);
    let wait = [("MCP_CLI_LIST_WAIT_MS", "1000")];
    let mut host = RawModernHost::start(&serve(&scratch, &config, &wait));
    let list = |host: &mut RawModernHost, id: u64, params: Value| {
        host.declaring(id, "tools/list", params, MODERN, json!({}))
    };

    // `late` cannot start yet: its tools are still to come, and the list says so.
    let first = list(&mut host, 1, json!({}));
    let listed = names(&first);
    assert_all(&listed, &["fx"], "first page");
    assert!(
        !listed.iter().any(|name| name.starts_with("late__")),
        "{first}"
    );
    let result = &first["result"];
    assert_eq!(
        result["_meta"]["mcp-cli/starting"],
        json!(["late"]),
        "{first}"
    );
    assert_eq!(
        (&result["ttlMs"], &result["cacheScope"]),
        (&json!(0), &json!("private"))
    );
    let mut cursor = result["nextCursor"].clone();
    assert!(cursor.is_string(), "{first}");

    // Once it may start, the next page waits for it.
    std::fs::write(&started, "").unwrap();
    let mut later = Vec::new();
    let mut id = 2;
    while let Some(text) = cursor.as_str() {
        let page = list(&mut host, id, json!({ "cursor": text }));
        assert_eq!(page["result"]["cacheScope"], "private", "{page}");
        later.extend(names(&page));
        cursor = page["result"]["nextCursor"].clone();
        id += 1;
    }
    assert_all(&later, &["late"], "later pages");
    assert!(!later.contains(&"fx__echo".to_owned()), "{later:?}");

    // A cursor that is not ours, or names a server not served, is the host's mistake.
    let forged = [
        json!("elsewhere"),
        json!(r#"{"starting":["other"],"page":2}"#),
    ];
    for cursor in forged {
        let refused = list(&mut host, id, json!({ "cursor": cursor }));
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        id += 1;
    }
}

/// The next `method` among `notifications`, within `within`: a test failure if none comes.
async fn next_within(
    notifications: &smol::channel::Receiver<Notification>,
    method: &str,
    within: Duration,
) -> Notification {
    let next = async {
        loop {
            let notification = notifications.recv().await.unwrap();
            if notification.method == method {
                return notification;
            }
        }
    };
    let late = async {
        smol::Timer::after(within).await;
        panic!("no {method} within {within:?}");
    };
    smol::future::FutureExt::or(next, late).await
}

/// The names on the first page of `client`'s `tools/list`, and whether it says it goes on.
async fn first_page(client: &Client) -> (Vec<String>, bool) {
    let page = client.request(Request::list_tools(None)).await.unwrap();
    let names = page.items.iter().map(|tool| tool.name.clone()).collect();
    (names, page.next_cursor.is_some())
}

#[test]
fn over_listen_hosts_of_both_eras_hear_when_a_server_never_listed_comes_up() {
    let scratch = Scratch::new("lists-listen-late");
    let started = scratch.0.join("late-may-start");
    let late = [
        "good",
        "--era",
        "stateless",
        "--start-after",
        started.to_str().unwrap(),
    ];
    let config = [block("fx", &["good"]), block("late", &late)].concat();
    let config = scratch.write("late.toml", &config);
    let log = scratch.0.join("unused.log");
    let listening = listen_on(&scratch, &config, log, &[("MCP_CLI_LIST_WAIT_MS", "1000")]);
    bounded(async {
        // A host of the stateless era that holds `subscriptions/listen`, and one of the
        // handshake era, whose list changes come on its session's stream.
        let (modern, driver) = host(&listening, MODERN);
        smol::spawn(driver).detach();
        let (session, driver) = host(&listening, "2025-11-25");
        smol::spawn(driver).detach();
        modern.wait_ready().await.unwrap();
        session.wait_ready().await.unwrap();
        let modern_notes = modern.notifications().await;
        let session_notes = session.notifications().await;
        let filter = ListenFilter {
            tools_list_changed: true,
            ..ListenFilter::default()
        };
        let listener = modern.clone();
        let listen = smol::spawn(async move { listener.request(Request::listen(&filter)).await });
        let ack = next_within(
            &modern_notes,
            "notifications/subscriptions/acknowledged",
            Duration::from_secs(20),
        )
        .await;
        let subscription = ack.subscription_id().expect("the ack names it");

        // `late` has never listed and cannot start yet: each host's list goes on without it.
        for client in [&modern, &session] {
            let (names, goes_on) = first_page(client).await;
            assert!(names.contains(&"fx__echo".to_owned()), "{names:?}");
            assert!(!names.iter().any(|n| n.starts_with("late__")), "{names:?}");
            assert!(goes_on, "{names:?}");
        }

        // Once it starts, both hear of its tools, each where its era listens.
        std::fs::write(&started, "").unwrap();
        let within = Duration::from_secs(20);
        let method = "notifications/tools/list_changed";
        let changed = next_within(&modern_notes, method, within).await;
        assert_eq!(changed.subscription_id(), Some(subscription));
        next_within(&session_notes, method, within).await;
        for client in [&modern, &session] {
            let (names, goes_on) = first_page(client).await;
            assert_all(&names, &["fx", "late"], "after the change");
            assert!(!goes_on, "{names:?}");
        }
        drop(listen);
        modern.close().await;
        session.close().await;
    });
}

/// The environment a one-shot host passes on to `mcp-cli serve`: the scratch folder's state,
/// and the wait users get (no `MCP_CLI_LIST_WAIT_MS`).
fn host_env(scratch: &Scratch) -> Vec<(&'static str, String)> {
    let dir = |name: &str| scratch.0.join(name).display().to_string();
    vec![
        ("MCP_CLI", cli_binary().display().to_string()),
        ("XDG_STATE_HOME", dir("state")),
        ("XDG_CONFIG_HOME", dir("config-home")),
        ("MCP_CLI_NPM_PREFIX", dir("no-npm")),
    ]
}

/// Runs `program args` as a one-shot host and returns what it printed, which must be JSON.
fn one_shot(scratch: &Scratch, program: &Path, args: &[&str]) -> Value {
    let output = std::process::Command::new(program)
        .args(args)
        .current_dir(&scratch.0)
        // The Inspector keeps its own settings under the home folder: the scratch one.
        .env("HOME", scratch.0.join("home"))
        .envs(host_env(scratch))
        .env_remove("MCP_CLI_CONFIG")
        .env_remove("MCP_CLI_LIST_WAIT_MS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}:\n{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{args:?}: not JSON:\n{stdout}"))
}

/// The names in a `tools/list` result as a host prints it.
fn listed_names(result: &Value) -> Vec<String> {
    names(&json!({ "result": result }))
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_inspector_cli_lists_once_and_gets_every_tool_of_servers_slow_to_start() {
    let (node, launcher) = mcp_tests::inspector_cli();
    let scratch = Scratch::new("lists-inspector");
    let config = slow_config(&scratch);
    let servers = ["hs", "py", "pub"];
    // The Inspector starts `serve` itself, after `--` so that our `--config` is not taken
    // for its own; it passes on only the variables it is given.
    let mut args = vec![launcher.display().to_string(), "--cli".to_owned()];
    for (key, value) in host_env(&scratch) {
        args.extend(["-e".to_owned(), format!("{key}={value}")]);
    }
    args.extend(["--method", "tools/list", "--"].map(str::to_owned));
    let cli = cli_binary().display().to_string();
    args.extend([
        cli,
        "--config".into(),
        config.display().to_string(),
        "serve".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cold = listed_names(&one_shot(&scratch, &node, &args));
    assert_all(&cold, &servers, "cold");
    assert_eq!(servers.map(|name| starts(&scratch, name)), [1, 1, 1]);
    let warm = listed_names(&one_shot(&scratch, &node, &args));
    assert_eq!(warm, cold);
    assert_eq!(
        servers.map(|name| starts(&scratch, name)),
        [1, 1, 1],
        "warm"
    );
}

/// A script on the TypeScript SDK client that lists once and prints the result.
const TS_ONCE: &str = r#"
const [sdk, config] = process.argv.slice(2);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StdioClientTransport } = await import(`${sdk}/dist/esm/client/stdio.js`);
const transport = new StdioClientTransport({
  command: process.env.MCP_CLI, args: ["--config", config, "serve"], env: process.env, stderr: "inherit",
});
const client = new Client({ name: "ts-once", version: "1" });
await client.connect(transport);
console.log(JSON.stringify(await client.listTools()));
await client.close();
"#;

/// A script on the Python SDK client that lists once and prints the names.
const PY_ONCE: &str = r#"
import asyncio, json, os, sys
from mcp import Client, StdioServerParameters

async def main(config):
    server = StdioServerParameters(command=os.environ["MCP_CLI"], args=["--config", config, "serve"], env=dict(os.environ))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        print(json.dumps({"tools": [{"name": tool.name} for tool in tools]}), flush=True)

asyncio.run(main(sys.argv[1]))
"#;

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn a_typescript_sdk_script_lists_once_and_gets_every_tool_of_servers_slow_to_start() {
    let sdk = mcp_tests::npm_bin().join("../@modelcontextprotocol/sdk");
    let scratch = Scratch::new("lists-ts");
    let config = slow_config(&scratch);
    let script = scratch.write("once.mjs", TS_ONCE);
    let args = [
        script.to_str().unwrap(),
        sdk.to_str().unwrap(),
        config.to_str().unwrap(),
    ];
    let listed = one_shot(&scratch, Path::new("node"), &args);
    assert_all(&listed_names(&listed), &["hs", "py", "pub"], "typescript");
}

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn a_python_sdk_script_lists_once_and_gets_every_tool_of_servers_slow_to_start() {
    let python = mcp_tests::python_bin().join("python");
    let scratch = Scratch::new("lists-py");
    let config = slow_config(&scratch);
    let script = scratch.write("once.py", PY_ONCE);
    let args = [script.to_str().unwrap(), config.to_str().unwrap()];
    let listed = one_shot(&scratch, &python, &args);
    assert_all(&listed_names(&listed), &["hs", "py", "pub"], "python");
}
