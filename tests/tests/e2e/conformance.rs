//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, its current release
//! and its newest prerelease, on Node 22 from npm) with `mcp-cli --http` as the client, through
//! `tests/conformance/client.sh`. Both requirement sets must pass in full, without an
//! expected-failures file: every 2025-11-25 client scenario on both pinned versions, and every
//! 2026-07-28 one on the prerelease at `--spec-version 2026-07-28`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::Value;

use crate::support::{Scratch, cli_binary};

/// The current release (npm's `latest`) and the newest prerelease, pinned so that a new
/// publication changes this test only when someone bumps them.
const VERSIONS: [&str; 2] = ["0.1.16", "0.2.0-alpha.12"];

/// `conformance list --client --requirements 2025-11-25`, the same in both versions.
const REQUIRED_2025_11_25: [&str; 18] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
];

/// `conformance list --client --requirements 2026-07-28` in the prerelease.
const REQUIRED_2026_07_28: [&str; 32] = [
    "tools_call",
    "request-metadata",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
];

/// The scenarios whose correct ending is the client giving up, so a failing exit of the
/// client command passes (the suite marks them `allowClientError` and leaves the exit out of
/// its verdict): a login refused on purpose, or one that can never be enough. Every other
/// scenario needs the client command to exit 0: green checks with the MCP request refused
/// are a failure.
const CLIENT_ERROR_ALLOWED: [(&str, &str); 7] = [
    (
        "auth/scope-retry-limit",
        "every authorization is refused for want of scope: give up after a bounded number",
    ),
    (
        "auth/resource-mismatch",
        "the protected resource metadata names another resource: never authorize",
    ),
    (
        "auth/iss-supported-missing",
        "the redirect lacks the advertised `iss`: reject it",
    ),
    (
        "auth/iss-wrong-issuer",
        "the redirect's `iss` is another issuer: reject it",
    ),
    (
        "auth/iss-unexpected",
        "an `iss` not advertised and not the issuer: reject it",
    ),
    (
        "auth/iss-normalized",
        "an `iss` equal only after URL normalization: reject it",
    ),
    (
        "auth/metadata-issuer-mismatch",
        "the metadata's issuer is not the one asked: reject it",
    ),
];

/// How many scenarios of a set run at once: each is a Node process, its servers and
/// mcp-cli, and they use free ports of their own.
const PARALLEL: usize = 4;

/// One scenario's verdict: the suite's exit status, its checks by status, and how the client
/// command exited.
struct Outcome {
    suite_passed: bool,
    success: usize,
    failure: usize,
    warning: usize,
    /// The exit status of the client command (`client.sh`), if it ran.
    client_status: Option<i32>,
    /// What failed or warned, then the client's stderr, for the message.
    failures: Vec<String>,
}

impl Outcome {
    /// The rule: the suite's own verdict passes, no check failed, at least one succeeded (a
    /// client that did nothing passes a scenario that records no check), and the client
    /// command exited 0 unless the scenario expects it to give up.
    fn passed(&self, scenario: &str) -> bool {
        let allowed = CLIENT_ERROR_ALLOWED
            .iter()
            .any(|(name, _)| *name == scenario);
        self.suite_passed
            && self.failure == 0
            && self.success > 0
            && (allowed || self.client_status == Some(0))
    }

    /// `pass 12/12` (with warnings and the client's failing exit, if any).
    fn cell(&self, scenario: &str) -> String {
        let mut cell = format!(
            "{} {}/{}",
            if self.passed(scenario) {
                "pass"
            } else {
                "FAIL"
            },
            self.success,
            self.success + self.failure
        );
        if self.warning > 0 {
            cell.push_str(&format!(" {}w", self.warning));
        }
        if self.client_status != Some(0) {
            let status = self.client_status.map_or("?".to_owned(), |s| s.to_string());
            cell.push_str(&format!(" exit {status}"));
        }
        cell
    }
}

