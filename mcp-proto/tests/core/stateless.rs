//! The stateless era (2026-07-28): era selection, `_meta` on every request, the removed
//! methods, `resultType`, multi-round-trip requests and subscriptions.

use std::time::{Duration, Instant};

use mcp_proto::{
    ClientCapabilities, CloseReason, Config, Connection, Era, Event, Fallback,
    LATEST_PROTOCOL_VERSION, LATEST_STATELESS_VERSION, Protocol, Request, RequestError, RpcError,
    SendError,
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
    let ready = conn.poll_event();
    assert!(
        matches!(&ready, Some(Event::Ready(info)) if info.server.name == "modern"
            && info.instructions.as_deref() == Some("be brief")),
        "{ready:?}"
    );
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
        let Some(Event::Ready(info)) = conn.poll_event() else {
            panic!("{code}: not ready");
        };
        assert!(info.supported_versions.is_empty());
        // Why the handshake era, for the caller's log: the refusal, in the server's words.
        let Some(Fallback::Refused(detail)) = &info.fallback else {
            panic!("{code}: {:?}", info.fallback);
        };
        assert!(detail.contains(&code.to_string()), "{code}: {detail}");
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
    let Some(Event::Ready(info)) = conn.poll_event() else {
        panic!("not ready");
    };
    let after = Config::default().handshake_timeout;
    assert_eq!(info.fallback, Some(Fallback::Unanswered { after }));
}

#[test]
fn a_stateless_server_too_slow_for_the_probe_is_found_by_its_refusal_of_initialize() {
    let now = Instant::now();
    let mut conn = Connection::new(now, Config::default());
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    let held = conn.request(now, Request::list_tools(None)).unwrap();
    let deadline = now + Config::default().handshake_timeout;
    conn.handle_timeout(deadline);
    let initialize = server.absorb(&mut conn)[0].clone();
    assert_eq!(initialize["method"], "initialize");
    // It answers the probe at last, and then refuses the handshake naming its revision.
    server.send(
        &mut conn,
        deadline,
        answer(&json!(1), discover_result(&["2026-07-28"])),
    );
    let data = json!({"supported": ["2026-07-28"], "requested": "2025-11-25"});
    let refusal = refuse(&initialize["id"], -32022, Some(data));
    server.send(&mut conn, deadline, refusal);
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["method"], "server/discover");
    assert_eq!(
        sent[0]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(conn.era(), Some(Era::Stateless));
    server.send(
        &mut conn,
        deadline,
        answer(&sent[0]["id"], discover_result(&["2026-07-28"])),
    );
    let Some(Event::Ready(info)) = conn.poll_event() else {
        panic!("not ready");
    };
    assert_eq!(info.protocol_version, "2026-07-28");
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["method"], "tools/list");
    assert_eq!(sent[0]["id"], json!(held));
    assert!(sent[0]["params"]["_meta"].is_object());

    // A handshake revision the caller fixed stays fixed: the refusal ends the connection.
    let config = Config {
        protocol: Protocol::Revision(LATEST_PROTOCOL_VERSION),
        ..Config::default()
    };
    let mut conn = Connection::new(now, config);
    server.absorb(&mut conn);
    let data = json!({"supported": ["2026-07-28"], "requested": "2025-11-25"});
    server.send(&mut conn, now, refuse(&json!(1), -32022, Some(data)));
    assert!(matches!(
        drain_events(&mut conn).last(),
        Some(Event::Closed(CloseReason::InitializeFailed(_)))
    ));
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

/// `resultType: "complete"` and `_meta`'s `serverInfo` describe the exchange: the caller gets
/// the result as a handshake-era server sends it, with the rest of `_meta` as sent.
#[test]
fn a_result_comes_without_the_members_that_describe_the_exchange() {
    let now = Instant::now();
    let (mut conn, server) = probed(now, Config::default());
    let info = json!({"name": "modern", "version": "2"});
    let cases = [
        (
            json!({"content": [], "resultType": "complete",
                   "_meta": {"io.modelcontextprotocol/serverInfo": info}}),
            json!({"content": []}),
        ),
        (
            json!({"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": info,
                                            "trace": "t1"}}),
            json!({"content": [], "_meta": {"trace": "t1"}}),
        ),
        // Nothing but protocol members inside: an empty `_meta` the server sent stays.
        (json!({"_meta": {}}), json!({"_meta": {}})),
        (json!({"_meta": 5}), json!({"_meta": 5})),
        // Only the result's own `_meta` is read: deeper ones are content.
        (
            json!({"content": [{"type": "text", "text": "x",
                                "_meta": {"io.modelcontextprotocol/serverInfo": info}}]}),
            json!({"content": [{"type": "text", "text": "x",
                                "_meta": {"io.modelcontextprotocol/serverInfo": info}}]}),
        ),
    ];
    for (sent, handed_on) in cases {
        let id = conn.request(now, Request::new("tools/call", None)).unwrap();
        server.respond(&mut conn, now, id, sent);
        assert_eq!(next_response(&mut conn), (id, Ok(handed_on)));
    }
}

