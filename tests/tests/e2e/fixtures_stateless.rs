//! The fixtures' stateless-era (2026-07-28) modes driven by raw JSON-RPC lines (`mcp-fixture`)
//! and raw HTTP requests (`mcp-http-fixture`), no client library in between: what each mode
//! does, written down for whoever points the client at them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::FIXTURE;

const HTTP_FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-http-fixture");

/// Long enough for any line the fixture owes; a missing one fails the test, never hangs it.
const PATIENCE: Duration = Duration::from_secs(30);

/// The `_meta` of a stateless request, with these client capabilities.
fn meta_with(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// `params` with a stateless `_meta` that declares elicitation.
fn with_meta(mut params: Value) -> Value {
    params["_meta"] = meta_with(json!({"elicitation": {}}));
    params
}

fn request(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// `mcp-fixture` over raw lines, killed when dropped.
struct Lines {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
}

impl Lines {
    fn start(mode: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(FIXTURE)
            .arg(mode)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let message = serde_json::from_str(&line).expect("a JSON line");
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        Lines {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    /// The next line the fixture writes.
    fn next(&self) -> Value {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => panic!("no line from the fixture in {PATIENCE:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the fixture closed its stdout"),
        }
    }

    /// Sends a request and returns the next line, which must answer it.
    fn ask(&mut self, message: &Value) -> Value {
        self.send(message);
        let answer = self.next();
        assert_eq!(answer["id"], message["id"], "{answer}");
        answer
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn stdio_discover_and_every_result_say_the_stateless_revision() {
    let mut server = Lines::start("resources", &["--era", "stateless"]);
    let discover = server.ask(&request(1, "server/discover", with_meta(json!({}))));
    let result = &discover["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
    assert!(result["capabilities"]["resources"].is_object(), "{result}");
    assert!(result["capabilities"]["prompts"].is_object(), "{result}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-fixture"
    );
    assert_eq!(result["cacheScope"], "public");
    assert!(result["ttlMs"].as_u64().is_some(), "{result}");

    let list = server.ask(&request(
        2,
        "tools/list",
        with_meta(json!({"cursor": "c14"})),
    ));
    let names: Vec<&str> = (list["result"]["tools"].as_array().unwrap().iter())
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ask"], "the same tools as today, then ask");
    for key in ["resultType", "ttlMs", "cacheScope"] {
        assert!(list["result"].get(key).is_some(), "no {key} in {list}");
    }

    let call = with_meta(json!({"name": "echo", "arguments": {"text": "hi"}}));
    let echo = server.ask(&request(3, "tools/call", call));
    assert_eq!(echo["result"]["resultType"], "complete");
    assert_eq!(text(&echo["result"]), "hi");

    let read = server.ask(&request(
        4,
        "resources/read",
        with_meta(json!({"uri": "fx://text/hello"})),
    ));
    assert_eq!(read["result"]["resultType"], "complete");
    assert_eq!(read["result"]["cacheScope"], "public");
    let missing = server.ask(&request(
        5,
        "resources/read",
        with_meta(json!({"uri": "fx://nothing"})),
    ));
    assert_eq!(
        missing["error"]["code"], -32602,
        "not -32002 in this revision"
    );
}

#[test]
fn stdio_requests_need_their_meta_and_the_handshake_is_gone() {
    let mut server = Lines::start("good", &["--era", "stateless"]);
    let bare = server.ask(&request(1, "tools/list", json!({})));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let mut no_capabilities = with_meta(json!({}));
    no_capabilities["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let refused = server.ask(&request(2, "tools/list", no_capabilities));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("clientCapabilities"),
        "{refused}"
    );

    let mut old = with_meta(json!({}));
    old["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let unsupported = server.ask(&request(3, "tools/list", old));
    assert_eq!(unsupported["error"]["code"], -32022);
    assert_eq!(
        unsupported["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
    );

    let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "legacy", "version": "1"}});
    let refused = server.ask(&request(4, "initialize", initialize));
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("2026-07-28"),
        "names the revision: {message}"
    );

    for (id, method) in [(5, "ping"), (6, "logging/setLevel")] {
        let gone = server.ask(&request(id, method, with_meta(json!({"level": "info"}))));
        assert_eq!(gone["error"]["code"], -32601, "{method}: {gone}");
    }
}

/// The first `ask` round: the form and the state.
fn first_round(server: &mut Lines) -> (Value, String) {
    let first = server.ask(&request(1, "tools/call", with_meta(json!({"name": "ask"}))));
    let result = first["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{first}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    (result, state)
}

/// The retry of `ask` with the form's answer and `state`.
fn retry(server: &mut Lines, id: u64, state: &str) -> Value {
    let params = with_meta(json!({"name": "ask", "requestState": state,
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}));
    server.ask(&request(id, "tools/call", params))["result"].clone()
}

#[test]
fn stdio_ask_completes_with_the_form_only_when_the_state_comes_back_whole() {
    let mut server = Lines::start("good", &["--era", "stateless"]);
    let (result, state) = first_round(&mut server);
    let form = &result["inputRequests"]["name"];
    assert_eq!(form["method"], "elicitation/create");
    assert_eq!(form["params"]["mode"], "form");
    assert!(
        state.ends_with(' ') && state.contains('☃'),
        "a state easy to mangle: {state:?}"
    );

    let done = retry(&mut server, 2, &state);
    assert_eq!(done["resultType"], "complete");
    assert_eq!(text(&done), r#"accept {"name":"Ada"}"#);

    let altered = retry(&mut server, 3, state.trim_end());
    assert_eq!(altered["isError"], true);
    assert!(
        text(&altered).contains("requestState came back altered"),
        "{altered}"
    );

    let mut no_elicitation = with_meta(json!({"name": "ask"}));
    no_elicitation["_meta"] = meta_with(json!({}));
    let refused = server.ask(&request(4, "tools/call", no_elicitation));
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}

#[test]
fn stdio_input_loop_asks_for_ever_with_a_new_state_each_round() {
    let mut server = Lines::start("input-loop", &[]);
    let (_, mut state) = first_round(&mut server);
    for round in 2..6 {
        let next = retry(&mut server, round, &state);
        assert_eq!(next["resultType"], "input_required");
        let fresh = next["requestState"].as_str().unwrap().to_owned();
        assert_ne!(fresh, state);
        state = fresh;
    }
}

#[test]
fn stdio_huge_state_is_a_mebibyte_checked_on_the_retry() {
    let mut server = Lines::start("huge-state", &[]);
    let (_, state) = first_round(&mut server);
    assert_eq!(state.len(), 1024 * 1024);
    assert_eq!(
        text(&retry(&mut server, 2, &state)),
        r#"accept {"name":"Ada"}"#
    );
    let mut altered = state.clone();
    altered.pop();
    altered.push('!');
    let refused = retry(&mut server, 3, &altered);
    assert!(
        text(&refused).contains("first difference at byte 1048575"),
        "{refused}"
    );
}

#[test]
fn stdio_listen_is_acknowledged_and_the_change_comes_tagged() {
    let mut server = Lines::start("list-changed", &["--era", "stateless"]);
    let listen =
        with_meta(json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}));
    server.send(&request("sub-1", "subscriptions/listen", listen));
    let ack = server.next();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "no prompts here"
    );
    // A second stream, cancelled: it hears nothing more.
    let listen = with_meta(json!({"notifications": {"toolsListChanged": true}}));
    server.send(&request("sub-2", "subscriptions/listen", listen));
    assert_eq!(
        server.next()["method"],
        "notifications/subscriptions/acknowledged"
    );
    let cancel = json!({"requestId": "sub-2"});
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}));

    server.ask(&request(
        2,
        "tools/call",
        with_meta(json!({"name": "echo", "arguments": {"text": "x"}})),
    ));
    let change = server.next();
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    // No change for `sub-2` comes before the answer to the next request.
    server.ask(&request(3, "tools/list", with_meta(json!({}))));
}

