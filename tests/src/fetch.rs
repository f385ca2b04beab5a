//! The fixture's `fetch` tool: plain HTTP/1.1 GETs through the proxy that `HTTP_PROXY` (or
//! `http_proxy`) names, as an absolute URI, unless `NO_PROXY` names the host; else straight to
//! the host; with `tunnel`, through a `CONNECT` tunnel of that proxy instead. Several requests
//! go over one kept-alive connection and are timed one by one.
//! A test client for servers we control (every answer has a `Content-Length`), not a general
//! one.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

/// What the requests got: the last status and body, and how long each request took.
#[derive(Debug)]
pub struct Fetched {
    pub status: u16,
    pub body: String,
    pub micros: Vec<u64>,
}

/// GETs `url` (`http://host[:port]/path`) `count` times over one connection; `tunnel` asks
/// for a `CONNECT` tunnel when there is a proxy.
pub fn fetch(url: &str, count: usize, tunnel: bool) -> std::io::Result<Fetched> {
    let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_owned());
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid("not an http:// URL"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host);
    let proxy = ["HTTP_PROXY", "http_proxy"]
        .iter()
        .find_map(|key| std::env::var(key).ok().filter(|value| !value.is_empty()));
    let bypassed = ["NO_PROXY", "no_proxy"].iter().any(|key| {
        std::env::var(key).is_ok_and(|list| list.split(',').any(|name| name.trim() == host))
    });
    let proxy = proxy.filter(|_| !bypassed);
    // Without a proxy there is nothing to tunnel through: the request goes straight there.
    let tunnel = tunnel && proxy.is_some();
    let (dial, target) = match proxy {
        Some(proxy) if !tunnel => {
            let proxy = proxy.trim_start_matches("http://").trim_end_matches('/');
            (proxy.to_owned(), url.to_owned())
        }
        Some(proxy) => {
            let proxy = proxy.trim_start_matches("http://").trim_end_matches('/');
            (proxy.to_owned(), path.to_owned())
        }
        None => {
            let dial = match authority.contains(':') {
                true => authority.to_owned(),
                false => format!("{authority}:80"),
            };
            (dial, path.to_owned())
        }
    };
    let stream = TcpStream::connect(&dial)?;
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut fetched = Fetched {
        status: 0,
        body: String::new(),
        micros: Vec::with_capacity(count),
    };
    if tunnel {
        let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        writer.write_all(request.as_bytes())?;
        let (status, length) = head(&mut reader)?;
        if status != 200 {
            (fetched.status, fetched.body) = (status, body(&mut reader, length)?);
            return Ok(fetched);
        }
    }
    for _ in 0..count.max(1) {
        let started = Instant::now();
        let request = format!("GET {target} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        writer.write_all(request.as_bytes())?;
        (fetched.status, fetched.body) = response(&mut reader)?;
        fetched.micros.push(started.elapsed().as_micros() as u64);
    }
    Ok(fetched)
}

/// Reads one response: its status and its body (by `Content-Length`, else to the end).
fn response(reader: &mut impl BufRead) -> std::io::Result<(u16, String)> {
    let (status, length) = head(reader)?;
    Ok((status, body(reader, length)?))
}

/// Reads a response's status line and headers: its status and `Content-Length`.
fn head(reader: &mut impl BufRead) -> std::io::Result<(u16, Option<usize>)> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok());
    let status =
        status.ok_or_else(|| std::io::Error::other(format!("no status line: {line:?}")))?;
    let mut length = None;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    Ok((status, length))
}

fn body(reader: &mut impl BufRead, length: Option<usize>) -> std::io::Result<String> {
    let mut body = Vec::new();
    match length {
        Some(length) => {
            body.resize(length, 0);
            reader.read_exact(&mut body)?;
        }
        None => {
            reader.read_to_end(&mut body)?;
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// For the tests and the bench: an HTTP/1.1 server on a free loopback port that answers every
/// GET with `hello PATH` in one write, keeping connections alive; it runs until the process
/// ends. Returns its port.
pub fn hello_server() -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    Ok(port)
}

fn answer(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let Ok(reading) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(reading);
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("?").to_owned();
        // The headers, up to the blank line.
        while reader.read_line(&mut line).unwrap_or(0) > 0 && !line.ends_with("\r\n\r\n") {}
        let body = format!("hello {path}");
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
