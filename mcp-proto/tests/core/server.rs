//! The server role in virtual time: the handshake from the server's side, host requests and
//! their answers, progress, cancellation, bad input, limits, the end of the stream; and a
//! property test of every ordering of host messages around the handshake.

use std::time::{Duration, Instant};

use mcp_proto::{
    CloseReason, ListCapability, Request, RequestError, RpcError, SendError, ServerCapabilities,
    server::{HostRequest, ServerConfig, ServerConnection, ServerEvent},
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn send(conn: &mut ServerConnection, now: Instant, message: Value) {
    conn.handle_bytes(now, format!("{message}\n").as_bytes());
}

/// Every transmit, each checked to be one JSON line.
fn written(conn: &mut ServerConnection) -> Vec<Value> {
    std::iter::from_fn(|| conn.poll_transmit())
        .map(|line| {
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            serde_json::from_slice(&line).unwrap()
        })
        .collect()
}

fn events(conn: &mut ServerConnection) -> Vec<ServerEvent> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}

fn initialize(id: Value, version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "host", "version": "9"},
    }})
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn config() -> ServerConfig {
    ServerConfig {
        name: "gateway".to_owned(),
        capabilities: ServerCapabilities {
            tools: Some(ListCapability { list_changed: true }),
            ..ServerCapabilities::default()
        },
        ..ServerConfig::default()
    }
}

/// A connection past the handshake, its output drained.
fn ready(now: Instant, config: ServerConfig) -> ServerConnection {
    let mut conn = ServerConnection::new(now, config);
    send(&mut conn, now, initialize(json!(0), "2025-06-18"));
    send(&mut conn, now, initialized());
    written(&mut conn);
    assert!(matches!(events(&mut conn)[..], [ServerEvent::Ready(_)]));
    conn
}

fn next_request(conn: &mut ServerConnection) -> HostRequest {
    match conn.poll_event() {
        Some(ServerEvent::Request(request)) => request,
        other => panic!("expected a request, got {other:?}"),
    }
}

#[test]
fn answers_initialize_with_the_hosts_version_when_supported() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    send(&mut conn, now, initialize(json!("init"), "2025-03-26"));
    let answer = written(&mut conn);
    assert_eq!(answer.len(), 1);
    assert_eq!(answer[0]["id"], "init");
    assert_eq!(answer[0]["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(answer[0]["result"]["serverInfo"]["name"], "gateway");
    assert_eq!(
        answer[0]["result"]["capabilities"]["tools"]["listChanged"],
        true
    );
    // Not ready until the host says so.
    assert!(events(&mut conn).is_empty());
    send(&mut conn, now, initialized());
    match &events(&mut conn)[..] {
        [ServerEvent::Ready(client)] => {
            assert_eq!(client.client.name, "host");
            assert_eq!(client.protocol_version, "2025-03-26");
            assert!(client.declares("elicitation"));
            assert!(!client.declares("roots"));
        }
        other => panic!("expected Ready, got {other:?}"),
    }
}

#[test]
fn an_unknown_version_is_answered_with_our_latest() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    send(&mut conn, now, initialize(json!(1), "2026-07-28"));
    let answer = written(&mut conn);
    assert_eq!(
        answer[0]["result"]["protocolVersion"],
        mcp_proto::LATEST_PROTOCOL_VERSION
    );
}

#[test]
fn initialize_without_a_version_is_invalid_params() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    send(&mut conn, now, request(json!(1), "initialize", json!({})));
    let answer = written(&mut conn);
    assert_eq!(answer[0]["error"]["code"], RpcError::INVALID_PARAMS);
    // Still waiting for a proper one.
    send(&mut conn, now, initialize(json!(2), "2025-11-25"));
    assert!(written(&mut conn)[0]["result"].is_object());
}

#[test]
fn requests_before_the_handshake_are_refused_but_ping() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    send(&mut conn, now, request(json!(5), "tools/list", json!({})));
    send(&mut conn, now, request(json!("p"), "ping", json!({})));
    let answers = written(&mut conn);
    assert_eq!(answers[0]["id"], 5);
    assert_eq!(answers[0]["error"]["code"], -32600);
    assert_eq!(
        answers[1],
        json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );
    // Between the initialize answer and `notifications/initialized`, still refused.
    send(&mut conn, now, initialize(json!(1), "2025-11-25"));
    send(&mut conn, now, request(json!(6), "tools/list", json!({})));
    let answers = written(&mut conn);
    assert_eq!(answers[1]["id"], 6);
    assert_eq!(answers[1]["error"]["code"], -32600);
    assert!(events(&mut conn).is_empty());
}

