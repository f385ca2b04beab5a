//! One connection, four executors: the driver is a plain future and needs none in particular.
//! And the hub under tokio, as most agents would embed it.

use mcp_client_cli::config::Config;
use mcp_client_cli::hub::{Hub, Settings};
use mcp_smol::{Client, Driver};
use serde_json::{Value, json};

use crate::support::{FIXTURE, Scratch, assert_group_gone, fixture, quick, text};

fn start() -> (Client, Driver) {
    mcp_smol::start(fixture("good", &[]), quick()).expect("spawn fixture")
}

/// Real calls: a list, a pipelined pair, a progress call; then a clean close.
async fn exercise(client: Client) {
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "echo"));
    let one = client.call_tool("echo", json!({"text": "one"}));
    let two = client.call_tool("sleep", json!({"ms": 20}));
    let (one, two) = futures_lite::future::zip(one, two).await;
    assert_eq!(text(&one.unwrap()), "one");
    assert_eq!(text(&two.unwrap()), "slept 20 ms");
    let progress = client
        .call_tool("progress", json!({"steps": 3, "ms": 10}))
        .await;
    assert_eq!(text(&progress.unwrap()), "done 3 steps");
    client.close().await;
    assert_group_gone(client.pid());
}

#[test]
fn under_smol() {
    let (client, driver) = start();
    smol::block_on(async {
        smol::spawn(driver).detach();
        exercise(client).await;
    });
}

fn under_tokio(mut builder: tokio::runtime::Builder) {
    let runtime = builder.enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, driver) = start();
        tokio::spawn(driver);
        exercise(client).await;
    });
}

#[test]
fn under_tokio_multi_thread() {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2);
    under_tokio(builder);
}

#[test]
fn under_tokio_current_thread() {
    under_tokio(tokio::runtime::Builder::new_current_thread());
}

#[test]
fn under_plain_block_on() {
    let (client, driver) = start();
    // No executor at all: the driver and the calls are polled side by side on this thread.
    futures_lite::future::block_on(futures_lite::future::zip(driver, exercise(client)));
}

/// The hub under tokio's multi-thread runtime: calls by name on tasks of their own, the
/// embedder's name sent to the server, and an aborted task's call cancelled on the server.
#[test]
fn the_hub_under_tokio_multi_thread() {
    let dir = Scratch::new("hub-tokio");
    let log = dir.0.join("received");
    let config = format!(
        "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"good\", \"--log-received\", {log:?}]\n"
    );
    let path = dir.write("agent.toml", &config);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let runtime = builder.worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let settings = Settings::builder()
            .client("tokio-agent", "1.0.0")
            .term_period(std::time::Duration::from_millis(300))
            .build();
        let hub = Hub::new(Config::from_files(&[&path]).unwrap(), settings);
        let calls: Vec<_> = (0..4)
            .map(|i| {
                let hub = hub.clone();
                let arguments = json!({"text": format!("task {i}")});
                tokio::spawn(async move { hub.call("fx__echo", arguments).await })
            })
            .collect();
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(echoed(call.await.unwrap().unwrap()), format!("task {i}"));
        }
        // Aborted once the server reports it is working on it.
        let (working, first_report) = smol::channel::bounded(1);
        let slow = {
            let hub = hub.clone();
            tokio::spawn(async move {
                (hub.call("fx__progress", json!({"steps": 1000, "ms": 20})))
                    .on_progress(move |_| _ = working.try_send(()))
                    .await
            })
        };
        first_report.recv().await.unwrap();
        slow.abort();
        assert!(slow.await.unwrap_err().is_cancelled());
        let after = hub.call("fx__echo", json!({"text": "after"})).await;
        assert_eq!(echoed(after.unwrap()), "after");
        let pid = hub.status()[0].pid.unwrap();
        hub.shutdown().await;
        assert_group_gone(pid);
    });
    let received: Vec<Value> = (std::fs::read_to_string(&log).unwrap().lines())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let introduced = (received.iter())
        .find(|m| m["method"] == "initialize")
        .unwrap();
    assert_eq!(introduced["params"]["clientInfo"]["name"], "tokio-agent");
    let progress = received.iter().find(|m| m["params"]["name"] == "progress");
    let cancelled = received
        .iter()
        .find(|m| m["method"] == "notifications/cancelled");
    assert_eq!(
        cancelled.unwrap()["params"]["requestId"],
        progress.unwrap()["id"]
    );
}

fn echoed(result: Value) -> String {
    text(&mcp_client_cli::CallToolResult::from_value(result).unwrap())
}
