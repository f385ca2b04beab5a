//! What checking `structuredContent` against the tool's `outputSchema` costs a call: the
//! fixture's `wide` tool (100 fields of four types, and the schema that says so) called through
//! the hub with the check and without it, alternating, on one running server.

use std::time::Instant;

use mcp_client_cli::config::{Command, Config};
use mcp_client_cli::hub::{Hub, Settings, ToolEntry};
use serde_json::json;

use crate::{Bins, REPETITIONS, Table, percentile, process_cpu};

/// Calls per measurement.
const CALLS: usize = 1000;

/// Two rows: the median per-call latency, and the CPU per call of this process (the hub's
/// thread included, where the check runs), with the check against without it.
pub(crate) fn rows(bins: &Bins, table: &mut Table) {
    let mut config = Config::default();
    let fixture = Command::new(bins.fixture.to_str().unwrap()).args(["output-schema"]);
    config.add("fx", fixture);
    let hub = Hub::new(config, Settings::default());
    let (checked, unchecked) = smol::block_on(async {
        let wide = hub.find("fx__wide").await.unwrap();
        // The server started, the schema compiled, both paths warm.
        calls(&hub, &wide, true, 100).await;
        calls(&hub, &wide, false, 100).await;
        let mut checked = Vec::new();
        let mut unchecked = Vec::new();
        for _ in 0..REPETITIONS {
            checked.push(calls(&hub, &wide, true, CALLS).await);
            unchecked.push(calls(&hub, &wide, false, CALLS).await);
        }
        hub.shutdown().await;
        (checked, unchecked)
    });
    let latency = |runs: &[(f64, f64)]| runs.iter().map(|run| run.0).collect::<Vec<_>>();
    let cpu = |runs: &[(f64, f64)]| runs.iter().map(|run| run.1).collect::<Vec<_>>();
    let name = "call of a 100-field structured result, median latency";
    table.row_latency(name, &latency(&checked), &latency(&unchecked));
    let name = "call of a 100-field structured result, CPU per call";
    table.row_latency(name, &cpu(&checked), &cpu(&unchecked));
}

/// The median latency of `count` sequential calls of `tool`, checked or not, and the CPU
/// this process spent per call.
async fn calls(hub: &Hub, tool: &ToolEntry, validate: bool, count: usize) -> (f64, f64) {
    let mut latencies = Vec::with_capacity(count);
    let cpu = process_cpu();
    for _ in 0..count {
        let started = Instant::now();
        let result = hub.call(tool, json!({})).validate_output(validate).await;
        latencies.push(started.elapsed().as_secs_f64());
        assert_eq!(result.unwrap()["structuredContent"]["f0"], 0);
    }
    let cpu = (process_cpu() - cpu) / count as f64;
    (percentile(&mut latencies, 0.5), cpu)
}
