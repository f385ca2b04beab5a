//! Config management through the binary: enable and disable in every format, add, remove,
//! import from a fake home laid out like each host's, and ad hoc `--stdio` servers.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::{FIXTURE, Run, Scratch, fixture_block};

/// The STATE column of `name`'s row in a `servers` table.
fn state_of(run: &Run, name: &str) -> Option<String> {
    let row = (run.stdout.lines()).find(|line| line.split_whitespace().next() == Some(name))?;
    row.split_whitespace().nth(1).map(str::to_owned)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn disable_then_enable_round_trips_every_format() {
    let dir = Scratch::new("edit-formats");
    let fx = FIXTURE;
    let files = [
        (
            "native.toml",
            format!(
                "# my servers\n\n[mcp.fx]   # the fixture\ncommand={fx:?}\n  args = [ \"good\" ] # mode\n\n\n[mcp.other]\ncommand = 'x'\nenabled = false\n"
            ),
        ),
        (
            "codex.toml",
            format!(
                "model = \"o3\"\n\n[mcp_servers.fx]\ncommand = {fx:?}\nargs = [\"good\"]\n\n[mcp_servers.fx.env]\nA = \"1\"\n"
            ),
        ),
        (
            "claude.json",
            format!(
                "{{\n    \"mcpServers\": {{\n        \"fx\": {{ \"command\": \"{fx}\",\n                \"args\": [\"good\"] }},\n        \"other\": {{\"command\": \"x\", \"disabled\": true}}\n    }},\n    \"theme\": \"dark\"\n}}\n"
            ),
        ),
        (
            "mcp.json",
            format!(
                "{{\n\t// VS Code\n\t\"servers\": {{\n\t\t\"fx\": {{\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"{fx}\", /* the fixture */\n\t\t\t\"args\": [\"good\",],\n\t\t}},\n\t}},\n\t\"inputs\": [],\n}}\n"
            ),
        ),
        (
            "opencode.json",
            format!(
                "{{\"$schema\": \"https://opencode.ai/config.json\",\n \"mcp\": {{\"fx\": {{\"type\": \"local\", \"command\": [\"{fx}\", \"good\"]}}}}}}"
            ),
        ),
        (
            "zed.json",
            format!(
                "// Zed\n{{\n  \"theme\": \"One\",\n  \"context_servers\": {{\n    \"fx\": {{\n      \"command\": \"{fx}\",\n      \"args\": [\"good\"], // mode\n    }},\n  }},\n}}\n"
            ),
        ),
        (
            "reeboot.json",
            format!(
                "{{\"mcp\": {{\"servers\": [\n  {{\"name\": \"fx\", \"command\": \"{fx}\", \"args\": [\"good\"], \"permissions\": {{}}}}\n]}}}}\n"
            ),
        ),
    ];
    for (name, text) in files {
        let path = dir.write(name, &text);
        let config = path.to_str().unwrap();
        let run = dir.cli(&["--config", config, "disable", "fx"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert_eq!(run.stdout, format!("disabled fx in {config}\n"));
        assert_ne!(read(&path), text, "{name}");
        let run = dir.cli(&["--config", config, "servers"]);
        assert_eq!(
            state_of(&run, "fx").as_deref(),
            Some("disabled"),
            "{name}: {run:?}"
        );
        let run = dir.cli(&["--config", config, "disable", "fx"]);
        assert_eq!(run.stdout, format!("fx is already disabled in {config}\n"));
        let run = dir.cli(&["--config", config, "enable", "fx"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert_eq!(read(&path), text, "{name} is back byte for byte");
        let run = dir.cli(&["--config", config, "call", "fx", "echo", "text=on"]);
        assert_eq!(run.stdout, "on\n", "{name}: {}", run.stderr);
    }
}

#[test]
fn the_defining_file_is_edited_and_ambiguity_is_an_error() {
    let dir = Scratch::new("edit-which");
    let user = dir.0.join("config-home/mcp-cli/config.toml");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    let user_text = format!(
        "{}\n{}",
        fixture_block("a", "good"),
        fixture_block("both", "good")
    );
    std::fs::write(&user, &user_text).unwrap();
    std::fs::set_permissions(&user, std::fs::Permissions::from_mode(0o640)).unwrap();
    let project_text = format!(
        "{{\"mcpServers\": {{\"b\": {{\"command\": \"{FIXTURE}\"}}, \"both\": {{\"command\": \"{FIXTURE}\"}}}}}}"
    );
    let project = dir.project_file(".mcp.json", &project_text);

    let run = dir.cli(&["disable", "b"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        read(&project).contains("\"b\": {\"command\": \""),
        "{}",
        read(&project)
    );
    assert!(read(&project).contains(", \"disabled\": true}, \"both\""));
    assert_eq!(read(&user), user_text);

    let run = dir.cli(&["disable", "a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(read(&user).contains("args = [\"good\"]\nenabled = false\n"));
    let mode = std::fs::metadata(&user).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "the file keeps its mode");
    let run = dir.cli(&["servers"]);
    assert_eq!(state_of(&run, "a").as_deref(), Some("disabled"));
    assert_eq!(state_of(&run, "b").as_deref(), Some("disabled"));

    let (user_now, project_now) = (read(&user), read(&project));
    let run = dir.cli(&["disable", "both"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains(&format!(
            "server both is defined in {} and {}",
            user.display(),
            project.display()
        )),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["disable", "memory"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("memory is a built-in preset"),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["enable", "nosuch"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("no config file defines a server named nosuch")
    );
    assert_eq!((read(&user), read(&project)), (user_now, project_now));
}

#[test]
fn bad_files_are_errors_naming_them_and_stay_untouched() {
    let dir = Scratch::new("edit-bad");
    let text = fixture_block("fx", "good");
    let locked = dir.write("locked.toml", &text);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o444)).unwrap();
    let run = dir.cli(&["--config", locked.to_str().unwrap(), "disable", "fx"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains(&format!("{} is read-only", locked.display())),
        "{}",
        run.stderr
    );
    assert_eq!(read(&locked), text);

    let broken_text = "{\"mcpServers\": {\"fx\": {\"command\": \"x\",\n\"args\": 5}}}";
    let broken = dir.write("broken.json", broken_text);
    let run = dir.cli(&["--config", broken.to_str().unwrap(), "disable", "fx"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains(&format!("invalid config {} line 2", broken.display())),
        "{}",
        run.stderr
    );
    assert_eq!(read(&broken), broken_text);

    let twice_text = format!("{text}[mcp_servers.fx]\ncommand = \"y\"\n");
    let twice = dir.write("twice.toml", &twice_text);
    let run = dir.cli(&["--config", twice.to_str().unwrap(), "disable", "fx"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains(&format!("{} defines fx more than once", twice.display())),
        "{}",
        run.stderr
    );
    assert_eq!(read(&twice), twice_text);
}

#[test]
fn add_and_remove_native_entries() {
    let dir = Scratch::new("edit-add");
    let user = dir.0.join("config-home/mcp-cli/config.toml");
    let run = dir.cli(&["add", "fx", "--env", "K=v", "--", FIXTURE, "good"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, format!("added fx to {}\n", user.display()));
    assert_eq!(
        read(&user),
        format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\nenv = {{ K = \"v\" }}\n")
    );
    let mode = std::fs::metadata(&user).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let run = dir.cli(&["call", "fx", "echo", "text=added"]);
    assert_eq!(run.stdout, "added\n", "{}", run.stderr);

    let run = dir.cli(&["add", "fx", "--", "other"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("already defines fx; use --force"),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["add", "fx", "--force", "--", FIXTURE, "good", "--flag"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(read(&user).contains("args = [\"good\", \"--flag\"]"));
    // A fixed revision is written, and spoken.
    let add = [
        "add",
        "old",
        "--protocol",
        "2025-06-18",
        "--",
        FIXTURE,
        "good",
    ];
    let run = dir.cli(&add);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        read(&user).ends_with("args = [\"good\"]\nprotocol = \"2025-06-18\"\n"),
        "{}",
        read(&user)
    );
    let run = dir.cli(&["--json", "servers"]);
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let old = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "old");
    assert_eq!(old.unwrap()["protocol"], "2025-06-18", "{}", run.stdout);
    let run = dir.cli(&["add", "new", "--protocol", "2026", "--", FIXTURE, "good"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("unknown protocol revision `2026`"),
        "{}",
        run.stderr
    );
    assert!(dir.cli(&["remove", "old"]).code == 0);

    let run = dir.cli(&[
        "add",
        "web",
        "--url",
        "https://example.invalid/mcp",
        "--header",
        "Authorization=Bearer ${TOKEN}",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(read(&user).ends_with(
        "\n[mcp.web]\nurl = \"https://example.invalid/mcp\"\nheaders = { Authorization = \"Bearer ${TOKEN}\" }\n"
    ));
    let run = dir.cli(&["servers"]);
    // Invalid while TOKEN is unset; with it set, example.invalid never resolves.
    let web = state_of(&run, "web");
    assert!(
        matches!(web.as_deref(), Some("invalid" | "failed")),
        "{web:?}"
    );
    assert_eq!(state_of(&run, "fx").as_deref(), Some("running"));

    let run = dir.cli(&["remove", "fx"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = dir.cli(&["servers"]);
    assert_eq!(state_of(&run, "fx"), None, "{}", run.stdout);
    let run = dir.cli(&["remove", "fx"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains(&format!("no server named fx in {}", user.display())),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["add", "nothing"]);
    assert_eq!(run.code, 2, "{run:?}");
}

#[test]
fn import_reads_each_hosts_places_and_writes_a_native_file() {
    let dir = Scratch::new("import");
    let home = dir.0.join("home");
    let entry = |mode: &str| format!(r#"{{"command": "{FIXTURE}", "args": ["{mode}"]}}"#);
    let files = [
        (
            "home/.config/Claude/claude_desktop_config.json",
            format!(r#"{{"mcpServers": {{"desktop": {}}}}}"#, entry("good")),
        ),
        (
            "home/.claude.json",
            format!(
                r#"{{"numStartups": 2, "mcpServers": {{"code": {}}}, "projects": {{"/src/app": {{"mcpServers": {{"code-project": {}}}}}}}}}"#,
                entry("good"),
                entry("good")
            ),
        ),
        (
            "home/.cursor/mcp.json",
            format!(r#"{{"mcpServers": {{"cursor": {}}}}}"#, entry("good")),
        ),
        (
            "home/.config/Code/User/mcp.json",
            format!(
                "{{\n  // VS Code\n  \"servers\": {{\"vscode\": {},}},\n}}",
                entry("good")
            ),
        ),
        (
            "home/.codeium/windsurf/mcp_config.json",
            format!(r#"{{"mcpServers": {{"windsurf": {}}}}}"#, entry("good")),
        ),
        (
            "home/.gemini/settings.json",
            format!(
                r#"{{"theme": "x", "mcpServers": {{"gemini": {}}}}}"#,
                entry("good")
            ),
        ),
        (
            "home/.codex/config.toml",
            format!(
                "model = \"o3\"\n[mcp_servers.codex]\ncommand = {FIXTURE:?}\nargs = [\"good\"]\n"
            ),
        ),
        (
            "home/.config/opencode/opencode.json",
            format!(
                r#"{{"mcp": {{"opencode": {{"type": "local", "command": ["{FIXTURE}", "good"]}}}}}}"#
            ),
        ),
        (
            "home/.config/zed/settings.json",
            format!(r#"{{"context_servers": {{"zed": {}}}}}"#, entry("good")),
        ),
        (
            "home/.packetcode/config.toml",
            fixture_block("packetcode", "good"),
        ),
        (
            "home/.pi/agent/settings.json",
            format!(r#"{{"mcpServers": {{"pi": {}}}}}"#, entry("good")),
        ),
        (
            "home/.reeboot/config.json",
            format!(
                r#"{{"mcp": {{"servers": [{{"name": "reeboot", "command": "{FIXTURE}", "args": ["good"], "permissions": {{"network": false}}}}]}}}}"#
            ),
        ),
        (
            ".dispatch/mcp.json",
            format!(r#"{{"mcpServers": {{"dispatch": {}}}}}"#, entry("good")),
        ),
    ];
    for (path, text) in &files {
        let path = dir.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let home_str = home.to_str().unwrap();
    let config_home = home.join(".config");
    let env = [
        ("HOME", home_str),
        ("XDG_CONFIG_HOME", config_home.to_str().unwrap()),
        ("CODEX_HOME", ""),
    ];
    let run = dir.cli_with(&["import"], &env, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let expected = [
        ("desktop", "home/.config/Claude/claude_desktop_config.json"),
        ("code", "home/.claude.json"),
        ("code-project", "home/.claude.json"),
        ("cursor", "home/.cursor/mcp.json"),
        ("vscode", "home/.config/Code/User/mcp.json"),
        ("windsurf", "home/.codeium/windsurf/mcp_config.json"),
        ("gemini", "home/.gemini/settings.json"),
        ("codex", "home/.codex/config.toml"),
        ("opencode", "home/.config/opencode/opencode.json"),
        ("zed", "home/.config/zed/settings.json"),
        ("packetcode", "home/.packetcode/config.toml"),
        ("pi", "home/.pi/agent/settings.json"),
        ("reeboot", "home/.reeboot/config.json"),
        ("dispatch", ".dispatch/mcp.json"),
    ];
    let rows: Vec<&str> = run.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), expected.len(), "{}", run.stdout);
    for (row, (name, file)) in rows.iter().zip(expected) {
        assert_eq!(row.split_whitespace().next(), Some(name), "{row}");
        let file = dir.0.join(file);
        assert!(row.contains(file.to_str().unwrap()), "{row}");
    }
    assert!(
        run.stdout.contains("Claude Code project /src/app"),
        "{}",
        run.stdout
    );

    let run = dir.cli_with(&["import", "--write"], &env, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let native = config_home.join("mcp-cli/config.toml");
    assert!(
        run.stdout
            .ends_with(&format!("wrote {}\n", native.display()))
    );
    // One project's servers (Claude Code's per-project ones, a file in this folder) are not
    // made the user's own unless named.
    let per_project = ["code-project", "dispatch"];
    for name in per_project {
        let skipped = format!("skipped {name} (");
        assert!(run.stderr.contains(&skipped), "{name}: {}", run.stderr);
    }
    assert!(
        run.stderr
            .contains("configured for one project only; name it"),
        "{}",
        run.stderr
    );
    let run = dir.cli_with(&["servers"], &env, None);
    for (name, _) in expected {
        let state = state_of(&run, name);
        match per_project.contains(&name) {
            true => assert_eq!(state, None, "{name}: {run:?}"),
            false => assert_eq!(state.as_deref(), Some("running"), "{name}: {run:?}"),
        }
    }
    let named = dir.cli_with(
        &["import", "--write", "code-project", "dispatch"],
        &env,
        None,
    );
    assert_eq!(named.code, 0, "{named:?}");
    let run = dir.cli_with(&["servers"], &env, None);
    for name in per_project {
        assert_eq!(
            state_of(&run, name).as_deref(),
            Some("running"),
            "{name}: {run:?}"
        );
    }
    // Only read: every host's file is as it was.
    for (path, text) in &files {
        assert_eq!(&read(&dir.0.join(path)), text, "{path}");
    }
    // A second import skips what is there already, and names can be picked.
    let run = dir.cli_with(&["import", "--write", "zed"], &env, None);
    assert_eq!(run.stdout, "nothing to import\n");
    assert!(run.stderr.contains("skipped zed"), "{}", run.stderr);
    let run = dir.cli_with(&["import", "--write", "nosuch"], &env, None);
    assert_eq!(run.code, 2);
}

#[test]
fn gemini_dollar_variables_in_env_expand_and_import_as_variables() {
    let dir = Scratch::new("import-gemini");
    let home = dir.0.join("home");
    let settings = home.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    // The program comes through the environment, so it runs only if `$VAR` was expanded.
    let text = r#"{"mcpServers": {"gem": {"command": "sh", "args": ["-c", "exec \"$FX\" good"],
        "env": {"FX": "$MCP_E2E_FIXTURE"}}}}"#;
    std::fs::write(&settings, text).unwrap();
    let config_home = home.join(".config");
    let env = [
        ("HOME", home.to_str().unwrap()),
        ("XDG_CONFIG_HOME", config_home.to_str().unwrap()),
        ("MCP_E2E_FIXTURE", FIXTURE),
    ];
    let settings = settings.to_str().unwrap();
    let run = dir.cli_with(
        &["--config", settings, "call", "gem", "echo", "text=in place"],
        &env,
        None,
    );
    assert_eq!(run.stdout, "in place\n", "{}", run.stderr);

    let run = dir.cli_with(&["import", "--write", "gem"], &env, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let native = read(&config_home.join("mcp-cli/config.toml"));
    assert!(
        native.contains("env = { FX = \"${MCP_E2E_FIXTURE}\" }"),
        "{native}"
    );
    let run = dir.cli_with(&["call", "gem", "echo", "text=imported"], &env, None);
    assert_eq!(run.stdout, "imported\n", "{}", run.stderr);
}

#[test]
fn add_creates_the_config_file_it_is_given() {
    let dir = Scratch::new("add-new-file");
    let config = dir.0.join("sub/new.toml");
    let config = config.to_str().unwrap();
    let run = dir.cli(&["--config", config, "add", "fx", "--", FIXTURE, "good"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, format!("added fx to {config}\n"));
    let mode = std::fs::metadata(config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let run = dir.cli(&["--config", config, "call", "fx", "echo", "text=hi"]);
    assert_eq!(run.stdout, "hi\n", "{}", run.stderr);
    // The same for `import --write`; reading a file that is not there is still an error.
    let other = dir.0.join("other.toml");
    let other = other.to_str().unwrap();
    let home = [("HOME", dir.0.to_str().unwrap())];
    let run = dir.cli_with(&["--config", other, "import", "--write"], &home, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = dir.cli(&["--config", other, "servers"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("other.toml"), "{}", run.stderr);
}

#[test]
fn ad_hoc_servers_take_no_server_word_for_read_prompt_and_trust() {
    let dir = Scratch::new("adhoc-words");
    let describe = dir.write("description.txt", "Says hello.");
    let line = format!("'{FIXTURE}' resources --describe '{}'", describe.display());
    let adhoc = |args: &[&str]| {
        let mut words = vec!["--stdio", line.as_str()];
        words.extend_from_slice(args);
        dir.cli(&words)
    };
    let run = adhoc(&["read", "fx://text/hello"]);
    assert_eq!(run.stdout, "hello from the fixture\n", "{}", run.stderr);
    let run = adhoc(&["prompt", "greet", "name=Ada", "greeting=Hi"]);
    assert_eq!(run.stdout, "user: Hi, Ada!\n", "{}", run.stderr);
    let run = adhoc(&["prompt", "plain"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = adhoc(&["trust"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("mcp-fixture: 0 changed tool definition(s) accepted"),
        "{}",
        run.stderr
    );
    // The SERVER word is still taken.
    let run = adhoc(&["read", "mcp-fixture", "fx://text/hello"]);
    assert_eq!(run.stdout, "hello from the fixture\n", "{}", run.stderr);
    let run = adhoc(&["prompt", "mcp-fixture", "greet", "name=Ada"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = adhoc(&["trust", "mcp-fixture"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Without an ad hoc server, the word is needed and its absence says so.
    let run = dir.cli(&["read", "fx://text/hello"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("which server?"), "{}", run.stderr);
    let run = dir.cli(&["trust"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = dir.cli(&["prompt", "fx"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("which prompt?"), "{}", run.stderr);
}

#[test]
fn stdio_stands_for_an_ad_hoc_server() {
    let dir = Scratch::new("adhoc");
    dir.project_file(".mcp-cli.toml", &fixture_block("fx", "good"));
    let line = format!("'{FIXTURE}' good");
    let run = dir.cli(&["--stdio", &line, "call", "echo", "text=hi there"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "hi there\n"),
        "{}",
        run.stderr
    );
    let run = dir.cli(&["--stdio", &line, "call", "mcp-fixture__echo", "text=named"]);
    assert_eq!(run.stdout, "named\n", "{}", run.stderr);
    let run = dir.cli(&["--stdio", &line, "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("mcp-fixture__echo"), "{}", run.stdout);
    assert!(
        !run.stdout.contains("fx__"),
        "only the ad hoc server: {}",
        run.stdout
    );
    let run = dir.cli(&["--stdio", &line, "disable", "fx"]);
    assert_eq!(run.code, 2);
    let run = dir.cli(&["--stdio", "x \"unclosed", "tools"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--stdio"), "{}", run.stderr);
}