#[test]
fn result_type_absent_or_complete_is_a_result_and_anything_else_an_error() {
    let now = Instant::now();
    let (mut conn, server) = probed(now, Config::default());
    // What the caller gets: the result without the members that describe the exchange.
    let listed = json!({"tools": []});
    let cases = [
        (json!({"tools": []}), None),
        (json!({"resultType": "complete", "tools": []}), None),
        (
            json!({"resultType": "partial", "tools": []}),
            Some("unknown `resultType` \"partial\""),
        ),
        (json!({"resultType": 7}), Some("unknown `resultType` 7")),
        (
            json!({"resultType": {"kind": "complete"}}),
            Some("unknown `resultType` {\"kind\":\"complete\"}"),
        ),
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
            None => assert_eq!(outcome, Ok(listed.clone())),
            Some(error) => {
                assert_eq!(
                    outcome,
                    Err(RequestError::InvalidResponse(error.to_owned()))
                );
            }
        }
    }
}

// ----- multi-round-trip requests -----

fn eliciting() -> Config {
    Config {
        capabilities: ClientCapabilities {
            elicitation: true,
            ..ClientCapabilities::default()
        },
        ..Config::default()
    }
}

fn input_required(state: Option<&str>, requests: Option<Value>) -> Value {
    let mut result = json!({"resultType": "input_required"});
    if let Some(state) = state {
        result["requestState"] = json!(state);
    }
    if let Some(requests) = requests {
        result["inputRequests"] = requests;
    }
    result
}

fn ask_name() -> Value {
    json!({"login": {"method": "elicitation/create", "params": {"mode": "form", "message": "who?"}}})
}

#[test]
fn input_rounds_echo_the_state_under_new_ids_and_leave_other_requests_alone() {
    let now = Instant::now();
    let (mut conn, server) = probed(now, eliciting());
    let call = conn
        .request(now, Request::call_tool("deploy", json!({"env": "prod"})))
        .unwrap();
    let other = conn
        .request(now, Request::call_tool("echo", json!({"x": 1})))
        .unwrap();
    lines(&mut conn);

    // A 1 MiB state, with characters JSON must escape.
    let state: String = "state\"\\\u{e9}/".repeat(1024 * 1024 / 10);
    let first = input_required(Some(&state), Some(ask_name()));
    server.respond(&mut conn, now, call, first);
    let Some(Event::ServerRequest(asked)) = conn.poll_event() else {
        panic!("no ServerRequest");
    };
    assert_eq!(asked.request, Some(call));
    assert_eq!(asked.method, "elicitation/create");
    assert_eq!(
        asked.params,
        Some(json!({"mode": "form", "message": "who?"}))
    );
    assert!(conn.poll_event().is_none(), "one input request, one event");
    assert!(
        lines(&mut conn).is_empty(),
        "nothing goes until the caller answers"
    );
    // Nothing is on the wire: an answer to the first round is a stray.
    server.respond(&mut conn, now, call, json!({"content": []}));
    assert!(drain_events(&mut conn).is_empty());

    let form = json!({"action": "accept", "content": {"name": "octocat"}});
    assert!(conn.respond(now, asked.id, Ok(form.clone())));
    assert!(!conn.respond(now, asked.id, Ok(form)), "answered already");
    let retry = lines(&mut conn);
    assert_eq!(retry.len(), 1);
    let retry_message = parse(&retry[0]);
    let second = retry_message["id"].clone();
    assert_ne!(second, json!(call));
    assert_ne!(second, json!(other));
    let params = &retry_message["params"];
    assert_eq!(params["name"], "deploy");
    assert_eq!(params["arguments"], json!({"env": "prod"}));
    assert_eq!(
        params["inputResponses"]["login"]["content"]["name"],
        "octocat"
    );
    assert_eq!(params["requestState"].as_str(), Some(state.as_str()));
    // The state is written as the server wrote it.
    let state_json = serde_json::to_string(&state).unwrap();
    assert!(retry[0].contains(&format!("\"requestState\":{state_json}")));

    // A round without input requests goes again at once, with only the new state.
    server.send(
        &mut conn,
        now,
        answer(&second, input_required(Some("s2"), None)),
    );
    assert!(drain_events(&mut conn).is_empty());
    let third = parse(&lines(&mut conn)[0]);
    assert_ne!(third["id"], second);
    assert_eq!(third["params"]["requestState"], "s2");
    assert_eq!(third["params"].get("inputResponses"), None);

    // The other call never saw any of it.
    server.respond(
        &mut conn,
        now,
        other,
        json!({"content": [], "resultType": "complete"}),
    );
    assert_eq!(
        next_response(&mut conn),
        (other, Ok(json!({"content": []})))
    );

    server.send(
        &mut conn,
        now,
        answer(
            &third["id"],
            json!({"content": [{"type": "text", "text": "done"}]}),
        ),
    );
    let (id, result) = next_response(&mut conn);
    assert_eq!(id, call);
    assert_eq!(result.unwrap()["content"][0]["text"], "done");
    assert_eq!(conn.pending_requests(), 0);
}

