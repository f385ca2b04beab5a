//! The two eras side by side: a call's cost in the stateless era (2026-07-28) against the
//! handshake era's, in the core alone (`encode`) and end to end over the fixture (`eras`).

use std::time::{Duration, Instant};

use mcp_smol::proto::{self, Connection, Event, LATEST_PROTOCOL_VERSION, Protocol};
use serde_json::json;

use crate::{
    Bins, IN_FLIGHT, REPETITIONS, Sequential, Server, Table, client_pipelined_cpu,
    client_sequential, floor_pipelined, floor_sequential,
};

/// The stateless revision measured.
pub(crate) const STATELESS: &str = "2026-07-28";

/// The eras measured, as (name, revision asked for).
const ERAS: [(&str, &str); 2] = [
    ("handshake", LATEST_PROTOCOL_VERSION),
    ("stateless", STATELESS),
];

// ----- the core alone -----

/// Calls per pass of the core measurement: a pass takes tens of milliseconds, short enough
/// for the eras' passes to alternate often and long enough to be timed closely.
const CORE_CALLS: usize = 10_000;

/// Passes of the core measurement per era: more than elsewhere, as they are short.
const CORE_PASSES: usize = 5 * REPETITIONS;

/// A ready connection in one era that issues `tools/call` and decodes their answers, pass
/// after pass, in batches of [`IN_FLIGHT`].
struct CoreCalls {
    connection: Connection,
    stateless: bool,
    /// The id the connection gives its next request.
    next_id: u64,
    /// What times the passes: [`thread_cpu`], or under a profiler the wall clock.
    clock: fn() -> Duration,
}

/// Nanoseconds of CPU per call of one pass: encoding the request, decoding its answer (as
/// far as the core does: the result stays text, read into its type by the caller).
#[derive(Clone, Copy)]
struct CoreCost {
    encode: f64,
    decode: f64,
}

impl CoreCalls {
    fn new(revision: &'static str, clock: fn() -> Duration) -> Self {
        let now = Instant::now();
        let config = proto::Config {
            protocol: Protocol::Revision(revision),
            ..Default::default()
        };
        let mut connection = Connection::new(now, config);
        let stateless = revision == STATELESS;
        // `initialize` or `server/discover`, under id 1 in both eras.
        let _ = connection.poll_transmit();
        let result = if stateless {
            json!({"resultType": "complete", "supportedVersions": [STATELESS],
                   "capabilities": {"tools": {}}, "_meta": {SERVER_INFO: {"name": "x", "version": "1"}}})
        } else {
            json!({"protocolVersion": revision, "capabilities": {"tools": {}},
                   "serverInfo": {"name": "x", "version": "1"}})
        };
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": result});
        connection.handle_bytes(now, format!("{answer}\n").as_bytes());
        assert!(matches!(connection.poll_event(), Some(Event::Ready(_))));
        while connection.poll_transmit().is_some() {}
        Self {
            connection,
            stateless,
            next_id: 2,
            clock,
        }
    }

    /// One pass of [`CORE_CALLS`] calls. The answers are those the fixture writes in this
    /// era, or with `same_answers` the handshake era's in both: the bytes are then the same,
    /// and what differs is only what the era makes the core do with them.
    fn pass(&mut self, same_answers: bool) -> CoreCost {
        let now = Instant::now();
        let (mut encoding, mut decoding) = (Duration::ZERO, Duration::ZERO);
        let mut answers = Vec::new();
        for _ in 0..CORE_CALLS / IN_FLIGHT {
            // Made before the clock starts: what the caller and the server would spend.
            let first = self.next_id;
            let calls: Vec<_> = (first..first + IN_FLIGHT as u64)
                .map(|id| proto::Request::call_tool("echo", json!({"text": format!("call {id}")})))
                .collect();
            answers.clear();
            for id in first..first + IN_FLIGHT as u64 {
                let answer = answer(id, self.stateless && !same_answers);
                answers.extend_from_slice(answer.as_bytes());
            }
            self.next_id += IN_FLIGHT as u64;

            let started = (self.clock)();
            for call in calls {
                self.connection.request(now, call).unwrap();
            }
            while let Some(line) = self.connection.poll_transmit() {
                std::hint::black_box(line);
            }
            let sent = (self.clock)();
            self.connection.handle_bytes(now, &answers);
            while let Some(event) = self.connection.poll_event() {
                assert!(matches!(event, Event::Response { result: Ok(_), .. }));
            }
            decoding += (self.clock)() - sent;
            encoding += sent - started;
        }
        assert_eq!(self.connection.pending_requests(), 0);
        let per_call = |spent: Duration| spent.as_nanos() as f64 / CORE_CALLS as f64;
        CoreCost {
            encode: per_call(encoding),
            decode: per_call(decoding),
        }
    }
}

/// The CPU time this thread has used: unlike the wall clock, it leaves out the time other
/// processes take the CPU away, which on a shared machine is most of the spread.
fn thread_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The fixture's answer to `echo` under `id`, as it writes it in either era.
fn answer(id: u64, stateless: bool) -> String {
    let mut result = json!({"content": [{"type": "text", "text": format!("call {id}")}]});
    if stateless {
        result["resultType"] = json!("complete");
        result["_meta"] = json!({SERVER_INFO: {"name": "mcp-fixture", "version": "1.0.0"}});
    }
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    format!("{answer}\n")
}

