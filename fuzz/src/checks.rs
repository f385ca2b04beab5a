//! Invariant checks for the sans-IO core, driven by arbitrary bytes. Plain Rust over
//! `mcp_proto` and `serde_json` only, so the stable replay test can include this file as is.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mcp_proto::{
    ClientCapabilities, CompleteResult, Config, Connection, Event, FromResult, GetPromptResult,
    LATEST_PROTOCOL_VERSION, LATEST_STATELESS_VERSION, LineError, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, Protocol,
    ReadResourceResult, Request, RequestId, ServerRequestId,
    http::{SseDecoder, SsePiece},
    wire_for_fuzzing::{JsonStream, LineDecoder},
};
use serde_json::{Value, json};

/// A tiny deterministic generator, so one input always makes the same chunking.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

type Lines = Vec<Result<Vec<u8>, LineError>>;

fn drain_lines(decoder: &mut LineDecoder, max: usize, lines: &mut Lines) {
    while let Some(line) = decoder.next_line() {
        if let Ok(line) = &line {
            assert!(
                line.len() <= max,
                "line of {} bytes over max {max}",
                line.len()
            );
        }
        lines.push(line.map(|bytes| bytes.to_vec()));
    }
}

/// What a JSON text comes to: its value, blank, or the kind of its fault.
type Parsed = Option<Result<Value, &'static str>>;

/// The streaming parser, fed the text in any chunks, reads it as `serde_json::from_str`
/// reads the whole (a line checked to be UTF-8 first, blank if only ASCII whitespace).
pub fn check_stream_json(data: &[u8]) {
    let [seed, text @ ..] = data else {
        return;
    };
    let whole: Parsed = match std::str::from_utf8(text) {
        Err(_) => Some(Err("not UTF-8")),
        Ok(text) if text.bytes().all(|b| b.is_ascii_whitespace()) => None,
        Ok(text) => Some(serde_json::from_str(text).map_err(|_| "not JSON")),
    };
    let mut rng = Rng(u32::from(*seed) | 1);
    let mut parser = JsonStream::new();
    let mut rest = text;
    while !rest.is_empty() {
        let take = (rng.next() as usize % 19).min(rest.len());
        parser.push(&rest[..take]);
        rest = &rest[take..];
    }
    let streamed: Parsed = parser.finish().map(|parsed| {
        parsed.map_err(|error| match error {
            LineError::NotUtf8 => "not UTF-8",
            LineError::NotJson { .. } => "not JSON",
            other => panic!("the parser reported {other:?}"),
        })
    });
    assert_eq!(streamed, whole, "{:?}", String::from_utf8_lossy(text));
}

/// Feeding bytes whole or in any chunks yields the same lines; memory stays bounded.
pub fn check_line_decoder(data: &[u8]) {
    let [size, seed, input @ ..] = data else {
        return;
    };
    let max = 1 + usize::from(*size % 64);

    let mut whole = LineDecoder::new(max);
    let mut expected = Vec::new();
    whole.push(input);
    drain_lines(&mut whole, max, &mut expected);
    let expected_tail = whole.finish().map(|b| b.to_vec());

    let mut rng = Rng(u32::from(*seed) | 1);
    let mut chunked = LineDecoder::new(max);
    let mut actual = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let take = (1 + rng.next() as usize % 17).min(rest.len());
        let (chunk, tail) = rest.split_at(take);
        chunked.push(chunk);
        assert!(
            // One byte over the maximum may be the `\r` of a line just within it.
            chunked.buffered() <= max + 1 + chunk.len(),
            "buffer grew past max plus a chunk"
        );
        drain_lines(&mut chunked, max, &mut actual);
        rest = tail;
    }
    assert_eq!(actual, expected);
    assert_eq!(chunked.finish().map(|b| b.to_vec()), expected_tail);
}

