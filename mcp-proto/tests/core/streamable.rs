//! [`HttpConnection`] driven without sockets: each test plays the server's side of the HTTP
//! exchanges the machine asks for.

use std::time::{Duration, Instant};

use crate::peer::handshake_config;
use mcp_proto::{
    CloseReason, Config, Era, Event, Fallback, Request, RequestError, RequestId, RpcError,
    http::{
        Affected, Answer, Exchange, ExchangeId, Get, HeaderRule, HttpConnection, HttpTransport,
        Post, Reply,
    },
};
use serde_json::{Value, json};

const URL: &str = "http://127.0.0.1:1/mcp";

fn http(now: Instant, transport: HttpTransport) -> HttpConnection {
    HttpConnection::new(now, handshake_config(), URL.to_owned(), transport)
}

/// Every exchange the machine asks for now.
fn exchanges(http: &mut HttpConnection) -> Vec<Exchange> {
    std::iter::from_fn(|| http.poll_exchange()).collect()
}

/// Every event the machine has now.
fn events(http: &mut HttpConnection) -> Vec<Event> {
    std::iter::from_fn(|| http.poll_event()).collect()
}

/// The one exchange asked for, which must be a POST.
fn one_post(http: &mut HttpConnection) -> Post {
    match exchanges(http).as_slice() {
        [Exchange::Post(post)] => post.clone(),
        other => panic!("expected one POST, got {other:?}"),
    }
}

fn method(post: &Post) -> String {
    let message: Value = serde_json::from_slice(&post.body).unwrap();
    message["method"].as_str().unwrap_or_default().to_owned()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let found = headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name));
    found.map(|(_, value)| value.as_str())
}

/// The server answers `post` with a 2xx JSON body, `session` naming the session, and the
/// exchange ends.
fn answer(
    http: &mut HttpConnection,
    now: Instant,
    post: &Post,
    session: Option<&str>,
    body: Value,
) {
    let session = session.map(str::to_owned);
    http.handle_reply(now, post.id, Reply::Head { session });
    http.handle_reply(now, post.id, Reply::Message(body.to_string().into_bytes()));
    done(http, now, post.id);
}

/// The server answers 202 with no body (a notification's answer), and the exchange ends.
fn accept(http: &mut HttpConnection, now: Instant, post: &Post) {
    http.handle_reply(now, post.id, Reply::Head { session: None });
    done(http, now, post.id);
}

/// The server refuses `post` with `status` and `body`, and the exchange ends.
fn refuse(http: &mut HttpConnection, now: Instant, post: &Post, status: u16, body: &str) {
    let detail = format!("HTTP {status}: {body}");
    let body = body.as_bytes().to_vec();
    let refused = Reply::Refused {
        status,
        body,
        detail,
    };
    http.handle_reply(now, post.id, refused);
    done(http, now, post.id);
}

fn done(http: &mut HttpConnection, now: Instant, id: ExchangeId) {
    http.handle_reply(now, id, Reply::Done);
}

fn init_answer(post: &Post) -> Value {
    let message: Value = serde_json::from_slice(&post.body).unwrap();
    json!({"jsonrpc": "2.0", "id": message["id"], "result": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "serverInfo": {"name": "s", "version": "1"},
    }})
}

fn result_for(post: &Post, result: Value) -> Value {
    let message: Value = serde_json::from_slice(&post.body).unwrap();
    json!({"jsonrpc": "2.0", "id": message["id"], "result": result})
}

/// Streamable HTTP up to the handshake's end: `initialize` answered with `session`, and the
/// `notifications/initialized` POST returned (not yet answered).
fn handshake(now: Instant, session: &str) -> (HttpConnection, Post) {
    let mut http = http(now, HttpTransport::Auto);
    let initialize = one_post(&mut http);
    assert_eq!(method(&initialize), "initialize");
    answer(
        &mut http,
        now,
        &initialize,
        Some(session),
        init_answer(&initialize),
    );
    let initialized = one_post(&mut http);
    assert_eq!(method(&initialized), "notifications/initialized");
    assert!(matches!(events(&mut http).as_slice(), [Event::Ready(_)]));
    (http, initialized)
}

/// The GET for the server's own stream, which must be the only exchange asked for.
fn one_get(http: &mut HttpConnection) -> Get {
    match exchanges(http).as_slice() {
        [Exchange::Get(get)] => get.clone(),
        other => panic!("expected one GET, got {other:?}"),
    }
}

