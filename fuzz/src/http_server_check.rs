//! The check behind the `http_server` target: the server half of Streamable HTTP driven by
//! arbitrary HTTP requests, machine output, hang-ups, abandons and time, and held to its
//! promises: no panic; each exchange opens its stream at most once, before any later event,
//! and ends at most once, and nothing reaches it after; an ended machine is reported once and
//! takes nothing more; every status is an HTTP status.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use mcp_proto::server::http::{
    Abandon, ExchangeId, HttpLimits, HttpRequest, HttpServer, MachineId, Part, Routed, Written,
};

/// Messages the fuzzer can name by a byte, so that deep states are reached without having to
/// spell JSON; `{id}` is one of a few ids, `{token}` one of a few progress tokens.
const TEMPLATES: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{"_meta":{"progressToken":{token}}}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32022,"message":"v"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32601,"message":"m"}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":{token},"progress":1}}"#,
    r#"{"jsonrpc":"2.0","id":"g-{id}","method":"roots/list"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":{id}}}}"#,
    "[{}]",
    "{\"id\":",
];

/// A little reader over the fuzzer's bytes.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(first)
    }

    fn chunk(&mut self) -> Vec<u8> {
        let len = usize::from(self.byte().unwrap_or(0)).min(self.0.len());
        let (chunk, rest) = self.0.split_at(len);
        self.0 = rest;
        chunk.to_vec()
    }

    /// A message: a template (most often) or raw bytes.
    fn message(&mut self) -> Vec<u8> {
        let pick = self.byte().unwrap_or(0);
        if pick >= 240 {
            return self.chunk();
        }
        let template = TEMPLATES[usize::from(pick) % TEMPLATES.len()];
        let id = self.byte().unwrap_or(0) % 4;
        let token = self.byte().unwrap_or(0) % 3;
        (template.replace("{id}", &id.to_string()))
            .replace("{token}", &token.to_string())
            .into_bytes()
    }
}

/// What the check knows of an exchange.
#[derive(Default)]
struct Seen {
    opened: bool,
}

pub fn check_http_server(data: &[u8]) {
    let limits = HttpLimits {
        max_sessions: 2,
        max_stateless: 2,
        max_in_flight: 3,
        session_idle: Duration::from_secs(10),
    };
    let mut server = HttpServer::new(limits);
    let mut now = Instant::now();
    let mut input = Bytes(data);
    let mut sessions: Vec<String> = vec!["none".to_owned()];
    let mut machines: Vec<MachineId> = Vec::new();
    let mut ended: BTreeSet<MachineId> = BTreeSet::new();
    let mut open: BTreeMap<ExchangeId, Seen> = BTreeMap::new();
    let mut exchanges: Vec<ExchangeId> = Vec::new();
    let mut made = 0u32;
    while let Some(op) = input.byte() {
        match op % 8 {
            0..=2 => {
                let method = ["POST", "POST", "GET", "DELETE", "PUT"][usize::from(op / 8) % 5];
                let session = input.byte().unwrap_or(0);
                let flags = input.byte().unwrap_or(0);
                let body = input.message();
                let named = sessions[usize::from(session) % sessions.len()].clone();
                let mut headers: Vec<(&str, &[u8])> = Vec::new();
                if flags & 1 != 0 {
                    headers.push(("mcp-session-id", named.as_bytes()));
                }
                if flags & 2 != 0 {
                    headers.push(("accept", b"application/json, text/event-stream"));
                }
                if flags & 4 != 0 {
                    headers.push(("mcp-protocol-version", b"2026-07-28"));
                }
                if flags & 8 != 0 {
                    let method: &[u8] = match flags & 16 {
                        0 => b"tools/call",
                        _ => b"subscriptions/listen",
                    };
                    headers.push(("mcp-method", method));
                }
                let request = HttpRequest {
                    method,
                    headers: &headers,
                    body: &body,
                };
                let routed = server.receive(now, &request, || {
                    made += 1;
                    format!("s-{made}")
                });
                match routed {
                    Routed::Respond(response) => assert!((100..600).contains(&response.status)),
                    Routed::Request {
                        machine,
                        opens,
                        exchange,
                        ..
                    } => {
                        assert!(!ended.contains(&machine), "a request for an ended machine");
                        if opens {
                            assert!(!machines.contains(&machine), "a machine opened twice");
                            machines.push(machine);
                        }
                        assert!(open.insert(exchange, Seen::default()).is_none());
                        exchanges.push(exchange);
                    }
                    Routed::Pass { machine, .. } | Routed::Standalone { machine, .. } => {
                        assert!(!ended.contains(&machine), "a message for an ended machine");
                    }
                }
            }
            3 | 4 => {
                let Some(&machine) =
                    machines.get(usize::from(input.byte().unwrap_or(0)) % machines.len().max(1))
                else {
                    continue;
                };
                let message = input.message();
                match server.written(now, machine, &message) {
                    Written::To { exchange, part } => {
                        assert!(
                            !ended.contains(&machine),
                            "an ended machine's message was routed"
                        );
                        let seen = open
                            .get_mut(&exchange)
                            .expect("routed to an exchange that ended");
                        match part {
                            Part::Answer(response) => {
                                assert!(!seen.opened, "a whole answer on an open stream");
                                assert!((100..600).contains(&response.status));
                                if let Some((_, id)) = response
                                    .headers
                                    .iter()
                                    .find(|(name, _)| *name == "mcp-session-id")
                                {
                                    sessions.push(id.clone());
                                }
                                open.remove(&exchange);
                            }
                            Part::Opens(_) => {
                                assert!(!seen.opened, "a stream opened twice");
                                seen.opened = true;
                            }
                            Part::Event { .. } => {
                                assert!(seen.opened, "an event before its stream")
                            }
                            Part::Last => {
                                assert!(seen.opened, "a last event before its stream");
                                open.remove(&exchange);
                            }
                        }
                    }
                    Written::Standalone | Written::Nowhere | Written::Refused(_) => {}
                }
            }
            5 => {
                let Some(&exchange) =
                    exchanges.get(usize::from(input.byte().unwrap_or(0)) % exchanges.len().max(1))
                else {
                    continue;
                };
                let _ = server.hung_up(now, exchange, []);
                open.remove(&exchange);
            }
            6 => {
                let Some(&exchange) =
                    exchanges.get(usize::from(input.byte().unwrap_or(0)) % exchanges.len().max(1))
                else {
                    continue;
                };
                let why = [Abandon::MachineEnded, Abandon::Stopping, Abandon::Aborted]
                    [usize::from(op / 8) % 3];
                let abandoned = server.abandon(exchange, why);
                assert_eq!(
                    abandoned.is_some(),
                    open.remove(&exchange).is_some(),
                    "abandon of {exchange:?}"
                );
            }
            _ => {
                now += Duration::from_secs(u64::from(input.byte().unwrap_or(0)) % 16);
                if let Some(deadline) = server.poll_timeout() {
                    assert!(deadline >= now - Duration::from_secs(16));
                }
                server.handle_timeout(now);
            }
        }
        for (exchange, part, _) in server.take_abandoned() {
            let seen = open
                .remove(&exchange)
                .expect("an exchange abandoned that was not open");
            match part {
                Part::Answer(_) => assert!(!seen.opened, "a whole answer on an open stream"),
                Part::Last => assert!(seen.opened, "a last event before its stream"),
                other => panic!("an exchange abandoned with {other:?}"),
            }
        }
        for machine in server.take_ended() {
            assert!(ended.insert(machine), "{machine:?} reported ended twice");
        }
    }
}
