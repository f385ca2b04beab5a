//! `mcp-bench`: measures the client against a raw-pipe floor in the same run and prints ratios.
//!
//! Run it with `cargo run --release -p mcp-tests --bin mcp-bench` (it builds the fixture and
//! `mcp-cli` itself if they are missing); name sections (`decode daemon`) to run only those.
//! Every figure is a median over several repetitions,
//! with the client and the floor alternating so that machine noise hits both alike. The floor
//! writes the same JSON lines to the same fixture server and reads the answers with blocking
//! pipes and no protocol library: what the pipe and the server cost on their own.

// A benchmark harness: a failed unwrap is a broken measurement and should stop it.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use mcp_smol::proto;
use serde_json::{Value, json};

mod canned;
mod decode;
mod eras;
mod floor;
mod gateway;
mod http_relay;
mod plain_http;
mod sandbox;
mod schema;

use decode::{CoreDecoder, Feed, core_decoding, megabytes, recorded_stream};
use floor::{RawServer, echo_request, floor_pipelined, floor_sequential, reactor_sequential};

const REPETITIONS: usize = 11;
const SEQUENTIAL_CALLS: usize = 2000;
const PIPELINED_CALLS: usize = 4000;
const IN_FLIGHT: usize = 32;

fn main() {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("--child") => child_mode(args.collect()),
        Some("--help" | "-h") => println!("{USAGE}"),
        first => {
            let sections: Vec<String> = first.map(str::to_owned).into_iter().chain(args).collect();
            if let Some(unknown) = sections.iter().find(|s| !SECTIONS.contains(&s.as_str())) {
                eprintln!("mcp-bench: unknown section {unknown:?}\n{USAGE}");
                std::process::exit(2);
            }
            run_all(&sections);
        }
    }
}

const SECTIONS: &[&str] = &[
    "echo",
    "pipelined",
    "blob",
    "decode",
    "cold",
    "daemon",
    "gateway",
    "encode",
    "eras",
    "canned",
    "sandbox",
    "schema",
];

const USAGE: &str = "usage: mcp-bench [SECTION...]\n\
    Runs the named sections (all of them when none is named): \
    echo, pipelined, blob, decode, cold, daemon (the client against the floor), \
    gateway (a call through `mcp-cli serve`, stdio and --listen, against a direct one), \
    encode, eras (the stateless era against the handshake era), canned (the same, against \
    a server whose cost does not grow with the era's messages), \
    sandbox (the network allowlist against no sandbox), \
    schema (calls with the outputSchema check against calls without).";

