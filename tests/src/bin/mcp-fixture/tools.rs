//! The fixture's tools: what each mode lists, and how a call of each is run and answered.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use mcp_tests::stateless::{self, Ask};
use mcp_tests::tasks;
use serde_json::{Value, json};

use super::{
    NAME, POISONED, Server, TINY_PNG, from_text, outcome, output_schema, poisoned_offer,
    poisoned_tools, response,
};

impl Server {
    /// What `--describe FILE` holds now: the description of everything called `shifty`.
    pub(crate) fn shifty(&self) -> Option<String> {
        let file = self.options.get("describe")?;
        Some(std::fs::read_to_string(file).unwrap_or_default())
    }

    /// The tools; `stateless` adds `ask`, which only that era can play.
    pub(crate) fn tools(&self, stateless: bool) -> Vec<Value> {
        let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
        let mut tools = vec![
            json!({"name": "echo", "description": "Echoes the text back.\nSecond line.", "inputSchema": object(json!({"text": {"type": "string"}}), &["text"])}),
            json!({"name": "blob", "description": "Returns a text of that many bytes: `x`s, or with `varied` every kind of character.", "inputSchema": object(json!({"bytes": {"type": "integer"}, "varied": {"type": "boolean"}}), &["bytes"])}),
            json!({"name": "sleep", "description": "Waits, then answers.", "inputSchema": object(json!({"ms": {"type": "integer"}}), &["ms"])}),
            json!({"name": "progress", "description": "Reports progress while it works.", "inputSchema": object(json!({"steps": {"type": "integer"}, "ms": {"type": "integer"}}), &[])}),
            json!({"name": "fail", "description": "Reports a tool error (with rpc, as a JSON-RPC error).", "inputSchema": object(json!({"message": {"type": "string"}, "rpc": {"type": "boolean"}}), &[])}),
            json!({"name": "add", "description": "Adds two numbers.", "inputSchema": object(json!({"a": {"type": "number"}, "b": {"type": "number"}}), &["a", "b"])}),
            json!({"name": "rich", "description": "Returns every kind of content.", "inputSchema": object(json!({}), &[])}),
            json!({"name": "structured", "description": "Returns structured content only.", "inputSchema": object(json!({}), &[])}),
            json!({"name": "types", "description": "Returns the arguments it got.", "inputSchema": object(json!({
                "s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"},
                "b": {"type": "boolean"}, "arr": {"type": "array"}, "obj": {"type": "object"},
                "mode": {"type": "string", "enum": ["fast", "slow"], "description": "How to go."},
                "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "A count, or null."}
            }), &["s", "i"])}),
            json!({"name": "stderr", "description": "Writes lines to stderr.", "inputSchema": object(json!({"lines": {"type": "integer"}}), &[])}),
            json!({"name": "report", "description": "Answers the fixture received.", "inputSchema": object(json!({}), &[])}),
            json!({"name": "connect", "description": "Connects to a TCP address.", "inputSchema": object(json!({"address": {"type": "string"}}), &["address"])}),
            json!({"name": "read_path", "description": "Reads a file.", "inputSchema": object(json!({"path": {"type": "string"}}), &["path"])}),
            json!({"name": "write_path", "description": "Writes a file.", "inputSchema": object(json!({"path": {"type": "string"}, "text": {"type": "string"}}), &["path"])}),
        ];
        if let Some(description) = self.shifty() {
            tools.push(json!({"name": "shifty", "description": description, "inputSchema": object(json!({}), &[])}));
        }
        if self.mode == "walls" {
            tools.extend([
                json!({"name": "connect_unix", "description": "Connects to a Unix socket (abstract: a name in the abstract namespace).", "inputSchema": object(json!({"path": {"type": "string"}, "abstract": {"type": "boolean"}}), &["path"])}),
                json!({"name": "signal", "description": "Sends SIGTERM to a process.", "inputSchema": object(json!({"pid": {"type": "integer"}}), &["pid"])}),
                json!({"name": "processes", "description": "The processes /proc lists, one `PID NAME` a line.", "inputSchema": object(json!({}), &[])}),
                json!({"name": "detach", "description": "Starts `sh -c 'sleep 600; : TOKEN'` in a session of its own.", "inputSchema": object(json!({"token": {"type": "string"}}), &["token"])}),
            ]);
        }
        if self.mode == "fetch" {
            tools.push(json!({"name": "fetch", "description": "GETs an http:// URL, count times over one connection.", "inputSchema": object(json!({"url": {"type": "string"}, "count": {"type": "integer"}, "tunnel": {"type": "boolean"}}), &["url"])}));
        }
        if self.mode == "odd-tools" {
            tools.extend([
                json!({"name": "get.weather", "inputSchema": object(json!({}), &[])}),
                json!({"name": "get_weather", "inputSchema": object(json!({}), &[])}),
                json!({"name": "research", "inputSchema": object(json!({}), &[]),
                       "execution": {"taskSupport": "required"},
                       "icons": [{"src": "data:image/png;base64,AA=="}], "_meta": {"kept": true}}),
                json!({"name": "schemas",
                       "inputSchema": from_text(stateless::SCHEMA_2020_INPUT),
                       "outputSchema": from_text(stateless::SCHEMA_2020_OUTPUT)}),
            ]);
        }
        if self.mode == "escape" {
            tools.extend(super::escape::tools());
        }
        if self.mode == "poisoned" {
            tools.extend(poisoned_tools());
        }
        if self.mode == "poisoned-offer" {
            tools.extend(poisoned_offer::tools());
        }
        if self.mode == "url-elicitation" {
            tools.push(
                json!({"name": "open_link", "description": "Asks the client to open a link.",
                              "inputSchema": object(json!({}), &[])}),
            );
        }
        if self.mode == "url-required" {
            tools.push(
                json!({"name": "needs_link", "description": "Needs a link opened first.",
                              "inputSchema": object(json!({}), &[])}),
            );
        }
        if self.mode == "roots-call" {
            tools.push(
                json!({"name": "show_roots", "description": "Shows the client's roots.",
                              "inputSchema": object(json!({}), &[])}),
            );
        }
        if self.tasks.is_some() {
            tools.extend(tasks::tools());
        }
        if self.mode == "output-schema" {
            tools.extend(output_schema::tools());
        }
        if self.mode == "gateway-names" {
            for name in ["search_tools", "describe_tool", "call_tool", "mcp"] {
                tools.push(json!({"name": name, "inputSchema": object(json!({}), &[])}));
            }
        }
        let grown = *self.grown.lock().unwrap();
        if grown || (self.mode == "list-changed" && *self.calls.lock().unwrap() > 0) {
            tools.push(json!({"name": "extra", "inputSchema": object(json!({}), &[])}));
        }
        if stateless {
            tools.push(stateless::ask_tool());
        }
        tools
    }

    pub(crate) fn tools_page(&self, params: &Value, stateless: bool) -> Value {
        let tools = self.tools(stateless);
        if self.mode == "repeat-cursor" {
            return json!({"tools": tools[..1], "nextCursor": "again"});
        }
        let size = self.option("page-size", 2).max(1) as usize;
        let start: usize = (params.get("cursor").and_then(Value::as_str))
            .and_then(|c| c.strip_prefix('c')?.parse().ok())
            .unwrap_or(0);
        let end = (start + size).min(tools.len());
        let mut page = json!({"tools": tools.get(start..end).unwrap_or(&[])});
        if end < tools.len() {
            page["nextCursor"] = json!(format!("c{end}"));
        }
        page
    }

    /// A `tools/call`; `stateless`: of that era, where `ask` plays its rounds and results are
    /// marked complete.
    pub(crate) fn call(self: &Arc<Self>, id: Value, params: Value, stateless: bool) {
        if self.mode == "url-elicitation" && params["name"] == "open_link" {
            return self.open_link(id);
        }
        if self.mode == "url-required" && params["name"] == "needs_link" {
            return self.needs_link(&id);
        }
        if self.mode == "roots-call" && params["name"] == "show_roots" {
            return self.show_roots(id, &params, stateless);
        }
        if stateless && params["name"] == "ask" {
            let how = match self.mode.as_str() {
                "input-loop" => Ask::Loop,
                "huge-state" => Ask::Huge,
                _ => Ask::Once,
            };
            return match stateless::ask(&params, how, NAME) {
                Ok(result) => self.answer(&id, Ok(result)),
                Err(refusal) => self.refuse(&id, refusal),
            };
        }
        match self.mode.as_str() {
            "exit-mid-call" => {
                let marker = self.options.get("crash-once").map(std::path::Path::new);
                // With a marker, only the first server to get here crashes.
                let crashed_before = marker.is_some_and(std::path::Path::exists);
                if !crashed_before {
                    if let Some(marker) = marker {
                        std::fs::write(marker, b"crashed").unwrap();
                    }
                    eprintln!("crashing now");
                    std::process::exit(3);
                }
            }
            "crash-second-call" if *self.calls.lock().unwrap() > 0 => {
                eprintln!("crashing now");
                std::process::exit(3);
            }
            "close-stdout" => {
                // Swapping /dev/null in closes our only handle on the pipe: the client sees EOF.
                let null = std::fs::File::create("/dev/null").expect("open /dev/null");
                rustix::stdio::dup2_stdout(&null).expect("replace stdout");
                *self.stdout_closed.lock().unwrap() = true;
                eprintln!("stdout closed, still running");
                return;
            }
            "partial-line-stall" => {
                self.raw(br#"{"jsonrpc":"2.0","id":"#);
                return;
            }
            "oversize-stall" => {
                // The answer's id comes first, as most servers write it; its end never does.
                let start = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#
                );
                let mut answer = start.into_bytes();
                let bytes = self.option("bytes", 2 * 1024 * 1024) as usize;
                answer.resize(bytes.max(answer.len()), b'x');
                self.raw(&answer);
                return;
            }
            "flood-notifications" => {
                for i in 0..10_000 {
                    self.send(&json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": format!("flood {i}")}}));
                }
                for i in 0..1000 {
                    self.send(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "unknown-token", "progress": i}}));
                }
            }
            "long-line" => {
                let bytes = self.option("bytes", 2 * 1024 * 1024) as usize;
                let mut line =
                    br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":""#
                        .to_vec();
                line.resize(bytes.saturating_sub(4).max(line.len()), b'x');
                line.extend_from_slice(b"\"}}\n");
                self.raw(&line);
            }
            _ => {}
        }
        let first_call = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls == 1
        };
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .cloned();
        let server = self.clone();
        let work = move || {
            let result = server.run_tool(&id, &name, &arguments, token);
            if let Some(result) = result {
                let result = match stateless {
                    true => result.map(|result| stateless::complete(result, NAME)),
                    false => result,
                };
                server.answer_call(&id, result);
            }
            if first_call && server.mode == "list-changed" {
                server.tools_changed();
            }
        };
        // Slow tools run on their own thread so other requests are answered meanwhile.
        if matches!(
            params.get("name").and_then(Value::as_str),
            Some("sleep" | "progress")
        ) {
            thread::spawn(work);
        } else {
            work();
        }
    }

    /// Runs a tool; `None` when it was cancelled and must not be answered.
    pub(crate) fn run_tool(
        &self,
        id: &Value,
        name: &str,
        arguments: &Value,
        token: Option<Value>,
    ) -> Option<Result<Value, (i64, String)>> {
        // The text is moved in, not copied as `json!` copies what it is given: a large result
        // costs this server one copy, so a memory figure over the client and its server is the
        // client's.
        let text = |text: String| {
            let mut result = json!({"content": [{"type": "text"}]});
            result["content"][0]["text"] = Value::String(text);
            result
        };
        let number = |key: &str| arguments.get(key).and_then(Value::as_f64);
        let integer = |key: &str, default: u64| {
            arguments
                .get(key)
                .and_then(Value::as_u64)
                .unwrap_or(default)
        };
        let result = match name {
            "echo" => text(
                arguments
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ),
            "blob" => {
                let bytes = integer("bytes", 0) as usize;
                match arguments.get("varied").and_then(Value::as_bool) {
                    Some(true) => text(mcp_tests::varied_text(bytes)),
                    _ => text("x".repeat(bytes)),
                }
            }
            "sleep" => {
                let ms = integer("ms", 0);
                let until = Instant::now() + Duration::from_millis(ms);
                while Instant::now() < until {
                    if self.cancelled.lock().unwrap().contains(&id.to_string()) {
                        return None;
                    }
                    thread::sleep(Duration::from_millis(5).min(until - Instant::now()));
                }
                text(format!("slept {ms} ms"))
            }
            "progress" => {
                let steps = integer("steps", 3);
                let ms = integer("ms", 10);
                for step in 1..=steps {
                    thread::sleep(Duration::from_millis(ms));
                    if self.cancelled.lock().unwrap().contains(&id.to_string()) {
                        return None;
                    }
                    if let Some(token) = &token {
                        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": step, "total": steps}}));
                    }
                }
                text(format!("done {steps} steps"))
            }
            "fail" => {
                let message = arguments
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("failed");
                // As older servers do, and as the TypeScript SDK words it.
                if arguments.get("rpc") == Some(&json!(true)) {
                    return Some(Err((-32603, format!("MCP error -32603: {message}"))));
                }
                json!({"content": [{"type": "text", "text": message}], "isError": true})
            }
            "add" => match (number("a"), number("b")) {
                (Some(a), Some(b)) => {
                    json!({"content": [{"type": "text", "text": (a + b).to_string()}], "structuredContent": {"sum": a + b}})
                }
                _ => return Some(Err((-32602, "add needs numbers a and b".to_owned()))),
            },
            "rich" => json!({
                "content": [
                    {"type": "text", "text": "rich"},
                    {"type": "image", "data": TINY_PNG, "mimeType": "image/png"},
                    {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                    {"type": "resource_link", "uri": "file:///x.txt", "name": "x.txt", "mimeType": "text/plain"},
                    {"type": "resource", "resource": {"uri": "file:///y.txt", "mimeType": "text/plain", "text": "hello"}},
                    {"type": "hologram", "depth": 3}
                ],
                "structuredContent": {"ok": true}
            }),
            "structured" => json!({"content": [], "structuredContent": {"answer": 42}}),
            "types" => text(arguments.to_string()),
            "stderr" => {
                for line in 0..integer("lines", 1) {
                    eprintln!("stderr line {line}");
                }
                text("ok".to_owned())
            }
            "report" => text(Value::Array(self.answers.lock().unwrap().clone()).to_string()),
            "connect" => {
                let address = arguments.get("address").and_then(Value::as_str);
                outcome(
                    std::net::TcpStream::connect(address.unwrap_or_default())
                        .map(|_| "connected".to_owned()),
                )
            }
            "read_path" => {
                let path = arguments.get("path").and_then(Value::as_str);
                outcome(std::fs::read_to_string(path.unwrap_or_default()))
            }
            "write_path" => {
                let path = arguments
                    .get("path")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let contents = arguments
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                outcome(std::fs::write(path, contents).map(|()| "written".to_owned()))
            }
            "connect_unix" | "signal" | "processes" | "detach" if self.mode == "walls" => {
                outcome(walls(name, arguments))
            }
            "fetch" if self.mode == "fetch" => {
                let url = arguments.get("url").and_then(Value::as_str);
                let count = integer("count", 1).max(1) as usize;
                let tunnel = arguments.get("tunnel").and_then(Value::as_bool) == Some(true);
                outcome(
                    mcp_tests::fetch::fetch(url.unwrap_or_default(), count, tunnel).map(|got| {
                        let mut micros = got.micros;
                        micros.sort_unstable();
                        match count {
                            1 => format!("{} {}", got.status, got.body.trim_end()),
                            _ => format!("{} median_us={}", got.status, micros[micros.len() / 2]),
                        }
                    }),
                )
            }
            "shifty" => text("shifty".to_owned()),
            "extra" if self.mode == "list-changed" => text("extra".to_owned()),
            "get.weather" | "get_weather" | "research" | "schemas" if self.mode == "odd-tools" => {
                text(format!("this is {name}"))
            }
            name if self.mode == "poisoned" && POISONED.iter().any(|(n, _)| *n == name) => {
                text(format!("ran {name}"))
            }
            name if self.mode == "poisoned-offer" && poisoned_offer::TOOLS.contains(&name) => {
                text(format!("ran {name}"))
            }
            "wide" | "lying" | "unstructured" if self.mode == "output-schema" => {
                output_schema::answer(name)
            }
            "search_tools" | "describe_tool" | "call_tool" | "mcp"
                if self.mode == "gateway-names" =>
            {
                text(format!("this is {name}"))
            }
            "connect_unix" | "spawn_detached" if self.mode == "escape" => {
                outcome(super::escape::run(name, arguments))
            }
            _ => return Some(Err((-32602, format!("Unknown tool: {name}")))),
        };
        Some(Ok(result))
    }

    pub(crate) fn answer_call(&self, id: &Value, result: Result<Value, (i64, String)>) {
        if self.mode != "out-of-order" {
            return self.answer(id, result);
        }
        let full = {
            let mut held = self.held.lock().unwrap();
            held.0.push(response(id, result));
            held.1.get_or_insert_with(Instant::now);
            held.0.len() >= 3
        };
        if full {
            self.release_held();
        }
    }
}