#[test]
fn after_the_handshake_every_message_carries_the_session_and_version() {
    let now = Instant::now();
    let (mut http, initialized) = handshake(now, "s1");
    assert_eq!(header(&initialized.headers, "mcp-session-id"), Some("s1"));
    assert_eq!(
        header(&initialized.headers, "mcp-protocol-version"),
        Some("2025-06-18")
    );
    assert_eq!(initialized.answer, Answer::None);
    assert!(initialized.timeout.is_some(), "nobody answers it");
    accept(&mut http, now, &initialized);
    let listen = one_get(&mut http);
    assert_eq!(header(&listen.headers, "mcp-session-id"), Some("s1"));
    assert_eq!(header(&listen.headers, "accept"), Some("text/event-stream"));

    let id = http.request(now, Request::list_tools(None)).unwrap();
    let list = one_post(&mut http);
    assert_eq!(list.answer, Answer::InResponse);
    assert_eq!(header(&list.headers, "mcp-session-id"), Some("s1"));
    answer(
        &mut http,
        now,
        &list,
        None,
        result_for(&list, json!({"tools": []})),
    );
    let ended = events(&mut http);
    assert!(
        matches!(&ended[..], [Event::Response { id: answered, result: Ok(_) }] if *answered == id)
    );

    http.close();
    let _ = events(&mut http);
    let delete = http.session_end().unwrap();
    assert_eq!(header(&delete, "mcp-session-id"), Some("s1"));
    assert_eq!(http.session_end(), None, "ended once");
}

#[test]
fn nothing_overtakes_initialized_and_the_listener_opens_after_it() {
    let now = Instant::now();
    let (mut http, initialized) = handshake(now, "s1");
    http.request(now, Request::list_tools(None)).unwrap();
    assert_eq!(
        exchanges(&mut http),
        [],
        "held while initialized is in flight"
    );
    accept(&mut http, now, &initialized);
    let after: Vec<Exchange> = exchanges(&mut http);
    assert!(
        matches!(&after[..], [Exchange::Get(_), Exchange::Post(post)] if method(post) == "tools/list"),
        "{after:?}"
    );
}

#[test]
fn the_listener_resumes_where_initialize_s_stream_stopped() {
    let now = Instant::now();
    let mut http = http(now, HttpTransport::Streamable);
    let initialize = one_post(&mut http);
    let id = initialize.id;
    http.handle_reply(
        now,
        id,
        Reply::Head {
            session: Some("s1".to_owned()),
        },
    );
    let body = init_answer(&initialize).to_string().into_bytes();
    http.handle_reply(now, id, Reply::Message(body));
    let ended = Reply::StreamEnded {
        why: "the event stream ended".to_owned(),
        last_event_id: Some("e7".to_owned()),
        retry: Some(Duration::from_millis(50)),
    };
    http.handle_reply(now, id, ended);
    let initialized = one_post(&mut http);
    accept(&mut http, now, &initialized);
    assert_eq!(
        exchanges(&mut http),
        [],
        "initialize's exchange is not over yet"
    );
    done(&mut http, now, id);
    let listen = one_get(&mut http);
    assert_eq!(header(&listen.headers, "last-event-id"), Some("e7"));
    assert_eq!(listen.delay, Duration::from_millis(50));
}

