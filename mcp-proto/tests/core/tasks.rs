//! Tasks on the wire: the stateless era's extension declared and `resultType: "task"` handed
//! over, the handshake era's `task` parameter and the task methods.

use std::time::Instant;

use mcp_proto::{
    ClientCapabilities, Config, Connection, Event, LATEST_STATELESS_VERSION, Protocol, Request,
    RequestError,
    tasks::{Task, TaskStatus},
};
use serde_json::{Value, json};

use crate::peer::{FakeServer, handshake, next_response};

/// A stateless connection declaring the tasks extension, `server/discover` answered.
fn stateless_with_tasks(now: Instant) -> (Connection, FakeServer) {
    let config = Config {
        protocol: Protocol::Revision(LATEST_STATELESS_VERSION),
        capabilities: ClientCapabilities {
            tasks: true,
            ..ClientCapabilities::default()
        },
        ..Config::default()
    };
    let mut conn = Connection::new(now, config);
    let mut server = FakeServer::default();
    let sent = server.absorb(&mut conn);
    let declared = &sent[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(
        declared,
        &json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    let discover = json!({"supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}});
    server.send(
        &mut conn,
        now,
        json!({"jsonrpc": "2.0", "id": sent[0]["id"], "result": discover}),
    );
    let Some(Event::Ready(info)) = conn.poll_event() else {
        panic!("not ready")
    };
    assert!(info.capabilities.tasks.extension);
    (conn, server)
}

fn answer(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

#[test]
fn a_stateless_call_answered_with_a_task_hands_the_task_over() {
    let now = Instant::now();
    let (mut conn, mut server) = stateless_with_tasks(now);
    let call = conn
        .request(now, Request::call_tool("slow", json!({})))
        .unwrap();
    let sent = server.absorb(&mut conn);
    let created = json!({"resultType": "task", "taskId": "t-1", "status": "working",
                         "ttlMs": null, "pollIntervalMs": 0});
    server.send(&mut conn, now, answer(&sent[0]["id"], created));
    let (id, result) = next_response(&mut conn);
    assert_eq!(id, call);
    let task = Task::created_by(&result.unwrap()).unwrap().unwrap();
    assert_eq!(
        (task.id.as_str(), task.status),
        ("t-1", TaskStatus::Working)
    );

    let get = conn.request(now, Request::get_task("t-1")).unwrap();
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["method"], "tasks/get");
    assert_eq!(sent[0]["params"]["taskId"], "t-1");
    assert_eq!(
        sent[0]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    let done = json!({"resultType": "complete", "taskId": "t-1", "status": "completed",
                      "result": {"content": [{"type": "text", "text": "ok"}]}});
    server.send(&mut conn, now, answer(&sent[0]["id"], done));
    let (id, result) = next_response(&mut conn);
    assert_eq!(id, get);
    let task = Task::read(&result.unwrap()).unwrap();
    assert_eq!(
        task.result,
        Some(json!({"content": [{"type": "text", "text": "ok"}]}))
    );
}

#[test]
fn a_task_answering_another_method_is_an_invalid_response() {
    let now = Instant::now();
    let (mut conn, mut server) = stateless_with_tasks(now);
    conn.request(now, Request::new("prompts/get", Some(json!({"name": "p"}))))
        .unwrap();
    let sent = server.absorb(&mut conn);
    let created = json!({"resultType": "task", "taskId": "t-1", "status": "working"});
    server.send(&mut conn, now, answer(&sent[0]["id"], created));
    let (_, result) = next_response(&mut conn);
    assert!(
        matches!(result, Err(RequestError::InvalidResponse(text)) if text.contains("prompts/get"))
    );
}

#[test]
fn a_handshake_call_asks_for_a_task_with_its_ttl() {
    let now = Instant::now();
    let (mut conn, mut server) = handshake(now);
    let call = Request::call_tool("slow", json!({"n": 1}))
        .as_task(Some(std::time::Duration::from_secs(60)));
    conn.request(now, call).unwrap();
    let sent = server.absorb(&mut conn);
    assert_eq!(sent[0]["params"]["task"], json!({"ttl": 60000}));
    assert_eq!(sent[0]["params"]["arguments"], json!({"n": 1}));
    server.send(
        &mut conn,
        now,
        answer(
            &sent[0]["id"],
            json!({"task": {"taskId": "h-1", "status": "working", "pollInterval": 5000}}),
        ),
    );
    let (_, result) = next_response(&mut conn);
    let task = Task::created_by(&result.unwrap()).unwrap().unwrap();
    assert_eq!(
        (task.id.as_str(), task.poll_interval_ms),
        ("h-1", Some(5000))
    );
    // Handshake-era capabilities never declare the extension.
    let (mut conn, mut server) = crate::peer::handshake_with(
        now,
        Config {
            capabilities: ClientCapabilities {
                tasks: true,
                ..ClientCapabilities::default()
            },
            ..crate::peer::handshake_config()
        },
    );
    let _ = (&mut conn, &mut server);
    let initialize = &server.received[0];
    assert_eq!(initialize["params"]["capabilities"], json!({}));
}
