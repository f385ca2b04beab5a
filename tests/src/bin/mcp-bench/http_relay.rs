//! The HTTP floor: a bare HTTP relay, the `serve --listen` analogue of the stdio relay
//! ([`crate::floor::relay`]). One process, one thread: hyper's HTTP/1.1 server on loopback
//! (keep-alive, through the same IO adapter as `serve --listen`) in front of the fixture's
//! pipes. A POSTed message is written to the fixture's stdin as a line; when it is a request,
//! the fixture's answer with the same id comes back as `application/json`. It understands
//! nothing else: no token, no session (one fixed id, so that hosts that want one get one), no
//! parsing (the id is found as text). Many exchanges may be open at once, as through
//! `serve --listen`: what any HTTP server in front of a stdio server adds on this machine, the
//! floor under what `serve --listen` adds, one call in flight or many.

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::path::Path;
use std::process::{Command, Stdio};
use std::rc::Rc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use smol::channel::Sender;
use smol::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use smol::{Async, LocalExecutor};

/// What the relay prints on stderr before its URL, as `serve --listen` does.
pub(crate) const LISTENING: &str = "mcp-bench http relay: listening on ";

/// The fixture's stdin, one line at a time, and who waits for the answer to each request id.
struct Fixture {
    stdin: smol::lock::Mutex<Async<std::process::ChildStdin>>,
    waiting: RefCell<HashMap<Vec<u8>, Sender<Vec<u8>>>>,
}

/// Runs the relay in front of the fixture (run with `args`) until killed.
pub(crate) fn relay(fixture: &Path, args: &[String]) {
    let mut child = Command::new(fixture)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pipes = Rc::new(Fixture {
        stdin: smol::lock::Mutex::new(Async::new(child.stdin.take().unwrap()).unwrap()),
        waiting: RefCell::default(),
    });
    let stdout = BufReader::new(Async::new(child.stdout.take().unwrap()).unwrap());
    let executor = Rc::new(LocalExecutor::new());
    executor.spawn(answers(stdout, pipes.clone())).detach();
    let listener = smol::block_on(smol::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    eprintln!("{LISTENING}http://{}/mcp", listener.local_addr().unwrap());
    // A task of its own, as in `serve --listen`: the future `run` is given is polled on every
    // wake-up of any task, and an `accept` would be tried each time.
    let connections = executor.clone();
    let accepting = executor.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let pipes = pipes.clone();
            let service = hyper::service::service_fn(move |request| {
                let pipes = pipes.clone();
                async move { Ok::<_, Infallible>(exchange(&pipes, request).await) }
            });
            let io = mcp_smol::HyperIo::new(mcp_smol::ReadWhenReady::new(stream));
            let connection =
                hyper::server::conn::http1::Builder::new().serve_connection(io, service);
            connections.spawn(connection).detach();
        }
    });
    smol::block_on(executor.run(accepting));
    let _ = child.kill();
    let _ = child.wait();
}

/// Reads the fixture's lines and hands each answer to whoever waits for its id; the
/// fixture's own messages (requests, notifications) are dropped.
async fn answers(mut stdout: BufReader<Async<std::process::ChildStdout>>, pipes: Rc<Fixture>) {
    loop {
        let mut line = Vec::new();
        match stdout.read_until(b'\n', &mut line).await {
            Ok(1..) if !contains(&line, b"\"method\":") => {}
            Ok(1..) => continue,
            _ => break,
        }
        line.pop_if(|end| *end == b'\n');
        let waiter = id(&line).and_then(|id| pipes.waiting.borrow_mut().remove(id));
        if let Some(waiter) = waiter {
            let _ = waiter.try_send(line);
        }
    }
    // The fixture ended: every open exchange gets a 502.
    pipes.waiting.borrow_mut().clear();
}

/// One POST: the body to the fixture, and for a request its answer back.
async fn exchange(pipes: &Fixture, request: Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::POST {
        return respond(StatusCode::METHOD_NOT_ALLOWED, Bytes::new());
    }
    let Ok(body) = request.into_body().collect().await else {
        return respond(StatusCode::BAD_REQUEST, Bytes::new());
    };
    let mut line = body.to_bytes().to_vec();
    // A request has an id and a method; a notification or an answer has no answer.
    let answer = match id(&line) {
        Some(id) if contains(&line, b"\"method\":") => {
            let (to, answer) = smol::channel::bounded(1);
            pipes.waiting.borrow_mut().insert(id.to_vec(), to);
            Some(answer)
        }
        _ => None,
    };
    line.push(b'\n');
    if pipes.stdin.lock().await.write_all(&line).await.is_err() {
        return respond(StatusCode::BAD_GATEWAY, Bytes::new());
    }
    let Some(answer) = answer else {
        return respond(StatusCode::ACCEPTED, Bytes::new());
    };
    let Ok(answer) = answer.recv().await else {
        return respond(StatusCode::BAD_GATEWAY, Bytes::new());
    };
    let mut response = respond(StatusCode::OK, Bytes::from(answer));
    let headers = response.headers_mut();
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.insert("mcp-session-id", "relay".parse().unwrap());
    response
}

/// The text of a message's first `"id":` value, as serde_json writes it: the client writes
/// the id before the params, and the fixture's answers (keys in order) before the result.
fn id(message: &[u8]) -> Option<&[u8]> {
    const KEY: &[u8] = b"\"id\":";
    let start = message
        .windows(KEY.len())
        .position(|window| window == KEY)?
        + KEY.len();
    let rest = &message[start..];
    let end = rest.iter().position(|&byte| byte == b',' || byte == b'}')?;
    Some(&rest[..end])
}

fn respond(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
}

fn contains(text: &[u8], part: &[u8]) -> bool {
    text.windows(part.len()).any(|window| window == part)
}

/// For profilers (`mcp-bench --child http-client-profile CALLS`): `calls` sequential calls
/// from the client over HTTP through a bare HTTP relay, which runs in a process of its own,
/// so that a profile of this one is the client's alone.
pub(crate) fn client_profile(calls: usize) {
    let me = std::env::current_exe().unwrap();
    let mut relaying = Command::new(&me)
        .args(["--child", "http-relay", "good"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = crate::gateway::listening_url(&mut relaying, LISTENING);
    smol::block_on(async {
        let mut options = mcp_smol::Options::default();
        options.core.protocol = mcp_smol::proto::Protocol::Revision("2025-11-25");
        let client = mcp_smol::connect(mcp_smol::HttpServer::new(url), options)
            .await
            .unwrap();
        let switches = context_switches();
        for i in 0..calls {
            let text = format!("call {i}");
            let result = client.call_tool("echo", serde_json::json!({ "text": text }));
            assert!(!result.await.unwrap().is_error);
        }
        let switches = (context_switches() - switches) as f64 / calls as f64;
        println!("the client's threads slept {switches:.2} times per call");
        client.close().await;
    });
    let _ = relaying.kill();
    let _ = relaying.wait();
}

/// How many times this process's threads have slept so far (voluntary context switches).
fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    (tasks.filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("status")).ok()))
        .filter_map(|status| {
            let line = status
                .lines()
                .find(|line| line.starts_with("voluntary_ctxt_switches"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum()
}
