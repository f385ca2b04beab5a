//! Scenario tests in virtual time: each drives one behaviour against the scripted server.

use std::time::{Duration, Instant};

use mcp_proto::{
    CallToolResult, CloseReason, Config, Connection, Content, Event, LATEST_PROTOCOL_VERSION,
    LineError, ListCapability, ListToolsResult, Notification, Pager, Request, RequestError,
    RequestId, RpcError, SendError, ServerCapabilities, wire_for_fuzzing::LineDecoder,
};
use serde_json::{Value, json};

use crate::peer::{
    FakeServer, drain_events, handshake, handshake_config, handshake_with, id_of, init_response,
    init_result, initialized, next_response,
};

// ----- the handshake -----

#[test]
fn handshake_sends_initialize_then_initialized() {
    let now = Instant::now();
    let mut conn = Connection::new(now, handshake_config());
    let mut server = FakeServer::default();
    let sent = server.absorb(&mut conn);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["method"], "initialize");
    assert_eq!(
        sent[0]["params"]["protocolVersion"],
        LATEST_PROTOCOL_VERSION
    );
    assert_eq!(sent[0]["params"]["capabilities"], json!({}));
    assert_eq!(sent[0]["params"]["clientInfo"]["name"], "mcp-proto");
    assert!(sent[0]["params"]["clientInfo"]["version"].is_string());

    let init = json!({"jsonrpc": "2.0", "id": sent[0]["id"], "result": init_result("2025-06-18")});
    server.send(&mut conn, now, init);
    let Some(Event::Ready(info)) = conn.poll_event() else {
        panic!("no Ready event");
    };
    assert_eq!(info.protocol_version, "2025-06-18");
    assert_eq!(info.server.name, "fake");
    assert_eq!(info.server.version, "1.0");
    let tools = ListCapability { list_changed: true };
    assert_eq!(info.capabilities.tools, Some(tools));
    assert_eq!(info.capabilities.resources, None);
    assert_eq!(info.instructions.as_deref(), Some("be nice"));
    assert_eq!(conn.server_info(), Some(&info));
    let sent = server.absorb(&mut conn);
    assert_eq!(sent, [initialized()]);
}

#[test]
fn every_supported_version_is_accepted() {
    for version in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
        let now = Instant::now();
        let mut conn = Connection::new(now, handshake_config());
        let server = FakeServer::default();
        let _ = conn.poll_transmit();
        server.send(&mut conn, now, init_response(version));
        assert!(
            matches!(conn.poll_event(), Some(Event::Ready(i)) if i.protocol_version == *version)
        );
    }
}

fn closes_with(result: Value) -> CloseReason {
    let now = Instant::now();
    let mut conn = Connection::new(now, handshake_config());
    let _ = conn.poll_transmit();
    let held = conn
        .request(now, Request::call_tool("early", json!({})))
        .unwrap();
    FakeServer::default().send(&mut conn, now, result);
    let events = drain_events(&mut conn);
    assert_eq!(events.len(), 2, "{events:?}");
    let Event::Response {
        id,
        result: Err(RequestError::Closed(reason)),
    } = &events[0]
    else {
        panic!("the held request must fail: {events:?}");
    };
    assert_eq!(*id, held);
    let Event::Closed(closed) = &events[1] else {
        panic!("Closed must come last: {events:?}");
    };
    assert_eq!(reason, closed);
    assert!(conn.is_closed());
    assert_eq!(
        conn.poll_transmit(),
        None,
        "nothing but initialize was ever written"
    );
    closed.clone()
}

#[test]
fn unsupported_version_closes_naming_both() {
    for offered in ["1999-01-01", "2026-07-28"] {
        let reason = closes_with(init_response(offered));
        assert_eq!(
            reason,
            CloseReason::UnsupportedVersion {
                requested: LATEST_PROTOCOL_VERSION.into(),
                offered: offered.into()
            }
        );
        let text = reason.to_string();
        assert!(
            text.contains(offered) && text.contains(LATEST_PROTOCOL_VERSION),
            "{text}"
        );
    }
}

#[test]
fn initialize_error_closes() {
    let error = json!({"code": -32000, "message": "nope"});
    let reason = closes_with(json!({"jsonrpc": "2.0", "id": 1, "error": error}));
    assert_eq!(
        reason,
        CloseReason::InitializeFailed(RpcError {
            code: -32000,
            message: "nope".into(),
            data: None
        })
    );
}

#[test]
fn malformed_initialize_results_close() {
    let results = [
        json!("not an object"),
        json!({"capabilities": {}}),
        json!({"protocolVersion": 20250618}),
        json!({"protocolVersion": "2025-06-18", "serverInfo": "x"}),
    ];
    for result in results {
        let reason = closes_with(json!({"jsonrpc": "2.0", "id": 1, "result": result}));
        assert!(
            matches!(reason, CloseReason::InvalidInitializeResult(_)),
            "{reason:?}"
        );
    }
}