#[test]
fn input_rounds_are_bounded() {
    let now = Instant::now();
    let config = Config {
        max_input_rounds: 3,
        ..Config::default()
    };
    let (mut conn, server) = probed(now, config);
    let request = Request::new("prompts/get", Some(json!({"name": "p"})));
    let call = conn.request(now, request).unwrap();
    lines(&mut conn);
    let mut wire = json!(call);
    for round in 0..3 {
        server.send(
            &mut conn,
            now,
            answer(&wire, input_required(Some("again"), None)),
        );
        let sent = lines(&mut conn);
        assert_eq!(sent.len(), 1, "round {round}");
        wire = parse(&sent[0])["id"].clone();
    }
    server.send(
        &mut conn,
        now,
        answer(&wire, input_required(Some("again"), None)),
    );
    assert_eq!(
        next_response(&mut conn),
        (call, Err(RequestError::TooManyInputRounds { rounds: 3 }))
    );
    assert!(lines(&mut conn).is_empty());
    let text = RequestError::TooManyInputRounds { rounds: 3 }.to_string();
    assert!(text.contains("after 3 rounds"), "{text}");
}

#[test]
fn a_request_waiting_for_input_is_cancelled_with_nothing_on_the_wire() {
    let now = Instant::now();
    let (mut conn, server) = probed(now, eliciting());
    let call = conn
        .request(now, Request::call_tool("t", json!({})))
        .unwrap();
    server.respond(&mut conn, now, call, input_required(None, Some(ask_name())));
    let Some(Event::ServerRequest(asked)) = conn.poll_event() else {
        panic!("no ServerRequest");
    };
    lines(&mut conn);
    assert!(conn.cancel(now, call));
    assert_eq!(
        next_response(&mut conn),
        (call, Err(RequestError::Cancelled))
    );
    assert!(
        lines(&mut conn).is_empty(),
        "no notifications/cancelled: nothing was out"
    );
    assert!(
        !conn.respond(now, asked.id, Ok(json!({"action": "cancel"}))),
        "the question went with the request"
    );
    assert!(lines(&mut conn).is_empty());
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn an_input_request_refused_or_unanswered_is_left_out_of_the_retry() {
    let now = Instant::now();
    let config = Config {
        capabilities: ClientCapabilities {
            elicitation: true,
            roots: true,
            ..ClientCapabilities::default()
        },
        ..Config::default()
    };
    let (mut conn, server) = probed(now, config);
    let call = conn
        .request(now, Request::call_tool("t", json!({})))
        .unwrap();
    let requests = json!({
        "a": {"method": "elicitation/create", "params": {"message": "a?"}},
        "b": {"method": "roots/list"},
        "c": {"method": "elicitation/create", "params": {"message": "c?"}},
    });
    server.respond(
        &mut conn,
        now,
        call,
        input_required(Some("s"), Some(requests)),
    );
    let asked: Vec<_> = (drain_events(&mut conn).into_iter())
        .map(|event| match event {
            Event::ServerRequest(asked) => asked,
            other => panic!("expected a server request, got {other:?}"),
        })
        .collect();
    let methods: Vec<&str> = asked.iter().map(|a| a.method.as_str()).collect();
    assert_eq!(
        methods,
        ["elicitation/create", "roots/list", "elicitation/create"]
    );
    assert!(asked.iter().all(|a| a.request == Some(call)));
    lines(&mut conn);

    let yes = json!({"action": "accept", "content": {}});
    assert!(conn.respond(now, asked[0].id, Ok(yes.clone())));
    let refusal = Err(RpcError::method_not_found("roots/list"));
    assert!(conn.respond(now, asked[1].id, refusal));
    assert!(lines(&mut conn).is_empty(), "`c` is still open");
    // Only the open question's deadline: the request has none while it waits.
    let deadline = now + Config::default().server_request_timeout;
    assert_eq!(conn.poll_timeout(), Some(deadline));
    conn.handle_timeout(deadline);
    assert!(drain_events(&mut conn).is_empty(), "the request goes on");
    let retry = lines(&mut conn);
    assert_eq!(retry.len(), 1, "the retry, and no refusal on the wire");
    let params = &parse(&retry[0])["params"];
    assert_eq!(params["inputResponses"], json!({"a": yes}));
    assert_eq!(params["requestState"], "s");
    assert!(
        !conn.respond(deadline, asked[2].id, Ok(json!({}))),
        "too late"
    );
    let request_timeout = Config::default().request_timeout;
    assert_eq!(conn.poll_timeout(), Some(deadline + request_timeout));
}

#[test]
fn an_input_request_we_did_not_declare_or_do_not_know_fails_the_request() {
    let now = Instant::now();
    let (mut conn, server) = probed(now, Config::default());
    let cases = [
        (ask_name(), "a capability we did not declare"),
        (json!({"k": {"method": "tasks/get"}}), "an unknown method"),
        (json!({"k": 1}), "is not an object"),
    ];
    for (requests, expected) in cases {
        let call = conn
            .request(now, Request::call_tool("t", json!({})))
            .unwrap();
        server.respond(&mut conn, now, call, input_required(None, Some(requests)));
        let (id, result) = next_response(&mut conn);
        assert_eq!(id, call);
        let Err(RequestError::InvalidResponse(detail)) = result else {
            panic!("{result:?}");
        };
        assert!(
            detail.starts_with("tools/call: ") && detail.contains(expected),
            "{detail}"
        );
    }
    assert!(
        lines(&mut conn)
            .iter()
            .all(|line| !line.contains("inputResponses"))
    );
}

// ----- subscriptions -----

fn acknowledgement(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
           "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id},
                      "notifications": {"toolsListChanged": true}}})
}

