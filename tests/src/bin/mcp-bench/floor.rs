//! The raw-pipe floor: the same JSON lines written to the same fixture server and the answers
//! read with blocking pipes (or the bare reactor) and no protocol library.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::json;

use super::{Bins, IN_FLIGHT, PIPELINED_CALLS, SEQUENTIAL_CALLS, Sequential, eras, process_cpu};

/// The floor's hand-written handshake: the request, then the notification after its answer.
pub(crate) const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"floor","version":"0"}}}"#;
pub(crate) const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The fixture server with piped stdin and stdout, its stderr discarded; with `stateless`, in
/// that era.
pub(crate) fn spawn_fixture(fixture: &Path, stateless: bool) -> Child {
    let era: &[&str] = if stateless {
        &["--era", "stateless"]
    } else {
        &[]
    };
    Command::new(fixture)
        .arg("good")
        .args(era)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The fixture behind blocking pipes, after a hand-written handshake (none in the stateless
/// era, whose requests carry what it would have said).
pub(crate) struct RawServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl RawServer {
    pub(crate) fn start(fixture: &Path, stateless: bool) -> Self {
        let mut child = spawn_fixture(fixture, stateless);
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = Self {
            child,
            stdin,
            stdout,
            line: String::new(),
        };
        if !stateless {
            server.send(INITIALIZE);
            server.receive();
            server.send(INITIALIZED);
        }
        server
    }

    /// One write per line, as a client sends it: a server woken by half a line would read
    /// twice (and, on our CPU, take a turn in between).
    pub(crate) fn send(&mut self, line: &str) {
        self.stdin.write_all(&terminated(line)).unwrap();
    }

    /// Reads one line; the floor trusts the server to answer in order.
    pub(crate) fn receive(&mut self) -> &str {
        self.line.clear();
        self.stdout.read_line(&mut self.line).unwrap();
        &self.line
    }

    pub(crate) fn finish(mut self) {
        drop(self.stdin);
        self.child.wait().unwrap();
    }
}

/// `line` and its newline, to go out in one write.
pub(crate) fn terminated(line: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    bytes
}

/// An `echo` call as the client writes it; with `stateless`, with that era's `_meta`.
pub(crate) fn echo_request(id: usize, text: &str, stateless: bool) -> String {
    let mut meta = json!({"progressToken": id});
    if stateless {
        meta["io.modelcontextprotocol/protocolVersion"] = json!(eras::STATELESS);
        meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
        meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "floor", "version": "0"});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "echo", "arguments": {"text": text}, "_meta": meta}})
    .to_string()
}

pub(crate) fn floor_sequential(bins: &Bins, stateless: bool) -> Sequential {
    let mut server = RawServer::start(&bins.fixture, stateless);
    let cpu = process_cpu();
    let mut latencies = Vec::with_capacity(SEQUENTIAL_CALLS);
    for i in 0..SEQUENTIAL_CALLS {
        let request = echo_request(i + 2, &format!("call {i}"), stateless);
        let started = Instant::now();
        server.send(&request);
        let answer = server.receive();
        latencies.push(started.elapsed().as_secs_f64());
        assert!(answer.contains("\"result\""));
    }
    let cpu = process_cpu() - cpu;
    server.finish();
    Sequential::new(&mut latencies, cpu)
}

/// The floor's exchange, but over non-blocking pipes that wait in async-io's reactor under
/// `smol::block_on`, racing the request timeout every client keeps: what the reactor costs a
/// call before any MCP code runs.
pub(crate) fn reactor_sequential(bins: &Bins) -> Sequential {
    use smol::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut child = spawn_fixture(&bins.fixture, false);
    let mut stdin = smol::Async::new(child.stdin.take().unwrap()).unwrap();
    let mut stdout =
        smol::io::BufReader::new(smol::Async::new(child.stdout.take().unwrap()).unwrap());
    let mut line = String::new();
    let run = smol::block_on(async {
        stdin.write_all(&terminated(INITIALIZE)).await.unwrap();
        stdout.read_line(&mut line).await.unwrap();
        stdin.write_all(&terminated(INITIALIZED)).await.unwrap();
        let cpu = process_cpu();
        let mut latencies = Vec::with_capacity(SEQUENTIAL_CALLS);
        for i in 0..SEQUENTIAL_CALLS {
            let request = echo_request(i + 2, &format!("call {i}"), false);
            let started = Instant::now();
            stdin.write_all(&terminated(&request)).await.unwrap();
            line.clear();
            let timeout = smol::Timer::after(std::time::Duration::from_secs(60));
            let answered =
                smol::future::or(async { stdout.read_line(&mut line).await.is_ok() }, async {
                    timeout.await;
                    false
                })
                .await;
            latencies.push(started.elapsed().as_secs_f64());
            assert!(answered && line.contains("\"result\""));
        }
        Sequential::new(&mut latencies, process_cpu() - cpu)
    });
    drop(stdin);
    child.wait().unwrap();
    run
}

pub(crate) fn floor_pipelined(bins: &Bins, stateless: bool) -> f64 {
    let mut server = RawServer::start(&bins.fixture, stateless);
    let requests: Vec<String> = (0..PIPELINED_CALLS)
        .map(|i| echo_request(i + 2, &format!("call {i}"), stateless))
        .collect();
    let started = Instant::now();
    let mut sent = 0;
    while sent < IN_FLIGHT {
        server.send(&requests[sent]);
        sent += 1;
    }
    for _ in 0..PIPELINED_CALLS {
        assert!(server.receive().contains("\"result\""));
        if sent < PIPELINED_CALLS {
            server.send(&requests[sent]);
            sent += 1;
        }
    }
    let rate = PIPELINED_CALLS as f64 / started.elapsed().as_secs_f64();
    server.finish();
    rate
}

/// A relay that understands nothing: the fixture (run with `args`) behind this process, our
/// stdin copied to its stdin and its stdout to ours as the bytes come, one blocking thread
/// each way. What any process between a host and a server adds on this machine (two more
/// wake-ups, two more copies each way), the floor under what `serve` adds.
pub(crate) fn relay(fixture: &Path, args: &[String]) {
    let mut child = Command::new(fixture)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let to_server = child.stdin.take().unwrap();
    let from_server = child.stdout.take().unwrap();
    let answers = std::thread::spawn(move || copy(from_server, std::io::stdout()));
    copy(std::io::stdin(), to_server);
    let _ = child.wait();
    let _ = answers.join();
}

/// Copies `from` to `to` as each read returns, until `from` ends or `to` is closed.
fn copy(mut from: impl std::io::Read, mut to: impl Write) {
    let mut buffer = vec![0; 64 * 1024];
    while let Ok(read @ 1..) = from.read(&mut buffer) {
        if to
            .write_all(&buffer[..read])
            .and_then(|()| to.flush())
            .is_err()
        {
            return;
        }
    }
}