#[test]
fn stdio_a_cancelled_sleep_is_never_answered() {
    let mut server = Lines::start("good", &["--era", "stateless"]);
    let sleep = |ms: u64| with_meta(json!({"name": "sleep", "arguments": {"ms": ms}}));
    server.send(&request(1, "tools/call", sleep(300)));
    server.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    );
    // Uncancelled, the first sleep would be answered before this longer one.
    let later = server.ask(&request(2, "tools/call", sleep(600)));
    assert_eq!(text(&later["result"]), "slept 600 ms");
}

#[test]
fn stdio_never_sends_a_request_in_the_stateless_era() {
    let mut server = Lines::start("server-requests", &["--era", "stateless"]);
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // Requests would come before the answer to the next line: it is the next line.
    server.ask(&request(1, "tools/list", with_meta(json!({}))));
}

#[test]
fn stdio_listen_no_ack_never_acknowledges() {
    let mut server = Lines::start("listen-no-ack", &[]);
    let listen = with_meta(json!({"notifications": {"toolsListChanged": true}}));
    server.send(&request(1, "subscriptions/listen", listen));
    // An acknowledgement would be written before this answer: the fixture reads in order.
    server.ask(&request(2, "tools/list", with_meta(json!({}))));
}

#[test]
fn stdio_exit_on_discover_exits_1_saying_why() {
    let mut server = Lines::start("exit-on-discover", &[]);
    server.send(&request(1, "server/discover", with_meta(json!({}))));
    assert!(
        server.lines.recv_timeout(PATIENCE).is_err(),
        "no answer, stdout closed"
    );
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    server
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("server/discover"), "{stderr:?}");
}

