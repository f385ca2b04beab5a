//! The plain HTTP/1.1 plumbing the HTTP fixture servers share: listening, reading one request,
//! writing one answer (whole or as an event stream). One exchange per connection, so every
//! answer ends the connection; what to answer stays in each fixture.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;

/// Binds 127.0.0.1 at `port` (0: a free one) and prints `PORT <n>` on stdout, where the test
/// that started the fixture reads it.
pub fn listen(port: u16) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    println!("PORT {}", listener.local_addr()?.port());
    std::io::stdout().flush()?;
    Ok(listener)
}

/// Hands every accepted connection to `serve`, each on a thread of its own, for as long as
/// the listener accepts.
pub fn serve_each(listener: TcpListener, serve: impl Fn(TcpStream) + Send + Sync + 'static) {
    let serve = Arc::new(serve);
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let serve = serve.clone();
        thread::spawn(move || serve(stream));
    }
}

/// One request as read off the socket.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The request target as sent: path and query.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header called `name`, whatever its case.
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    /// The query of the target, `""` when there is none.
    pub fn query(&self) -> &str {
        (self.target.split_once('?'))
            .map(|(_, query)| query)
            .unwrap_or_default()
    }
}

/// Reads one request: request line, headers, and a body of `Content-Length` bytes (none
/// without it). `None` when the connection ends early or the head is not HTTP.
pub fn read_request(stream: &mut impl Read) -> Option<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let request = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    let length = (request.header("content-length"))
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { body, ..request })
}

/// A whole answer, sent with its `Content-Length`.
#[derive(Debug)]
pub struct Response {
    /// Code and reason, as in `"404 Not Found"`.
    pub status: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// An answer with a `Content-Type` and a body.
    pub fn new(status: &'static str, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            headers: vec![("Content-Type".to_owned(), content_type.to_owned())],
            body: body.into(),
        }
    }

    /// An answer with no body, only these headers (none for a bare status).
    pub fn empty(status: &'static str, headers: Vec<(String, String)>) -> Self {
        Response {
            status,
            headers,
            body: Vec::new(),
        }
    }

    /// Sends the answer and flushes.
    pub fn write_to(&self, stream: &mut impl Write) -> std::io::Result<()> {
        let mut head = head(self.status, &self.headers);
        head.push_str(&format!("Content-Length: {}\r\n\r\n", self.body.len()));
        stream.write_all(head.as_bytes())?;
        stream.write_all(&self.body)?;
        stream.flush()
    }
}

/// Starts an answer that is an event stream (`200`, `Content-Type: text/event-stream`); it
/// runs until the connection ends. Follow with [`write_event`].
pub fn start_events(stream: &mut impl Write) -> std::io::Result<()> {
    let mut head = head("200 OK", &[]);
    head.push_str("Content-Type: text/event-stream\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    stream.flush()
}

/// Sends one event, already in its wire form (`data: ...\n\n`), at once.
pub fn write_event(stream: &mut impl Write, event: &str) -> std::io::Result<()> {
    stream.write_all(event.as_bytes())?;
    stream.flush()
}

/// The status line and headers, without the blank line that ends them.
fn head(status: &str, headers: &[(String, String)]) -> String {
    // One exchange per connection: the client must not wait to send another on it.
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head
}

/// A header value as the 2026-07-28 revision encodes unsafe ones (`Mcp-Name`, `Mcp-Param-*`):
/// `=?base64?...?=` decoded to its UTF-8 text, anything else as it is; `None` when the base64
/// or its UTF-8 is broken.
pub fn decode_header_value(value: &str) -> Option<String> {
    let Some(encoded) = (value.strip_prefix("=?base64?")).and_then(|rest| rest.strip_suffix("?="))
    else {
        return Some(value.to_owned());
    };
    let digit = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut bytes = Vec::new();
    let (mut bits, mut count) = (0u32, 0);
    for c in encoded.trim_end_matches('=').bytes() {
        bits = bits << 6 | u32::from(digit(c)?);
        count += 6;
        if count >= 8 {
            count -= 8;
            bytes.push((bits >> count) as u8);
        }
    }
    String::from_utf8(bytes).ok()
}

/// A query string's or a form body's pairs, percent-decoded (`+` as a space).
pub fn form_pairs(text: &str) -> Vec<(String, String)> {
    (text.split('&'))
        .filter_map(|pair| pair.split_once('='))
        .map(|(key, value)| (percent_decode(key), percent_decode(value)))
        .collect()
}

/// `text` percent-decoded (`+` as a space); a `%` not followed by two hex digits stays.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok());
        match (
            bytes[at],
            hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()),
        ) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (byte, _) => out.push(byte),
        }
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