/// An event stream fed whole or in any chunks yields the same events and the same last id;
/// no event's data is over the limit.
pub fn check_sse(data: &[u8]) {
    let [size, seed, input @ ..] = data else {
        return;
    };
    let limit = 1 + usize::from(*size % 128);
    let drain = |decoder: &mut SseDecoder| {
        let events: Vec<_> = std::iter::from_fn(|| decoder.next_event()).collect();
        for event in events.iter().flatten() {
            assert!(
                event.data.len() <= limit,
                "event data over the limit {limit}"
            );
        }
        events
    };
    let mut whole = SseDecoder::new(limit);
    whole.push(input);
    let expected = drain(&mut whole);
    let mut rng = Rng(u32::from(*seed) | 1);
    let mut chunked = SseDecoder::new(limit);
    let mut actual = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let take = (1 + rng.next() as usize % 17).min(rest.len());
        let (chunk, tail) = rest.split_at(take);
        chunked.push(chunk);
        actual.extend(drain(&mut chunked));
        rest = tail;
    }
    assert_eq!(actual, expected);
    assert_eq!(chunked.last_event_id(), whole.last_event_id());
    assert_eq!(chunked.retry(), whole.retry());

    // Data handed out in pieces past `stream_from`, joined again, is the data held whole.
    // Only for a stream of valid UTF-8: held data has invalid bytes replaced, three bytes
    // each, before it is measured against the limit, where pieces keep and count raw bytes.
    // The stream is ended by a blank line: pieces tell an event is over the limit as soon as
    // its data passes it, held data only at the end of its line.
    let terminated = [input, b"\n\n"].concat();
    let mut whole = SseDecoder::new(limit);
    whole.push(&terminated);
    let expected = drain(&mut whole);
    let stream_from = usize::from(*seed % 64);
    let mut pieces = SseDecoder::new(limit).stream_from(stream_from);
    let (mut joined, mut streamed) = (Vec::new(), Vec::new());
    let mut rest = &terminated[..];
    while !rest.is_empty() {
        let take = (1 + rng.next() as usize % 17).min(rest.len());
        let (chunk, tail) = rest.split_at(take);
        pieces.push(chunk);
        while let Some(piece) = pieces.next_piece() {
            match piece {
                SsePiece::Data(data) => streamed.extend_from_slice(&data),
                SsePiece::Event(mut event) => {
                    if !streamed.is_empty() {
                        assert!(event.data.is_empty(), "streamed data also held");
                        event.data = String::from_utf8_lossy(&streamed).into_owned();
                        streamed.clear();
                    }
                    joined.push(Ok(event));
                }
                SsePiece::TooLong(too_long) => {
                    streamed.clear();
                    joined.push(Err(too_long));
                }
            }
            assert!(
                streamed.len() <= limit,
                "streamed data over the limit {limit}"
            );
        }
        rest = tail;
    }
    if std::str::from_utf8(input).is_ok() {
        assert_eq!(joined, expected);
        assert_eq!(pieces.last_event_id(), whole.last_event_id());
    }
}

/// Every transmit is one JSON object on one `\n`-terminated line.
fn assert_one_json_line(line: &[u8]) -> Value {
    assert_eq!(line.last(), Some(&b'\n'), "transmit without its newline");
    assert_eq!(
        line.iter().filter(|&&b| b == b'\n').count(),
        1,
        "transmit with inner newline"
    );
    let value: Value = serde_json::from_slice(line).expect("transmit is JSON");
    assert!(value.is_object(), "transmit is not an object");
    value
}

const INIT_RESULT: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"fuzz","version":"1"}}}
"#;

const DISCOVER_RESULT: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fuzz","version":"1"}}}}
"#;

/// Tracks what a connection emitted and checks it against the lifecycle rules.
struct Observer {
    issued: BTreeSet<RequestId>,
    ended: BTreeSet<RequestId>,
    closed: bool,
    ready: usize,
    /// Server requests surfaced for us to answer (with the request of ours an input request
    /// was asked for), and those answered.
    asked: Vec<(ServerRequestId, Option<RequestId>)>,
    answered: BTreeSet<ServerRequestId>,
}

impl Observer {
    fn new() -> Self {
        Self {
            issued: BTreeSet::new(),
            ended: BTreeSet::new(),
            closed: false,
            ready: 0,
            asked: Vec::new(),
            answered: BTreeSet::new(),
        }
    }

    fn drain(&mut self, connection: &mut Connection) -> Vec<Value> {
        let mut written = Vec::new();
        while let Some(line) = connection.poll_transmit() {
            assert!(!self.closed, "written after close");
            written.push(assert_one_json_line(&line));
        }
        while let Some(event) = connection.poll_event() {
            assert!(!self.closed, "event after Closed");
            match event {
                Event::Response { id, .. } => {
                    assert!(self.issued.contains(&id), "response for an id never issued");
                    assert!(self.ended.insert(id), "request {id} ended twice");
                }
                Event::Closed(_) => self.closed = true,
                Event::Ready(_) => self.ready += 1,
                Event::ServerRequest(asked) => {
                    assert!(self.ready > 0, "a server request before ready");
                    assert!(
                        self.asked.iter().all(|(id, _)| *id != asked.id),
                        "a server request id reused"
                    );
                    if let Some(request) = asked.request {
                        assert!(
                            self.issued.contains(&request),
                            "input for a request never issued"
                        );
                        assert!(!self.ended.contains(&request), "input for an ended request");
                    }
                    self.asked.push((asked.id, asked.request));
                }
                _ => {}
            }
        }
        if self.closed {
            assert_eq!(connection.poll_timeout(), None, "a deadline after close");
        }
        written
    }

