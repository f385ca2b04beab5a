//! Message-level inputs for transports without line framing (HTTP bodies, SSE events).

use std::time::{Duration, Instant};

use mcp_proto::{CloseReason, Config, Event, Request, RequestError};
use serde_json::json;

use crate::peer::{
    drain_events, handshake, handshake_config, handshake_with, id_of, next_response,
};

#[test]
fn a_message_with_newlines_inside_is_one_message() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn.request(now, Request::list_tools(None)).unwrap();
    server.absorb(&mut conn);
    // Pretty-printed, as an HTTP server may send its JSON body.
    let body = format!(
        "{{\n  \"jsonrpc\": \"2.0\",\n  \"id\": {},\n  \"result\": {{\"tools\": []}}\n}}\n",
        id
    );
    conn.handle_message(now, body.as_bytes());
    let (answered, result) = next_response(&mut conn);
    assert_eq!(answered, id);
    assert_eq!(result.unwrap(), json!({"tools": []}));
}

#[test]
fn a_message_over_the_limit_fails_its_request_at_once() {
    let now = Instant::now();
    let config = Config {
        max_line_len: 1000,
        ..handshake_config()
    };
    let (mut conn, mut server) = handshake_with(now, config);
    let id = conn.request(now, Request::list_tools(None)).unwrap();
    server.absorb(&mut conn);
    let big = "x".repeat(2000);
    let body = json!({"jsonrpc": "2.0", "id": id, "result": {"blob": big}}).to_string();
    conn.handle_message(now, body.as_bytes());
    let events = drain_events(&mut conn);
    let failure = events.iter().find_map(|event| match event {
        Event::Response {
            id: answered,
            result: Err(error),
        } if *answered == id => Some(error),
        _ => None,
    });
    assert_eq!(
        failure,
        Some(&RequestError::ResponseTooLarge {
            size: body.len(),
            limit: 1000
        })
    );
    assert!(
        events
            .iter()
            .any(|event| matches!(event, Event::Malformed(_)))
    );
}

#[test]
fn a_transport_failure_ends_one_request_and_nothing_is_sent() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let first = conn.request(now, Request::list_tools(None)).unwrap();
    let second = conn.request(now, Request::list_tools(None)).unwrap();
    server.absorb(&mut conn);
    let error = RequestError::Transport("POST http://x/mcp: HTTP 500".to_owned());
    assert!(conn.fail_request(now, first, error.clone()));
    assert!(!conn.fail_request(now, first, error.clone()), "ends once");
    assert_eq!(next_response(&mut conn), (first, Err(error)));
    assert!(server.absorb(&mut conn).is_empty(), "no cancellation");
    assert_eq!(conn.pending_requests(), 1);
    server.respond(&mut conn, now, second, json!({"tools": []}));
    assert_eq!(next_response(&mut conn).0, second);
}

#[test]
fn a_transport_close_fails_everything_with_its_reason() {
    let now = Instant::now();
    let (mut conn, _server) = handshake(now);
    let id = conn.request(now, Request::list_tools(None)).unwrap();
    let reason = CloseReason::Transport("TLS: certificate not trusted".to_owned());
    conn.fail(reason.clone());
    let events = drain_events(&mut conn);
    assert!(events.contains(&Event::Response {
        id,
        result: Err(RequestError::Closed(reason.clone()))
    }));
    assert_eq!(events.last(), Some(&Event::Closed(reason.clone())));
    assert_eq!(reason.to_string(), "TLS: certificate not trusted");
}

#[test]
fn a_restarted_session_handshakes_again_and_keeps_requests() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let sent = conn.request(now, Request::list_tools(None)).unwrap();
    server.absorb(&mut conn);

    conn.restart_session(now);
    let later = conn.request(now, Request::list_tools(None)).unwrap();
    let written = server.absorb(&mut conn);
    assert_eq!(written.len(), 1, "only initialize until ready: {written:?}");
    assert_eq!(written[0]["method"], "initialize");
    let init_id = id_of(&written[0]);
    assert!(
        init_id.as_u64() > Some(1),
        "a fresh id for the new initialize"
    );

    let answer =
        json!({"jsonrpc": "2.0", "id": init_id, "result": crate::peer::init_result("2025-11-25")});
    server.send(&mut conn, now, answer);
    assert!(matches!(conn.poll_event(), Some(Event::Ready(_))));
    let written = server.absorb(&mut conn);
    assert_eq!(written[0]["method"], "notifications/initialized");
    assert_eq!(
        id_of(&written[1]),
        json!(later),
        "the held request goes out"
    );

    // The request sent before the restart is still awaited (the caller re-sends it).
    server.respond(&mut conn, now, sent, json!({"tools": []}));
    assert_eq!(next_response(&mut conn).0, sent);
}

#[test]
fn a_restarted_handshake_has_its_own_deadline() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let later = now + Duration::from_secs(5);
    conn.restart_session(later);
    server.absorb(&mut conn);
    let deadline = later + handshake_config().handshake_timeout;
    assert_eq!(conn.poll_timeout(), Some(deadline));
    conn.handle_timeout(deadline);
    assert!(matches!(
        drain_events(&mut conn).last(),
        Some(Event::Closed(CloseReason::HandshakeTimedOut { .. }))
    ));
}
