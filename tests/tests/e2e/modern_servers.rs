//! The modern (2026-07-28) test peers of `tests/servers/`, on the TypeScript SDK v2, the Python
//! SDK 2.x and rmcp, driven over stdio by raw lines: they prove the peers work and show what
//! they send, before mcp-cli speaks the revision.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use mcp_tests::Peer;
use serde_json::{Value, json};

const REVISION: &str = "2026-07-28";

/// How long one line may take: a generous watchdog (a peer starting cold on a busy machine
/// takes a few seconds), so a peer that never answers fails the test instead of hanging it.
const WATCHDOG: Duration = Duration::from_secs(30);

/// The `_meta` every modern request carries: version, capabilities (form elicitation) and
/// identity.
fn envelope() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": REVISION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    })
}

/// A peer on stdio, read by a thread per stream so every wait is bounded by [`WATCHDOG`].
struct Wire {
    child: Child,
    stdin: ChildStdin,
    stdout: Receiver<Value>,
    stderr: Receiver<String>,
    /// Lines read while waiting for something else, oldest first.
    unclaimed: VecDeque<Value>,
    next_id: u64,
}

impl Wire {
    fn start(peer: &Peer) -> Self {
        let mut child = peer
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("start {peer:?}: {error}"));
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (lines, stdout_lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let message = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("not JSON on stdout: {line:?}"));
                if lines.send(message).is_err() {
                    break;
                }
            }
        });
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (lines, stderr_lines) = channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Wire {
            stdin: child.stdin.take().unwrap(),
            child,
            stdout: stdout_lines,
            stderr: stderr_lines,
            unclaimed: VecDeque::new(),
            next_id: 0,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    /// Sends a request with the modern envelope merged into `params._meta`; returns its id.
    fn send_request(&mut self, method: &str, mut params: Value, meta: Value) -> u64 {
        self.next_id += 1;
        let mut envelope = envelope();
        envelope
            .as_object_mut()
            .unwrap()
            .extend(meta.as_object().unwrap().clone());
        params["_meta"] = envelope;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The first message (read now or earlier) that `wanted` accepts.
    fn wait_for(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(index) = self.unclaimed.iter().position(&wanted) {
            return self.unclaimed.remove(index).unwrap();
        }
        loop {
            match self.stdout.recv_timeout(WATCHDOG) {
                Ok(message) if wanted(&message) => return message,
                Ok(message) => self.unclaimed.push_back(message),
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no {what} within {WATCHDOG:?}; read meanwhile: {:?}",
                    self.unclaimed
                ),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the peer closed stdout before {what}")
                }
            }
        }
    }

    fn response(&mut self, id: u64) -> Value {
        self.wait_for(&format!("response {id}"), |message| {
            message["id"] == id && message.get("method").is_none()
        })
    }

    /// Sends a request and returns its `result`, failing on an error response.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params, json!({}));
        let response = self.response(id);
        assert!(response.get("error").is_none(), "{method}: {response}");
        response["result"].clone()
    }

    fn notification(&mut self, method: &str) -> Value {
        self.wait_for(method, |message| message["method"] == method)
    }

    /// Waits for a stderr line containing `text`.
    fn stderr_line(&mut self, text: &str) -> String {
        loop {
            match self.stderr.recv_timeout(WATCHDOG) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(error) => panic!("no stderr line with {text:?}: {error}"),
            }
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_names(listed: &Value) -> Vec<&str> {
    let tools = listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    tools
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect()
}

fn first_text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {result}"))
}