#[test]
fn a_forgotten_session_restarts_and_the_request_goes_again_after_initialized() {
    let now = Instant::now();
    let (mut http, initialized) = handshake(now, "s1");
    accept(&mut http, now, &initialized);
    let _listen = one_get(&mut http);
    let id = http.request(now, Request::list_tools(None)).unwrap();
    let list = one_post(&mut http);
    refuse(&mut http, now, &list, 404, "Session not found");

    // A new session: the old listener goes, `initialize` goes without a session.
    let restart = exchanges(&mut http);
    let initialize = match &restart[..] {
        [Exchange::Cancel(_), Exchange::Post(post)] => post.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(method(&initialize), "initialize");
    assert_eq!(header(&initialize.headers, "mcp-session-id"), None);
    answer(
        &mut http,
        now,
        &initialize,
        Some("s2"),
        init_answer(&initialize),
    );
    let initialized = one_post(&mut http);
    assert_eq!(method(&initialized), "notifications/initialized");
    assert_eq!(header(&initialized.headers, "mcp-session-id"), Some("s2"));
    let _ready = events(&mut http);
    // The refused request waits for the new session's `initialized` (Python SDK servers
    // refuse a request that overtakes it).
    assert_eq!(exchanges(&mut http), []);
    accept(&mut http, now, &initialized);
    let after = exchanges(&mut http);
    let again = after.iter().find_map(|exchange| match exchange {
        Exchange::Post(post) => Some(post.clone()),
        _ => None,
    });
    let again = again.unwrap();
    assert_eq!(again.body, list.body);
    assert_eq!(header(&again.headers, "mcp-session-id"), Some("s2"));
    answer(
        &mut http,
        now,
        &again,
        None,
        result_for(&again, json!({"tools": []})),
    );
    let ended = events(&mut http);
    assert!(
        matches!(&ended[..], [Event::Response { id: answered, result: Ok(_) }] if *answered == id)
    );
}

#[test]
fn a_request_refused_in_the_new_session_too_fails_without_looping() {
    let now = Instant::now();
    let (mut http, initialized) = handshake(now, "s1");
    accept(&mut http, now, &initialized);
    let _listen = one_get(&mut http);
    let id = http
        .request(now, Request::call_tool("echo", json!({})))
        .unwrap();
    let call = one_post(&mut http);
    let refusal = "Bad Request: No valid session ID provided";
    refuse(&mut http, now, &call, 400, refusal);
    let initialize = match &exchanges(&mut http)[..] {
        [Exchange::Cancel(_), Exchange::Post(post)] => post.clone(),
        other => panic!("{other:?}"),
    };
    answer(
        &mut http,
        now,
        &initialize,
        Some("s2"),
        init_answer(&initialize),
    );
    let initialized = one_post(&mut http);
    let _ready = events(&mut http);
    accept(&mut http, now, &initialized);
    let again = exchanges(&mut http);
    let Some(Exchange::Post(again)) = again.iter().find(|e| matches!(e, Exchange::Post(_))) else {
        panic!("{again:?}");
    };
    refuse(&mut http, now, again, 400, refusal);
    let ended = events(&mut http);
    let expected = format!("POST {URL}: HTTP 400: {refusal}, in a new session too");
    assert!(
        matches!(&ended[..], [Event::Response { id: failed, result: Err(RequestError::Transport(why)) }] if *failed == id && *why == expected),
        "{ended:?}"
    );
    assert_eq!(exchanges(&mut http), [], "no third session");
}

#[test]
fn a_new_session_refused_before_answering_anything_ends_the_connection() {
    let now = Instant::now();
    let (mut http, initialized) = handshake(now, "s1");
    let refusal = "Bad Request: No valid session ID provided";
    refuse(&mut http, now, &initialized, 400, refusal);
    let initialize = one_post(&mut http);
    assert_eq!(method(&initialize), "initialize");
    answer(
        &mut http,
        now,
        &initialize,
        Some("s2"),
        init_answer(&initialize),
    );
    let initialized = one_post(&mut http);
    refuse(&mut http, now, &initialized, 400, refusal);
    let ended = events(&mut http);
    let expected =
        format!("POST {URL}: HTTP 400: {refusal}, in a new session that had answered nothing yet");
    assert!(
        matches!(ended.last(), Some(Event::Closed(CloseReason::Transport(why))) if *why == expected),
        "{ended:?}"
    );
}

#[test]
fn auto_falls_back_to_http_sse_when_initialize_is_refused() {
    let now = Instant::now();
    let mut http = http(now, HttpTransport::Auto);
    let initialize = one_post(&mut http);
    refuse(&mut http, now, &initialize, 405, "");
    let stream = one_get(&mut http);
    assert!(stream.legacy);
    assert_eq!(stream.url, URL);
    // Nothing is posted until the stream names the endpoint.
    assert_eq!(exchanges(&mut http), []);
    http.handle_reply(now, stream.id, Reply::Head { session: None });
    let endpoint = "http://127.0.0.1:1/messages?session=x".to_owned();
    http.handle_reply(now, stream.id, Reply::Endpoint(endpoint.clone()));
    let again = one_post(&mut http);
    assert_eq!(again.url, endpoint);
    assert_eq!(again.body, initialize.body);
    assert_eq!(again.answer, Answer::OnTheStream);
    assert_eq!(header(&again.headers, "mcp-session-id"), None);
    // The answer comes on the stream.
    let body = init_answer(&again).to_string().into_bytes();
    http.handle_reply(now, stream.id, Reply::Message(body));
    assert!(matches!(events(&mut http).as_slice(), [Event::Ready(_)]));
    assert_eq!(method(&one_post(&mut http)), "notifications/initialized");
}

#[test]
fn streamable_only_does_not_fall_back() {
    let now = Instant::now();
    let mut http = http(now, HttpTransport::Streamable);
    let initialize = one_post(&mut http);
    refuse(&mut http, now, &initialize, 404, "nothing here");
    let ended = events(&mut http);
    let expected = format!("POST {URL}: HTTP 404: nothing here");
    assert!(
        matches!(ended.last(), Some(Event::Closed(CloseReason::Transport(why))) if *why == expected),
        "{ended:?}"
    );
}

#[test]
fn an_answer_s_stream_is_resumed_until_it_stops_bringing_anything_new() {
    let now = Instant::now();
    let (mut http, initialized) = handshake(now, "s1");
    accept(&mut http, now, &initialized);
    let _listen = one_get(&mut http);
    let id = http
        .request(now, Request::call_tool("slow", json!({})))
        .unwrap();
    let call = one_post(&mut http);
    let mut exchange = call.id;
    http.handle_reply(now, exchange, Reply::Head { session: None });
    let ended = |retry| Reply::StreamEnded {
        why: "the event stream ended".to_owned(),
        last_event_id: Some("e1".to_owned()),
        retry,
    };
    http.handle_reply(now, exchange, ended(None));
    for attempt in 1..=5 {
        let resume = exchanges(&mut http);
        let get = match &resume[..] {
            [Exchange::Get(get), Exchange::Cancel(old)] if *old == exchange => get.clone(),
            other => panic!("attempt {attempt}: {other:?}"),
        };
        assert_eq!(header(&get.headers, "last-event-id"), Some("e1"));
        assert_eq!(get.delay, Duration::from_secs(1), "1 s without a retry");
        exchange = get.id;
        // Ends again with nothing new; the resumed stream gives no id of its own.
        let again = Reply::StreamEnded {
            why: "the event stream ended".to_owned(),
            last_event_id: None,
            retry: None,
        };
        http.handle_reply(now, exchange, again);
    }
    let ended = events(&mut http);
    let expected = format!(
        "GET {URL}: the event stream ended before the answer, 5 times without a new event; giving up"
    );
    assert!(
        matches!(&ended[..], [Event::Response { id: failed, result: Err(RequestError::Transport(why)) }] if *failed == id && *why == expected),
        "{ended:?}"
    );
}

#[test]
fn a_stream_with_no_event_id_fails_its_request_at_once() {
    let now = Instant::now();
    let (mut http, initialized) = handshake(now, "s1");
    accept(&mut http, now, &initialized);
    let _listen = one_get(&mut http);
    let id = http
        .request(now, Request::call_tool("slow", json!({})))
        .unwrap();
    let call = one_post(&mut http);
    let ended = Reply::StreamEnded {
        why: "the event stream ended".to_owned(),
        last_event_id: None,
        retry: None,
    };
    http.handle_reply(now, call.id, ended);
    let expected = format!(
        "POST {URL}: the event stream ended before the answer, with no event id to resume from"
    );
    let ended = events(&mut http);
    assert!(
        matches!(&ended[..], [Event::Response { id: failed, result: Err(RequestError::Transport(why)) }] if *failed == id && *why == expected),
        "{ended:?}"
    );
}

// ----- the stateless era -----

/// A connection that finds the era out ([`Protocol::Auto`], the default).
fn auto(now: Instant) -> HttpConnection {
    HttpConnection::new(now, Config::default(), URL.to_owned(), HttpTransport::Auto)
}

fn discover_answer(post: &Post) -> Value {
    result_for(
        post,
        json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
        }),
    )
}

