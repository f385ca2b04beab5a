//! `mcp-http-fixture MODE [--cert PEM --key PEM] [--log FILE] [--port N]`: a small Streamable
//! HTTP MCP server on 127.0.0.1 (port N, else a free one; printed as `PORT <n>` on stdout, so a
//! test can stop it and start it again where it was) that behaves well or
//! misbehaves on demand, for the end-to-end suites. Plain std sockets, one thread per
//! connection, one exchange per connection ([`mcp_tests::http`]); with `--cert` and `--key`,
//! HTTPS.
//!
//! Modes:
//! - `good`: tools `echo` (`message`) and `big` (`bytes`: a text of that many bytes, `x`s or,
//!   with `varied: true`, every kind of character JSON escapes), answered as JSON; `Mcp-Session-Id` from `initialize`; 202 for notifications; 405 for GET; DELETE
//!   ends the session.
//! - `sse`: `good`, but `tools/call` is answered as an event stream: a progress notification
//!   (when the call has a progress token), then the answer.
//! - `session-404`: `good`, but the server forgets the session after answering `tools/list`
//!   once, so the next request with it gets 404.
//! - `python-404`: `session-404`, but as servers built on the Python SDK: a session takes
//!   `notifications/initialized` in slowly (300 ms), and a request that overtakes it gets a
//!   JSON-RPC error.
//! - `session-400`: `good`, but a session it does not know (one from before a restart) gets
//!   400 with a JSON-RPC error "Bad Request: No valid session ID provided", as
//!   server-everything and the TypeScript SDK's samples answer.
//! - `call-400`: `good`, but `tools/call` is always answered as `session-400` answers an
//!   unknown session.
//! - `no-sessions`: `session-400`, but no session is kept: every request that carries one gets
//!   that 400, `notifications/initialized` included.
//! - `html`: every POST is answered `200` with an HTML page.
//! - `wrong-type`: every POST is answered `200` with `text/plain`.
//! - `redirect-loop`: every request is answered `307` to another path of the same server.
//! - `fail-call`: `good`, but `tools/call` is answered `500` with a short body.
//! - `truncated`: `good`, but `tools/call` is answered by an event stream that sends a
//!   progress notification and ends before the answer, with no event id.
//! - `resume`: `good`, but `tools/call` is answered by an event stream with `retry: 50` and
//!   event id `e1` that ends before the answer; a GET with `Last-Event-ID: e1` gets the answer.
//! - `resume-loop`: `resume`, but every resuming GET gets a stream that ends with nothing new.
//! - `unauthorized`: every request is answered `401` with a `WWW-Authenticate` challenge.
//! - `token`: `good` for requests with `Authorization: Bearer good` or `Bearer wide`, `401`
//!   for the rest; a call of the tool `secret` without `Bearer wide` is answered `403` with
//!   `insufficient_scope`.
//! - `push`: `good`, but a GET gets an event stream with `notifications/tools/list_changed`,
//!   sent once a `tools/list` has been answered.
//! - `not-jsonrpc`: `good`, but `tools/call` is answered with JSON that is not JSON-RPC.
//! - `call-404`: `good`, but `tools/call` is always answered `404`.
//! - `hang`: `good`, but `tools/call` gets an event stream that never sends anything.
//! - `moved`: `good` at `/moved/mcp`; `/mcp` answers `308` to there.
//! - `legacy-foreign`: an HTTP+SSE server whose event stream names a message endpoint on
//!   another origin; POSTs get `405`.
//! - `not-found`: every request is answered `404` with an HTML body.
//! - `legacy-dies`: an HTTP+SSE server behind a web framework: a POST to `/mcp` (the Streamable
//!   HTTP probe), and any request to another path, gets a 404 HTML page of 2 KB; a GET of
//!   `/mcp` gets the event stream, which names
//!   `/messages`, where POSTs get 202 and their answers come on the stream. `tools/call` ends
//!   the stream before its answer, as a server dying mid-call does.
//! - `legacy`: `legacy-dies`, but `tools/call` is answered on the stream, and the tools are
//!   `echo` and `big` as in `good`.
//! - `legacy-400`: `good`, but a POST without `Mcp-Session-Id` whose method is not `initialize`
//!   (a stateless client's first request) gets 400 with a JSON-RPC error -32603 and id null,
//!   as real handshake-era servers answer it.
//! - `stateless`: revision 2026-07-28 only: no sessions (`Mcp-Session-Id` ignored, none
//!   minted), GET and DELETE get 405, and every POST is checked: `MCP-Protocol-Version` present
//!   (400, -32020), `Mcp-Method` equal to the body's method (-32020), both `_meta` fields
//!   present (400, -32602), the header's revision equal to `_meta`'s (-32020) and spoken (400,
//!   -32022 with `supported`), `Mcp-Name` equal to the tool or prompt name or resource URI
//!   (after decoding `=?base64?...?=`; -32020), and the `Mcp-Param-*` headers of the called
//!   tool's `x-mcp-header` arguments (-32020); an unknown method gets 404 with -32601; errors
//!   to `initialize` name the revision. `server/discover`; tools `echo` and `big` as in
//!   `good`, `region` (`region` mirrored into `Mcp-Param-Region`, `query`), `weigh` (an
//!   invalid annotation: `x-mcp-header` on a `number`, so a client leaves it out), `ask` as on
//!   stdio (`mcp-fixture`), `change` (announces a changed tool list); `subscriptions/listen`
//!   gets an event stream held open: the acknowledgement, then a tagged
//!   `notifications/tools/list_changed` after each `change`, and a keep-alive comment each
//!   second. Results carry `resultType`, the server's identity, and for lists `ttlMs` and
//!   `cacheScope`.
//! - `stateless-sse`: `stateless`, but `tools/call` is answered as an event stream of one
//!   event.
//! - `stateless-slow-refusal`: `stateless`, but a refusal's JSON-RPC error carries a
//!   `data.detail` of 1 KiB and the answer goes out 100 bytes at a time, each piece flushed
//!   after a pause, as a slow proxy delivers it.
//! - `stateless-old-version`: `stateless`, but speaking only `DRAFT-2026-v1`, the draft
//!   revision of servers built on pre-release SDKs: 2026-07-28, the only stateless revision a
//!   client speaks today, gets 400 -32022 with `supported: ["DRAFT-2026-v1"]` on every request,
//!   `server/discover` included, so a client must report that no revision is shared, never
//!   retry for ever and never fall back to `initialize`.
//!
//! `--log FILE` appends one line per request: `METHOD PATH rpc=<method> session=<id>
//! last-event-id=<id>` (`-` for none), then every other `Mcp-*` header the request carried,
//! lowercased, as ` mcp-method=tools/call` (values as sent).
//!
//! `mcp-http-fixture probe URL [--transport auto|streamable|sse]`: the client side, in a
//! process of its own so a test can set `SSL_CERT_FILE` for it: connects with
//! `mcp_smol::connect` with an `HttpServer`, lists the tools, prints `TOOLS <names>` and exits 0, or prints
//! `ERROR <message>` and exits 3.

