//! The server role before a stateless-era host (2026-07-28): `server/discover`, per-request
//! `_meta` and capabilities, -32022, `resultType`, an `input_required` round trip, and
//! `subscriptions/listen`; and a handshake-era host on the same kind of connection.

use std::time::Instant;

use mcp_proto::{
    ListCapability, Request, SendError, ServerCapabilities,
    server::{HostInput, HostRequest, InputRequired, ServerConfig, ServerConnection, ServerEvent},
};
use serde_json::{Value, json};

const VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const CLIENT: &str = "io.modelcontextprotocol/clientInfo";
const SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

fn send(conn: &mut ServerConnection, now: Instant, message: Value) {
    conn.handle_bytes(now, format!("{message}\n").as_bytes());
}

fn written(conn: &mut ServerConnection) -> Vec<Value> {
    std::iter::from_fn(|| conn.poll_transmit())
        .map(|line| serde_json::from_slice(&line).unwrap())
        .collect()
}

fn events(conn: &mut ServerConnection) -> Vec<ServerEvent> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}

/// A stateless-era request: `params` with the era's `_meta` members added.
fn modern(id: Value, method: &str, mut params: Value, capabilities: Value) -> Value {
    params["_meta"] = json!({
        VERSION: "2026-07-28",
        CAPABILITIES: capabilities,
        CLIENT: {"name": "modern-host", "version": "2"},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn config() -> ServerConfig {
    ServerConfig {
        name: "gateway".to_owned(),
        capabilities: ServerCapabilities {
            tools: Some(ListCapability { list_changed: true }),
            prompts: Some(ListCapability { list_changed: true }),
            ..ServerCapabilities::default()
        },
        instructions: Some("one server for many".to_owned()),
        ..ServerConfig::default()
    }
}

fn next_request(conn: &mut ServerConnection) -> HostRequest {
    let found = events(conn).into_iter().find_map(|event| match event {
        ServerEvent::Request(request) => Some(request),
        _ => None,
    });
    found.expect("a request")
}

#[test]
fn discover_tells_both_eras_and_commits_to_neither() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    send(
        &mut conn,
        now,
        modern(json!("d"), "server/discover", json!({}), json!({})),
    );
    let answer = written(&mut conn);
    let result = &answer[0]["result"];
    assert_eq!(answer[0]["id"], "d");
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["supportedVersions"],
        json!(mcp_proto::SUPPORTED_PROTOCOL_VERSIONS)
    );
    assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "gateway"
    );
    assert_eq!(result["instructions"], "one server for many");
    assert!(events(&mut conn).is_empty());
    // A dual-era host that probed may still choose the handshake.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}});
    send(&mut conn, now, initialize);
    assert_eq!(
        written(&mut conn)[0]["result"]["protocolVersion"],
        "2025-11-25"
    );
}

#[test]
fn an_unsupported_revision_is_refused_with_the_supported_list() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    let mut probe = modern(json!(1), "server/discover", json!({}), json!({}));
    probe["params"]["_meta"][VERSION] = json!("2099-01-01");
    send(&mut conn, now, probe);
    let mut call = modern(json!(2), "tools/list", json!({}), json!({}));
    call["params"]["_meta"][VERSION] = json!("2025-11-25");
    send(&mut conn, now, call);
    let answers = written(&mut conn);
    for (answer, requested) in answers.iter().zip(["2099-01-01", "2025-11-25"]) {
        assert_eq!(answer["error"]["code"], -32022, "{answer}");
        assert_eq!(answer["error"]["data"]["requested"], requested);
        let supported = answer["error"]["data"]["supported"].as_array().unwrap();
        assert!(supported.contains(&json!("2026-07-28")), "{answer}");
    }
    // Nothing was committed: neither request reached the caller.
    assert!(events(&mut conn).is_empty());
    assert!(!conn.is_ready());
}

#[test]
fn a_request_with_meta_needs_no_handshake_and_brings_its_own_capabilities() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    let call = json!({"name": "echo", "arguments": {"x": 1}});
    send(
        &mut conn,
        now,
        modern(json!(7), "tools/call", call, json!({})),
    );
    let found = events(&mut conn);
    let [ServerEvent::Ready(first), ServerEvent::Request(request)] = &found[..] else {
        panic!("expected Ready then a request, got {found:?}");
    };
    assert_eq!(first.protocol_version, "2026-07-28");
    assert!(conn.is_stateless());
    let client = request.client.as_ref().unwrap();
    assert_eq!(client.client.name, "modern-host");
    assert!(!client.declares("elicitation"));
    // The next request declares elicitation: that request's own `_meta` says so.
    let call = json!({"name": "echo", "arguments": {}});
    let elicit = json!({"elicitation": {"form": {}}});
    send(&mut conn, now, modern(json!(8), "tools/call", call, elicit));
    let second = next_request(&mut conn);
    assert!(second.client.as_ref().unwrap().declares("elicitation"));
    // Results are marked complete; the host's ids are echoed.
    assert!(conn.respond(now, request.id, Ok(json!({"content": []}))));
    let answer = written(&mut conn);
    assert_eq!(
        answer[0],
        json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [], "resultType": "complete"}})
    );
    // No requests of ours to a stateless host: its questions go in `input_required`.
    let form = json!({"type": "object", "properties": {}});
    assert_eq!(
        conn.request(now, Request::elicit("ok?", form)),
        Err(SendError::NotReady)
    );
    // A request that forgets its `_meta`, and a late `initialize`, are refused.
    send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    );
    send(
        &mut conn,
        now,
        modern(json!(10), "initialize", json!({}), json!({})),
    );
    let answers = written(&mut conn);
    assert_eq!(answers[0]["error"]["code"], -32022);
    assert_eq!(answers[1]["error"]["code"], -32600);
}

