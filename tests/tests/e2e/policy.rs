//! Policy through the `mcp-cli` binary: allow and deny lists, tool filters in three formats,
//! rules in native TOML and Claude Code's JSON, `ask` on a real pseudo-terminal, and policy
//! mistakes reported before anything starts.

use crate::support::{FIXTURE, Run, Scratch, fixture_block};

fn state_of(run: &Run, name: &str) -> String {
    let row = (run.stdout.lines()).find(|line| line.split_whitespace().next() == Some(name));
    let row = row.unwrap_or_else(|| panic!("no row for {name}: {}", run.stdout));
    row.split_whitespace().nth(1).unwrap().to_owned()
}

/// A fixture block that logs what it receives, so a test can tell it never started.
fn logged_block(dir: &Scratch, name: &str) -> (String, std::path::PathBuf) {
    let log = dir.0.join(format!("{name}.received"));
    let block = format!(
        "[mcp.{name}]\ncommand = {FIXTURE:?}\nargs = [\"good\", \"--log-received\", {log:?}]\n"
    );
    (block, log)
}

#[test]
fn denied_servers_are_listed_and_never_spawned() {
    let dir = Scratch::new("policy-deny");
    let (nope, nope_log) = logged_block(&dir, "nope");
    let (other, other_log) = logged_block(&dir, "other");
    let config = format!(
        "{}{nope}{other}\n[security]\nmcp_server_allowlist = [\"fx\", \"nope\"]\n\
         mcp_server_denylist = [\"nope\"]\n",
        fixture_block("fx", "good")
    );
    dir.project_file(".mcp-cli.toml", &config);
    let run = dir.cli(&["servers"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(state_of(&run, "fx"), "running");
    assert_eq!(state_of(&run, "nope"), "denied");
    assert_eq!(state_of(&run, "other"), "denied");
    assert!(
        run.stderr.contains("nope: denied by mcp_server_denylist")
            && run.stderr.contains(".mcp-cli.toml line"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("other: not in mcp_server_allowlist"),
        "{}",
        run.stderr
    );
    // The allowlist keeps presets out too.
    assert_eq!(state_of(&run, "filesystem"), "denied");

    let run = dir.cli(&["call", "nope", "echo", "text=x"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("mcp_server_denylist"), "{}", run.stderr);
    let run = dir.cli(&["tools", "other"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("not in mcp_server_allowlist"),
        "{}",
        run.stderr
    );
    assert!(
        !nope_log.exists() && !other_log.exists(),
        "a denied server was spawned"
    );
}

/// `tools fx` prints only `echo`, and `call fx add` is a usage error saying why.
fn check_only_echo_is_offered(dir: &Scratch, config: &std::path::Path) {
    let config = config.to_str().unwrap();
    let run = dir.cli(&["--config", config, "tools", "fx"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names: Vec<&str> = (run.stdout.lines())
        .filter(|line| !line.starts_with(' '))
        .map(|line| line.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["fx__echo"], "{config}: {}", run.stdout);
    let run = dir.cli(&["--config", config, "call", "fx", "add", "a=1", "b=2"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("turned off for server fx"),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["--config", config, "call", "fx", "echo", "text=ok"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "ok\n"),
        "{}",
        run.stderr
    );
}

#[test]
fn tool_filters_in_native_codex_and_gemini_formats() {
    let dir = Scratch::new("policy-filters");
    let native = dir.write(
        "native.toml",
        &format!(
            "{}enabled_tools = [\"ech?\", \"add\"]\ndisabled_tools = [\"add\"]\n",
            fixture_block("fx", "good")
        ),
    );
    check_only_echo_is_offered(&dir, &native);
    let codex = dir.write(
        "codex.toml",
        &format!(
            "[mcp_servers.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\nenabled_tools = [\"e*\"]\n"
        ),
    );
    check_only_echo_is_offered(&dir, &codex);
    let gemini = dir.write(
        "settings.json",
        &format!(
            r#"{{"mcpServers": {{"fx": {{"command": {FIXTURE:?}, "args": ["good"],
                "includeTools": ["echo", "add"], "excludeTools": ["add"]}}}}}}"#
        ),
    );
    check_only_echo_is_offered(&dir, &gemini);
}

#[test]
fn deny_rules_in_native_toml_and_claude_json() {
    let dir = Scratch::new("policy-rules");
    let native = dir.write(
        "native.toml",
        &format!(
            "{}\n[[permissions.rules]]\ntool = \"fx__add\"\naction = \"deny\"\n\n\
             [[permissions.rules]]\ntool = \"fx__*\"\naction = \"allow\"\n\n\
             [[permissions.rules]]\ntool = \"fx__echo\"\naction = \"deny\"\n",
            fixture_block("fx", "good")
        ),
    );
    let claude = dir.project_file(
        ".mcp.json",
        &format!(
            r#"{{"mcpServers": {{"fx": {{"command": {FIXTURE:?}, "args": ["good"]}}}},
  "permissions": {{"allow": ["mcp__fx__*"], "deny": ["mcp__fx__add"]}}}}"#
        ),
    );
    for config in [&native, &claude] {
        let config = config.to_str().unwrap();
        let run = dir.cli(&["--config", config, "tools", "fx"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(!run.stdout.contains("fx__add"), "{config}: {}", run.stdout);
        // First match wins: the allow before it keeps echo.
        assert!(run.stdout.contains("fx__echo"), "{config}: {}", run.stdout);
        let run = dir.cli(&["--config", config, "call", "fx", "add", "a=1", "b=2"]);
        assert_eq!(run.code, 2, "{config}: {}", run.stderr);
        assert!(
            run.stderr.contains("fx__add is denied by the rule") && run.stderr.contains(" line "),
            "{config}: {}",
            run.stderr
        );
    }
}

fn ask_project(name: &str) -> Scratch {
    let dir = Scratch::new(name);
    dir.project_file(
        ".mcp-cli.toml",
        &format!(
            "{}\n[[permissions.rules]]\ntool = \"fx__add\"\naction = \"ask\"\n",
            fixture_block("fx", "good")
        ),
    );
    dir
}

#[test]
fn ask_without_a_terminal_is_refused_unless_yes() {
    let dir = ask_project("policy-ask-pipe");
    let run = dir.cli(&["call", "fx", "add", "a=1", "b=2"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("needs approval") && run.stderr.contains("--yes"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "");
    let run = dir.cli(&["--yes", "call", "fx", "add", "a=1", "b=2"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "3\n"),
        "{}",
        run.stderr
    );
    // Tools no rule covers are not held up.
    let run = dir.cli(&["call", "fx", "echo", "text=free"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "free\n"),
        "{}",
        run.stderr
    );
}

/// `mcp-cli call fx add a=1 b=2` with stdin and stderr on a terminal, answering the prompt.
fn call_on_a_terminal(dir: &Scratch, answer: &str) -> (i32, String, String) {
    let run = dir.on_terminal(
        &["call", "fx", "add", "a=1", "b=2"],
        false,
        Some(("[y/N]", answer)),
    );
    (run.code, run.stdout, run.screen)
}

#[test]
fn ask_prompts_on_a_terminal() {
    let dir = ask_project("policy-ask-pty");
    let (code, stdout, screen) = call_on_a_terminal(&dir, "y\n");
    assert_eq!((code, stdout.as_str()), (0, "3\n"), "{screen}");
    assert!(screen.contains("fx__add asks for approval"), "{screen}");
    assert!(
        screen.contains("\"a\": 1"),
        "the arguments are shown: {screen}"
    );

    let (code, stdout, screen) = call_on_a_terminal(&dir, "n\n");
    assert_eq!((code, stdout.as_str()), (2, ""), "{screen}");
    assert!(screen.contains("declined"), "{screen}");
}

#[test]
fn policy_mistakes_name_file_line_and_key_and_start_nothing() {
    let dir = Scratch::new("policy-mistakes");
    let (fx, log) = logged_block(&dir, "fx");
    let cases = [
        (
            "[security]\nmcp_server_denylist = [\"fx\", \"githb\"]\n",
            "line 6: security.mcp_server_denylist",
        ),
        (
            "[security]\nmcp_server_allowlist = [\"nobody\"]\n",
            "line 6: security.mcp_server_allowlist",
        ),
        (
            "[[permissions.rules]]\ntool = \"fx__[oops\"\naction = \"deny\"\n",
            "line 6: permissions.rules[0].tool",
        ),
        (
            "[[permissions.rules]]\ntool = \"fx__x\"\naction = \"maybe\"\n",
            "line 7: permissions.rules[0].action",
        ),
        (
            "[[permissions.rules]]\ntool = \"ghost__*\"\naction = \"deny\"\n",
            "line 6: permissions.rules[0].tool",
        ),
    ];
    for (policy, expected) in cases {
        let path = dir.write("bad.toml", &format!("{fx}\n{policy}"));
        for command in [&["servers"][..], &["call", "fx", "echo", "text=x"]] {
            let mut args = vec!["--config", path.to_str().unwrap()];
            args.extend_from_slice(command);
            let run = dir.cli(&args);
            assert_eq!(run.code, 2, "{policy}: {}", run.stderr);
            assert!(
                run.stderr.contains("bad.toml") && run.stderr.contains(expected),
                "{policy}: expected {expected:?} in {}",
                run.stderr
            );
        }
        assert!(
            !log.exists(),
            "{policy}: a server started after a config error"
        );
    }
}