fn initialize(id: u64) -> Value {
    request(
        id,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"}}),
    )
}

#[test]
fn stdio_silent_on_discover_ignores_the_probe_then_initializes() {
    let mut server = Lines::start("silent-on-discover", &[]);
    server.send(&request(1, "server/discover", with_meta(json!({}))));
    let answer = server.ask(&initialize(2));
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn stdio_claims_stateless_then_wants_initialize() {
    let mut server = Lines::start("claims-stateless", &[]);
    let discover = server.ask(&request(1, "server/discover", with_meta(json!({}))));
    assert_eq!(
        discover["result"]["supportedVersions"],
        json!(["2026-07-28"])
    );
    let refused = server.ask(&request(2, "tools/list", with_meta(json!({}))));
    assert_eq!(refused["error"]["code"], -32600);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not initialized")
    );
    server.ask(&initialize(3));
    let list = server.ask(&request(4, "tools/list", with_meta(json!({}))));
    assert!(list["result"]["tools"].is_array(), "{list}");
}

#[test]
fn stdio_dual_serves_each_request_in_its_era() {
    let mut server = Lines::start("good", &["--era", "dual", "--page-size", "100"]);
    let modern = server.ask(&request(1, "tools/list", with_meta(json!({}))));
    assert_eq!(modern["result"]["resultType"], "complete");
    let last = modern["result"]["tools"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["name"], "ask");

    assert_eq!(
        server.ask(&initialize(2))["result"]["protocolVersion"],
        "2025-11-25"
    );
    let legacy = server.ask(&request(3, "tools/list", json!({})));
    assert!(legacy["result"].get("resultType").is_none(), "{legacy}");
    let tools = legacy["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().all(|tool| tool["name"] != "ask"));
    assert_eq!(
        server.ask(&request(4, "ping", json!({})))["result"],
        json!({})
    );
}

/// `mcp-http-fixture MODE`, killed when dropped.
struct Http {
    child: Child,
    port: u16,
}

impl Http {
    fn start(mode: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(HTTP_FIXTURE)
            .arg(mode)
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
        Http { child, port }
    }

    /// Opens a connection and sends one request.
    fn send(&self, method: &str, headers: &[(&str, &str)], body: Option<&Value>) -> TcpStream {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        stream
    }

    /// One whole exchange: the status, the head, and the body as JSON (`Null` when empty).
    fn exchange(
        &self,
        method: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> (u16, String, Value) {
        let mut answer = String::new();
        self.send(method, headers, body)
            .read_to_string(&mut answer)
            .unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let status = head[9..12].parse().unwrap();
        let body = serde_json::from_str(body).unwrap_or(Value::Null);
        (status, head.to_owned(), body)
    }

    /// A POST of `message` with the headers a stateless client sends, then `extra`.
    fn post(&self, message: &Value, extra: &[(&str, &str)]) -> (u16, Value) {
        let method = message["method"].as_str().unwrap();
        let mut headers = vec![
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ];
        let name = message["params"]["name"].as_str();
        if let Some(name) = name.filter(|_| !extra.iter().any(|(key, _)| *key == "Mcp-Name")) {
            headers.push(("Mcp-Name", name));
        }
        headers.extend(extra);
        let (status, _, body) = self.exchange("POST", &headers, Some(message));
        (status, body)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn region(value: &str) -> Value {
    request(
        7,
        "tools/call",
        with_meta(json!({"name": "region", "arguments": {"region": value, "query": "q"}})),
    )
}

#[test]
fn http_stateless_refuses_each_header_that_disagrees_with_the_body() {
    let scratch = std::env::temp_dir().join(format!("fixture-headers-{}.log", std::process::id()));
    let log = scratch.to_str().unwrap();
    let server = Http::start("stateless", &["--log", log]);
    let list = request(1, "tools/list", with_meta(json!({})));
    let echo = request(
        2,
        "tools/call",
        with_meta(json!({"name": "echo", "arguments": {"message": "hi"}})),
    );
    let mut other_meta = list.clone();
    other_meta["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let headers = |method: &'static str, more: &[(&'static str, &'static str)]| {
        let mut headers = vec![
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ];
        headers.extend_from_slice(more);
        headers
    };
    let call = |more| headers("tools/call", more);
    let mismatches = [
        (
            "no version header",
            &list,
            vec![("Mcp-Method", "tools/list")],
            "Missing MCP-Protocol-Version header",
        ),
        (
            "another method",
            &list,
            headers("tools/call", &[]),
            "Mcp-Method header value 'tools/call'",
        ),
        (
            "no method header",
            &list,
            vec![("MCP-Protocol-Version", "2026-07-28")],
            "Missing Mcp-Method header",
        ),
        (
            "versions differ",
            &other_meta,
            headers("tools/list", &[]),
            "MCP-Protocol-Version header value '2026-07-28'",
        ),
        ("no name", &echo, call(&[]), "Missing Mcp-Name header"),
        (
            "another name",
            &echo,
            call(&[("Mcp-Name", "big")]),
            "Mcp-Name header value 'big'",
        ),
        (
            "another region",
            &region("us"),
            call(&[("Mcp-Name", "region"), ("Mcp-Param-Region", "eu")]),
            "Mcp-Param-Region header value 'eu'",
        ),
        (
            "no region header",
            &region("us"),
            call(&[("Mcp-Name", "region")]),
            "Missing Mcp-Param-Region header",
        ),
    ];
    for (case, message, headers, wanted) in mismatches {
        let (status, _, body) = server.exchange("POST", &headers, Some(message));
        assert_eq!(status, 400, "{case}: {body}");
        assert_eq!(body["error"]["code"], -32020, "{case}: {body}");
        let said = body["error"]["message"].as_str().unwrap();
        assert!(said.contains(wanted), "{case}: {said}");
    }

    // The base64 form of a name or a parameter, decoded, matches.
    let (status, body) = server.post(&echo, &[("Mcp-Name", "=?base64?ZWNobw==?=")]);
    assert_eq!((status, text(&body["result"])), (200, "hi"), "{body}");
    let (status, body) = server.post(&region("us"), &[("Mcp-Param-Region", "=?base64?dXM=?=")]);
    assert_eq!((status, text(&body["result"])), (200, "us: q"), "{body}");

    let log = std::fs::read_to_string(&scratch).unwrap();
    let _ = std::fs::remove_file(&scratch);
    assert!(
        log.contains(
            "rpc=tools/call session=- last-event-id=- mcp-protocol-version=2026-07-28 \
                      mcp-method=tools/call mcp-name=region mcp-param-region==?base64?dXM=?="
        ),
        "{log}"
    );
}

#[test]
fn http_stateless_refuses_missing_meta_other_revisions_unknown_methods_and_initialize() {
    let server = Http::start("stateless", &[]);
    let mut bare = request(
        1,
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    );
    let (status, body) = server.post(&bare, &[]);
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32602)),
        "{body}"
    );

    bare["params"]["_meta"] = meta_with(json!({}));
    bare["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let (status, _, body) = server.exchange(
        "POST",
        &[
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Method", "tools/list"),
        ],
        Some(&bare),
    );
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32022)),
        "{body}"
    );
    assert_eq!(body["error"]["data"]["supported"], json!(["2026-07-28"]));

    let (status, body) = server.post(
        &request(2, "resources/templates/list", with_meta(json!({}))),
        &[],
    );
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!(-32601)),
        "{body}"
    );

    // A handshake-era client's first POST: no headers at all.
    let legacy = initialize(3);
    let (status, head, body) = server.exchange("POST", &[], Some(&legacy));
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32020)),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2026-07-28"),
        "{body}"
    );
    assert!(
        !head.to_ascii_lowercase().contains("mcp-session-id"),
        "{head}"
    );
}

