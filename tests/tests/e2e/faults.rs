//! The misbehaving servers a client must survive: no panic, no hang past the timeout, nothing left
//! behind, every pending call resolved with an error naming the cause, neighbours unaffected.

use mcp_smol::proto::{CloseReason, Content, PageError, RequestError};
use mcp_smol::{Client, Error};
use serde_json::{Value, json};

use crate::support::{bounded, close_and_check, echo_args, fixture, quick, start, text};

/// A healthy server used beside the faulty one, to show it is unaffected.
async fn healthy_neighbour() -> Client {
    let client = start(&fixture("good", &[]), quick());
    client.wait_ready().await.expect("neighbour handshake");
    client
}

async fn assert_neighbour_works(neighbour: &Client) {
    let result = neighbour.call_tool("echo", echo_args("still here")).await;
    assert_eq!(text(&result.expect("neighbour call")), "still here");
    close_and_check(neighbour).await;
}

fn disconnect(error: Error) -> mcp_smol::Disconnect {
    match error {
        Error::Disconnected(disconnect) => *disconnect,
        other => panic!("expected a disconnect, got {other:?}"),
    }
}

#[test]
fn never_answers_initialize() {
    bounded(async {
        let neighbour = healthy_neighbour().await;
        let client = start(&fixture("silent", &[]), quick());
        let error = client.wait_ready().await.unwrap_err();
        assert!(error.is_timeout(), "{error}");
        let reason = disconnect(error).reason;
        assert!(
            matches!(reason, CloseReason::HandshakeTimedOut { .. }),
            "{reason:?}"
        );
        close_and_check(&client).await;
        assert_neighbour_works(&neighbour).await;
    });
}

#[test]
fn unsupported_versions_are_named() {
    bounded(async {
        for offered in ["1999-01-01", "2026-07-28"] {
            let client = start(&fixture("bad-version", &["--version", offered]), quick());
            let error = client.wait_ready().await.unwrap_err();
            assert!(error.to_string().contains(offered), "{error}");
            let reason = disconnect(error).reason;
            assert_eq!(
                reason,
                CloseReason::UnsupportedVersion {
                    requested: mcp_smol::proto::LATEST_PROTOCOL_VERSION.to_owned(),
                    offered: offered.to_owned()
                }
            );
            close_and_check(&client).await;
        }
    });
}

#[test]
fn exit_during_handshake_reports_status_and_stderr() {
    bounded(async {
        let neighbour = healthy_neighbour().await;
        let client = start(&fixture("exit-in-handshake", &[]), quick());
        let error = client.wait_ready().await.unwrap_err();
        let message = error.to_string();
        let disconnect = disconnect(error);
        assert_eq!(disconnect.reason, CloseReason::Eof);
        assert_eq!(disconnect.exit_status.and_then(|s| s.code()), Some(1));
        assert!(message.contains("fatal: config missing"), "{message}");
        close_and_check(&client).await;
        assert_neighbour_works(&neighbour).await;
    });
}

#[test]
fn calls_queued_when_the_server_dies_are_all_answered() {
    // Calls sent while the driver was busy sit in its queue when the connection ends; each
    // must still get the disconnect, never wait forever.
    let command = mcp_smol::ServerCommand::new("sh").args(["-c", "echo gone >&2; exit 7"]);
    let (client, driver) = mcp_smol::start(&command, quick()).unwrap();
    let pid = client.pid();
    let exited = || mcp_tests::process_stat(pid).is_none_or(|stat| stat.state == 'Z');
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !exited() {
        assert!(std::time::Instant::now() < deadline, "sh did not exit");
        std::thread::yield_now();
    }
    let mut calls: Vec<_> = (0..2000)
        .map(|i| Box::pin(client.call_tool("echo", echo_args(&i.to_string()))))
        .collect();
    bounded(async {
        // One poll sends each call into the driver's queue. The first call, alone, drives the
        // connection itself and may end it at once (then the others are refused as they
        // come); else, once a second call waits, only the driver drives, and it has not run
        // yet; when it does, the server's EOF is ready from its first turn.
        let mut answers = Vec::new();
        let mut waiting = Vec::new();
        for mut call in calls.drain(..) {
            match smol::future::poll_once(&mut call).await {
                Some(answer) => answers.push(answer),
                None => waiting.push(call),
            }
        }
        smol::spawn(driver).detach();
        for call in waiting {
            answers.push(call.await);
        }
        for answer in answers {
            let disconnect = disconnect(answer.unwrap_err());
            assert_eq!(disconnect.exit_status.and_then(|s| s.code()), Some(7));
        }
        close_and_check(&client).await;
    });
}

