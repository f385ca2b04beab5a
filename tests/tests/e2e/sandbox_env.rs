//! What a server takes from us and what it leaves behind, through the `mcp-cli` binary: the
//! minimal environment of sandboxed servers (and of others with `env_inherit = false`),
//! `env_pass`, the daemon refusing sandboxed peers, and a `setsid` grandchild that must not
//! outlive `mcp-cli`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{FIXTURE, Run, Scratch};

/// The secret the tests hold in `mcp-cli`'s environment.
const SECRET: (&str, &str) = ("MY_SECRET", "xyz");

/// The fixture's `escape` mode as `name`, with `extra` lines of its entry.
fn entry(name: &str, extra: &str) -> String {
    format!("[mcp.{name}]\ncommand = {FIXTURE:?}\nargs = [\"escape\"]\n{extra}\n")
}

/// `mcp-cli --config config call server tool args` with the secret set, cold.
fn call(scratch: &Scratch, config: &Path, server: &str, tool: &str, args: &[&str]) -> Run {
    let config = config.to_str().unwrap();
    let all = [&["--config", config, "call", server, tool], args].concat();
    scratch.cli_with(&all, &[SECRET, ("MCP_CLI_NO_DAEMON", "1")], None)
}

/// The environment `server` was started with, one `KEY=value` a line.
fn environment(scratch: &Scratch, config: &Path, server: &str) -> Vec<String> {
    let run = call(
        scratch,
        config,
        server,
        "read_path",
        &["path=/proc/self/environ"],
    );
    assert_eq!(run.code, 0, "{server}: {run:?}");
    (run.stdout.split(['\0', '\n']))
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

fn has(environment: &[String], name: &str) -> bool {
    let prefix = format!("{name}=");
    environment.iter().any(|line| line.starts_with(&prefix))
}

#[test]
fn a_secret_does_not_reach_a_sandboxed_server_unless_env_pass_names_it() {
    let scratch = Scratch::new("env-sandboxed");
    let sandboxed = "permissions = { network = false }\nenv = { GIVEN = \"1\" }";
    let config = scratch.write("config.toml", &entry("fx", sandboxed));
    let confined = environment(&scratch, &config, "fx");
    assert!(!has(&confined, "MY_SECRET"), "{confined:?}");
    // Ours in the scratch run, which a sandboxed server has no need of.
    assert!(!has(&confined, "XDG_STATE_HOME"), "{confined:?}");
    // The SDKs' set, and the entry's own `env`.
    for kept in ["PATH", "HOME", "GIVEN"] {
        assert!(has(&confined, kept), "{kept}: {confined:?}");
    }
    // What the sandbox itself sets for a server cut off from the network.
    assert!(has(&confined, "npm_config_offline"), "{confined:?}");

    let passed = format!("{sandboxed}\nenv_pass = [\"MY_SECRET\"]");
    let config = scratch.write("passed.toml", &entry("passed", &passed));
    let passed = environment(&scratch, &config, "passed");
    assert!(passed.contains(&"MY_SECRET=xyz".to_owned()), "{passed:?}");
    assert!(!has(&passed, "XDG_STATE_HOME"), "{passed:?}");
}

#[test]
fn env_inherit_false_gives_an_unsandboxed_server_the_minimal_set_in_either_format() {
    let scratch = Scratch::new("env-inherit");
    let config = [
        entry("open", ""),
        entry("plain", "env_inherit = false"),
        entry("passed", "env_inherit = false\nenv_pass = [\"MY_SECRET\"]"),
    ]
    .concat();
    let config = scratch.write("config.toml", &config);
    // Unsandboxed servers keep the whole environment by default.
    let open = environment(&scratch, &config, "open");
    assert!(open.contains(&"MY_SECRET=xyz".to_owned()), "{open:?}");
    let plain = environment(&scratch, &config, "plain");
    assert!(!has(&plain, "MY_SECRET"), "{plain:?}");
    assert!(has(&plain, "PATH"), "{plain:?}");
    let passed = environment(&scratch, &config, "passed");
    assert!(passed.contains(&"MY_SECRET=xyz".to_owned()), "{passed:?}");
    assert!(!has(&passed, "XDG_STATE_HOME"), "{passed:?}");

    // The JSON hosts' shape spells them `envInherit` and `envPass`.
    let json = serde_json::json!({"mcpServers": {
        "plain": {"command": FIXTURE, "args": ["escape"], "envInherit": false},
        "passed": {"command": FIXTURE, "args": ["escape"], "envInherit": false,
                   "envPass": ["MY_SECRET"]},
    }});
    let config = scratch.write("servers.json", &json.to_string());
    let plain = environment(&scratch, &config, "plain");
    assert!(!has(&plain, "MY_SECRET"), "{plain:?}");
    let passed = environment(&scratch, &config, "passed");
    assert!(passed.contains(&"MY_SECRET=xyz".to_owned()), "{passed:?}");
}

/// A daemon for one config file, in a runtime folder of the scratch folder; stopped on drop.
struct Daemon<'a> {
    scratch: &'a Scratch,
    config: PathBuf,
}