#[test]
fn missing_or_null_server_info_and_capabilities_still_connect() {
    for result in [
        json!({"protocolVersion": "2025-06-18"}),
        json!({"protocolVersion": "2025-06-18", "serverInfo": null, "capabilities": null}),
        json!({"protocolVersion": "2025-06-18", "capabilities": []}),
    ] {
        let now = Instant::now();
        let mut conn = Connection::new(now, handshake_config());
        let _ = conn.poll_transmit();
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": result});
        FakeServer::default().send(&mut conn, now, answer);
        let Some(Event::Ready(info)) = conn.poll_event() else {
            panic!("not ready with {result}");
        };
        assert_eq!(
            (info.server.name.as_str(), &info.capabilities),
            ("", &ServerCapabilities::default())
        );
    }
}

#[test]
fn handshake_timeout_closes_at_the_deadline() {
    let start = Instant::now();
    let mut conn = Connection::new(start, handshake_config());
    let _ = conn.poll_transmit();
    let deadline = start + handshake_config().handshake_timeout;
    assert_eq!(conn.poll_timeout(), Some(deadline));
    conn.handle_timeout(deadline - Duration::from_millis(1));
    assert!(!conn.is_closed(), "early timeouts do nothing");
    conn.handle_timeout(deadline);
    assert_eq!(
        drain_events(&mut conn),
        [Event::Closed(CloseReason::HandshakeTimedOut {
            after: Duration::from_secs(10)
        })]
    );
    assert_eq!(conn.poll_timeout(), None);
    assert_eq!(conn.poll_transmit(), None, "initialize is never cancelled");
}

#[test]
fn requests_before_ready_are_held_then_sent_in_order() {
    let now = Instant::now();
    let mut conn = Connection::new(now, handshake_config());
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    let first = conn
        .request(now, Request::call_tool("a", json!({})))
        .unwrap();
    let second = conn.request(now, Request::list_tools(None)).unwrap();
    let ping = conn.request(now, Request::new("ping", None)).unwrap();
    let written = server.absorb(&mut conn);
    assert_eq!(
        written.len(),
        1,
        "only the ping may go out early: {written:?}"
    );
    assert_eq!(written[0]["method"], "ping");
    assert_eq!(id_of(&written[0]), json!(ping));

    server.send(&mut conn, now, init_response("2025-11-25"));
    let written = server.absorb(&mut conn);
    let methods: Vec<&str> = written
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["notifications/initialized", "tools/call", "tools/list"]
    );
    assert_eq!(id_of(&written[1]), json!(first));
    assert_eq!(id_of(&written[2]), json!(second));
}

// ----- requests and responses -----

#[test]
fn tools_list_follows_pages() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let mut pager = Pager::<mcp_proto::Tool>::default();
    let pages = [
        json!({"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "p2"}),
        json!({"tools": [{"name": "b", "description": "B"}]}),
    ];
    let cursors = [None, Some("p2")];
    for (page, cursor) in pages.into_iter().zip(cursors) {
        let request = pager.next_request().expect("another page to ask for");
        let id = conn.request(now, request).unwrap();
        let sent = server.absorb(&mut conn);
        assert_eq!(sent[0]["method"], "tools/list");
        match cursor {
            Some(cursor) => assert_eq!(sent[0]["params"]["cursor"], json!(cursor)),
            None => assert!(sent[0].get("params").is_none()),
        }
        server.respond(&mut conn, now, id, page);
        let (answered, result) = next_response(&mut conn);
        assert_eq!(answered, id);
        pager
            .add_page(ListToolsResult::from_value(result.unwrap()).unwrap())
            .unwrap();
    }
    assert!(pager.next_request().is_none());
    let names: Vec<String> = pager
        .finish()
        .items
        .into_iter()
        .map(|tool| tool.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn tool_call_success_and_is_error() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let ok = conn
        .request(now, Request::call_tool("echo", json!({"text": "hi"})))
        .unwrap();
    let failing = conn
        .request(now, Request::call_tool("fail", Value::Null))
        .unwrap();
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["params"]["name"], "echo");
    assert_eq!(sent[0]["params"]["arguments"], json!({"text": "hi"}));
    assert_eq!(sent[0]["params"]["_meta"]["progressToken"], json!(ok));
    assert_eq!(sent[1]["params"]["arguments"], json!({}));
    assert_ne!(
        sent[0]["params"]["_meta"]["progressToken"],
        sent[1]["params"]["_meta"]["progressToken"]
    );

    let content = json!([{"type": "text", "text": "hi"}]);
    server.respond(
        &mut conn,
        now,
        ok,
        json!({"content": content, "structuredContent": {"n": 1}}),
    );
    let (_, result) = next_response(&mut conn);
    let result = CallToolResult::from_value(result.unwrap()).unwrap();
    assert_eq!(result.content, [Content::Text { text: "hi".into() }]);
    assert_eq!(result.structured_content, Some(json!({"n": 1})));
    assert!(!result.is_error);

    let content = json!([{"type": "text", "text": "broken"}]);
    server.respond(
        &mut conn,
        now,
        failing,
        json!({"content": content, "isError": true}),
    );
    let (id, result) = next_response(&mut conn);
    assert_eq!(id, failing);
    assert!(
        CallToolResult::from_value(result.unwrap())
            .unwrap()
            .is_error
    );
}

#[test]
fn call_arguments_must_be_an_object() {
    let now = Instant::now();
    let (mut conn, _) = handshake(now);
    assert_eq!(
        conn.request(now, Request::call_tool("x", json!([1]))),
        Err(SendError::InvalidParams)
    );
    assert_eq!(
        conn.request(now, Request::new("x", Some(json!(5)))),
        Err(SendError::InvalidParams)
    );
    assert_eq!(conn.poll_transmit(), None);
}

#[test]
fn remote_error_fails_the_request() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn
        .request(now, Request::call_tool("x", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    let error = json!({"code": -32602, "message": "bad", "data": {"why": 1}});
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": id, "error": error}),
    );
    let expected = RpcError {
        code: -32602,
        message: "bad".into(),
        data: Some(json!({"why": 1})),
    };
    assert_eq!(
        next_response(&mut conn),
        (id, Err(RequestError::Remote(expected)))
    );
}

#[test]
fn unreadable_error_object_fails_the_request() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn
        .request(now, Request::call_tool("x", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": id, "error": "boom"}),
    );
    assert!(
        matches!(next_response(&mut conn), (i, Err(RequestError::InvalidResponse(_))) if i == id)
    );
}

#[test]
fn unknown_and_duplicate_responses_are_counted() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn
        .request(now, Request::call_tool("x", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": 999, "result": {}}),
    );
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": "nonsense", "result": {}}),
    );
    assert_eq!(drain_events(&mut conn), []);
    server.respond(&mut conn, now, id, json!({"n": 1}));
    server.respond(&mut conn, now, id, json!({"n": 2}));
    assert_eq!(
        drain_events(&mut conn),
        [Event::Response {
            id,
            result: Ok(json!({"n": 1}).into())
        }]
    );
    assert_eq!(conn.stats().stray_responses, 3);
}

