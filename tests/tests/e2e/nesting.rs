//! mcp-cli kept from starting itself without end: a config entry that runs our own gateway
//! over the same config is refused, `import` skips such entries, and the depth marker stops
//! nesting that comes through a wrapper.

use std::path::Path;

use crate::support::{FIXTURE, Run, Scratch, cli_binary, fixture_block};

/// The processes still running in `dir` (every process a run there starts inherits it).
fn left_in(dir: &Path) -> Vec<u32> {
    let dir = std::fs::canonicalize(dir).unwrap();
    mcp_tests::processes_where(|stat| stat.state != 'Z')
        .into_iter()
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .collect()
}

/// The row of `name` in a `servers` table, and its reason line (on stderr).
fn row_and_reason<'a>(run: &'a Run, name: &str) -> (Option<&'a str>, Option<&'a str>) {
    let mut lines = run.stdout.lines();
    let row = lines.find(|line| line.split_whitespace().next() == Some(name));
    let reason =
        (run.stderr.lines()).find(|line| line.trim_start().starts_with(&format!("{name}:")));
    (row, reason)
}

#[test]
fn a_config_entry_running_our_own_gateway_is_refused() {
    let scratch = Scratch::new("nesting-own");
    let config = format!(
        "[mcp.gw]\ncommand = {:?}\nargs = [\"serve\"]\n{}",
        cli_binary().display(),
        fixture_block("fx", "good")
    );
    let config = scratch.write("config.toml", &config).display().to_string();
    let servers = scratch.cli(&["--config", &config, "servers"]);
    let (row, reason) = row_and_reason(&servers, "gw");
    assert!(
        row.is_some_and(|row| row.contains("invalid")),
        "{servers:?}"
    );
    assert!(
        reason.is_some_and(|reason| reason.contains("mcp-cli's own gateway over this config")),
        "{servers:?}"
    );
    let (fx, _) = row_and_reason(&servers, "fx");
    assert!(fx.is_some_and(|row| row.contains("running")), "{servers:?}");

    let tools = scratch.cli(&["--config", &config, "tools"]);
    assert_eq!(tools.code, 0, "{tools:?}");
    assert!(tools.stdout.contains("fx__echo"), "{tools:?}");
    assert_eq!(left_in(&scratch.0), Vec::<u32>::new());
}

#[test]
fn a_gateway_nested_too_deep_refuses_to_serve() {
    let scratch = Scratch::new("nesting-depth");
    let config = scratch.write("config.toml", &fixture_block("fx", "good"));
    let config = config.display().to_string();
    let run = scratch.cli_with(
        &["--config", &config, "serve"],
        &[("MCP_CLI_GATEWAY_DEPTH", "3")],
        Some(""),
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("MCP_CLI_GATEWAY_DEPTH=3"), "{run:?}");

    // Through a wrapper the entry is not recognised, but the marker each level passes on
    // ends the chain after a few gateways.
    let wrapped = format!(
        "[mcp.gw]\ncommand = \"sh\"\nargs = [\"-c\", \"exec {} --config {config} serve\"]\n{}",
        cli_binary().display(),
        fixture_block("fx", "good")
    );
    let config = scratch.write("config.toml", &wrapped).display().to_string();
    let tools = scratch.cli(&["--config", &config, "tools"]);
    assert!(tools.stdout.contains("fx__echo"), "{tools:?}");
    assert_eq!(left_in(&scratch.0), Vec::<u32>::new());
}

#[test]
fn import_skips_entries_that_run_our_own_gateway() {
    let scratch = Scratch::new("nesting-import");
    let home = scratch.0.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let claude = format!(
        r#"{{"mcpServers": {{"gw": {{"command": "mcp-cli", "args": ["serve"]}}, "fx": {{"command": "{FIXTURE}", "args": ["good"]}}}}}}"#
    );
    std::fs::write(home.join(".claude.json"), claude).unwrap();
    let config_home = home.join(".config");
    let env = [
        ("HOME", home.to_str().unwrap()),
        ("XDG_CONFIG_HOME", config_home.to_str().unwrap()),
    ];
    // The listing says what `--write` will skip, and why, before anything is written.
    let run = scratch.cli_with(&["import"], &env, None);
    assert_eq!(run.code, 0, "{run:?}");
    let row = |name: &str| {
        let row = run
            .stdout
            .lines()
            .find(|line| line.starts_with(&format!("{name} ")));
        row.unwrap_or_else(|| panic!("{name}: {run:?}")).to_owned()
    };
    assert!(
        row("gw").contains("(--write skips it: it runs mcp-cli's own gateway"),
        "{run:?}"
    );
    assert!(!row("fx").contains("skips"), "{run:?}");
    let json = scratch.cli_with(&["--json", "import"], &env, None);
    let rows: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let skips = |name: &str| {
        let rows = rows.as_array().unwrap();
        let row = rows.iter().find(|row| row["name"] == name).unwrap();
        row["writeSkips"].clone()
    };
    assert!(
        skips("gw")
            .as_str()
            .is_some_and(|why| why.contains("own gateway")),
        "{rows}"
    );
    assert!(skips("fx").is_null(), "{rows}");
    assert!(!config_home.join("mcp-cli/config.toml").exists());
    let run = scratch.cli_with(&["import", "--write"], &env, None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("imported fx"), "{run:?}");
    // Once written, the listing says `--write` would skip it: the native file has it.
    assert!(
        run.stderr.contains("skipped gw") && run.stderr.contains("mcp-cli's own gateway"),
        "{run:?}"
    );
    let listed = scratch.cli_with(&["import"], &env, None);
    let fx = (listed.stdout.lines()).find(|line| line.starts_with("fx "));
    assert!(
        fx.is_some_and(|row| row.contains("already has it (--force replaces it)")),
        "{listed:?}"
    );
    let native = std::fs::read_to_string(config_home.join("mcp-cli/config.toml")).unwrap();
    assert!(!native.contains("[mcp.gw]"), "{native}");
}
