//! The stateless era (2026-07-28): era selection, `_meta` on every request, the removed
//! methods, `resultType`, multi-round-trip requests and subscriptions.

use std::time::{Duration, Instant};

use mcp_proto::{
    ClientCapabilities, CloseReason, Config, Connection, Era, Event, LATEST_PROTOCOL_VERSION,
    LATEST_STATELESS_VERSION, Protocol, Request, RequestError, RpcError, SendError,
};
use serde_json::{Value, json};

use crate::peer::{FakeServer, drain_events, init_response, initialized, next_response};

fn stateless_config() -> Config {
    Config {
        protocol: Protocol::Revision(LATEST_STATELESS_VERSION),
        ..Config::default()
    }
}

/// A `server/discover` result listing `versions`.
fn discover_result(versions: &[&str]) -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": versions,
        "capabilities": {"tools": {"listChanged": true}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "2"}},
        "instructions": "be brief",
        "ttlMs": 1000,
        "cacheScope": "public",
    })
}

fn answer(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn refuse(id: &Value, code: i64, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": "no"});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// The lines the connection wrote since the last call, as text.
fn lines(conn: &mut Connection) -> Vec<String> {
    std::iter::from_fn(|| conn.poll_transmit())
        .map(|line| String::from_utf8(line).unwrap())
        .collect()
}

fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap()
}

/// A connection whose probe found the stateless era, its output drained.
fn probed(now: Instant, config: Config) -> (Connection, FakeServer) {
    let mut conn = Connection::new(now, config);
    let mut server = FakeServer::default();
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["method"], "server/discover");
    let result = discover_result(&["2026-07-28", "2025-11-25"]);
    server.send(&mut conn, now, answer(&sent[0]["id"], result));
    assert!(matches!(conn.poll_event(), Some(Event::Ready(_))));
    server.absorb(&mut conn);
    (conn, server)
}

/// The `_meta` members every request carries with the default settings, as written.
fn default_meta() -> String {
    format!(
        r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"mcp-proto","version":"{}"}}"#,
        env!("CARGO_PKG_VERSION")
    )
}

// ----- era selection -----

#[test]
fn the_probe_finds_the_stateless_era_and_every_request_carries_meta() {
    let now = Instant::now();
    let config = Config {
        log_level: Some("info".to_owned()),
        capabilities: ClientCapabilities {
            elicitation: true,
            ..ClientCapabilities::default()
        },
        ..Config::default()
    };
    let mut conn = Connection::new(now, config);
    assert_eq!(conn.era(), None);
    let probe = lines(&mut conn);
    let version = env!("CARGO_PKG_VERSION");
    let meta = format!(
        r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{}}}},"io.modelcontextprotocol/clientInfo":{{"name":"mcp-proto","version":"{version}"}},"io.modelcontextprotocol/logLevel":"info""#
    );
    assert_eq!(
        probe,
        [format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{{\"_meta\":{{{meta}}}}}}}\n"
        )]
    );
    // Held until the era is known.
    let call = conn
        .request(now, Request::call_tool("echo", json!({"x": 1})))
        .unwrap();
    let read = Request::new(
        "resources/read",
        Some(json!({"uri": "file:///a", "_meta": {
            "progressToken": "t", "io.modelcontextprotocol/protocolVersion": "1999-01-01"}})),
    );
    let read = conn.request(now, read).unwrap();
    assert!(lines(&mut conn).is_empty());

    let result = discover_result(&["2099-01-01", "2026-07-28", "2025-11-25"]);
    FakeServer::default().send(&mut conn, now, answer(&json!(1), result));
    let Some(Event::Ready(info)) = conn.poll_event() else {
        panic!("no Ready");
    };
    assert_eq!(info.protocol_version, LATEST_STATELESS_VERSION);
    assert_eq!(info.era(), Some(Era::Stateless));
    assert_eq!(conn.era(), Some(Era::Stateless));
    assert_eq!(
        info.supported_versions,
        ["2099-01-01", "2026-07-28", "2025-11-25"]
    );
    assert_eq!(info.server.name, "modern");
    assert_eq!(info.instructions.as_deref(), Some("be brief"));
    assert!(info.capabilities.tools.is_some());

    let sent = lines(&mut conn);
    assert_eq!(
        sent,
        [
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{call},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"x\":1}},\"_meta\":{{\"progressToken\":{call},{meta}}}}}}}\n"
            ),
            // The caller's `_meta` keeps its own keys; ours win on the protocol's.
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{read},\"method\":\"resources/read\",\"params\":{{\"uri\":\"file:///a\",\"_meta\":{{\"progressToken\":\"t\",{meta}}}}}}}\n"
            ),
        ]
    );
    // A request with no params still gets them, for `_meta`.
    let list = conn.request(now, Request::list_tools(None)).unwrap();
    assert_eq!(
        lines(&mut conn),
        [format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{list},\"method\":\"tools/list\",\"params\":{{\"_meta\":{{{meta}}}}}}}\n"
        )]
    );
}