/// Rows: what a call costs the core in each era, and the ratio.
pub(crate) fn core_rows(table: &mut Table) {
    let mut connections = ERAS.map(|(_, revision)| CoreCalls::new(revision, thread_cpu));
    for same_answers in [false, true] {
        // A warm-up pass each (code, allocator, the connections' buffers).
        let [handshake, stateless] = &mut connections;
        handshake.pass(same_answers);
        stateless.pass(same_answers);
        let (handshake_runs, stateless_runs): (Vec<_>, Vec<_>) = (0..CORE_PASSES)
            .map(|_| (handshake.pass(same_answers), stateless.pass(same_answers)))
            .unzip();
        let answers = if same_answers {
            "the same answer bytes in both eras"
        } else {
            "each era's answers"
        };
        let mut row = |what: &str, pick: fn(&CoreCost) -> f64| {
            let seconds = |runs: &[CoreCost]| -> Vec<f64> {
                runs.iter().map(|run| pick(run) / 1e9).collect()
            };
            table.row_latency(
                &format!("core, `tools/call`: {what}, {answers}"),
                &seconds(&stateless_runs),
                &seconds(&handshake_runs),
            );
        };
        // With the same answers the requests are the same too.
        if !same_answers {
            row("encode a call", |cost| cost.encode);
        }
        row("decode its answer", |cost| cost.decode);
        row("both", |cost| cost.encode + cost.decode);
    }
}

/// A few passes in one era, for a profiler. Timed by the wall clock: valgrind cannot run
/// rustix's way to the thread's CPU clock.
pub(crate) fn core_profile(stateless: bool) {
    static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let wall = || STARTED.get_or_init(Instant::now).elapsed();
    let mut calls = CoreCalls::new(ERAS[usize::from(stateless)].1, wall);
    for _ in 0..3 {
        std::hint::black_box(calls.pass(false));
    }
}

// ----- end to end -----

/// The fixture in one era, asked for that era's revision (a known era: no probe).
fn fixture_in(bins: &Bins, revision: &'static str) -> Server {
    let mut server = Server::fixture(bins);
    if revision == STATELESS {
        server.command = server.command.args(["--era", "stateless"]);
    }
    server.protocol = Protocol::Revision(revision);
    server
}

/// [`crate::canned`]'s server in one era, asked for that era's revision.
fn canned_in(bins: &Bins, revision: &'static str) -> Server {
    let era = if revision == STATELESS {
        "stateless"
    } else {
        "handshake"
    };
    let me = bins.me.to_str().unwrap();
    Server {
        command: mcp_smol::ServerCommand::new(me).args(["--child", "canned-server", era]),
        protocol: Protocol::Revision(revision),
    }
}

/// Each era's runs, [`REPETITIONS`] of each, the era that goes first changing every time: a
/// run's cost depends on the one before it (the previous server still exiting, caches), and
/// with the stateless era always first that bias went all to one side of the ratio.
fn side_by_side<T>(
    mut stateless: impl FnMut() -> T,
    mut handshake: impl FnMut() -> T,
) -> (Vec<T>, Vec<T>) {
    let (mut stateless_runs, mut handshake_runs) = (Vec::new(), Vec::new());
    for repetition in 0..REPETITIONS {
        if repetition % 2 == 0 {
            stateless_runs.push(stateless());
            handshake_runs.push(handshake());
        } else {
            handshake_runs.push(handshake());
            stateless_runs.push(stateless());
        }
    }
    (stateless_runs, handshake_runs)
}

/// Rows: the client's cost in each era against a server whose own cost does not grow with
/// the stateless era's larger messages: sequential latency and CPU, pipelined rate and CPU.
pub(crate) fn canned_rows(bins: &Bins, table: &mut Table) {
    let [handshake, stateless] = ERAS.map(|(_, revision)| canned_in(bins, revision));
    let (stateless_runs, handshake_runs) = side_by_side(
        || client_sequential(&stateless, false),
        || client_sequential(&handshake, false),
    );
    for (what, pick) in [
        (
            "median latency",
            (|run: &Sequential| run.median) as fn(&Sequential) -> f64,
        ),
        ("CPU per call", |run| run.cpu_per_call),
    ] {
        let column = |runs: &[Sequential]| runs.iter().map(pick).collect::<Vec<_>>();
        table.row_latency(
            &format!("canned server, sequential echo, {what}"),
            &column(&stateless_runs),
            &column(&handshake_runs),
        );
    }
    let (stateless_runs, handshake_runs) = side_by_side(
        || client_pipelined_cpu(&stateless),
        || client_pipelined_cpu(&handshake),
    );
    let column = |runs: &[(f64, f64)], pick: fn(&(f64, f64)) -> f64| -> Vec<f64> {
        runs.iter().map(pick).collect()
    };
    table.row_rate(
        &format!("canned server, pipelined echo ({IN_FLIGHT} in flight), calls/s"),
        &column(&stateless_runs, |run| run.0),
        &column(&handshake_runs, |run| run.0),
    );
    table.row_latency(
        &format!("canned server, pipelined echo ({IN_FLIGHT} in flight), client CPU per call"),
        &column(&stateless_runs, |run| run.1),
        &column(&handshake_runs, |run| run.1),
    );
}