    fn issue(&mut self, result: Result<RequestId, mcp_proto::SendError>) {
        match result {
            Ok(id) => assert!(self.issued.insert(id), "id {id} reused"),
            // `ping` does not exist in the stateless era.
            Err(mcp_proto::SendError::NotInEra { .. }) => {}
            Err(_) => assert!(self.closed, "a command refused on an open connection"),
        }
    }
}

/// A live connection under arbitrary server bytes and client commands, in the era the first
/// byte's top bits choose (without consuming it): below 128 the handshake era, then the
/// stateless era found by the probe, then the stateless era at a fixed revision.
pub fn check_connection(data: &[u8]) {
    let mut now = Instant::now();
    let (protocol, start) = match data.first().map_or(0, |byte| byte >> 6) {
        0 | 1 => (Protocol::Revision(LATEST_PROTOCOL_VERSION), INIT_RESULT),
        2 => (Protocol::Auto, DISCOVER_RESULT),
        _ => (
            Protocol::Revision(LATEST_STATELESS_VERSION),
            DISCOVER_RESULT,
        ),
    };
    let config = Config {
        max_line_len: 256,
        capabilities: ClientCapabilities {
            roots: true,
            elicitation: true,
            sampling: true,
            tasks: true,
            elicitation_url: true,
        },
        server_request_timeout: Duration::from_millis(500),
        protocol,
        max_input_rounds: 3,
        ..Config::default()
    };
    let mut connection = Connection::new(now, config);
    connection.handle_bytes(now, start);
    let mut observer = Observer::new();
    observer.drain(&mut connection);
    let mut ops = data;
    while let [op, arg, rest @ ..] = ops {
        ops = rest;
        let arg = usize::from(*arg);
        let pick = |observer: &Observer| {
            observer
                .issued
                .iter()
                .nth(arg % observer.issued.len().max(1))
                .copied()
        };
        match op % 9 {
            0..=2 => {
                let take = arg.min(ops.len());
                connection.handle_bytes(now, &ops[..take]);
                ops = &ops[take..];
            }
            3 => observer
                .issue(connection.request(now, Request::call_tool("tool", json!({"n": arg})))),
            4 => {
                let timeout = Duration::from_millis(arg as u64 * 10);
                observer
                    .issue(connection.request(now, Request::new("ping", None).timeout(timeout)));
            }
            5 => {
                if let Some(id) = pick(&observer) {
                    let was_pending = !observer.ended.contains(&id);
                    assert_eq!(connection.cancel(now, id), was_pending && !observer.closed);
                }
            }
            6 => {
                now += Duration::from_millis(arg as u64 * 50);
                connection.handle_timeout(now);
                if let Some(deadline) = connection.poll_timeout() {
                    assert!(deadline > now, "deadline in the past after handle_timeout");
                }
            }
            7 => {
                if let Some(id) = pick(&observer) {
                    let answer = match arg % 6 {
                        0 => json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}),
                        1 => {
                            json!({"jsonrpc": "2.0", "id": id.to_string(), "error": {"code": -1, "message": "no"}})
                        }
                        2 => json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                    "params": {"progressToken": id, "progress": arg}}),
                        // Another round, with or without a question for us.
                        3 => json!({"jsonrpc": "2.0", "id": id, "result": {
                            "resultType": "input_required", "requestState": "s",
                            "inputRequests": {"k": {"method": "roots/list"}}}}),
                        4 => json!({"jsonrpc": "2.0", "id": id, "result": {
                            "resultType": "input_required", "requestState": "s"}}),
                        _ => {
                            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}}})
                        }
                    };
                    connection.handle_bytes(now, format!("{answer}\n").as_bytes());
                }
            }
            _ => match arg % 10 {
                0 => connection.handle_eof(now),
                1 => connection.close(),
                // The server asks something a declared capability (or none) covers.
                2 => {
                    let methods = ["roots/list", "elicitation/create", "sampling/createMessage"];
                    let method = methods.get(arg / 8 % 4).copied().unwrap_or("other/method");
                    let id = if arg % 16 < 8 {
                        json!(arg)
                    } else {
                        json!(format!("s{arg}"))
                    };
                    let ask = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}});
                    connection.handle_bytes(now, format!("{ask}\n").as_bytes());
                }
                // We answer one of them, or refuse it: once at most, never after close, never
                // for a request that has ended.
                3 | 8 if !observer.asked.is_empty() => {
                    let (id, request) = observer.asked[arg % observer.asked.len()];
                    let answer = match arg % 10 {
                        3 => Ok(json!({"roots": []})),
                        _ => Err(mcp_proto::RpcError::method_not_found("roots/list")),
                    };
                    let sent = connection.respond(now, id, answer);
                    let first = observer.answered.insert(id);
                    let ended = request.is_some_and(|request| observer.ended.contains(&request));
                    assert!(
                        !sent || (first && !observer.closed && !ended),
                        "answered twice, late, or for an ended request"
                    );
                }
                // Whatever follows, up to a newline, read by every typed result decoder.
                4 => {
                    let end = ops.iter().position(|&b| b == b'\n').unwrap_or(ops.len());
                    check_decoders(&ops[..end]);
                    ops = &ops[end..];
                }
                // What follows, up to a newline, as one whole message (an HTTP body).
                5 => {
                    let end = ops.iter().position(|&b| b == b'\n').unwrap_or(ops.len());
                    connection.handle_message(now, &ops[..end]);
                    ops = &ops[end..];
                }
                // The transport fails one request: once at most, never after close.
                6 => {
                    if let Some(id) = pick(&observer) {
                        let was_pending = !observer.ended.contains(&id) && !observer.closed;
                        let error = mcp_proto::RequestError::Transport("HTTP 500".to_owned());
                        assert_eq!(connection.fail_request(now, id, error), was_pending);
                    }
                }
                // The server forgot the session.
                7 => connection.restart_session(now),
                9 => {
                    let filter = mcp_proto::ListenFilter::default();
                    observer.issue(connection.request(now, Request::listen(&filter)));
                }
                _ => {}
            },
        }
        observer.drain(&mut connection);
    }
    connection.handle_eof(now);
    observer.drain(&mut connection);
    assert!(observer.closed);
    assert_eq!(observer.issued, observer.ended, "some request never ended");
}

