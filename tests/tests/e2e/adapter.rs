//! mcp-smol doing its ordinary work against the well-behaved fixture.

use std::time::{Duration, Instant};

use mcp_smol::proto::{Request, RequestError, RpcError};
use mcp_smol::{Error, ServerCommand};
use serde_json::json;

use crate::support::{
    assert_group_gone, bounded, close_and_check, echo_args, fixture, quick, start, text,
};

#[test]
fn handshake_list_and_call() {
    bounded(async {
        let client = start(&fixture("good", &["--page-size", "2"]), quick());
        let info = client.wait_ready().await.unwrap();
        assert_eq!(info.server.name, "mcp-fixture");
        assert_eq!(
            info.protocol_version,
            mcp_smol::proto::LATEST_PROTOCOL_VERSION
        );
        assert_eq!(info.instructions.as_deref(), Some("fixture server"));
        let tools = client.list_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
        for expected in ["echo", "blob", "sleep", "progress", "fail", "add", "rich"] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
        let added = client
            .call_tool("add", json!({"a": 2, "b": 3.5}))
            .await
            .unwrap();
        assert_eq!(text(&added), "5.5");
        assert_eq!(added.structured_content, Some(json!({"sum": 5.5})));
        close_and_check(&client).await;
    });
}

#[test]
fn tool_errors_and_protocol_errors_differ() {
    bounded(async {
        let client = start(&fixture("good", &[]), quick());
        let failed = client
            .call_tool("fail", json!({"message": "nope"}))
            .await
            .unwrap();
        assert!(failed.is_error);
        assert_eq!(text(&failed), "nope");
        let error = client
            .call_tool("no-such-tool", json!({}))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, Error::Request(RequestError::Remote(rpc)) if rpc.code == RpcError::INVALID_PARAMS),
            "{error:?}"
        );
        assert!(error.to_string().contains("no-such-tool"), "{error}");
        close_and_check(&client).await;
    });
}

#[test]
fn pipelined_calls_are_answered_in_any_order() {
    bounded(async {
        let client = start(&fixture("good", &[]), quick());
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let client = client.clone();
                smol::spawn(async move {
                    // Later calls sleep less, so answers come back out of order.
                    let ms = 64 - i;
                    let result = client.call_tool("sleep", json!({"ms": ms})).await.unwrap();
                    (ms, text(&result))
                })
            })
            .collect();
        for task in tasks {
            let (ms, said) = task.await;
            assert_eq!(said, format!("slept {ms} ms"));
        }
        close_and_check(&client).await;
    });
}

/// The `notifications/cancelled` lines the fixture logged having received.
fn cancellations_received(log: &std::path::Path) -> Vec<serde_json::Value> {
    let received = std::fs::read_to_string(log).unwrap();
    (received.lines())
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|message: &serde_json::Value| message["method"] == "notifications/cancelled")
        .collect()
}

