//! One connection, four executors: the driver is a plain future and needs none in particular.

use mcp_smol::{Client, Driver};
use serde_json::json;

use crate::support::{assert_group_gone, fixture, quick, text};

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