#[test]
fn ids_echoed_as_strings_or_floats_match() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let a = conn.request(now, Request::new("a", None)).unwrap();
    let b = conn.request(now, Request::new("b", None)).unwrap();
    server.absorb(&mut conn);
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": a.to_string(), "result": 1}),
    );
    conn.handle_bytes(
        now,
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{}.0,\"result\":2}}\n", b).as_bytes(),
    );
    assert_eq!(
        drain_events(&mut conn),
        [
            Event::Response {
                id: a,
                result: Ok(json!(1).into())
            },
            Event::Response {
                id: b,
                result: Ok(json!(2).into())
            }
        ]
    );
}

#[test]
fn out_of_order_responses_reach_their_requests() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let ids: Vec<RequestId> = (0..5)
        .map(|i| {
            conn.request(now, Request::call_tool("t", json!({"i": i})))
                .unwrap()
        })
        .collect();
    server.absorb(&mut conn);
    for (i, id) in ids.iter().enumerate().rev() {
        server.respond(&mut conn, now, *id, json!({"i": i}));
    }
    for (i, id) in ids.iter().enumerate().rev() {
        assert_eq!(next_response(&mut conn), (*id, Ok(json!({"i": i}))));
    }
}

#[test]
fn response_to_a_held_request_is_stray() {
    let now = Instant::now();
    let mut conn = Connection::new(now, handshake_config());
    let _ = conn.poll_transmit();
    let held = conn
        .request(now, Request::call_tool("x", json!({})))
        .unwrap();
    FakeServer::default().respond(&mut conn, now, held, json!({}));
    assert_eq!(drain_events(&mut conn), []);
    assert_eq!(conn.stats().stray_responses, 1);
    assert_eq!(conn.pending_requests(), 1);
}

// ----- server requests and notifications -----

#[test]
fn server_ping_is_answered_with_its_id() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    for id in [json!(7), json!("p-1")] {
        server.send(
            &mut conn,
            now,
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"}),
        );
        let answer = server.absorb(&mut conn);
        assert_eq!(answer, [json!({"jsonrpc": "2.0", "id": id, "result": {}})]);
    }
}

#[test]
fn other_server_requests_are_refused_with_method_not_found() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let requests = [
        (json!(1), "sampling/createMessage"),
        (json!("r-2"), "roots/list"),
        (json!(3), "elicitation/create"),
        (json!("x"), "some/unknownMethod"),
        (json!(1.5), "roots/list"),
        (json!(-7), "roots/list"),
    ];
    for (id, method) in requests {
        server.send(
            &mut conn,
            now,
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}}),
        );
        let answer = server.absorb(&mut conn);
        assert_eq!(answer.len(), 1);
        assert_eq!(answer[0]["id"], id, "id echoed exactly");
        assert_eq!(answer[0]["error"]["code"], -32601);
        assert!(
            answer[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains(method)
        );
    }
    assert_eq!(drain_events(&mut conn), []);
    let id = conn
        .request(now, Request::call_tool("still", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    server.respond(&mut conn, now, id, json!({}));
    assert_eq!(next_response(&mut conn), (id, Ok(json!({}))));
}

#[test]
fn refusals_during_the_handshake_wait_for_initialized() {
    let now = Instant::now();
    let mut conn = Connection::new(now, handshake_config());
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": 5, "method": "roots/list"}),
    );
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}),
    );
    let early = server.absorb(&mut conn);
    assert_eq!(
        early,
        [json!({"jsonrpc": "2.0", "id": 6, "result": {}})],
        "only the pong"
    );
    server.send(&mut conn, now, init_response("2025-11-25"));
    let late = server.absorb(&mut conn);
    assert_eq!(late[0]["method"], "notifications/initialized");
    assert_eq!(late[1]["id"], 5);
    assert_eq!(late[1]["error"]["code"], -32601);
}