#[test]
fn a_second_initialize_is_refused() {
    let now = Instant::now();
    let mut conn = ready(now, config());
    send(&mut conn, now, initialize(json!(9), "2025-11-25"));
    let answer = written(&mut conn);
    assert_eq!(answer[0]["id"], 9);
    assert_eq!(answer[0]["error"]["code"], -32600);
}

#[test]
fn host_ids_are_echoed_exactly() {
    let now = Instant::now();
    let mut conn = ready(now, config());
    for id in [json!("a-1"), json!(7), json!(-3), json!(1.5)] {
        send(&mut conn, now, request(id.clone(), "tools/list", json!({})));
        let request = next_request(&mut conn);
        assert_eq!(request.method, "tools/list");
        assert!(conn.respond(now, request.id, Ok(json!({"tools": []}))));
        assert!(
            !conn.respond(now, request.id, Ok(json!({}))),
            "answered twice"
        );
        let answer = written(&mut conn);
        assert_eq!(
            answer,
            [json!({"jsonrpc": "2.0", "id": id, "result": {"tools": []}})]
        );
    }
    // Errors too.
    send(&mut conn, now, request(json!("x"), "nope", json!({})));
    let request = next_request(&mut conn);
    conn.respond(now, request.id, Err(RpcError::method_not_found("nope")));
    let answer = written(&mut conn);
    assert_eq!(answer[0]["id"], "x");
    assert_eq!(answer[0]["error"]["code"], RpcError::METHOD_NOT_FOUND);
}

#[test]
fn progress_carries_the_hosts_token() {
    let now = Instant::now();
    let mut conn = ready(now, config());
    let params = json!({"name": "slow", "_meta": {"progressToken": "tok-9"}});
    send(&mut conn, now, request(json!(3), "tools/call", params));
    let call = next_request(&mut conn);
    assert!(conn.progress(call.id, 1.0, Some(4.0), Some("one")));
    let progress = written(&mut conn);
    assert_eq!(
        progress[0],
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": "tok-9", "progress": 1.0, "total": 4.0, "message": "one"}})
    );
    // Without a token there is nobody to tell.
    send(
        &mut conn,
        now,
        request(json!(4), "tools/call", json!({"name": "x"})),
    );
    let untracked = next_request(&mut conn);
    assert!(!conn.progress(untracked.id, 1.0, None, None));
    assert!(written(&mut conn).is_empty());
}

#[test]
fn a_cancelled_request_is_an_event_and_its_answer_is_dropped() {
    let now = Instant::now();
    let mut conn = ready(now, config());
    send(
        &mut conn,
        now,
        request(json!("c"), "tools/call", json!({"name": "slow"})),
    );
    let call = next_request(&mut conn);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "c", "reason": "user hit stop"}});
    send(&mut conn, now, cancel.clone());
    assert_eq!(
        events(&mut conn),
        [ServerEvent::Cancelled {
            id: call.id,
            reason: Some("user hit stop".to_owned())
        }]
    );
    assert!(!conn.respond(now, call.id, Ok(json!({}))));
    assert!(written(&mut conn).is_empty());
    assert_eq!(conn.open_requests(), 0);
    // A second cancel, or one for an unknown id, is nothing.
    send(&mut conn, now, cancel);
    assert!(events(&mut conn).is_empty());
    // The id may be used again once its request has ended.
    send(&mut conn, now, request(json!("c"), "tools/list", json!({})));
    assert!(matches!(conn.poll_event(), Some(ServerEvent::Request(_))));
}

#[test]
fn an_id_in_use_is_refused() {
    let now = Instant::now();
    let mut conn = ready(now, config());
    send(&mut conn, now, request(json!(1), "tools/call", json!({})));
    send(&mut conn, now, request(json!(1), "tools/call", json!({})));
    assert_eq!(events(&mut conn).len(), 1);
    let answer = written(&mut conn);
    assert_eq!(answer[0]["error"]["code"], -32600);
}

#[test]
fn too_many_open_requests_are_refused_at_once() {
    let now = Instant::now();
    let config = ServerConfig {
        max_open_requests: 2,
        ..config()
    };
    let mut conn = ready(now, config);
    for id in 1..=3 {
        send(&mut conn, now, request(json!(id), "tools/call", json!({})));
    }
    let open: Vec<_> = events(&mut conn)
        .into_iter()
        .filter_map(|event| match event {
            ServerEvent::Request(request) => Some(request.id),
            _ => None,
        })
        .collect();
    assert_eq!(open.len(), 2);
    let answer = written(&mut conn);
    assert_eq!(answer.len(), 1);
    assert_eq!(answer[0]["id"], 3);
    assert_eq!(answer[0]["error"]["code"], -32000);
    // Answering one makes room.
    conn.respond(now, open[0], Ok(json!({})));
    send(&mut conn, now, request(json!(4), "tools/call", json!({})));
    assert!(matches!(conn.poll_event(), Some(ServerEvent::Request(_))));
}

