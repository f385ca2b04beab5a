//! Answers that cannot be read: over the size limit, not UTF-8, not JSON, not JSON-RPC. Each
//! fails the request it answers in the very `handle_bytes` call that shows it, in virtual
//! time that never moves, and fails it once; the connection goes on.

use std::time::Instant;

use mcp_proto::{Config, Connection, Event, LineError, Request, RequestError, RequestId};
use serde_json::json;

use crate::peer::{
    FakeServer, drain_events, handshake, handshake_config, handshake_with, next_response,
};

/// The failures among `events`, by request.
fn failures(events: &[Event]) -> Vec<(RequestId, RequestError)> {
    (events.iter())
        .filter_map(|event| match event {
            Event::Response {
                id,
                result: Err(error),
            } => Some((*id, error.clone())),
            _ => None,
        })
        .collect()
}

/// A request answered well after whatever came before: the connection still works.
fn still_answers(conn: &mut Connection, server: &mut FakeServer, now: Instant) {
    let next = conn.request(now, Request::list_tools(None)).unwrap();
    server.absorb(conn);
    server.respond(conn, now, next, json!({"tools": []}));
    assert_eq!(next_response(conn), (next, Ok(json!({"tools": []}))));
}

fn with_limit(now: Instant, limit: usize) -> (Connection, FakeServer) {
    let config = Config {
        max_line_len: limit,
        ..handshake_config()
    };
    handshake_with(now, config)
}

#[test]
fn a_response_over_the_limit_fails_its_request_as_the_limit_is_crossed() {
    let now = Instant::now();
    let (mut conn, mut server) = with_limit(now, 1000);
    let first = conn
        .request(now, Request::call_tool("big", json!({})))
        .unwrap();
    let second = conn
        .request(now, Request::call_tool("big", json!({})))
        .unwrap();
    server.absorb(&mut conn);
    let text = "x".repeat(5000);
    // One server puts the id first, another last (as the TypeScript SDK does).
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":{first},"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
    );
    let tail = format!(
        r#"{{"result":{{"content":[{{"type":"text","text":"{text}"}}]}},"jsonrpc":"2.0","id":{second}}}"#
    );
    let too_large = |size: usize| RequestError::ResponseTooLarge { size, limit: 1000 };

    let mut chunks = head.as_bytes().chunks(700);
    conn.handle_bytes(now, chunks.next().unwrap());
    assert_eq!(drain_events(&mut conn), []);
    // The second chunk crosses the limit: the id at the head is known, no newline needed.
    conn.handle_bytes(now, chunks.next().unwrap());
    let crossed = failures(&drain_events(&mut conn));
    assert_eq!(crossed, [(first, too_large(1400))]);
    let message = crossed[0].1.to_string();
    assert!(message.contains("1400 bytes") && message.contains("over the 1000 bytes limit"));
    for chunk in chunks {
        conn.handle_bytes(now, chunk);
    }
    assert_eq!(drain_events(&mut conn), [], "discarded, still no newline");
    conn.handle_bytes(now, b"\n");
    // Reported once, with its whole size, and not failed a second time.
    let discarded = LineError::TooLong {
        limit: 1000,
        size: head.len(),
        id: Some(json!(first)),
    };
    assert_eq!(drain_events(&mut conn), [Event::Malformed(discarded)]);

    // An id at the end is known only there.
    for chunk in tail.as_bytes().chunks(700) {
        conn.handle_bytes(now, chunk);
    }
    assert_eq!(drain_events(&mut conn), []);
    conn.handle_bytes(now, b"\n");
    let events = drain_events(&mut conn);
    assert_eq!(failures(&events), [(second, too_large(tail.len()))]);
    assert_eq!(events.len(), 2, "{events:?}");

    assert_eq!(conn.pending_requests(), 0);
    still_answers(&mut conn, &mut server, now);
}

