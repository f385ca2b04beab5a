//! The `gateway` section: a call through `mcp-cli serve` against a direct call on the same
//! backend (the fixture), side by side in one run: one call in flight (the median latency,
//! and what the gateway adds to it) and 32 in flight (calls per second), over stdio and over
//! `serve --listen` (HTTP/1.1 on loopback, the connection kept alive, a session; from the
//! client, and from a plain host that tells what the client's HTTP transport adds), each
//! beside its floor: a bare relay over stdio, a bare HTTP relay ([`crate::http_relay`]) over
//! HTTP. Then `mcp-cli tools` answered from the catalogue on disk, no server running.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use mcp_smol::proto::Protocol;
use serde_json::json;

use crate::http_relay;
use crate::plain_http::PlainHost;
use crate::{Bins, IN_FLIGHT, REPETITIONS, Table, median, time};

/// Sequential calls per repetition and path.
const CALLS: usize = 400;

/// Calls per repetition and path with [`IN_FLIGHT`] outstanding.
const PIPELINED: usize = 3200;

/// The three paths to the same backend, connected and warm.
struct Paths {
    direct: mcp_smol::Client,
    stdio: mcp_smol::Client,
    listen: mcp_smol::Client,
    /// The fixture behind a relay that understands nothing ([`crate::floor::relay`]).
    relay: mcp_smol::Client,
    /// `serve --listen` from a plain HTTP/1.1 host.
    plain: PlainHost,
    /// The fixture behind a bare HTTP relay ([`http_relay`]), from the client and from a
    /// plain host.
    http_relay: mcp_smol::Client,
    http_relay_plain: PlainHost,
    serving: Child,
    relaying: Child,
    dir: PathBuf,
}