/// Runs `scenario` of the suite at `suite` (optionally at a spec revision), results under `out`.
fn run_scenario(
    node: &Path,
    suite: &Path,
    scratch: &Scratch,
    out: &Path,
    scenario: &str,
    spec_version: Option<&str>,
) -> Outcome {
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/client.sh");
    std::fs::create_dir_all(out).unwrap();
    let status_file = out.join("client-status");
    // client.sh reads the suite's context with the same Node.
    let path = std::env::join_paths(node.parent().into_iter().map(Path::to_path_buf).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut command = Command::new(node);
    command
        .arg(suite)
        .args(["client", "--scenario", scenario, "--timeout", "60000"])
        .arg("--command")
        .arg(&client)
        .arg("-o")
        .arg(out)
        .args(
            spec_version
                .map(|version| ["--spec-version", version])
                .iter()
                .flatten(),
        )
        .current_dir(&scratch.0)
        .env("PATH", path)
        .env("MCP_CLI", cli_binary())
        .env("CONFORMANCE_CLIENT_STATUS", &status_file)
        .env("XDG_CONFIG_HOME", scratch.0.join("config-home"))
        .env_remove("MCP_CLI_CONFIG")
        .env_remove("MCP_CLI_AUTH_FOLLOW");
    let output = command.output().unwrap();
    let checks = find_checks(out).unwrap_or_else(|| {
        panic!(
            "{scenario}: no checks.json under {}\n{}\n{}",
            out.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let client_stderr = std::fs::read_to_string(checks.with_file_name("stderr.txt"));
    let checks: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&checks).unwrap()).unwrap();
    let count = |status: &str| (checks.iter()).filter(|c| c["status"] == status).count();
    let mut failures: Vec<String> = (checks.iter())
        .filter(|c| matches!(c["status"].as_str(), Some("FAILURE" | "WARNING")))
        .map(|c| {
            format!(
                "{} {}: {}",
                c["status"],
                c["id"],
                c["errorMessage"]
                    .as_str()
                    .unwrap_or(c["description"].as_str().unwrap_or(""))
            )
        })
        .collect();
    failures.extend(client_stderr.ok().filter(|text| !text.is_empty()));
    let client_status = std::fs::read_to_string(&status_file)
        .ok()
        .and_then(|text| text.trim().parse().ok());
    Outcome {
        suite_passed: output.status.success(),
        success: count("SUCCESS"),
        failure: count("FAILURE"),
        warning: count("WARNING"),
        client_status,
        failures,
    }
}

/// The one `checks.json` the suite wrote under `dir`.
fn find_checks(dir: &Path) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        if path.is_dir() {
            if let Some(found) = find_checks(&path) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|name| name == "checks.json") {
            return Some(path);
        }
    }
    None
}