#[test]
fn noise_on_stdout_is_named_when_the_server_fails() {
    bounded(async {
        let script = "echo 'Listening on stdio...'; echo 'bad config' >&2; exit 2";
        let command = mcp_smol::ServerCommand::new("sh").args(["-c", script]);
        let client = start(&command, quick());
        let error = client.wait_ready().await.unwrap_err();
        let message = error.to_string();
        let disconnect = disconnect(error);
        assert_eq!(disconnect.skipped_lines, 1);
        assert!(message.contains("Listening on stdio..."), "{message}");
        assert!(message.contains("bad config"), "{message}");
        close_and_check(&client).await;
    });
}

#[test]
fn exit_mid_call_fails_pending_and_later_calls() {
    bounded(async {
        let neighbour = healthy_neighbour().await;
        let client = start(&fixture("exit-mid-call", &[]), quick());
        client.wait_ready().await.unwrap();
        let first = client.call_tool("echo", echo_args("a"));
        let second = client.call_tool("sleep", json!({"ms": 5000}));
        let (first, second) = smol::future::zip(first, second).await;
        for error in [first.unwrap_err(), second.unwrap_err()] {
            let message = error.to_string();
            let disconnect = disconnect(error);
            assert_eq!(disconnect.exit_status.and_then(|s| s.code()), Some(3));
            assert!(message.contains("crashing now"), "{message}");
        }
        let later = client.call_tool("echo", echo_args("b")).await.unwrap_err();
        assert_eq!(
            disconnect(later).exit_status.and_then(|s| s.code()),
            Some(3)
        );
        close_and_check(&client).await;
        assert_neighbour_works(&neighbour).await;
    });
}

#[test]
fn closed_stdout_with_a_live_process() {
    bounded(async {
        let neighbour = healthy_neighbour().await;
        let client = start(&fixture("close-stdout", &[]), quick());
        client.wait_ready().await.unwrap();
        let error = client.call_tool("echo", echo_args("a")).await.unwrap_err();
        assert!(error.to_string().contains("closed its stdout"), "{error}");
        // The process still runs: close must terminate it.
        close_and_check(&client).await;
        assert_neighbour_works(&neighbour).await;
    });
}

