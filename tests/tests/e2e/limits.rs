//! What one server may cost us: a listing longer than `max_listed` cut to its first entries
//! (one page, many pages, a line parsed as it arrives) with a warning that says so, told again
//! from the catalogue on disk, and the files we write staying small.

use crate::support::{FIXTURE, Run, Scratch};

/// A config running the fixture's `huge-listing` mode as server `huge`, listing `listed` tools
/// (`extra` fixture arguments), keeping `max_listed` of them, the lines the client sends logged.
fn huge(scratch: &Scratch, listed: usize, max_listed: usize, extra: &[&str]) {
    let log = scratch.0.join("received.log");
    let mut args = vec!["huge-listing", "--log-received", log.to_str().unwrap()];
    args.extend(extra);
    let config = format!(
        "[mcp.huge]\ncommand = {FIXTURE:?}\nargs = {args:?}\nenv = {{ MCP_FIXTURE_LISTED = \"{listed}\" }}\nmax_listed = {max_listed}\n"
    );
    scratch.write("config.toml", &config);
}

fn tools(scratch: &Scratch) -> Run {
    let config = scratch.0.join("config.toml");
    scratch.cli(&["--config", config.to_str().unwrap(), "tools", "huge"])
}

/// The tool names `tools` printed, in order.
fn names(run: &Run) -> Vec<String> {
    run.stdout.lines().map(str::to_owned).collect()
}

/// The first `n` names the fixture lists, as `tools` shows them.
fn first(n: usize) -> Vec<String> {
    (0..n).map(|n| format!("huge__tool_{n}")).collect()
}

const WARNING: &str = "mcp-cli: server huge listed more than 100 tools; the first 100 are kept \
                       (`max_listed` in its entry raises the cap)";

/// The size of the largest file under the scratch folder's state folder.
fn largest_state_file(scratch: &Scratch) -> u64 {
    fn walk(dir: &std::path::Path, largest: &mut u64) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                walk(&entry.path(), largest);
            } else {
                *largest = (*largest).max(meta.len());
            }
        }
    }
    let mut largest = 0;
    walk(&scratch.0.join("state"), &mut largest);
    largest
}

/// How many `tools/list` requests the fixture received.
fn list_requests(scratch: &Scratch) -> usize {
    let log = std::fs::read_to_string(scratch.0.join("received.log")).unwrap_or_default();
    log.lines()
        .filter(|line| line.contains("\"tools/list\""))
        .count()
}

#[test]
fn a_listing_past_max_listed_keeps_its_first_entries_and_says_so() {
    let scratch = Scratch::new("limits-one-page");
    huge(&scratch, 1000, 100, &[]);
    let run = tools(&scratch);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(names(&run), first(100), "{run:?}");
    assert!(run.stderr.contains(WARNING), "{run:?}");
    // 100 small tools pinned and catalogued: a few tens of kilobytes at most.
    let largest = largest_state_file(&scratch);
    assert!(largest < 64 * 1024, "a state file of {largest} bytes");

    // Read back from the catalogue on disk, without starting the server: the same warning.
    let again = tools(&scratch);
    assert_eq!(list_requests(&scratch), 1, "answered from disk");
    assert_eq!((again.code, names(&again)), (0, first(100)), "{again:?}");
    assert!(again.stderr.contains(WARNING), "{again:?}");
}

#[test]
fn the_cap_counts_over_all_pages_and_no_page_past_it_is_asked_for() {
    let scratch = Scratch::new("limits-pages");
    huge(&scratch, 1000, 100, &["--page-size", "30"]);
    let run = tools(&scratch);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(names(&run), first(100), "{run:?}");
    assert!(run.stderr.contains(WARNING), "{run:?}");
    // Pages of 0-29, 30-59, 60-89 and 90-119: the fourth holds the 101st, and is the last.
    assert_eq!(list_requests(&scratch), 4);
}

#[test]
fn a_listing_parsed_as_it_arrives_keeps_its_first_entries() {
    let scratch = Scratch::new("limits-long-line");
    // About 1.7 MB in one line: past the 1 MiB from which a line is parsed as it arrives.
    huge(&scratch, 30_000, 100, &[]);
    let run = tools(&scratch);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(names(&run), first(100), "{run:?}");
    assert!(run.stderr.contains(WARNING), "{run:?}");
    assert!(largest_state_file(&scratch) < 64 * 1024);
}