#[test]
fn http_stateless_has_no_sessions_and_no_get_stream() {
    let server = Http::start("stateless", &[]);
    for method in ["GET", "DELETE"] {
        let (status, _, _) = server.exchange(method, &[("Mcp-Session-Id", "s1")], None);
        assert_eq!(status, 405, "{method}");
    }
    let discover = request(1, "server/discover", with_meta(json!({})));
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "server/discover"),
        ("Mcp-Session-Id", "from-an-old-session"),
    ];
    let (status, head, body) = server.exchange("POST", &headers, Some(&discover));
    assert_eq!(status, 200, "an old session id is ignored: {body}");
    assert!(
        !head.to_ascii_lowercase().contains("mcp-session-id"),
        "{head}"
    );
    assert_eq!(body["result"]["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(body["result"]["resultType"], "complete");

    let (_, body) = server.post(&request(2, "tools/list", with_meta(json!({}))), &[]);
    let result = &body["result"];
    assert_eq!(result["cacheScope"], "public");
    let tools = result["tools"].as_array().unwrap();
    let schema = |name: &str| {
        let tool = tools.iter().find(|tool| tool["name"] == name).unwrap();
        tool["inputSchema"]["properties"].clone()
    };
    assert_eq!(schema("region")["region"]["x-mcp-header"], "Region");
    assert_eq!(
        schema("weigh")["kilos"]["type"],
        "number",
        "the invalid annotation"
    );
}

#[test]
fn http_stateless_ask_round_trip() {
    let server = Http::start("stateless", &[]);
    let (_, first) = server.post(
        &request(1, "tools/call", with_meta(json!({"name": "ask"}))),
        &[],
    );
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap();
    let retry = with_meta(json!({"name": "ask", "requestState": state,
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}));
    let (_, done) = server.post(&request(2, "tools/call", retry), &[]);
    assert_eq!(text(&done["result"]), r#"accept {"name":"Ada"}"#, "{done}");
}

#[test]
fn http_stateless_listen_acknowledges_then_tells_of_a_change() {
    let server = Http::start("stateless", &[]);
    let listen = request(
        "L",
        "subscriptions/listen",
        with_meta(json!({"notifications": {"toolsListChanged": true}})),
    );
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "subscriptions/listen"),
    ];
    let mut events = BufReader::new(server.send("POST", &headers, Some(&listen)));
    // Keep-alive comments come each second: a hundred lines without data is a lost event.
    let mut next_data = || {
        for _ in 0..100 {
            let mut line = String::new();
            assert_ne!(events.read_line(&mut line).unwrap(), 0, "the stream ended");
            if let Some(data) = line.strip_prefix("data: ") {
                return serde_json::from_str::<Value>(data).unwrap();
            }
        }
        panic!("no event on the listen stream, only keep-alives");
    };
    let ack = next_data();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L"
    );

    let (status, _) = server.post(
        &request(2, "tools/call", with_meta(json!({"name": "change"}))),
        &[],
    );
    assert_eq!(status, 200);
    let change = next_data();
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L"
    );
}

#[test]
fn http_stateless_old_version_shares_no_revision() {
    let server = Http::start("stateless-old-version", &[]);
    let (status, body) = server.post(&request(1, "server/discover", with_meta(json!({}))), &[]);
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32022)),
        "{body}"
    );
    assert_eq!(
        body["error"]["data"],
        json!({"supported": ["DRAFT-2026-v1"], "requested": "2026-07-28"})
    );
}

#[test]
fn http_legacy_400_refuses_the_probe_then_initializes() {
    let server = Http::start("legacy-400", &[]);
    let (status, body) = server.post(&request(1, "server/discover", with_meta(json!({}))), &[]);
    assert_eq!(status, 400);
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["code"], -32603);

    let (status, head, body) = server.exchange("POST", &[], Some(&initialize(2)));
    assert_eq!(status, 200, "{body}");
    let session = (head.lines())
        .find_map(|line| line.strip_prefix("Mcp-Session-Id: "))
        .unwrap();
    let list = request(3, "tools/list", json!({}));
    let (status, _, body) = server.exchange("POST", &[("Mcp-Session-Id", session)], Some(&list));
    assert_eq!(status, 200);
    assert_eq!(body["result"]["tools"][0]["name"], "echo");
}