/// Every typed result decoder on arbitrary JSON: an error or a value, never a panic; and the
/// counts add up.
pub fn check_decoders(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let blob = mcp_proto::ResourceContents {
            uri: String::new(),
            mime_type: None,
            text: None,
            blob: Some(text.to_owned()),
            extra: serde_json::Map::new(),
        };
        let _ = blob.blob_bytes();
    }
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let listed = |key: &str| value.get(key).and_then(Value::as_array).map(Vec::len);
    if let Ok(page) = ListResourcesResult::from_result(value.clone()) {
        assert_eq!(Some(page.items.len() + page.skipped), listed("resources"));
    }
    if let Ok(page) = ListToolsResult::from_result(value.clone()) {
        assert_eq!(Some(page.items.len() + page.skipped), listed("tools"));
    }
    if let Ok(page) = ListPromptsResult::from_result(value.clone()) {
        assert_eq!(Some(page.items.len() + page.skipped), listed("prompts"));
    }
    let _ = ListResourceTemplatesResult::from_result(value.clone());
    if let Ok(read) = ReadResourceResult::from_result(value.clone()) {
        for item in &read.contents {
            let _ = item.blob_bytes();
        }
    }
    let _ = GetPromptResult::from_result(value.clone());
    let _ = CompleteResult::from_result(value);
}

/// Arbitrary server output around the `initialize` result: nothing but `ping` crosses before
/// the answer, and the connection is ready at most once.
pub fn check_handshake(data: &[u8]) {
    let now = Instant::now();
    let config = Config {
        protocol: Protocol::Revision(LATEST_PROTOCOL_VERSION),
        ..Config::default()
    };
    let mut connection = Connection::new(now, config);
    let mut observer = Observer::new();
    let mut initialized = false;
    let check_written = |written: Vec<Value>, initialized: &mut bool| {
        for message in written {
            let method = message.get("method").and_then(Value::as_str);
            if method == Some("notifications/initialized") {
                assert!(!*initialized, "initialized sent twice");
                *initialized = true;
                continue;
            }
            if *initialized {
                continue;
            }
            let allowed = match method {
                Some("initialize" | "ping") => message.get("id").is_some(),
                Some(_) => false,
                // Only answers to server pings may be written before the handshake ends.
                None => message.get("result") == Some(&json!({})),
            };
            assert!(
                allowed,
                "written before notifications/initialized: {message}"
            );
        }
    };
    let written = observer.drain(&mut connection);
    check_written(written, &mut initialized);
    let mut ops = data;
    while let [op, arg, rest @ ..] = ops {
        ops = rest;
        match op % 5 {
            0 | 1 => {
                let take = usize::from(*arg).min(ops.len());
                connection.handle_bytes(now, &ops[..take]);
                ops = &ops[take..];
            }
            2 => connection.handle_bytes(now, INIT_RESULT),
            3 => observer.issue(connection.request(now, Request::call_tool("early", json!({})))),
            _ => observer.issue(connection.request(now, Request::new("ping", None))),
        }
        let written = observer.drain(&mut connection);
        check_written(written, &mut initialized);
        assert!(observer.ready <= 1, "Ready twice");
        assert_eq!(
            observer.ready == 1,
            initialized,
            "Ready and notifications/initialized disagree"
        );
    }
}