#[test]
fn an_acknowledged_subscription_has_no_deadline() {
    let now = Instant::now();
    let (mut conn, server) = probed(now, Config::default());
    let filter = mcp_proto::ListenFilter {
        tools_list_changed: true,
        ..mcp_proto::ListenFilter::default()
    };
    let listen = conn.request(now, Request::listen(&filter)).unwrap();
    let sent = parse(&lines(&mut conn)[0]);
    assert_eq!(sent["method"], "subscriptions/listen");
    assert_eq!(
        sent["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(
        sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(conn.poll_timeout().is_some());

    // Another subscription's acknowledgement changes nothing.
    server.send(&mut conn, now, acknowledgement(&json!(999)));
    assert!(conn.poll_timeout().is_some());
    drain_events(&mut conn);
    server.send(&mut conn, now, acknowledgement(&sent["id"]));
    let Some(Event::Notification(ack)) = conn.poll_event() else {
        panic!("the acknowledgement is a notification too");
    };
    assert_eq!(ack.subscription_id(), Some(listen));
    assert_eq!(conn.poll_timeout(), None);
    conn.handle_timeout(now + Duration::from_secs(24 * 3600));
    assert!(drain_events(&mut conn).is_empty());

    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                         "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": sent["id"]}}});
    server.send(&mut conn, now, changed);
    let Some(Event::Notification(changed)) = conn.poll_event() else {
        panic!("no notification");
    };
    assert_eq!(changed.subscription_id(), Some(listen));
    // The server ends it gracefully.
    server.respond(&mut conn, now, listen, json!({"resultType": "complete"}));
    assert!(matches!(next_response(&mut conn), (id, Ok(_)) if id == listen));
}

