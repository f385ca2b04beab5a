//! `serve --listen` keeps a quiet event stream open through proxies that cut idle
//! connections: a `subscriptions/listen` with nothing to say gets `: keep-alive` comments,
//! at the interval `MCP_CLI_KEEPALIVE_MS` shrinks here from its 20 s.

use std::io::{Read, Write};

use serde_json::json;

use crate::gateway_listen::{listen_to, raw_request};
use crate::support::Scratch;

#[test]
fn a_quiet_listen_stream_gets_keep_alive_comments() {
    let scratch = Scratch::new("sse-keepalive");
    let listening = listen_to(&scratch, &["good"], &[("MCP_CLI_KEEPALIVE_MS", "100")]);
    let address = listening.address.as_str();
    let bearer = format!("Bearer {}", listening.token);
    let listen = json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "subscriptions/listen"),
    ];
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    // A bound, not a measure: without comments the read would wait for ever.
    let bound = std::time::Duration::from_secs(60);
    stream.set_read_timeout(Some(bound)).unwrap();
    let body = serde_json::to_vec(&listen).unwrap();
    stream
        .write_all(&raw_request(address, "POST", &headers, &body))
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    // Two comments: the stream stays open between them, and keeps saying so.
    while String::from_utf8_lossy(&seen)
        .matches(": keep-alive\n\n")
        .count()
        < 2
    {
        let read = stream.read(&mut buffer).unwrap();
        assert!(read > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buffer[..read]);
    }
    let seen = String::from_utf8_lossy(&seen).to_lowercase();
    assert!(seen.contains("content-type: text/event-stream"), "{seen}");
}
