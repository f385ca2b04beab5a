//! The network allowlist through the `mcp-cli` binary: `permissions.network = [hosts]`, the
//! hub's proxy (plain HTTP and CONNECT), refusals in the server's log, `network = []`, and the
//! trust chapter's sandbox examples (`docs/trust.md`) with the real filesystem (npx) and git
//! (venv) servers.

use mcp_tests::fetch::hello_server;

use crate::support::{FIXTURE, Run, Scratch};

/// The fixture's `fetch` mode as `fx`, confined by `permissions`.
fn fetching(scratch: &Scratch, permissions: &str) -> String {
    let config = format!(
        "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"fetch\"]\npermissions = {permissions}\n"
    );
    scratch.write("config.toml", &config).display().to_string()
}

fn call(scratch: &Scratch, config: &str, tool: &str, args: &[&str]) -> Run {
    let all = [&["--config", config, "call", "fx", tool], args].concat();
    scratch.cli(&all)
}

#[test]
fn an_allowed_host_is_reached_through_the_proxy_and_another_port_is_refused_and_logged() {
    let scratch = Scratch::new("allowlist");
    let allowed = hello_server().unwrap();
    // A port that answers too, so that a refusal can only be the proxy's.
    let other = hello_server().unwrap();
    let config = fetching(
        &scratch,
        &format!("{{ network = [\"127.0.0.1:{allowed}\"] }}"),
    );
    let url = |port: u16| format!("url=http://127.0.0.1:{port}/x");
    for tunnel in ["tunnel=false", "tunnel=true"] {
        let run = call(&scratch, &config, "fetch", &[&url(allowed), tunnel]);
        assert_eq!(
            (run.code, run.stdout.trim()),
            (0, "200 hello /x"),
            "{tunnel}: {run:?}"
        );
        let run = call(&scratch, &config, "fetch", &[&url(other), tunnel]);
        assert_eq!(run.code, 0, "{tunnel}: {run:?}");
        let refused = format!("403 127.0.0.1:{other} is not in this server's permissions.network");
        assert_eq!(run.stdout.trim(), refused, "{tunnel}: {run:?}");
    }
    let logs = scratch.cli(&["--config", &config, "logs", "fx"]);
    assert_eq!(logs.code, 0, "{logs:?}");
    for method in ["GET", "CONNECT"] {
        let line = format!(
            "mcp-cli: proxy refused {method} 127.0.0.1:{other}, not in permissions.network \
             (127.0.0.1:{allowed}), while calling fetch"
        );
        assert!(logs.stdout.contains(&line), "{line}: {logs:?}");
    }
    assert!(
        !logs
            .stdout
            .contains(&format!("refused GET 127.0.0.1:{allowed}")),
        "{logs:?}"
    );

    // The proxy is the only way out: the allowed port itself is not reachable directly.
    let address = format!("address=127.0.0.1:{allowed}");
    let run = call(&scratch, &config, "connect", &[&address]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("Connection refused"), "{run:?}");

    // What the server is told: the proxy, and its own loopback names but the listed one.
    let run = call(&scratch, &config, "read_path", &["path=/proc/self/environ"]);
    let environment: Vec<&str> = run.stdout.split(['\0', '\n']).collect();
    for variable in [
        "HTTP_PROXY=http://127.0.0.1:3128",
        "https_proxy=http://127.0.0.1:3128",
        "ALL_PROXY=http://127.0.0.1:3128",
        "NO_PROXY=localhost,::1",
        "npm_config_offline=true",
        "UV_OFFLINE=1",
    ] {
        assert!(environment.contains(&variable), "{variable}: {run:?}");
    }
}

#[test]
fn an_empty_network_list_is_network_false() {
    let scratch = Scratch::new("allowlist-empty");
    let port = hello_server().unwrap();
    let environments: Vec<Vec<String>> = ["{ network = [] }", "{ network = false }"]
        .iter()
        .map(|permissions| {
            let config = fetching(&scratch, permissions);
            let address = format!("address=127.0.0.1:{port}");
            let run = call(&scratch, &config, "connect", &[&address]);
            assert_eq!(run.code, 1, "{permissions}: {run:?}");
            assert!(run.stderr.contains("Connection refused"), "{run:?}");
            let url = format!("url=http://127.0.0.1:{port}/x");
            let run = call(&scratch, &config, "fetch", &[&url]);
            assert_eq!(run.code, 1, "{permissions}: {run:?}");
            let run = call(&scratch, &config, "read_path", &["path=/proc/self/environ"]);
            let mut environment: Vec<String> = (run.stdout.split(['\0', '\n']))
                .filter(|variable| {
                    ["PROXY", "proxy", "OFFLINE", "offline", "NO_INDEX"]
                        .iter()
                        .any(|word| variable.contains(word))
                })
                .map(str::to_owned)
                .collect();
            environment.sort();
            environment
        })
        .collect();
    assert_eq!(environments[0], environments[1]);
    let wanted = ["PIP_NO_INDEX=1", "UV_OFFLINE=1", "npm_config_offline=true"];
    assert_eq!(environments[0], wanted);
}

