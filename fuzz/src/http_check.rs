//! Invariant check for the HTTP session machine (`HttpConnection`) under arbitrary replies to
//! the exchanges it asks for, in either era and over each transport. Plain Rust over
//! `mcp_proto` and `serde_json` only, so the stable replay test can include this file as is.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use mcp_proto::{
    ClientCapabilities, Config, Event, LATEST_PROTOCOL_VERSION, LATEST_STATELESS_VERSION, Protocol,
    Request, RequestId, ServerRequestId,
    http::{Exchange, ExchangeId, HttpConnection, HttpTransport, Reply},
};
use serde_json::{Value, json};

/// The statuses a refusal takes: era evidence (400, 404), fallback (405), session loss, auth,
/// and plain failures.
const STATUSES: [u16; 8] = [400, 404, 405, 401, 403, 409, 500, 502];

/// What a connection asked for and reported, checked as it goes.
#[derive(Default)]
struct Seen {
    /// Exchanges started and not yet stopped or over, with the POST's body.
    live: BTreeMap<ExchangeId, Option<Value>>,
    /// Every exchange id ever started: none is reused.
    started: BTreeSet<ExchangeId>,
    issued: BTreeSet<RequestId>,
    ended: BTreeSet<RequestId>,
    asked: Vec<ServerRequestId>,
    closed: bool,
}

impl Seen {
    fn drain(&mut self, http: &mut HttpConnection) {
        loop {
            let mut progressed = false;
            while let Some(exchange) = http.poll_exchange() {
                progressed = true;
                self.exchange(exchange);
            }
            while let Some(event) = http.poll_event() {
                progressed = true;
                self.event(event);
            }
            if !progressed {
                return;
            }
        }
    }

    fn exchange(&mut self, exchange: Exchange) {
        match exchange {
            Exchange::Post(post) => {
                assert!(self.started.insert(post.id), "exchange id reused");
                assert_headers(&post.headers);
                let body: Value = serde_json::from_slice(&post.body).expect("a POST body is JSON");
                assert!(body.is_object(), "a POST body is one message");
                self.live.insert(post.id, Some(body));
            }
            Exchange::Get(get) => {
                assert!(self.started.insert(get.id), "exchange id reused");
                assert_headers(&get.headers);
                self.live.insert(get.id, None);
            }
            Exchange::Cancel(id) => {
                assert!(
                    self.started.contains(&id),
                    "a cancel for an exchange never started"
                );
                self.live.remove(&id);
            }
        }
    }

    fn event(&mut self, event: Event) {
        assert!(!self.closed, "event after Closed");
        match event {
            Event::Response { id, .. } => {
                assert!(self.issued.contains(&id), "response for an id never issued");
                assert!(self.ended.insert(id), "request {id} ended twice");
            }
            Event::ServerRequest(asked) => {
                assert!(
                    !self.asked.contains(&asked.id),
                    "a server request id reused"
                );
                self.asked.push(asked.id);
            }
            Event::Closed(_) => self.closed = true,
            _ => {}
        }
    }

    fn issue(&mut self, result: Result<RequestId, mcp_proto::SendError>) {
        match result {
            Ok(id) => assert!(self.issued.insert(id), "id {id} reused"),
            Err(mcp_proto::SendError::NotInEra { .. }) => {}
            Err(_) => assert!(self.closed, "a command refused on an open connection"),
        }
    }

    fn pick(&self, arg: usize) -> Option<(ExchangeId, Option<Value>)> {
        let (id, body) = self.live.iter().nth(arg % self.live.len().max(1))?;
        Some((*id, body.clone()))
    }
}

/// No header can smuggle another: names are tokens, values hold no control characters.
fn assert_headers(headers: &[(String, String)]) {
    for (name, value) in headers {
        assert!(
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':'),
            "header name {name:?}"
        );
        assert!(
            value.bytes().all(|b| b == b'\t' || !b.is_ascii_control()),
            "header {name} has a control character"
        );
    }
}

/// A plausible answer to a POSTed message, so that inputs reach the states past the start.
fn answer_to(body: &Value, arg: usize) -> Option<Vec<u8>> {
    let id = body.get("id")?;
    let result = match body.get("method").and_then(Value::as_str)? {
        "initialize" => {
            json!({"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {"tools": {}},
                               "serverInfo": {"name": "fuzz", "version": "1"}})
        }
        "server/discover" => json!({"supportedVersions": [LATEST_STATELESS_VERSION],
                                    "capabilities": {"tools": {"listChanged": true}}}),
        "tools/list" => {
            // A valid header name, or one that would split the header if sent as is.
            let header = ["N", "n\r\n"][arg % 2];
            json!({"tools": [{"name": "tool", "inputSchema": {"type": "object",
                "properties": {"n": {"type": "number", "x-mcp-header": header}}}}]})
        }
        _ => match arg % 3 {
            0 => json!({"content": []}),
            1 => json!({"resultType": "input_required", "requestState": "s",
                        "inputRequests": {"k": {"method": "roots/list"}}}),
            _ => {
                return Some(
                    json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32020, "message": "header mismatch"}})
                    .to_string()
                    .into_bytes(),
                );
            }
        },
    };
    Some(
        json!({"jsonrpc": "2.0", "id": id, "result": result})
            .to_string()
            .into_bytes(),
    )
}