fn run_all(sections: &[String]) {
    // Only the sections asked for run: a change to the decoder need not wait for the daemon rows.
    let wants = |section: &str| sections.is_empty() || sections.iter().any(|s| s == section);
    let bins = Bins::locate();
    println!(
        "mcp-bench: client vs raw-pipe floor, {REPETITIONS} alternating repetitions, medians (min-max)\n"
    );
    let mut table = Table::new(["client", "floor", "client/floor"]);

    let placements = [
        ("`connect` (a waiting caller drives)", false),
        ("driver on the caller's thread", true),
    ];
    for (placement, same_thread) in placements {
        if !wants("echo") {
            break;
        }
        let (client, floor) = alternate(
            || client_sequential(&Server::fixture(&bins), same_thread),
            || floor_sequential(&bins, false),
        );
        let column = |runs: &[Sequential], pick: fn(&Sequential) -> f64| -> Vec<f64> {
            runs.iter().map(pick).collect()
        };
        let name = format!("sequential echo, median latency, {placement}");
        let median = |run: &Sequential| run.median;
        table.row_latency(&name, &column(&client, median), &column(&floor, median));
        let name = format!("sequential echo, p99 latency, {placement}");
        let p99 = |run: &Sequential| run.p99;
        table.row_latency(&name, &column(&client, p99), &column(&floor, p99));
        let name = format!("sequential echo, CPU per call, {placement}");
        let cpu = |run: &Sequential| run.cpu_per_call;
        table.row_latency(&name, &column(&client, cpu), &column(&floor, cpu));
    }

    if wants("echo") {
        // How much of the client's cost is the reactor it waits through rather than its own.
        let (reactor, floor) = alternate(
            || reactor_sequential(&bins),
            || floor_sequential(&bins, false),
        );
        let placement = "the floor's loop waiting through async-io (no MCP code)";
        let median = |runs: &[Sequential]| runs.iter().map(|run| run.median).collect::<Vec<_>>();
        let cpu = |runs: &[Sequential]| runs.iter().map(|run| run.cpu_per_call).collect::<Vec<_>>();
        let name = format!("sequential echo, median latency, {placement}");
        table.row_latency(&name, &median(&reactor), &median(&floor));
        let name = format!("sequential echo, CPU per call, {placement}");
        table.row_latency(&name, &cpu(&reactor), &cpu(&floor));
    }

    if wants("pipelined") {
        let (client, floor) = alternate(
            || client_pipelined(&Server::fixture(&bins)),
            || floor_pipelined(&bins, false),
        );
        table.row_rate("pipelined echo (32 in flight), calls/s", &client, &floor);
    }

    for mib in [1usize, 8, 16] {
        if !wants("blob") {
            break;
        }
        let (client, floor) = alternate(
            || large_in_child(&bins, "large-client", mib),
            || large_in_child(&bins, "large-floor", mib),
        );
        let (client_time, client_rss): (Vec<f64>, Vec<f64>) = client.into_iter().unzip();
        let (floor_time, floor_rss): (Vec<f64>, Vec<f64>) = floor.into_iter().unzip();
        table.row_latency(&format!("blob {mib} MiB, time"), &client_time, &floor_time);
        table.row_memory(
            &format!("blob {mib} MiB, peak RSS"),
            &client_rss,
            &floor_rss,
            mib,
        );
    }

    let streams = [
        ("small responses, 32 per read", false, Feed::Reads),
        ("small responses, one per read", false, Feed::Lines),
        ("one 16 MiB response", true, Feed::Reads),
    ];
    for (label, large, feed) in streams {
        if !wants("decode") {
            break;
        }
        let (mut batches, messages) = recorded_stream(large);
        let mut core = CoreDecoder::new();
        let (core, serde) = alternate_pair(|| core_decoding(&mut core, &mut batches, feed));
        table.row_rate(&format!("core decode, {label}, MB/s"), &core, &serde);
        let per_megabyte = messages as f64 / megabytes(&batches);
        let in_messages =
            |rates: &[f64]| -> Vec<f64> { rates.iter().map(|rate| rate * per_megabyte).collect() };
        let name = format!("core decode, {label}, messages/s");
        table.row_rate(&name, &in_messages(&core), &in_messages(&serde));
    }

    if wants("cold") {
        let (client, floor) = alternate(|| cold_cli(&bins), || cold_floor(&bins));
        table.row_latency(
            "cold `mcp-cli call` (process start to exit)",
            &client,
            &floor,
        );
    }

    if wants("daemon") {
        for target in WarmTarget::available(&bins) {
            target.measure(&bins, &mut table);
        }
    }
    if wants("gateway") {
        gateway::rows(&bins, &mut table);
        gateway::catalogue_listing(&bins);
    }
    if !table.rows.is_empty() {
        table.print();
    }

    if wants("encode") || wants("eras") || wants("canned") {
        println!(
            "\nthe stateless era (2026-07-28) against the handshake era ({}), medians (min-max)\n",
            proto::LATEST_PROTOCOL_VERSION
        );
        let mut table = Table::new(["stateless", "handshake", "stateless/handshake"]);
        if wants("encode") {
            eras::core_rows(&mut table);
        }
        if wants("eras") {
            eras::end_to_end_rows(&bins, &mut table);
        }
        if wants("canned") {
            eras::canned_rows(&bins, &mut table);
        }
        table.print();
    }

    if wants("sandbox") {
        sandbox::rows(&bins);
    }
    if wants("schema") {
        println!("\nthe outputSchema check against none, medians (min-max)\n");
        let mut table = Table::new(["checked", "unchecked", "checked/unchecked"]);
        schema::rows(&bins, &mut table);
        table.print();
    }
}

/// Runs `client` and `floor` alternately, `REPETITIONS` times each.
fn alternate<T, U>(
    mut client: impl FnMut() -> T,
    mut floor: impl FnMut() -> U,
) -> (Vec<T>, Vec<U>) {
    let mut clients = Vec::new();
    let mut floors = Vec::new();
    for _ in 0..REPETITIONS {
        clients.push(client());
        floors.push(floor());
    }
    (clients, floors)
}

fn alternate_pair(mut measure: impl FnMut() -> (f64, f64)) -> (Vec<f64>, Vec<f64>) {
    (0..REPETITIONS).map(|_| measure()).unzip()
}