#[test]
fn refusals_held_during_the_handshake_are_bounded() {
    let now = Instant::now();
    let mut conn = Connection::new(now, handshake_config());
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    for id in 0..1000 {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "roots/list"});
        server.send(&mut conn, now, request);
    }
    assert!(server.absorb(&mut conn).is_empty());
    server.send(&mut conn, now, init_response("2025-11-25"));
    let late = server.absorb(&mut conn);
    assert_eq!(late[0], initialized());
    // The first refusals are kept in order; the flood beyond them is dropped and counted.
    let refused: Vec<&Value> = late[1..].iter().map(|reply| &reply["id"]).collect();
    assert_eq!(refused.len(), 64);
    assert_eq!(refused.first(), Some(&&json!(0)));
    assert_eq!(refused.last(), Some(&&json!(63)));
    assert_eq!(conn.stats().dropped_replies, 1000 - 64);
}

#[test]
fn a_ping_timing_out_during_the_handshake_writes_nothing() {
    let now = Instant::now();
    let config = Config {
        request_timeout: Duration::from_secs(1),
        ..handshake_config()
    };
    let mut conn = Connection::new(now, config);
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    let ping = conn.request(now, Request::new("ping", None)).unwrap();
    assert_eq!(server.absorb(&mut conn)[0]["method"], "ping");
    let later = now + Duration::from_secs(1);
    conn.handle_timeout(later);
    assert!(matches!(
        next_response(&mut conn),
        (id, Err(RequestError::TimedOut { .. })) if id == ping
    ));
    assert!(
        server.absorb(&mut conn).is_empty(),
        "no cancellation before initialized"
    );
    server.send(&mut conn, later, init_response("2025-11-25"));
    assert_eq!(server.absorb(&mut conn), [initialized()]);
}

#[test]
fn request_with_null_id_is_reported_not_answered() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
    );
    assert!(matches!(
        drain_events(&mut conn)[..],
        [Event::Malformed(LineError::NotJsonRpc { .. })]
    ));
    assert_eq!(server.absorb(&mut conn), Vec::<Value>::new());
}

#[test]
fn notifications_are_surfaced() {
    let now = Instant::now();
    let (mut conn, server) = handshake(now);
    let notes = [
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}),
        json!({"jsonrpc": "2.0", "method": "vendor/whatever", "params": [1]}),
    ];
    for note in &notes {
        server.send(&mut conn, now, note.clone());
    }
    let events = drain_events(&mut conn);
    let expected: Vec<Event> = (notes.iter())
        .map(|note| {
            Event::Notification(Notification {
                method: note["method"].as_str().unwrap().into(),
                params: note.get("params").cloned(),
            })
        })
        .collect();
    assert_eq!(events, expected);
}

// ----- time -----

