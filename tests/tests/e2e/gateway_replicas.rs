//! Two `mcp-cli serve --listen` replicas behind a real haproxy in round-robin HTTP mode, each
//! with its own state folder and its own fixture backend, sharing the bearer token and a
//! replica key (`MCP_CLI_REPLICA_KEY_FILE`): stateless-era calls spread over both, a replica
//! killed mid-call costs no later call, an input round begun on one replica is answered on
//! the other (even once the first is gone), a task made through one is waited on through the
//! other, a key rotates with rounds in flight, a handshake-era session sticks to its replica,
//! and a host's forged, altered or moved state or task handle reaches no server. Beside them,
//! without haproxy: `--allowed-host` and the replica key's checks at start.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_smol::serde_json::{Value, json};

use crate::gateway_listen::listen_configured;
use crate::gateway_listen::{
    Answer, Listening, STATELESS, exchange, listen_on, open_session, raw_request, read_answer,
};
use crate::support::{FIXTURE, Scratch};

/// The tasks extension a stateless-era host declares to be handed tasks.
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Polls `found` every 20 ms until it gives something, failing the test with `what` (and the
/// last thing seen) once `limit` has passed: every wait here is for a condition, bounded.
fn poll_until<T>(what: &str, limit: Duration, mut found: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match found() {
            Ok(found) => return found,
            Err(seen) if Instant::now() >= deadline => {
                panic!("{what}: not within {limit:?}; last seen: {seen}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// haproxy in the foreground (`-db`) on a config of ours; killed when dropped.
struct Haproxy {
    child: Child,
    /// Its stats socket, asked which servers it counts as up.
    stats: PathBuf,
    /// Where its stderr goes, for a failure's message.
    log: PathBuf,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Haproxy {
    /// haproxy's `show stat` on its stats socket: one CSV line per proxy and server.
    fn show_stat(&self) -> Result<String, String> {
        let mut socket = std::os::unix::net::UnixStream::connect(&self.stats)
            .map_err(|error| format!("stats socket: {error}"))?;
        socket
            .write_all(b"show stat\n")
            .map_err(|error| error.to_string())?;
        let mut text = String::new();
        socket
            .read_to_string(&mut text)
            .map_err(|error| error.to_string())?;
        Ok(text)
    }

    /// The `status` column of each server of backend `replicas`, by server name.
    fn statuses(&self) -> Result<Vec<(String, String)>, String> {
        let text = self.show_stat()?;
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        let names: Vec<&str> = header.trim_start_matches("# ").split(',').collect();
        let column = |name: &str| names.iter().position(|n| *n == name);
        let (Some(proxy), Some(server), Some(status)) =
            (column("pxname"), column("svname"), column("status"))
        else {
            return Err(format!("no stats header in {text:?}"));
        };
        Ok(lines
            .map(|line| line.split(',').collect::<Vec<_>>())
            .filter(|row| row.get(proxy) == Some(&"replicas"))
            .filter(|row| !["FRONTEND", "BACKEND"].contains(&row[server]))
            .map(|row| (row[server].to_owned(), row[status].to_owned()))
            .collect())
    }

    /// What haproxy wrote on stderr so far.
    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The config: round robin over the two replicas, each request balanced on its own, and a
/// request whose replica is gone sent to the other.
fn haproxy_config(port: u16, stats: &Path, servers: [&str; 2]) -> String {
    let servers: String = (servers.iter())
        .map(|address| {
            // A TCP connect every 100 ms, one failure down and one success up: a killed
            // replica is out of the rotation within a check or two.
            format!("    server {address} {address} check inter 100ms fall 1 rise 1\n")
        })
        .collect();
    // What the gateway chapter gives (docs/gateway.md, "Replicas"), on these ports, with a
    // stats socket for the tests and quicker checks.
    format!(
        "global
    stats socket {stats} mode 600 level user

defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    # A new connection to the replica for each request: no request rides a kept-alive
    # connection, so round robin decides every one, and none is sent on a connection that
    # a killed replica left half-open.
    option http-server-close
    # A connection refused (a replica killed before its check noticed) is tried again, on
    # the other replica from the first retry on. A request the replica took and never
    # answered is not sent again: a tool call may have done its work already.
    retries 3
    option redispatch 1
    retry-on conn-failure

frontend front
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    # Handshake-era hosts: a session stays on the replica that opened it.
    stick-table type string len 64 size 100k expire 1h
    stick store-response res.hdr(mcp-session-id)
    stick match req.hdr(mcp-session-id)
{servers}",
        stats = stats.display(),
    )
}

/// A port nobody listens on now: the kernel's pick for a listener dropped at once.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// 32 random bytes as 64 hex characters.
fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut bytes)
        .unwrap();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Writes `text` to a new file at `path`, mode 0600 from its creation.
fn write_private(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// Two replicas of `serve --listen` and haproxy in front of them.
struct Replicas {
    haproxy: Haproxy,
    /// A and B, in the order haproxy lists them.
    replicas: Vec<Listening>,
    /// haproxy's frontend, `127.0.0.1:PORT`: where the hosts here send everything.
    address: String,
    bearer: String,
    /// The key file both replicas seal with.
    key: PathBuf,
    /// Each replica's own scratch folder (its state folder and config inside), kept until
    /// the replicas are gone; removed with the root.
    _homes: Vec<Scratch>,
    _root: Scratch,
}

impl Replicas {
    /// The replicas with the fixture in `mode` (its first arguments) as `fx`, each logging
    /// what it receives to its own file, and haproxy with both of them up.
    fn start(name: &str, mode: &[&str]) -> Self {
        let root = Scratch::new(&format!("replicas-{name}"));
        let key_file = root.0.join("replica-key");
        write_private(&key_file, &format!("{}\n", random_hex()));
        let key = key_file.display().to_string();
        // haproxy passes on the `Host` the hosts send, its own address: each replica is told
        // that name is one it is reached by.
        let port = free_port();
        let front = format!("127.0.0.1:{port}");
        let shared = [
            ("MCP_CLI_REPLICA_KEY_FILE", key.as_str()),
            ("MCP_CLI_ALLOWED_HOSTS", front.as_str()),
        ];
        let mut homes = Vec::new();
        let mut replicas: Vec<Listening> = Vec::new();
        for which in ["a", "b"] {
            let home = Scratch(root.0.join(which));
            std::fs::create_dir_all(&home.0).unwrap();
            if let Some(first) = replicas.first() {
                // The second replica takes the first one's token, as an operator copies
                // it: its state folder and the file made as mcp-cli makes them (0700,
                // 0600), so it is used rather than replaced.
                let state = home.0.join("state/mcp-cli");
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&state)
                    .unwrap();
                write_private(&state.join("listen-token"), &format!("{}\n", first.token));
            }
            let log = home.0.join("received.log");
            let mut args: Vec<String> = mode.iter().map(|word| (*word).to_owned()).collect();
            args.extend(["--log-received".to_owned(), log.display().to_string()]);
            let config = home.write(
                "listen.toml",
                &format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = {args:?}\n"),
            );
            replicas.push(listen_on(&home, &config, log, &shared));
            homes.push(home);
        }
        // `listen_on` read each token back with `serve --print-token` in its own state.
        assert_eq!(replicas[0].token, replicas[1].token, "one token for both");
        let bearer = format!("Bearer {}", replicas[0].token);

        let stats = root.0.join("haproxy.sock");
        let servers = [replicas[0].address.as_str(), replicas[1].address.as_str()];
        let config = root.write("haproxy.cfg", &haproxy_config(port, &stats, servers));
        let log = root.0.join("haproxy.log");
        let child = Command::new("haproxy")
            .arg("-f")
            .arg(&config)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("haproxy: {error}: these tests need haproxy on PATH (Debian: haproxy)")
            });
        let mut haproxy = Haproxy { child, stats, log };
        let wanted: Vec<(String, String)> = (servers.iter())
            .map(|server| ((*server).to_owned(), "UP".to_owned()))
            .collect();
        poll_until(
            "haproxy counting both replicas up",
            Duration::from_secs(20),
            || {
                if let Ok(Some(status)) = haproxy.child.try_wait() {
                    return Ok(Err(format!("haproxy exited {status}: {}", haproxy.said())));
                }
                let statuses = haproxy.statuses()?;
                match statuses == wanted {
                    true => Ok(Ok(())),
                    false => Err(format!("{statuses:?}")),
                }
            },
        )
        .unwrap_or_else(|exited| panic!("{exited}"));
        // The frontend is bound before the stats socket answers; a connection says so.
        let address = format!("127.0.0.1:{port}");
        TcpStream::connect(&address).unwrap_or_else(|error| {
            panic!("haproxy's frontend {address}: {error}: {}", haproxy.said())
        });
        Self {
            haproxy,
            replicas,
            address,
            bearer,
            key: key_file,
            _homes: homes,
            _root: root,
        }
    }

    /// Replica `which`'s backend log: every line its fixture received.
    fn log(&self, which: usize) -> String {
        std::fs::read_to_string(&self.replicas[which].log).unwrap_or_default()
    }

    /// How many lines of replica `which`'s backend log hold `needle`.
    fn count(&self, which: usize, needle: &str) -> usize {
        let log = self.log(which);
        log.lines().filter(|line| line.contains(needle)).count()
    }

    /// The replicas whose backends received a line holding `needle`.
    fn served(&self, needle: &str) -> Vec<usize> {
        (0..self.replicas.len())
            .filter(|which| self.count(*which, needle) > 0)
            .collect()
    }

    /// The one replica whose backend received `needle`, once one has (bounded).
    fn serving(&self, needle: &str) -> usize {
        poll_until(
            &format!("a backend receiving {needle}"),
            Duration::from_secs(30),
            || match self.served(needle).as_slice() {
                [one] => Ok(*one),
                other => Err(format!("received by {other:?}")),
            },
        )
    }

    /// The headers of a stateless-era `method` through haproxy, with the token.
    fn headers<'a>(&'a self, method: &'a str) -> [(&'a str, &'a str); 3] {
        [
            ("Authorization", self.bearer.as_str()),
            STATELESS[0],
            ("Mcp-Method", method),
        ]
    }

    /// A stateless-era request through haproxy, on a new connection; its whole answer. An
    /// answer that takes more than 30 s fails the test rather than hanging it.
    fn post(&self, method: &str, body: &[u8]) -> Answer {
        let started = Instant::now();
        let answer = exchange_within(
            &self.address,
            &self.headers(method),
            body,
            Duration::from_secs(30),
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{method} through haproxy was not answered within 30 s"
        );
        answer
    }

    /// A `tools/call` of the fixture's `tool` through haproxy, from a host of `capabilities`.
    fn call(&self, id: u64, tool: &str, arguments: Value, capabilities: Value) -> Answer {
        let params = json!({"name": format!("fx__{tool}"), "arguments": arguments});
        self.post(
            "tools/call",
            &request(id, "tools/call", params, capabilities),
        )
    }
}

/// `POST /mcp` on a new connection to `address`, its answer read for at most `limit`; the
/// connection closed or reset ends the answer (status 0 when nothing came), and so does the
/// limit, which the caller tells apart by the time taken.
fn exchange_within(
    address: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    limit: Duration,
) -> Answer {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(limit)).unwrap();
    stream
        .write_all(&raw_request(address, "POST", headers, body))
        .unwrap();
    read_answer(&mut stream)
}

/// A stateless-era request of a raw host: `params` with the `_meta` the era requires, the
/// host declaring `capabilities`.
fn request(id: u64, method: &str, mut params: Value, capabilities: Value) -> Vec<u8> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    serde_json::to_vec(&message).unwrap()
}

/// The text of a `tools/call` answer's one text item; the test fails on anything else.
fn echoed(answer: &Answer) -> String {
    assert_eq!(answer.status, 200, "{}\n{}", answer.head, answer.body);
    let text = &answer.json()["result"]["content"][0]["text"];
    (text.as_str())
        .unwrap_or_else(|| panic!("no text result: {}", answer.body))
        .to_owned()
}

#[test]
#[cfg_attr(no_haproxy, ignore = "needs haproxy on PATH (Debian: haproxy)")]
fn requests_through_haproxy_alternate_between_the_two_replicas() {
    let replicas = Replicas::start("spread", &["good"]);
    let mut order = Vec::new();
    for n in 0..6 {
        let text = format!("spread-{n}");
        let answer = replicas.call(n, "echo", json!({"text": text}), json!({}));
        assert_eq!(echoed(&answer), text);
        // Answered, so its backend has logged it: exactly one of the two did.
        let served = replicas.served(&format!("\"{text}\""));
        assert_eq!(served.len(), 1, "{text} reached {served:?}");
        order.push(served[0]);
    }
    // Round robin: each call on the other replica than the one before, so both served.
    assert!(
        order.windows(2).all(|pair| pair[0] != pair[1]),
        "replicas in turn: {order:?}"
    );
}

#[test]
#[cfg_attr(no_haproxy, ignore = "needs haproxy on PATH (Debian: haproxy)")]
fn a_replica_killed_mid_run_loses_no_call_the_other_can_serve() {
    let mut replicas = Replicas::start("killed", &["good"]);
    let (address, bearer) = (replicas.address.clone(), replicas.bearer.clone());
    // A minute's sleep: only the replica's death ends it within the test.
    let slow = std::thread::spawn(move || {
        let headers = [
            ("Authorization", bearer.as_str()),
            STATELESS[0],
            STATELESS[1],
        ];
        let sleep = json!({"name": "fx__sleep", "arguments": {"ms": 60000}});
        let body = request(1, "tools/call", sleep, json!({}));
        let started = Instant::now();
        let answer = exchange_within(&address, &headers, &body, Duration::from_secs(20));
        (answer, started.elapsed())
    });
    let doomed = replicas.serving("\"sleep\"");
    let survivor = 1 - doomed;
    replicas.replicas[doomed].child.kill().unwrap();
    replicas.replicas[doomed].child.wait().unwrap();

    // The call in flight on the killed replica is over: an error from haproxy or the
    // connection closed, at once and not after the sleep, and not run again elsewhere.
    let (answer, took) = slow.join().unwrap();
    assert!(
        took < Duration::from_secs(20),
        "the call in flight hung: {took:?}"
    );
    assert_ne!(answer.status, 200, "{}\n{}", answer.head, answer.body);
    assert!(
        answer.status == 0 || answer.status >= 500,
        "{}\n{}",
        answer.head,
        answer.body
    );
    assert_eq!(
        replicas.count(survivor, "\"sleep\""),
        0,
        "{}",
        replicas.log(survivor)
    );

    // Every call after the kill is answered, by the survivor, whether or not haproxy's
    // check has seen the killed replica go yet.
    for n in 0..10 {
        let text = format!("after-{n}");
        let answer = replicas.call(10 + n, "echo", json!({"text": text}), json!({}));
        assert_eq!(echoed(&answer), text, "call {n} after the kill");
        assert_eq!(
            replicas.served(&format!("\"{text}\"")),
            [survivor],
            "{text}"
        );
    }
    // And haproxy's check has taken the killed replica out of the rotation.
    poll_until(
        "haproxy counting the killed replica down",
        Duration::from_secs(10),
        || {
            let statuses = replicas.haproxy.statuses()?;
            match statuses[doomed].1.as_str() {
                "DOWN" => Ok(()),
                _ => Err(format!("{statuses:?}")),
            }
        },
    );
}

#[test]
#[cfg_attr(no_haproxy, ignore = "needs haproxy on PATH (Debian: haproxy)")]
fn an_input_round_started_on_one_replica_is_answered_on_the_other() {
    let replicas = Replicas::start("round", &["list-changed", "--era", "stateless"]);
    // A host that takes forms: its backend's question comes back as an input round.
    let forms = json!({"elicitation": {}});
    let asked = replicas.call(1, "ask", json!({}), forms.clone());
    assert_eq!(asked.status, 200, "{}", asked.body);
    let result = asked.json()["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{}", asked.body);
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "one question: {}", asked.body);
    let (key, question) = requests.iter().next().unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    let first = replicas.serving("\"ask\"");

    // The retry goes to the other replica (round robin), which has no call waiting.
    let retry = json!({"name": "fx__ask", "arguments": {},
        "inputResponses": {key.as_str(): {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": state});
    let answered = replicas.post("tools/call", &request(2, "tools/call", retry, forms));
    assert_eq!(
        answered.json()["result"]["content"][0]["text"],
        r#"accept {"name":"Ada"}"#,
        "{}",
        answered.body
    );
    let other = 1 - first;
    assert!(
        replicas.count(other, "\"ask\"") > 0,
        "the retry reached the other replica's backend: {}",
        replicas.log(other)
    );
    assert!(
        replicas.log(other).contains("inputResponses"),
        "the other replica's backend got the answer: {}",
        replicas.log(other)
    );
    assert!(
        !replicas.log(first).contains("inputResponses"),
        "{}",
        replicas.log(first)
    );
}

#[test]
#[cfg_attr(no_haproxy, ignore = "needs haproxy on PATH (Debian: haproxy)")]
fn a_task_created_on_one_replica_is_waited_on_through_the_other() {
    // Each replica's backend is a process of its own, which alone knows its tasks.
    let replicas = Replicas::start("task", &["tasks", "--era", "stateless"]);
    let takes_tasks = json!({"extensions": {TASKS_EXTENSION: {}}});
    let made = replicas.call(1, "task_sleep", json!({"ms": 1500}), takes_tasks.clone());
    assert_eq!(made.status, 200, "{}", made.body);
    let task = made.json()["result"].clone();
    assert_eq!(task["resultType"], "task", "{}", made.body);
    assert_eq!(task["status"], "working", "{}", made.body);
    let id = task["taskId"].as_str().unwrap().to_owned();
    // Sealed, naming the replica it runs on, rather than `fx/task-N`.
    assert!(id.starts_with("mcp-cli-task1."), "{id}");
    let maker = replicas.serving("\"task_sleep\"");

    // Polled through haproxy, so on each replica in turn, the first on the other one than
    // the task's maker, which forwards it: every answer is the task, and every request
    // reaches the maker's backend.
    let other = 1 - maker;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut polls = 0;
    let done = loop {
        assert!(Instant::now() < deadline, "task {id} not completed in 30 s");
        polls += 1;
        let params = json!({"taskId": id});
        let answer = replicas.post(
            "tasks/get",
            &request(polls + 1, "tasks/get", params, takes_tasks.clone()),
        );
        assert_eq!(answer.status, 200, "poll {polls}: {}", answer.body);
        let task = answer.json()["result"].clone();
        assert_eq!(task["taskId"], id.as_str(), "poll {polls}: {}", answer.body);
        assert_eq!(
            replicas.count(maker, "\"tasks/get\""),
            polls as usize,
            "poll {polls}: {}",
            replicas.log(maker)
        );
        match task["status"].as_str() {
            Some("completed") => break task,
            Some("working") => {}
            _ => panic!("poll {polls}: {}", answer.body),
        }
        // The interval the backend suggests.
        let interval = task["pollIntervalMs"].as_u64().unwrap_or(100);
        std::thread::sleep(Duration::from_millis(interval));
    };
    assert_eq!(
        done["result"]["content"][0]["text"], "slept 1500 ms",
        "{done}"
    );
    // The other replica's own backend never heard of it: its polls were forwarded.
    assert_eq!(
        replicas.count(other, "\"tasks/get\""),
        0,
        "{}",
        replicas.log(other)
    );
}

/// The `input_required` round of an answer: its one question's key, and its state.
fn round_of(answer: &Answer) -> (String, String) {
    assert_eq!(answer.status, 200, "{}", answer.body);
    let result = &answer.json()["result"];
    assert_eq!(result["resultType"], "input_required", "{}", answer.body);
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "one question: {}", answer.body);
    let key = requests.keys().next().unwrap().clone();
    (key, result["requestState"].as_str().unwrap().to_owned())
}

/// `fx__ask`'s retry, answering `key` with a name, under `state`.
fn ask_retry(key: &str, state: &str, arguments: Value) -> Value {
    json!({"name": "fx__ask", "arguments": arguments,
        "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": state})
}

/// The JSON-RPC error of an answer: its code and message.
fn error_of(answer: &Answer) -> (i64, String) {
    let error = &answer.json()["error"];
    let message = error["message"].as_str().unwrap_or_default().to_owned();
    (error["code"].as_i64().unwrap_or_default(), message)
}

#[test]
#[cfg_attr(no_haproxy, ignore = "needs haproxy on PATH (Debian: haproxy)")]
fn a_round_outlives_the_replica_that_began_it() {
    let mut replicas = Replicas::start("round-killed", &["list-changed", "--era", "stateless"]);
    let forms = json!({"elicitation": {}});
    let (key, state) = round_of(&replicas.call(1, "ask", json!({}), forms.clone()));
    let began = replicas.serving("\"ask\"");
    replicas.replicas[began].child.kill().unwrap();
    replicas.replicas[began].child.wait().unwrap();
    // Whichever replica haproxy tries first, the survivor answers: the state is all it needs.
    let retry = request(2, "tools/call", ask_retry(&key, &state, json!({})), forms);
    let answered = replicas.post("tools/call", &retry);
    assert_eq!(echoed(&answered), r#"accept {"name":"Ada"}"#);
    assert!(replicas.log(1 - began).contains("inputResponses"));
}

#[test]
#[cfg_attr(no_haproxy, ignore = "needs haproxy on PATH (Debian: haproxy)")]
fn a_state_altered_moved_to_other_arguments_or_to_another_host_is_refused_and_reaches_no_server() {
    let replicas = Replicas::start("round-refusals", &["list-changed", "--era", "stateless"]);
    let forms = json!({"elicitation": {}});
    let (key, state) = round_of(&replicas.call(1, "ask", json!({}), forms.clone()));
    let asked = || replicas.count(0, "\"ask\"") + replicas.count(1, "\"ask\"");
    assert_eq!(asked(), 1);

    // One character of the payload changed.
    let at = state.find('.').unwrap() + 20;
    let flipped = if &state[at..=at] == "A" { "B" } else { "A" };
    let altered = format!("{}{flipped}{}", &state[..at], &state[at + 1..]);
    // The same tool with other arguments: the answers would approve something else.
    let moved = ask_retry(&key, &state, json!({"path": "/etc/shadow"}));
    let cases = [
        (
            ask_retry(&key, &altered, json!({})),
            "raw",
            "does not match its seal",
        ),
        (moved, "raw", "with other arguments"),
        (
            ask_retry(&key, &state, json!({})),
            "another",
            "of another host",
        ),
        (
            ask_retry(&key, "mcp-cli-1-0123", json!({})),
            "raw",
            "not one this gateway made",
        ),
    ];
    for (n, (params, host, why)) in cases.into_iter().enumerate() {
        let mut body: Value =
            serde_json::from_slice(&request(10, "tools/call", params, forms.clone())).unwrap();
        body["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"] = json!(host);
        for _ in 0..2 {
            // Through both replicas: neither takes it.
            let refused = replicas.post("tools/call", &serde_json::to_vec(&body).unwrap());
            let (code, message) = error_of(&refused);
            assert_eq!(code, -32602, "case {n}: {}", refused.body);
            assert!(message.contains(why), "case {n}: {message}");
        }
    }
    assert_eq!(asked(), 1, "nothing refused reached a server");

    // A forged task handle is refused before any server hears of it.
    let takes_tasks = json!({"extensions": {TASKS_EXTENSION: {}}});
    let forged = "mcp-cli-task1.00000000.eyJzZXJ2ZXIiOiJmeCJ9.AAAA";
    let params = json!({"taskId": forged});
    let refused = replicas.post("tasks/get", &request(20, "tasks/get", params, takes_tasks));
    let (code, message) = error_of(&refused);
    assert_eq!(code, -32602, "{}", refused.body);
    assert!(message.contains("unknown task"), "{message}");
    assert_eq!(replicas.served("tasks/get"), Vec::<usize>::new());
}

#[test]
#[cfg_attr(no_haproxy, ignore = "needs haproxy on PATH (Debian: haproxy)")]
fn a_key_rotated_in_place_keeps_rounds_in_flight_and_a_retired_one_opens_nothing() {
    let replicas = Replicas::start("rotation", &["list-changed", "--era", "stateless"]);
    let forms = json!({"elicitation": {}});
    let (key, sealed_before) = round_of(&replicas.call(1, "ask", json!({}), forms.clone()));
    // A new key on top, the old one kept below: both replicas read the file again.
    let old = std::fs::read_to_string(&replicas.key).unwrap();
    let new = random_hex();
    std::fs::write(&replicas.key, format!("{new}\n{old}")).unwrap();
    let (later_key, sealed_after) = round_of(&replicas.call(2, "ask", json!({}), forms.clone()));
    assert_ne!(
        sealed_before.split('.').nth(1),
        sealed_after.split('.').nth(1),
        "the new key seals"
    );
    let before = ask_retry(&key, &sealed_before, json!({}));
    let retry = request(3, "tools/call", before.clone(), forms.clone());
    assert_eq!(
        echoed(&replicas.post("tools/call", &retry)),
        r#"accept {"name":"Ada"}"#
    );

    // The old key retired: what it sealed opens on neither replica; what the new one sealed
    // still does.
    std::fs::write(&replicas.key, format!("# rotated\n{new}\n")).unwrap();
    for id in [4, 5] {
        let retry = request(id, "tools/call", before.clone(), forms.clone());
        let refused = replicas.post("tools/call", &retry);
        let (code, message) = error_of(&refused);
        assert_eq!(code, -32602, "{}", refused.body);
        assert!(message.contains("no longer holds"), "{message}");
    }
    let after = ask_retry(&later_key, &sealed_after, json!({}));
    let retry = request(6, "tools/call", after, forms);
    assert_eq!(
        echoed(&replicas.post("tools/call", &retry)),
        r#"accept {"name":"Ada"}"#
    );
}

#[test]
#[cfg_attr(no_haproxy, ignore = "needs haproxy on PATH (Debian: haproxy)")]
fn a_handshake_era_session_stays_on_the_replica_that_opened_it() {
    let replicas = Replicas::start("sticky", &["good"]);
    let session = open_session(&replicas.address, &replicas.bearer);
    let mut opened_on = None;
    let headers = [
        ("Authorization", replicas.bearer.as_str()),
        ("Mcp-Session-Id", session.as_str()),
    ];
    for n in 0..4 {
        let text = format!("sticky-{n}");
        let call = json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
            "params": {"name": "fx__echo", "arguments": {"text": text}}});
        let body = serde_json::to_vec(&call).unwrap();
        let answer = exchange(&replicas.address, "POST", &headers, &body);
        assert_eq!(echoed(&answer), text, "call {n} of the session");
        // Every call where the first went (a session asked elsewhere would be a 404).
        let served = replicas.served(&format!("\"{text}\""));
        assert_eq!(served.len(), 1, "{served:?}");
        assert_eq!(*opened_on.get_or_insert(served[0]), served[0], "call {n}");
    }
}

#[test]
fn a_proxys_name_is_let_in_only_when_allowed() {
    let scratch = Scratch::new("listen-allowed-host");
    let allowed = [(
        "MCP_CLI_ALLOWED_HOSTS",
        "Gateway.Example, other.example:8443",
    )];
    let listening = listen_configured(&scratch, &["good"], "", &allowed);
    let bearer = format!("Bearer {}", listening.token);
    let body = request(
        1,
        "tools/call",
        json!({"name": "fx__echo",
        "arguments": {"text": "through the proxy"}}),
        json!({}),
    );
    let post = |host: &str, origin: Option<&str>| {
        let mut headers = vec![
            ("Host", host),
            ("Authorization", bearer.as_str()),
            STATELESS[0],
            STATELESS[1],
        ];
        headers.extend(origin.map(|origin| ("Origin", origin)));
        exchange(&listening.address, "POST", &headers, &body)
    };
    // A name given without a port is taken on any port; one given with a port, on it alone.
    for host in [
        "gateway.example",
        "GATEWAY.example:443",
        "other.example:8443",
    ] {
        let answer = post(host, None);
        assert_eq!(echoed(&answer), "through the proxy", "Host {host}");
    }
    let answer = post("gateway.example", Some("https://gateway.example"));
    assert_eq!(echoed(&answer), "through the proxy", "a TLS proxy's origin");
    for (host, origin) in [
        ("evil.example", None),
        ("other.example:8444", None),
        ("gateway.example", Some("https://evil.example")),
        ("gateway.example", Some("http://evil.example")),
    ] {
        let refused = post(host, origin);
        assert_eq!(
            refused.status, 403,
            "Host {host}, Origin {origin:?}: {}",
            refused.body
        );
    }
    let received = std::fs::read_to_string(&listening.log).unwrap_or_default();
    let calls = received
        .lines()
        .filter(|line| line.contains("through the proxy"));
    assert_eq!(
        calls.count(),
        4,
        "nothing refused reached the server: {received}"
    );
}

#[test]
fn a_replica_key_others_can_read_short_or_missing_stops_the_start_naming_why() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("listen-replica-key");
    let config = scratch.write(
        "listen.toml",
        &format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\n"),
    );
    let config = config.display().to_string();
    let key = scratch.0.join("replica-key");
    std::fs::write(&key, format!("{}\n", random_hex())).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let short = scratch.write("short-key", "tooshort\n");
    std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
    let missing = scratch.0.join("no-such-key");
    let listen = ["--config", &config, "serve", "--listen", "127.0.0.1:0"];
    // A replica's address without the key it shares names it to nobody.
    let alone =
        scratch.cli(&[&listen[..], &["--replica-url", "http://10.0.0.1:8931/mcp"]].concat());
    assert_eq!(alone.code, 2, "{alone:?}");
    assert!(
        alone.stderr.contains("with --replica-key"),
        "{}",
        alone.stderr
    );
    let bad_url = [&listen[..], &["--replica-url", "https://10.0.0.1/mcp"]].concat();
    let key_file = scratch.write("good-key", &format!("{}\n", random_hex()));
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let key_arg = key_file.display().to_string();
    let refused = scratch.cli(&[&bad_url[..], &["--replica-key", &key_arg]].concat());
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("plain HTTP"), "{}", refused.stderr);
    for (file, why) in [
        (&key, "others than its owner can read or write it"),
        (&short, "shorter than 32 characters"),
        (&missing, "No such file"),
    ] {
        let file = file.display().to_string();
        let with_flag = [&listen[..], &["--replica-key", &file]].concat();
        let by_flag = scratch.cli(&with_flag);
        let by_env = scratch.cli_with(&listen, &[("MCP_CLI_REPLICA_KEY_FILE", &file)], None);
        for run in [by_flag, by_env] {
            assert_eq!(run.code, 2, "{run:?}");
            assert!(run.stderr.contains(why), "{}", run.stderr);
            assert!(!run.stderr.contains("listening on"), "{}", run.stderr);
        }
    }
}
