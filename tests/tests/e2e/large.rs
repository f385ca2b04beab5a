//! Results too large to print: `call --max-output` and `max_result_bytes` spill the whole
//! result to a file and print its first part; the gateway cuts a result to a host's
//! `maxResultSizeChars` with a link the host reads back through `resources/read`.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::gateway::RawHost;
use crate::support::{FIXTURE, Scratch, fixture_block};

/// The file a spilled run's last line names, checked to be a 0600 file in the state folder.
fn spilled_file(dir: &Scratch, stdout: &str, shown: usize, total: usize) -> PathBuf {
    let last = stdout.lines().last().unwrap_or_default();
    let prefix = format!("[output cut at {shown} of {total} bytes; the whole result is in ");
    let path = (last.strip_prefix(&prefix))
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no spill notice in {last:?}"));
    let path = PathBuf::from(path);
    assert!(
        path.starts_with(dir.0.join("state/mcp-cli/results")),
        "{path:?}"
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    path
}

#[test]
fn a_result_over_max_output_is_written_whole_and_its_first_part_shown() {
    let dir = Scratch::new("large-spill");
    dir.project_file(".mcp-cli.toml", &fixture_block("fx", "good"));
    let run = dir.cli(&["call", "fx", "blob", "bytes=300000", "--max-output", "64K"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let file = spilled_file(&dir, &run.stdout, 65536, 300_001);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "x".repeat(300_000) + "\n"
    );
    assert_eq!(run.stdout.lines().next().unwrap(), "x".repeat(65536));
    assert_eq!(run.stdout.lines().count(), 2);

    // --json spills the result object as sent: the file parses back to the whole of it.
    let run = dir.cli(&[
        "--json",
        "call",
        "fx",
        "blob",
        "bytes=300000",
        "--max-output",
        "1000",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let total = std::fs::read_dir(dir.0.join("state/mcp-cli/results"))
        .unwrap()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| std::fs::read_to_string(path).unwrap())
        .unwrap();
    let file = spilled_file(&dir, &run.stdout, 1000, total.len());
    let whole: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(whole["content"][0]["text"], "x".repeat(300_000));

    // A tool error spills the same way, its first part on stderr; the exit code stays 1.
    let long = "e".repeat(5000);
    let message = format!("message={long}");
    let run = dir.cli(&["call", "fx", "fail", &message, "--max-output", "100"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "{}\n[output cut at 100 of 5001 bytes",
            "e".repeat(100)
        )),
        "{}",
        run.stderr
    );
}

/// A result of 200 MiB, parsed as it arrives rather than held as a line: the file it is
/// spilled to holds, byte for byte, the text the server sent, in either era.
#[test]
fn a_200_mib_result_arrives_byte_for_byte_in_both_eras() {
    for era in ["handshake", "stateless"] {
        let config = format!(
            "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\", \"--era\", {era:?}]\n\
             max_message_mb = 300\ncall_timeout_sec = 600\n"
        );
        arrives_byte_for_byte(&format!("large-whole-{era}"), &config, "blob", 200 << 20);
    }
}

/// The same over HTTP, taken in pieces as it arrives: a JSON body and an event stream, in
/// both eras, and over the HTTP+SSE transport. Anything past 1 MiB goes the way of pieces,
/// so two of the five carry the full 200 MiB and the others 16 MiB, which keeps the test's
/// time to a minute or so.
#[test]
fn huge_results_arrive_byte_for_byte_over_http() {
    for (mode, bytes) in [
        ("good", 200 << 20),
        ("sse", 16 << 20),
        ("stateless", 16 << 20),
        ("stateless-sse", 200 << 20),
        ("legacy", 16 << 20),
    ] {
        let server = crate::http::fixture(mode, &[]);
        let url = format!("http://127.0.0.1:{}/mcp", server.port);
        let config =
            format!("[mcp.fx]\nurl = {url:?}\nmax_message_mb = 300\ncall_timeout_sec = 600\n");
        arrives_byte_for_byte(&format!("large-http-{mode}"), &config, "big", bytes);
    }
}

/// Calls `tool` of the server `fx` for a varied text of `bytes` bytes, spilled to a file:
/// the file holds what was sent, and stdout its start. (The configs allow the call ten
/// minutes: a debug build moving 200 MiB on a loaded machine can take more than the default
/// minute.)
fn arrives_byte_for_byte(name: &str, config: &str, tool: &str, bytes: usize) {
    let mut sent = mcp_tests::varied_text(bytes);
    sent.push('\n');
    let dir = Scratch::new(name);
    dir.project_file(".mcp-cli.toml", config);
    let bytes = format!("bytes={bytes}");
    let args = [
        "call",
        "fx",
        tool,
        &bytes,
        "varied=true",
        "--max-output",
        "64K",
    ];
    let run = dir.cli(&args);
    assert_eq!(run.code, 0, "{name}: {}", run.stderr);
    let last = run.stdout.lines().last().unwrap_or_default();
    let shown = (last.strip_prefix("[output cut at "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|shown| shown.parse().ok())
        .unwrap_or_else(|| panic!("{name}: no spill notice in {last:?}"));
    let received = std::fs::read(spilled_file(&dir, &run.stdout, shown, sent.len())).unwrap();
    let first_difference = (received.iter().zip(sent.as_bytes())).position(|(a, b)| a != b);
    assert!(
        received == sent.as_bytes(),
        "{name}: {} bytes received of {}, first difference at {first_difference:?}",
        received.len(),
        sent.len()
    );
    // What was shown is the start of it, cut where the notice says.
    let part = run.stdout[..run.stdout.len() - last.len() - 1].strip_suffix('\n');
    assert!(
        part.is_some_and(|part| part.len() == shown && sent.starts_with(part)),
        "{name}"
    );
}

#[test]
fn a_pipe_gets_everything_unless_a_limit_is_set() {
    let dir = Scratch::new("large-pipe");
    dir.project_file(".mcp-cli.toml", &fixture_block("fx", "good"));
    let run = dir.cli(&["call", "fx", "blob", "bytes=300000"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "x".repeat(300_000) + "\n");
    assert!(!dir.0.join("state/mcp-cli/results").exists());

    // The server's max_result_bytes applies into a pipe too; --max-output none lifts it.
    let limited = format!("{}max_result_bytes = 2000\n", fixture_block("fx", "good"));
    dir.project_file(".mcp-cli.toml", &limited);
    let run = dir.cli(&["call", "fx", "blob", "bytes=5000"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let file = spilled_file(&dir, &run.stdout, 2000, 5001);
    assert_eq!(std::fs::read_to_string(file).unwrap().len(), 5001);
    let run = dir.cli(&["call", "fx", "blob", "bytes=5000", "--max-output", "none"]);
    assert_eq!(run.stdout, "x".repeat(5000) + "\n");

    // The JSON formats spell it maxResultBytes.
    std::fs::remove_file(dir.0.join(".mcp-cli.toml")).unwrap();
    let json = json!({"mcpServers": {"fx": {"command": crate::support::FIXTURE, "args": ["good"], "maxResultBytes": 10}}});
    dir.project_file(".mcp.json", &json.to_string());
    let run = dir.cli(&["call", "fx", "echo", "text=hello world"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().next(), Some("hello worl"));
    spilled_file(&dir, &run.stdout, 10, 12);
}

#[test]
fn a_terminal_gets_the_first_64_kib_by_default() {
    let dir = Scratch::new("large-terminal");
    dir.project_file(".mcp-cli.toml", &fixture_block("fx", "good"));
    let run = dir.on_terminal(&["call", "fx", "blob", "bytes=100000"], true, None);
    assert_eq!(run.code, 0, "{}", run.screen);
    assert!(
        run.screen
            .contains("[output cut at 65536 of 100001 bytes; the whole result is in "),
        "{}",
        &run.screen[run.screen.len().saturating_sub(300)..]
    );
    // Below the default it prints whole, with no notice.
    let run = dir.on_terminal(&["call", "fx", "blob", "bytes=1000"], true, None);
    assert_eq!(run.code, 0);
    assert!(!run.screen.contains("[output cut"), "{}", run.screen);
}

#[test]
fn bad_limits_are_usage_errors_that_say_why() {
    let dir = Scratch::new("large-bad");
    dir.project_file(".mcp-cli.toml", &fixture_block("fx", "good"));
    for (value, said) in [
        ("0", "must be at least 1 byte"),
        ("-1", "not a number of bytes"),
        ("lots", "not a number of bytes"),
        ("99999999999G", "too large"),
    ] {
        let flag = format!("--max-output={value}");
        let run = dir.cli(&["call", "fx", "echo", "text=hi", &flag]);
        assert_eq!(run.code, 2, "{value}: {}", run.stderr);
        assert!(run.stderr.contains(said), "{value}: {}", run.stderr);
        assert!(run.stdout.is_empty());
    }
    let zero = format!("{}max_result_bytes = 0\n", fixture_block("fx", "good"));
    dir.project_file(".mcp-cli.toml", &zero);
    let run = dir.cli(&["call", "fx", "echo", "text=hi"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("mcp.fx.max_result_bytes")
            && run.stderr.contains("not a positive number of bytes"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_gateway_cuts_a_result_to_the_hosts_max_result_size_chars() {
    let dir = Scratch::new("large-gateway");
    let config = dir.write("c.toml", &fixture_block("fx", "good"));
    let config = config.to_str().unwrap();
    let (mut serve, mut host) = RawHost::start_patient(&dir, &["--config", config, "serve"], "{}");
    let limit = json!({"anthropic/maxResultSizeChars": 1000});
    let call = json!({"name": "fx__blob", "arguments": {"bytes": 5000}, "_meta": limit});
    let cut = host.request(1, "tools/call", call);
    let content = cut["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{cut}"));
    let text = content[0]["text"].as_str().unwrap();
    assert!(
        text.chars().count() <= 1000,
        "{} chars",
        text.chars().count()
    );
    assert!(text.starts_with(&"x".repeat(500)), "{text}");
    let link = &content[1];
    assert_eq!(link["type"], "resource_link");
    let uri = link["uri"].as_str().unwrap();
    assert!(uri.starts_with("mcp-cli://results/"), "{uri}");
    assert!(
        text.contains(&format!(
            "of 5001 characters; the whole result is the resource {uri}"
        )),
        "{text}"
    );
    assert_eq!(cut["result"].get("isError"), None);

    let read = host.request(2, "resources/read", json!({"uri": uri}));
    assert_eq!(
        read["result"]["contents"][0]["text"],
        "x".repeat(5000) + "\n",
        "{read}"
    );

    // Within the limit, or with none asked, the result goes as it is.
    let small = json!({"name": "fx__blob", "arguments": {"bytes": 10}, "_meta": limit});
    let whole = host.request(3, "tools/call", small);
    assert_eq!(
        whole["result"]["content"],
        json!([{"type": "text", "text": "x".repeat(10)}])
    );
    let unlimited = host.request(
        4,
        "tools/call",
        json!({"name": "fx__blob", "arguments": {"bytes": 5000}}),
    );
    assert_eq!(unlimited["result"]["content"][0]["text"], "x".repeat(5000));

    // A URI under the prefix names a kept result or nothing: never a path out of the folder.
    for uri in [
        "mcp-cli://results/../../config.toml",
        "mcp-cli://results/nothing-here.txt",
    ] {
        let refused = host.request(5, "resources/read", json!({"uri": uri}));
        assert_eq!(refused["error"]["code"], -32002, "{refused}");
    }
    drop(host);
    assert!(serve.wait().unwrap().success());
}