#[test]
fn a_bad_pattern_makes_the_entry_invalid_naming_it() {
    let scratch = Scratch::new("allowlist-bad");
    let config = fetching(
        &scratch,
        "{ network = [\"api.github.com\", \"https://x/\"] }",
    );
    let run = call(&scratch, &config, "echo", &["text=hi"]);
    assert_ne!(run.code, 0, "{run:?}");
    let reason = "permissions.network[1] \"https://x/\": a host with an optional port, not a URL";
    assert!(run.stderr.contains(reason), "{run:?}");
}

/// The ```toml blocks of the trust chapter's "The network allowlist" section (up to the next
/// heading of its level), by server name.
fn allowlist_examples() -> Vec<(String, String)> {
    let chapter =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/trust.md")).unwrap();
    let section = &chapter[chapter.find("\n## The network allowlist").unwrap() + 1..];
    let section = &section[..section[3..]
        .find("\n## ")
        .map_or(section.len(), |end| end + 3)];
    (section.split("```toml\n").skip(1))
        .map(|block| {
            let block = block.split("```").next().unwrap().to_owned();
            let name = block.lines().next().unwrap().trim_start_matches("[mcp.");
            (name.trim_end_matches(']').to_owned(), block)
        })
        .collect()
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_trust_chapters_allowlist_examples_start_the_npx_and_venv_servers_sandboxed() {
    let (npm, python) = (mcp_tests::npm_bin(), mcp_tests::python_bin());
    let examples = allowlist_examples();
    let names: Vec<&str> = examples.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["filesystem", "git"]);
    let scratch = Scratch::new("allowlist-book");
    scratch.write("note.txt", "in the folder");
    let init = std::process::Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(&scratch.0)
        .status()
        .unwrap();
    assert!(init.success());
    // The home the examples name: npx's cache is the one the suites keep beside the installed
    // servers (npx finds the filesystem server there, or fetches it through the proxy), and
    // the venv is the suites' own.
    let home = scratch.0.join("home");
    std::fs::create_dir_all(home.join(".venvs")).unwrap();
    let npm_cache = mcp_tests::servers_dir().join("npm-cache");
    // Made here too: another suite fills it, and run alone this one found a dangling link.
    std::fs::create_dir_all(&npm_cache).unwrap();
    // Real paths: what a link names through `..` (the suites' target folder is found from
    // the tests' folder) is not kept in the sandbox when it lies beneath `/tmp`.
    let real = |path: &std::path::Path| std::fs::canonicalize(path).unwrap();
    std::os::unix::fs::symlink(real(&npm_cache), home.join(".npm")).unwrap();
    std::os::unix::fs::symlink(real(python.parent().unwrap()), home.join(".venvs/mcp")).unwrap();
    let path = format!(
        "{}:{}",
        npm.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("HOME", home.to_str().unwrap()), ("PATH", path.as_str())];
    let config = (examples.iter().map(|(_, block)| block.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    let config = scratch.write("config.toml", &config).display().to_string();
    let cli =
        |args: &[&str]| scratch.cli_with(&[&["--config", &config], args].concat(), &env, None);

    // As the trust chapter shows them.
    let run = cli(&["call", "filesystem", "list_directory", "path=."]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("[FILE] note.txt"), "{run:?}");
    let run = cli(&["call", "filesystem", "read_text_file", "path=note.txt"]);
    assert_eq!(
        (run.code, run.stdout.trim()),
        (0, "in the folder"),
        "{run:?}"
    );
    // Confined to the folder: the test's own source is out of reach.
    let outside = format!("path={}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
    let run = cli(&["call", "filesystem", "read_text_file", &outside]);
    assert_ne!(run.code, 0, "{run:?}");

    let run = cli(&["call", "git", "git_status", "repo_path=."]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("note.txt"), "{run:?}");
}
