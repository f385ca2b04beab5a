//! A scripted fake server: reads what the connection wrote, writes what the script says.

use std::time::Instant;

use mcp_proto::{
    Config, Connection, Event, LATEST_PROTOCOL_VERSION, Protocol, RequestError, RequestId,
};
use serde_json::{Value, json};

/// The default settings, fixed to the handshake era (the default probes first).
pub(crate) fn handshake_config() -> Config {
    Config {
        protocol: Protocol::Revision(LATEST_PROTOCOL_VERSION),
        ..Config::default()
    }
}

/// The initialize result a well-behaved server sends.
pub(crate) fn init_result(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": "fake", "version": "1.0"},
        "instructions": "be nice",
    })
}

/// The whole answer to `initialize` (whose id is always 1).
pub(crate) fn init_response(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "result": init_result(version)})
}

/// The notification that ends the handshake, as the client writes it.
pub(crate) fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// The server side of a connection in a test.
#[derive(Debug, Default)]
pub(crate) struct FakeServer {
    /// Every message the connection has written, in order.
    pub(crate) received: Vec<Value>,
}

impl FakeServer {
    /// Drains the connection's transmits; each must be exactly one `\n`-terminated JSON line.
    pub(crate) fn absorb(&mut self, conn: &mut Connection) -> Vec<Value> {
        let mut fresh = Vec::new();
        while let Some(line) = conn.poll_transmit() {
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            fresh.push(serde_json::from_slice(&line).unwrap());
        }
        self.received.extend(fresh.iter().cloned());
        fresh
    }

    /// Writes one message as one line.
    pub(crate) fn send(&self, conn: &mut Connection, now: Instant, message: Value) {
        conn.handle_bytes(now, format!("{message}\n").as_bytes());
    }

    pub(crate) fn respond(
        &self,
        conn: &mut Connection,
        now: Instant,
        id: RequestId,
        result: Value,
    ) {
        self.send(
            conn,
            now,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
    }
}

/// A connection with the handshake done and its output drained.
pub(crate) fn handshake(now: Instant) -> (Connection, FakeServer) {
    handshake_with(now, handshake_config())
}

pub(crate) fn handshake_with(now: Instant, config: Config) -> (Connection, FakeServer) {
    let mut conn = Connection::new(now, config);
    let mut server = FakeServer::default();
    server.absorb(&mut conn);
    server.send(&mut conn, now, init_response("2025-11-25"));
    assert!(matches!(conn.poll_event(), Some(Event::Ready(_))));
    server.absorb(&mut conn);
    (conn, server)
}

pub(crate) fn drain_events(conn: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}

/// The next event, which must be a response.
pub(crate) fn next_response(conn: &mut Connection) -> (RequestId, Result<Value, RequestError>) {
    match conn.poll_event() {
        Some(Event::Response { id, result }) => (id, result.map(|raw| raw.into_value().unwrap())),
        other => panic!("expected a response, got {other:?}"),
    }
}

/// The `id` a request was written with, as the request's id would be written.
pub(crate) fn id_of(message: &Value) -> Value {
    message["id"].clone()
}
