//! Unit tests of the connection's bookkeeping; the protocol scenarios are in tests/core.

use std::time::Duration;

use super::*;

#[test]
fn url_mode_elicitation_is_declared_beside_forms_and_plain_forms_stay_empty() {
    let forms = ClientCapabilities {
        elicitation: true,
        ..ClientCapabilities::default()
    };
    assert_eq!(forms.to_json(false), json!({"elicitation": {}}));
    let both = ClientCapabilities {
        elicitation_url: true,
        ..forms
    };
    let declared = json!({"elicitation": {"form": {}, "url": {}}});
    assert_eq!(both.to_json(false), declared);
    assert_eq!(both.to_json(true), declared);
}

fn handshake_era() -> Config {
    Config {
        protocol: Protocol::Revision(LATEST_PROTOCOL_VERSION),
        ..Config::default()
    }
}

/// The pending map is unordered; what leaves the connection must still follow the ids.
#[test]
fn held_requests_and_close_failures_follow_request_order() {
    let now = Instant::now();
    let mut connection = Connection::new(now, handshake_era());
    while connection.poll_transmit().is_some() {}
    let ids: Vec<RequestId> = (0..200)
        .map(|_| connection.request(now, Request::list_tools(None)))
        .collect::<Result<_, _>>()
        .unwrap_or_default();
    assert_eq!(ids.len(), 200);
    let init = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}
"#;
    connection.handle_bytes(now, init);
    let written: Vec<Sent> = std::iter::from_fn(|| connection.poll_transmit_with())
        .skip(1) // notifications/initialized
        .map(|(_, sent)| sent)
        .collect();
    let expected: Vec<Sent> = ids.iter().map(|&id| Sent::Request(id, None)).collect();
    assert_eq!(written, expected);

    while connection.poll_event().is_some() {}
    connection.close();
    let failed: Vec<RequestId> = std::iter::from_fn(|| connection.poll_event())
        .filter_map(|event| match event {
            Event::Response { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(failed, ids);
}

/// Requests answered while an earlier deadline stays pending leave entries behind it;
/// they must not pile up, nor show in `poll_timeout`.
#[test]
fn deadlines_of_ended_requests_do_not_pile_up() {
    let now = Instant::now();
    let mut connection = Connection::new(now, handshake_era());
    let init = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}
"#;
    connection.handle_bytes(now, init);
    let request = |timeout| Request::list_tools(None).timeout(Duration::from_secs(timeout));
    let first = connection.request(now, request(1)).map(|id| id.0);
    let first = first.unwrap_or_default();
    for round in 0..1000u32 {
        let later = request(100 + u64::from(round % 7));
        let id = connection.request(now, later).map(|id| id.0);
        let id = id.unwrap_or_default();
        let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n");
        connection.handle_bytes(now, answer.as_bytes());
        assert!(
            connection.pending.deadline_entries() <= 2 + 64,
            "round {round}"
        );
        let earliest = now + Duration::from_secs(1);
        assert_eq!(connection.poll_timeout(), Some(earliest));
    }
    assert!(connection.fail_request(now, RequestId(first), RequestError::Cancelled));
    assert_eq!(connection.poll_timeout(), None);
    assert_eq!(connection.pending.deadline_entries(), 0);
}

/// A request given no deadline has none: nothing to wake for, no expiry however late the clock
/// (a century on), progress extends nothing, and its answer still ends it.
#[test]
fn a_request_with_no_timeout_waits_for_its_answer() {
    let now = Instant::now();
    let mut connection = Connection::new(now, handshake_era());
    let init = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}
"#;
    connection.handle_bytes(now, init);
    while connection.poll_event().is_some() {}
    let call = Request::call_tool("slow", json!({})).no_timeout();
    let id = connection
        .request(now, call)
        .map(|id| id.0)
        .unwrap_or_default();
    assert_eq!(connection.poll_timeout(), None);
    let progress = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{id},\"progress\":1}}}}\n"
    );
    connection.handle_bytes(now, progress.as_bytes());
    assert_eq!(connection.poll_timeout(), None);
    let century = now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600));
    connection.handle_timeout(century.unwrap_or(now));
    assert_eq!(connection.pending_requests(), 1);
    let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n");
    connection.handle_bytes(now, answer.as_bytes());
    let answered = std::iter::from_fn(|| connection.poll_event()).any(|event| {
        matches!(event, Event::Response { id: answered, result: Ok(_) } if answered.0 == id)
    });
    assert!(answered);
    assert_eq!(connection.pending_requests(), 0);
}

/// A notification of ours goes out only once the handshake is done, and not after the close.
#[test]
fn a_notification_of_ours_is_sent_only_while_ready() {
    let now = Instant::now();
    let mut connection = Connection::new(now, handshake_era());
    while connection.poll_transmit().is_some() {}
    assert!(!connection.notify("notifications/roots/list_changed", None));
    let init = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}
"#;
    connection.handle_bytes(now, init);
    while connection.poll_transmit().is_some() {}
    assert!(connection.notify("notifications/roots/list_changed", None));
    let sent = connection.poll_transmit().unwrap_or_default();
    let sent: Value = serde_json::from_slice(&sent).unwrap_or_default();
    assert_eq!(
        sent,
        json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    );
    connection.close();
    assert!(!connection.notify("notifications/roots/list_changed", None));
}

/// -32042 names the links to open, and says so in words.
#[test]
fn url_elicitation_required_names_its_links() {
    let link = json!({"mode": "url", "elicitationId": "e1", "url": "https://x.example/connect",
                      "message": "Connect your account"});
    let error = RpcError {
        code: RpcError::URL_ELICITATION_REQUIRED,
        message: "This request requires more information.".to_owned(),
        data: Some(json!({"elicitations": [link, {"mode": "url"}]})),
    };
    assert_eq!(
        error.kind(),
        ErrorKind::UrlElicitationRequired {
            elicitations: vec![link]
        }
    );
    assert_eq!(
        error.to_string(),
        "the server needs the person to open https://x.example/connect (Connect your account) \
         before the request is made again; This request requires more information. (code -32042)"
    );
}
