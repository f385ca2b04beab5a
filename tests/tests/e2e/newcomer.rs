//! The command line as a newcomer meets it: argument mistakes, messages that say what to do,
//! exit codes that agree with them, logs that tell runs apart, terminal safety.

use crate::support::{FIXTURE, Scratch, fixture_block};

fn project(name: &str, extra: &str) -> Scratch {
    let dir = Scratch::new(name);
    dir.project_file(
        ".mcp-cli.toml",
        &format!("{}{extra}", fixture_block("fx", "good")),
    );
    dir
}

#[test]
fn argument_mistakes_name_the_fix() {
    let dir = project("newcomer-args", "");
    let cases: &[(&[&str], &str)] = &[
        (
            &["call", "fx", "echo", "txt=hi"],
            "unknown argument txt; did you mean text? (it takes: text)",
        ),
        (
            &["call", "fx", "types", "s=x", "i=1", "mode=medium"],
            "argument mode: \"medium\" is not one of \"fast\", \"slow\"",
        ),
        (
            &["call", "fx", "types", "s=x", "i=1", "arr=a.txt"],
            "write an array as arr:='[\"a.txt\"]'",
        ),
        (
            &["call", "fx", "types", "s=x", "i=1", "maybe=some"],
            "argument maybe: \"some\" is not an integer or null",
        ),
        (
            &["call", "fxx", "echo", "text=x"],
            "unknown server fxx; did you mean fx?",
        ),
        (
            &["call", "fx", "ecoh", "text=x"],
            "has no tool ecoh; did you mean echo?",
        ),
    ];
    for (args, expected) in cases {
        let run = dir.cli(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
    let run = dir.cli(&[
        "call",
        "fx",
        "types",
        "s=x",
        "i=1",
        "mode=slow",
        "maybe=null",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("\"mode\":\"slow\"") && run.stdout.contains("\"maybe\":null"));
    let run = dir.cli(&["tools", "fx"]);
    assert!(
        run.stdout
            .contains("    mode: string, one of \"fast\", \"slow\"  How to go.\n")
            && run
                .stdout
                .contains("    maybe: integer | null  A count, or null.\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn messages_say_what_to_change() {
    let dir = project("newcomer-messages", "");
    let run = dir.cli(&["--timeout", "0.5", "call", "fx", "sleep", "ms=5000"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("fx__sleep: no response within 0.5")
            && run.stderr.contains("; allow it longer with --timeout")
            && run.stderr.contains("call_timeout_sec"),
        "{}",
        run.stderr
    );
    let run = dir.cli_with(&["call", "fx", "echo", "--args", "-"], &[], Some(""));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--args -: stdin was empty"),
        "{}",
        run.stderr
    );

    let slow = Scratch::new("newcomer-handshake");
    slow.project_file(
        ".mcp-cli.toml",
        &format!("{}timeout_sec = 0.5\n", fixture_block("mute", "silent")),
    );
    let run = slow.cli(&["call", "mute", "echo", "text=x"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("raise timeout_sec"), "{}", run.stderr);
    // Other hosts' MCP_TIMEOUT (milliseconds) sets the budget of entries that set none.
    slow.project_file(".mcp-cli.toml", &fixture_block("mute", "silent"));
    let run = slow.cli_with(
        &["call", "mute", "echo", "text=x"],
        &[("MCP_TIMEOUT", "700")],
        None,
    );
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("within 0.7s"), "{}", run.stderr);
}

#[test]
fn a_json_rpc_error_from_a_call_is_a_failed_tool() {
    let dir = project("newcomer-rpc-error", "");
    let run = dir.cli(&["call", "fx", "fail", "rpc:=true", "message=fetch failed"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    // The SDK's own "MCP error -32603: " is not repeated in front of the message.
    assert_eq!(
        run.stderr, "mcp-cli: fx__fail failed: fetch failed\n",
        "{}",
        run.stderr
    );
}

#[test]
fn servers_is_a_health_check_and_quotes_commands() {
    let dir = Scratch::new("newcomer-servers");
    dir.project_file(
        ".mcp-cli.toml",
        &format!(
            "{}[mcp.spaced]\ncommand = {FIXTURE:?}\nargs = [\"good\", \"--log-received\", \"a file\"]\n",
            fixture_block("fx", "good")
        ),
    );
    let run = dir.cli(&["servers"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("good --log-received 'a file'"),
        "{}",
        run.stdout
    );
    let mut config = std::fs::read_to_string(dir.0.join(".mcp-cli.toml")).unwrap();
    config.push_str(&fixture_block("dies", "exit-in-handshake"));
    dir.project_file(".mcp-cli.toml", &config);
    let run = dir.cli(&["servers"]);
    assert_eq!(
        run.code, 3,
        "a failed server fails the check: {}",
        run.stdout
    );
}

#[test]
fn each_run_is_marked_in_the_log() {
    let dir = project("newcomer-logs", "");
    for text in ["first", "second"] {
        let run = dir.cli(&["call", "fx", "stderr", "lines:=1"]);
        assert_eq!(run.code, 0, "{text}: {}", run.stderr);
    }
    let run = dir.cli(&["logs", "fx"]);
    let markers: Vec<&str> = (run.stdout.lines())
        .filter(|line| line.starts_with("--- ") && line.contains(" UTC started: "))
        .collect();
    assert_eq!(markers.len(), 2, "{}", run.stdout);
    assert!(
        markers.iter().all(|m| m.contains("good (pid ")),
        "{markers:?}"
    );
    assert_ne!(markers[0], markers[1]);
}

#[test]
fn server_text_cannot_drive_the_terminal() {
    let dir = project("newcomer-terminal", "");
    let hostile = "text=\u{1b}]0;pwned\u{7}\u{1b}[2Jgone";
    let run = dir.on_terminal(&["call", "fx", "echo", hostile], true, None);
    assert_eq!(run.code, 0, "{}", run.screen);
    // (The spinner's own line clearing may show; the server's sequences may not.)
    assert!(
        !run.screen.contains("\u{1b}]0;") && !run.screen.contains("\u{1b}[2J"),
        "{:?}",
        run.screen
    );
    assert!(
        run.screen.contains("\\x1b]0;pwned\\x07\\x1b[2Jgone"),
        "{:?}",
        run.screen
    );
    // A pipe gets the data exact.
    let run = dir.cli(&["call", "fx", "echo", hostile]);
    assert_eq!(run.stdout, "\u{1b}]0;pwned\u{7}\u{1b}[2Jgone\n");
}

#[test]
fn json_configs_are_strict_and_speak_vscode() {
    let dir = Scratch::new("newcomer-json");
    let typo = dir.write(
        "typo.json",
        &format!("{{\"mcpServers\": {{\n  \"fx\": {{\n    \"comand\": {FIXTURE:?}}}}}}}"),
    );
    let run = dir.cli(&["--config", typo.to_str().unwrap(), "servers"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "typo.json line 3: mcpServers.fx.comand: unknown key `comand`; did you mean `command`?"
        ),
        "{}",
        run.stderr
    );
    // VS Code's own variables, from a workspace's .vscode/mcp.json, and a BOM before it all.
    std::fs::create_dir_all(dir.0.join(".vscode")).unwrap();
    let vscode = dir.write(
        ".vscode/mcp.json",
        &format!(
            "\u{feff}{{\"servers\": {{\"fx\": {{\"command\": {FIXTURE:?}, \"args\": [\"good\", \"--log-received\", \"${{workspaceFolder}}/got\"]}},\n\
             \"asks\": {{\"command\": {FIXTURE:?}, \"args\": [\"--key=${{input:api-key}}\"]}}}}}}"
        ),
    );
    let vscode = vscode.to_str().unwrap();
    let run = dir.cli(&["--config", vscode, "call", "fx", "echo", "text=hi"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "hi\n"),
        "{}",
        run.stderr
    );
    assert!(
        dir.0.join("got").exists(),
        "${{workspaceFolder}} is the folder holding .vscode"
    );
    let run = dir.cli(&["--config", vscode, "call", "asks", "echo", "text=hi"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("${input:api-key} is a VS Code prompt input")
            && run.stderr.contains("mcp.json"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_unset_vscode_env_variable_is_named_as_not_set() {
    let dir = Scratch::new("newcomer-vscode-env");
    let config = dir.write(
        "mcp.json",
        &format!(
            "{{\"servers\": {{\"fx\": {{\"command\": {FIXTURE:?}, \"args\": [\"good\"], \
             \"env\": {{\"KEY\": \"${{env:MCP_E2E_KEY}}\"}}}}}}}}"
        ),
    );
    let config = config.to_str().unwrap();
    let run = dir.cli(&["--config", config, "call", "fx", "echo", "text=hi"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("environment variable MCP_E2E_KEY is not set"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("only VS Code"), "{}", run.stderr);
    let set = [("MCP_E2E_KEY", "k")];
    let run = dir.cli_with(
        &["--config", config, "call", "fx", "echo", "text=hi"],
        &set,
        None,
    );
    assert_eq!(run.stdout, "hi\n", "{}", run.stderr);
}

#[test]
fn tools_keep_what_servers_send_and_alike_names_stay_apart() {
    let dir = Scratch::new("newcomer-odd-tools");
    dir.project_file(".mcp-cli.toml", &fixture_block("fx", "odd-tools"));
    let run = dir.cli(&["tools", "fx"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let weather: Vec<&str> = (run.stdout.lines())
        .filter(|line| line.starts_with("fx__get_weather"))
        .collect();
    assert_eq!(weather.len(), 2, "{}", run.stdout);
    assert_ne!(weather[0], weather[1]);
    assert!(
        run.stdout.contains("fx__research  [runs as a task]"),
        "{}",
        run.stdout
    );
    // Each distinct name reaches its own tool.
    let mut reached = Vec::new();
    for name in &weather {
        let run = dir.cli(&["call", name]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        reached.push(run.stdout);
    }
    reached.sort();
    assert_eq!(reached, ["this is get.weather\n", "this is get_weather\n"]);
    // A task-only tool is called (as a task where the server takes tasks; this one does not
    // say it does, so plainly).
    let run = dir.cli(&["call", "fx", "research"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "this is research\n"),
        "{}",
        run.stderr
    );
    // --json keeps every member the server sent.
    let run = dir.cli(&["--json", "tools", "fx"]);
    let tools: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let research = (tools.as_array().unwrap().iter())
        .find(|tool| tool["name"] == "research")
        .unwrap();
    assert_eq!(research["_meta"]["kept"], true);
    assert_eq!(research["icons"][0]["src"], "data:image/png;base64,AA==");
    assert_eq!(research["execution"]["taskSupport"], "required");
}

#[test]
fn completions_offer_the_configured_servers() {
    let dir = project("newcomer-completions", &fixture_block("other", "good"));
    let run = dir.cli(&["__servers"]);
    assert_eq!(
        run.stdout, "everything\nfilesystem\nfx\nmemory\nother\n",
        "{}",
        run.stderr
    );
    let script = dir.cli(&["completions", "bash"]);
    assert_eq!(script.code, 0, "{}", script.stderr);
    dir.write("completion.bash", &script.stdout);
    // Bash asks the script for the words after `mcp-cli --json call o`, as it does on Tab.
    let bin = crate::support::cli_binary();
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let program = format!(
            "source completion.bash; COMP_WORDS=({}); COMP_CWORD={}; _mcp_cli_servers; echo \"${{COMPREPLY[*]}}\"",
            words.join(" "),
            words.len() - 1
        );
        let path = format!(
            "{}:{}",
            bin.parent().unwrap().display(),
            std::env::var("PATH").unwrap()
        );
        // The same isolated environment as the CLI runs get.
        let isolated = dir.command(&[]);
        let env = isolated
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())));
        let output = std::process::Command::new("bash")
            .args(["-c", &program])
            .current_dir(&dir.0)
            .envs(env)
            .env("PATH", path)
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    assert_eq!(complete("mcp-cli --json call o"), "other");
    assert_eq!(
        complete("mcp-cli --config .mcp-cli.toml tools f"),
        "filesystem fx"
    );
    // Past the server word, clap's own completion takes over again.
    assert!(!complete("mcp-cli call fx ").contains("other"));
    // `tasks [SERVER]` and `tasks get|wait|cancel SERVER ID`.
    assert_eq!(complete("mcp-cli tasks o"), "other");
    assert_eq!(complete("mcp-cli tasks w"), "wait");
    assert_eq!(complete("mcp-cli tasks wait f"), "filesystem fx");
    assert!(!complete("mcp-cli tasks wait fx ").contains("other"));
    let fish = dir.cli(&["completions", "fish"]);
    assert!(
        fish.stdout.contains("(mcp-cli __servers 2>/dev/null)"),
        "{}",
        fish.stdout
    );
}
