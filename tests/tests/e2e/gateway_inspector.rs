//! The MCP Inspector's command line (`@modelcontextprotocol/inspector --cli`, its current
//! release) as a host of `mcp-cli serve`: it lists the tools and calls one, over stdio and over
//! `serve --listen` in both eras.

use std::path::Path;
use std::process::Command;

use mcp_smol::serde_json::{Value, json};

use crate::gateway_listen::{env, listen_to};
use crate::support::{Scratch, cli_binary};

/// Runs the Inspector's CLI with `args` and reads the JSON it prints.
fn inspect(node: &Path, launcher: &Path, scratch: &Scratch, args: &[&str]) -> Value {
    let output = Command::new(node)
        .arg(launcher)
        .arg("--cli")
        .args(args)
        // It keeps its catalogue and secrets under the home folder: the scratch one.
        .env("HOME", scratch.0.join("home"))
        .envs(env(scratch))
        .env_remove("MCP_CLI_CONFIG")
        .current_dir(&scratch.0)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}:\n{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{args:?}: not JSON:\n{stdout}"))
}

/// What every run must have seen: the fixture's tools under the gateway's names, and a call.
fn check(listed: &Value, called: &Value, how: &str) {
    let names: Vec<&str> = (listed["tools"].as_array())
        .unwrap_or_else(|| panic!("{how}: no tools in {listed}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"fx__echo") && names.contains(&"fx__add"),
        "{how}: {names:?}"
    );
    assert_eq!(called["content"][0]["text"], "5", "{how}: {called}");
    assert_eq!(
        called["structuredContent"],
        json!({"sum": 5}),
        "{how}: {called}"
    );
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_inspector_cli_lists_and_calls_through_serve_over_stdio_and_listen() {
    let (node, launcher) = mcp_tests::inspector_cli();
    let scratch = Scratch::new("inspector");
    let listening = listen_to(&scratch, &["good"], &[]);
    let add = [
        "--method",
        "tools/call",
        "--tool-name",
        "fx__add",
        "--tool-arg",
        "a=2",
        "b=3",
    ];

    // Over stdio: the Inspector starts `serve` itself, after `--` so that our `--config` is
    // not taken for its own; it passes on only the variables it is given.
    let cli = cli_binary().display().to_string();
    let config = scratch.0.join("listen.toml").display().to_string();
    let mut stdio: Vec<String> = Vec::new();
    for (key, value) in env(&scratch) {
        stdio.extend(["-e".to_owned(), format!("{key}={value}")]);
    }
    stdio.extend(["--".into(), cli, "--config".into(), config, "serve".into()]);
    let stdio: Vec<&str> = stdio.iter().map(String::as_str).collect();
    let (options, command) = stdio.split_at(stdio.len() - 5);
    let run = |method: &[&str]| {
        let args: Vec<&str> = [options, method, command].concat();
        inspect(&node, &launcher, &scratch, &args)
    };
    check(&run(&["--method", "tools/list"]), &run(&add), "stdio");

    // Over HTTP, with the token, in each era.
    let bearer = format!("Authorization: Bearer {}", listening.token);
    for era in ["legacy", "modern"] {
        let run = |method: &[&str]| {
            let target = [
                listening.url.as_str(),
                "--transport",
                "http",
                "--header",
                &bearer,
            ];
            let args: Vec<&str> = [&target[..], &["--protocol-era", era], method].concat();
            inspect(&node, &launcher, &scratch, &args)
        };
        check(&run(&["--method", "tools/list"]), &run(&add), era);
    }
}
