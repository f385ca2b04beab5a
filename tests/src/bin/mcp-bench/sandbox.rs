//! The `sandbox` section: what `permissions.network = [hosts]` costs, through the `mcp-cli`
//! binary against the same fixture with no sandbox. Per HTTP request: the fixture's `fetch`
//! tool GETs a loopback server in-process `REQUESTS` times on one kept-alive connection and
//! reports the median; sandboxed, each request crosses the hub's proxy, forwarded by hyper
//! (absolute URI) or relayed as bytes (a `CONNECT` tunnel); unsandboxed it goes direct. Per start: a whole
//! `mcp-cli call` (spawn, namespace and proxy set-up, handshake, listing, call, close).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use super::{Bins, REPETITIONS, Table};

/// Requests per `fetch` call, of which the fixture reports the median.
const REQUESTS: usize = 2000;

/// `mcp-cli call` runs per configuration for the start-up figures.
const STARTS: usize = 41;

pub(crate) fn rows(bins: &Bins) {
    let port = mcp_tests::fetch::hello_server().unwrap();
    let dir = std::env::temp_dir().join(format!("mcp-bench-sandbox-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = |name: &str, permissions: &str| {
        let path = dir.join(format!("{name}.toml"));
        let fixture = bins.fixture.to_str().unwrap();
        let text = format!("[mcp.fx]\ncommand = {fixture:?}\nargs = [\"fetch\"]\n{permissions}");
        std::fs::write(&path, text).unwrap();
        path
    };
    let allowlist = config(
        "allowlist",
        &format!("permissions = {{ network = [\"127.0.0.1:{port}\"] }}\n"),
    );
    let cut = config("cut", "permissions = { network = false }\n");
    let open = config("open", "");

    println!("\nthe network allowlist sandbox against no sandbox, medians (min-max)\n");
    let mut table = Table::new(["sandboxed", "no sandbox", "sandboxed/none"]);
    let url = format!("url=http://127.0.0.1:{port}/x");
    let count = format!("count={REQUESTS}");
    let request = |config: &Path, tunnel: &str| {
        let answer = cli(bins, &dir, config, &["fetch", &url, &count, tunnel]);
        let micros = answer.trim().strip_prefix("200 median_us=");
        let micros: f64 = micros.and_then(|m| m.parse().ok()).expect(&answer);
        micros / 1e6
    };
    for (how, tunnel) in [
        ("absolute URI", "tunnel=false"),
        ("CONNECT tunnel", "tunnel=true"),
    ] {
        let (sandboxed, direct) = (0..REPETITIONS)
            .map(|_| (request(&allowlist, tunnel), request(&open, tunnel)))
            .unzip::<_, _, Vec<_>, Vec<_>>();
        let name = format!("HTTP GET, keep-alive, {how} (median of {REQUESTS})");
        table.row_latency(&name, &sandboxed, &direct);
    }

    let start = |config: &Path| {
        let started = Instant::now();
        let answer = cli(bins, &dir, config, &["echo", "text=hi"]);
        assert_eq!(answer, "hi\n");
        started.elapsed().as_secs_f64()
    };
    let mut starts: [Vec<f64>; 3] = Default::default();
    for _ in 0..STARTS {
        for (times, config) in starts.iter_mut().zip([&allowlist, &cut, &open]) {
            times.push(start(config));
        }
    }
    let [allowlisted, cut_off, none] = starts;
    table.row_latency("`mcp-cli call`, network = [host]", &allowlisted, &none);
    table.row_latency("`mcp-cli call`, network = false", &cut_off, &none);
    table.print();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mcp-cli --config CONFIG call fx ARGS...`'s output; no proxy of the machine's in the way.
fn cli(bins: &Bins, dir: &Path, config: &Path, args: &[&str]) -> String {
    let output = Command::new(&bins.cli)
        .arg("--config")
        .arg(config)
        .args(["call", "fx"])
        .args(args)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{args:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
