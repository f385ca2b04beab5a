//! `mcp-registry-fixture DATA [--page N] [--log FILE] [--port N] [--background]`: an MCP
//! registry on 127.0.0.1 (a free port, or `--port`, printed as `PORT <n>`) serving the `/v0.1`
//! read API from the file `DATA`,
//! `{"mode": MODE, "servers": [ServerResponse, ...]}` with every version of every server. The
//! file is read again for each request, so a test can publish a new version (or break the
//! registry) between syncs.
//!
//! - `GET /v0.1/servers?cursor=&limit=&updated_since=&version=latest&search=`: `N` entries a
//!   page at most (`--page`, default 2, so that every sync pages), `metadata.nextCursor` the
//!   offset of the next page; `version=latest` keeps the entries marked `isLatest`,
//!   `updated_since` those updated later, `search` those whose name holds it.
//! - `GET /v0.1/servers/{name}/versions/{version}` (`latest` for the latest), `404` when none.
//! - `GET /files/NAME`: the file `files/NAME` beside `DATA` (a bundle to download), and
//!   `GET /redirect/NAME` a `302` to it, as release downloads redirect.
//!
//! Modes, for the ways a registry goes wrong: `good` (the default); `garbage` (the second page
//! is an HTML page); `loop` (every page names the same next cursor).
//!
//! `--log FILE` appends one line per request, `GET <target>`. `--background` starts the
//! registry as a child of its own and exits once it listens (for the book, whose lines each
//! run to their end; the child stays in the line's process group, which the book ends).

use std::io::Write;
use std::net::TcpStream;

use mcp_tests::http::{self, Request, Response};
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Good,
    Garbage,
    Loop,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let data = args.next().expect(
        "usage: mcp-registry-fixture DATA [--page N] [--log FILE] [--port N] [--background]",
    );
    let (mut page, mut log, mut port, mut forwarded) = (2usize, None, 0u16, Vec::new());
    while let Some(flag) = args.next() {
        if flag == "--background" {
            return background(&data, &forwarded);
        }
        let value = args.next().expect("a value after each flag");
        forwarded.extend([flag.clone(), value.clone()]);
        match flag.as_str() {
            "--page" => page = value.parse().expect("--page N"),
            "--log" => log = Some(value),
            "--port" => port = value.parse().expect("--port N"),
            other => panic!("unknown flag {other}"),
        }
    }
    let listener = http::listen(port).expect("a port on 127.0.0.1");
    http::serve_each(listener, move |mut stream: TcpStream| {
        let Some(request) = http::read_request(&mut stream) else {
            return;
        };
        if let Some(log) = &log
            && let Ok(mut file) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
        {
            let _ = writeln!(file, "{} {}", request.method, request.target);
        }
        let answer = answer(&request, &data, page);
        let _ = answer.write_to(&mut stream);
    });
}

/// Starts the registry as a child process and returns once it listens, printing its port.
// Never waited for: this process exits at once, and the child, left to init, is reaped there.
#[allow(clippy::zombie_processes)]
fn background(data: &str, flags: &[String]) {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(std::env::current_exe().expect("this program"))
        .arg(data)
        .args(flags)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the registry starts");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("its stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("its port");
    print!("{line}");
}

fn answer(request: &Request, path_of_data: &str, page: usize) -> Response {
    let data: Value = std::fs::read_to_string(path_of_data)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let servers = data
        .get("servers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mode = match data.get("mode").and_then(Value::as_str) {
        Some("garbage") => Mode::Garbage,
        Some("loop") => Mode::Loop,
        _ => Mode::Good,
    };
    let path = request.path();
    if let Some(name) = path
        .strip_prefix("/files/")
        .filter(|name| !name.contains('/'))
    {
        let file = std::path::Path::new(path_of_data)
            .with_file_name("files")
            .join(name);
        return match std::fs::read(file) {
            Ok(bytes) => Response::new("200 OK", "application/octet-stream", bytes),
            Err(_) => not_found(),
        };
    }
    if let Some(name) = path.strip_prefix("/redirect/") {
        let location = vec![("Location".to_owned(), format!("/files/{name}"))];
        return Response::empty("302 Found", location);
    }
    if path == "/v0.1/servers" {
        return list(&servers, &http::form_pairs(request.query()), mode, page);
    }
    let Some(rest) = path.strip_prefix("/v0.1/servers/") else {
        return not_found();
    };
    let Some((name, version)) = rest.split_once("/versions/") else {
        return not_found();
    };
    let (name, version) = (http::percent_decode(name), http::percent_decode(version));
    let found = servers.iter().find(|entry| {
        entry.pointer("/server/name").and_then(Value::as_str) == Some(name.as_str())
            && match version.as_str() {
                "latest" => is_latest(entry),
                version => {
                    entry.pointer("/server/version").and_then(Value::as_str) == Some(version)
                }
            }
    });
    match found {
        Some(entry) => json_answer(entry),
        None => not_found(),
    }
}

fn list(servers: &[Value], query: &[(String, String)], mode: Mode, page: usize) -> Response {
    let get = |key: &str| {
        query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let offset: usize = get("cursor")
        .and_then(|cursor| cursor.parse().ok())
        .unwrap_or(0);
    if mode == Mode::Garbage && offset > 0 {
        return Response::new(
            "200 OK",
            "text/html",
            "<html><body>Service Unavailable</body></html>",
        );
    }
    let limit = get("limit")
        .and_then(|limit| limit.parse().ok())
        .unwrap_or(page)
        .min(page);
    let selected: Vec<&Value> = (servers.iter())
        .filter(|entry| get("version") != Some("latest") || is_latest(entry))
        .filter(|entry| match get("updated_since") {
            Some(since) => updated(entry).is_some_and(|updated| updated > since),
            None => true,
        })
        .filter(|entry| match get("search") {
            Some(search) => (entry.pointer("/server/name").and_then(Value::as_str))
                .is_some_and(|name| name.contains(search)),
            None => true,
        })
        .collect();
    let page: Vec<&Value> = selected.iter().skip(offset).take(limit).copied().collect();
    let next = match mode {
        Mode::Loop => Some("1".to_owned()),
        _ => (offset + limit < selected.len()).then(|| (offset + limit).to_string()),
    };
    json_answer(&json!({
        "servers": page,
        "metadata": {"nextCursor": next, "count": page.len()},
    }))
}

fn official<'a>(entry: &'a Value, key: &str) -> Option<&'a Value> {
    entry.pointer(&format!(
        "/_meta/io.modelcontextprotocol.registry~1official/{key}"
    ))
}

fn is_latest(entry: &Value) -> bool {
    official(entry, "isLatest")
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

fn updated(entry: &Value) -> Option<&str> {
    official(entry, "updatedAt").and_then(Value::as_str)
}

fn json_answer(value: &Value) -> Response {
    Response::new("200 OK", "application/json", value.to_string())
}

fn not_found() -> Response {
    Response::new(
        "404 Not Found",
        "application/json",
        r#"{"error":"Server not found"}"#,
    )
}
