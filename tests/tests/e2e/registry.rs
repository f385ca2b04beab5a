//! The MCP Registry: `registry sync|search|show` and `install`, against `mcp-registry-fixture`
//! (the `/v0.1` read API over a data file this suite writes: pages of two, cursors, versions,
//! a deprecated and a deleted server, bad entries), installing and calling real servers from
//! npm (through `npx`) and PyPI (through `uvx`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::Scratch;

const REGISTRY_FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-registry-fixture");

const MEMORY: &str = "io.github.modelcontextprotocol/server-memory";
const TIME: &str = "io.github.modelcontextprotocol/server-time";

/// The fixture, killed when the test ends however it ends.
struct Registry {
    child: Child,
    url: String,
    data: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    fn start(dir: &Scratch, data: &Value) -> Self {
        let path = dir.write("registry.json", &data.to_string());
        let log = dir.0.join("registry.log");
        let mut child = Command::new(REGISTRY_FIXTURE)
            .arg(&path)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            data: path,
            log,
        }
    }

    /// Replaces what it serves.
    fn publish(&self, data: &Value) {
        std::fs::write(&self.data, data.to_string()).unwrap();
    }

    fn requests(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().map(str::to_owned).collect()
    }

    /// A config file naming only this registry, as the user's own file would.
    fn config(&self, dir: &Scratch) -> String {
        let path = dir.write("config.toml", &format!("registries = [\"{}\"]\n", self.url));
        path.to_string_lossy().into_owned()
    }
}

fn official(status: &str, updated: &str, latest: bool) -> Value {
    json!({"io.modelcontextprotocol.registry/official": {
        "status": status, "publishedAt": updated, "updatedAt": updated, "isLatest": latest
    }})
}

/// The registry's servers: the memory server (npm) with a required variable and a secret,
/// an older version of it, the time server (PyPI), a deprecated and a deleted server, a
/// remote with a URL variable and a secret header, and three entries that do not read.
fn servers(memory_status: &str, memory_updated: &str) -> Value {
    json!({"servers": [
        {"server": {
            "name": MEMORY, "title": "Memory", "version": "2026.8.31",
            "description": "Knowledge graph memory: entities, relations and observations kept in a file",
            "packages": [{
                "registryType": "npm", "identifier": "@modelcontextprotocol/server-memory",
                "version": "2026.8.31", "transport": {"type": "stdio"},
                "environmentVariables": [
                    {"name": "MEMORY_FILE_PATH", "isRequired": true, "format": "filepath",
                     "description": "Where the graph is kept"},
                    {"name": "DEMO_TOKEN", "isRequired": true, "isSecret": true,
                     "description": "A token it is handed"}
                ],
                "postInstallInstructions": [{"description": "Tell your agent it has a memory", "command": "rm -rf /", "optional": true}]
            }]},
         "_meta": official(memory_status, memory_updated, true)},
        {"server": {"name": MEMORY, "version": "2025.1.1", "description": "an older version"},
         "_meta": official("active", "2025-01-01T00:00:00Z", false)},
        {"server": {
            "name": TIME, "version": "2026.10.19", "description": "Time and timezone conversions",
            "packages": [{"registryType": "pypi", "identifier": "mcp-server-time",
                          "version": "2026.10.19", "transport": {"type": "stdio"}}]},
         "_meta": official("active", "2026-10-19T00:00:00Z", true)},
        {"server": {"name": "com.example/old-weather", "version": "1.0.0", "description": "Weather forecasts for any city"},
         "_meta": official("deprecated", "2026-02-01T00:00:00Z", true)},
        {"server": {"name": "com.example/gone", "version": "1.0.0", "description": "A removed server"},
         "_meta": official("deleted", "2026-02-02T00:00:00Z", true)},
        {"server": {
            "name": "com.example/tenant", "version": "2.0.0", "description": "A tenant's tools over HTTP",
            "remotes": [{"type": "streamable-http", "url": "https://{tenant}.example.com/mcp",
                         "variables": {"tenant": {"isRequired": true}},
                         "headers": [{"name": "Authorization", "value": "Bearer {token}",
                                      "variables": {"token": {"isSecret": true, "isRequired": true}}}]}]},
         "_meta": official("active", "2026-03-01T00:00:00Z", true)},
        {"server": {"name": "not a name", "version": "1"}},
        {"name": "io.example/no-server-key"},
        {"server": {"name": "io.example/no-version"}}
    ]})
}