// A poisoned lock here means the fixture itself crashed; panicking further is the right answer.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use mcp_tests::http::{self, Request, Response};
use mcp_tests::stateless;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

struct State {
    mode: String,
    sessions: Mutex<HashSet<String>>,
    next: AtomicU64,
    log: Option<Mutex<std::fs::File>>,
    /// Sessions whose `notifications/initialized` has been taken in (mode `python-404`).
    initialized: Mutex<HashSet<String>>,
    /// A `tools/list` has been answered (mode `push` waits for it).
    listed: AtomicBool,
    /// Mode `legacy-dies`: the open event stream's queue; `None` in it ends the stream.
    legacy: Mutex<Option<std::sync::mpsc::Sender<Option<String>>>>,
    /// Modes `stateless*`: how many times the tool `change` has run, and the listen streams
    /// waiting for it.
    changes: Mutex<u64>,
    changed: Condvar,
}

const NAME: &str = "mcp-http-fixture";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| {
        (args.iter().position(|arg| arg == name)).and_then(|i| args.get(i + 1).cloned())
    };
    let mode = args.first().cloned().unwrap_or_else(|| "good".to_owned());
    if mode == "probe" {
        let url = args.get(1).cloned().unwrap_or_default();
        std::process::exit(probe(url, option("--transport")));
    }
    let tls = match (option("--cert"), option("--key")) {
        (Some(cert), Some(key)) => Some(tls_config(&cert, &key)),
        _ => None,
    };
    let log = option("--log").map(|path| {
        let file = (std::fs::OpenOptions::new().create(true).append(true))
            .open(path)
            .unwrap();
        Mutex::new(file)
    });
    let state = State {
        mode,
        sessions: Mutex::new(HashSet::new()),
        initialized: Mutex::new(HashSet::new()),
        next: AtomicU64::new(1),
        log,
        listed: AtomicBool::new(false),
        legacy: Mutex::new(None),
        changes: Mutex::new(0),
        changed: Condvar::new(),
    };
    let port: u16 = option("--port").map_or(0, |port| port.parse().unwrap());
    let listener = http::listen(port).unwrap();
    http::serve_each(listener, move |stream| {
        let _ = match &tls {
            Some(config) => {
                let Ok(connection) = rustls::ServerConnection::new(config.clone()) else {
                    return;
                };
                let mut stream = rustls::StreamOwned::new(connection, stream);
                let served = serve(&state, &mut stream);
                // A clean TLS end, so a body that runs to the end of the connection
                // is whole.
                stream.conn.send_close_notify();
                served.and_then(|()| stream.flush())
            }
            None => serve(&state, &mut { stream }),
        };
    });
}