#[test]
fn an_unacknowledged_subscription_times_out_saying_so() {
    let now = Instant::now();
    let (mut conn, _) = probed(now, Config::default());
    let request =
        Request::listen(&mcp_proto::ListenFilter::default()).timeout(Duration::from_secs(5));
    let listen = conn.request(now, request).unwrap();
    lines(&mut conn);
    conn.handle_timeout(now + Duration::from_secs(5));
    let (id, result) = next_response(&mut conn);
    assert_eq!(id, listen);
    let error = result.unwrap_err();
    assert_eq!(
        error,
        RequestError::NotAcknowledged {
            after: Duration::from_secs(5)
        }
    );
    assert!(
        error
            .to_string()
            .contains("subscription was not acknowledged within 5s"),
        "{error}"
    );
    let cancelled = parse(&lines(&mut conn)[0]);
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], json!(listen));
}

// ----- cache hints and typed errors -----

#[test]
fn cache_hints_are_read_and_combined_over_pages() {
    use mcp_proto::{
        CacheHint, CacheScope, FromResult, ListToolsResult, Pager, ReadResourceResult, Tool,
    };

    let page = |ttl: u64, scope: &str, cursor: Option<&str>| {
        let mut page = json!({"tools": [{"name": "a", "inputSchema": {"type": "object"}}],
                              "ttlMs": ttl, "cacheScope": scope});
        if let Some(cursor) = cursor {
            page["nextCursor"] = json!(cursor);
        }
        ListToolsResult::from_result(page).unwrap()
    };
    let first = page(60_000, "public", Some("c"));
    let hint = |ms, scope| {
        Some(CacheHint {
            ttl: Duration::from_millis(ms),
            scope,
        })
    };
    assert_eq!(first.cache, hint(60_000, CacheScope::Public));
    let mut pager = Pager::<Tool>::default();
    pager.add_page(first).unwrap();
    pager.add_page(page(5_000, "public", Some("d"))).unwrap();
    pager.add_page(page(9_000, "private", None)).unwrap();
    assert_eq!(pager.finish().cache, hint(5_000, CacheScope::Private));

    // A page without one leaves the listing without one.
    let mut pager = Pager::<Tool>::default();
    pager.add_page(page(5_000, "public", Some("c"))).unwrap();
    let bare = json!({"tools": []});
    pager
        .add_page(ListToolsResult::from_result(bare).unwrap())
        .unwrap();
    assert_eq!(pager.finish().cache, None);

    let read = json!({"contents": [], "ttlMs": 0, "cacheScope": "private"});
    let read = ReadResourceResult::from_result(read).unwrap();
    assert_eq!(read.cache, hint(0, CacheScope::Private));
    let read = ReadResourceResult::from_result(json!({"contents": []})).unwrap();
    assert_eq!(read.cache, None);
}

#[test]
fn stateless_era_errors_are_typed_and_worded_for_people() {
    use mcp_proto::ErrorKind;

    let error = |code, data: Value| RpcError {
        code,
        message: "refused".to_owned(),
        data: Some(data),
    };
    let missing = error(-32021, json!({"requiredCapabilities": {"elicitation": {}}}));
    assert_eq!(
        missing.kind(),
        ErrorKind::MissingClientCapabilities {
            required: vec!["elicitation".to_owned()]
        }
    );
    let text = missing.to_string();
    assert!(
        text.starts_with("the server needs client capabilities we did not declare: elicitation"),
        "{text}"
    );
    let version = error(
        -32022,
        json!({"supported": ["2026-07-28", "2025-11-25"], "requested": "1900-01-01"}),
    );
    assert_eq!(
        version.kind(),
        ErrorKind::UnsupportedVersion {
            supported: vec!["2026-07-28".to_owned(), "2025-11-25".to_owned()],
            requested: Some("1900-01-01".to_owned())
        }
    );
    let text = version.to_string();
    assert!(
        text.starts_with("the server does not support protocol revision 1900-01-01 (it supports: 2026-07-28, 2025-11-25)"),
        "{text}"
    );
    assert_eq!(error(-32020, json!({})).kind(), ErrorKind::HeaderMismatch);

    let not_found = error(-32602, json!({"uri": "file:///x"}));
    assert!(not_found.is_resource_not_found("resources/read"));
    assert!(!not_found.is_resource_not_found("tools/call"));
    assert!(error(-32002, json!({})).is_resource_not_found("resources/read"));
}