/// The exchange every modern peer must pass, in the order a client meets it.
fn modern_exchange(peer: &Peer, name: &str) {
    let mut wire = Wire::start(peer);

    // server/discover: the versions, the identity, and `resultType` on every result.
    let discovered = wire.request("server/discover", json!({}));
    let versions = discovered["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!(REVISION)), "{discovered}");
    assert_eq!(discovered["resultType"], "complete", "{discovered}");
    assert_eq!(
        discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], name,
        "{discovered}"
    );
    assert!(discovered["capabilities"]["tools"]["listChanged"] == true);

    // A version the peer does not speak: -32022 naming what it does.
    let id = wire.send_request(
        "server/discover",
        json!({}),
        json!({"io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
    );
    let refused = wire.response(id);
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    let supported = refused["error"]["data"]["supported"].as_array().unwrap();
    assert!(supported.contains(&json!(REVISION)), "{refused}");

    let listed = wire.request("tools/list", json!({}));
    let mut names = tool_names(&listed);
    names.sort_unstable();
    // The rmcp peer also offers `research`, a task (the tasks suite drives it).
    names.retain(|tool| !(name == "rmcp-peer" && *tool == "research"));
    assert_eq!(names, ["add", "add_tool", "confirm", "sleep"], "{listed}");
    assert!(listed["ttlMs"].is_u64(), "a list is cacheable: {listed}");

    let sum = wire.request(
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    );
    assert_eq!(first_text(&sum), "5", "{sum}");

    // The multi-round-trip elicitation: input_required, then the retry with the answer and the
    // state echoed byte for byte.
    let call = json!({"name": "confirm", "arguments": {"action": "deploy"}});
    let asked = wire.request("tools/call", call.clone());
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let requests = asked["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{asked}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    assert_eq!(request["params"]["message"], "Really deploy?", "{asked}");
    let state = asked["requestState"].as_str().expect("a request state");
    let mut retry = call;
    retry["inputResponses"] = json!({ key: {"action": "accept", "content": {"ok": true}} });
    retry["requestState"] = json!(state);
    let confirmed = wire.request("tools/call", retry);
    assert_eq!(confirmed["resultType"], "complete", "{confirmed}");
    assert!(
        first_text(&confirmed).starts_with("confirmed deploy"),
        "{confirmed}"
    );

    let read = wire.request("resources/read", json!({"uri": "peer://greeting"}));
    assert_eq!(read["contents"][0]["text"], format!("hello from {name}"));
    assert_eq!(
        (&read["ttlMs"], &read["cacheScope"]),
        (&json!(60000), &json!("public"))
    );
    let id = wire.send_request(
        "resources/read",
        json!({"uri": "peer://missing"}),
        json!({}),
    );
    let missing = wire.response(id);
    assert_eq!(missing["error"]["code"], -32602, "{missing}");

    let prompt = wire.request(
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(
        prompt["messages"][0]["content"]["text"],
        "Say hello to Ada."
    );

    // subscriptions/listen: acknowledged first, then the list change tagged with the
    // subscription id (the listen request's id).
    let listen = wire.send_request(
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
        json!({}),
    );
    let ack = wire.notification("notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen
    );
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"], true,
        "{ack}"
    );
    wire.request("tools/call", json!({"name": "add_tool", "arguments": {}}));
    let changed = wire.notification("notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], listen,
        "{changed}"
    );
    let listed = wire.request("tools/list", json!({}));
    assert!(tool_names(&listed).contains(&"extra"), "{listed}");

    // Cancellation on stdio: notifications/cancelled reaches the running tool.
    let sleeping = wire.send_request(
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 600_000}}),
        json!({"progressToken": "sleep"}),
    );
    let progress = wire.notification("notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "sleep", "{progress}");
    wire.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": sleeping, "reason": "the test is done waiting"}}),
    );
    wire.stderr_line("sleep cancelled");
}

/// What a handshake-era client gets: every peer here is dual-era on stdio.
fn legacy_handshake(peer: &Peer) {
    let mut wire = Wire::start(peer);
    wire.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    let answer = wire.response(1);
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-11-25",
        "{answer}"
    );
    wire.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    wire.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}));
    assert_eq!(first_text(&wire.response(2)["result"]), "3");
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn typescript_sdk_peer_speaks_the_new_revision() {
    let peer = mcp_tests::ts_peer();
    modern_exchange(&peer, "ts-peer");
    legacy_handshake(&peer);
}

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn python_sdk_peer_speaks_the_new_revision() {
    let peer = mcp_tests::mcpserver_peer();
    modern_exchange(&peer, "mcpserver-peer");
    legacy_handshake(&peer);
}

#[test]
fn rmcp_peer_speaks_the_new_revision() {
    let peer = mcp_tests::rmcp_peer();
    modern_exchange(&peer, "rmcp-peer");
    legacy_handshake(&peer);
}