// ----- locating binaries -----

struct Bins {
    fixture: PathBuf,
    cli: PathBuf,
    me: PathBuf,
}

impl Bins {
    fn locate() -> Self {
        let me = std::env::current_exe().unwrap();
        let dir = me.parent().unwrap().to_owned();
        let bins = Self {
            fixture: dir.join("mcp-fixture"),
            cli: dir.join("mcp-cli"),
            me,
        };
        if !bins.fixture.exists() || !bins.cli.exists() {
            let profile = if dir.ends_with("release") {
                vec!["--release"]
            } else {
                vec![]
            };
            let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args(["build", "-p", "mcp-tests", "-p", "mcp-client-cli", "--bins"])
                .args(profile)
                .status()
                .unwrap();
            assert!(status.success(), "building the fixture and mcp-cli failed");
        }
        if cfg!(debug_assertions) {
            println!("warning: debug build; run with --release for meaningful figures\n");
        }
        bins
    }
}

// ----- the client side -----

/// A server to call, and the revision to ask it for.
struct Server {
    command: mcp_smol::ServerCommand,
    protocol: proto::Protocol,
}

impl Server {
    /// The fixture in the handshake era (its default), asked for `mcp-smol`'s default revision.
    fn fixture(bins: &Bins) -> Self {
        Self {
            command: mcp_smol::ServerCommand::new(bins.fixture.to_str().unwrap()).arg("good"),
            protocol: mcp_smol::Options::default().core.protocol,
        }
    }

    fn options(&self) -> mcp_smol::Options {
        // The default line limit (64 MiB) takes the 16 MiB results.
        let mut options = mcp_smol::Options::default();
        options.core.protocol = self.protocol;
        options
    }
}

/// Sequential calls, in seconds.
struct Sequential {
    median: f64,
    p99: f64,
    /// The CPU time of the whole process (every thread) over the calls, per call.
    cpu_per_call: f64,
}

impl Sequential {
    fn new(latencies: &mut [f64], cpu: f64) -> Self {
        Self {
            median: percentile(latencies, 0.5),
            p99: percentile(latencies, 0.99),
            cpu_per_call: cpu / latencies.len() as f64,
        }
    }
}

/// The CPU time this process's threads have used so far, in seconds (nanosecond counts from
/// the scheduler; the clock-tick figures of /proc/self/stat are too coarse for 20 ms).
fn process_cpu() -> f64 {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    let nanoseconds: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    nanoseconds as f64 / 1e9
}

/// Per-call latency and CPU: through [`mcp_smol::connect`] (a waiting caller drives; the driver
/// otherwise runs on mcp-smol's background thread),
/// or with `same_thread` polled by the same `block_on` as the calls.
fn client_sequential(server: &Server, same_thread: bool) -> Sequential {
    let calls = |client: mcp_smol::Client| async move {
        client.wait_ready().await.unwrap();
        let cpu = process_cpu();
        let mut latencies = Vec::with_capacity(SEQUENTIAL_CALLS);
        for i in 0..SEQUENTIAL_CALLS {
            let started = Instant::now();
            let result = client
                .call_tool("echo", json!({"text": format!("call {i}")}))
                .await;
            latencies.push(started.elapsed().as_secs_f64());
            assert!(!result.unwrap().is_error);
        }
        let cpu = process_cpu() - cpu;
        client.close().await;
        Sequential::new(&mut latencies, cpu)
    };
    if same_thread {
        let (client, driver) = mcp_smol::start(&server.command, server.options()).unwrap();
        smol::block_on(smol::future::zip(driver, calls(client))).1
    } else {
        smol::block_on(async {
            let client = mcp_smol::connect(&server.command, server.options()).await;
            calls(client.unwrap()).await
        })
    }
}

/// Calls per second with `IN_FLIGHT` calls outstanding.
fn client_pipelined(server: &Server) -> f64 {
    client_pipelined_cpu(server).0
}