#[test]
fn timeout_fails_the_request_and_cancels_it() {
    let start = Instant::now();
    let (mut conn, mut server) = handshake(start);
    let id = conn
        .request(start, Request::call_tool("slow", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    let deadline = start + conn.config().request_timeout;
    assert_eq!(conn.poll_timeout(), Some(deadline));
    conn.handle_timeout(deadline);
    assert_eq!(
        next_response(&mut conn),
        (
            id,
            Err(RequestError::TimedOut {
                after: Duration::from_secs(60)
            })
        )
    );
    let cancelled = server.absorb(&mut conn);
    assert_eq!(cancelled[0]["method"], "notifications/cancelled");
    assert_eq!(cancelled[0]["params"]["requestId"], json!(id));
    assert!(
        cancelled[0]["params"]["reason"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
    assert_eq!(conn.poll_timeout(), None);
    server.respond(&mut conn, deadline, id, json!({}));
    assert_eq!(drain_events(&mut conn), [], "a late answer is ignored");
    assert_eq!(conn.stats().stray_responses, 1);
}

#[test]
fn per_request_timeouts_order_the_deadlines() {
    let start = Instant::now();
    let (mut conn, _) = handshake(start);
    let slow = conn
        .request(
            start,
            Request::new("a", None).timeout(Duration::from_secs(5)),
        )
        .unwrap();
    let fast = conn
        .request(
            start,
            Request::new("b", None).timeout(Duration::from_secs(1)),
        )
        .unwrap();
    assert_eq!(conn.poll_timeout(), Some(start + Duration::from_secs(1)));
    conn.handle_timeout(start + Duration::from_secs(1));
    assert!(
        matches!(next_response(&mut conn), (id, Err(RequestError::TimedOut { .. })) if id == fast)
    );
    assert_eq!(conn.poll_timeout(), Some(start + Duration::from_secs(5)));
    conn.handle_timeout(start + Duration::from_secs(5));
    assert!(
        matches!(next_response(&mut conn), (id, Err(RequestError::TimedOut { .. })) if id == slow)
    );
}

#[test]
fn progress_pushes_the_deadline_out_up_to_the_maximum() {
    let start = Instant::now();
    let config = Config {
        request_timeout: Duration::from_secs(10),
        max_request_time: Duration::from_secs(25),
        ..handshake_config()
    };
    let (mut conn, mut server) = handshake_with(start, config);
    let id = conn
        .request(start, Request::call_tool("long", json!({})))
        .unwrap();
    let token = server.absorb(&mut conn)[0]["params"]["_meta"]["progressToken"].clone();
    let progress = |progress: u32| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": token, "progress": progress, "total": 10}})
    };
    let mut now = start;
    for step in 1..=3 {
        now += Duration::from_secs(8);
        server.send(&mut conn, now, progress(step));
        assert!(matches!(conn.poll_event(), Some(Event::Notification(_))));
        let expected = (now + Duration::from_secs(10)).min(start + Duration::from_secs(25));
        assert_eq!(conn.poll_timeout(), Some(expected), "step {step}");
    }
    // 24 s in: progress may not carry it past 25 s in total.
    conn.handle_timeout(start + Duration::from_secs(25));
    assert!(matches!(next_response(&mut conn), (i, Err(RequestError::TimedOut { .. })) if i == id));
}

#[test]
fn progress_on_one_request_leaves_the_others_deadlines_alone() {
    let start = Instant::now();
    let (mut conn, mut server) = handshake(start);
    let secs = Duration::from_secs;
    let a = conn
        .request(start, Request::call_tool("a", json!({})).timeout(secs(10)))
        .unwrap();
    let b = conn
        .request(start, Request::call_tool("b", json!({})).timeout(secs(20)))
        .unwrap();
    server.absorb(&mut conn);
    assert_eq!(conn.poll_timeout(), Some(start + secs(10)));
    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": a, "progress": 1}});
    server.send(&mut conn, start + secs(9), note);
    drain_events(&mut conn);
    assert_eq!(conn.poll_timeout(), Some(start + secs(19)), "a moved out");
    conn.handle_timeout(start + secs(19));
    assert!(
        matches!(next_response(&mut conn), (id, Err(RequestError::TimedOut { .. })) if id == a)
    );
    assert_eq!(conn.poll_timeout(), Some(start + secs(20)), "b as it was");
    conn.handle_timeout(start + secs(20));
    assert!(
        matches!(next_response(&mut conn), (id, Err(RequestError::TimedOut { .. })) if id == b)
    );
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn progress_with_an_unknown_token_changes_nothing() {
    let start = Instant::now();
    let (mut conn, server) = handshake(start);
    conn.request(start, Request::call_tool("x", json!({})))
        .unwrap();
    let before = conn.poll_timeout();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": "someone-else", "progress": 1}});
    server.send(&mut conn, start + Duration::from_secs(30), note);
    assert!(
        matches!(conn.poll_event(), Some(Event::Notification(note)) if note.method == "notifications/progress")
    );
    assert_eq!(conn.poll_timeout(), before);
}

#[test]
fn a_call_carries_the_callers_meta_members_but_not_over_its_own() {
    let start = Instant::now();
    let (mut conn, mut server) = handshake(start);
    let meta = json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                      "baggage": "k=v", "progressToken": "not-this-one"});
    let call = Request::call_tool("traced", json!({})).progress_token(json!("mine"));
    let call = call.meta(meta.as_object().unwrap().clone());
    conn.request(start, call).unwrap();
    let sent = server.absorb(&mut conn);
    let sent = &sent[0]["params"]["_meta"];
    assert_eq!(sent["traceparent"], meta["traceparent"]);
    assert_eq!(sent["baggage"], "k=v");
    assert_eq!(sent["progressToken"], "mine");
}

#[test]
fn a_call_can_carry_a_progress_token_of_the_callers() {
    let start = Instant::now();
    let config = Config {
        request_timeout: Duration::from_secs(10),
        ..handshake_config()
    };
    let (mut conn, mut server) = handshake_with(start, config);
    let a = Request::call_tool("slow", json!({})).progress_token(json!("host-a"));
    let a = conn.request(start, a).unwrap();
    let b = Request::call_tool("slow", json!({})).progress_token(json!(7));
    let b = conn.request(start, b).unwrap();
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["params"]["_meta"]["progressToken"], "host-a");
    assert_eq!(sent[1]["params"]["_meta"]["progressToken"], 7);
    // The same token again is refused while its call runs.
    let again = Request::call_tool("x", json!({})).progress_token(json!("host-a"));
    assert_eq!(
        conn.request(start, again),
        Err(SendError::ProgressTokenInUse)
    );
    // Progress for "host-a" keeps call a alive; call b times out.
    let later = start + Duration::from_secs(8);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": "host-a", "progress": 1}});
    server.send(&mut conn, later, note);
    let _ = drain_events(&mut conn);
    conn.handle_timeout(start + Duration::from_secs(11));
    assert!(matches!(
        next_response(&mut conn),
        (id, Err(RequestError::TimedOut { .. })) if id == b
    ));
    assert_eq!(conn.pending_requests(), 1);
    server.respond(&mut conn, later, a, json!({"content": []}));
    assert!(matches!(next_response(&mut conn), (id, Ok(_)) if id == a));
}

#[test]
fn a_progress_token_in_use_is_refused() {
    let start = Instant::now();
    let (mut conn, _server) = handshake(start);
    let call = conn
        .request(start, Request::call_tool("x", json!({})))
        .unwrap();
    let with_token = |token: Value| Some(json!({"_meta": {"progressToken": token}}));
    let first = conn
        .request(start, Request::new("m", with_token(json!("job"))))
        .unwrap();
    for token in [json!("job"), json!(call)] {
        assert_eq!(
            conn.request(start, Request::new("m", with_token(token))),
            Err(SendError::ProgressTokenInUse)
        );
    }
    // Once the first request ends, its token is free again.
    conn.cancel(start, first);
    assert!(
        conn.request(start, Request::new("m", with_token(json!("job"))))
            .is_ok()
    );
}

#[test]
fn deadline_never_in_the_past_after_handle_timeout() {
    let start = Instant::now();
    let (mut conn, _) = handshake(start);
    for seconds in [1, 2, 3, 5, 8] {
        conn.request(
            start,
            Request::new("x", None).timeout(Duration::from_secs(seconds)),
        )
        .unwrap();
    }
    while let Some(deadline) = conn.poll_timeout() {
        let now = deadline + Duration::from_millis(1);
        conn.handle_timeout(now);
        assert!(conn.poll_timeout().is_none_or(|next| next > now));
    }
    assert_eq!(conn.pending_requests(), 0);
}

// ----- cancellation and the end -----

#[test]
fn cancel_fails_the_request_and_tells_the_server() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn
        .request(now, Request::call_tool("x", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    assert!(conn.cancel(now, id));
    assert_eq!(next_response(&mut conn), (id, Err(RequestError::Cancelled)));
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["method"], "notifications/cancelled");
    assert_eq!(sent[0]["params"]["requestId"], json!(id));
    assert!(!conn.cancel(now, id), "already ended");
}

#[test]
fn cancelling_a_held_request_sends_nothing() {
    let now = Instant::now();
    let mut conn = Connection::new(now, handshake_config());
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    let id = conn
        .request(now, Request::call_tool("x", json!({})))
        .unwrap();
    assert!(conn.cancel(now, id));
    assert_eq!(next_response(&mut conn), (id, Err(RequestError::Cancelled)));
    server.send(&mut conn, now, init_response("2025-11-25"));
    let sent = server.absorb(&mut conn);
    assert_eq!(sent, [initialized()]);
}

#[test]
fn eof_fails_every_pending_request_once_then_closes() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let a = conn
        .request(now, Request::call_tool("a", json!({})))
        .unwrap();
    let b = conn
        .request(now, Request::call_tool("b", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    conn.handle_eof(now);
    let closed = RequestError::Closed(CloseReason::Eof);
    assert_eq!(
        drain_events(&mut conn),
        [
            Event::Response {
                id: a,
                result: Err(closed.clone())
            },
            Event::Response {
                id: b,
                result: Err(closed)
            },
            Event::Closed(CloseReason::Eof),
        ]
    );
    assert_eq!(
        conn.request(now, Request::new("x", None)),
        Err(SendError::Closed(CloseReason::Eof))
    );
    conn.handle_eof(now);
    conn.handle_bytes(now, b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n");
    conn.handle_timeout(now + Duration::from_secs(3600));
    assert_eq!(drain_events(&mut conn), [], "closing is sticky");
    assert_eq!(conn.poll_transmit(), None);
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn unterminated_last_line_is_read_at_eof() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn
        .request(now, Request::call_tool("a", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    conn.handle_bytes(
        now,
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}", id).as_bytes(),
    );
    assert_eq!(drain_events(&mut conn), []);
    conn.handle_eof(now);
    assert_eq!(
        drain_events(&mut conn),
        [
            Event::Response {
                id,
                result: Ok(json!({}).into())
            },
            Event::Closed(CloseReason::Eof)
        ]
    );
}

#[test]
fn close_fails_pending_and_writes_nothing_more() {
    let now = Instant::now();
    let (mut conn, _) = handshake(now);
    let id = conn
        .request(now, Request::call_tool("a", json!({})))
        .unwrap();
    let cancelled = conn
        .request(now, Request::call_tool("b", json!({})))
        .unwrap();
    assert!(conn.cancel(now, cancelled));
    conn.close();
    assert_eq!(
        conn.poll_transmit(),
        None,
        "queued lines are dropped on close"
    );
    let events = drain_events(&mut conn);
    assert!(events.contains(&Event::Response {
        id,
        result: Err(RequestError::Closed(CloseReason::Local))
    }));
    assert_eq!(events.last(), Some(&Event::Closed(CloseReason::Local)));
    conn.close();
    assert_eq!(drain_events(&mut conn), []);
}

// ----- malformed input -----

#[test]
fn every_malformed_line_kind_is_reported_and_skipped() {
    let now = Instant::now();
    let config = Config {
        max_line_len: 200,
        ..handshake_config()
    };
    let (mut conn, mut server) = handshake_with(now, config);
    let id = conn
        .request(now, Request::call_tool("x", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    let mut noise = Vec::new();
    noise.extend_from_slice(b"Starting server v1.0...\n");
    noise.extend_from_slice(b"\xff\xfe{\"jsonrpc\"\n");
    noise.extend_from_slice(b"42\n[]\n{\"jsonrpc\":\"2.0\"}\n");
    noise.extend_from_slice(&[b'x'; 300]);
    noise.extend_from_slice(b"\n\n   \r\n");
    noise.extend_from_slice(
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\r\n", id).as_bytes(),
    );
    conn.handle_bytes(now, &noise);
    let events = drain_events(&mut conn);
    let kinds: Vec<&str> = (events.iter())
        .map(|event| match event {
            Event::Malformed(LineError::NotJson { .. }) => "not-json",
            Event::Malformed(LineError::NotUtf8) => "not-utf8",
            Event::Malformed(LineError::NotJsonRpc { .. }) => "not-jsonrpc",
            Event::Malformed(LineError::TooLong {
                limit: 200,
                size: 300,
                id: None,
            }) => "too-long",
            Event::Response { result: Ok(_), .. } => "response",
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "not-json",
            "not-utf8",
            "not-jsonrpc",
            "not-jsonrpc",
            "not-jsonrpc",
            "too-long",
            "response"
        ]
    );
    assert_eq!(conn.stats().malformed_lines, 6);
}

#[test]
fn bom_at_stream_start_is_skipped() {
    let now = Instant::now();
    let mut conn = Connection::new(now, handshake_config());
    let _ = conn.poll_transmit();
    let init = init_response("2025-11-25");
    conn.handle_bytes(now, b"\xEF\xBB");
    conn.handle_bytes(
        now,
        format!("\u{FEFF}{init}\n").as_bytes().get(2..).unwrap(),
    );
    assert!(matches!(conn.poll_event(), Some(Event::Ready(_))));
}

#[test]
fn batches_are_handled_element_by_element() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn
        .request(now, Request::call_tool("x", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    let batch = json!([
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "hi"}},
        {"jsonrpc": "2.0", "id": id, "result": {}},
        {"jsonrpc": "2.0", "id": 9, "method": "ping"},
        "junk"
    ]);
    server.send(&mut conn, now, batch);
    let events = drain_events(&mut conn);
    assert!(matches!(events[0], Event::Notification(_)));
    assert_eq!(
        events[1],
        Event::Response {
            id,
            result: Ok(json!({}).into())
        }
    );
    assert!(matches!(
        events[2],
        Event::Malformed(LineError::NotJsonRpc { .. })
    ));
    assert_eq!(
        server.absorb(&mut conn),
        [json!({"jsonrpc": "2.0", "id": 9, "result": {}})]
    );
}

#[test]
fn sixteen_mib_line_in_4_kib_chunks_is_linear_and_bounded() {
    let now = Instant::now();
    let config = Config {
        max_line_len: 17 * 1024 * 1024,
        ..handshake_config()
    };
    let (mut conn, mut server) = handshake_with(now, config);
    let id = conn
        .request(now, Request::call_tool("blob", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    let text = "x".repeat(16 * 1024 * 1024);
    let line = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
    );
    for chunk in line.as_bytes().chunks(4096) {
        conn.handle_bytes(now, chunk);
    }
    let (answered, result) = next_response(&mut conn);
    assert_eq!(answered, id);
    let result = CallToolResult::from_value(result.unwrap()).unwrap();
    assert!(matches!(&result.content[0], Content::Text { text } if text.len() == 16 * 1024 * 1024));

    // The decoder alone: buffered bytes never exceed the maximum plus one chunk, even while
    // an overlong line streams through.
    let max = 1024 * 1024;
    let mut decoder = LineDecoder::new(max);
    let chunk = [b'y'; 4096];
    for _ in 0..1024 {
        decoder.push(&chunk);
        while decoder.next_line().is_some() {}
        assert!(decoder.buffered() <= max + chunk.len());
    }
}

// ----- declared client capabilities -----

fn declaring(roots: bool, elicitation: bool, sampling: bool) -> Config {
    Config {
        capabilities: mcp_proto::ClientCapabilities {
            roots,
            elicitation,
            sampling,
            tasks: false,
            elicitation_url: false,
        },
        server_request_timeout: Duration::from_secs(30),
        ..handshake_config()
    }
}

/// The next event, which must be a server request.
fn next_server_request(conn: &mut Connection) -> mcp_proto::ServerRequest {
    match conn.poll_event() {
        Some(Event::ServerRequest(request)) => request,
        other => panic!("expected a server request, got {other:?}"),
    }
}

#[test]
fn declared_capabilities_are_sent_in_initialize() {
    let now = Instant::now();
    let mut conn = Connection::new(now, declaring(true, true, false));
    let initialize = FakeServer::default().absorb(&mut conn);
    assert_eq!(
        initialize[0]["params"]["capabilities"],
        json!({"roots": {}, "elicitation": {}})
    );
    let mut conn = Connection::new(now, handshake_config());
    let initialize = FakeServer::default().absorb(&mut conn);
    assert_eq!(initialize[0]["params"]["capabilities"], json!({}));
}

#[test]
fn a_declared_server_request_is_answered_by_the_caller() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake_with(now, declaring(true, true, true));
    let params = json!({"message": "Name?", "requestedSchema": {"type": "object"}});
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": "e-1", "method": "elicitation/create", "params": params}),
    );
    assert!(
        server.absorb(&mut conn).is_empty(),
        "nothing until answered"
    );
    let request = next_server_request(&mut conn);
    assert_eq!(request.method, "elicitation/create");
    assert_eq!(request.params, Some(params));
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    assert!(conn.respond(now, request.id, Ok(answer.clone())));
    assert_eq!(
        server.absorb(&mut conn),
        [json!({"jsonrpc": "2.0", "id": "e-1", "result": answer})]
    );
    assert!(
        !conn.respond(now, request.id, Ok(json!({}))),
        "answered once"
    );
    assert!(server.absorb(&mut conn).is_empty());

    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": 9, "method": "roots/list"}),
    );
    let request = next_server_request(&mut conn);
    assert_eq!(
        (request.method.as_str(), &request.params),
        ("roots/list", &None)
    );
    let refusal = RpcError {
        code: -32000,
        message: "no".into(),
        data: None,
    };
    assert!(conn.respond(now, request.id, Err(refusal)));
    let answer = server.absorb(&mut conn);
    assert_eq!(answer[0]["id"], 9);
    assert_eq!(answer[0]["error"], json!({"code": -32000, "message": "no"}));
}

#[test]
fn an_unanswered_server_request_is_refused_at_its_deadline() {
    let mut now = Instant::now();
    let (mut conn, mut server) = handshake_with(now, declaring(true, false, false));
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": 4, "method": "roots/list"}),
    );
    let request = next_server_request(&mut conn);
    assert_eq!(conn.poll_timeout(), Some(now + Duration::from_secs(30)));
    now += Duration::from_secs(29);
    conn.handle_timeout(now);
    assert!(server.absorb(&mut conn).is_empty());
    now += Duration::from_secs(1);
    conn.handle_timeout(now);
    let refusal = server.absorb(&mut conn);
    assert_eq!(refusal[0]["id"], 4);
    assert_eq!(refusal[0]["error"]["code"], -32601);
    assert_eq!(conn.poll_timeout(), None);
    assert!(!conn.respond(now, request.id, Ok(json!({"roots": []}))));
    assert!(
        server.absorb(&mut conn).is_empty(),
        "too late: nothing more is sent"
    );
    assert_eq!(drain_events(&mut conn), []);
}

#[test]
fn undeclared_server_requests_are_still_refused() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake_with(now, declaring(true, false, false));
    for method in [
        "elicitation/create",
        "sampling/createMessage",
        "other/method",
    ] {
        server.send(
            &mut conn,
            now,
            json!({"jsonrpc": "2.0", "id": method, "method": method}),
        );
        let answer = server.absorb(&mut conn);
        assert_eq!(answer[0]["id"], method);
        assert_eq!(answer[0]["error"]["code"], -32601);
    }
    assert_eq!(drain_events(&mut conn), []);
}

#[test]
fn server_requests_before_the_handshake_ends_are_refused_and_held() {
    let now = Instant::now();
    let mut conn = Connection::new(now, declaring(true, true, true));
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": 5, "method": "roots/list"}),
    );
    assert!(server.absorb(&mut conn).is_empty());
    server.send(&mut conn, now, init_response("2025-11-25"));
    let late = server.absorb(&mut conn);
    assert_eq!(late[0], initialized());
    assert_eq!(
        (late[1]["id"].clone(), late[1]["error"]["code"].clone()),
        (json!(5), json!(-32601))
    );
    assert!(matches!(conn.poll_event(), Some(Event::Ready(_))));
    assert_eq!(drain_events(&mut conn), []);
}