/// Runs every scenario of `set` on each suite version, [`PARALLEL`] at a time; returns the
/// table's rows (a cell per version) and what failed.
fn run_set(
    node: &Path,
    scratch: &Scratch,
    set: (&str, &[&str]),
    versions: &[&str],
    spec_version: Option<&str>,
) -> (Vec<String>, Vec<String>) {
    let (name, scenarios) = set;
    let jobs: Vec<(usize, usize)> = (0..versions.len())
        .flat_map(|v| (0..scenarios.len()).map(move |s| (v, s)))
        .collect();
    let suites: Vec<PathBuf> = (versions.iter())
        .map(|version| mcp_tests::conformance_suite(version))
        .collect();
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|threads| {
        for _ in 0..PARALLEL {
            threads.spawn(|| {
                while let Some(&(v, s)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let out = scratch.0.join(format!("{name}/{}/{s}", versions[v]));
                    let scenario = scenarios[s];
                    let outcome =
                        run_scenario(node, &suites[v], scratch, &out, scenario, spec_version);
                    outcomes.lock().unwrap().push(((v, s), outcome));
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap();
    outcomes.sort_by_key(|(job, _)| *job);
    let mut rows: Vec<String> = (scenarios.iter()).map(|s| format!("{s:<40}")).collect();
    let mut failed = Vec::new();
    for ((v, s), outcome) in &outcomes {
        let scenario = scenarios[*s];
        rows[*s].push_str(&format!(" {:>24}", outcome.cell(scenario)));
        if !outcome.passed(scenario) {
            failed.push(format!(
                "{name} on {} {scenario} (client exit {:?}): {:?}",
                versions[*v], outcome.client_status, outcome.failures
            ));
        }
    }
    let mut title = format!("{:<40}", format!("scenario ({name})"));
    for version in versions {
        title.push_str(&format!(" {version:>24}"));
    }
    rows.insert(0, title);
    (rows, failed)
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn every_client_scenario_of_both_requirement_sets_passes_with_mcp_cli_as_the_client() {
    let node = mcp_tests::node22();
    let scratch = Scratch::new("conformance");
    // Built (once per run) before the clock starts and before the threads need it.
    cli_binary();
    let started = Instant::now();
    let (mut table, mut failed) = run_set(
        &node,
        &scratch,
        ("2025-11-25", &REQUIRED_2025_11_25),
        &VERSIONS,
        None,
    );
    let (rows, failures) = run_set(
        &node,
        &scratch,
        ("2026-07-28", &REQUIRED_2026_07_28),
        &VERSIONS[1..],
        Some("2026-07-28"),
    );
    table.extend(rows);
    failed.extend(failures);
    table.push(format!("wall time: {:.0?}", started.elapsed()));
    eprintln!("{}", table.join("\n"));
    assert!(
        failed.is_empty(),
        "failing scenarios:\n{}\n{}",
        failed.join("\n"),
        table.join("\n")
    );
}

/// Extension scenarios outside the frozen sets, run by name: machine clients (the
/// `client_credentials` grant with a secret sent by HTTP Basic, and with a private-key JWT),
/// in both versions.
const CLIENT_CREDENTIALS: [&str; 2] = [
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
];

/// The authorization extensions new in the prerelease (`client.sh` says which settings
/// each uses): enterprise-managed authorization (an ID token exchanged at the identity
/// provider, the grant it gives traded at the authorization server), DPoP-bound tokens
/// (without and with the servers' nonces), and workload identity federation (a workload's
/// JWT as the grant).
const AUTH_EXTENSIONS: [&str; 4] = [
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
];

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_authorization_extension_scenarios_pass_with_mcp_cli_as_the_client() {
    let node = mcp_tests::node22();
    let scratch = Scratch::new("conformance-auth-extensions");
    cli_binary();
    let (mut table, mut failed) = run_set(
        &node,
        &scratch,
        ("client-credentials", &CLIENT_CREDENTIALS),
        &VERSIONS,
        None,
    );
    let (rows, failures) = run_set(
        &node,
        &scratch,
        ("auth-extensions", &AUTH_EXTENSIONS),
        &VERSIONS[1..],
        None,
    );
    table.extend(rows);
    failed.extend(failures);
    eprintln!("{}", table.join("\n"));
    assert!(
        failed.is_empty(),
        "failing scenarios:\n{}\n{}",
        failed.join("\n"),
        table.join("\n")
    );
}

/// The skills extension's client scenarios (SEP-2640), new in the prerelease and not on the
/// spec timeline (the suite runs them without `--spec-version`): a listing that reads no
/// file, and a `SKILL.md` tampered with by digest, by size and by frontmatter, which `skill
/// --to` must refuse, reading nothing after it and writing nothing. `client.sh` runs each in
/// both eras (`--protocol 2025-11-25`, then `2026-07-28`: the suite's server speaks both) and
/// exits 0 only if every run refused for the tampering and left nothing written.
const SKILLS: [&str; 4] = [
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
];

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_skills_extension_scenarios_pass_with_mcp_cli_as_the_client_in_both_eras() {
    let node = mcp_tests::node22();
    let scratch = Scratch::new("conformance-skills");
    cli_binary();
    let (table, failed) = run_set(&node, &scratch, ("skills", &SKILLS), &VERSIONS[1..], None);
    eprintln!("{}", table.join("\n"));
    assert!(
        failed.is_empty(),
        "failing scenarios:\n{}\n{}",
        failed.join("\n"),
        table.join("\n")
    );
}