#[test]
fn server_ignoring_sigterm_is_killed() {
    bounded(async {
        let neighbour = healthy_neighbour().await;
        let client = start(&fixture("ignore-sigterm", &[]), quick());
        client.wait_ready().await.unwrap();
        let result = client.call_tool("echo", echo_args("x")).await.unwrap();
        assert_eq!(text(&result), "x");
        // Check the fixture really ignores SIGTERM, or this test would prove nothing.
        let status = std::process::Command::new("kill")
            .args(["-TERM", &client.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let result = client.call_tool("echo", echo_args("y")).await.unwrap();
        assert_eq!(text(&result), "y");
        close_and_check(&client).await;
        assert_neighbour_works(&neighbour).await;
    });
}

#[test]
fn grandchildren_do_not_survive() {
    bounded(async {
        let client = start(&fixture("grandchildren", &[]), quick());
        client.wait_ready().await.unwrap();
        assert_eq!(
            text(&client.call_tool("echo", echo_args("x")).await.unwrap()),
            "x"
        );
        let members = mcp_tests::group_members(client.pid());
        assert!(
            members.len() >= 4,
            "fixture, two sleeps, sh and its sleep: {members:?}"
        );
        close_and_check(&client).await;
    });
}

#[test]
fn shell_wrapper_like_npx_leaves_nothing() {
    bounded(async {
        // `sh -c` without exec: the fixture is a grandchild of ours, as under npx.
        let script = format!("{} good; echo done", crate::support::FIXTURE);
        let command = mcp_smol::ServerCommand::new("sh").args(["-c", &script]);
        let client = start(&command, quick());
        assert_eq!(
            text(&client.call_tool("echo", echo_args("x")).await.unwrap()),
            "x"
        );
        close_and_check(&client).await;
    });
}

/// Modes whose noise must be skipped while calls keep working.
#[test]
fn noisy_servers_keep_working() {
    bounded(async {
        let neighbour = healthy_neighbour().await;
        let modes: &[(&str, &[&str])] = &[
            ("noisy-stdout", &[]),
            ("invalid-utf8", &[]),
            ("unknown-id", &[]),
            ("double-answer", &[]),
            ("batch", &[]),
            ("flood-notifications", &[]),
            ("flood-stderr", &[]),
            ("long-line", &["--bytes", "2097152"]),
        ];
        for (mode, extra) in modes {
            let mut options = quick();
            options.core.max_line_len = 1024 * 1024;
            let client = start(&fixture(mode, extra), options);
            for round in 0..3 {
                let said = format!("{mode} {round}");
                let result = client.call_tool("echo", echo_args(&said)).await;
                let result = result.unwrap_or_else(|e| panic!("{mode}: {e}"));
                assert_eq!(text(&result), said, "{mode}");
            }
            close_and_check(&client).await;
        }
        assert_neighbour_works(&neighbour).await;
    });
}

#[test]
fn flooded_stderr_is_drained_and_kept() {
    bounded(async {
        let client = start(&fixture("flood-stderr", &[]), quick());
        for _ in 0..20 {
            client.call_tool("echo", echo_args("x")).await.unwrap();
        }
        // On a loaded machine the flood may not have begun yet: calls go on until some of it
        // is in (a server blocked on a full stderr pipe would stop answering them).
        while client.stderr_tail().is_empty() {
            client.call_tool("echo", echo_args("x")).await.unwrap();
        }
        assert!(client.stderr_tail().len() <= 21);
        close_and_check(&client).await;
    });
}

#[test]
fn partial_line_then_stall_times_out() {
    bounded(async {
        let mut options = quick();
        options.core.request_timeout = std::time::Duration::from_millis(500);
        let client = start(&fixture("partial-line-stall", &[]), options);
        client.wait_ready().await.unwrap();
        let error = client.call_tool("echo", echo_args("x")).await.unwrap_err();
        assert!(
            matches!(error, Error::Request(RequestError::TimedOut { .. })),
            "{error:?}"
        );
        close_and_check(&client).await;
    });
}

/// An answer over the limit that stalls before its newline fails its call as soon as it is
/// over: the long request timeout is never what ends it.
#[test]
fn an_oversize_answer_that_stalls_fails_its_call_at_once() {
    bounded(async {
        let mut options = quick();
        options.core.max_line_len = 1024 * 1024;
        options.core.request_timeout = std::time::Duration::from_secs(600);
        let client = start(&fixture("oversize-stall", &["--bytes", "2097152"]), options);
        let error = client.call_tool("echo", echo_args("x")).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::Request(RequestError::ResponseTooLarge { size, limit: 1_048_576 })
                    if size > 1_048_576
            ),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("over the 1 MiB limit"),
            "{error}"
        );
        close_and_check(&client).await;
    });
}

/// A listing that cannot be read (one tool's name is not UTF-8) fails at once, naming why.
#[test]
fn an_unreadable_listing_fails_at_once() {
    bounded(async {
        let mut options = quick();
        options.core.request_timeout = std::time::Duration::from_secs(600);
        let client = start(&fixture("bad-tool-name", &[]), options);
        let error = client.list_tools().await.unwrap_err();
        assert!(
            matches!(&error, Error::Request(RequestError::InvalidResponse(detail))
                if detail.contains("UTF-8")),
            "{error:?}"
        );
        // The server is still there for the next call.
        let result = client.call_tool("echo", echo_args("after")).await.unwrap();
        assert_eq!(text(&result), "after");
        close_and_check(&client).await;
    });
}

