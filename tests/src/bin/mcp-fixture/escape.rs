//! The `escape` mode's tools: what a server might try to get past its walls or outlive its
//! host, for the sandbox suites.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The tools the `escape` mode adds.
pub(crate) fn tools() -> Vec<Value> {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    vec![
        json!({"name": "connect_unix", "description": "Connects to a Unix socket and sends an MCP initialize: \"answered\", \"closed\" or \"unreachable: ERROR\".", "inputSchema": object(json!({"path": {"type": "string"}}), &["path"])}),
        json!({"name": "spawn_detached", "description": "Starts `setsid sleep 1000` and answers its pid.", "inputSchema": object(json!({}), &[])}),
    ]
}

/// Runs one of [`tools`].
pub(crate) fn run(name: &str, arguments: &Value) -> std::io::Result<String> {
    match name {
        "connect_unix" => {
            let path = arguments.get("path").and_then(Value::as_str);
            Ok(connect_unix(path.unwrap_or_default()))
        }
        "spawn_detached" => spawn_detached(),
        _ => Err(std::io::Error::other(format!("no tool {name} here"))),
    }
}

/// Whether an MCP server answers on the socket at `path`.
fn connect_unix(path: &str) -> String {
    let mut stream = match UnixStream::connect(path) {
        Ok(stream) => stream,
        Err(error) => return format!("unreachable: {error}"),
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "escape", "version": "0"}}});
    // A socket closed by the other end may refuse the write; that is a close too.
    if writeln!(stream, "{initialize}").is_err() {
        return "closed".to_owned();
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut line = String::new();
    match BufReader::new(stream).read_line(&mut line) {
        Ok(0) | Err(_) => "closed".to_owned(),
        Ok(_) => "answered".to_owned(),
    }
}

/// Starts a process in a session of its own, which the server's process group does not hold,
/// and leaves it running: nobody here waits for it. Answers once it has left the group
/// (`setsid` has made it a session leader), so that no group signal can reach it.
fn spawn_detached() -> std::io::Result<String> {
    let child = std::process::Command::new("setsid")
        .args(["sleep", "1000"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while session(pid) != Some(pid) {
        if Instant::now() > deadline {
            return Err(std::io::Error::other(format!(
                "{pid} did not leave the group"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(pid.to_string())
}

/// The session of process `pid`: after the name in parentheses, the state, parent, group
/// and session.
fn session(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat.get(stat.rfind(')')? + 1..)?;
    fields.split_whitespace().nth(3)?.parse().ok()
}