/// Pipelined calls against the canned server in one era, for a profiler.
pub(crate) fn canned_profile(bins: &Bins, stateless: bool) {
    let server = canned_in(bins, ERAS[usize::from(stateless)].1);
    std::hint::black_box(client_pipelined_cpu(&server));
}

/// Rows: sequential and pipelined calls through `mcp_smol` in each era, and the first call
/// from the server's start with the era known (as a cached verdict gives it) or probed.
pub(crate) fn end_to_end_rows(bins: &Bins, table: &mut Table) {
    let [handshake, stateless] = ERAS.map(|(_, revision)| fixture_in(bins, revision));
    // What the fixture and the pipe cost in each era, without a client: the floor of the ratio.
    let (stateless_floors, handshake_floors) = side_by_side(
        || floor_sequential(bins, true),
        || floor_sequential(bins, false),
    );
    let median = |runs: &[Sequential]| runs.iter().map(|run| run.median).collect::<Vec<_>>();
    table.row_latency(
        "raw-pipe floor (no client), sequential echo, median latency",
        &median(&stateless_floors),
        &median(&handshake_floors),
    );
    let (stateless_rates, handshake_rates) = side_by_side(
        || floor_pipelined(bins, true),
        || floor_pipelined(bins, false),
    );
    table.row_rate(
        &format!("raw-pipe floor (no client), pipelined echo ({IN_FLIGHT} in flight), calls/s"),
        &stateless_rates,
        &handshake_rates,
    );

    let (stateless_runs, handshake_runs) = side_by_side(
        || client_sequential(&stateless, false),
        || client_sequential(&handshake, false),
    );
    let mut row = |what: &str, pick: fn(&Sequential) -> f64| {
        let column = |runs: &[Sequential]| runs.iter().map(pick).collect::<Vec<_>>();
        table.row_latency(
            &format!("fixture, sequential echo, {what}"),
            &column(&stateless_runs),
            &column(&handshake_runs),
        );
    };
    row("median latency", |run| run.median);
    row("CPU per call", |run| run.cpu_per_call);
    // What the client adds to the floor of its era: the era's cost to the client, without
    // what the fixture and the pipe spend on the era's larger messages.
    let share = |runs: &[Sequential], floors: &[Sequential]| -> Vec<f64> {
        (runs.iter().zip(floors))
            .map(|(run, floor)| run.median - floor.median)
            .collect()
    };
    table.row_latency(
        "fixture, sequential echo, the client's share (median latency less the floor's)",
        &share(&stateless_runs, &stateless_floors),
        &share(&handshake_runs, &handshake_floors),
    );
    let (stateless_runs, handshake_runs) = side_by_side(
        || client_pipelined_cpu(&stateless),
        || client_pipelined_cpu(&handshake),
    );
    let rates = |runs: &[(f64, f64)]| runs.iter().map(|run| run.0).collect::<Vec<_>>();
    table.row_rate(
        &format!("fixture, pipelined echo ({IN_FLIGHT} in flight), calls/s"),
        &rates(&stateless_runs),
        &rates(&handshake_runs),
    );
    // The rate above is the client's and the fixture's CPU together (they share one); this
    // is the client's alone.
    let cpu = |runs: &[(f64, f64)]| runs.iter().map(|run| run.1).collect::<Vec<_>>();
    table.row_latency(
        &format!("fixture, pipelined echo ({IN_FLIGHT} in flight), client CPU per call"),
        &cpu(&stateless_runs),
        &cpu(&handshake_runs),
    );

    // The first call: each era known, and the stateless server behind a probe.
    let mut probed = fixture_in(bins, STATELESS);
    probed.protocol = Protocol::Auto;
    let mut runs = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..REPETITIONS {
        for (server, times) in [&stateless, &handshake, &probed].into_iter().zip(&mut runs) {
            times.push(first_call(server));
        }
    }
    let [known, handshake_runs, probed_runs] = runs;
    table.row_latency(
        "fixture, first call from the server's start, each era known",
        &known,
        &handshake_runs,
    );
    table.row_latency(
        "fixture, first call from the server's start, stateless: known / probed (`auto`)",
        &known,
        &probed_runs,
    );
}

/// Seconds from starting the server to the answer of the first call, made at once (before
/// the era's first exchange ends).
fn first_call(server: &Server) -> f64 {
    let started = Instant::now();
    let (client, driver) = mcp_smol::start(&server.command, server.options()).unwrap();
    let call = async {
        let result = client.call_tool("echo", json!({"text": "first"})).await;
        let elapsed = started.elapsed().as_secs_f64();
        assert!(!result.unwrap().is_error);
        client.close().await;
        elapsed
    };
    smol::block_on(smol::future::zip(driver, call)).1
}
