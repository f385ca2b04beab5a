//! A plain HTTP/1.1 host for the `gateway` section: blocking std socket, one kept-alive
//! connection, the least a host can do per call. Measured beside the client's own HTTP
//! transport, it tells what `serve --listen` adds from what the client adds.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use serde_json::{Value, json};

use crate::median;

/// A session of `serve --listen` over one kept-alive connection.
pub(crate) struct PlainHost {
    stream: TcpStream,
    authority: String,
    token: String,
    session: Option<String>,
    /// Bytes read past the last answer.
    pending: Vec<u8>,
}

impl PlainHost {
    /// Connects to `url` (`http://IP:PORT/mcp`) and opens a session.
    pub(crate) fn open(url: &str, token: &str) -> Self {
        let authority = (url.strip_prefix("http://"))
            .and_then(|rest| rest.split('/').next())
            .expect("an http URL")
            .to_owned();
        let stream = TcpStream::connect(&authority).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut host = Self {
            stream,
            authority,
            token: token.to_owned(),
            session: None,
            pending: Vec::new(),
        };
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "mcp-bench", "version": "1"}});
        let (headers, _) = host
            .post(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}));
        host.session = headers.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        });
        assert!(host.session.is_some(), "no session: {headers}");
        host.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        host
    }

    /// Posts `message`; the answer's head and body.
    fn post(&mut self, message: &Value) -> (String, Vec<u8>) {
        let body = serde_json::to_vec(message).unwrap();
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n",
            self.authority,
            self.token,
            body.len()
        );
        if let Some(session) = &self.session {
            request.push_str(&format!(
                "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend(body);
        self.stream.write_all(&bytes).unwrap();
        let end = loop {
            if let Some(at) = self.pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            self.fill();
        };
        let head = String::from_utf8_lossy(&self.pending[..end]).into_owned();
        self.pending.drain(..end + 4);
        let length = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            (name.eq_ignore_ascii_case("content-length"))
                .then(|| value.trim().parse::<usize>().ok())?
        });
        let length = length.unwrap_or_else(|| panic!("a JSON answer was expected: {head}"));
        while self.pending.len() < length {
            self.fill();
        }
        let body = self.pending.drain(..length).collect();
        (head, body)
    }

    fn fill(&mut self) {
        let mut buffer = [0u8; 16 * 1024];
        let read = self.stream.read(&mut buffer).unwrap();
        assert!(read > 0, "serve --listen closed the connection");
        self.pending.extend_from_slice(&buffer[..read]);
    }

    /// The median latency of `calls` sequential calls of `tool`, in seconds.
    pub(crate) fn latency(&mut self, tool: &str, calls: usize) -> f64 {
        let mut times = Vec::with_capacity(calls);
        for i in 0..calls {
            let started = Instant::now();
            let params = json!({"name": tool, "arguments": {"text": format!("call {i}")}});
            let message = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                "params": params});
            let (head, body) = self.post(&message);
            times.push(started.elapsed().as_secs_f64());
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            let answer: Value = serde_json::from_slice(&body).unwrap();
            assert!(answer["result"].is_object(), "{answer}");
            assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
        }
        median(&times)
    }
}
