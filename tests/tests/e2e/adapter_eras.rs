//! mcp-smol choosing each server's era through `connect` over stdio: the fixture's stateless,
//! dual and misbehaving modes, and the three modern peers, with input requests answered
//! through `server_requests` and `respond` like any server request.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_smol::proto::{
    CacheHint, CacheScope, ClientCapabilities, CloseReason, Content, GetPromptResult,
    LATEST_PROTOCOL_VERSION, LATEST_STATELESS_VERSION, ListenFilter, ReadResourceResult, Request,
    RequestError, Tool,
};
use mcp_smol::serde_json::{Map, Value, json};
use mcp_smol::{Client, Error, Options, ServerCommand};
use smol::channel::{Receiver, Sender};
use smol::future::FutureExt;

use crate::support::{bounded, close_and_check, echo_args, fixture, quick, text};

/// [`quick`] budgets, declaring elicitation.
fn eliciting() -> Options {
    let mut options = quick();
    options.core.capabilities = ClientCapabilities {
        elicitation: true,
        ..ClientCapabilities::default()
    };
    options
}

/// Answers every server request with `answer` from now on, counting them, each checked to
/// name the request of ours it was asked for (all of them come from `input_required` here).
async fn answer_all(client: &Client, answer: Value) -> Arc<AtomicUsize> {
    let asked = client.server_requests().await;
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    let client = client.clone();
    smol::spawn(async move {
        while let Ok(request) = asked.recv().await {
            assert_eq!(request.method, "elicitation/create");
            assert!(request.request.is_some(), "{request:?}");
            counted.fetch_add(1, Ordering::SeqCst);
            client.respond(request.id, Ok(answer.clone())).await;
        }
    })
    .detach();
    count
}

/// A stderr sink whose writes arrive on a channel, so a test can wait for a line.
struct StderrChannel(Sender<Vec<u8>>);

impl std::io::Write for StderrChannel {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.try_send(bytes.to_vec());
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn stderr_channel(options: &mut Options) -> Receiver<Vec<u8>> {
    let (sender, receiver) = smol::channel::unbounded();
    options.stderr_sink = Some(Box::new(StderrChannel(sender)));
    receiver
}

/// Waits until the server has written `wanted` to stderr (the test's watchdog bounds it).
async fn stderr_says(stderr: &Receiver<Vec<u8>>, wanted: &str) {
    let mut seen = String::new();
    while !seen.contains(wanted) {
        let Ok(bytes) = stderr.recv().await else {
            panic!("stderr ended without {wanted:?}: {seen}");
        };
        seen.push_str(&String::from_utf8_lossy(&bytes));
    }
}

async fn era_of(client: &Client) -> String {
    client.wait_ready().await.unwrap().protocol_version
}

// ----- the fixture -----

#[test]
fn the_stateless_fixture_calls_lists_with_cache_hints_and_asks_through_respond() {
    bounded(async {
        let command = fixture("good", &["--era", "stateless"]);
        let client = mcp_smol::connect(&command, eliciting()).await.unwrap();
        assert_eq!(era_of(&client).await, LATEST_STATELESS_VERSION);
        let echoed = client.call_tool("echo", echo_args("hi")).await.unwrap();
        assert_eq!(text(&echoed), "hi");
        let tools = client.list_all::<Tool>().await.unwrap();
        assert!(tools.items.iter().any(|tool| tool.name == "ask"));
        let hint = CacheHint {
            ttl: Duration::from_secs(60),
            scope: CacheScope::Public,
        };
        assert_eq!(tools.cache, Some(hint));

        // The form's answer reaches the server, which also checks the `requestState` echo.
        let asked = answer_all(
            &client,
            json!({"action": "accept", "content": {"name": "Ada"}}),
        );
        let asked = asked.await;
        let greeted = client.call_tool("ask", json!({})).await.unwrap();
        assert!(!greeted.is_error, "{greeted:?}");
        assert_eq!(text(&greeted), r#"accept {"name":"Ada"}"#);
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        close_and_check(&client).await;
    });
}

#[test]
fn an_input_request_nobody_answers_is_refused_and_the_server_asks_again() {
    bounded(async {
        let command = fixture("good", &["--era", "stateless"]);
        let client = mcp_smol::connect(&command, eliciting()).await.unwrap();
        // No `server_requests` receiver: each form is refused at once, and the fixture asks
        // again, as the revision recommends, until the round bound.
        let error = client.call_tool("ask", json!({})).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::Request(RequestError::TooManyInputRounds { rounds: 8 })
            ),
            "{error:?}"
        );
        close_and_check(&client).await;
    });
}