fn tls_config(cert: &str, key: &str) -> Arc<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    Arc::new(config)
}

/// What to send back.
enum Reply {
    Full(Response),
    /// An event stream of these events, then the end of the connection.
    Events(Vec<String>),
    /// An event stream that never sends anything, held until the client goes away.
    Hang,
    /// The HTTP+SSE event stream of mode `legacy-dies`.
    Legacy,
    /// A whole answer written in pieces (mode `stateless-slow-refusal`).
    Pieces(Response),
    /// A `subscriptions/listen` stream (modes `stateless*`): its request's id, and whether
    /// it asked for `toolsListChanged`.
    Listen {
        id: Value,
        tools: bool,
    },
}

fn full(status: &'static str, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
    Reply::Full(Response::new(status, content_type, body))
}

fn json_reply(value: &Value) -> Reply {
    full("200 OK", "application/json", value.to_string())
}

fn serve(state: &State, stream: &mut (impl Read + Write)) -> std::io::Result<()> {
    let Some(request) = http::read_request(stream) else {
        return Ok(());
    };
    match answer(state, &request) {
        Reply::Full(response) => response.write_to(stream),
        Reply::Pieces(response) => {
            let mut whole = Vec::new();
            response.write_to(&mut whole)?;
            for piece in whole.chunks(100) {
                stream.write_all(piece)?;
                stream.flush()?;
                thread::sleep(std::time::Duration::from_millis(20));
            }
            Ok(())
        }
        Reply::Events(events) => {
            http::start_events(stream)?;
            for event in events {
                http::write_event(stream, &event)?;
            }
            Ok(())
        }
        Reply::Legacy => {
            let (sender, queue) = std::sync::mpsc::channel();
            *state.legacy.lock().unwrap() = Some(sender);
            http::start_events(stream)?;
            http::write_event(stream, "event: endpoint\ndata: /messages\n\n")?;
            while let Ok(Some(message)) = queue.recv() {
                http::write_event(stream, &format!("event: message\ndata: {message}\n\n"))?;
            }
            Ok(())
        }
        Reply::Listen { id, tools } => {
            // Counted before the acknowledgement, so a change made once it is seen is told.
            let mut seen = *state.changes.lock().unwrap();
            http::start_events(stream)?;
            let ack = stateless::acknowledge(
                &id,
                &json!({"notifications": {"toolsListChanged": tools}}),
                &["toolsListChanged"],
            );
            http::write_event(stream, &format!("data: {ack}\n\n"))?;
            // Until a write fails: the keep-alive finds a client that has gone within a second.
            loop {
                let changes = state.changes.lock().unwrap();
                let (changes, _) = (state.changed)
                    .wait_timeout_while(changes, std::time::Duration::from_secs(1), |n| *n == seen)
                    .unwrap();
                let now = *changes;
                drop(changes);
                if now != seen && tools {
                    let note = stateless::on_stream(&id, "notifications/tools/list_changed");
                    http::write_event(stream, &format!("data: {note}\n\n"))?;
                } else {
                    http::write_event(stream, ":\n\n")?;
                }
                seen = now;
            }
        }
        Reply::Hang => {
            http::start_events(stream)?;
            // Until the client closes its end: then the read sees the end of the stream.
            let mut rest = Vec::new();
            let _ = stream.read_to_end(&mut rest);
            Ok(())
        }
    }
}

