//! What checking `structuredContent` against the tool's `outputSchema` costs a call: the
//! fixture's `wide` tool (100 fields of four types, and the schema that says so) called through
//! the hub with the check and without it, alternating, on one running server.

use std::time::Instant;

use mcp_cli::config::{Command, Config};
use mcp_cli::hub::{Hub, Settings, ToolEntry};
use serde_json::json;

use crate::{Bins, REPETITIONS, Table, percentile};

/// Calls per measurement.
const CALLS: usize = 1000;

/// One row: the median per-call latency with the check against without it.
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
    table.row_latency(
        "call of a 100-field structured result, median latency",
        &checked,
        &unchecked,
    );
}

/// The median latency of `count` sequential calls of `tool`, checked or not.
async fn calls(hub: &Hub, tool: &ToolEntry, validate: bool, count: usize) -> f64 {
    let mut latencies = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        let result = hub.call(tool, json!({})).validate_output(validate).await;
        latencies.push(started.elapsed().as_secs_f64());
        assert_eq!(result.unwrap()["structuredContent"]["f0"], 0);
    }
    percentile(&mut latencies, 0.5)
}