/// What a server connection has emitted so far, checked as it comes.
#[derive(Default)]
struct ServerObserver {
    open: Vec<mcp_proto::server::HostRequestId>,
    seen: BTreeSet<mcp_proto::server::HostRequestId>,
    issued: BTreeSet<RequestId>,
    ended: BTreeSet<RequestId>,
    ready: bool,
    closed: bool,
}

impl ServerObserver {
    fn drain(&mut self, connection: &mut mcp_proto::server::ServerConnection) {
        use mcp_proto::server::ServerEvent;
        while let Some(line) = connection.poll_transmit() {
            assert_one_json_line(&line);
        }
        while let Some(event) = connection.poll_event() {
            assert!(!self.closed, "event after Closed");
            match event {
                ServerEvent::Ready(_) => {
                    assert!(!self.ready, "ready twice");
                    self.ready = true;
                }
                ServerEvent::Request(request) => {
                    assert!(self.ready, "a request surfaced before ready");
                    assert!(self.seen.insert(request.id), "a host request id reused");
                    self.open.push(request.id);
                }
                ServerEvent::Cancelled { id, .. } => self.open.retain(|open| *open != id),
                ServerEvent::Response { id, .. } => {
                    assert!(self.issued.contains(&id), "response for an id never issued");
                    assert!(self.ended.insert(id), "request {id} ended twice");
                }
                ServerEvent::Closed(_) => self.closed = true,
                ServerEvent::Notification(_) | ServerEvent::Malformed(_) => {}
            }
        }
        assert!(
            connection.open_requests() <= 4,
            "open requests past the cap"
        );
    }
}

/// The server role under arbitrary host bytes: the first byte seeds the chunking and the
/// caller's choices (answer, report progress, ask the host, cancel, time out). Every transmit
/// is one JSON line; no request is surfaced before ready nor twice; each of our requests ends
/// exactly once; nothing happens after close.
pub fn check_server(data: &[u8]) {
    use mcp_proto::server::{ServerConfig, ServerConnection};
    let [seed, input @ ..] = data else {
        return;
    };
    let mut rng = Rng(u32::from(*seed) | 1);
    let mut now = Instant::now();
    let config = ServerConfig {
        max_line_len: 4096,
        max_open_requests: 4,
        request_timeout: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let mut connection = ServerConnection::new(now, config);
    let mut seen = ServerObserver::default();
    let mut rest = input;
    while !rest.is_empty() {
        let take = (1 + rng.next() as usize % 64).min(rest.len());
        let (chunk, tail) = rest.split_at(take);
        connection.handle_bytes(now, chunk);
        seen.drain(&mut connection);
        match rng.next() % 6 {
            0 if !seen.open.is_empty() => {
                let id = seen.open.remove(0);
                assert!(connection.respond(now, id, Ok(json!({}))));
            }
            1 => {
                if let Some(&id) = seen.open.first() {
                    let _ = connection.progress(id, 1.0, None, Some("working"));
                }
            }
            2 => {
                if let Ok(id) =
                    connection.request(now, Request::new("elicitation/create", Some(json!({}))))
                {
                    seen.issued.insert(id);
                }
            }
            3 => {
                if let Some(&id) = seen.issued.iter().next_back() {
                    connection.cancel(now, id);
                }
            }
            4 => {
                now += Duration::from_millis(400);
                connection.handle_timeout(now);
            }
            _ => {
                let _ = connection.notify("notifications/tools/list_changed", None);
            }
        }
        seen.drain(&mut connection);
        rest = tail;
    }
    connection.handle_eof(now);
    seen.drain(&mut connection);
    assert!(connection.is_closed() && seen.closed);
    assert_eq!(seen.issued, seen.ended, "a request of ours never ended");
    assert_eq!(connection.poll_timeout(), None, "a deadline after close");
}