#[test]
fn out_of_order_answers_reach_their_callers() {
    bounded(async {
        let client = start(&fixture("out-of-order", &[]), quick());
        let calls = ["a", "b", "c"].map(|said| {
            let client = client.clone();
            smol::spawn(async move { client.call_tool("echo", echo_args(said)).await })
        });
        for (task, said) in calls.into_iter().zip(["a", "b", "c"]) {
            assert_eq!(text(&task.await.unwrap()), said);
        }
        close_and_check(&client).await;
    });
}

/// The answers a fixture recorded, from its `report` tool.
async fn report(client: &Client) -> Vec<Value> {
    let result = client.call_tool("report", json!({})).await.unwrap();
    serde_json::from_str(&text(&result)).expect("report is a JSON array")
}

/// Waits until the fixture has recorded `count` answers (they cross the pipes asynchronously).
async fn report_of(client: &Client, count: usize) -> Vec<Value> {
    for _ in 0..100 {
        let answers = report(client).await;
        if answers.len() >= count {
            return answers;
        }
        smol::Timer::after(std::time::Duration::from_millis(20)).await;
    }
    panic!("the fixture never recorded {count} answers");
}

#[test]
fn server_requests_are_refused_with_their_ids() {
    bounded(async {
        let client = start(&fixture("server-requests", &[]), quick());
        let answers = report_of(&client, 4).await;
        let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
        assert_eq!(ids, [&json!(1), &json!("r-2"), &json!(3), &json!("r-4")]);
        for answer in &answers {
            assert_eq!(answer["error"]["code"], -32601, "{answer}");
        }
        assert_eq!(
            text(&client.call_tool("echo", echo_args("ok")).await.unwrap()),
            "ok"
        );
        close_and_check(&client).await;
    });
}

#[test]
fn pings_from_the_server_are_answered() {
    bounded(async {
        let client = start(&fixture("ping-client", &[]), quick());
        let answers = report_of(&client, 2).await;
        assert_eq!(
            answers[0],
            json!({"jsonrpc": "2.0", "id": "p1", "result": {}})
        );
        assert_eq!(answers[1], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
        close_and_check(&client).await;
    });
}

#[test]
fn odd_request_ids() {
    bounded(async {
        let client = start(&fixture("odd-ids", &[]), quick());
        let answers = report_of(&client, 3).await;
        // The null-id request is reported locally and never answered.
        let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
        assert_eq!(ids, [&json!("abc"), &json!(1.5), &json!(-7)]);
        assert_eq!(answers[0]["result"], json!({}));
        assert_eq!(answers[2]["error"]["code"], -32601);
        close_and_check(&client).await;
    });
}

#[test]
fn rich_and_unknown_content_decodes() {
    bounded(async {
        let client = start(&fixture("good", &[]), quick());
        let result = client.call_tool("rich", json!({})).await.unwrap();
        let kinds: Vec<&str> = (result.content.iter())
            .map(|item| match item {
                Content::Text { .. } => "text",
                Content::Image { .. } => "image",
                Content::Audio { .. } => "audio",
                Content::ResourceLink { .. } => "resource_link",
                Content::Resource { .. } => "resource",
                Content::Unknown(_) => "unknown",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "text",
                "image",
                "audio",
                "resource_link",
                "resource",
                "unknown"
            ]
        );
        assert_eq!(result.structured_content, Some(json!({"ok": true})));
        close_and_check(&client).await;
    });
}

#[test]
fn repeated_cursor_stops_the_listing() {
    bounded(async {
        let client = start(&fixture("repeat-cursor", &[]), quick());
        let error = client.list_tools().await.unwrap_err();
        assert_eq!(
            error,
            Error::Paging(PageError::RepeatedCursor("again".into()))
        );
        close_and_check(&client).await;
    });
}