#[test]
fn a_probe_refused_with_any_error_means_the_handshake_era() {
    for code in [-32601, -32602, -32603, -32000] {
        let now = Instant::now();
        let mut conn = Connection::new(now, Config::default());
        let mut server = FakeServer::default();
        let probe = server.absorb(&mut conn);
        let held = conn.request(now, Request::list_tools(None)).unwrap();
        server.send(&mut conn, now, refuse(&probe[0]["id"], code, None));
        let sent = server.absorb(&mut conn);
        assert_eq!(sent.len(), 1, "{code}: {sent:?}");
        assert_eq!(sent[0]["method"], "initialize");
        assert_eq!(
            sent[0]["params"]["protocolVersion"],
            LATEST_PROTOCOL_VERSION
        );
        assert_eq!(conn.era(), Some(Era::Handshake));
        let mut init = init_response("2025-11-25");
        init["id"] = sent[0]["id"].clone();
        server.send(&mut conn, now, init);
        assert!(
            matches!(conn.poll_event(), Some(Event::Ready(info)) if info.supported_versions.is_empty())
        );
        let sent = server.absorb(&mut conn);
        assert_eq!(sent[0], initialized());
        assert_eq!(sent[1]["id"], json!(held));
        // No `_meta` of the stateless era on a handshake-era request.
        assert_eq!(sent[1].get("params"), None, "{code}");
    }
}

#[test]
fn an_unreadable_probe_result_means_the_handshake_era() {
    let now = Instant::now();
    let mut conn = Connection::new(now, Config::default());
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    server.send(
        &mut conn,
        now,
        answer(&json!(1), json!({"protocolVersion": "x"})),
    );
    assert_eq!(server.absorb(&mut conn)[0]["method"], "initialize");
}

#[test]
fn an_unanswered_probe_falls_back_after_the_timeout_and_its_late_answer_is_ignored() {
    let now = Instant::now();
    let mut conn = Connection::new(now, Config::default());
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    let deadline = now + Config::default().handshake_timeout;
    assert_eq!(conn.poll_timeout(), Some(deadline));
    conn.handle_timeout(deadline - Duration::from_millis(1));
    assert!(server.absorb(&mut conn).is_empty());
    conn.handle_timeout(deadline);
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["method"], "initialize");
    assert_eq!(sent[0]["id"], 2);
    // The handshake has a budget of its own.
    assert_eq!(
        conn.poll_timeout(),
        Some(deadline + Config::default().handshake_timeout)
    );
    let late = answer(&json!(1), discover_result(&["2026-07-28"]));
    server.send(&mut conn, deadline, late);
    assert!(drain_events(&mut conn).is_empty());
    assert_eq!(conn.stats().stray_responses, 1);
    let mut init = init_response("2025-11-25");
    init["id"] = json!(2);
    server.send(&mut conn, deadline, init);
    assert!(matches!(conn.poll_event(), Some(Event::Ready(_))));
}

#[test]
fn a_server_that_exits_on_the_probe_ends_with_its_own_reason() {
    let now = Instant::now();
    let mut conn = Connection::new(now, Config::default());
    FakeServer::default().absorb(&mut conn);
    let held = conn.request(now, Request::list_tools(None)).unwrap();
    conn.handle_eof(now);
    let events = drain_events(&mut conn);
    let reason = CloseReason::EndedOnProbe;
    assert_eq!(
        events,
        [
            Event::Response {
                id: held,
                result: Err(RequestError::Closed(reason.clone()))
            },
            Event::Closed(reason.clone())
        ]
    );
    let text = reason.to_string();
    assert!(
        text.contains("`server/discover` probe") && text.contains("handshake era"),
        "{text}"
    );
}