#[test]
fn a_request_state_of_a_mebibyte_goes_back_intact() {
    bounded(async {
        let client = mcp_smol::connect(&fixture("huge-state", &[]), eliciting())
            .await
            .unwrap();
        let asked = answer_all(
            &client,
            json!({"action": "accept", "content": {"name": "Big"}}),
        );
        asked.await;
        let greeted = client.call_tool("ask", json!({})).await.unwrap();
        assert_eq!(text(&greeted), r#"accept {"name":"Big"}"#);
        close_and_check(&client).await;
    });
}

#[test]
fn an_input_loop_ends_with_the_round_bound() {
    bounded(async {
        let client = mcp_smol::connect(&fixture("input-loop", &[]), eliciting())
            .await
            .unwrap();
        let asked = answer_all(
            &client,
            json!({"action": "accept", "content": {"name": "x"}}),
        );
        let asked = asked.await;
        let error = client.call_tool("ask", json!({})).await.unwrap_err();
        let rounds = mcp_smol::proto::Config::default().max_input_rounds;
        assert_eq!(
            error,
            Error::Request(RequestError::TooManyInputRounds { rounds })
        );
        assert!(error.to_string().contains("after 8 rounds"), "{error}");
        assert_eq!(asked.load(Ordering::SeqCst), 8, "every round was answered");
        // The connection is fine.
        let echoed = client.call_tool("echo", echo_args("on")).await.unwrap();
        assert_eq!(text(&echoed), "on");
        close_and_check(&client).await;
    });
}

#[test]
fn a_dual_era_server_is_spoken_to_statelessly() {
    bounded(async {
        let command = fixture("good", &["--era", "dual"]);
        let client = mcp_smol::connect(&command, quick()).await.unwrap();
        assert_eq!(era_of(&client).await, LATEST_STATELESS_VERSION);
        let echoed = client.call_tool("echo", echo_args("dual")).await.unwrap();
        assert_eq!(text(&echoed), "dual");
        close_and_check(&client).await;
    });
}

#[test]
fn a_handshake_server_refusing_the_probe_gets_the_handshake() {
    bounded(async {
        let client = mcp_smol::connect(&fixture("good", &[]), quick())
            .await
            .unwrap();
        assert_eq!(era_of(&client).await, LATEST_PROTOCOL_VERSION);
        let echoed = client.call_tool("echo", echo_args("old")).await.unwrap();
        assert_eq!(text(&echoed), "old");
        close_and_check(&client).await;
    });
}

#[test]
fn a_server_that_exits_on_the_probe_is_started_again_in_the_handshake_era() {
    bounded(async {
        let mut options = quick();
        let stderr = stderr_channel(&mut options);
        let command = fixture("exit-on-discover", &[]);
        let client = mcp_smol::connect(&command, options).await.unwrap();
        assert_eq!(era_of(&client).await, LATEST_PROTOCOL_VERSION);
        let echoed = client.call_tool("echo", echo_args("again")).await.unwrap();
        assert_eq!(text(&echoed), "again");
        // The first process's last words reached the same sink.
        stderr_says(&stderr, "fatal: unknown method server/discover").await;
        close_and_check(&client).await;

        // `start` leaves that to its caller.
        let (client, driver) = mcp_smol::start(&command, quick()).unwrap();
        smol::spawn(driver).detach();
        let error = client.wait_ready().await.unwrap_err();
        assert!(
            matches!(&error, Error::Disconnected(d) if d.reason == CloseReason::EndedOnProbe),
            "{error:?}"
        );
        close_and_check(&client).await;
    });
}

#[test]
fn a_server_silent_on_the_probe_gets_the_handshake_after_the_probe_timeout() {
    bounded(async {
        let mut options = quick();
        options.core.handshake_timeout = Duration::from_millis(300);
        let command = fixture("silent-on-discover", &[]);
        let client = mcp_smol::connect(&command, options).await.unwrap();
        assert_eq!(era_of(&client).await, LATEST_PROTOCOL_VERSION);
        let echoed = client.call_tool("echo", echo_args("late")).await.unwrap();
        assert_eq!(text(&echoed), "late");
        close_and_check(&client).await;
    });
}

#[test]
fn a_server_that_claims_the_stateless_era_and_is_not_fails_clearly() {
    bounded(async {
        let command = fixture("claims-stateless", &[]);
        let client = mcp_smol::connect(&command, quick()).await.unwrap();
        let error = client.call_tool("echo", echo_args("x")).await.unwrap_err();
        assert!(
            matches!(&error, Error::Request(RequestError::Remote(e)) if e.code == -32600),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("Server not initialized"),
            "{error}"
        );
        close_and_check(&client).await;
    });
}

#[test]
fn a_subscription_never_acknowledged_fails_saying_so() {
    bounded(async {
        let client = mcp_smol::connect(&fixture("listen-no-ack", &[]), quick())
            .await
            .unwrap();
        let filter = ListenFilter {
            tools_list_changed: true,
            ..ListenFilter::default()
        };
        let listen = Request::listen(&filter).timeout(Duration::from_millis(300));
        let error = client.request(listen).await.unwrap_err();
        assert!(
            matches!(error, Error::Request(RequestError::NotAcknowledged { .. })),
            "{error:?}"
        );
        let echoed = client.call_tool("echo", echo_args("still")).await.unwrap();
        assert_eq!(text(&echoed), "still");
        close_and_check(&client).await;
    });
}

// ----- the modern peers -----

/// The next notification of `method`, skipping others (progress, the tool's own logs).
async fn next_of(
    notifications: &Receiver<mcp_smol::Notification>,
    method: &str,
) -> mcp_smol::Notification {
    loop {
        let notification = notifications.recv().await.unwrap();
        if notification.method == method {
            return notification;
        }
    }
}

/// One peer through `connect`: discovery, a call, an elicitation answered through `respond`,
/// a resource, a prompt, a list change heard through `subscriptions/listen`, a cancelled call.
fn modern_peer_through_connect(peer: &mcp_tests::Peer, name: &str) {
    let lossy = |text: &std::ffi::OsStr| text.to_string_lossy().into_owned();
    let command = ServerCommand::new(lossy(peer.program.as_os_str()))
        .args(peer.args.iter().map(|arg| lossy(arg)));
    let mut options = eliciting();
    // Peers start cold (Node, Python imports) on a busy machine.
    options.core.handshake_timeout = Duration::from_secs(30);
    options.core.request_timeout = Duration::from_secs(30);
    let stderr = stderr_channel(&mut options);
    bounded(async {
        let client = mcp_smol::connect(&command, options).await.unwrap();
        let info = client.wait_ready().await.unwrap();
        assert_eq!(info.protocol_version, LATEST_STATELESS_VERSION);
        assert_eq!(info.server.name, name);

        let sum = client
            .call_tool("add", json!({"a": 2, "b": 3}))
            .await
            .unwrap();
        assert_eq!(text(&sum), "5");

        let asked = answer_all(
            &client,
            json!({"action": "accept", "content": {"ok": true}}),
        );
        let asked = asked.await;
        let confirmed = client
            .call_tool("confirm", json!({"action": "deploy"}))
            .await
            .unwrap();
        assert!(
            text(&confirmed).starts_with("confirmed deploy"),
            "{confirmed:?}"
        );
        assert_eq!(asked.load(Ordering::SeqCst), 1);

        let read: ReadResourceResult = client
            .request(Request::read_resource("peer://greeting"))
            .await
            .unwrap();
        assert_eq!(read.contents[0].text, Some(format!("hello from {name}")));
        let hint = CacheHint {
            ttl: Duration::from_secs(60),
            scope: CacheScope::Public,
        };
        assert_eq!(read.cache, Some(hint));

        let mut arguments = Map::new();
        arguments.insert("name".to_owned(), json!("Ada"));
        let prompt: GetPromptResult = client
            .request(Request::get_prompt("greet", arguments))
            .await
            .unwrap();
        let said = Content::Text {
            text: "Say hello to Ada.".to_owned(),
        };
        assert_eq!(prompt.messages[0].content, said);

        // A listen lives until cancelled: its task is dropped at the end.
        let notifications = client.notifications().await;
        let filter = ListenFilter {
            tools_list_changed: true,
            ..ListenFilter::default()
        };
        let listening = client.clone();
        let listen = smol::spawn(async move { listening.request(Request::listen(&filter)).await });
        let ack = next_of(&notifications, "notifications/subscriptions/acknowledged").await;
        let subscription = ack
            .subscription_id()
            .expect("the ack names the subscription");
        client.call_tool("add_tool", json!({})).await.unwrap();
        let changed = next_of(&notifications, "notifications/tools/list_changed").await;
        assert_eq!(changed.subscription_id(), Some(subscription));
        let tools = client.list_tools().await.unwrap();
        assert!(tools.iter().any(|tool| tool.name == "extra"));
        drop(listen);

        // A call whose caller stops waiting once it has started: the peer hears the
        // cancellation and says so on stderr.
        let call = async { Some(client.call_tool("sleep", json!({"ms": 600_000})).await) };
        let started = async {
            next_of(&notifications, "notifications/progress").await;
            None
        };
        assert!(call.or(started).await.is_none());
        stderr_says(&stderr, "sleep cancelled").await;
        let sum = client
            .call_tool("add", json!({"a": 1, "b": 1}))
            .await
            .unwrap();
        assert_eq!(text(&sum), "2");
        close_and_check(&client).await;
    });
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_typescript_sdk_peer_through_connect() {
    modern_peer_through_connect(&mcp_tests::ts_peer(), "ts-peer");
}

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn the_python_sdk_peer_through_connect() {
    modern_peer_through_connect(&mcp_tests::mcpserver_peer(), "mcpserver-peer");
}

#[test]
fn the_rmcp_peer_through_connect() {
    modern_peer_through_connect(&mcp_tests::rmcp_peer(), "rmcp-peer");
}
