//! The server half of Streamable HTTP in virtual time: requests in, routes and responses out,
//! with no socket and no clock.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Abandon, HttpLimits, HttpRequest, HttpServer, MachineId, Part, Routed, Written};
use crate::machines::server::HostMessage;

const STATELESS: &str = "2026-07-28";

fn post<'a>(headers: &'a [(&'a str, &'a [u8])], body: &'a [u8]) -> HttpRequest<'a> {
    HttpRequest {
        method: "POST",
        headers,
        body,
    }
}

fn text(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

fn body_of(response: &super::HttpResponse) -> Value {
    serde_json::from_slice(&response.body).unwrap()
}

fn header<'a>(response: &'a super::HttpResponse, name: &str) -> Option<&'a str> {
    let found = response.headers.iter().find(|(given, _)| *given == name);
    found.map(|(_, value)| value.as_str())
}

fn respond(routed: Routed) -> super::HttpResponse {
    match routed {
        Routed::Respond(response) => response,
        other => panic!("not a response: {other:?}"),
    }
}

/// A stateless-era request of `method`, its headers mirroring it.
fn stateless(id: u64, method: &str, params: Value) -> Vec<u8> {
    let mut params = params;
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(STATELESS);
    text(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

/// A server with a confirmed session: its id and machine.
fn with_session(server: &mut HttpServer, now: Instant) -> (String, MachineId) {
    let initialize = text(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}));
    let Routed::Request {
        machine,
        opens: true,
        ..
    } = server.receive(now, &post(&[], &initialize), || "s-1".to_owned())
    else {
        panic!("initialize opens no machine");
    };
    let answer =
        text(&json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25"}}));
    let Written::To {
        part: Part::Answer(response),
        ..
    } = server.written(now, machine, &answer)
    else {
        panic!("initialize's answer is no response");
    };
    assert_eq!(response.status, 200);
    assert_eq!(header(&response, "mcp-session-id"), Some("s-1"));
    ("s-1".to_owned(), machine)
}

fn session_request(
    server: &mut HttpServer,
    now: Instant,
    id: u64,
    events: bool,
) -> super::ExchangeId {
    let call = text(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "x", "_meta": {"progressToken": id}}}));
    let accept: &[u8] = match events {
        true => b"application/json, text/event-stream",
        false => b"application/json",
    };
    let headers = [("mcp-session-id", &b"s-1"[..]), ("accept", accept)];
    match server.receive(now, &post(&headers, &call), || unreachable!()) {
        Routed::Request {
            exchange,
            opens: false,
            ..
        } => exchange,
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_initialize_answered_with_a_result_opens_a_session_and_one_refused_does_not() {
    let (mut server, now) = (HttpServer::default(), Instant::now());
    let (session, machine) = with_session(&mut server, now);
    let note = text(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let headers = [("mcp-session-id", session.as_bytes())];
    let routed = server.receive(now, &post(&headers, &note), || unreachable!());
    assert!(matches!(routed, Routed::Pass { machine: m, .. } if m == machine));

    let initialize =
        text(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}));
    let Routed::Request { machine, .. } =
        server.receive(now, &post(&[], &initialize), || "s-2".into())
    else {
        panic!()
    };
    let refused =
        text(&json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "no"}}));
    let Written::To {
        part: Part::Answer(response),
        ..
    } = server.written(now, machine, &refused)
    else {
        panic!()
    };
    assert_eq!(
        (response.status, header(&response, "mcp-session-id")),
        (200, None)
    );
    assert_eq!(server.take_ended(), [machine]);
    let headers = [("mcp-session-id", &b"s-2"[..])];
    let response = respond(server.receive(now, &post(&headers, &note), || unreachable!()));
    assert_eq!(
        (response.status, body_of(&response)["error"]["code"].clone()),
        (404, json!(-32001))
    );
}

