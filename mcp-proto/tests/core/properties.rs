//! Property tests: what must hold for every byte split, every handshake ordering and every
//! interleaving of responses, timeouts, cancels and the end of the stream.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mcp_proto::{ClientCapabilities, Config, Connection, Event, Protocol, Request, RequestId};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::peer::{handshake_config, init_result};

/// One line a server might write.
#[derive(Debug, Clone)]
enum Line {
    Response(u64),
    ErrorResponse(u64),
    Notification,
    Progress(u64),
    ServerPing(bool),
    ServerRequest(bool),
    /// A request a declared capability covers: roots, elicitation or sampling.
    Ask(u8, bool),
    Stray,
    Noise,
    Blank,
    InvalidUtf8,
    Overlong,
    Batch(u64),
}

fn line_strategy() -> impl Strategy<Value = Line> {
    prop_oneof![
        (2u64..8).prop_map(Line::Response),
        (2u64..8).prop_map(Line::ErrorResponse),
        Just(Line::Notification),
        (2u64..8).prop_map(Line::Progress),
        any::<bool>().prop_map(Line::ServerPing),
        any::<bool>().prop_map(Line::ServerRequest),
        (0u8..3, any::<bool>()).prop_map(|(kind, string)| Line::Ask(kind, string)),
        Just(Line::Stray),
        Just(Line::Noise),
        Just(Line::Blank),
        Just(Line::InvalidUtf8),
        Just(Line::Overlong),
        (2u64..8).prop_map(Line::Batch),
    ]
}

fn id_value(n: u64, as_string: bool) -> Value {
    if as_string {
        json!(format!("s{n}"))
    } else {
        json!(n)
    }
}

fn render(line: &Line) -> Vec<u8> {
    let json_line = |value: Value| format!("{value}\n").into_bytes();
    match line {
        Line::Response(id) => json_line(json!({"jsonrpc": "2.0", "id": id, "result": {"ok": id}})),
        Line::ErrorResponse(id) => {
            json_line(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -1, "message": "no"}}))
        }
        Line::Notification => json_line(
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": 1}}),
        ),
        Line::Progress(id) => {
            json_line(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                              "params": {"progressToken": id, "progress": 1}}))
        }
        Line::ServerPing(string) => {
            json_line(json!({"jsonrpc": "2.0", "id": id_value(40, *string), "method": "ping"}))
        }
        Line::ServerRequest(string) => json_line(
            json!({"jsonrpc": "2.0", "id": id_value(41, *string), "method": "roots/list"}),
        ),
        Line::Ask(kind, string) => {
            let method = ["roots/list", "elicitation/create", "sampling/createMessage"];
            let id = id_value(50 + u64::from(*kind), *string);
            let params = json!({"message": "?", "requestedSchema": {"type": "object"}});
            json_line(
                json!({"jsonrpc": "2.0", "id": id, "method": method[usize::from(*kind) % 3],
                             "params": params}),
            )
        }
        Line::Stray => json_line(json!({"jsonrpc": "2.0", "id": 9999, "result": {}})),
        Line::Noise => b"[INFO] server starting\n".to_vec(),
        Line::Blank => b"\r\n\n".to_vec(),
        Line::InvalidUtf8 => b"\xff\xfe\xfd\n".to_vec(),
        Line::Overlong => {
            let mut bytes = vec![b'{'; 300];
            bytes.push(b'\n');
            bytes
        }
        Line::Batch(id) => json_line(json!([
            {"jsonrpc": "2.0", "method": "notifications/message"},
            {"jsonrpc": "2.0", "id": id, "result": {}}
        ])),
    }
}

fn init_line(valid: bool, id: u64) -> Vec<u8> {
    let result = if valid {
        init_result("2025-11-25")
    } else {
        init_result("1999-01-01")
    };
    format!(
        "{}\r\n",
        json!({"jsonrpc": "2.0", "id": id, "result": result})
    )
    .into_bytes()
}

/// A connection with six calls issued (held until the handshake) and its output so far.
fn connection_with_calls(start: Instant) -> (Connection, Vec<Vec<u8>>) {
    // Long enough for the initialize answer, short enough that `Line::Overlong` is too long.
    let config = Config {
        max_line_len: 256,
        ..handshake_config()
    };
    let mut conn = Connection::new(start, config);
    for i in 0..6 {
        conn.request(start, Request::call_tool("t", json!({"i": i})))
            .unwrap();
    }
    let transmits = std::iter::from_fn(|| conn.poll_transmit()).collect();
    (conn, transmits)
}

