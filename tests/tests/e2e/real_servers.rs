//! The reference servers from npm and PyPI, installed under `target/e2e-servers` on first use
//! and driven through the `mcp-cli` binary. Results are checked, not just exit codes.

use std::path::Path;

use serde_json::Value;

use crate::support::Scratch;

/// Runs `mcp-cli` with the presets pointed at the locally installed npm servers.
fn with_npm(dir: &Scratch, args: &[&str], extra_env: &[(&str, &str)]) -> crate::support::Run {
    let bin = mcp_tests::npm_bin();
    let prefix = bin.parent().and_then(Path::parent).expect("the npm prefix");
    let prefix = prefix.to_str().expect("a UTF-8 npm prefix").to_owned();
    let mut env = vec![("MCP_CLI_NPM_PREFIX", prefix.as_str())];
    env.extend_from_slice(extra_env);
    dir.cli_with(args, &env, None)
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn filesystem_reads_a_file_the_test_wrote() {
    let dir = Scratch::new("real-fs");
    dir.write("note.txt", "written by the test\nsecond line\n");
    let run = with_npm(
        &dir,
        &["call", "filesystem", "read_text_file", "path=note.txt"],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "written by the test\nsecond line\n");
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_echoes_and_returns_an_image() {
    let dir = Scratch::new("real-everything");
    let run = with_npm(
        &dir,
        &["call", "everything", "echo", "message=hi there"],
        &[],
    );
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "Echo: hi there\n"),
        "{}",
        run.stderr
    );
    let run = with_npm(&dir, &["call", "everything__get-tiny-image"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .lines()
            .any(|line| line.starts_with("[image content omitted: image/png, ")),
        "{}",
        run.stdout
    );
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn memory_creates_then_reads() {
    let dir = Scratch::new("real-memory");
    let store = dir.0.join("memory.jsonl");
    let env = [("MEMORY_FILE_PATH", store.to_str().unwrap())];
    let entities = r#"entities:=[{"name":"Ada","entityType":"person","observations":["wrote the first program"]}]"#;
    let run = with_npm(&dir, &["call", "memory", "create_entities", entities], &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = with_npm(&dir, &["--json", "call", "memory", "read_graph"], &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result: Value = serde_json::from_str(&run.stdout).unwrap();
    let text = result["content"][0]["text"].as_str().unwrap();
    let graph: Value = serde_json::from_str(text).unwrap();
    assert_eq!(graph["entities"][0]["name"], "Ada");
    assert_eq!(
        graph["entities"][0]["observations"][0],
        "wrote the first program"
    );
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&status.stderr)
    );
}

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn git_reports_on_a_repository_the_test_made() {
    let bin = mcp_tests::python_bin();
    let dir = Scratch::new("real-git");
    let repo = dir.0.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", "first commit from the test"]);
    std::fs::write(repo.join("untracked.txt"), "u\n").unwrap();
    let config = format!(
        "[mcp.git]\ncommand = {:?}\nargs = [\"--repository\", {:?}]\n",
        bin.join("mcp-server-git").to_str().unwrap(),
        repo.to_str().unwrap()
    );
    dir.project_file(".mcp-cli.toml", &config);
    let repo_arg = format!("repo_path={}", repo.display());
    let run = dir.cli(&["call", "git", "git_status", &repo_arg]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("untracked.txt"), "{}", run.stdout);
    let run = dir.cli(&["call", "git", "git_log", &repo_arg]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("first commit from the test"),
        "{}",
        run.stdout
    );
}

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn time_tells_the_time_in_utc() {
    let bin = mcp_tests::python_bin();
    let dir = Scratch::new("real-time");
    let config = format!(
        "[mcp.time]\ncommand = {:?}\n",
        bin.join("mcp-server-time").to_str().unwrap()
    );
    dir.project_file(".mcp-cli.toml", &config);
    let run = dir.cli(&["call", "time", "get_current_time", "timezone=UTC"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let answer: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(answer["timezone"], "UTC");
    let year = answer["datetime"].as_str().unwrap()[..4]
        .parse::<u32>()
        .unwrap();
    assert!(year >= 2025, "{answer}");
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn everything_catalogue_is_right_after_its_list_change() {
    // server-everything adds tools once `initialized` arrives and announces it with
    // `notifications/tools/list_changed`; the hub's catalogue must hold the final list.
    let bin = mcp_tests::npm_bin();
    let command = mcp_smol::ServerCommand::new(bin.join("mcp-server-everything").to_string_lossy());
    let server = mcp_client_cli::config::Server {
        name: "everything".into(),
        entry: mcp_client_cli::config::Entry::Enabled(mcp_client_cli::config::ServerSpec::new(
            "everything",
            mcp_client_cli::config::Command::new(&command.program),
        )),
        source: mcp_client_cli::config::Source::File("/test/config.toml".into()),
    };
    let config = mcp_client_cli::config::Config {
        servers: vec![server],
        ..Default::default()
    };
    crate::support::bounded(async {
        let hub = mcp_client_cli::hub::Hub::new(config, mcp_client_cli::hub::Settings::default());
        let catalogue = hub.catalogue().await;
        assert!(catalogue.failures.is_empty(), "{:?}", catalogue.failures);
        let names: Vec<&str> = catalogue.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(names.contains(&"everything__echo"), "{names:?}");
        // Registered only once the server is initialized.
        assert!(
            names.contains(&"everything__simulate-research-query"),
            "{names:?}"
        );
        // And it is the list a fresh connection sees once settled.
        let fresh = mcp_smol::connect(&command, mcp_smol::Options::default())
            .await
            .unwrap();
        let mut listed: Vec<String> = fresh
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        fresh.close().await;
        let mut shown: Vec<String> = catalogue
            .tools
            .iter()
            .map(|t| t.tool.name.clone())
            .collect();
        listed.sort();
        shown.sort();
        assert_eq!(shown, listed);
        hub.shutdown().await;
    });
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn an_answer_over_the_limit_with_its_id_last_fails_at_once() {
    // The TypeScript SDK writes `id` after `result`: the client must find it at the line's end.
    let bin = mcp_tests::npm_bin();
    let dir = Scratch::new("real-too-large");
    let server = bin.join("mcp-server-everything");
    dir.project_file(
        ".mcp-cli.toml",
        &format!("[mcp.everything]\ncommand = {server:?}\nmax_message_mb = 0.01\n"),
    );
    let message = format!("message={}", "m".repeat(20_000));
    let run = dir.cli(&["--timeout", "600", "call", "everything", "echo", &message]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("over the 10485 bytes limit"),
        "{}",
        run.stderr
    );
}