/// The `walls` mode's tools: what a sandboxed server must not be able to do outside.
fn walls(name: &str, arguments: &Value) -> std::io::Result<String> {
    let string = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    match name {
        "connect_unix" => {
            use std::os::linux::net::SocketAddrExt;
            use std::os::unix::net::{SocketAddr, UnixStream};
            let address = match arguments.get("abstract").and_then(Value::as_bool) {
                Some(true) => SocketAddr::from_abstract_name(string("path"))?,
                _ => SocketAddr::from_pathname(string("path"))?,
            };
            UnixStream::connect_addr(&address).map(|_| "connected".to_owned())
        }
        "signal" => {
            let pid = arguments.get("pid").and_then(Value::as_i64).unwrap_or(0);
            let pid = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw);
            let pid = pid.ok_or(std::io::ErrorKind::InvalidInput)?;
            rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
            Ok("sent".to_owned())
        }
        "processes" => {
            let mut lines = Vec::new();
            for entry in std::fs::read_dir("/proc")? {
                let name = entry?.file_name().to_string_lossy().into_owned();
                if name.bytes().all(|b| b.is_ascii_digit()) {
                    let comm = std::fs::read_to_string(format!("/proc/{name}/comm"));
                    lines.push(format!("{name} {}", comm.unwrap_or_default().trim()));
                }
            }
            Ok(lines.join("\n"))
        }
        _ => {
            let script = format!("sleep 600; : {}", string("token"));
            let child = std::process::Command::new("setsid")
                .args(["sh", "-c", &script])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()?;
            Ok(format!("started {}", child.id()))
        }
    }
}