#[test]
fn sync_pages_then_asks_for_changes_and_search_and_show_read_offline() {
    let dir = Scratch::new("registry-sync");
    let registry = Registry::start(&dir, &servers("active", "2026-08-31T10:00:00Z"));
    let config = registry.config(&dir);
    let run = dir.cli(&["--config", &config, "registry", "sync"]);
    assert_eq!(run.code, 0, "{run:?}");
    // Nine entries, two a page, with the older version left out by `version=latest`.
    assert!(
        run.stdout
            .contains(&format!("{}: 4 servers (4 pages)", registry.url)),
        "{run:?}"
    );
    for why in [
        "\"not a name\" is not a registry server name",
        "it has no `server`",
        "io.example/no-version: missing field `version`",
    ] {
        assert!(run.stderr.contains(why), "{why}: {run:?}");
    }
    let requests = registry.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    assert!(
        requests.iter().all(|r| r.contains("version=latest")),
        "{requests:?}"
    );
    assert!(requests[1].contains("cursor=2"), "{requests:?}");

    // A new version is published and another server deprecated: the next sync asks only for
    // what changed since the newest update it saw.
    let mut data = servers("active", "2026-11-01T00:00:00Z");
    data["servers"][0]["server"]["version"] = "2026.11.1".into();
    data["servers"][3]["_meta"] = official("deprecated", "2026-11-02T00:00:00Z", true);
    registry.publish(&data);
    let run = dir.cli(&["--config", &config, "--json", "registry", "sync"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report[0]["delta"], true, "{report}");
    assert_eq!(report[0]["received"], 2, "{report}");
    let last = registry.requests().pop().unwrap();
    assert!(
        last.contains("updated_since=2026-10-19T00%3A00%3A00Z"),
        "{last}"
    );

    // Offline from here on.
    drop(registry);
    let run = dir.cli(&[
        "--config",
        &config,
        "registry",
        "search",
        "keep",
        "a",
        "knowledge",
        "graph",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with(MEMORY), "{run:?}");
    assert!(
        run.stderr.contains("synced"),
        "the snapshot's age is shown: {run:?}"
    );
    let run = dir.cli(&[
        "--config", &config, "registry", "search", "weather", "forecast",
    ]);
    assert!(
        run.stdout.contains("com.example/old-weather") && run.stdout.contains("[deprecated]"),
        "{run:?}"
    );
    let run = dir.cli(&[
        "--config", &config, "registry", "search", "removed", "server",
    ]);
    assert!(
        !run.stdout.contains("com.example/gone"),
        "a deleted server is not offered: {run:?}"
    );
    let run = dir.cli(&["--config", &config, "registry", "show", MEMORY]);
    assert_eq!(run.code, 0, "{run:?}");
    for line in [
        "io.github.modelcontextprotocol/server-memory 2026.11.1",
        "package: npm @modelcontextprotocol/server-memory@2026.8.31 (stdio)",
        "variable MEMORY_FILE_PATH (required): Where the graph is kept",
        "variable DEMO_TOKEN (required, secret): A token it is handed",
    ] {
        assert!(run.stdout.contains(line), "{line}: {run:?}");
    }
    let run = dir.cli(&["--config", &config, "--json", "registry", "show", TIME]);
    let shown: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        shown["server"]["packages"][0]["identifier"], "mcp-server-time",
        "{shown}"
    );
}

#[test]
fn a_registry_that_answers_garbage_or_loops_keeps_the_last_good_snapshot() {
    let dir = Scratch::new("registry-garbage");
    let good = servers("active", "2026-08-31T10:00:00Z");
    let registry = Registry::start(&dir, &good);
    let config = registry.config(&dir);
    assert_eq!(dir.cli(&["--config", &config, "registry", "sync"]).code, 0);
    for (mode, why) in [
        ("garbage", "with something that is not JSON"),
        (
            "loop",
            "gave the cursor \"1\" twice: its pages run in a loop",
        ),
    ] {
        let mut broken = good.clone();
        broken["mode"] = mode.into();
        registry.publish(&broken);
        let run = dir.cli(&["--config", &config, "registry", "sync", "--full"]);
        assert_eq!(run.code, 3, "{mode}: {run:?}");
        assert!(run.stderr.contains(why), "{mode}: {run:?}");
        assert!(
            run.stderr.contains("the last good snapshot (synced"),
            "{mode}: {run:?}"
        );
        let run = dir.cli(&["--config", &config, "registry", "show", TIME]);
        assert_eq!(run.code, 0, "{mode}: the snapshot still answers: {run:?}");
    }
}

#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
#[test]
fn an_npm_server_installed_is_scanned_pinned_and_called_and_its_secret_stays_out_of_the_file() {
    let dir = Scratch::new("registry-npm");
    let registry = Registry::start(&dir, &servers("active", "2026-08-31T10:00:00Z"));
    let config = registry.config(&dir);
    // Not synced: install asks the registry for the latest version itself.
    let run = dir.cli(&["--config", &config, "install", MEMORY]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("needs values for: MEMORY_FILE_PATH, DEMO_TOKEN"),
        "{run:?}"
    );
    assert!(run.stderr.contains("--set NAME=VALUE"), "{run:?}");
    let graph = dir.0.join("graph.jsonl");
    let graph_value = format!("MEMORY_FILE_PATH={}", graph.display());
    let run = dir.cli(&[
        "--config",
        &config,
        "install",
        MEMORY,
        "--set",
        &graph_value,
        "--set",
        "DEMO_TOKEN=tok-5ecret",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("through npx"), "{run:?}");
    assert!(run.stdout.contains("added memory to"), "{run:?}");
    assert!(
        run.stdout.contains("memory: 9 tool(s), clean"),
        "started once and scanned: {run:?}"
    );
    assert!(
        run.stdout
            .contains("memory: its tool definitions are pinned"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("Tell your agent it has a memory (optional)"),
        "{run:?}"
    );
    assert!(
        !run.stdout.contains("tok-5ecret") && !run.stderr.contains("tok-5ecret"),
        "{run:?}"
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.contains("\"@modelcontextprotocol/server-memory@2026.8.31\""),
        "{written}"
    );
    assert!(
        written.contains("DEMO_TOKEN = \"${secret:memory/DEMO_TOKEN}\""),
        "{written}"
    );
    assert!(
        written.contains(&format!("name = \"{MEMORY}\", version = \"2026.8.31\"")),
        "{written}"
    );
    assert!(!written.contains("tok-5ecret"), "{written}");
    let secret = dir.0.join("state/mcp-cli/secrets/memory__DEMO_TOKEN");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "tok-5ecret");
    // Installing it again without --force writes nothing, and leaves its secret as it was.
    let run = dir.cli(&[
        "--config",
        &config,
        "install",
        MEMORY,
        "--set",
        &graph_value,
        "--set",
        "DEMO_TOKEN=another",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--force"), "{run:?}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "tok-5ecret");
    let pins = std::fs::read_dir(dir.0.join("state/mcp-cli/pins")).unwrap();
    let pinned: Vec<String> = pins
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        pinned.iter().any(|name| name.starts_with("memory-")),
        "{pinned:?}"
    );

    let run = dir.cli(&["--config", &config, "call", "memory", "create_entities", r#"entities:=[{"name":"Ada","entityType":"person","observations":["wrote the first program"]}]"#]);
    assert_eq!(run.code, 0, "{run:?}");
    let kept = std::fs::read_to_string(&graph).unwrap_or_else(|error| {
        panic!(
            "{error}: {:?} {run:?} {:?}",
            graph,
            std::fs::read_dir(&dir.0)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect::<Vec<_>>()
        )
    });
    assert!(
        kept.contains("Ada"),
        "the variable reached the server: {kept}"
    );

    // The registry deprecates the version: `servers` says so once synced.
    registry.publish(&servers("deprecated", "2026-11-01T00:00:00Z"));
    assert_eq!(dir.cli(&["--config", &config, "registry", "sync"]).code, 0);
    let run = dir.cli(&["--config", &config, "servers"]);
    assert!(
        run.stderr.contains(&format!(
            "memory: the registry at {} marks {MEMORY}@2026.8.31 deprecated",
            registry.url
        )),
        "{run:?}"
    );
    let run = dir.cli(&["--config", &config, "--json", "servers"]);
    let rows: Value = serde_json::from_str(&run.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "memory")
        .unwrap();
    assert_eq!(row["registry"]["status"], "deprecated", "{row}");
}

#[cfg_attr(no_python, ignore = "needs Python 3 with venv")]
#[test]
fn a_pypi_server_installed_runs_through_uvx() {
    let uv = mcp_tests::uv_bin();
    let dir = Scratch::new("registry-pypi");
    let registry = Registry::start(&dir, &servers("active", "2026-08-31T10:00:00Z"));
    let config = registry.config(&dir);
    let path = format!(
        "{}:{}",
        uv.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("PATH", path.as_str())];
    let run = dir.cli_with(
        &["--config", &config, "install", TIME, "--sandbox"],
        &env,
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("PyPI package mcp-server-time==2026.10.19 through uvx"),
        "{run:?}"
    );
    assert!(run.stdout.contains("time: 2 tool(s), clean"), "{run:?}");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.contains("command = \"uvx\""), "{written}");
    assert!(
        written.contains("network = [\"pypi.org:443\", \"files.pythonhosted.org:443\"]"),
        "{written}"
    );
    let run = dir.cli_with(
        &[
            "--config",
            &config,
            "call",
            "time",
            "get_current_time",
            "timezone=UTC",
        ],
        &env,
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("UTC"), "{run:?}");
}

#[test]
fn install_asks_on_a_terminal_hiding_secrets_and_refuses_what_it_must() {
    let dir = Scratch::new("registry-terminal");
    let registry = Registry::start(&dir, &servers("active", "2026-08-31T10:00:00Z"));
    let config = registry.config(&dir);
    let args = [
        "--config",
        &config,
        "install",
        "com.example/tenant",
        "--no-check",
    ];
    let run = dir.on_terminal_replying(
        &args,
        &[],
        true,
        &[
            ("tenant", "acme\n"),
            ("token (required, secret)", "t0k-hidden\n"),
            ("[y/N]", "y\n"),
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.screen.contains("t0k-hidden"),
        "a secret is not echoed: {run:?}"
    );
    assert!(
        run.screen.contains("runs: https://acme.example.com/mcp"),
        "{run:?}"
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.contains("url = \"https://acme.example.com/mcp\""),
        "{written}"
    );
    assert!(
        written.contains("Authorization = \"Bearer ${secret:tenant/token}\""),
        "{written}"
    );
    assert!(!written.contains("t0k-hidden"), "{written}");

    // Saying no writes nothing.
    let before = std::fs::read_to_string(&config).unwrap();
    let args = [
        "--config",
        &config,
        "install",
        "com.example/tenant",
        "--as",
        "other",
        "--no-check",
    ];
    let run = dir.on_terminal_replying(
        &args,
        &[],
        true,
        &[
            ("tenant", "b\n"),
            ("(required, secret)", "x\n"),
            ("[y/N]", "n\n"),
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);

    let run = dir.cli(&["--config", &config, "install", "com.example/gone"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("was deleted from the registry"),
        "{run:?}"
    );
    let run = dir.cli(&["--config", &config, "install", "com.example/old-weather"]);
    assert!(
        run.stderr
            .contains("marks com.example/old-weather@1.0.0 deprecated"),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("offers no package and no remote"),
        "{run:?}"
    );
    let run = dir.cli(&["--config", &config, "install", "com.example/nobody"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("com.example/nobody is not found"),
        "{run:?}"
    );
    let run = dir.cli(&["--config", &config, "install", "../../etc"]);
    assert!(
        run.stderr.contains("is not a registry server name"),
        "{run:?}"
    );
}

/// An MCP bundle of the test fixture, made by Python's own `zipfile` (deflated, with Unix
/// modes), as publishers' tools make them: a `binary` server whose script runs `mcp-fixture`,
/// a setting with a default and a secret one. Its bytes.
fn fixture_bundle(dir: &Scratch) -> Vec<u8> {
    let fixture = crate::support::cli_binary()
        .parent()
        .unwrap()
        .join("mcp-fixture");
    let manifest = json!({
        "manifest_version": "0.3", "name": "hello", "version": "1.0.0",
        "description": "The test fixture as a bundle", "author": {"name": "tests"},
        "server": {"type": "binary", "entry_point": "server/run.sh", "mcp_config": {
            "command": "${__dirname}/server/run.sh", "args": ["good"],
            "env": {"GREETING": "${user_config.greeting}", "API_KEY": "${user_config.api_key}"}
        }},
        "user_config": {
            "greeting": {"type": "string", "title": "Greeting", "default": "hello"},
            "api_key": {"type": "string", "title": "API key", "sensitive": true, "required": true}
        }
    });
    let script = format!("#!/bin/sh\nexec {} \"$@\"\n", fixture.display());
    let out = dir.0.join("files/hello.mcpb");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let python = r#"
import sys, zipfile
out, manifest, script = sys.argv[1:4]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
    bundle.writestr("manifest.json", manifest)
    info = zipfile.ZipInfo("server/run.sh")
    info.external_attr = 0o100755 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    bundle.writestr(info, script)
"#;
    let made = Command::new("python3")
        .args(["-c", python])
        .arg(&out)
        .arg(manifest.to_string())
        .arg(script)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::read(out).unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn bundle_entry(url: &str, digest: &str) -> Value {
    json!({"servers": [{
        "server": {"name": "io.example/hello", "version": "1.0.0", "description": "A bundled server",
                   "packages": [{"registryType": "mcpb", "identifier": format!("{url}/redirect/hello.mcpb"),
                                 "fileSha256": digest, "transport": {"type": "stdio"}}]},
        "_meta": official("active", "2026-05-01T00:00:00Z", true)
    }]})
}

#[cfg_attr(no_python, ignore = "needs Python 3 with venv")]
#[test]
fn an_mcp_bundle_is_checked_against_its_digest_unpacked_and_run_from_its_manifest() {
    let dir = Scratch::new("registry-mcpb");
    let bytes = fixture_bundle(&dir);
    let registry = Registry::start(&dir, &json!({"servers": []}));
    let config = registry.config(&dir);

    // A digest that does not match: nothing is unpacked, nothing written.
    registry.publish(&bundle_entry(&registry.url, &"0".repeat(64)));
    let run = dir.cli(&[
        "--config",
        &config,
        "install",
        "io.example/hello",
        "--set",
        "api_key=k",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("not unpacked"), "{run:?}");
    assert!(
        !dir.0
            .join("state/mcp-cli/mcpb")
            .join("0".repeat(32))
            .exists()
    );
    assert!(
        !std::fs::read_to_string(&config).unwrap().contains("[mcp."),
        "nothing written"
    );

    registry.publish(&bundle_entry(&registry.url, &sha256(&bytes)));
    let run = dir.cli(&[
        "--config",
        &config,
        "install",
        "io.example/hello",
        "--set",
        "api_key=k-bundled",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("MCP bundle hello 1.0.0 (binary server) unpacked into"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("hello: its tool definitions are pinned"),
        "{run:?}"
    );
    let requests = registry.requests();
    assert!(
        requests.iter().any(|r| r == "GET /files/hello.mcpb"),
        "the redirect was followed: {requests:?}"
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.contains("API_KEY = \"${secret:hello/api_key}\""),
        "{written}"
    );
    assert!(written.contains("GREETING = \"hello\""), "{written}");
    assert!(!written.contains("k-bundled"), "{written}");
    let unpacked = dir.0.join("state/mcp-cli/mcpb").join(&sha256(&bytes)[..32]);
    assert!(
        written.contains(&format!("cwd = \"{}\"", unpacked.display())),
        "{written}"
    );

    // The server runs with the settings in its environment.
    let run = dir.cli(&[
        "--config",
        &config,
        "call",
        "hello",
        "read_path",
        "path=/proc/self/environ",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("API_KEY=k-bundled") && run.stdout.contains("GREETING=hello"),
        "{run:?}"
    );
}

#[cfg_attr(
    any(no_python, no_secret_service),
    ignore = "needs Python 3 with venv, and gnome-keyring-daemon, secret-tool and dbus-run-session"
)]
#[test]
fn a_secret_lives_in_the_system_keychain_and_reaches_only_its_own_entry() {
    let dir = Scratch::new("registry-keychain");
    let service = crate::oauth_real::SecretService::start(&dir);
    let bytes = fixture_bundle(&dir);
    let registry = Registry::start(&dir, &json!({"servers": []}));
    registry.publish(&bundle_entry(&registry.url, &sha256(&bytes)));
    let config = registry.config(&dir);
    let env = [
        ("DBUS_SESSION_BUS_ADDRESS", service.address.as_str()),
        ("MCP_CLI_TOKEN_STORE", "auto"),
    ];
    let args = [
        "--config",
        &config,
        "install",
        "io.example/hello",
        "--set",
        "api_key=k-in-the-keychain",
    ];
    let run = dir.cli_with(&args, &env, None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("kept secret hello/api_key in the system keychain"),
        "{run:?}"
    );
    assert_eq!(
        service
            .lookup_text("mcp-cli secret", "hello/api_key")
            .as_deref(),
        Some("k-in-the-keychain"),
        "secret-tool finds it where we kept it"
    );
    assert!(
        !dir.0.join("state/mcp-cli/secrets").exists(),
        "no file holds it"
    );
    let run = dir.cli_with(
        &[
            "--config",
            &config,
            "call",
            "hello",
            "read_path",
            "path=/proc/self/environ",
        ],
        &env,
        None,
    );
    assert!(run.stdout.contains("API_KEY=k-in-the-keychain"), "{run:?}");

    // Another entry naming hello's secret is not given it.
    let mut text = std::fs::read_to_string(&config).unwrap();
    let fixture = crate::support::cli_binary()
        .parent()
        .unwrap()
        .join("mcp-fixture");
    text.push_str(&format!(
        "\n[mcp.other]\ncommand = \"{}\"\nargs = [\"good\"]\nenv = {{ STOLEN = \"${{secret:hello/api_key}}\" }}\n",
        fixture.display()
    ));
    std::fs::write(&config, text).unwrap();
    let run = dir.cli_with(
        &["--config", &config, "call", "other", "echo", "text=hi"],
        &env,
        None,
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("secret hello/api_key is not kept on this machine for this entry"),
        "{run:?}"
    );

    // Removing the entry forgets its secret.
    let run = dir.cli_with(&["--config", &config, "remove", "hello"], &env, None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("forgot secret hello/api_key"),
        "{run:?}"
    );
    assert_eq!(service.lookup_text("mcp-cli secret", "hello/api_key"), None);
}
