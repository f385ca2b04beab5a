//! Resources, prompts, completion, subscriptions and client capabilities: through the
//! `mcp-cli` binary against the fixture and the real server-everything, and through mcp-smol.

use std::path::Path;
use std::time::Duration;

use mcp_smol::proto::{ClientCapabilities, CompletionRef, Request, ResourceContents};
use mcp_smol::{Options, ServerCommand};
use serde_json::{Value, json};

use crate::support::{FIXTURE, Scratch, bounded, fixture_block};

/// A project whose config names the fixture's resource modes: `fx` (pages of one entry),
/// `bad` (unreadable entries) and `loop` (a repeating cursor); `fx` logs what it receives.
fn resource_project(name: &str) -> (Scratch, std::path::PathBuf) {
    let dir = Scratch::new(name);
    let log = dir.0.join("received.log");
    let config = format!(
        "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"resources\", \"--page-size\", \"1\", \"--log-received\", {:?}]\n\n{}\n{}",
        log.to_str().unwrap(),
        fixture_block("bad", "malformed-resources"),
        fixture_block("loop", "repeat-resource-cursor"),
    );
    dir.project_file(".mcp-cli.toml", &config);
    (dir, log)
}

#[test]
fn resources_of_every_page_are_listed_and_unreadable_entries_reported() {
    let (dir, _) = resource_project("res-list");
    let run = dir.cli(&["resources", "fx"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "fx  fx://text/hello  hello            text/plain\n\
         fx  fx://blob/bytes  bytes            application/octet-stream\n\
         fx  fx://text/third  third\n\
         fx  fx://items/{id}  item (template)  text/plain\n"
    );
    let run = dir.cli(&["resources", "bad"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 4, "{}", run.stdout);
    assert!(
        run.stderr
            .contains("server bad: left out 2 unreadable resource entries"),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["--json", "resources", "fx"]);
    let listing: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        listing["resources"][0]["size"], 23,
        "unknown fields are kept"
    );
    assert_eq!(listing["resources"][1]["server"], "fx");
    assert_eq!(
        listing["resourceTemplates"][0]["uriTemplate"],
        "fx://items/{id}"
    );
}

#[test]
fn a_repeating_resource_cursor_is_a_server_failure() {
    let (dir, _) = resource_project("res-loop");
    let run = dir.cli(&["resources", "loop"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("repeated the cursor \"again\""),
        "{}",
        run.stderr
    );
}

#[test]
fn resources_and_prompts_are_listed_only_for_the_commands_that_show_them() {
    let (dir, log) = resource_project("res-lazy");
    let received = || std::fs::read_to_string(&log).unwrap_or_default();
    let surface = ["resources/list", "resources/templates/list", "prompts/list"];
    for args in [
        &["call", "fx", "echo", "text=hi"][..],
        &["tools", "fx"],
        &["servers"],
    ] {
        let run = dir.cli(args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    }
    let before = received();
    assert!(before.contains("tools/call"), "{before}");
    for method in surface {
        assert!(!before.contains(method), "{method} was sent:\n{before}");
    }
    let run = dir.cli(&["resources", "fx"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let after = received();
    for method in surface {
        assert!(after.contains(method), "{method} was not sent:\n{after}");
    }
}

#[test]
fn read_prints_text_and_writes_binary_exactly() {
    let (dir, _) = resource_project("res-read");
    let run = dir.cli(&["read", "fx", "fx://text/hello"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "hello from the fixture\n")
    );
    let run = dir.cli(&["read", "fx", "fx://blob/bytes"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (
            0,
            "[blob omitted: application/octet-stream, 256 bytes; use -o FILE]\n"
        )
    );
    let run = dir.cli(&["read", "fx", "fx://blob/bytes", "-o", "bytes.bin"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{}", run.stderr);
    let written = std::fs::read(dir.0.join("bytes.bin")).unwrap();
    assert_eq!(written, (0..=255u8).rev().collect::<Vec<u8>>());
    let run = dir.cli(&["read", "fx", "fx://missing"]);
    assert_eq!(
        run.code, 2,
        "a URI the server does not know: {}",
        run.stderr
    );
    assert!(run.stderr.contains("Resource not found"), "{}", run.stderr);
}

#[test]
fn prompts_are_listed_and_a_missing_argument_is_caught_before_sending() {
    let (dir, log) = resource_project("res-prompt");
    let run = dir.cli(&["prompts", "fx"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "fx__greet  Greets someone.\n    name (required)  Who to greet\n    greeting  The word to use\n\
         fx__plain  No arguments.\n"
    );
    let run = dir.cli(&["prompt", "fx", "greet", "greeting=Hi"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("missing required argument name"),
        "{}",
        run.stderr
    );
    let received = std::fs::read_to_string(&log).unwrap();
    assert!(received.contains("prompts/list") && !received.contains("prompts/get"));
    let run = dir.cli(&["prompt", "fx", "greet", "name=Ada", "greeting=Hi"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "user: Hi, Ada!\n"),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["--json", "prompt", "fx", "plain"]);
    let result: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(result["messages"][1]["content"]["type"], "image");
}

// ----- the real server-everything -----

/// `mcp-cli args` with the presets pointed at the installed npm servers.
fn everything(dir: &Scratch, args: &[&str]) -> crate::support::Run {
    let bin = mcp_tests::npm_bin();
    let prefix = bin.parent().and_then(Path::parent).expect("the npm prefix");
    let prefix = prefix.to_str().expect("a UTF-8 npm prefix");
    dir.cli_with(args, &[("MCP_CLI_NPM_PREFIX", prefix)], None)
}

fn everything_dist() -> std::path::PathBuf {
    mcp_tests::servers_dir().join("npm/node_modules/@modelcontextprotocol/server-everything/dist")
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_lists_and_reads_its_resources() {
    let dir = Scratch::new("res-everything");
    let run = everything(&dir, &["--json", "resources", "everything"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listing: Value = serde_json::from_str(&run.stdout).unwrap();
    let uris: Vec<&str> = (listing["resources"].as_array().unwrap().iter())
        .filter_map(|resource| resource["uri"].as_str())
        .collect();
    let mut docs: Vec<String> = std::fs::read_dir(everything_dist().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    docs.sort();
    let expected: Vec<String> = (docs.iter())
        .map(|name| format!("demo://resource/static/document/{name}"))
        .collect();
    assert_eq!(uris, expected, "every static document, from every page");
    let templates: Vec<&str> = (listing["resourceTemplates"].as_array().unwrap().iter())
        .filter_map(|template| template["uriTemplate"].as_str())
        .collect();
    assert_eq!(
        templates,
        [
            "demo://resource/dynamic/text/{resourceId}",
            "demo://resource/dynamic/blob/{resourceId}"
        ]
    );

    // A text resource, byte for byte as the file on disk.
    let uri = "demo://resource/static/document/features.md";
    let run = everything(&dir, &["read", "everything", uri, "-o", "features.md"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let on_disk = std::fs::read(everything_dist().join("docs/features.md")).unwrap();
    assert_eq!(std::fs::read(dir.0.join("features.md")).unwrap(), on_disk);

    // A blob resource: its base64 decodes to the text the server built, and -o writes
    // exactly those bytes.
    let uri = "demo://resource/dynamic/blob/7";
    let run = everything(&dir, &["--json", "read", "everything", uri]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result: Value = serde_json::from_str(&run.stdout).unwrap();
    let contents: ResourceContents = serde_json::from_value(result["contents"][0].clone()).unwrap();
    let blob = contents.blob_bytes().unwrap().unwrap();
    let blob = String::from_utf8(blob).unwrap();
    assert!(
        blob.starts_with("Resource 7: This is a base64 blob created at "),
        "{blob}"
    );
    let run = everything(&dir, &["read", "everything", uri]);
    assert!(
        run.stdout.starts_with("[blob omitted: text/plain, ")
            && run.stdout.ends_with(" bytes; use -o FILE]\n"),
        "{}",
        run.stdout
    );
    let run = everything(&dir, &["read", "everything", uri, "-o", "blob.bin"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = String::from_utf8(std::fs::read(dir.0.join("blob.bin")).unwrap()).unwrap();
    assert!(
        written.starts_with("Resource 7: This is a base64 blob created at "),
        "{written}"
    );
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_gets_a_prompt_with_arguments() {
    let dir = Scratch::new("res-everything-prompt");
    let run = everything(&dir, &["prompts", "everything"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "everything__args-prompt  A prompt with two arguments, one required and one optional\n    city (required)  Name of the city\n    state\n"
        ),
        "{}",
        run.stdout
    );
    let args = [
        "prompt",
        "everything",
        "args-prompt",
        "city=Paris",
        "state=Texas",
    ];
    let run = everything(&dir, &args);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "user: What's weather in Paris, Texas?\n"),
        "{}",
        run.stderr
    );
    let run = everything(
        &dir,
        &["prompt", "everything", "args-prompt", "state=Texas"],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// server-everything run by mcp-smol directly, with the given capabilities declared.
fn everything_client(capabilities: ClientCapabilities) -> mcp_smol::Client {
    let bin = mcp_tests::npm_bin();
    let server = bin.join("mcp-server-everything");
    let command = ServerCommand::new(server.to_str().expect("a UTF-8 path"));
    let mut options = Options::default();
    options.core.capabilities = capabilities;
    options.core.handshake_timeout = Duration::from_secs(60);
    crate::support::start(&command, options)
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_completes_an_argument_and_reports_a_subscribed_update() {
    let client = everything_client(ClientCapabilities::default());
    bounded(async {
        client.wait_ready().await.unwrap();
        let department = CompletionRef::Prompt("completable-prompt".into());
        let completed = (client.request(Request::complete(&department, "department", "S", None)))
            .await
            .unwrap();
        assert_eq!(completed.values, ["Sales", "Support"]);
        let context = json!({"department": "Engineering"}).as_object().cloned();
        let names = Request::complete(&department, "name", "", context);
        assert_eq!(
            client.request(names).await.unwrap().values,
            ["Alice", "Bob", "Charlie"]
        );

        client
            .request(Request::set_logging_level("debug"))
            .await
            .unwrap();
        let notes = client.notifications().await;
        let uri = "demo://resource/static/document/features.md";
        client.request(Request::subscribe(uri)).await.unwrap();
        let toggled = client
            .call_tool("toggle-subscriber-updates", json!({}))
            .await
            .unwrap();
        assert!(!toggled.is_error);
        loop {
            let note = notes.recv().await.unwrap();
            if note.resource_updated() == Some(uri) {
                break;
            }
        }
        client.request(Request::unsubscribe(uri)).await.unwrap();
        client.close().await;
    });
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_asks_for_roots_only_when_they_are_declared() {
    let client = everything_client(ClientCapabilities {
        roots: true,
        ..ClientCapabilities::default()
    });
    bounded(async {
        let requests = client.server_requests().await;
        client.wait_ready().await.unwrap();
        // server-everything asks for the roots of a client that offers them.
        let asked = requests.recv().await.unwrap();
        assert_eq!(asked.method, "roots/list");
        let roots = json!({"roots": [{"uri": "file:///tmp/project", "name": "project"}]});
        client.respond(asked.id, Ok(roots)).await;
        let tools = client.list_tools().await.unwrap();
        assert!(tools.iter().any(|tool| tool.name == "get-roots-list"));
        assert!(
            !tools
                .iter()
                .any(|tool| tool.name == "trigger-elicitation-request")
        );
        client.close().await;
    });
}

/// server-everything as `everything` in `dir`'s `.mcp-cli.toml`.
fn configure_everything(dir: &Scratch) {
    let bin = mcp_tests::npm_bin();
    let server = bin.join("mcp-server-everything");
    let config = format!(
        "[mcp.everything]\ncommand = {:?}\ntimeout_sec = 60\n",
        server.to_str().unwrap()
    );
    dir.project_file(".mcp-cli.toml", &config);
}

/// Typed into server-everything's form: yes, then its fields in name order; only `name` is
/// required, the rest keep their defaults or stay empty.
const EVERYTHING_FORM_ANSWERS: &str = "y\n\n\n\n\n\n\n\nAda Lovelace\n\n\n\n\n\n";

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_elicitation_is_answered_on_a_terminal() {
    let dir = Scratch::new("res-elicit");
    configure_everything(&dir);
    let answers = EVERYTHING_FORM_ANSWERS;
    let run = dir.on_terminal(
        &["call", "everything", "trigger-elicitation-request"],
        false,
        Some(("Fill in the form? [Y/n]", answers)),
    );
    assert_eq!(run.code, 0, "{}", run.screen);
    assert!(
        run.screen
            .contains("Please provide inputs for the following fields:"),
        "{}",
        run.screen
    );
    assert!(
        run.screen.contains("[It was a dark and stormy night.]"),
        "defaults shown: {}",
        run.screen
    );
    assert!(
        run.stdout.contains("- Name: Ada Lovelace"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("- Favorite Integer: 42"),
        "{}",
        run.stdout
    );

    // Without a terminal the form is declined.
    let run = dir.cli(&["call", "everything", "trigger-elicitation-request"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("User declined"), "{}", run.stdout);
}

/// With the daemon running, server-everything's form is asked as a cold run asks it: the tool
/// is listed (the daemon declares elicitation as a cold run does), the form comes up on the
/// caller's terminal, and without a terminal it is declined.
#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_elicitation_through_the_daemon_is_answered_as_cold() {
    let dir = Scratch::new("res-elicit-warm");
    configure_everything(&dir);
    let runtime = dir.0.join("run");
    let env = [("XDG_RUNTIME_DIR", runtime.to_str().unwrap())];
    let warm = |args: &[&str]| dir.cli_with(args, &env, None);
    let started = warm(&["daemon", "start"]);
    assert_eq!(started.code, 0, "{started:?}");

    let tools = warm(&["tools", "everything"]);
    let cold = dir.cli_with(
        &["tools", "everything"],
        &[("MCP_CLI_NO_DAEMON", "1")],
        None,
    );
    assert_eq!(
        (tools.code, &tools.stdout),
        (cold.code, &cold.stdout),
        "{tools:?}"
    );
    assert!(
        tools
            .stdout
            .contains("everything__trigger-elicitation-request"),
        "{tools:?}"
    );
    let answers = EVERYTHING_FORM_ANSWERS;
    let run = dir.on_terminal_with(
        &["call", "everything", "trigger-elicitation-request"],
        &env,
        false,
        Some(("Fill in the form? [Y/n]", answers)),
    );
    assert_eq!(run.code, 0, "{}", run.screen);
    assert!(
        run.screen.contains("server everything asks"),
        "{}",
        run.screen
    );
    assert!(
        run.stdout.contains("- Name: Ada Lovelace"),
        "{}",
        run.stdout
    );
    let declined = warm(&["call", "everything", "trigger-elicitation-request"]);
    assert_eq!(declined.code, 0, "{declined:?}");
    assert!(declined.stdout.contains("User declined"), "{declined:?}");

    // All of it was served warm: the daemon's server is the one that answered.
    let status = warm(&["--json", "daemon", "status"]);
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let servers = status["servers"].as_array().unwrap();
    assert!(
        servers
            .iter()
            .any(|s| s["name"] == "everything" && s["state"] == "running"),
        "{status}"
    );
    let stopped = warm(&["daemon", "stop"]);
    assert_eq!(stopped.code, 0, "{stopped:?}");
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn filesystem_confines_itself_to_the_roots_in_its_config() {
    use mcp_client_cli::hub::{Hub, Settings};
    use mcp_smol::proto::CallToolResult;
    let dir = Scratch::new("res-roots");
    let bin = mcp_tests::npm_bin();
    std::fs::create_dir_all(dir.0.join("inside")).unwrap();
    dir.write("inside/note.txt", "inside the root\n");
    dir.write("outside.txt", "outside the root\n");
    // Started with no directory of its own: the server works only in the roots it is offered.
    let server = bin.join("mcp-server-filesystem");
    let text = format!(
        "[mcp.fs]\ncommand = {:?}\nroots = [\"inside\"]\ntimeout_sec = 60\n",
        server.to_str().unwrap()
    );
    let path = dir.write("mcp.toml", &text);
    let env = |_: &str| None;
    let config = mcp_client_cli::config::parse_file(&path, &text, &env).unwrap();
    let hub = Hub::new(config, Settings::default());
    let inside = std::fs::canonicalize(dir.0.join("inside")).unwrap();
    bounded(async {
        let call = |tool: &'static str, arguments: Value| {
            let hub = hub.clone();
            async move {
                let tool = hub.find_tool("fs", tool).await.unwrap();
                let raw = hub.call(&tool, arguments).await.unwrap();
                let result = CallToolResult::from_value(raw).unwrap();
                (result.is_error, crate::support::text(&result))
            }
        };
        // The server takes the roots in after `initialized`, on its own time: wait until it
        // says which directories it allows, then check that it keeps to them.
        loop {
            let (_, allowed) = call("list_allowed_directories", json!({})).await;
            if allowed.contains(inside.to_str().unwrap()) {
                break;
            }
            smol::Timer::after(Duration::from_millis(50)).await;
        }
        let note = inside.join("note.txt");
        let read = call("read_text_file", json!({"path": note})).await;
        assert_eq!(read, (false, "inside the root\n".to_owned()));
        let outside = std::fs::canonicalize(dir.0.join("outside.txt")).unwrap();
        let (failed, message) = call("read_text_file", json!({"path": outside})).await;
        assert!(failed, "read outside the root: {message}");
        assert!(message.contains("Access denied"), "{message}");
        hub.shutdown().await;
    });
}

#[test]
fn a_server_is_asked_nothing_before_it_has_its_roots() {
    let dir = Scratch::new("res-late-roots");
    std::fs::create_dir_all(dir.0.join("inside")).unwrap();
    let config = format!(
        "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"late-roots\"]\nroots = [\"inside\"]\n\
         [mcp.never]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\nroots = [\"inside\"]\n"
    );
    let config = dir.write("config.toml", &config).display().to_string();
    // The fixture asks for its roots a while after `initialized`; the call waits for that.
    let run = dir.cli(&["--config", &config, "call", "fx", "report"]);
    assert_eq!(run.code, 0, "{run:?}");
    let inside = std::fs::canonicalize(dir.0.join("inside")).unwrap();
    let uri = format!("file://{}", inside.display());
    assert!(run.stdout.contains(&uri), "{run:?}");
    // A server that never asks still gets its call, once the wait is over.
    let run = dir.cli(&["--config", &config, "call", "never", "echo", "text=hi"]);
    assert_eq!((run.code, run.stdout.trim()), (0, "hi"), "{run:?}");
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_filesystem_server_has_its_roots_before_the_first_call() {
    let bin = mcp_tests::npm_bin();
    let dir = Scratch::new("res-roots-first-call");
    std::fs::create_dir_all(dir.0.join("inside")).unwrap();
    dir.write("inside/note.txt", "inside the root\n");
    // No directory argument: the server allows only the roots it is offered.
    let server = bin.join("mcp-server-filesystem");
    let config = format!("[mcp.fs]\ncommand = {server:?}\nroots = [\"inside\"]\n");
    let config = dir.write("config.toml", &config).display().to_string();
    let path = format!("path={}", dir.0.join("inside/note.txt").display());
    for attempt in 0..3 {
        let run = dir.cli(&["--config", &config, "call", "fs", "read_text_file", &path]);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "inside the root\n"),
            "attempt {attempt}: {run:?}"
        );
    }
}