#[test]
fn input_required_round_trip() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    let call = json!({"name": "book", "arguments": {}});
    let elicit = json!({"elicitation": {}});
    send(
        &mut conn,
        now,
        modern(json!(1), "tools/call", call.clone(), elicit.clone()),
    );
    let first = next_request(&mut conn);
    assert_eq!(HostInput::of(&first.method, first.params.as_ref()), None);
    let form = json!({"type": "object", "properties": {"seat": {"type": "string"}}});
    let round = InputRequired {
        requests: [(
            "seat".to_owned(),
            Request::elicit("Which seat?", form).untyped(),
        )]
        .into(),
        state: Some("call-1".to_owned()),
    };
    conn.respond(now, first.id, Ok(round.to_result()));
    let answer = written(&mut conn).remove(0);
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required");
    assert_eq!(result["requestState"], "call-1");
    assert_eq!(
        result["inputRequests"]["seat"]["method"],
        "elicitation/create"
    );
    assert_eq!(
        result["inputRequests"]["seat"]["params"]["message"],
        "Which seat?"
    );
    // The retry: a new id, the answers under the same key, the state echoed.
    let mut retry = call;
    retry["inputResponses"] = json!({"seat": {"action": "accept", "content": {"seat": "12A"}}});
    retry["requestState"] = json!("call-1");
    send(
        &mut conn,
        now,
        modern(json!(2), "tools/call", retry, elicit),
    );
    let second = next_request(&mut conn);
    let input = HostInput::of(&second.method, second.params.as_ref()).unwrap();
    assert_eq!(input.state.as_deref(), Some("call-1"));
    assert_eq!(input.responses["seat"]["content"]["seat"], "12A");
    conn.respond(now, second.id, Ok(json!({"content": []})));
    let done = written(&mut conn).remove(0);
    assert_eq!(
        (done["id"].clone(), done["result"]["resultType"].clone()),
        (json!(2), json!("complete"))
    );
    // `tools/list` takes no input, whatever its params say.
    let params = json!({"requestState": "x"});
    assert_eq!(HostInput::of("tools/list", Some(&params)), None);
}

#[test]
fn listen_is_acknowledged_and_carries_only_what_was_asked() {
    let now = Instant::now();
    let mut conn = ServerConnection::new(now, config());
    let asked = json!({"notifications": {
        "toolsListChanged": true, "resourcesListChanged": true,
        "resourceSubscriptions": ["file:///a"]}});
    send(
        &mut conn,
        now,
        modern(json!("sub"), "subscriptions/listen", asked, json!({})),
    );
    let prompts = json!({"notifications": {"promptsListChanged": true}});
    send(
        &mut conn,
        now,
        modern(json!(5), "subscriptions/listen", prompts, json!({})),
    );
    let acks = written(&mut conn);
    assert_eq!(acks.len(), 2);
    assert_eq!(
        acks[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(acks[0]["params"]["_meta"][SUBSCRIPTION], "sub");
    // We declare no resource list changes nor resource subscriptions: not agreed.
    assert_eq!(
        acks[0]["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(acks[1]["params"]["_meta"][SUBSCRIPTION], 5);
    // The subscription is the core's: the caller sees no request for it.
    assert!(
        events(&mut conn)
            .iter()
            .all(|event| !matches!(event, ServerEvent::Request(_)))
    );
    assert!(conn.notify("notifications/tools/list_changed", None));
    assert!(conn.notify("notifications/prompts/list_changed", None));
    assert!(!conn.notify("notifications/resources/list_changed", None));
    let notes = written(&mut conn);
    let tagged: Vec<_> = (notes.iter())
        .map(|note| {
            (
                note["method"].clone(),
                note["params"]["_meta"][SUBSCRIPTION].clone(),
            )
        })
        .collect();
    assert_eq!(
        tagged,
        [
            (json!("notifications/tools/list_changed"), json!("sub")),
            (json!("notifications/prompts/list_changed"), json!(5)),
        ]
    );
    // Cancelled: nothing more on it, and no answer.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": "sub"}});
    send(&mut conn, now, cancel);
    assert!(!conn.notify("notifications/tools/list_changed", None));
    assert!(written(&mut conn).is_empty());
    // Closing answers the subscriptions still open: their graceful end.
    conn.close();
    let ends = written(&mut conn);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["id"], 5);
    assert_eq!(ends[0]["result"]["resultType"], "complete");
    assert_eq!(ends[0]["result"]["_meta"][SUBSCRIPTION], 5);
}