fn drain(conn: &mut Connection, events: &mut Vec<Event>, transmits: &mut Vec<Vec<u8>>) {
    transmits.extend(std::iter::from_fn(|| conn.poll_transmit()));
    events.extend(std::iter::from_fn(|| conn.poll_event()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// (a) Any split of the stream gives the same events and the same transmits.
    #[test]
    fn chunking_never_changes_the_outcome(
        lines in prop::collection::vec(line_strategy(), 0..24),
        init_at in 0usize..24,
        mut cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        bom in any::<bool>(),
    ) {
        let start = Instant::now();
        let mut stream = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
        for (i, line) in lines.iter().enumerate() {
            if i == init_at.min(lines.len()) { stream.extend(init_line(true, 1)); }
            stream.extend(render(line));
        }
        if init_at >= lines.len() { stream.extend(init_line(true, 1)); }

        let (mut whole, mut whole_transmits) = connection_with_calls(start);
        let mut whole_events = Vec::new();
        whole.handle_bytes(start, &stream);
        drain(&mut whole, &mut whole_events, &mut whole_transmits);

        let (mut split, mut split_transmits) = connection_with_calls(start);
        let mut split_events = Vec::new();
        let mut offsets: Vec<usize> = cuts.drain(..).map(|cut| cut.index(stream.len() + 1)).collect();
        offsets.sort_unstable();
        let mut from = 0;
        for to in offsets.into_iter().chain([stream.len()]) {
            split.handle_bytes(start, &stream[from..to]);
            drain(&mut split, &mut split_events, &mut split_transmits);
            from = to;
        }
        // The handshake always completes, so the held calls, their answers and progress count.
        prop_assert!(whole_events.iter().any(|event| matches!(event, Event::Ready(_))));
        prop_assert_eq!(split_events, whole_events);
        prop_assert_eq!(split_transmits, whole_transmits);
    }
}

/// One step of a handshake scenario.
#[derive(Debug, Clone)]
enum Step {
    Server(Line),
    ClientCall,
    ClientPing,
    /// Answers every server request seen so far.
    ClientAnswer,
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => line_strategy().prop_map(Step::Server),
        1 => Just(Step::ClientCall),
        1 => Just(Step::ClientPing),
        1 => Just(Step::ClientAnswer),
    ]
}

/// How the server answers `initialize` (or the probe), if at all.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Init {
    Valid,
    Unsupported,
    Error,
    Never,
}

/// Which lifecycle the connection goes through.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Lifecycle {
    /// A fixed handshake revision: `initialize` first.
    Handshake,
    /// `Protocol::Auto`, the probe refused (-32601): the handshake era, `initialize` second.
    ProbeThenHandshake,
    /// `Protocol::Auto`, `Init` says how the probe is answered (a result listing only an
    /// unknown revision, an error: the handshake era, never answered).
    Stateless,
}

/// What the server writes at the chosen step: the answer that decides the lifecycle.
fn decisive_lines(lifecycle: Lifecycle, init: Init) -> Option<Vec<u8>> {
    initialize_answer(
        if lifecycle == Lifecycle::Handshake {
            1
        } else {
            0
        },
        lifecycle,
        init,
    )
}