#[test]
fn bad_lines_get_json_rpc_errors_and_the_connection_goes_on() {
    let now = Instant::now();
    let config = ServerConfig {
        max_line_len: 200,
        ..config()
    };
    let mut conn = ready(now, config);
    conn.handle_bytes(now, b"this is not json\n\xff\xfe\n42\n");
    let huge = "x".repeat(500);
    let long = request(
        json!("big"),
        "tools/call",
        json!({"name": "echo", "arguments": {"t": huge}}),
    );
    send(&mut conn, now, long);
    let answers = written(&mut conn);
    let codes: Vec<_> = answers
        .iter()
        .map(|a| (a["id"].clone(), a["error"]["code"].clone()))
        .collect();
    assert_eq!(
        codes,
        [
            (Value::Null, json!(-32700)),
            (Value::Null, json!(-32700)),
            (Value::Null, json!(-32600)),
            (json!("big"), json!(-32600)),
        ]
    );
    assert_eq!(
        events(&mut conn)
            .iter()
            .filter(|e| matches!(e, ServerEvent::Malformed(_)))
            .count(),
        4
    );
    send(&mut conn, now, request(json!(1), "tools/list", json!({})));
    assert!(matches!(conn.poll_event(), Some(ServerEvent::Request(_))));
}

#[test]
fn requests_to_the_host_end_once_answered_timed_out_or_closed() {
    let mut now = Instant::now();
    let config = ServerConfig {
        request_timeout: Duration::from_secs(5),
        ..config()
    };
    let mut before = ServerConnection::new(now, config.clone());
    assert_eq!(
        before.request(now, Request::new("elicitation/create", None)),
        Err(SendError::NotReady)
    );
    assert!(!before.notify("notifications/tools/list_changed", None));

    let mut conn = ready(now, config);
    let asked = conn
        .request(
            now,
            Request::new("elicitation/create", Some(json!({"message": "ok?"}))),
        )
        .unwrap();
    let out = written(&mut conn);
    assert_eq!(out[0]["method"], "elicitation/create");
    let wire_id = out[0]["id"].clone();
    send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": wire_id, "result": {"action": "accept"}}),
    );
    assert_eq!(
        events(&mut conn),
        [ServerEvent::Response {
            id: asked,
            result: Ok(json!({"action": "accept"}))
        }]
    );
    // A stray answer is counted, not fatal.
    send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": 99, "result": {}}),
    );
    assert_eq!(conn.stats().stray_responses, 1);

    // Hosts echo our ids as strings too, as servers do to the client role.
    let echoed = conn.request(now, Request::new("roots/list", None)).unwrap();
    let wire_id = written(&mut conn)[0]["id"].to_string();
    send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": wire_id, "result": {"roots": []}}),
    );
    assert!(
        matches!(&events(&mut conn)[..], [ServerEvent::Response { id, result: Ok(_) }] if *id == echoed)
    );

    let slow = conn
        .request(now, Request::new("elicitation/create", Some(json!({}))))
        .unwrap();
    written(&mut conn);
    assert_eq!(conn.poll_timeout(), Some(now + Duration::from_secs(5)));
    // A timer that fires late still reports the time the request was given.
    now += Duration::from_millis(5_040);
    conn.handle_timeout(now);
    let ended = events(&mut conn);
    let five = Duration::from_secs(5);
    assert!(
        matches!(&ended[..], [ServerEvent::Response { id, result: Err(RequestError::TimedOut { after }) }] if *id == slow && *after == five),
        "{ended:?}"
    );
    assert_eq!(written(&mut conn)[0]["method"], "notifications/cancelled");

    let orphan = conn.request(now, Request::new("roots/list", None)).unwrap();
    conn.handle_eof(now);
    assert_eq!(
        events(&mut conn),
        [
            ServerEvent::Response {
                id: orphan,
                result: Err(RequestError::Closed(CloseReason::ClientEof))
            },
            ServerEvent::Closed(CloseReason::ClientEof)
        ]
    );
}