/// Bytes of the input up to a newline, and the rest.
fn take_line(ops: &[u8]) -> (&[u8], &[u8]) {
    let end = ops.iter().position(|&b| b == b'\n').unwrap_or(ops.len());
    (&ops[..end], &ops[end..])
}

/// An HTTP connection under arbitrary replies and caller commands: every request it issues
/// ends exactly once, nothing is reported after it closes, exchange ids are never reused, no
/// header carries a line break, every POST body is one JSON message, and closing it ends
/// every request.
pub fn check_http(data: &[u8]) {
    let [first, rest @ ..] = data else {
        return;
    };
    let mut ops = rest;
    let mut now = Instant::now();
    let transport = [
        HttpTransport::Auto,
        HttpTransport::Streamable,
        HttpTransport::Sse,
    ][usize::from(first % 3)];
    let protocol = [
        Protocol::Auto,
        Protocol::Revision(LATEST_PROTOCOL_VERSION),
        Protocol::Revision(LATEST_STATELESS_VERSION),
    ][usize::from(first / 3 % 3)];
    let config = Config {
        max_line_len: 512,
        capabilities: ClientCapabilities {
            roots: true,
            elicitation: true,
            sampling: false,
            tasks: true,
            elicitation_url: true,
        },
        protocol,
        max_input_rounds: 2,
        ..Config::default()
    };
    let url = "http://127.0.0.1:1/mcp".to_owned();
    let mut http = HttpConnection::new(now, config, url, transport);
    let mut seen = Seen::default();
    seen.drain(&mut http);
    while let [op, arg, rest @ ..] = ops {
        ops = rest;
        let arg = usize::from(*arg);
        match op % 8 {
            // A fact about one live exchange.
            0..=2 => {
                let Some((exchange, body)) = seen.pick(arg) else {
                    continue;
                };
                let reply = match arg % 12 {
                    0 => Reply::Head {
                        session: (arg % 24 < 12).then(|| "s-1".to_owned()),
                    },
                    1 => match body.as_ref().and_then(|body| answer_to(body, arg / 12)) {
                        Some(answer) => Reply::Message(answer),
                        None => Reply::Done,
                    },
                    2 => {
                        let (line, rest) = take_line(ops);
                        ops = rest;
                        Reply::Message(line.to_vec())
                    }
                    3 => {
                        let (body, rest) = take_line(ops);
                        ops = rest;
                        let status = STATUSES[arg / 12 % STATUSES.len()];
                        Reply::Refused {
                            status,
                            body: body.to_vec(),
                            detail: format!("HTTP {status}"),
                        }
                    }
                    4 => Reply::BodyEnded("an empty body".to_owned()),
                    5 => Reply::Failed("text/html".to_owned()),
                    6 => Reply::TooLarge { size: 4096 },
                    7 => Reply::StreamEnded {
                        why: "the event stream ended".to_owned(),
                        last_event_id: (arg % 24 < 12).then(|| "e-1".to_owned()),
                        retry: Some(Duration::from_millis(arg as u64)),
                    },
                    8 => Reply::Endpoint(
                        ["http://127.0.0.1:1/messages?s=1", "http://evil.example/x"][arg / 12 % 2]
                            .to_owned(),
                    ),
                    9 => Reply::Unreachable("connection refused".to_owned()),
                    10 => Reply::Unauthorized("HTTP 401".to_owned()),
                    _ => Reply::Done,
                };
                let over = matches!(reply, Reply::Done);
                // A message may come in pieces, as a large body or event's data does; an
                // odd `arg` splits it, or drops the pieces sent so far (an event of another
                // type), or leaves them for whatever fact comes next.
                let reply = match reply {
                    Reply::Message(message) if arg % 2 == 1 => {
                        let cut = (arg / 2) % (message.len() + 1);
                        let (first, rest) = message.split_at(cut);
                        http.handle_reply(now, exchange, Reply::Part(first.to_vec()));
                        match arg / 2 % 5 {
                            0 => Reply::PartsDropped,
                            1 => {
                                // The first part alone: it may have failed its request (over
                                // the limit), which the next command must know.
                                seen.drain(&mut http);
                                continue;
                            }
                            _ => Reply::Message(rest.to_vec()),
                        }
                    }
                    reply => reply,
                };
                http.handle_reply(now, exchange, reply);
                if over {
                    seen.live.remove(&exchange);
                }
            }
            3 => {
                let call = Request::call_tool("tool", json!({"n": arg}));
                seen.issue(http.request(now, call));
            }
            4 => seen.issue(http.request(now, Request::new("tools/list", None))),
            5 => {
                if let Some(&id) = seen.issued.iter().nth(arg % seen.issued.len().max(1)) {
                    let pending = !seen.ended.contains(&id) && !seen.closed;
                    assert_eq!(http.cancel(now, id), pending);
                }
            }
            6 => {
                now += Duration::from_millis(arg as u64 * 100);
                http.handle_timeout(now);
            }
            _ => match arg % 4 {
                0 => http.close(),
                1 if !seen.asked.is_empty() => {
                    let id = seen.asked[arg % seen.asked.len()];
                    let _ = http.respond(now, id, Ok(json!({"roots": []})));
                }
                _ => {}
            },
        }
        seen.drain(&mut http);
    }
    http.close();
    seen.drain(&mut http);
    assert!(seen.closed, "close did not close");
    assert_eq!(seen.issued, seen.ended, "some request never ended");
}