fn answer(state: &State, request: &Request) -> Reply {
    let message: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let rpc = message["method"].as_str().unwrap_or("-").to_owned();
    let session = request.header("mcp-session-id").map(str::to_owned);
    if let Some(log) = &state.log {
        let mut line = format!(
            "{} {} rpc={rpc} session={} last-event-id={}",
            request.method,
            request.target,
            session.as_deref().unwrap_or("-"),
            request.header("last-event-id").unwrap_or("-"),
        );
        for (name, value) in &request.headers {
            let name = name.to_ascii_lowercase();
            if name.starts_with("mcp-") && name != "mcp-session-id" {
                line.push_str(&format!(" {name}={value}"));
            }
        }
        line.push('\n');
        log.lock().unwrap().write_all(line.as_bytes()).unwrap();
    }
    let mode = state.mode.as_str();
    match mode {
        "html" if request.method == "POST" => {
            let page = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Please sign in</body></html>";
            return full("200 OK", "text/html; charset=utf-8", page);
        }
        "wrong-type" if request.method == "POST" => {
            return full("200 OK", "text/plain", "hello from a plain web server");
        }
        "redirect-loop" => {
            let n: u64 = (request.target.trim_start_matches("/loop-").parse()).unwrap_or(0);
            return Reply::Full(Response::empty(
                "307 Temporary Redirect",
                vec![("Location".to_owned(), format!("/loop-{}", n + 1))],
            ));
        }
        "moved" if request.target == "/mcp" => {
            return Reply::Full(Response::empty(
                "308 Permanent Redirect",
                vec![("Location".to_owned(), "/moved/mcp".to_owned())],
            ));
        }
        "legacy-foreign" if request.method == "GET" => {
            let events = vec!["event: endpoint\ndata: http://198.51.100.7/messages\n\n".to_owned()];
            return Reply::Events(events);
        }
        "legacy-foreign" => return full("405 Method Not Allowed", "text/plain", ""),
        "not-found" => return full("404 Not Found", "text/html", "<pre>Cannot find it</pre>"),
        "legacy-dies" | "legacy" => return legacy(state, request, &message),
        "stateless" => return modern(state, request, &message, &[stateless::REVISION]),
        "stateless-sse" => {
            let reply = modern(state, request, &message, &[stateless::REVISION]);
            return match reply {
                Reply::Full(response) if rpc == "tools/call" && response.status == "200 OK" => {
                    let body = String::from_utf8(response.body).unwrap();
                    Reply::Events(vec![format!("data: {body}\n\n")])
                }
                reply => reply,
            };
        }
        "stateless-slow-refusal" => {
            return slow_refusal(modern(state, request, &message, &[stateless::REVISION]));
        }
        "stateless-old-version" => return modern(state, request, &message, &["DRAFT-2026-v1"]),
        "legacy-400" if request.method == "POST" && session.is_none() && rpc != "initialize" => {
            let body = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error: server not initialized"}}"#;
            return full("400 Bad Request", "application/json", body);
        }
        "token"
            if !matches!(
                request.header("authorization"),
                Some("Bearer good" | "Bearer wide")
            ) =>
        {
            let challenge = r#"Bearer error="invalid_token""#;
            return Reply::Full(Response::empty(
                "401 Unauthorized",
                vec![("WWW-Authenticate".to_owned(), challenge.to_owned())],
            ));
        }
        "token"
            if message["params"]["name"] == "secret"
                && request.header("authorization") != Some("Bearer wide") =>
        {
            let challenge = r#"Bearer error="insufficient_scope", scope="secret""#;
            return Reply::Full(Response::empty(
                "403 Forbidden",
                vec![("WWW-Authenticate".to_owned(), challenge.to_owned())],
            ));
        }
        "unauthorized" => {
            let challenge = r#"Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource""#;
            return Reply::Full(Response {
                status: "401 Unauthorized",
                headers: vec![("WWW-Authenticate".to_owned(), challenge.to_owned())],
                body: b"unauthorized".to_vec(),
            });
        }
        _ => {}
    }
    match request.method.as_str() {
        "DELETE" => {
            if let Some(session) = &session {
                state.sessions.lock().unwrap().remove(session);
            }
            return full("200 OK", "text/plain", "");
        }
        "GET" if mode == "resume" && request.header("last-event-id") == Some("e1") => {
            // The answer the interrupted stream owed: the call's id is always the latest one.
            let id = state.next.load(Ordering::SeqCst);
            let answer = call_answer(
                &json!({"id": id, "params": {"name": "echo", "arguments": {"message": "resumed"}}}),
            );
            let events = vec![format!("id: e2\ndata: {answer}\n\n")];
            return Reply::Events(events);
        }
        "GET" if mode == "resume-loop" && request.header("last-event-id").is_some() => {
            let events = vec!["retry: 20\n\n".to_owned()];
            return Reply::Events(events);
        }
        "GET" if mode == "push" => {
            // Only once the client can be listening: after it has listed the tools.
            let waited = std::time::Instant::now();
            while !state.listed.load(Ordering::SeqCst) && waited.elapsed().as_secs() < 10 {
                thread::sleep(std::time::Duration::from_millis(10));
            }
            let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            let events = vec![format!("retry: 60000\ndata: {note}\n\n")];
            return Reply::Events(events);
        }
        "GET" => return full("405 Method Not Allowed", "text/plain", ""),
        _ => {}
    }
    if rpc == "initialize" {
        let session = format!("s{}", state.next.fetch_add(1, Ordering::SeqCst));
        if mode != "no-sessions" {
            state.sessions.lock().unwrap().insert(session.clone());
        }
        let version = message["params"]["protocolVersion"].clone();
        let result = json!({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mcp-http-fixture", "version": "1"},
        }});
        let mut response = Response::new("200 OK", "application/json", result.to_string());
        response
            .headers
            .push(("Mcp-Session-Id".to_owned(), session));
        return Reply::Full(response);
    }
    let known = session
        .as_ref()
        .is_some_and(|session| state.sessions.lock().unwrap().contains(session));
    if !known && matches!(mode, "session-400" | "no-sessions") {
        return no_valid_session();
    }
    if !known {
        return full(
            "404 Not Found",
            "application/json",
            r#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}"#,
        );
    }
    if mode == "python-404"
        && let Some(session) = &session
    {
        if rpc == "notifications/initialized" {
            thread::sleep(std::time::Duration::from_millis(300));
            state.initialized.lock().unwrap().insert(session.clone());
        } else if message.get("id").is_some()
            && !state.initialized.lock().unwrap().contains(session)
        {
            let refusal = json!({"code": -32602, "message": "Received request before initialization was complete"});
            return json_reply(&json!({"jsonrpc": "2.0", "id": message["id"], "error": refusal}));
        }
    }
    if message.get("id").is_none() {
        return full("202 Accepted", "text/plain", "");
    }
    if let Some(id) = message["id"].as_u64() {
        state.next.fetch_max(id, Ordering::SeqCst);
    }
    match (rpc.as_str(), mode) {
        ("tools/list", _) => {
            state.listed.store(true, Ordering::SeqCst);
            if matches!(mode, "session-404" | "python-404")
                && let Some(session) = &session
            {
                state.sessions.lock().unwrap().remove(session);
            }
            let tools = json!([
                {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
                {"name": "big", "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}}},
            ]);
            json_reply(&json!({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": tools}}))
        }
        ("tools/call", "fail-call") => full(
            "500 Internal Server Error",
            "text/plain",
            "boom: the tool crashed\n\tat line 1",
        ),
        ("tools/call", "hang") => Reply::Hang,
        ("tools/call", "call-400") => no_valid_session(),
        ("tools/call", "call-404") => full("404 Not Found", "text/plain", "no such thing"),
        ("tools/call", "not-jsonrpc") => full("200 OK", "application/json", r#"{"status":"ok"}"#),
        ("tools/call", "truncated") => Reply::Events(vec![progress(&message)]),
        ("tools/call", "resume-loop") => {
            Reply::Events(vec!["retry: 20\nid: e1\ndata: \n\n".to_owned()])
        }
        ("tools/call", "resume") => Reply::Events(vec![
            "retry: 50\nid: e1\ndata: \n\n".to_owned(),
            progress(&message),
        ]),
        ("tools/call", "sse") => Reply::Events(vec![
            progress(&message),
            format!("data: {}\n\n", call_answer(&message)),
        ]),
        ("tools/call", _) => json_reply(&call_answer(&message)),
        _ => json_reply(&json!({"jsonrpc": "2.0", "id": message["id"], "result": {}})),
    }
}

/// Modes `stateless*`: a server of the stateless era only, speaking the revisions `supported`.
fn modern(state: &State, request: &Request, message: &Value, supported: &[&str]) -> Reply {
    if request.method != "POST" {
        return full("405 Method Not Allowed", "text/plain", "");
    }
    if message.get("id").is_none() {
        return full("202 Accepted", "text/plain", "");
    }
    let method = message["method"].as_str().unwrap_or_default();
    let params = &message["params"];
    let refusal = |status: &'static str, error: Value| {
        let error = match method {
            "initialize" => stateless::name_revisions(error, supported),
            _ => error,
        };
        let body = json!({"jsonrpc": "2.0", "id": message["id"], "error": error});
        full(status, "application/json", body.to_string())
    };
    if let Err(error) = check_headers(request, method, params, supported) {
        return refusal("400 Bad Request", error);
    }
    let result = match method {
        "initialize" => {
            return refusal(
                "400 Bad Request",
                stateless::initialize_refusal(params, supported),
            );
        }
        "server/discover" => {
            let capabilities = json!({"tools": {"listChanged": true}});
            stateless::discover(capabilities, NAME, supported)
        }
        "tools/list" => stateless::cacheable(json!({"tools": modern_tools()}), NAME),
        "tools/call" => match modern_call(state, message) {
            Ok(result) => result,
            Err(error) => return refusal("400 Bad Request", error),
        },
        "subscriptions/listen" => {
            let tools = params["notifications"]["toolsListChanged"] == json!(true);
            return Reply::Listen {
                id: message["id"].clone(),
                tools,
            };
        }
        _ => {
            let error = stateless::error(
                stateless::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            );
            return refusal("404 Not Found", error);
        }
    };
    json_reply(&json!({"jsonrpc": "2.0", "id": message["id"], "result": result}))
}

/// Mode `stateless-slow-refusal`: a refusal (not 2xx) gains a long `data.detail` and goes
/// out in pieces.
fn slow_refusal(reply: Reply) -> Reply {
    match reply {
        Reply::Full(mut response) if !response.status.starts_with('2') => {
            if let Ok(mut body) = serde_json::from_slice::<Value>(&response.body) {
                body["error"]["data"] = json!({"detail": "x".repeat(1024)});
                response.body = body.to_string().into_bytes();
            }
            Reply::Pieces(response)
        }
        other => other,
    }
}

/// The tools of modes `stateless*`.
fn modern_tools() -> Value {
    json!([
        {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
        {"name": "big", "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}}},
        {"name": "region", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
        }}},
        {"name": "weigh", "description": "Its annotation is invalid (on a number): leave it out.",
         "inputSchema": {"type": "object", "properties": {
            "kilos": {"type": "number", "x-mcp-header": "Kilos"},
        }}},
        stateless::ask_tool(),
        {"name": "change", "description": "Changes the tool list.",
         "inputSchema": {"type": "object", "properties": {}}},
    ])
}

/// A `tools/call` in modes `stateless*`: the result, or the JSON-RPC error `ask` refuses with.
fn modern_call(state: &State, message: &Value) -> Result<Value, Value> {
    let params = &message["params"];
    let arguments = &params["arguments"];
    let text = match params["name"].as_str().unwrap_or_default() {
        "ask" => return stateless::ask(params, stateless::Ask::Once, NAME),
        "region" => format!(
            "{}: {}",
            arguments["region"].as_str().unwrap_or("-"),
            arguments["query"].as_str().unwrap_or_default()
        ),
        "weigh" => format!("{} kg", arguments["kilos"]),
        "change" => {
            *state.changes.lock().unwrap() += 1;
            state.changed.notify_all();
            "changed".to_owned()
        }
        "echo" | "big" => {
            return Ok(stateless::complete(
                call_answer(message)["result"].take(),
                NAME,
            ));
        }
        other => {
            let error =
                stateless::error(stateless::INVALID_PARAMS, format!("Unknown tool: {other}"));
            return Err(error);
        }
    };
    Ok(stateless::complete(
        json!({"content": [{"type": "text", "text": text}]}),
        NAME,
    ))
}

/// The checks a stateless-era server makes of every POST, in this order: the headers that
/// route it, the `_meta` fields, the revision, then the headers that mirror the body.
fn check_headers(
    request: &Request,
    method: &str,
    params: &Value,
    supported: &[&str],
) -> Result<(), Value> {
    let mismatch = |text: String| Err(stateless::error(stateless::HEADER_MISMATCH, text));
    let Some(version) = request.header("mcp-protocol-version") else {
        return mismatch("Missing MCP-Protocol-Version header".to_owned());
    };
    match request.header("mcp-method") {
        None => return mismatch("Missing Mcp-Method header".to_owned()),
        Some(header) if header != method => {
            return mismatch(format!(
                "Header mismatch: Mcp-Method header value '{header}' does not match body value '{method}'"
            ));
        }
        Some(_) => {}
    }
    let meta = stateless::required_meta(params)?;
    if version != meta {
        return mismatch(format!(
            "Header mismatch: MCP-Protocol-Version header value '{version}' does not match body value '{meta}'"
        ));
    }
    stateless::check_meta(params, supported)?;
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" => params["uri"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        compare_header(request, "Mcp-Name", Some(name.to_owned()))?;
    }
    if method == "tools/call" {
        let tools = modern_tools();
        let tool =
            (tools.as_array().into_iter().flatten()).find(|tool| tool["name"] == params["name"]);
        let properties = tool.and_then(|tool| tool["inputSchema"]["properties"].as_object());
        for (key, schema) in properties.into_iter().flatten() {
            let (Some(header), Some(kind)) =
                (schema["x-mcp-header"].as_str(), schema["type"].as_str())
            else {
                continue;
            };
            // An annotation on anything but a primitive makes the tool invalid: not checked.
            if !matches!(kind, "string" | "integer" | "boolean") {
                continue;
            }
            let value = match &params["arguments"][key] {
                Value::String(text) => Some(text.clone()),
                Value::Null => None,
                other => Some(other.to_string()),
            };
            compare_header(request, &format!("Mcp-Param-{header}"), value)?;
        }
    }
    Ok(())
}

/// Header `name`, decoded, must be there and equal `body` when `body` is, and absent when not.
fn compare_header(request: &Request, name: &str, body: Option<String>) -> Result<(), Value> {
    let header = request.header(name);
    let decoded = header.map(http::decode_header_value);
    let text = match (&decoded, &body) {
        (Some(Some(header)), Some(body)) if header == body => return Ok(()),
        (None, None) => return Ok(()),
        (None, Some(_)) => format!("Missing {name} header"),
        (Some(None), _) => format!("Header {name} has a broken base64 value"),
        (Some(Some(header)), Some(body)) => format!(
            "Header mismatch: {name} header value '{header}' does not match body value '{body}'"
        ),
        (Some(Some(header)), None) => {
            format!("Header mismatch: {name} header value '{header}' but no such value in the body")
        }
    };
    Err(stateless::error(stateless::HEADER_MISMATCH, text))
}

/// Mode `legacy-dies`: an HTTP+SSE server that dies in the middle of a call.
fn legacy(state: &State, request: &Request, message: &Value) -> Reply {
    match (request.method.as_str(), request.target.as_str()) {
        ("GET", "/mcp") => return Reply::Legacy,
        ("POST", "/messages") => {}
        _ => {
            let line = "<p>Cannot find this; the page goes on about it at length.</p>\n";
            let page = format!(
                "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<title>Error</title>\n</head>\n<body>\n{}</body>\n</html>\n",
                line.repeat(30)
            );
            return full("404 Not Found", "text/html; charset=utf-8", page);
        }
    }
    let result = match message["method"].as_str() {
        Some("initialize") => Some(json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mcp-http-fixture", "version": "1"},
        })),
        Some("tools/list") if state.mode == "legacy" => Some(json!({"tools": [
            {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
            {"name": "big", "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}}},
        ]})),
        Some("tools/list") => Some(json!({"tools": [
            {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
        ]})),
        _ => None,
    };
    let queue = state.legacy.lock().unwrap().clone();
    if let Some(queue) = queue {
        let answer = match (result, message["method"].as_str()) {
            (Some(result), _) => {
                Some(json!({"jsonrpc": "2.0", "id": message["id"], "result": result}).to_string())
            }
            (None, Some("tools/call")) if state.mode == "legacy" => {
                Some(call_answer(message).to_string())
            }
            // The server dies: its stream ends, the call unanswered.
            (None, Some("tools/call")) => None,
            (None, _) if message.get("id").is_none() => {
                return full("202 Accepted", "text/plain", "");
            }
            (None, _) => {
                Some(json!({"jsonrpc": "2.0", "id": message["id"], "result": {}}).to_string())
            }
        };
        let _ = queue.send(answer);
    }
    full("202 Accepted", "text/plain", "")
}

/// What servers built on the TypeScript SDK answer a session they do not know.
fn no_valid_session() -> Reply {
    full(
        "400 Bad Request",
        "application/json",
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#,
    )
}

fn progress(message: &Value) -> String {
    let token = &message["params"]["_meta"]["progressToken"];
    let token = if token.is_null() {
        json!("none")
    } else {
        token.clone()
    };
    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": token, "progress": 1, "total": 2}});
    format!("data: {note}\n\n")
}

fn call_answer(message: &Value) -> Value {
    let arguments = &message["params"]["arguments"];
    let text = match message["params"]["name"].as_str() {
        Some("big") => {
            let bytes = arguments["bytes"].as_u64().unwrap_or(1024) as usize;
            match arguments["varied"].as_bool() {
                Some(true) => mcp_tests::varied_text(bytes),
                _ => "x".repeat(bytes),
            }
        }
        _ => arguments["message"].as_str().unwrap_or_default().to_owned(),
    };
    json!({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": text}]}})
}

fn probe(url: String, transport: Option<String>) -> i32 {
    let transport = match transport.as_deref() {
        Some("sse") => mcp_smol::HttpTransport::Sse,
        Some("streamable") => mcp_smol::HttpTransport::Streamable,
        _ => mcp_smol::HttpTransport::Auto,
    };
    let server = mcp_smol::HttpServer {
        transport,
        ..mcp_smol::HttpServer::new(url)
    };
    let outcome = smol::block_on(async {
        let client = mcp_smol::connect(server, mcp_smol::Options::default()).await?;
        let tools = client.list_tools().await;
        client.close().await;
        tools
    });
    match outcome {
        Ok(tools) => {
            let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
            println!("TOOLS {}", names.join(" "));
            0
        }
        Err(error) => {
            println!("ERROR {error}");
            3
        }
    }
}