impl Daemon<'_> {
    fn runtime(&self) -> PathBuf {
        self.scratch.0.join("run")
    }

    /// `mcp-cli --config CONFIG args`, through the daemon when it runs (or not, `cold`).
    fn cli(&self, args: &[&str], cold: bool) -> Run {
        let runtime = self.runtime();
        let mut env = vec![("XDG_RUNTIME_DIR", runtime.to_str().unwrap())];
        if cold {
            env.push(("MCP_CLI_NO_DAEMON", "1"));
        }
        let all = [&["--config", self.config.to_str().unwrap()], args].concat();
        self.scratch.cli_with(&all, &env, None)
    }

    fn log(&self) -> String {
        let logs = self.scratch.0.join("state/mcp-cli");
        let files = walk(&logs);
        let daemon_logs = files.iter().filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.contains("daemon") && name.ends_with(".log")
        });
        daemon_logs
            .map(|path| std::fs::read_to_string(path).unwrap_or_default())
            .collect()
    }
}

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        let _ = self.cli(&["daemon", "stop"], false);
    }
}

/// Every file beneath `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for path in entries.flatten().map(|entry| entry.path()) {
        match path.is_dir() {
            true => files.extend(walk(&path)),
            false => files.push(path),
        }
    }
    files
}

#[test]
fn the_daemon_refuses_a_sandboxed_server_whatever_path_reaches_its_socket() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("env-daemon");
    // `fx` in a network namespace of its own; `confined` under Landlock alone, which may use
    // the folder the socket is exposed in.
    let config = [
        entry("fx", "permissions = { network = false }"),
        entry("confined", "permissions = { filesystem = [\"exposed\"] }"),
        entry("open", ""),
    ]
    .concat();
    let daemon = Daemon {
        config: scratch.write("config.toml", &config),
        scratch: &scratch,
    };
    let run = daemon.cli(&["daemon", "start"], false);
    assert_eq!(run.code, 0, "{run:?}");
    let folder = daemon.runtime().join("mcp-cli");
    let socket = walk(&folder)
        .into_iter()
        .find(|path| path.extension().is_some_and(|ext| ext == "sock"))
        .unwrap();
    // The same socket under another name, in a folder no sandbox hides (a hard link reaches
    // the daemon's listener as its own path does): what is tested is the daemon's refusal,
    // not whether the path can be found.
    std::fs::create_dir_all(scratch.0.join("exposed")).unwrap();
    let exposed = scratch.0.join("exposed/daemon.sock");
    std::fs::hard_link(&socket, &exposed).unwrap();
    let path = format!("path={}", exposed.display());

    // An unconfined server reaches it: the way in works, for those who may use it.
    for cold in [false, true] {
        let run = daemon.cli(&["call", "open", "connect_unix", &path], cold);
        assert_eq!((run.code, run.stdout.trim()), (0, "answered"), "{run:?}");
    }
    // A sandboxed server is refused, started by the daemon's own hub or by a cold run's.
    for (server, cold) in [
        ("fx", false),
        ("fx", true),
        ("confined", false),
        ("confined", true),
    ] {
        let run = daemon.cli(&["call", server, "connect_unix", &path], cold);
        assert_eq!(
            (run.code, run.stdout.trim()),
            (0, "closed"),
            "{server}: {run:?}"
        );
    }
    let log = daemon.log();
    let refusals: Vec<&str> = (log.lines())
        .filter(|line| line.contains("refused a connection: process"))
        .collect();
    assert_eq!(refusals.len(), 4, "{log}");
    let cut_off = (refusals.iter()).filter(|line| line.contains("another net namespace"));
    assert_eq!(cut_off.count(), 2, "{log}");
    // The command line itself still runs warm.
    let run = daemon.cli(&["call", "open", "echo", "text=warm"], false);
    assert_eq!((run.code, run.stdout.trim()), (0, "warm"), "{run:?}");
    // Its own folder and socket are closed to others.
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&folder), 0o700);
    assert_eq!(mode(&socket), 0o600);
}

#[test]
fn a_setsid_grandchild_of_an_unsandboxed_server_does_not_outlive_mcp_cli() {
    let scratch = Scratch::new("env-tree");
    let config = scratch.write("config.toml", &entry("open", ""));
    let run = call(&scratch, &config, "open", "spawn_detached", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let pid: u32 = run.stdout.trim().parse().unwrap();
    // mcp-cli has exited: what is left of the server's tree must be gone, or going (a
    // SIGKILL takes effect when the process next runs); not even a zombie may remain.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = mcp_tests::process_stat(pid);
    while left.is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = mcp_tests::process_stat(pid);
    }
    if left.is_some() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert_eq!(left, None, "process {pid} outlived mcp-cli");
}