#[test]
fn an_unsupported_version_on_the_probe_retries_once_then_falls_back() {
    let now = Instant::now();
    let mut conn = Connection::new(now, Config::default());
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    let data = json!({"supported": ["2026-07-28"], "requested": "2026-07-28"});
    server.send(
        &mut conn,
        now,
        refuse(&json!(1), -32022, Some(data.clone())),
    );
    let again = server.absorb(&mut conn);
    assert_eq!(again[0]["method"], "server/discover");
    assert_eq!(again[0]["id"], 2);
    assert_eq!(conn.era(), None);
    server.send(&mut conn, now, refuse(&json!(2), -32022, Some(data)));
    assert_eq!(server.absorb(&mut conn)[0]["method"], "initialize");

    // Naming only handshake revisions: the handshake era, at the newest of them we speak.
    let mut conn = Connection::new(now, Config::default());
    server.absorb(&mut conn);
    let data = json!({"supported": ["2025-06-18", "2024-11-05"], "requested": "2026-07-28"});
    server.send(&mut conn, now, refuse(&json!(1), -32022, Some(data)));
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["method"], "initialize");
    assert_eq!(sent[0]["params"]["protocolVersion"], "2025-06-18");

    // A result listing no stateless revision of ours but a handshake one.
    let mut conn = Connection::new(now, Config::default());
    server.absorb(&mut conn);
    let result = discover_result(&["2099-01-01", "2025-03-26"]);
    server.send(&mut conn, now, answer(&json!(1), result));
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["params"]["protocolVersion"], "2025-03-26");
}

#[test]
fn a_fixed_stateless_revision_sends_requests_before_discover_answers() {
    let now = Instant::now();
    let mut conn = Connection::new(now, stateless_config());
    assert_eq!(conn.era(), Some(Era::Stateless));
    let call = conn
        .request(now, Request::call_tool("echo", json!({})))
        .unwrap();
    let sent = lines(&mut conn);
    assert_eq!(sent.len(), 2, "{sent:?}");
    let discover = parse(&sent[0]);
    assert_eq!(discover["method"], "server/discover");
    assert!(sent[1].contains(&default_meta()), "{}", sent[1]);
    assert_eq!(parse(&sent[1])["id"], json!(call));
    assert!(conn.server_info().is_none());

    // The call may be answered first.
    let server = FakeServer::default();
    server.respond(&mut conn, now, call, json!({"content": []}));
    assert!(matches!(next_response(&mut conn), (id, Ok(_)) if id == call));
    server.send(
        &mut conn,
        now,
        answer(&discover["id"], discover_result(&["2026-07-28"])),
    );
    let Some(Event::Ready(info)) = conn.poll_event() else {
        panic!("no Ready");
    };
    assert_eq!(info.protocol_version, "2026-07-28");
    assert_eq!(conn.server_info(), Some(&info));
}

#[test]
fn discover_refused_at_a_fixed_stateless_revision_closes_saying_so() {
    let now = Instant::now();
    let mut conn = Connection::new(now, stateless_config());
    let call = conn.request(now, Request::list_tools(None)).unwrap();
    lines(&mut conn);
    let server = FakeServer::default();
    server.send(&mut conn, now, refuse(&json!(1), -32601, None));
    let events = drain_events(&mut conn);
    let Some(Event::Closed(reason @ CloseReason::NotStateless(_))) = events.last() else {
        panic!("{events:?}");
    };
    assert!(
        matches!(&events[0], Event::Response { id, result: Err(RequestError::Closed(_)) } if *id == call)
    );
    let text = reason.to_string();
    assert!(
        text.contains("does not speak the stateless era")
            && text.contains("`server/discover` failed")
            && text.contains("-32601"),
        "{text}"
    );

    // An unreadable result, too.
    let mut conn = Connection::new(now, stateless_config());
    lines(&mut conn);
    server.send(
        &mut conn,
        now,
        answer(&json!(1), json!({"protocolVersion": "2025-11-25"})),
    );
    let events = drain_events(&mut conn);
    assert!(
        matches!(events.last(), Some(Event::Closed(CloseReason::NotStateless(detail))) if detail.contains("supportedVersions"))
    );
}