#[test]
fn a_listing_within_max_listed_is_whole_and_quiet() {
    let scratch = Scratch::new("limits-within");
    huge(&scratch, 100, 100, &["--page-size", "50"]);
    let run = tools(&scratch);
    assert_eq!((run.code, names(&run)), (0, first(100)), "{run:?}");
    assert!(!run.stderr.contains("listed more than"), "{run:?}");
}

/// `mcp-cli serve --listen 127.0.0.1:0 --max-connections MAX` on the fixture, with `env`;
/// killed when dropped.
struct Serving {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    address: String,
    token: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(scratch: &Scratch, max: usize, env: &[(&str, &str)]) -> Serving {
    use std::io::BufRead;
    let config = scratch.write("listen.toml", &crate::support::fixture_block("fx", "good"));
    let mut child = std::process::Command::new(crate::support::cli_binary())
        .args(["--config", config.to_str().unwrap(), "serve"])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--max-connections",
            &max.to_string(),
        ])
        .envs(crate::gateway_listen::env(scratch))
        .envs(env.iter().copied())
        .env_remove("MCP_CLI_CONFIG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let address = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "serve ended first"
        );
        if let Some(url) = line
            .trim()
            .strip_prefix("mcp-cli serve: listening on http://")
        {
            break url.trim_end_matches("/mcp").to_owned();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let printed = scratch.cli(&["serve", "--print-token"]);
    assert_eq!(printed.code, 0, "{printed:?}");
    let token = printed.stdout.trim().to_owned();
    Serving {
        child,
        address,
        token,
    }
}

/// A handshake-era `initialize` with the token: what a served connection answers 200.
fn initialize(serving: &Serving) -> crate::gateway_listen::Answer {
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let bearer = format!("Bearer {}", serving.token);
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Accept", "application/json, text/event-stream"),
    ];
    crate::gateway_listen::exchange(&serving.address, "POST", &headers, body)
}

#[test]
fn a_connection_past_max_connections_is_refused_with_503_until_one_closes() {
    use std::net::TcpStream;
    let scratch = Scratch::new("limits-connections");
    let serving = serve(&scratch, 4, &[]);
    // Four idle connections: accepted in order, each holds a place (idle ones close after
    // 30 s, longer than this test).
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(&serving.address).unwrap())
        .collect();
    let refused = initialize(&serving);
    assert_eq!(refused.status, 503, "{}\n{}", refused.head, refused.body);
    assert!(refused.head.contains("Retry-After: 1"), "{}", refused.head);
    assert!(
        refused
            .body
            .contains("4 connections are open, the most --max-connections allows"),
        "{}",
        refused.body
    );

    // One closes: its place is free once the server has seen it go, and the next is served.
    drop(held.pop());
    let served = once_room(&serving);
    assert_eq!(served.status, 200, "{}\n{}", served.head, served.body);
    assert!(served.json()["result"]["protocolVersion"].is_string());
}

/// [`initialize`] again while it is refused for want of room, as a host told `Retry-After`
/// would (for at most 10 s): the server frees a place once it has seen a connection close.
fn once_room(serving: &Serving) -> crate::gateway_listen::Answer {
    for _ in 0..200 {
        let answer = initialize(serving);
        if answer.status != 503 {
            return answer;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no place came free");
}

#[test]
fn an_idle_connection_is_closed_after_the_idle_timeout() {
    use std::io::Read;
    let scratch = Scratch::new("limits-idle");
    let serving = serve(&scratch, 4, &[("MCP_CLI_IDLE_TIMEOUT_MS", "200")]);
    let mut idle = std::net::TcpStream::connect(&serving.address).unwrap();
    // Far longer than the timeout (which fires within the timer's one-second resolution),
    // far shorter than the 30 s default: the read ends because the server closed.
    idle.set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .unwrap();
    let mut bytes = Vec::new();
    let read = idle.read_to_end(&mut bytes);
    assert!(read.is_ok(), "still open: {read:?}");
    // Its place is free again.
    let served = once_room(&serving);
    assert_eq!(served.status, 200, "{}", served.head);
}