/// Calls per second with `IN_FLIGHT` calls outstanding, and the client's CPU per call: the
/// rate counts the server's CPU too, where both share one.
fn client_pipelined_cpu(server: &Server) -> (f64, f64) {
    smol::block_on(async {
        let client = mcp_smol::connect(&server.command, server.options())
            .await
            .unwrap();
        let cpu = process_cpu();
        let started = Instant::now();
        let workers: Vec<_> = (0..IN_FLIGHT)
            .map(|worker| {
                let client = client.clone();
                smol::spawn(async move {
                    for i in 0..PIPELINED_CALLS / IN_FLIGHT {
                        let text = format!("call {worker}-{i}");
                        client
                            .call_tool("echo", json!({ "text": text }))
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.await;
        }
        let rate = PIPELINED_CALLS as f64 / started.elapsed().as_secs_f64();
        let cpu_per_call = (process_cpu() - cpu) / PIPELINED_CALLS as f64;
        client.close().await;
        (rate, cpu_per_call)
    })
}

// ----- large results, each in a child process so its peak RSS is its own -----

/// (seconds, peak RSS in MiB) of one `blob` call, measured in a fresh process.
fn large_in_child(bins: &Bins, mode: &str, mib: usize) -> (f64, f64) {
    let output = Command::new(&bins.me)
        .args(["--child", mode, &mib.to_string()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let mut figures = text.split_whitespace().map(|f| f.parse::<f64>().unwrap());
    (figures.next().unwrap(), figures.next().unwrap())
}

fn child_mode(args: Vec<String>) {
    let bins = Bins {
        fixture: std::env::current_exe()
            .unwrap()
            .with_file_name("mcp-fixture"),
        cli: PathBuf::new(),
        me: PathBuf::new(),
    };
    match args[0].as_str() {
        "canned-server" => return canned::serve(args[1] == "stateless"),
        "relay" => return floor::relay(&bins.fixture, &args[1..]),
        "http-relay" => return http_relay::relay(&bins.fixture, &args[1..]),
        "http-client-profile" => return http_relay::client_profile(args[1].parse().unwrap()),
        // For profilers: the client's pipelined calls against the canned server in one era.
        "canned-profile" => return eras::canned_profile(&Bins::locate(), args[1] == "stateless"),
        _ => {}
    }
    let bytes = args[1].parse::<usize>().unwrap() * 1024 * 1024;
    let seconds = match args[0].as_str() {
        // For profilers: the core's decoding alone, many times over.
        // The sequential echo alone: the caller's-thread path, or `connect`'s.
        "sequential-profile" | "sequential-default-profile" => {
            let fixture = Server::fixture(&bins);
            let run = client_sequential(&fixture, args[0] == "sequential-profile");
            let (median, p99, cpu) = (time(run.median), time(run.p99), time(run.cpu_per_call));
            println!("median {median} p99 {p99} cpu per call {cpu}");
            return;
        }
        "core-profile" => {
            let (mut batches, _) = recorded_stream(bytes > 0);
            let mut core = CoreDecoder::new();
            for _ in 0..20 {
                std::hint::black_box(core_decoding(&mut core, &mut batches, Feed::Reads));
            }
            return;
        }
        // For callgrind: one era's calls through the core alone, `Connection::request` and
        // `handle_bytes` to compare between the eras.
        "encode-profile-handshake" | "encode-profile-stateless" => {
            eras::core_profile(args[0].ends_with("stateless"));
            return;
        }
        "core-ratio" => {
            let mut batches = recorded_stream(bytes > 0).0;
            let (core, serde) = core_decoding(&mut CoreDecoder::new(), &mut batches, Feed::Reads);
            println!(
                "core {core:.0} MB/s serde {serde:.0} MB/s ratio {:.2}",
                serde / core
            );
            return;
        }
        "cold-floor" => {
            // The same exchange as `mcp-cli call`: handshake, every tools/list page, the call.
            let mut server = RawServer::start(&bins.fixture, false);
            let mut cursor: Option<String> = None;
            for id in 2.. {
                let params = cursor.map(|c| json!({ "cursor": c })).unwrap_or(json!({}));
                let list =
                    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
                server.send(&list.to_string());
                let page: Value = serde_json::from_str(server.receive()).unwrap();
                cursor = page["result"]["nextCursor"].as_str().map(str::to_owned);
                if cursor.is_none() {
                    break;
                }
            }
            server.send(&echo_request(100, "cold", false));
            assert!(server.receive().contains("cold"));
            println!("cold");
            server.finish();
            return;
        }
        "large-client" => smol::block_on(async {
            let fixture = Server::fixture(&bins);
            let client = mcp_smol::connect(&fixture.command, fixture.options())
                .await
                .unwrap();
            let started = Instant::now();
            let result = client
                .call_tool("blob", json!({ "bytes": bytes }))
                .await
                .unwrap();
            let elapsed = started.elapsed().as_secs_f64();
            assert!(
                matches!(&result.content[0], proto::Content::Text { text } if text.len() == bytes)
            );
            client.close().await;
            elapsed
        }),
        "large-floor" => {
            let mut server = RawServer::start(&bins.fixture, false);
            let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                 "params": {"name": "blob", "arguments": {"bytes": bytes}}});
            let started = Instant::now();
            server.send(&request.to_string());
            let line_len = server.receive().len();
            let elapsed = started.elapsed().as_secs_f64();
            assert!(line_len > bytes);
            server.finish();
            elapsed
        }
        other => panic!("unknown child mode {other}"),
    };
    println!("{seconds} {}", peak_rss_mib());
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0);
    kib / 1024.0
}

// ----- cold calls: whole processes -----

fn cold_cli(bins: &Bins) -> f64 {
    let config = std::env::temp_dir().join(format!("mcp-bench-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        format!(
            "[mcp.fixture]\ncommand = {:?}\nargs = [\"good\"]\n",
            bins.fixture.to_str().unwrap()
        ),
    )
    .unwrap();
    let started = Instant::now();
    let output = Command::new(&bins.cli)
        .arg("--config")
        .arg(&config)
        .args(["call", "fixture", "echo", "text=cold"])
        .env(
            "XDG_STATE_HOME",
            std::env::temp_dir().join("mcp-bench-state"),
        )
        .output()
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "cold\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

/// The same exchange as `mcp-cli call` (handshake, tools/list, call, close), as a process.
fn cold_floor(bins: &Bins) -> f64 {
    let started = Instant::now();
    let output = Command::new(&bins.me)
        .args(["--child", "cold-floor", "0"])
        .output()
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert!(output.status.success());
    elapsed
}

// ----- warm calls: through the daemon -----

/// A server measured cold, warm through the daemon, and in-process.
struct WarmTarget {
    label: &'static str,
    command: mcp_smol::ServerCommand,
    /// The echo tool's string argument.
    argument: &'static str,
    /// What the echo tool answers `hi` with.
    echoed: &'static str,
}

impl WarmTarget {
    /// The fixture, and server-everything when the end-to-end suite has installed it.
    fn available(bins: &Bins) -> Vec<Self> {
        let mut targets = vec![Self {
            label: "fixture",
            command: mcp_smol::ServerCommand::new(bins.fixture.to_string_lossy()).arg("good"),
            argument: "text",
            echoed: "hi",
        }];
        let everything = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/e2e-servers/npm/node_modules/.bin/mcp-server-everything");
        if everything.exists() {
            targets.push(Self {
                label: "server-everything",
                command: mcp_smol::ServerCommand::new(everything.to_string_lossy()),
                argument: "message",
                echoed: "Echo: hi",
            });
        }
        targets
    }

    /// Rows: a warm `mcp-cli call` against a cold one, and a call over the daemon's socket
    /// against one on an in-process connection.
    fn measure(&self, bins: &Bins, table: &mut Table) {
        let dir = std::env::temp_dir().join(format!("mcp-bench-warm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.toml");
        let command = &self.command;
        std::fs::write(
            &config,
            format!(
                "[mcp.s]\ncommand = {:?}\nargs = {:?}\n",
                command.program, command.args
            ),
        )
        .unwrap();
        let cli = |args: &[&str], cold: bool| {
            let mut run = Command::new(&bins.cli);
            run.arg("--config").arg(&config).args(args);
            run.env("XDG_RUNTIME_DIR", dir.join("run"))
                .env("XDG_STATE_HOME", dir.join("state"));
            if cold {
                run.env("MCP_CLI_NO_DAEMON", "1");
            }
            run
        };
        let argument = format!("{}=hi", self.argument);
        let call = |cold: bool| {
            let started = Instant::now();
            let output = cli(&["call", "s", "echo", &argument], cold)
                .output()
                .unwrap();
            let elapsed = started.elapsed().as_secs_f64();
            let printed = String::from_utf8_lossy(&output.stdout);
            assert_eq!(printed.trim_end(), self.echoed, "{output:?}");
            elapsed
        };
        let started = cli(&["daemon", "start"], true).output().unwrap();
        assert!(started.status.success(), "{started:?}");
        let status = cli(&["--json", "daemon", "status"], true).output().unwrap();
        let status: Value = serde_json::from_slice(&status.stdout).unwrap();
        let socket = PathBuf::from(status["socket"].as_str().unwrap());
        call(false); // the daemon starts the server on first use
        let (warm, cold) = alternate(|| call(false), || call(true));
        table.row_latency(
            &format!("daemon, {}: warm `mcp-cli call` / a cold one", self.label),
            &warm,
            &cold,
        );
        let arguments = json!({ self.argument: "hi" });
        let (socket_calls, in_process) = smol::block_on(async {
            let stream = smol::net::unix::UnixStream::connect(&socket).await.unwrap();
            let options = mcp_smol::Options::default();
            let warm = mcp_smol::connect((stream.clone(), stream), options)
                .await
                .unwrap();
            let direct = mcp_smol::connect(command, mcp_smol::Options::default())
                .await
                .unwrap();
            let latency = |client: mcp_smol::Client, tool: &'static str| {
                let arguments = arguments.clone();
                async move {
                    let mut times = Vec::new();
                    for _ in 0..200 {
                        let started = Instant::now();
                        client.call_tool(tool, arguments.clone()).await.unwrap();
                        times.push(started.elapsed().as_secs_f64());
                    }
                    median(&times)
                }
            };
            let mut through_socket = Vec::new();
            let mut direct_times = Vec::new();
            for _ in 0..REPETITIONS {
                through_socket.push(latency(warm.clone(), "s__echo").await);
                direct_times.push(latency(direct.clone(), "echo").await);
            }
            warm.close().await;
            direct.close().await;
            (through_socket, direct_times)
        });
        table.row_latency(
            &format!(
                "daemon, {}: a call over its socket / in-process",
                self.label
            ),
            &socket_calls,
            &in_process,
        );
        let _ = cli(&["daemon", "stop"], true).output();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

// ----- reporting -----

fn percentile(values: &mut [f64], fraction: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let index = ((values.len() - 1) as f64 * fraction).round() as usize;
    values[index]
}

fn median(values: &[f64]) -> f64 {
    percentile(&mut values.to_vec(), 0.5)
}

fn spread(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// Rows of figures: each a measure, two columns compared and their ratio.
struct Table {
    /// The names of the columns after the measure's.
    header: [&'static str; 3],
    rows: Vec<[String; 4]>,
}

impl Table {
    fn new(header: [&'static str; 3]) -> Self {
        Self {
            header,
            rows: Vec::new(),
        }
    }

    fn row_latency(&mut self, name: &str, client: &[f64], floor: &[f64]) {
        let show = |v: &[f64]| {
            let (min, max) = spread(v);
            format!("{} ({}-{})", time(median(v)), time(min), time(max))
        };
        let ratio = median(client) / median(floor);
        self.rows.push([
            name.to_owned(),
            show(client),
            show(floor),
            format!("{ratio:.2}x time"),
        ]);
    }

    fn row_rate(&mut self, name: &str, client: &[f64], floor: &[f64]) {
        let show = |v: &[f64]| {
            let (min, max) = spread(v);
            format!("{:.0} ({:.0}-{:.0})", median(v), min, max)
        };
        let ratio = median(client) / median(floor);
        self.rows.push([
            name.to_owned(),
            show(client),
            show(floor),
            format!("{ratio:.2}x rate"),
        ]);
    }

    fn row_memory(&mut self, name: &str, client: &[f64], floor: &[f64], payload_mib: usize) {
        let show = |v: &[f64]| format!("{:.1} MiB", median(v));
        let ratio = median(client) / payload_mib as f64;
        self.rows.push([
            name.to_owned(),
            show(client),
            show(floor),
            format!("{ratio:.2}x payload"),
        ]);
    }

    fn print(&self) {
        let [first, second, ratio] = self.header;
        let header = ["measure", first, second, ratio].map(str::to_owned);
        let rows: Vec<&[String; 4]> = std::iter::once(&header).chain(&self.rows).collect();
        let widths: Vec<usize> = (0..4)
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        for row in rows {
            let cells: Vec<String> = (0..4)
                .map(|c| format!("{:w$}", row[c], w = widths[c]))
                .collect();
            println!("{}", cells.join("  "));
        }
    }
}

fn time(seconds: f64) -> String {
    match seconds {
        s if s < 1e-5 => format!("{:.0}ns", s * 1e9),
        s if s < 1e-3 => format!("{:.1}us", s * 1e6),
        s if s < 1.0 => format!("{:.2}ms", s * 1e3),
        s => format!("{s:.2}s"),
    }
}