#[test]
fn an_answer_that_comes_first_is_json_and_one_after_progress_ends_an_event_stream() {
    let (mut server, now) = (HttpServer::default(), Instant::now());
    let (_, machine) = with_session(&mut server, now);
    let plain = session_request(&mut server, now, 1, false);
    let streamed = session_request(&mut server, now, 2, true);
    let progress = |token: u64| {
        text(
            &json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1}}),
        )
    };
    // Progress of a request whose response takes only its answer goes nowhere.
    assert_eq!(server.written(now, machine, &progress(1)), Written::Nowhere);
    let answer = |id: u64| text(&json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}));
    match server.written(now, machine, &answer(1)) {
        Written::To {
            exchange,
            part: Part::Answer(response),
        } => {
            assert_eq!((exchange, response.status), (plain, 200));
            assert_eq!(response.body, answer(1));
        }
        other => panic!("{other:?}"),
    }
    match server.written(now, machine, &progress(2)) {
        Written::To {
            exchange,
            part: Part::Opens(head),
        } => {
            assert_eq!(exchange, streamed);
            assert_eq!(header(&head, "content-type"), Some("text/event-stream"));
        }
        other => panic!("{other:?}"),
    }
    let again = server.written(now, machine, &progress(2));
    assert_eq!(
        again,
        Written::To {
            exchange: streamed,
            part: Part::Event { droppable: true }
        }
    );
    let last = server.written(now, machine, &answer(2));
    assert_eq!(
        last,
        Written::To {
            exchange: streamed,
            part: Part::Last
        }
    );
    // Answered, it takes nothing more.
    assert_eq!(server.written(now, machine, &answer(2)), Written::Nowhere);
}

#[test]
fn a_request_of_ours_goes_to_the_latest_stream_then_the_standalone_one_else_is_refused() {
    let (mut server, now) = (HttpServer::default(), Instant::now());
    let (session, machine) = with_session(&mut server, now);
    let ask = text(&json!({"jsonrpc": "2.0", "id": "g-1", "method": "roots/list"}));
    let Written::Refused(refusal) = server.written(now, machine, &ask) else {
        panic!("a request with nowhere to go is not refused")
    };
    assert_eq!(refusal.id(), Some(&json!("g-1")));

    let listed = text(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    assert_eq!(server.written(now, machine, &listed), Written::Nowhere);
    let headers = [
        ("mcp-session-id", session.as_bytes()),
        ("accept", &b"text/event-stream"[..]),
    ];
    let get = HttpRequest {
        method: "GET",
        headers: &headers,
        body: b"",
    };
    let Routed::Standalone { held, .. } = server.receive(now, &get, || unreachable!()) else {
        panic!()
    };
    assert_eq!(
        held,
        std::slice::from_ref(&listed),
        "the list change before the stream opened is held"
    );
    assert_eq!(server.written(now, machine, &ask), Written::Standalone);

    let first = session_request(&mut server, now, 1, true);
    let latest = session_request(&mut server, now, 2, true);
    let routed = server.written(now, machine, &ask);
    assert!(matches!(routed, Written::To { exchange, part: Part::Opens(_) } if exchange == latest));
    // The host hangs up on it with the question unwritten: refused, and the call cancelled.
    let given = server.hung_up(now, latest, [&ask[..]]);
    let methods: Vec<_> = given
        .iter()
        .map(|m| (m.id().cloned(), m.method().map(str::to_owned)))
        .collect();
    assert_eq!(
        methods,
        [
            (Some(json!("g-1")), None),
            (None, Some("notifications/cancelled".to_owned()))
        ]
    );
    assert_eq!(given[1].meta("x"), None);
    let next = server.written(now, machine, &ask);
    assert!(matches!(next, Written::To { exchange, .. } if exchange == first));
}

#[test]
fn a_stateless_request_is_checked_against_its_headers_and_its_machine_ends_with_its_answer() {
    let (mut server, now) = (HttpServer::default(), Instant::now());
    let call = stateless(4, "tools/call", json!({"name": "x"}));
    type Headers<'a> = &'a [(&'a str, &'a [u8])];
    let cases: [(Headers, i64); 3] = [
        (&[], -32020),
        (
            &[
                ("mcp-protocol-version", b"2025-11-25"),
                ("mcp-method", b"tools/call"),
            ],
            -32020,
        ),
        (
            &[
                ("mcp-protocol-version", b"2026-07-28"),
                ("mcp-method", b"tools/list"),
            ],
            -32020,
        ),
    ];
    for (headers, code) in cases {
        let response = respond(server.receive(now, &post(headers, &call), || unreachable!()));
        assert_eq!(
            (response.status, body_of(&response)["error"]["code"].clone()),
            (400, json!(code))
        );
    }
    let eraless = text(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let response = respond(server.receive(now, &post(&[], &eraless), || unreachable!()));
    assert_eq!(
        (response.status, body_of(&response)["error"]["code"].clone()),
        (400, json!(-32600))
    );

    let headers = [
        ("mcp-protocol-version", &b"2026-07-28"[..]),
        ("mcp-method", b"tools/call"),
    ];
    let Routed::Request {
        machine,
        opens: true,
        ..
    } = server.receive(now, &post(&headers, &call), || unreachable!())
    else {
        panic!()
    };
    let unsupported =
        text(&json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32022, "message": "v"}}));
    let Written::To {
        part: Part::Answer(response),
        ..
    } = server.written(now, machine, &unsupported)
    else {
        panic!()
    };
    assert_eq!(response.status, 400, "-32022 is a 400 in the stateless era");
    assert_eq!(server.take_ended(), [machine]);

    for (code, status) in [(-32601, 404), (-32602, 200)] {
        let Routed::Request { machine, .. } =
            server.receive(now, &post(&headers, &call), || unreachable!())
        else {
            panic!()
        };
        let error =
            text(&json!({"jsonrpc": "2.0", "id": 4, "error": {"code": code, "message": "m"}}));
        let Written::To {
            part: Part::Answer(response),
            ..
        } = server.written(now, machine, &error)
        else {
            panic!()
        };
        assert_eq!(response.status, status, "{code}");
    }

    let listen = stateless(5, "subscriptions/listen", json!({}));
    let headers = [
        ("mcp-protocol-version", &b"2026-07-28"[..]),
        ("mcp-method", b"subscriptions/listen"),
    ];
    let response = respond(server.receive(now, &post(&headers, &listen), || unreachable!()));
    assert_eq!(response.status, 406, "a listen that takes no event stream");
}