#[test]
fn unanswered_server_requests_are_bounded_and_closing_forgets_them() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake_with(now, declaring(true, false, false));
    for id in 0..100 {
        server.send(
            &mut conn,
            now,
            json!({"jsonrpc": "2.0", "id": id, "method": "roots/list"}),
        );
    }
    let open: Vec<_> = drain_events(&mut conn);
    assert_eq!(open.len(), 64);
    let refused = server.absorb(&mut conn);
    assert_eq!(refused.len(), 36, "the rest refused at once");
    assert!(
        refused
            .iter()
            .all(|answer| answer["error"]["code"] == -32601)
    );
    let Event::ServerRequest(first) = &open[0] else {
        panic!("expected a server request, got {:?}", open[0]);
    };
    conn.close();
    assert!(!conn.respond(now, first.id, Ok(json!({"roots": []}))));
    assert!(server.absorb(&mut conn).is_empty());
}

#[test]
fn a_late_timer_still_reports_the_timeout_itself() {
    let start = Instant::now();
    let (mut conn, mut server) = handshake(start);
    let call = Request::call_tool("slow", json!({})).timeout(Duration::from_secs(1));
    let id = conn.request(start, call).unwrap();
    server.absorb(&mut conn);
    // A busy machine wakes the caller a few milliseconds after the deadline.
    conn.handle_timeout(start + Duration::from_millis(1004));
    let (answered, result) = next_response(&mut conn);
    assert_eq!(answered, id);
    let error = result.unwrap_err();
    assert_eq!(error.to_string(), "no response within 1s");
}