#[test]
fn a_call_whose_caller_stops_waiting_is_cancelled_on_the_server() {
    use smol::future::FutureExt;
    let log = std::env::temp_dir().join(format!("mcp-e2e-abandon-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    bounded(async {
        let log_arg = log.to_str().unwrap();
        let client = start(&fixture("good", &["--log-received", log_arg]), quick());
        client.wait_ready().await.unwrap();
        // The caller's own timeout wins the race, and the call's future is dropped.
        let call = async { Some(client.call_tool("sleep", json!({"ms": 10_000})).await) };
        let gave_up = async {
            smol::Timer::after(Duration::from_millis(200)).await;
            None
        };
        assert!(call.or(gave_up).await.is_none());
        // The next answer comes after the cancellation was written.
        let after = client.call_tool("echo", echo_args("after")).await.unwrap();
        assert_eq!(text(&after), "after");
        close_and_check(&client).await;
    });
    let cancelled = cancellations_received(&log);
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(
        cancelled[0]["params"]["requestId"], 3,
        "the call after the probe (1) and the handshake (2)"
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn timed_out_call_is_cancelled_on_the_server() {
    let log = std::env::temp_dir().join(format!("mcp-e2e-cancel-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    bounded(async {
        let log_arg = log.to_str().unwrap();
        let client = start(&fixture("good", &["--log-received", log_arg]), quick());
        let error = client
            .request(
                Request::call_tool("sleep", json!({"ms": 10_000}))
                    .timeout(Duration::from_millis(200)),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::Request(RequestError::TimedOut { .. })),
            "{error:?}"
        );
        // The connection is still healthy afterwards.
        assert_eq!(
            text(&client.call_tool("echo", echo_args("after")).await.unwrap()),
            "after"
        );
        close_and_check(&client).await;
    });
    let cancelled = cancellations_received(&log);
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert!(cancelled[0]["params"]["requestId"].is_u64());
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_call_with_no_timeout_outlives_the_request_timeout() {
    bounded(async {
        let mut options = quick();
        options.core.request_timeout = Duration::from_millis(50);
        let client = start(&fixture("good", &[]), options);
        let slow = || Request::call_tool("sleep", json!({"ms": 300}));
        // The same call under the connection's own deadline, for contrast.
        let error = client.request(slow()).await.unwrap_err();
        assert!(error.is_timeout(), "{error:?}");
        let result = client.request(slow()).no_timeout().await.unwrap();
        assert_eq!(text(&result), "slept 300 ms");
        close_and_check(&client).await;
    });
}

#[test]
fn progress_keeps_a_slow_call_alive() {
    bounded(async {
        let client = start(&fixture("good", &[]), quick());
        let notifications = client.notifications().await;
        // 8 steps of 100 ms outlive a 400 ms timeout only because each step restarts it.
        let result = client
            .request(
                Request::call_tool("progress", json!({"steps": 8, "ms": 100}))
                    .timeout(Duration::from_millis(400)),
            )
            .await
            .unwrap();
        assert_eq!(text(&result), "done 8 steps");
        let mut progress = 0;
        while let Ok(notification) = notifications.try_recv() {
            if notification.method == "notifications/progress" {
                progress += 1;
            }
        }
        assert_eq!(progress, 8);
        close_and_check(&client).await;
    });
}

#[test]
fn list_changed_is_surfaced() {
    bounded(async {
        let client = start(&fixture("list-changed", &[]), quick());
        let notifications = client.notifications().await;
        client.call_tool("echo", echo_args("x")).await.unwrap();
        let notification = notifications.recv().await.unwrap();
        assert_eq!(notification.method, "notifications/tools/list_changed");
        let tools = client.list_tools().await.unwrap();
        assert!(tools.iter().any(|tool| tool.name == "extra"));
        close_and_check(&client).await;
    });
}

#[test]
fn a_subscriber_that_never_reads_holds_1024_and_holds_nothing_up() {
    bounded(async {
        let client = start(&fixture("flood-notifications", &[]), quick());
        let unread = client.notifications().await;
        // Each call brings 11,000 notifications; none of them is read.
        for round in 0..2 {
            let answer = client
                .call_tool("echo", echo_args(&round.to_string()))
                .await;
            assert_eq!(text(&answer.unwrap()), round.to_string());
        }
        assert_eq!(unread.len(), 1024);
        close_and_check(&client).await;
    });
}

#[test]
fn dropping_the_last_handle_shuts_the_server_down() {
    let pid = bounded(async {
        let client = start(&fixture("good", &[]), quick());
        client.wait_ready().await.unwrap();
        let pid = client.pid();
        drop(client);
        pid
    });
    assert_group_gone(pid);
}

#[test]
fn spawn_errors_name_the_program() {
    let missing = ServerCommand::new("no-such-mcp-server");
    let error = mcp_smol::start(&missing, quick()).unwrap_err();
    assert!(matches!(&error, Error::NotFound { program, .. } if program == "no-such-mcp-server"));
    assert!(error.to_string().contains("not found on PATH"), "{error}");

    let not_executable = ServerCommand::new("/etc/hostname");
    let error = mcp_smol::start(&not_executable, quick()).unwrap_err();
    assert!(error.to_string().contains("/etc/hostname"), "{error}");
}

#[test]
fn env_and_cwd_reach_the_server() {
    bounded(async {
        let dir = std::env::temp_dir();
        let script = format!(
            "test \"$MCP_E2E_VALUE\" = yes && test \"$(pwd)\" = {} && exec {} good",
            dir.display(),
            crate::support::FIXTURE
        );
        let command = ServerCommand::new("sh")
            .args(["-c", &script])
            .env("MCP_E2E_VALUE", "yes")
            .cwd(&dir);
        let client = start(&command, quick());
        assert_eq!(
            text(&client.call_tool("echo", echo_args("x")).await.unwrap()),
            "x"
        );
        close_and_check(&client).await;
    });
}

/// Not a speed assertion: prints how long a 16 MiB result takes, for the closing note.
#[test]
fn sixteen_mib_result_arrives_whole() {
    bounded(async {
        // With the default limit: the envelope makes the line a little longer than 16 MiB. The
        // default timeouts too: a debug build on a loaded machine can take more than `quick`'s 3 s.
        let client = start(&fixture("good", &[]), mcp_smol::Options::default());
        client.wait_ready().await.unwrap();
        let bytes = 16 * 1024 * 1024;
        let started = Instant::now();
        let result = client
            .call_tool("blob", json!({"bytes": bytes}))
            .await
            .unwrap();
        let elapsed = started.elapsed();
        assert_eq!(text(&result).len(), bytes);
        eprintln!("16 MiB tool result through mcp-smol: {elapsed:?}");
        close_and_check(&client).await;
    });
}

/// A stderr sink the test can read back, slow like a log on a busy disk.
#[derive(Clone, Default)]
struct SharedSink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        std::thread::sleep(Duration::from_millis(10));
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_sink_has_every_stderr_line_once_close_returns() {
    bounded(async {
        let sink = SharedSink::default();
        let options = mcp_smol::Options {
            stderr_sink: Some(Box::new(sink.clone())),
            ..quick()
        };
        let client = start(&fixture("good", &[]), options);
        let said = client.call_tool("stderr", json!({"lines": 200})).await;
        assert!(!said.unwrap().is_error);
        close_and_check(&client).await;
        let logged = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        for i in 0..200 {
            assert!(
                logged.contains(&format!("stderr line {i}\n")),
                "{i}: {logged}"
            );
        }
    });
}

/// What every embedder of the CLI's shape does: the driver spawned on an executor that the
/// calling thread itself runs, several requests awaited at once from one task, then one at a
/// time, then a close; over and over. A caller waiting alone drives the connection itself and
/// hands over to the spawned driver as soon as another waits: every answer must arrive, and
/// none may wait for a wake-up that went elsewhere (the watchdog fails a lost one).
#[test]
fn callers_of_one_task_on_the_driver_s_own_thread_are_all_answered() {
    let executor = smol::Executor::new();
    bounded(executor.run(async {
        for connection in 0..8 {
            let (client, driver) =
                mcp_smol::start(fixture("good", &["--page-size", "2"]), quick()).unwrap();
            executor.spawn(driver).detach();
            for round in 0..25 {
                let tag = format!("{connection}-{round}");
                let (first, (second, tools)) = smol::future::zip(
                    client.call_tool("echo", echo_args(&format!("a{tag}"))),
                    smol::future::zip(
                        client.call_tool("echo", echo_args(&format!("b{tag}"))),
                        client.list_tools(),
                    ),
                )
                .await;
                assert_eq!(text(&first.unwrap()), format!("a{tag}"));
                assert_eq!(text(&second.unwrap()), format!("b{tag}"));
                assert!(tools.unwrap().len() > 5);
                let alone = client.call_tool("echo", echo_args(&tag)).await.unwrap();
                assert_eq!(text(&alone), tag);
            }
            close_and_check(&client).await;
        }
    }));
}

/// Callers on several threads at once, the driver on smol's global executor: whoever polls
/// the connection, each caller gets its own answer.
#[test]
fn callers_on_several_threads_are_all_answered() {
    let client = bounded(async {
        let client = start(&fixture("good", &[]), quick());
        client.wait_ready().await.unwrap();
        client
    });
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let client = &client;
            scope.spawn(move || {
                bounded(async {
                    for call in 0..300 {
                        let tag = format!("{thread}-{call}");
                        let answer = client.call_tool("echo", echo_args(&tag)).await.unwrap();
                        assert_eq!(text(&answer), tag);
                    }
                })
            });
        }
    });
    bounded(close_and_check(&client));
}