#[test]
fn a_response_over_the_limit_that_never_ends_fails_its_request_all_the_same() {
    let now = Instant::now();
    // Below the bound from which long lines are parsed as they arrive, and above it.
    for limit in [1000, 3 << 20] {
        let (mut conn, mut server) = with_limit(now, limit);
        let big = conn.request(now, Request::list_tools(None)).unwrap();
        let other = conn.request(now, Request::list_tools(None)).unwrap();
        server.absorb(&mut conn);
        let start = format!(r#"{{"jsonrpc":"2.0","id":{big},"result":{{"tools":[{{"name":""#);
        conn.handle_bytes(now, start.as_bytes());
        let chunk = vec![b'a'; 64 * 1024];
        let mut sent = start.len();
        while sent <= limit + 1 {
            assert_eq!(drain_events(&mut conn), [], "{limit}: {sent} bytes");
            conn.handle_bytes(now, &chunk);
            sent += chunk.len();
        }
        // Failed in the call that crossed: no newline came, no time passed.
        let too_large = RequestError::ResponseTooLarge { size: sent, limit };
        assert_eq!(failures(&drain_events(&mut conn)), [(big, too_large)]);
        assert_eq!(conn.pending_requests(), 1, "{limit}: the other one waits");
        // The rest is discarded as it comes, and never held.
        conn.handle_bytes(now, &chunk);
        assert_eq!(drain_events(&mut conn), []);
        conn.handle_bytes(now, b"\"}]}}\n");
        let events = drain_events(&mut conn);
        assert!(
            matches!(&events[..], [Event::Malformed(LineError::TooLong { .. })]),
            "{limit}: {events:?}"
        );
        server.respond(&mut conn, now, other, json!({"tools": []}));
        assert_eq!(next_response(&mut conn), (other, Ok(json!({"tools": []}))));
    }
}

/// An answer to a request, by its id.
type Line = fn(RequestId) -> Vec<u8>;

/// A line answering `id` whose result nests `depth` arrays.
fn deep(id: RequestId, depth: usize) -> Vec<u8> {
    let mut line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"deep":"#).into_bytes();
    line.extend(std::iter::repeat_n(b'[', depth));
    line.extend(std::iter::repeat_n(b']', depth));
    line.extend_from_slice(b"}}\n");
    line
}

/// A tools/list answer with a good tool, and one whose name is not UTF-8.
fn bad_name(id: RequestId) -> Vec<u8> {
    let good = r#"{"name":"good","inputSchema":{"type":"object"}}"#;
    let start = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{good},{{"name":"ba"#);
    [start.as_bytes(), b"\xff\xfed\",\"inputSchema\":{}}]}}\n"].concat()
}

fn old_version(id: RequestId) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"1.0\",\"id\":{id},\"result\":{{}}}}\n").into_bytes()
}

#[test]
fn an_unreadable_response_fails_its_request_at_once() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let cases: [(&str, Line); 3] = [
        ("not valid UTF-8", bad_name),
        // Parsed as it arrives (2 MB): too deep to walk.
        ("recursion limit", |id| deep(id, 1_000_000)),
        (r#"is not "2.0""#, old_version),
    ];
    for (cause, line) in cases {
        let id = conn.request(now, Request::list_tools(None)).unwrap();
        server.absorb(&mut conn);
        for chunk in line(id).chunks(64 * 1024) {
            conn.handle_bytes(now, chunk);
        }
        let events = drain_events(&mut conn);
        let failed = failures(&events);
        assert!(
            matches!(&failed[..], [(failed, RequestError::InvalidResponse(detail))]
                if *failed == id && detail.contains(cause)),
            "{cause}: {failed:?}"
        );
        let reports = (events.iter()).filter(|event| matches!(event, Event::Malformed(_)));
        assert_eq!(reports.count(), 1, "{cause}: reported once");
        assert_eq!(events.len(), 2, "{cause}: nothing else");
        still_answers(&mut conn, &mut server, now);
    }
    assert_eq!(conn.pending_requests(), 0);
}

/// A result deeper than a value may be, in a line short enough to hold whole, is valid JSON
/// kept as text: it goes to its caller (a gateway passes it on as it came), and reading it
/// into a value is what fails.
#[test]
fn a_deep_result_held_whole_is_handed_on_and_fails_only_when_read() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn.request(now, Request::list_tools(None)).unwrap();
    server.absorb(&mut conn);
    let line = deep(id, 1000);
    conn.handle_bytes(now, &line);
    let events = drain_events(&mut conn);
    let [
        Event::Response {
            id: answered,
            result: Ok(raw),
        },
    ] = &events[..]
    else {
        panic!("expected the answer, got {events:?}");
    };
    assert_eq!(*answered, id);
    assert!(raw.json().contains(&"[".repeat(1000)));
    let error = raw.clone().into_value().unwrap_err();
    assert!(error.contains("recursion limit"), "{error}");
    still_answers(&mut conn, &mut server, now);
}

#[test]
fn an_unreadable_line_that_answers_nothing_of_ours_fails_nothing() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let id = conn.request(now, Request::list_tools(None)).unwrap();
    server.absorb(&mut conn);
    // A server request and a notification that carry our id, and an answer with no id.
    let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x","params":{{"a":""#);
    let notification =
        format!(r#"{{"jsonrpc":"2.0","method":"x","params":{{"id":{id},"result":1,}}}}"#);
    for line in [
        [request.as_bytes(), b"\xff\"}}"].concat(),
        notification.into_bytes(),
        br#"{"jsonrpc":"2.0","result":{"a":[}}"#.to_vec(),
    ] {
        conn.handle_bytes(now, &line);
        conn.handle_bytes(now, b"\n");
        let events = drain_events(&mut conn);
        assert!(matches!(&events[..], [Event::Malformed(_)]), "{events:?}");
    }
    assert_eq!(conn.pending_requests(), 1);
}
