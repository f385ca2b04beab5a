//! `mcp-cli serve --listen` over Streamable HTTP: our own client in both eras (two hosts at
//! once), and raw HTTP for what no client would send: no token or a wrong one, a foreign
//! `Origin` or `Host`, a body over the limit, a host that hangs up mid-call, SIGTERM with a
//! call in flight.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mcp_smol::proto::{ClientCapabilities, Protocol};
use mcp_smol::serde_json::{Value, json};
use mcp_smol::{HttpServer, Options};

use crate::support::{FIXTURE, Scratch, bounded, cli_binary, quick, text};

/// `mcp-cli serve --listen 127.0.0.1:0` on a config with the fixture as `fx`, which logs
/// every line it receives, calls timing out after 600 s; killed when dropped.
pub(crate) struct Listening {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT/mcp`, as serve printed it.
    pub(crate) url: String,
    /// `127.0.0.1:PORT`.
    pub(crate) address: String,
    pub(crate) token: String,
    pub(crate) log: PathBuf,
    /// The rest of serve's stderr after the line that names its address, once it ends.
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Listening {
    /// Sends SIGTERM and waits for serve to end: its exit code and the rest of its stderr.
    fn terminate(&mut self) -> (i32, String) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = self.child.wait().unwrap();
        let stderr = self.stderr.take().map(|rest| rest.join().unwrap());
        (status.code().unwrap_or(-1), stderr.unwrap_or_default())
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn env(scratch: &Scratch) -> Vec<(&'static str, String)> {
    let dir = |name: &str| scratch.0.join(name).display().to_string();
    vec![
        ("XDG_STATE_HOME", dir("state")),
        ("XDG_CONFIG_HOME", dir("config-home")),
        ("MCP_CLI_NPM_PREFIX", dir("no-npm")),
        ("MCP_CLI_LIST_WAIT_MS", "120000".to_owned()),
    ]
}

fn listen(scratch: &Scratch, extra_env: &[(&str, &str)]) -> Listening {
    listen_to(scratch, &["good"], extra_env)
}

/// [`listen`] with the fixture in `mode` (its first arguments).
pub(crate) fn listen_to(scratch: &Scratch, mode: &[&str], extra_env: &[(&str, &str)]) -> Listening {
    listen_configured(scratch, mode, "", extra_env)
}

/// [`listen_to`], with `more` (rules, say) added to the config.
pub(crate) fn listen_configured(
    scratch: &Scratch,
    mode: &[&str],
    more: &str,
    extra_env: &[(&str, &str)],
) -> Listening {
    let log = scratch.0.join("received.log");
    let mut args: Vec<String> = mode.iter().map(|word| (*word).to_owned()).collect();
    args.extend(["--log-received".to_owned(), log.display().to_string()]);
    let config = scratch.write(
        "listen.toml",
        &format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = {args:?}\n\n{more}"),
    );
    listen_on(scratch, &config, log, extra_env)
}

/// `mcp-cli --config CONFIG serve --listen 127.0.0.1:0` in the scratch folder's environment,
/// calls timing out after 600 s; `log` is where its servers log what they receive.
pub(crate) fn listen_on(
    scratch: &Scratch,
    config: &Path,
    log: PathBuf,
    extra_env: &[(&str, &str)],
) -> Listening {
    let mut child = Command::new(cli_binary())
        // Calls outlast any test: only a cancellation ends one early.
        .args([
            "--config",
            &config.display().to_string(),
            "--timeout",
            "600",
        ])
        .args(["serve", "--listen", "127.0.0.1:0"])
        .envs(env(scratch))
        .envs(extra_env.iter().copied())
        .env_remove("MCP_CLI_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "serve ended before listening"
        );
        if let Some(url) = line.trim().strip_prefix("mcp-cli serve: listening on ") {
            break url.to_owned();
        }
    };
    // The rest of its stderr is drained, so that it never blocks on a full pipe.
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let printed = Command::new(cli_binary())
        .args(["serve", "--print-token"])
        .envs(env(scratch))
        .output()
        .unwrap();
    assert!(printed.status.success());
    let token = String::from_utf8(printed.stdout).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "32 bytes as hex: {token}");
    Listening {
        child,
        url,
        address,
        token,
        log,
        stderr: Some(rest),
    }
}

/// What a raw exchange came back with.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

impl Answer {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }
}

/// Sends one request on a new connection and reads the whole answer. `headers` are added to
/// `Host` (this address unless given) and `Content-Length`.
pub(crate) fn exchange(
    address: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .write_all(&raw_request(address, method, headers, body))
        .unwrap();
    read_answer(&mut stream)
}

pub(crate) fn raw_request(
    address: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut head = format!("{method} /mcp HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        head.push_str(&format!("Host: {address}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

pub(crate) fn read_answer(stream: &mut TcpStream) -> Answer {
    // A server that answers before reading all of a body may reset the connection after
    // its answer: what came before counts.
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// The headers that mirror [`stateless_call`]'s body.
pub(crate) const STATELESS: [(&str, &str); 2] = [
    ("MCP-Protocol-Version", "2026-07-28"),
    ("Mcp-Method", "tools/call"),
];

/// A stateless-era `tools/call` of the fixture's tool, as raw bytes.
pub(crate) fn stateless_call(id: u64, tool: &str, arguments: Value) -> Vec<u8> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": format!("fx__{tool}"), "arguments": arguments, "_meta": meta}});
    serde_json::to_vec(&message).unwrap()
}

/// Waits until the fixture's log of received lines holds a line with `needle`.
pub(crate) fn wait_for_log(log: &Path, needle: &str) {
    bounded(async {
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.lines().any(|line| line.contains(needle)) {
                return;
            }
            smol::Timer::after(Duration::from_millis(20)).await;
        }
    });
}

/// Our client over HTTP at `revision`, with the token.
pub(crate) fn host(
    listening: &Listening,
    revision: &'static str,
) -> (mcp_smol::Client, mcp_smol::Driver) {
    let mut server = HttpServer::new(listening.url.clone());
    let bearer = format!("Bearer {}", listening.token);
    server.headers.push(("Authorization".to_owned(), bearer));
    let mut options: Options = quick();
    options.core.protocol = Protocol::Revision(revision);
    options.core.handshake_timeout = Duration::from_secs(30);
    options.core.request_timeout = Duration::from_secs(30);
    mcp_smol::start(server, options).unwrap()
}

#[test]
fn hosts_of_both_eras_list_and_call_at_once_through_listen() {
    let scratch = Scratch::new("listen-eras");
    let listening = listen(&scratch, &[]);
    bounded(async {
        let (old, old_driver) = host(&listening, "2025-06-18");
        let (new, new_driver) = host(&listening, "2026-07-28");
        smol::spawn(old_driver).detach();
        smol::spawn(new_driver).detach();
        assert_eq!(
            old.wait_ready().await.unwrap().protocol_version,
            "2025-06-18"
        );
        assert_eq!(
            new.wait_ready().await.unwrap().protocol_version,
            "2026-07-28"
        );
        for client in [&old, &new] {
            let tools = client.list_tools().await.unwrap();
            assert!(
                tools.iter().any(|tool| tool.name == "fx__echo"),
                "{tools:?}"
            );
        }
        // A slow call of one host holds up neither its own other calls nor the other host.
        let slow = {
            let old = old.clone();
            smol::spawn(async move { old.call_tool("fx__sleep", json!({"ms": 400})).await })
        };
        wait_for_log(&listening.log, "\"sleep\"");
        let echoed = old
            .call_tool("fx__echo", json!({"text": "old"}))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "old");
        let added = new
            .call_tool("fx__add", json!({"a": 2, "b": 3}))
            .await
            .unwrap();
        assert_eq!(text(&added), "5");
        let slept = slow.await.unwrap();
        assert!(!slept.is_error, "{slept:?}");
        old.close().await;
        new.close().await;
    });
}

#[test]
fn a_backends_form_reaches_a_stateless_era_http_host_as_input_rounds_across_requests() {
    let scratch = Scratch::new("listen-rounds");
    let listening = listen_to(&scratch, &["list-changed", "--era", "stateless"], &[]);
    bounded(async {
        let (client, driver) = {
            let mut server = HttpServer::new(listening.url.clone());
            let bearer = format!("Bearer {}", listening.token);
            server.headers.push(("Authorization".to_owned(), bearer));
            let mut options: Options = quick();
            options.core.protocol = Protocol::Revision("2026-07-28");
            options.core.handshake_timeout = Duration::from_secs(30);
            options.core.request_timeout = Duration::from_secs(30);
            options.core.capabilities = ClientCapabilities {
                elicitation: true,
                ..ClientCapabilities::default()
            };
            mcp_smol::start(server, options).unwrap()
        };
        smol::spawn(driver).detach();
        let asked = client.server_requests().await;
        let answering = client.clone();
        let forms = smol::spawn(async move {
            let request = asked.recv().await.unwrap();
            assert_eq!(request.method, "elicitation/create");
            let answer = json!({"action": "accept", "content": {"name": "Ada"}});
            answering.respond(request.id, Ok(answer)).await;
        });
        let greeted = client.call_tool("fx__ask", json!({})).await.unwrap();
        assert!(!greeted.is_error, "{greeted:?}");
        assert_eq!(text(&greeted), r#"accept {"name":"Ada"}"#);
        forms.await;
        client.close().await;
    });
    let received = std::fs::read_to_string(&listening.log).unwrap();
    assert!(received.contains("inputResponses"), "{received}");
}

#[test]
fn no_token_a_wrong_one_a_foreign_origin_or_host_and_a_big_body_are_refused() {
    let scratch = Scratch::new("listen-refusals");
    let listening = listen(&scratch, &[]);
    let address = listening.address.as_str();
    let bearer = format!("Bearer {}", listening.token);
    let call = stateless_call(1, "echo", json!({"text": "x"}));

    let none = exchange(address, "POST", &[], &call);
    assert_eq!(none.status, 401, "{}", none.head);
    assert!(
        none.head
            .to_lowercase()
            .contains("www-authenticate: bearer"),
        "{}",
        none.head
    );
    let wrong = exchange(address, "POST", &[("Authorization", "Bearer 00ff")], &call);
    assert_eq!(wrong.status, 401);
    // The right length, the last character changed.
    let last = if listening.token.ends_with('0') {
        '1'
    } else {
        '0'
    };
    let near = format!("Bearer {}{last}", &listening.token[..63]);
    assert_eq!(
        exchange(address, "POST", &[("Authorization", &near)], &call).status,
        401
    );

    let origin = [
        ("Authorization", bearer.as_str()),
        ("Origin", "http://evil.example"),
    ];
    let foreign = exchange(address, "POST", &origin, &call);
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert!(foreign.body.contains("Origin"), "{}", foreign.body);
    let rebound = [
        ("Authorization", bearer.as_str()),
        ("Host", "evil.example:80"),
    ];
    assert_eq!(exchange(address, "POST", &rebound, &call).status, 403);
    let port = address.rsplit_once(':').unwrap().1;
    let named = format!("attacker.example:{port}");
    let rebound = [("Authorization", bearer.as_str()), ("Host", named.as_str())];
    assert_eq!(exchange(address, "POST", &rebound, &call).status, 403);

    // Refused from its declared length, before it is read.
    let big = vec![b' '; 5 * 1024 * 1024];
    let mut request = raw_request(address, "POST", &[("Authorization", &bearer)], &big);
    request.truncate(request.len() - big.len());
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(&request).unwrap();
    assert_eq!(read_answer(&mut stream).status, 413);
    // And one sent in chunks, with no length, as it comes.
    let chunk = format!("{:x}\r\n{}\r\n", 1024 * 1024, " ".repeat(1024 * 1024));
    let mut stream = TcpStream::connect(address).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: {bearer}\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    for _ in 0..5 {
        if stream.write_all(chunk.as_bytes()).is_err() {
            break;
        }
    }
    assert_eq!(read_answer(&mut stream).status, 413);
    let unknown = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", "nope"),
    ];
    assert_eq!(exchange(address, "POST", &unknown, &call).status, 404);
    let garbage = exchange(address, "POST", &[("Authorization", &bearer)], b"{not json");
    assert_eq!(garbage.status, 400);
    assert_eq!(garbage.json()["error"]["code"], -32700);

    // Headers that contradict the body, or a request of neither era without a session.
    let stated = [
        ("Authorization", bearer.as_str()),
        STATELESS[0],
        ("Mcp-Method", "tools/list"),
    ];
    let contradicted = exchange(address, "POST", &stated, &call);
    assert_eq!(contradicted.status, 400, "{}", contradicted.body);
    assert_eq!(contradicted.json()["error"]["code"], -32020);
    let unstated = [("Authorization", bearer.as_str()), STATELESS[1]];
    assert_eq!(exchange(address, "POST", &unstated, &call).status, 400);
    let ping = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})).unwrap();
    let sessionless = exchange(address, "POST", &[("Authorization", &bearer)], &ping);
    assert_eq!(sessionless.status, 400, "{}", sessionless.body);
    assert!(
        sessionless.body.contains("Mcp-Session-Id"),
        "{}",
        sessionless.body
    );

    // Nothing refused reached the backend.
    let received = std::fs::read_to_string(&listening.log).unwrap_or_default();
    assert!(!received.contains("tools/call"), "{received}");

    // Our own origin, with the token, is served.
    let own = format!("http://{address}");
    let ours = [
        ("Authorization", bearer.as_str()),
        ("Origin", own.as_str()),
        STATELESS[0],
        STATELESS[1],
    ];
    let listen = json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let listen = serde_json::to_vec(&listen).unwrap();
    let streamless = [
        ("Authorization", bearer.as_str()),
        STATELESS[0],
        ("Mcp-Method", "subscriptions/listen"),
    ];
    let refused = exchange(address, "POST", &streamless, &listen);
    assert_eq!(refused.status, 406, "{}", refused.body);
    assert_eq!(refused.json()["error"]["code"], -32600);

    let served = exchange(address, "POST", &ours, &call);
    assert_eq!(served.status, 200, "{}", served.body);
    assert_eq!(served.json()["result"]["content"][0]["text"], "x");
}

#[test]
fn a_session_hosts_body_that_is_not_a_message_is_refused_and_a_pretty_printed_one_is_served() {
    let scratch = Scratch::new("listen-odd-bodies");
    let listening = listen(&scratch, &[]);
    let address = listening.address.as_str();
    let bearer = format!("Bearer {}", listening.token);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let opened = exchange(
        address,
        "POST",
        &[("Authorization", &bearer)],
        &serde_json::to_vec(&initialize).unwrap(),
    );
    assert_eq!(opened.status, 200, "{}", opened.body);
    let session = (opened.head.lines())
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .expect("a session");
    let in_session = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = br#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#;
    assert_eq!(
        exchange(address, "POST", &in_session, initialized).status,
        202
    );
    bounded(async {
        // JSON, but no message (a method that is not a string, a null id): a clear refusal,
        // where such a request used to wait for an answer that never came.
        for odd in [
            r#"{"jsonrpc": "2.0", "id": 9, "method": 5}"#,
            r#"{"jsonrpc": "2.0", "id": null, "method": "tools/list"}"#,
        ] {
            let refused = exchange(address, "POST", &in_session, odd.as_bytes());
            assert_eq!(refused.status, 400, "{odd}: {}", refused.body);
            assert_eq!(refused.json()["error"]["code"], -32600, "{}", refused.body);
        }
        // Line ends anywhere JSON allows them.
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "fx__echo", "arguments": {"text": "two\nlines"}}});
        let pretty = serde_json::to_vec_pretty(&call).unwrap();
        let served = exchange(address, "POST", &in_session, &pretty);
        assert_eq!(served.status, 200, "{}", served.body);
        assert_eq!(served.json()["result"]["content"][0]["text"], "two\nlines");
    });
}

/// A raw 2025-06-18 host's session, its handshake done: its `Mcp-Session-Id`.
pub(crate) fn open_session(address: &str, bearer: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let body = serde_json::to_vec(&initialize).unwrap();
    let opened = exchange(address, "POST", &[("Authorization", bearer)], &body);
    assert_eq!(opened.status, 200, "{}", opened.body);
    let session = (opened.head.lines())
        .find_map(|line| {
            line.to_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(str::to_owned)
        })
        .expect("a session id");
    let headers = [
        ("Authorization", bearer),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let body = serde_json::to_vec(&initialized).unwrap();
    assert_eq!(exchange(address, "POST", &headers, &body).status, 202);
    session
}

#[test]
fn a_session_host_hanging_up_mid_call_cancels_the_backend_call_and_64_calls_are_its_most() {
    let scratch = Scratch::new("listen-hangup");
    let listening = listen(&scratch, &[]);
    let address = listening.address.as_str();
    let bearer = format!("Bearer {}", listening.token);
    let session = open_session(address, &bearer);
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", session.as_str()),
    ];

    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "fx__sleep", "arguments": {"ms": 60000}}});
    let mut stream = TcpStream::connect(address).unwrap();
    let request = raw_request(
        address,
        "POST",
        &headers,
        &serde_json::to_vec(&call).unwrap(),
    );
    stream.write_all(&request).unwrap();
    wait_for_log(&listening.log, "\"sleep\"");
    drop(stream);
    wait_for_log(&listening.log, "notifications/cancelled");

    // 64 requests of one host at once at most: one more is refused, not queued.
    let calls: Vec<TcpStream> = (0..64)
        .map(|n| {
            let call = json!({"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call",
                "params": {"name": "fx__sleep", "arguments": {"ms": 60000}}});
            let mut stream = TcpStream::connect(address).unwrap();
            let body = serde_json::to_vec(&call).unwrap();
            stream
                .write_all(&raw_request(address, "POST", &headers, &body))
                .unwrap();
            stream
        })
        .collect();
    bounded(async {
        loop {
            let text = std::fs::read_to_string(&listening.log).unwrap_or_default();
            if text
                .lines()
                .filter(|line| line.contains("\"sleep\""))
                .count()
                >= 65
            {
                return;
            }
            smol::Timer::after(Duration::from_millis(20)).await;
        }
    });
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "fx__echo", "arguments": {"text": "one more"}}});
    let body = serde_json::to_vec(&call).unwrap();
    let refused = exchange(address, "POST", &headers, &body);
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.body.contains("retry later"), "{}", refused.body);
    drop(calls);

    // DELETE ends the session; it is then unknown.
    let ended = exchange(address, "DELETE", &headers, b"");
    assert_eq!(ended.status, 200);
    let ping = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 8, "method": "ping"})).unwrap();
    assert_eq!(exchange(address, "POST", &headers, &ping).status, 404);
}

#[test]
fn a_session_deleted_mid_call_answers_the_call_with_an_error_and_cancels_it_at_the_backend() {
    let scratch = Scratch::new("listen-delete-mid-call");
    let listening = listen(&scratch, &[]);
    let address = listening.address.clone();
    let bearer = format!("Bearer {}", listening.token);
    let session = open_session(&address, &bearer);
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", session.as_str()),
    ];

    let call = std::thread::spawn({
        let (address, bearer, session) = (address.clone(), bearer.clone(), session.clone());
        move || {
            let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "fx__sleep", "arguments": {"ms": 60000}}});
            let headers = [
                ("Authorization", bearer.as_str()),
                ("Mcp-Session-Id", session.as_str()),
            ];
            exchange(
                &address,
                "POST",
                &headers,
                &serde_json::to_vec(&call).unwrap(),
            )
        }
    });
    wait_for_log(&listening.log, "\"sleep\"");
    assert_eq!(exchange(&address, "DELETE", &headers, b"").status, 200);
    // Answered now, not when the minute's sleep would have ended.
    let answer = call.join().unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer = answer.json();
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(7), json!(-32603))
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session ended"),
        "{answer}"
    );
    wait_for_log(&listening.log, "notifications/cancelled");
}

/// SIGTERM to serve, then: the call in flight is answered, and serve exits 0 (with what it
/// said on stderr).
fn terminate_with_a_call_in_flight(extra_env: &[(&str, &str)], ms: u64) -> (Answer, i32, String) {
    let scratch = Scratch::new(&format!("listen-sigterm-{ms}"));
    let mut listening = listen(&scratch, extra_env);
    let address = listening.address.clone();
    let bearer = format!("Bearer {}", listening.token);
    let call = std::thread::spawn(move || {
        let body = stateless_call(3, "sleep", json!({"ms": ms}));
        let headers = [
            ("Authorization", bearer.as_str()),
            STATELESS[0],
            STATELESS[1],
        ];
        exchange(&address, "POST", &headers, &body)
    });
    wait_for_log(&listening.log, "\"sleep\"");
    let (code, stderr) = listening.terminate();
    let answer = call.join().unwrap();
    (answer, code, stderr)
}

#[test]
fn sigterm_answers_the_call_in_flight_then_exits_0() {
    let (answer, code, stderr) = terminate_with_a_call_in_flight(&[], 500);
    assert!(
        stderr.contains("stopping; waiting for the 1 request in flight"),
        "{stderr}"
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_ne!(answer.json()["result"]["isError"], true, "{}", answer.body);
    assert!(
        answer.json()["result"]["content"].is_array(),
        "{}",
        answer.body
    );
    assert_eq!(code, 0);
}

#[test]
fn sigterm_fails_a_call_that_outlasts_the_grace_with_an_error_then_exits_0() {
    let (answer, code, _) =
        terminate_with_a_call_in_flight(&[("MCP_CLI_STOP_GRACE_MS", "200")], 60000);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let message = answer.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("stopping"), "{}", answer.body);
    assert_eq!(code, 0);
}

#[test]
fn sigterm_with_nothing_in_flight_waits_for_nothing() {
    let scratch = Scratch::new("listen-sigterm-idle");
    let mut listening = listen(&scratch, &[]);
    // A call answered before the stop is not in flight.
    let bearer = format!("Bearer {}", listening.token);
    let body = stateless_call(3, "echo", json!({"text": "hi"}));
    let headers = [
        ("Authorization", bearer.as_str()),
        STATELESS[0],
        STATELESS[1],
    ];
    let answered = exchange(&listening.address, "POST", &headers, &body);
    assert_eq!(answered.status, 200, "{}", answered.body);
    let (code, stderr) = listening.terminate();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("mcp-cli serve: stopping; no requests in flight"),
        "{stderr}"
    );
    assert!(!stderr.contains("waiting for"), "{stderr}");
}

/// A TypeScript SDK v2 host over Streamable HTTP at `era` (a pinned revision, `legacy` for the
/// handshake era, or `auto`):
/// connect with the token, list, call, close.
const TS_HOST: &str = r#"
const [pkg, url, token, era] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = await import(`${pkg}/dist/index.mjs`);
const print = (step, value) => console.log(JSON.stringify({ step, ...value }));
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const mode = era === "auto" || era === "legacy" ? era : { pin: era };
const client = new Client({ name: "ts-http", version: "1" }, { versionNegotiation: { mode } });
await client.connect(transport);
print("connected", { version: client.getNegotiatedProtocolVersion?.() ?? null });
const names = (await client.listTools()).tools.map((tool) => tool.name);
print("list", { names });
const echoed = await client.callTool({ name: "fx__echo", arguments: { text: "hi over http" } });
print("echo", { text: echoed.content.map((item) => item.text ?? "").join("") });
await client.close();
"#;

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn typescript_sdk_v2_host_over_http_in_both_eras() {
    let (node, package) = mcp_tests::ts_client();
    let scratch = Scratch::new("listen-ts");
    let listening = listen(&scratch, &[]);
    let script = scratch.write("host.mjs", TS_HOST);
    for era in ["legacy", "2026-07-28", "auto"] {
        let output = Command::new(&node)
            .arg(&script)
            .arg(&package)
            .args([&listening.url, &listening.token, era])
            .current_dir(&scratch.0)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{era}:\n{stdout}\n{stderr}");
        let lines: Vec<Value> = (stdout.lines())
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let step = |name: &str| {
            let found = lines.iter().find(|line| line["step"] == name);
            found
                .unwrap_or_else(|| panic!("{era}: no step {name} in {stdout}"))
                .clone()
        };
        let version = step("connected")["version"].clone();
        match era {
            "legacy" => assert!(version.as_str().is_some_and(|v| v < "2026"), "{stdout}"),
            "auto" => {}
            pinned => assert_eq!(version, pinned, "{stdout}"),
        }
        let names = step("list")["names"].clone();
        assert!(
            names.as_array().unwrap().contains(&json!("fx__echo")),
            "{names}"
        );
        assert_eq!(step("echo")["text"], "hi over http", "{stdout}");
    }
}