/// A JSON-RPC error body, with `id` null as some servers write it.
fn error_body(code: i64, data: Value) -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": "no", "data": data}})
        .to_string()
}

fn body(post: &Post) -> Value {
    serde_json::from_slice(&post.body).unwrap()
}

/// Streamable HTTP in the stateless era: the probe answered, with a session id the server
/// sends anyway (the conformance suite's servers do).
fn stateless(now: Instant) -> HttpConnection {
    let mut http = auto(now);
    let probe = one_post(&mut http);
    assert_eq!(method(&probe), "server/discover");
    answer(
        &mut http,
        now,
        &probe,
        Some("ignored"),
        discover_answer(&probe),
    );
    assert!(matches!(events(&mut http).as_slice(), [Event::Ready(_)]));
    assert_eq!(http.era(), Some(Era::Stateless));
    http
}

/// The one event there is, which must end a request.
fn one_response(http: &mut HttpConnection) -> (RequestId, Result<Value, RequestError>) {
    match events(http).as_slice() {
        [Event::Response { id, result }] => {
            (*id, result.clone().map(|raw| raw.into_value().unwrap()))
        }
        other => panic!("expected one response, got {other:?}"),
    }
}

/// The one POST a request made, its answer `result`, and the response the caller gets.
fn round_trip(http: &mut HttpConnection, now: Instant, result: Value) -> (Post, Event) {
    let post = one_post(http);
    answer(http, now, &post, None, result_for(&post, result));
    let mut events = events(http);
    assert_eq!(events.len(), 1, "{events:?}");
    (post, events.remove(0))
}