/// The answer to `initialize` under `id`, or for the other lifecycles the probe's.
fn initialize_answer(id: u64, lifecycle: Lifecycle, init: Init) -> Option<Vec<u8>> {
    let error = |id: u64| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-1,\"message\":\"no\"}}}}\n"
        )
        .into_bytes()
    };
    let init_bytes = |id: u64| match init {
        Init::Valid => Some(init_line(true, id)),
        Init::Unsupported => Some(init_line(false, id)),
        Init::Error => Some(error(id)),
        Init::Never => None,
    };
    match lifecycle {
        Lifecycle::Handshake => init_bytes(id),
        // The probe is refused here; `initialize` is answered once its id is known.
        Lifecycle::ProbeThenHandshake => Some(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"no\"}}\n"
                .to_vec(),
        ),
        Lifecycle::Stateless => {
            let versions = match init {
                Init::Valid => json!(["2026-07-28"]),
                Init::Unsupported => json!(["1999-01-01"]),
                Init::Error => return Some(error(1)),
                Init::Never => return None,
            };
            let result = json!({"supportedVersions": versions, "capabilities": {}});
            Some(format!("{}\n", json!({"jsonrpc": "2.0", "id": 1, "result": result})).into_bytes())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// (b) Any ordering around the start, in either era: Ready exactly once iff a valid
    /// answer arrived. Handshake era: nothing but the probe, `initialize`, client pings and
    /// answers to server pings before `notifications/initialized`. Stateless era: no
    /// `initialize` and no `ping` ever, and every request carries its revision in `_meta`.
    /// With client capabilities declared, the requests they cover reach the caller only
    /// once ready, and none is left unanswered after its deadline.
    #[test]
    fn handshake_orderings(
        steps in prop::collection::vec(step_strategy(), 0..30),
        at in 0usize..30,
        init in prop_oneof![Just(Init::Valid), Just(Init::Unsupported), Just(Init::Error), Just(Init::Never)],
        lifecycle in prop_oneof![Just(Lifecycle::Handshake), Just(Lifecycle::ProbeThenHandshake), Just(Lifecycle::Stateless)],
        declare in any::<bool>(),
    ) {
        let start = Instant::now();
        let capabilities = ClientCapabilities { roots: declare, elicitation: declare, sampling: declare, tasks: false, elicitation_url: false };
        let protocol = match lifecycle {
            Lifecycle::Handshake => handshake_config().protocol,
            _ => Protocol::Auto,
        };
        let mut conn = Connection::new(start, Config { capabilities, protocol, ..handshake_config() });
        let mut events = Vec::new();
        let mut transmits = Vec::new();
        let decisive = decisive_lines(lifecycle, init);
        let at = at.min(steps.len());
        for (i, step) in steps.iter().map(Some).chain([None]).enumerate() {
            if i == at && let Some(bytes) = &decisive {
                conn.handle_bytes(start, bytes);
                if lifecycle == Lifecycle::ProbeThenHandshake {
                    drain(&mut conn, &mut events, &mut transmits);
                    let initialize = transmits.iter().rev()
                        .map(|l| serde_json::from_slice::<Value>(l).unwrap())
                        .find(|m| m["method"] == "initialize");
                    let id = initialize.and_then(|m| m["id"].as_u64()).unwrap_or(0);
                    let answer = initialize_answer(id, Lifecycle::Handshake, init);
                    conn.handle_bytes(start, &answer.unwrap_or_default());
                }
            }
            match step {
                Some(Step::Server(line)) => conn.handle_bytes(start, &render(line)),
                Some(Step::ClientCall) => { let _ = conn.request(start, Request::call_tool("early", json!({}))); }
                Some(Step::ClientPing) => { let _ = conn.request(start, Request::new("ping", None)); }
                Some(Step::ClientAnswer) => {
                    for event in &events {
                        if let Event::ServerRequest(request) = event {
                            conn.respond(start, request.id, Ok(json!({"answered": true})));
                        }
                    }
                }
                None => {}
            }
            drain(&mut conn, &mut events, &mut transmits);
        }
        let ready = events.iter().filter(|e| matches!(e, Event::Ready(_))).count();
        prop_assert_eq!(ready, usize::from(init == Init::Valid));
        let ready_at = events.iter().position(|e| matches!(e, Event::Ready(_)));
        for (i, event) in events.iter().enumerate() {
            if matches!(event, Event::ServerRequest(_)) {
                prop_assert!(declare && ready_at.is_some_and(|r| r < i), "asked before ready");
            }
        }
        // Whatever nobody answered is refused at its deadline: nothing stays open (an
        // unanswered probe first gives way to `initialize`, with a budget of its own).
        conn.handle_timeout(start + Duration::from_secs(3600));
        conn.handle_timeout(start + Duration::from_secs(7200));
        drain(&mut conn, &mut events, &mut transmits);
        prop_assert_eq!(conn.poll_timeout(), None);

        let written: Vec<Value> = transmits.iter().map(|l| serde_json::from_slice(l).unwrap()).collect();
        let initialized_at = written.iter().position(|m| m["method"] == "notifications/initialized");
        let stateless = lifecycle == Lifecycle::Stateless && init == Init::Valid;
        prop_assert_eq!(initialized_at.is_some(), init == Init::Valid && !stateless);
        if stateless {
            for message in written.iter().filter(|m| m.get("id").is_some() && m.get("method").is_some()) {
                prop_assert!(message["method"] != "initialize" && message["method"] != "ping", "{}", message);
                let version = &message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"];
                prop_assert_eq!(version, &json!("2026-07-28"), "{}", message);
            }
            return Ok(());
        }
        for message in &written[..initialized_at.unwrap_or(written.len())] {
            let allowed = match message.get("method").and_then(Value::as_str) {
                Some("initialize") | Some("ping") | Some("server/discover") => true,
                Some(_) => false,
                None => message.get("result") == Some(&json!({})),
            };
            prop_assert!(allowed, "written before initialized: {}", message);
        }
    }
}

/// One thing that can happen to pending requests.
#[derive(Debug, Clone)]
enum Op {
    Call(u64),
    Respond(prop::sample::Index, bool),
    RespondUnknown,
    Advance(u64),
    Cancel(prop::sample::Index),
    Progress(prop::sample::Index),
    Eof,
    Close,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (100u64..5000).prop_map(Op::Call),
        4 => (any::<prop::sample::Index>(), any::<bool>()).prop_map(|(i, twice)| Op::Respond(i, twice)),
        1 => Just(Op::RespondUnknown),
        3 => (0u64..3000).prop_map(Op::Advance),
        2 => any::<prop::sample::Index>().prop_map(Op::Cancel),
        2 => any::<prop::sample::Index>().prop_map(Op::Progress),
        1 => Just(Op::Eof),
        1 => Just(Op::Close),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// (c) Whatever happens, every request ends exactly once and nothing follows `Closed`.
    #[test]
    fn every_request_ends_exactly_once(ops in prop::collection::vec(op_strategy(), 0..60)) {
        let start = Instant::now();
        let (mut conn, _) = crate::peer::handshake(start);
        let mut now = start;
        let mut issued: Vec<RequestId> = Vec::new();
        let mut ended: BTreeMap<RequestId, usize> = BTreeMap::new();
        let mut closed = false;
        let pick = |issued: &[RequestId], index: &prop::sample::Index| {
            (!issued.is_empty()).then(|| issued[index.index(issued.len())])
        };
        for op in ops.iter().chain([&Op::Close]) {
            match op {
                Op::Call(ms) => match conn.request(now, Request::call_tool("t", json!({})).timeout(Duration::from_millis(*ms))) {
                    Ok(id) => issued.push(id),
                    Err(_) => prop_assert!(closed),
                },
                Op::Respond(index, twice) => if let Some(id) = pick(&issued, index) {
                    let line = format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "result": {}}));
                    conn.handle_bytes(now, line.as_bytes());
                    if *twice { conn.handle_bytes(now, line.as_bytes()); }
                },
                Op::RespondUnknown => conn.handle_bytes(now, b"{\"jsonrpc\":\"2.0\",\"id\":123456,\"result\":{}}\n"),
                Op::Advance(ms) => {
                    now += Duration::from_millis(*ms);
                    conn.handle_timeout(now);
                }
                Op::Cancel(index) => if let Some(id) = pick(&issued, index) {
                    let pending = !ended.contains_key(&id) && !closed;
                    prop_assert_eq!(conn.cancel(now, id), pending);
                },
                Op::Progress(index) => if let Some(id) = pick(&issued, index) {
                    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                      "params": {"progressToken": id, "progress": 1}});
                    conn.handle_bytes(now, format!("{note}\n").as_bytes());
                },
                Op::Eof => conn.handle_eof(now),
                Op::Close => conn.close(),
            }
            while conn.poll_transmit().is_some() {
                prop_assert!(!closed, "written after Closed");
            }
            while let Some(event) = conn.poll_event() {
                prop_assert!(!closed, "event after Closed: {:?}", event);
                match event {
                    Event::Response { id, .. } => *ended.entry(id).or_default() += 1,
                    Event::Closed(_) => closed = true,
                    _ => {}
                }
            }
        }
        prop_assert!(closed);
        for id in &issued {
            prop_assert_eq!(ended.get(id).copied(), Some(1), "request {} ended {:?} times", id, ended.get(id));
        }
        prop_assert_eq!(ended.len(), issued.len());
    }
}