#[test]
fn a_request_refused_for_its_version_goes_again_once_under_a_new_id() {
    let now = Instant::now();
    let mut conn = Connection::new(now, stateless_config());
    let call = conn
        .request(now, Request::call_tool("echo", json!({})))
        .unwrap();
    lines(&mut conn);
    let server = FakeServer::default();
    let data = json!({"supported": ["2026-07-28"], "requested": "2026-07-28"});
    server.send(
        &mut conn,
        now,
        refuse(&json!(call), -32022, Some(data.clone())),
    );
    let again = lines(&mut conn);
    assert_eq!(again.len(), 1);
    let again = parse(&again[0]);
    assert_eq!(again["method"], "tools/call");
    assert_ne!(again["id"], json!(call));
    assert!(drain_events(&mut conn).is_empty());
    // An answer to the first id is now a stray.
    server.send(&mut conn, now, answer(&json!(call), json!({"content": []})));
    assert!(drain_events(&mut conn).is_empty());
    // Refused again: it fails, with a message a person understands.
    server.send(&mut conn, now, refuse(&again["id"], -32022, Some(data)));
    let (id, result) = next_response(&mut conn);
    assert_eq!(id, call);
    let Err(RequestError::Remote(error)) = result else {
        panic!("{result:?}");
    };
    assert_eq!(error.code, RpcError::UNSUPPORTED_PROTOCOL_VERSION);
    let text = error.to_string();
    assert!(
        text.contains("does not support protocol revision 2026-07-28 (it supports: 2026-07-28)"),
        "{text}"
    );
}

// ----- what the stateless era does not have -----

#[test]
fn ping_and_set_level_are_refused_locally_in_the_stateless_era() {
    let now = Instant::now();
    let (mut conn, _) = probed(now, Config::default());
    for method in ["ping", "logging/setLevel"] {
        let error = conn.request(now, Request::new(method, None)).unwrap_err();
        assert_eq!(
            error,
            SendError::NotInEra {
                method: method.to_owned(),
                era: Era::Stateless
            }
        );
        assert!(error.to_string().contains("stateless era"), "{error}");
    }
    assert!(lines(&mut conn).is_empty());

    // Issued while probing, they fail once the probe finds the stateless era.
    let mut conn = Connection::new(now, Config::default());
    lines(&mut conn);
    let ping = conn.request(now, Request::new("ping", None)).unwrap();
    FakeServer::default().send(
        &mut conn,
        now,
        answer(&json!(1), discover_result(&["2026-07-28"])),
    );
    let events = drain_events(&mut conn);
    assert!(events.contains(&Event::Response {
        id: ping,
        result: Err(RequestError::NotInEra {
            method: "ping".to_owned(),
            era: Era::Stateless
        })
    }));
    assert!(lines(&mut conn).is_empty());
}

#[test]
fn result_type_absent_or_complete_is_a_result_and_anything_else_an_error() {
    let now = Instant::now();
    let (mut conn, server) = probed(now, Config::default());
    let cases = [
        (json!({"tools": []}), None),
        (json!({"resultType": "complete", "tools": []}), None),
        (
            json!({"resultType": "partial", "tools": []}),
            Some("unknown `resultType` \"partial\""),
        ),
        (json!({"resultType": 7}), Some("unknown `resultType` 7")),
        (
            json!({"resultType": "input_required", "requestState": "s"}),
            Some("tools/list: `input_required` answers `tools/list`, which takes no input"),
        ),
    ];
    for (result, error) in cases {
        let id = conn.request(now, Request::new("tools/list", None)).unwrap();
        server.respond(&mut conn, now, id, result.clone());
        let (answered, outcome) = next_response(&mut conn);
        assert_eq!(answered, id);
        match error {
            None => assert_eq!(outcome, Ok(result)),
            Some(error) => {
                assert_eq!(
                    outcome,
                    Err(RequestError::InvalidResponse(error.to_owned()))
                );
            }
        }
    }
}