impl Drop for Paths {
    fn drop(&mut self) {
        for child in [&mut self.serving, &mut self.relaying] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn rows(bins: &Bins, table: &mut Table) {
    smol::block_on(async {
        let mut paths = Paths::open(bins).await;
        let mut sequential = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        let mut added = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        let mut rates = [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        // The CPU each process uses per call: the backend's (direct), `serve`'s (stdio),
        // `serve --listen`'s and the relays'.
        let mut cpu = [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        // And this process's, the client's, over HTTP: through `serve --listen` and through
        // the bare HTTP relay.
        let mut client_cpu = [Vec::new(), Vec::new()];
        let pids = [
            paths.direct.pid(),
            paths.stdio.pid(),
            paths.serving.id(),
            paths.relay.pid(),
            paths.relaying.id(),
        ];
        let clients = [
            (&paths.direct, "echo"),
            (&paths.stdio, "fx__echo"),
            (&paths.listen, "fx__echo"),
            (&paths.relay, "echo"),
        ];
        for (client, tool) in clients {
            latency(client, tool, 50).await;
        }
        paths.plain.latency("fx__echo", 50);
        latency(&paths.http_relay, "echo", 50).await;
        paths.http_relay_plain.latency("echo", 50);
        // What the bare HTTP relay adds to a direct call, from the client and a plain host.
        let mut http_floor = [Vec::new(), Vec::new()];
        let mut http_relay_sequential = Vec::new();
        for _ in 0..REPETITIONS {
            let mut medians = [0.0; 4];
            for (at, (client, tool)) in clients.iter().enumerate() {
                medians[at] = latency(client, tool, CALLS).await;
                sequential[at].push(medians[at]);
            }
            added[0].push(medians[1] - medians[0]);
            added[1].push(medians[2] - medians[0]);
            added[2].push(paths.plain.latency("fx__echo", CALLS) - medians[0]);
            added[3].push(medians[3] - medians[0]);
            let relayed = latency(&paths.http_relay, "echo", CALLS).await;
            http_relay_sequential.push(relayed);
            http_floor[0].push(relayed - medians[0]);
            http_floor[1].push(paths.http_relay_plain.latency("echo", CALLS) - medians[0]);
            let rated = clients.iter().copied().chain([(&paths.http_relay, "echo")]);
            for (at, (client, tool)) in rated.enumerate() {
                let before = (process_cpu(pids[at]), process_cpu(std::process::id()));
                rates[at].push(rate(client, tool).await);
                cpu[at].push((process_cpu(pids[at]) - before.0) / PIPELINED as f64);
                let client_side = (process_cpu(std::process::id()) - before.1) / PIPELINED as f64;
                match at {
                    2 => client_cpu[0].push(client_side),
                    4 => client_cpu[1].push(client_side),
                    _ => {}
                }
            }
        }
        let [direct, stdio, listen, _] = &sequential;
        table.row_latency(
            "gateway: a call through `serve` (stdio) / direct, median latency",
            stdio,
            direct,
        );
        table.row_latency(
            "gateway: a call through `serve --listen` (HTTP) / direct, median latency",
            listen,
            direct,
        );
        table.row_latency(
            "gateway floor: a call through a bare HTTP relay / direct, median latency",
            &http_relay_sequential,
            direct,
        );
        table.row_latency(
            "gateway: a call through `serve --listen` / through a bare HTTP relay, median latency",
            listen,
            &http_relay_sequential,
        );
        let [
            direct_rate,
            stdio_rate,
            listen_rate,
            relay_rate,
            http_relay_rate,
        ] = &rates;
        let name = format!("gateway: `serve` (stdio) / direct, {IN_FLIGHT} in flight, calls/s");
        table.row_rate(&name, stdio_rate, direct_rate);
        let name = format!("gateway: `serve --listen` / direct, {IN_FLIGHT} in flight, calls/s");
        table.row_rate(&name, listen_rate, direct_rate);
        let name = format!("gateway floor: a bare relay / direct, {IN_FLIGHT} in flight, calls/s");
        table.row_rate(&name, relay_rate, direct_rate);
        let name =
            format!("gateway floor: a bare HTTP relay / direct, {IN_FLIGHT} in flight, calls/s");
        table.row_rate(&name, http_relay_rate, direct_rate);
        let name = format!(
            "gateway: `serve --listen` / a bare HTTP relay, {IN_FLIGHT} in flight, calls/s"
        );
        table.row_rate(&name, listen_rate, http_relay_rate);
        let [
            backend_cpu,
            stdio_cpu,
            listen_cpu,
            relay_cpu,
            http_relay_cpu,
        ] = &cpu;
        let name =
            format!("gateway: CPU per call, `serve` (stdio) / the backend, {IN_FLIGHT} in flight");
        table.row_latency(&name, stdio_cpu, backend_cpu);
        let name =
            format!("gateway: CPU per call, `serve --listen` / the backend, {IN_FLIGHT} in flight");
        table.row_latency(&name, listen_cpu, backend_cpu);
        let name = format!(
            "gateway floor: CPU per call, a bare relay / the backend, {IN_FLIGHT} in flight"
        );
        table.row_latency(&name, relay_cpu, backend_cpu);
        let name = format!(
            "gateway floor: CPU per call, a bare HTTP relay / the backend, {IN_FLIGHT} in flight"
        );
        table.row_latency(&name, http_relay_cpu, backend_cpu);
        let name = format!(
            "gateway: the client's CPU per call over HTTP, to `serve --listen` / to a bare HTTP \
             relay, {IN_FLIGHT} in flight"
        );
        table.row_latency(&name, &client_cpu[0], &client_cpu[1]);
        let show = |values: &[f64]| time(median(values));
        println!(
            "gateway: added to a direct call's median, one in flight (median of {REPETITIONS} \
             repetitions): stdio {}, --listen {} (from a plain HTTP/1.1 host: {}); a bare relay \
             that understands nothing, the floor for any process in between: {}\n",
            show(&added[0]),
            show(&added[1]),
            show(&added[2]),
            show(&added[3])
        );
        println!(
            "gateway: a bare HTTP relay that understands nothing, the floor for --listen, adds \
             {} from the client, {} from a plain HTTP/1.1 host\n",
            show(&http_floor[0]),
            show(&http_floor[1])
        );
        let clients = [&paths.direct, &paths.stdio, &paths.listen, &paths.relay];
        for client in clients.into_iter().chain([&paths.http_relay]) {
            client.close().await;
        }
    });
}

impl Paths {
    async fn open(bins: &Bins) -> Self {
        let dir = std::env::temp_dir().join(format!("mcp-bench-gateway-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.toml");
        let fixture = bins.fixture.to_string_lossy().into_owned();
        std::fs::write(
            &config,
            format!("[mcp.fx]\ncommand = {fixture:?}\nargs = [\"good\"]\n"),
        )
        .unwrap();
        let env = [
            ("XDG_STATE_HOME", dir.join("state")),
            ("XDG_CONFIG_HOME", dir.join("config-home")),
            ("XDG_RUNTIME_DIR", dir.join("run")),
        ];
        let cli = bins.cli.to_string_lossy().into_owned();
        let config_arg = config.to_string_lossy().into_owned();
        let options = || {
            let mut options = mcp_smol::Options::default();
            options.core.protocol = Protocol::Revision("2025-11-25");
            options
        };

        let direct = mcp_smol::ServerCommand::new(&fixture).arg("good");
        let direct = mcp_smol::connect(&direct, options()).await.unwrap();
        let me = bins.me.to_string_lossy().into_owned();
        let relay = mcp_smol::ServerCommand::new(&me).args(["--child", "relay", "good"]);
        let relay = mcp_smol::connect(&relay, options()).await.unwrap();

        let mut stdio = mcp_smol::ServerCommand::new(&cli).args(["--config", &config_arg, "serve"]);
        for (key, value) in &env {
            (stdio.env).insert((*key).to_owned(), value.to_string_lossy().into_owned());
        }
        let stdio = mcp_smol::connect(&stdio, options()).await.unwrap();

        let mut serving = Command::new(&cli)
            .args(["--config", &config_arg, "serve", "--listen", "127.0.0.1:0"])
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let url = listening_url(&mut serving, "mcp-cli serve: listening on ");
        let token = Command::new(&cli)
            .args(["serve", "--print-token"])
            .envs(env.iter().map(|(key, value)| (key, value)))
            .output()
            .unwrap();
        let token = String::from_utf8(token.stdout).unwrap().trim().to_owned();
        let plain = PlainHost::open(&url, &token);
        let mut http = mcp_smol::HttpServer::new(url);
        http.headers
            .push(("Authorization".to_owned(), format!("Bearer {token}")));
        let listen = mcp_smol::connect(http, options()).await.unwrap();

        let mut relaying = Command::new(&bins.me)
            .args(["--child", "http-relay", "good"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let relay_url = listening_url(&mut relaying, http_relay::LISTENING);
        let http_relay_plain = PlainHost::open(&relay_url, "");
        let http = mcp_smol::HttpServer::new(relay_url);
        let http_relay = mcp_smol::connect(http, options()).await.unwrap();
        Self {
            direct,
            stdio,
            listen,
            relay,
            plain,
            http_relay,
            http_relay_plain,
            serving,
            relaying,
            dir,
        }
    }
}

/// The URL `child` prints on stderr after `prefix`; the rest of its stderr is discarded.
pub(crate) fn listening_url(child: &mut Child, prefix: &str) -> String {
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server ended before it listened"
        );
        if let Some(url) = line.trim().strip_prefix(prefix) {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    url
}

/// The CPU time process `pid`'s threads have used so far, in seconds.
fn process_cpu(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let nanoseconds: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    nanoseconds as f64 / 1e9
}

/// The median latency of `calls` sequential calls of `tool`, in seconds.
async fn latency(client: &mcp_smol::Client, tool: &str, calls: usize) -> f64 {
    let mut times = Vec::with_capacity(calls);
    for i in 0..calls {
        let started = Instant::now();
        let text = format!("call {i}");
        let result = client.call_tool(tool, json!({ "text": text })).await;
        times.push(started.elapsed().as_secs_f64());
        assert!(!result.unwrap().is_error);
    }
    median(&times)
}

/// Calls of `tool` per second with [`IN_FLIGHT`] outstanding.
async fn rate(client: &mcp_smol::Client, tool: &'static str) -> f64 {
    let started = Instant::now();
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|worker| {
            let client = client.clone();
            smol::spawn(async move {
                for i in 0..PIPELINED / IN_FLIGHT {
                    let text = format!("call {worker}-{i}");
                    let result = client.call_tool(tool, json!({ "text": text })).await;
                    assert!(!result.unwrap().is_error);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await;
    }
    PIPELINED as f64 / started.elapsed().as_secs_f64()
}

/// Runs of `mcp-cli tools` timed from the catalogue on disk.
const LISTINGS: usize = 21;

/// The configured servers `mcp-cli tools` lists from the catalogue on disk.
const CATALOGUED: usize = 8;

/// `mcp-cli tools` over [`CATALOGUED`] configured servers (the fixture under as many names),
/// none running, each listed once before so that the catalogue on disk holds them: the whole
/// command, process start included, as a person or a script meets it.
pub(crate) fn catalogue_listing(bins: &Bins) {
    let dir = std::env::temp_dir().join(format!("mcp-bench-catalogue-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = bins.fixture.to_string_lossy().into_owned();
    let config: String = (0..CATALOGUED)
        .map(|at| format!("[mcp.fx{at}]\ncommand = {fixture:?}\nargs = [\"good\"]\n"))
        .collect();
    let config_path = dir.join("config.toml");
    std::fs::write(&config_path, config).unwrap();
    let tools = || {
        let mut command = Command::new(&bins.cli);
        command
            .arg("--config")
            .arg(&config_path)
            .arg("tools")
            .env("XDG_STATE_HOME", dir.join("state"))
            .env("XDG_CONFIG_HOME", dir.join("config-home"))
            .env("XDG_RUNTIME_DIR", dir.join("run"))
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        let output = command.output().unwrap();
        assert!(output.status.success(), "mcp-cli tools failed");
        output.stdout
    };
    // Lists them live, which fills the catalogue.
    let live = tools();
    let mut times = Vec::with_capacity(LISTINGS);
    for _ in 0..LISTINGS {
        let started = Instant::now();
        let listed = tools();
        times.push(started.elapsed().as_secs_f64());
        assert_eq!(listed, live, "the catalogue lists what the servers did");
    }
    let min = times.iter().copied().fold(f64::MAX, f64::min);
    let max = times.iter().copied().fold(0.0, f64::max);
    println!(
        "gateway: `mcp-cli tools` over {CATALOGUED} configured servers from the catalogue on \
         disk, none running: median {} ({}-{}) of {LISTINGS} runs\n",
        time(median(&times)),
        time(min),
        time(max),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