#[test]
fn the_probe_carries_the_stateless_headers_and_its_answer_decides_the_era() {
    let now = Instant::now();
    let mut http = auto(now);
    let probe = one_post(&mut http);
    assert_eq!(method(&probe), "server/discover");
    assert_eq!(
        header(&probe.headers, "mcp-protocol-version"),
        Some("2026-07-28")
    );
    assert_eq!(
        header(&probe.headers, "mcp-method"),
        Some("server/discover")
    );
    let meta = &body(&probe)["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    answer(&mut http, now, &probe, Some("s1"), discover_answer(&probe));
    assert!(matches!(events(&mut http).as_slice(), [Event::Ready(_)]));
    // No GET stream in this era, and the session id the server sent is not kept.
    assert!(exchanges(&mut http).is_empty());
    let id = http.request(now, Request::list_tools(None)).unwrap();
    let (list, event) = round_trip(&mut http, now, json!({"tools": []}));
    assert!(matches!(event, Event::Response { id: got, result: Ok(_) } if got == id));
    assert_eq!(header(&list.headers, "mcp-session-id"), None);
    assert_eq!(
        header(&list.headers, "mcp-protocol-version"),
        Some("2026-07-28")
    );
    assert_eq!(header(&list.headers, "mcp-method"), Some("tools/list"));
    assert_eq!(header(&list.headers, "mcp-name"), None);
    assert!(exchanges(&mut http).is_empty());
    http.close();
    let _ = events(&mut http);
    assert_eq!(http.session_end(), None, "no session, no DELETE");
}

/// A real legacy server answers the probe with -32603 inside a 400: the handshake era, and
/// `initialize` follows (a session as before).
#[test]
fn a_probe_refused_with_a_handshake_era_error_means_the_handshake() {
    let now = Instant::now();
    let mut http = auto(now);
    let probe = one_post(&mut http);
    refuse(
        &mut http,
        now,
        &probe,
        400,
        &error_body(-32603, Value::Null),
    );
    let initialize = one_post(&mut http);
    assert_eq!(method(&initialize), "initialize");
    assert_eq!(header(&initialize.headers, "mcp-method"), None);
    answer(
        &mut http,
        now,
        &initialize,
        Some("s1"),
        init_answer(&initialize),
    );
    let initialized = one_post(&mut http);
    assert_eq!(header(&initialized.headers, "mcp-session-id"), Some("s1"));
    let refused = Some(Fallback::Refused("HTTP status 400".to_owned()));
    assert!(
        matches!(events(&mut http).as_slice(), [Event::Ready(info)] if info.fallback == refused)
    );
    assert_eq!(http.era(), Some(Era::Handshake));
}

/// A 404 with no body to the probe, then to `initialize`: an HTTP+SSE server, as before.
#[test]
fn a_probe_refused_with_an_empty_404_falls_back_to_http_sse_after_initialize() {
    let now = Instant::now();
    let mut http = auto(now);
    let probe = one_post(&mut http);
    refuse(&mut http, now, &probe, 404, "");
    let initialize = one_post(&mut http);
    assert_eq!(method(&initialize), "initialize");
    refuse(&mut http, now, &initialize, 404, "");
    let stream = one_get(&mut http);
    assert!(stream.legacy, "the HTTP+SSE stream");
}

/// -32022 inside a 400 is a stateless server naming what it speaks (even the revision we
/// asked for): the probe goes again, never the handshake nor HTTP+SSE.
#[test]
fn a_probe_refused_with_unsupported_version_is_retried_never_fallen_back() {
    let now = Instant::now();
    let mut http = auto(now);
    let probe = one_post(&mut http);
    let supported = json!({"supported": ["2026-07-28"], "requested": "2026-07-28"});
    refuse(&mut http, now, &probe, 400, &error_body(-32022, supported));
    let again = one_post(&mut http);
    assert_eq!(method(&again), "server/discover");
    assert_ne!(body(&again)["id"], body(&probe)["id"]);
    assert_eq!(
        header(&again.headers, "mcp-protocol-version"),
        Some("2026-07-28")
    );
    answer(&mut http, now, &again, None, discover_answer(&again));
    assert!(matches!(events(&mut http).as_slice(), [Event::Ready(_)]));
    assert_eq!(http.era(), Some(Era::Stateless));
    assert!(
        exchanges(&mut http).is_empty(),
        "no GET, no HTTP+SSE stream"
    );
}

/// 401 is never era evidence: the connection fails with the adapter's words, as before.
#[test]
fn an_unauthorized_probe_fails_the_connection_not_the_era() {
    let now = Instant::now();
    let mut http = auto(now);
    let probe = one_post(&mut http);
    let affected = http.handle_reply(now, probe.id, Reply::Unauthorized("needs login".into()));
    assert_eq!(affected, Affected::Connection);
    assert!(
        exchanges(&mut http)
            .iter()
            .all(|e| !matches!(e, Exchange::Post(_)))
    );
    let closed = events(&mut http).into_iter().last();
    assert!(
        matches!(closed, Some(Event::Closed(CloseReason::Transport(why))) if why == "needs login")
    );
}

#[test]
fn each_post_names_its_method_and_what_it_acts_on() {
    let now = Instant::now();
    let mut http = stateless(now);
    let requests = [
        (
            Request::call_tool("get_weather", json!({})).untyped(),
            "tools/call",
            Some("get_weather"),
        ),
        (
            Request::call_tool("天気", json!({})).untyped(),
            "tools/call",
            Some("=?base64?5aSp5rCX?="),
        ),
        (
            Request::get_prompt("greet", Default::default()).untyped(),
            "prompts/get",
            Some("greet"),
        ),
        (
            Request::read_resource("file:///projects/my app/a.json").untyped(),
            "resources/read",
            Some("file:///projects/my app/a.json"),
        ),
        (Request::list_prompts(None).untyped(), "prompts/list", None),
        // The tasks extension routes by task id.
        (Request::get_task("t-7").untyped(), "tasks/get", Some("t-7")),
        (Request::cancel_task("t-7"), "tasks/cancel", Some("t-7")),
        (
            Request::update_task("t-7", Default::default()),
            "tasks/update",
            Some("t-7"),
        ),
    ];
    for (request, method, name) in requests {
        http.request(now, request).unwrap();
        let post = one_post(&mut http);
        assert_eq!(header(&post.headers, "mcp-method"), Some(method));
        assert_eq!(header(&post.headers, "mcp-name"), name, "{method}");
        assert_eq!(
            header(&post.headers, "mcp-protocol-version"),
            Some("2026-07-28")
        );
        let meta = &body(&post)["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert!(!post.headers.iter().any(|(k, _)| k.starts_with("Mcp-Param")));
    }
}

/// The tool list of the conformance suite's `http-invalid-tool-headers`, shortened.
fn annotated_tools() -> Value {
    let tool = |name: &str, property: Value| json!({"name": name, "inputSchema": {"type": "object", "properties": property}});
    json!({"tools": [
        tool("valid_tool", json!({"region": {"type": "string", "x-mcp-header": "Region"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"}})),
        tool("invalid_space_in_name", json!({"value": {"type": "string", "x-mcp-header": "My Region"}})),
        tool("plain", json!({"q": {"type": "string"}})),
    ]})
}

#[test]
fn a_listing_drops_tools_with_invalid_annotations_and_says_why() {
    let now = Instant::now();
    let mut http = stateless(now);
    http.request(now, Request::list_tools(None)).unwrap();
    let (_, event) = round_trip(&mut http, now, annotated_tools());
    let Event::Response {
        result: Ok(result), ..
    } = event
    else {
        panic!("{event:?}")
    };
    let result = result.into_value().unwrap();
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["valid_tool", "plain"]);
    let [rejected] = http.rejected_tools() else {
        panic!("{:?}", http.rejected_tools())
    };
    assert_eq!(rejected.name, "invalid_space_in_name");
    assert_eq!(rejected.reason.rule, HeaderRule::Character(' '));
    assert_eq!(rejected.reason.property, "/properties/value");
}

#[test]
fn a_call_mirrors_the_listed_annotations_and_omits_nulls() {
    let now = Instant::now();
    let mut http = stateless(now);
    http.request(now, Request::list_tools(None)).unwrap();
    let _ = round_trip(&mut http, now, annotated_tools());
    let arguments = json!({"region": " us-west1", "verbose": null, "priority": 42});
    http.request(now, Request::call_tool("valid_tool", arguments))
        .unwrap();
    let call = one_post(&mut http);
    assert_eq!(
        header(&call.headers, "mcp-param-region"),
        Some("=?base64?IHVzLXdlc3Qx?=")
    );
    assert_eq!(header(&call.headers, "mcp-param-priority"), Some("42"));
    assert_eq!(header(&call.headers, "mcp-param-verbose"), None);
}

/// A tool never listed carries no `Mcp-Param-*`; the server's -32020 has the tools listed
/// once and the call sent again with its headers, under the same id; a second -32020 is the
/// call's answer.
#[test]
fn a_header_mismatch_lists_the_tools_and_retries_the_call_once() {
    let now = Instant::now();
    let mut http = stateless(now);
    let arguments = json!({"region": "eu"});
    let id = http
        .request(now, Request::call_tool("valid_tool", arguments))
        .unwrap();
    let call = one_post(&mut http);
    assert!(!call.headers.iter().any(|(k, _)| k.starts_with("Mcp-Param")));
    refuse(&mut http, now, &call, 400, &error_body(-32020, Value::Null));
    assert!(events(&mut http).is_empty(), "the call is still on");
    let list = one_post(&mut http);
    assert_eq!(method(&list), "tools/list");
    answer(
        &mut http,
        now,
        &list,
        None,
        result_for(&list, annotated_tools()),
    );
    assert!(
        events(&mut http).is_empty(),
        "our own listing is not the caller's"
    );
    let again = one_post(&mut http);
    assert_eq!(again.body, call.body);
    assert_eq!(header(&again.headers, "mcp-param-region"), Some("eu"));
    refuse(
        &mut http,
        now,
        &again,
        400,
        &error_body(-32020, Value::Null),
    );
    let (got, result) = one_response(&mut http);
    let Err(RequestError::Remote(error)) = result else {
        panic!("the call fails: {result:?}");
    };
    assert_eq!((got, error.code), (id, RpcError::HEADER_MISMATCH));
    assert!(exchanges(&mut http).is_empty(), "no third try");
}

/// Any JSON-RPC error in a refusal answers its request, typed, instead of a bare HTTP error.
#[test]
fn an_error_inside_a_refusal_fails_the_request_with_it() {
    let now = Instant::now();
    let mut http = stateless(now);
    for (status, code) in [(400, -32602), (404, -32601), (400, -32021)] {
        let id = http.request(now, Request::read_resource("x:/y")).unwrap();
        let post = one_post(&mut http);
        refuse(
            &mut http,
            now,
            &post,
            status,
            &error_body(code, Value::Null),
        );
        let (got, result) = one_response(&mut http);
        let Err(RequestError::Remote(error)) = result else {
            panic!("{status} {code}: {result:?}");
        };
        assert_eq!((got, error.code), (id, code));
    }
}

/// No `Last-Event-ID` in this era: a stream that breaks fails its request at once.
#[test]
fn a_broken_stream_fails_its_request_instead_of_resuming() {
    let now = Instant::now();
    let mut http = stateless(now);
    let id = http.request(now, Request::list_prompts(None)).unwrap();
    let post = one_post(&mut http);
    http.handle_reply(now, post.id, Reply::Head { session: None });
    let ended = Reply::StreamEnded {
        why: "the event stream ended".into(),
        last_event_id: Some("7".into()),
        retry: Some(Duration::from_millis(10)),
    };
    http.handle_reply(now, post.id, ended);
    let (got, result) = one_response(&mut http);
    let Err(RequestError::Transport(why)) = result else {
        panic!("the request fails: {result:?}");
    };
    assert_eq!(got, id);
    assert!(
        why.contains("the event stream ended before the answer"),
        "{why}"
    );
    assert!(
        exchanges(&mut http)
            .iter()
            .all(|e| !matches!(e, Exchange::Get(_)))
    );
}

/// A JSON body answering `input_required` answered its POST: the body's end fails nothing,
/// the input request reaches the caller, and the answer goes again in a POST of its own.
#[test]
fn an_input_required_body_answers_its_post_and_the_request_goes_again() {
    input_required_then(Reply::BodyEnded("HTTP 200 OK with a JSON body".into()));
}

/// The same answer as an event stream (rmcp streams every answer): the stream's end after it
/// fails nothing either.
#[test]
fn an_input_required_event_answers_its_post_and_the_request_goes_again() {
    input_required_then(Reply::StreamEnded {
        why: "the event stream ended".into(),
        last_event_id: None,
        retry: None,
    });
}

/// An `input_required` answer to a POST, then `ended` (how its body ended), then the round.
fn input_required_then(ended: Reply) {
    let now = Instant::now();
    let mut config = Config::default();
    config.capabilities.elicitation = true;
    let mut http = HttpConnection::new(now, config, URL.to_owned(), HttpTransport::Auto);
    let probe = one_post(&mut http);
    answer(&mut http, now, &probe, None, discover_answer(&probe));
    assert!(matches!(events(&mut http).as_slice(), [Event::Ready(_)]));
    let id = http
        .request(now, Request::call_tool("confirm", json!({})))
        .unwrap();
    let post = one_post(&mut http);
    let elicit = json!({"method": "elicitation/create", "params": {"message": "ok?",
        "requestedSchema": {"type": "object", "properties": {}}}});
    let round = json!({"resultType": "input_required", "requestState": "s1",
        "inputRequests": {"confirm": elicit}});
    http.handle_reply(now, post.id, Reply::Head { session: None });
    let message = result_for(&post, round).to_string().into_bytes();
    http.handle_reply(now, post.id, Reply::Message(message));
    http.handle_reply(now, post.id, ended);
    done(&mut http, now, post.id);
    let asked = match events(&mut http).as_slice() {
        [Event::ServerRequest(asked)] => asked.clone(),
        other => panic!("expected the input request alone, got {other:?}"),
    };
    assert_eq!(asked.request, Some(id));
    let content = json!({"action": "accept", "content": {}});
    assert!(http.respond(now, asked.id, Ok(content)));
    let again = one_post(&mut http);
    assert_ne!(body(&again)["id"], body(&post)["id"]);
    assert_eq!(body(&again)["params"]["requestState"], "s1");
    answer(
        &mut http,
        now,
        &again,
        None,
        result_for(&again, json!({"content": []})),
    );
    assert_eq!(one_response(&mut http), (id, Ok(json!({"content": []}))));
}

/// Cancelling stops the request's exchange; no `notifications/cancelled` is POSTed.
#[test]
fn cancelling_closes_the_stream_without_a_notification() {
    let now = Instant::now();
    let mut http = stateless(now);
    let id = http
        .request(now, Request::call_tool("slow", json!({})))
        .unwrap();
    let post = one_post(&mut http);
    assert!(http.cancel(now, id));
    assert_eq!(exchanges(&mut http), [Exchange::Cancel(post.id)]);
    assert_eq!(one_response(&mut http), (id, Err(RequestError::Cancelled)));
}

/// `subscriptions/listen` is answered by a long-lived stream: its POST has no time limit, and
/// the stream's end fails it (the host listens again).
#[test]
fn listen_has_no_time_limit_and_its_streams_end_fails_it() {
    let now = Instant::now();
    let mut http = stateless(now);
    let params = json!({"notifications": {"toolsListChanged": true}});
    let listen = Request::new("subscriptions/listen", Some(params));
    let id = http.request(now, listen).unwrap();
    let post = one_post(&mut http);
    assert_eq!(
        header(&post.headers, "mcp-method"),
        Some("subscriptions/listen")
    );
    assert_eq!((post.answer, post.timeout), (Answer::InResponse, None));
    http.handle_reply(now, post.id, Reply::Head { session: None });
    let ended = Reply::StreamEnded {
        why: "the event stream ended".into(),
        last_event_id: None,
        retry: None,
    };
    http.handle_reply(now, post.id, ended);
    let failed = events(&mut http);
    assert!(
        matches!(failed.as_slice(), [Event::Response { id: got, result: Err(_) }] if *got == id)
    );
}
