//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, its current release
//! and its newest prerelease, on Node 22 from npm) with `mcp-cli --http` as the client, through
//! `tests/conformance/client.sh`. Every client scenario the 2025-11-25 requirements list must
//! pass, without an expected-failures file; the 2026-07-28 scenarios are run and reported only.

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// `conformance list --client --requirements 2026-07-28` in the prerelease: a stateless
/// protocol revision mcp-cli does not speak yet.
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

/// One scenario's verdict: the suite's exit status and its checks by status.
struct Outcome {
    passed: bool,
    success: usize,
    failure: usize,
    warning: usize,
    /// What failed, for the message.
    failures: Vec<String>,
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
        .env("MCP_CLI", cli_binary())
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
    let checks: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&checks).unwrap()).unwrap();
    let count = |status: &str| (checks.iter()).filter(|c| c["status"] == status).count();
    let failures = (checks.iter())
        .filter(|c| c["status"] == "FAILURE")
        .map(|c| {
            format!(
                "{}: {}",
                c["id"],
                c["errorMessage"]
                    .as_str()
                    .unwrap_or(c["description"].as_str().unwrap_or(""))
            )
        })
        .collect();
    Outcome {
        passed: output.status.success(),
        success: count("SUCCESS"),
        failure: count("FAILURE"),
        warning: count("WARNING"),
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

#[test]
fn every_2025_11_25_client_scenario_passes_with_mcp_cli_as_the_client() {
    let Some(node) = mcp_tests::node22() else {
        return;
    };
    let scratch = Scratch::new("conformance");
    let mut table = vec![format!(
        "{:<40} {:>16} {:>16}",
        "scenario (2025-11-25)", VERSIONS[0], VERSIONS[1]
    )];
    let mut failed = Vec::new();
    let mut cells: Vec<Vec<String>> = vec![Vec::new(); REQUIRED_2025_11_25.len()];
    for version in VERSIONS {
        let suite = mcp_tests::conformance_suite(version).unwrap();
        for (index, scenario) in REQUIRED_2025_11_25.iter().enumerate() {
            let out = scratch.0.join(format!("{version}/{index}"));
            let outcome = run_scenario(&node, &suite, &scratch, &out, scenario, None);
            // A client that did nothing can pass a scenario that records no check (0/0):
            // at least one check must have succeeded.
            let ok = outcome.passed && outcome.failure == 0 && outcome.success > 0;
            cells[index].push(format!(
                "{} {}/{}{}",
                if ok { "pass" } else { "FAIL" },
                outcome.success,
                outcome.success + outcome.failure,
                if outcome.warning > 0 {
                    format!(" {}w", outcome.warning)
                } else {
                    String::new()
                }
            ));
            if !ok {
                failed.push(format!("{version} {scenario}: {:?}", outcome.failures));
            }
        }
    }
    for (scenario, cells) in REQUIRED_2025_11_25.iter().zip(&cells) {
        table.push(format!("{scenario:<40} {:>16} {:>16}", cells[0], cells[1]));
    }

    // Reported, never failing: the next revision's scenarios in the prerelease.
    let suite = mcp_tests::conformance_suite(VERSIONS[1]).unwrap();
    let mut passing_2026 = Vec::new();
    for (index, scenario) in REQUIRED_2026_07_28.iter().enumerate() {
        let out = scratch.0.join(format!("2026/{index}"));
        let outcome = run_scenario(&node, &suite, &scratch, &out, scenario, Some("2026-07-28"));
        if outcome.passed && outcome.failure == 0 && outcome.success > 0 {
            passing_2026.push(*scenario);
        }
    }
    table.push(format!(
        "2026-07-28 ({}): {} of {} pass: {}",
        VERSIONS[1],
        passing_2026.len(),
        REQUIRED_2026_07_28.len(),
        passing_2026.join(", ")
    ));
    eprintln!("{}", table.join("\n"));
    assert!(
        failed.is_empty(),
        "failing scenarios:\n{}\n{}",
        failed.join("\n"),
        table.join("\n")
    );
}
