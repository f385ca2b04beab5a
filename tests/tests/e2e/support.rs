//! Fixture commands and options with short timeouts, so every case ends quickly.

use std::time::{Duration, Instant};

use mcp_smol::{Client, Options, ServerCommand};

pub(crate) const FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-fixture");

/// The fixture server in `mode`, with extra arguments.
pub(crate) fn fixture(mode: &str, extra: &[&str]) -> ServerCommand {
    ServerCommand::new(FIXTURE)
        .arg(mode)
        .args(extra.iter().copied())
}

/// Short budgets: a misbehaving server costs a test about a second, not a minute.
pub(crate) fn quick() -> Options {
    Options {
        handshake_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(3),
        grace_period: Duration::from_millis(300),
        term_period: Duration::from_millis(300),
        ..Options::default()
    }
}

/// Starts a server with its driver on smol's executor, without waiting for the handshake.
pub(crate) fn start(command: &ServerCommand, options: Options) -> Client {
    let (client, driver) = mcp_smol::start(command, options).expect("spawn fixture");
    smol::spawn(driver).detach();
    client
}

/// Closes the client and checks that nothing of the server's process group is left.
pub(crate) async fn close_and_check(client: &Client) {
    client.close().await;
    assert_group_gone(client.pid());
}

/// After `close` returns, the group must already be empty; allow the kernel a moment to
/// finish tearing down processes that were SIGKILLed (they may linger as zombies of init).
pub(crate) fn assert_group_gone(pgid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while mcp_tests::group_alive(pgid) {
        assert!(
            Instant::now() < deadline,
            "process group {pgid} still has members after close"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The text of a one-text-item result.
pub(crate) fn text(result: &mcp_smol::proto::CallToolResult) -> String {
    match result.content.as_slice() {
        [mcp_smol::proto::Content::Text { text }] => text.clone(),
        other => panic!("expected one text item, got {other:?}"),
    }
}

pub(crate) fn echo_args(text: &str) -> serde_json::Value {
    serde_json::json!({ "text": text })
}
