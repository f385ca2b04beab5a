//! Remote servers through the `mcp-cli` binary: a config `url` to the real server-everything
//! over Streamable HTTP, ad hoc `--http`, headers with `${VAR}` reaching the server, a server
//! that needs a login listed `needs-auth`, and the exit codes of HTTP failures.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Run, Scratch};

const HTTP_FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-http-fixture");
const OAUTH_FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-oauth-fixture");

/// A server process killed when the test ends, however it ends.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// `mcp-http-fixture MODE`, once it has said its port.
fn fixture(mode: &str) -> Server {
    spawn(HTTP_FIXTURE, mode)
}

/// A fixture binary in `mode`, once it has said its port.
fn spawn(binary: &str, mode: &str) -> Server {
    spawn_with(binary, mode, &[])
}

/// [`spawn`], with more arguments after the mode.
fn spawn_with(binary: &str, mode: &str, extra: &[&str]) -> Server {
    let mut child = Command::new(binary)
        .arg(mode)
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
    Server { child, port }
}

/// The real server-everything over Streamable HTTP on a free port.
fn everything() -> Server {
    let bin = mcp_tests::npm_bin();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin.join("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, port };
    // Node takes a moment to listen: a refused connection is the only thing waited out.
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server-everything did not listen on {port} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// The row of `name` in a `servers` table, split into words.
fn row(run: &Run, name: &str) -> Vec<String> {
    let line = (run.stdout.lines())
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name}:\n{}\n{}", run.stdout, run.stderr));
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn a_configured_url_is_listed_called_and_shown() {
    let everything = everything();
    let dir = Scratch::new("remote-config");
    let url = everything.url();
    let config = dir.write("remote.toml", &format!("[mcp.ev]\nurl = \"{url}\"\n"));
    let config = config.to_str().unwrap();

    let run = dir.cli(&["--config", config, "tools", "ev"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("echo"), "{}", run.stdout);

    let run = dir.cli(&[
        "--config",
        config,
        "call",
        "ev",
        "echo",
        "message=over http",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("over http"), "{}", run.stdout);

    let run = dir.cli(&["--config", config, "servers"]);
    // NAME STATE TOOLS LISTED PID PROTOCOL COMMAND: no process of ours, so no pid; the URL as
    // the command.
    let ev = row(&run, "ev");
    assert_eq!(ev[1], "running", "{}", run.stdout);
    assert!(ev[2].parse::<usize>().unwrap() > 0, "{}", run.stdout);
    assert_eq!(ev[4], "-", "{}", run.stdout);
    assert_eq!(ev[6], url, "{}", run.stdout);

    let run = dir.cli(&["--config", config, "--json", "servers"]);
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let ev = rows.as_array().unwrap().iter().find(|r| r["name"] == "ev");
    assert_eq!(ev.unwrap()["state"], "running", "{}", run.stdout);
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn ad_hoc_http_calls_a_tool_without_any_config() {
    let everything = everything();
    let dir = Scratch::new("remote-adhoc");
    let run = dir.cli(&["--http", &everything.url(), "call", "echo", "message=hi"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "Echo: hi");
    let run = dir.cli(&["--http", &everything.url(), "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("echo"), "{}", run.stdout);
}

/// An ad hoc server has one name, the one its tools are listed under, in every message.
#[test]
fn ad_hoc_http_is_spelt_one_way() {
    let server = fixture("stateless");
    let dir = Scratch::new("remote-adhoc-name");
    let run = dir.cli(&["--http", &server.url(), "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("127_0_0_1__region"), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("tool weigh of server 127_0_0_1 is left out"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("127.0.0.1 "), "{}", run.stderr);
    let run = dir.cli(&["--http", &server.url(), "--json", "servers"]);
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(rows[0]["name"], "127_0_0_1", "{}", run.stdout);
    let run = dir.cli(&["--http", &server.url(), "call", "nosuch"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("server 127_0_0_1 has no tool nosuch"),
        "{}",
        run.stderr
    );
}

/// A stateless-era server reached by `auto` over HTTP: a tool with an invalid `x-mcp-header`
/// annotation is left out of `tools` and `call` with a warning that says why, and a tool whose
/// argument is mirrored into a header is called (the fixture checks the header).
#[test]
fn a_tool_with_an_invalid_header_annotation_is_left_out_with_a_warning() {
    let server = fixture("stateless");
    let dir = Scratch::new("remote-rejected-tool");
    let run = dir.cli(&["--http", &server.url(), "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("__region"), "{}", run.stdout);
    assert!(!run.stdout.contains("weigh"), "{}", run.stdout);
    assert!(
        run.stderr.contains("tool weigh of server")
            && run.stderr.contains(
                "left out: x-mcp-header at /properties/kilos: only string, integer and \
                 boolean properties may be headers, not \"number\""
            ),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["--http", &server.url(), "call", "weigh", "kilos=2"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("tool weigh of server"),
        "{}",
        run.stderr
    );
    let run = dir.cli(&[
        "--http",
        &server.url(),
        "call",
        "region",
        "region=eu",
        "query=q",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn configured_headers_reach_the_server_with_their_variables_expanded() {
    // The fixture's `token` mode serves only requests carrying `Authorization: Bearer good`.
    let server = fixture("token");
    let url = server.url();
    let dir = Scratch::new("remote-headers");
    let config = dir.write(
        "remote.toml",
        &format!(
            "[mcp.byheader]\nurl = \"{url}\"\nheaders = {{ Authorization = \"Bearer ${{REMOTE_TOKEN}}\" }}\n\n\
             [mcp.byvar]\nurl = \"{url}\"\nbearer_token_env_var = \"REMOTE_TOKEN\"\n"
        ),
    );
    let config = config.to_str().unwrap();
    for name in ["byheader", "byvar"] {
        let args = ["--config", config, "call", name, "echo", "message=let in"];
        let run = dir.cli_with(&args, &[("REMOTE_TOKEN", "good")], None);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert!(run.stdout.contains("let in"), "{name}: {}", run.stdout);
        // The wrong token is refused: the header really is what the server judged.
        let run = dir.cli_with(&args, &[("REMOTE_TOKEN", "bad")], None);
        assert_eq!(run.code, 3, "{name}: {}", run.stderr);
    }
    // Unset, the variable makes the entry invalid, naming it: a usage error before any request.
    let run = dir.cli(&["--config", config, "call", "byheader", "echo", "message=x"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("REMOTE_TOKEN"), "{}", run.stderr);

    let header = "Authorization: Bearer good";
    let run = dir.cli(&[
        "--http",
        &url,
        "--header",
        header,
        "call",
        "echo",
        "message=x",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn add_and_http_take_a_header_in_either_form() {
    // The fixture's `token` mode serves only requests carrying `Authorization: Bearer good`.
    let server = fixture("token");
    let url = server.url();
    let dir = Scratch::new("remote-header-forms");
    let config = dir.write("remote.toml", "");
    let config = config.to_str().unwrap();
    for (name, header) in [
        ("colon", "Authorization: Bearer good"),
        ("equals", "Authorization=Bearer good"),
    ] {
        let add = [
            "--config", config, "add", name, "--url", &url, "--header", header,
        ];
        let run = dir.cli(&add);
        assert_eq!(run.code, 0, "{header}: {}", run.stderr);
        let run = dir.cli(&["--config", config, "call", name, "echo", "message=in"]);
        assert_eq!(run.code, 0, "{header}: {}", run.stderr);

        let http = [
            "--http",
            &url,
            "--header",
            header,
            "call",
            "echo",
            "message=x",
        ];
        let run = dir.cli(&http);
        assert_eq!(run.code, 0, "{header}: {}", run.stderr);
    }
    // Neither form, or a name HTTP cannot carry, is the caller's mistake, in both places.
    for header in ["no separator", "Bad Name=v"] {
        let add = [
            "--config", config, "add", "bad", "--url", &url, "--header", header,
        ];
        let run = dir.cli(&add);
        assert_eq!(run.code, 2, "{header}: {run:?}");
        assert!(run.stderr.contains("--header"), "{header}: {run:?}");
        let run = dir.cli(&["--http", &url, "--header", header, "tools"]);
        assert_eq!(run.code, 2, "{header}: {run:?}");
    }
}

#[test]
fn a_server_refusing_us_is_listed_needs_auth_with_the_command_to_run() {
    let server = fixture("unauthorized");
    let dir = Scratch::new("remote-needs-auth");
    let config = dir.write(
        "remote.toml",
        &format!("[mcp.locked]\nurl = \"{}\"\n", server.url()),
    );
    let config = config.to_str().unwrap();

    let run = dir.cli(&["--config", config, "servers"]);
    assert_eq!(row(&run, "locked")[1], "needs-auth", "{}", run.stdout);
    assert!(
        run.stderr.contains("run `mcp-cli auth locked`"),
        "{}",
        run.stderr
    );

    let run = dir.cli(&["--config", config, "call", "locked", "echo", "message=x"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("needs authorization (HTTP 401)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("mcp-cli auth locked"), "{}", run.stderr);

    // No process, so no stderr log to show.
    let run = dir.cli(&["--config", config, "logs", "locked"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("is a remote server"), "{}", run.stderr);
}

#[test]
fn http_failures_exit_3_with_the_cause_and_timeouts_4() {
    let dir = Scratch::new("remote-failures");
    // Nothing listens on port 1.
    let run = dir.cli(&["--http", "http://127.0.0.1:1/mcp", "tools"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("127.0.0.1:1"), "{}", run.stderr);

    let html = fixture("html");
    let run = dir.cli(&["--http", &html.url(), "tools"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.to_lowercase().contains("html"), "{}", run.stderr);

    let failing = fixture("fail-call");
    let run = dir.cli(&["--http", &failing.url(), "call", "echo", "message=x"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("500"), "{}", run.stderr);

    // A server that takes the connection and never answers runs out the handshake budget.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let run = dir.cli_with(&["--http", &url, "tools"], &[("MCP_TIMEOUT", "1000")], None);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("did not answer `initialize`"),
        "{}",
        run.stderr
    );
    drop(silent);

    // A malformed URL or header is the caller's mistake.
    let run = dir.cli(&["--http", "ftp://example.invalid/", "tools"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = dir.cli(&["--http", &failing.url(), "--header", "no colon", "tools"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn auth_logs_in_keeps_the_token_and_reset_forgets_it() {
    // An authorization server that approves at once, and the MCP server it protects.
    let server = spawn(OAUTH_FIXTURE, "good");
    let url = server.url();
    let dir = Scratch::new("remote-auth");
    let config = dir.write("remote.toml", &format!("[mcp.fx]\nurl = \"{url}\"\n"));
    let config = config.to_str().unwrap();
    let whoami = ["--config", config, "call", "fx", "whoami"];

    // No terminal and no unattended switch: nothing logs in by itself.
    let run = dir.cli(&["--config", config, "servers"]);
    assert_eq!(row(&run, "fx")[1], "needs-auth", "{}", run.stdout);

    let run = dir.cli(&["--config", config, "--auth-follow", "auth", "fx"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("logged in to fx"), "{}", run.stdout);

    // The stored token serves later runs, which never log in themselves.
    let run = dir.cli(&whoami);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("scopes: read"), "{}", run.stdout);
    let run = dir.cli(&["--config", config, "servers"]);
    assert_eq!(row(&run, "fx")[1], "running", "{}", run.stdout);

    let run = dir.cli(&["--config", config, "auth", "fx", "--reset"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "forgot the login for fx");
    let run = dir.cli(&whoami);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("mcp-cli auth fx"), "{}", run.stderr);

    // Ad hoc, the same switch logs in on the way to the call.
    let run = dir.cli_with(
        &["--http", &url, "call", "whoami"],
        &[("MCP_CLI_AUTH_FOLLOW", "1")],
        None,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("scopes: read"), "{}", run.stdout);

    // A server with a command needs no login.
    let run = dir.cli(&["--stdio", "true", "auth"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not a remote server"), "{}", run.stderr);
}

#[test]
fn an_http_sse_server_dying_mid_call_is_reported_as_that() {
    let server = fixture("legacy-dies");
    let scratch = Scratch::new("remote-legacy-dies");
    let url = server.url();
    scratch.project_file(".mcp-cli.toml", &format!("[mcp.old]\nurl = \"{url}\"\n"));
    // Found by falling back from the refused Streamable HTTP POST.
    let run = scratch.cli(&["tools", "old"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = scratch.cli(&["call", "old", "echo", "message=hi"]);
    assert_eq!(run.code, 3, "{run:?}");
    let ended = format!("GET {url} (HTTP+SSE): the event stream ended");
    assert!(run.stderr.contains(&ended), "{run:?}");
    // Not the probe's 404 page, which had nothing to do with it (the URL left out: its port
    // may hold the digits 404).
    let said = run.stderr.replace(&url, "URL");
    assert!(!said.contains("404"), "{run:?}");
    assert!(!said.contains("html"), "{run:?}");
}

#[test]
fn an_html_page_in_an_error_is_one_short_line() {
    let server = fixture("legacy-dies");
    let scratch = Scratch::new("remote-html-short");
    // Both transports refused, each with a 2 KB page.
    let url = format!("http://127.0.0.1:{}/elsewhere", server.port);
    let run = scratch.cli(&["--http", &url, "tools"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains("HTTP 404 Not Found: <!DOCTYPE html> <html"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("\\n"), "{run:?}");
    assert_eq!(run.stderr.matches('…').count(), 2, "{run:?}");
    assert!(run.stderr.len() < 1000, "{run:?}");
}

#[test]
fn an_imported_vscode_sse_server_keeps_its_transport() {
    let dir = Scratch::new("remote-import-sse");
    let log = dir.0.join("requests.log");
    let server = spawn_with(HTTP_FIXTURE, "good", &["--log", log.to_str().unwrap()]);
    let home = dir.0.join("home");
    let vscode = home.join(".config/Code/User/mcp.json");
    std::fs::create_dir_all(vscode.parent().unwrap()).unwrap();
    let text = format!(
        r#"{{"servers": {{"old": {{"type": "sse", "url": "{}"}}}}}}"#,
        server.url()
    );
    std::fs::write(&vscode, text).unwrap();
    let config_home = home.join(".config");
    let env = [
        ("HOME", home.to_str().unwrap()),
        ("XDG_CONFIG_HOME", config_home.to_str().unwrap()),
    ];
    let run = dir.cli_with(&["import", "--write"], &env, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let native = std::fs::read_to_string(config_home.join("mcp-cli/config.toml")).unwrap();
    assert!(native.contains("transport = \"sse\""), "{native}");

    // HTTP+SSE opens the event stream with a GET; Streamable HTTP would POST `initialize`.
    // (This server speaks only Streamable HTTP, so the listing fails: the request is the point.)
    let run = dir.cli_with(&["tools", "old"], &env, None);
    assert_ne!(run.code, 0, "{run:?}");
    let requests = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(requests.starts_with("GET /mcp "), "{requests}");
    assert!(!requests.contains("POST"), "{requests}");
}