/// Pieces an event stream is made of, including the awkward ones: every line end, a BOM,
/// comments, NULs and long lines.
fn sse_piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "data: a",
        "data:b",
        "data",
        "event: e",
        "id: 7",
        "id: x\0y",
        "retry: 15",
        "retry: x",
        ": note",
        "\n",
        "\r",
        "\r\n",
        "\u{feff}",
        "é",
        "data: 0123456789012345678901234567890",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// An event stream gives the same events, last id and retry however it is split.
    #[test]
    fn sse_chunking_never_changes_the_events(
        pieces in prop::collection::vec(sse_piece(), 0..40),
        cuts in prop::collection::vec(1usize..9, 1..40),
        limit in 4usize..40,
    ) {
        let stream: Vec<u8> = pieces.concat().into_bytes();
        let decode = |chunks: &mut dyn Iterator<Item = &[u8]>| {
            let mut decoder = mcp_proto::http::SseDecoder::new(limit);
            let mut events = Vec::new();
            for chunk in chunks {
                decoder.push(chunk);
                events.extend(std::iter::from_fn(|| decoder.next_event()));
            }
            (events, decoder.last_event_id().map(str::to_owned), decoder.retry())
        };
        let whole = decode(&mut std::iter::once(&stream[..]));
        let mut rest = &stream[..];
        let mut pieces = Vec::new();
        for cut in cuts.iter().cycle().take(stream.len()) {
            if rest.is_empty() {
                break;
            }
            let (piece, tail) = rest.split_at((*cut).min(rest.len()));
            pieces.push(piece);
            rest = tail;
        }
        let chunked = decode(&mut pieces.into_iter());
        prop_assert_eq!(&chunked, &whole);
        for event in whole.0.iter().flatten() {
            prop_assert!(event.data.len() <= limit);
        }
    }
}