#[test]
fn a_listen_ended_by_a_stop_is_answered_as_complete_and_a_call_with_an_error() {
    let (mut server, now) = (HttpServer::default(), Instant::now());
    let listen = stateless(5, "subscriptions/listen", json!({}));
    let headers = [
        ("mcp-protocol-version", &b"2026-07-28"[..]),
        ("mcp-method", b"subscriptions/listen"),
        ("accept", b"text/event-stream"),
    ];
    let Routed::Request {
        machine, exchange, ..
    } = server.receive(now, &post(&headers, &listen), || unreachable!())
    else {
        panic!()
    };
    let acknowledged = text(
        &json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 5}}}),
    );
    let opened = server.written(now, machine, &acknowledged);
    assert!(matches!(
        opened,
        Written::To {
            part: Part::Opens(_),
            ..
        }
    ));
    let (part, message) = server.abandon(exchange, Abandon::Stopping).unwrap();
    assert_eq!(part, Part::Last);
    let message: Value = serde_json::from_slice(&message).unwrap();
    assert_eq!(message["result"]["resultType"], "complete");
    assert_eq!(
        message["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        5
    );
    assert_eq!(server.take_ended(), [machine]);
    assert_eq!(server.abandon(exchange, Abandon::Stopping), None);
}

#[test]
fn limits_refuse_one_more_session_stateless_request_or_open_request_and_a_repeated_id() {
    let limits = HttpLimits {
        max_sessions: 1,
        max_stateless: 1,
        max_in_flight: 2,
        ..HttpLimits::default()
    };
    let (mut server, now) = (HttpServer::new(limits), Instant::now());
    with_session(&mut server, now);
    let initialize =
        text(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}));
    let response = respond(server.receive(now, &post(&[], &initialize), || "s-9".into()));
    assert_eq!(response.status, 503);

    session_request(&mut server, now, 1, false);
    let call = text(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}));
    let headers = [("mcp-session-id", &b"s-1"[..])];
    let response = respond(server.receive(now, &post(&headers, &call), || unreachable!()));
    assert_eq!(
        (response.status, body_of(&response)["error"]["code"].clone()),
        (400, json!(-32600))
    );
    session_request(&mut server, now, 2, false);
    let third = text(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}));
    let response = respond(server.receive(now, &post(&headers, &third), || unreachable!()));
    assert_eq!(response.status, 429);

    let call = stateless(4, "tools/call", json!({}));
    let headers = [
        ("mcp-protocol-version", &b"2026-07-28"[..]),
        ("mcp-method", b"tools/call"),
    ];
    let first = server.receive(now, &post(&headers, &call), || unreachable!());
    let Routed::Request { exchange, .. } = first else {
        panic!()
    };
    let response = respond(server.receive(now, &post(&headers, &call), || unreachable!()));
    assert_eq!(response.status, 429);
    // The host hung up: its machine ends, and its place is free again.
    server.hung_up(now, exchange, []);
    assert!(matches!(
        server.receive(now, &post(&headers, &call), || unreachable!()),
        Routed::Request { .. }
    ));
}

