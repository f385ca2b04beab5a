//! [`HttpConnection`] driven without sockets: each test plays the server's side of the HTTP
//! exchanges the machine asks for.

use std::time::{Duration, Instant};

use crate::peer::handshake_config;
use mcp_proto::{
    Answer, CloseReason, Event, Exchange, ExchangeId, Get, HttpConnection, HttpTransport, Post,
    Reply, Request, RequestError,
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

    let id = http
        .connection_mut()
        .request(now, Request::list_tools(None))
        .unwrap();
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

    http.connection_mut().close();
    let _ = events(&mut http);
    let delete = http.session_end().unwrap();
    assert_eq!(header(&delete, "mcp-session-id"), Some("s1"));
    assert_eq!(http.session_end(), None, "ended once");
}

#[test]
fn nothing_overtakes_initialized_and_the_listener_opens_after_it() {
    let now = Instant::now();
    let (mut http, initialized) = handshake(now, "s1");
    http.connection_mut()
        .request(now, Request::list_tools(None))
        .unwrap();
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
    let id = http
        .connection_mut()
        .request(now, Request::list_tools(None))
        .unwrap();
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
        .connection_mut()
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
        .connection_mut()
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
        .connection_mut()
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