#[test]
fn closing_is_sticky() {
    let now = Instant::now();
    let mut conn = ready(now, config());
    send(&mut conn, now, request(json!(1), "tools/call", json!({})));
    let call = next_request(&mut conn);
    // An unterminated last line is still read at EOF.
    conn.handle_bytes(now, br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    conn.handle_eof(now);
    assert_eq!(written(&mut conn)[0]["id"], 2);
    assert_eq!(
        events(&mut conn),
        [ServerEvent::Closed(CloseReason::ClientEof)]
    );
    assert!(conn.is_closed());
    send(&mut conn, now, request(json!(3), "tools/list", json!({})));
    conn.handle_eof(now);
    conn.close();
    assert!(events(&mut conn).is_empty());
    assert!(!conn.respond(now, call.id, Ok(json!({}))));
    assert!(written(&mut conn).is_empty());
    assert_eq!(
        conn.request(now, Request::new("roots/list", None)),
        Err(SendError::Closed(CloseReason::ClientEof))
    );
}

/// One message a host might write around the handshake.
#[derive(Debug, Clone)]
enum HostLine {
    Initialize,
    Initialized,
    Ping,
    Call,
    Notification,
    Cancel,
    Stray,
    Noise,
}

fn host_line() -> impl Strategy<Value = HostLine> {
    prop_oneof![
        Just(HostLine::Initialize),
        Just(HostLine::Initialized),
        Just(HostLine::Ping),
        Just(HostLine::Call),
        Just(HostLine::Notification),
        Just(HostLine::Cancel),
        Just(HostLine::Stray),
        Just(HostLine::Noise),
    ]
}

proptest! {
    /// Whatever the order: ready exactly when `initialized` follows an answered `initialize`;
    /// no request becomes an event before that; every request that is not an event is answered
    /// exactly once under its own id; nothing but answers is written before ready.
    #[test]
    fn handshake_orderings(lines in proptest::collection::vec(host_line(), 0..24), string_ids: bool) {
        let now = Instant::now();
        let mut conn = ServerConnection::new(now, config());
        let mut next_id = 0u64;
        let mut requests_sent = Vec::new();
        let mut initialize_seen = false;
        let mut expect_ready = false;
        let mut was_ready = false;
        let mut answered = std::collections::BTreeMap::<String, usize>::new();
        let mut became_events = 0usize;
        for line in &lines {
            next_id += 1;
            let id = if string_ids { json!(format!("r{next_id}")) } else { json!(next_id) };
            let text = match line {
                HostLine::Initialize => {
                    requests_sent.push(id.clone());
                    initialize(id, "2025-06-18").to_string()
                }
                HostLine::Initialized => {
                    if initialize_seen { expect_ready = true; }
                    initialized().to_string()
                }
                HostLine::Ping => {
                    requests_sent.push(id.clone());
                    request(id, "ping", json!({})).to_string()
                }
                HostLine::Call => {
                    requests_sent.push(id.clone());
                    request(id, "tools/call", json!({"name": "t"})).to_string()
                }
                HostLine::Notification => json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}).to_string(),
                HostLine::Cancel => json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": next_id - 1}}).to_string(),
                HostLine::Stray => json!({"jsonrpc": "2.0", "id": 77, "result": {}}).to_string(),
                HostLine::Noise => "starting up...".to_owned(),
            };
            if matches!(line, HostLine::Initialize) { initialize_seen = true; }
            conn.handle_bytes(now, format!("{text}\n").as_bytes());
            for event in events(&mut conn) {
                match event {
                    ServerEvent::Ready(_) => {
                        prop_assert!(!was_ready, "ready twice");
                        was_ready = true;
                    }
                    ServerEvent::Request(request) => {
                        prop_assert!(was_ready, "request event before ready");
                        prop_assert_eq!(request.method.as_str(), "tools/call");
                        became_events += 1;
                    }
                    ServerEvent::Cancelled { .. } => prop_assert!(was_ready),
                    _ => {}
                }
            }
            for message in written(&mut conn) {
                prop_assert!(message.get("method").is_none(), "wrote {message} during the handshake");
                *answered.entry(message["id"].to_string()).or_default() += 1;
            }
        }
        prop_assert_eq!(was_ready, expect_ready);
        prop_assert_eq!(conn.is_ready(), expect_ready);
        let null_answers = answered.remove("null").unwrap_or(0);
        prop_assert_eq!(null_answers, lines.iter().filter(|l| matches!(l, HostLine::Noise)).count());
        for id in &requests_sent {
            let count = answered.get(&id.to_string()).copied().unwrap_or(0);
            prop_assert!(count <= 1, "{} answered {} times", id, count);
        }
        let unanswered = requests_sent.iter().filter(|id| !answered.contains_key(&id.to_string())).count();
        prop_assert_eq!(unanswered, became_events);
    }
}