#[test]
fn a_session_idle_past_its_limit_ends_but_not_while_a_request_is_open() {
    let limits = HttpLimits {
        session_idle: Duration::from_secs(60),
        ..HttpLimits::default()
    };
    let (mut server, start) = (HttpServer::new(limits), Instant::now());
    let (_, machine) = with_session(&mut server, start);
    assert_eq!(server.poll_timeout(), Some(start + Duration::from_secs(60)));
    let exchange = session_request(&mut server, start + Duration::from_secs(30), 1, false);
    assert_eq!(
        server.poll_timeout(),
        None,
        "a session with a request open is not idle"
    );
    server.handle_timeout(start + Duration::from_secs(200));
    assert!(server.take_ended().is_empty());
    // Answered at 200 s: idle from then.
    let answer = text(&json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    let answered = server.written(start + Duration::from_secs(200), machine, &answer);
    assert!(matches!(answered, Written::To { exchange: e, .. } if e == exchange));
    assert_eq!(
        server.poll_timeout(),
        Some(start + Duration::from_secs(260))
    );
    server.handle_timeout(start + Duration::from_secs(259));
    assert!(server.take_ended().is_empty());
    server.handle_timeout(start + Duration::from_secs(260));
    assert_eq!(server.take_ended(), [machine]);
    let note = text(&json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    let headers = [("mcp-session-id", &b"s-1"[..])];
    let response = respond(server.receive(
        start + Duration::from_secs(261),
        &post(&headers, &note),
        || unreachable!(),
    ));
    assert_eq!(response.status, 404, "an ended session is unknown");
}

#[test]
fn what_is_not_one_message_or_no_method_of_the_endpoint_is_refused_with_its_status() {
    let (mut server, now) = (HttpServer::default(), Instant::now());
    for (body, code) in [
        (&b"[{}]"[..], -32600),
        (b"\"x\"", -32600),
        (b"{\"id\":", -32700),
    ] {
        let response = respond(server.receive(now, &post(&[], body), || unreachable!()));
        assert_eq!(
            (response.status, body_of(&response)["error"]["code"].clone()),
            (400, json!(code))
        );
    }
    let put = HttpRequest {
        method: "PUT",
        headers: &[],
        body: b"",
    };
    let response = respond(server.receive(now, &put, || unreachable!()));
    assert_eq!(
        (response.status, header(&response, "allow")),
        (405, Some("GET, POST, DELETE"))
    );
    let get = HttpRequest {
        method: "GET",
        headers: &[("accept", b"text/event-stream")],
        body: b"",
    };
    assert_eq!(
        respond(server.receive(now, &get, || unreachable!())).status,
        405
    );
    let delete = HttpRequest {
        method: "DELETE",
        headers: &[("mcp-session-id", b"nope")],
        body: b"",
    };
    assert_eq!(
        respond(server.receive(now, &delete, || unreachable!())).status,
        404
    );
    let note = text(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(
        respond(server.receive(now, &post(&[], &note), || unreachable!())).status,
        202
    );
    let _ = HostMessage::decode(&note).unwrap();
}

#[test]
fn a_session_deleted_during_a_call_answers_the_call_and_its_machine_ends() {
    let (mut server, now) = (HttpServer::default(), Instant::now());
    let (session, machine) = with_session(&mut server, now);
    let plain = session_request(&mut server, now, 1, false);
    let streamed = session_request(&mut server, now, 2, true);
    let progress = text(
        &json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": 2, "progress": 1}}),
    );
    assert!(matches!(
        server.written(now, machine, &progress),
        Written::To {
            part: Part::Opens(_),
            ..
        }
    ));
    let headers = [("mcp-session-id", session.as_bytes())];
    let delete = HttpRequest {
        method: "DELETE",
        headers: &headers,
        body: b"",
    };
    assert_eq!(
        respond(server.receive(now, &delete, || unreachable!())).status,
        200
    );
    let abandoned = server.take_abandoned();
    let parts: Vec<_> = abandoned
        .iter()
        .map(|(exchange, part, _)| (*exchange, matches!(part, Part::Last)))
        .collect();
    assert_eq!(parts, [(plain, false), (streamed, true)]);
    for (_, _, message) in &abandoned {
        let message: Value = serde_json::from_slice(message).unwrap();
        assert_eq!(message["error"]["code"], -32603);
    }
    assert_eq!(server.take_ended(), [machine]);
    // What the machine writes after is for nobody.
    let answer = text(&json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!(server.written(now, machine, &answer), Written::Nowhere);
    assert!(server.take_abandoned().is_empty());
}
