//! The caller-drives hand-off under stress, over stdio and over HTTP: callers on several
//! threads, several tasks on each and two calls at once in each task, one call in three
//! dropped mid-call (after its first polls, while it may hold the controls), and the driver
//! on a thread of its own taking over whenever no caller drives; then the same while the
//! connection is closed under them. Every call that completes must carry its own answer or
//! say that the connection was closed; none may hang (the watchdog fails a lost wake-up).

use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_smol::proto::CloseReason;
use mcp_smol::{Client, Error, HttpServer, connect};
use serde_json::{Value, json};
use smol::future::FutureExt;

use crate::support::{bounded, close_and_check, echo_args, fixture, quick, text};

const THREADS: usize = 4;
const TASKS: usize = 4;
const ROUNDS: usize = 40;

/// What became of one call.
enum Outcome {
    Answered(Result<String, Error>),
    /// Its caller stopped waiting first.
    Dropped,
}

/// Calls `echo` with `tag`; if `patience` is some, gives up after that many turns of the
/// caller's task, dropping the call wherever it is.
async fn attempt(client: &Client, arguments: Value, patience: Option<usize>) -> Outcome {
    let call = async {
        let result = client.call_tool("echo", arguments).await;
        Outcome::Answered(result.map(|result| text(&result)))
    };
    let Some(turns) = patience else {
        return call.await;
    };
    let give_up = async {
        for _ in 0..turns {
            smol::future::yield_now().await;
        }
        Outcome::Dropped
    };
    call.or(give_up).await
}

/// What became of a storm's calls: how many were answered, how many dropped.
#[derive(Default)]
struct Tally {
    answered: usize,
    dropped: usize,
}

impl std::iter::Sum for Tally {
    fn sum<I: Iterator<Item = Tally>>(tallies: I) -> Tally {
        tallies.fold(Tally::default(), |sum, one| Tally {
            answered: sum.answered + one.answered,
            dropped: sum.dropped + one.dropped,
        })
    }
}

/// One task's calls: two at a time, each of them sometimes dropped.
async fn caller(client: Client, echo: fn(&str) -> Value, thread: usize, task: usize) -> Tally {
    let mut tally = Tally::default();
    for round in 0..ROUNDS {
        let tag = |which: &str| format!("{which}{thread}-{task}-{round}");
        // Dropped after 0, 1 or 2 turns, one call in three; the other waits for its answer.
        let patience = |n: usize| n.is_multiple_of(3).then_some(n / 3 % 3);
        let (first, second) = (tag("a"), tag("b"));
        let (one, two) = smol::future::zip(
            attempt(&client, echo(&first), patience(round + task)),
            attempt(&client, echo(&second), patience(round + task + 1)),
        )
        .await;
        for (outcome, tag) in [(one, first), (two, second)] {
            match outcome {
                Outcome::Answered(Ok(text)) => {
                    assert_eq!(text, tag, "a call got another call's answer");
                    tally.answered += 1;
                }
                Outcome::Answered(Err(error)) => panic!("call {tag} failed: {error}"),
                Outcome::Dropped => tally.dropped += 1,
            }
        }
    }
    tally
}

/// Runs every caller: `THREADS` threads, each with `TASKS` tasks on an executor of its own.
fn storm(client: &Client, echo: fn(&str) -> Value) -> Tally {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let client = client.clone();
                scope.spawn(move || {
                    let executor = smol::LocalExecutor::new();
                    let tasks: Vec<_> = (0..TASKS)
                        .map(|task| executor.spawn(caller(client.clone(), echo, thread, task)))
                        .collect();
                    bounded(executor.run(async {
                        let mut tallies = Vec::new();
                        for task in tasks {
                            tallies.push(task.await);
                        }
                        tallies.into_iter().sum::<Tally>()
                    }))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .sum()
    })
}

/// The storm, then one more call and a listing: the connection is as good as new.
fn hammer(client: &Client, echo: fn(&str) -> Value) {
    let Tally { answered, dropped } = storm(client, echo);
    // Every call is accounted for, and the storm did drop calls mid-way.
    assert_eq!(answered + dropped, THREADS * TASKS * ROUNDS * 2);
    assert!(
        dropped > 0,
        "no call was dropped: the storm tests nothing of that"
    );
    bounded(async {
        let after = client.call_tool("echo", echo("after")).await.unwrap();
        assert_eq!(text(&after), "after");
        assert!(!client.list_tools().await.unwrap().is_empty());
    });
}

#[test]
fn callers_dropped_mid_call_on_many_threads_leave_every_answer_to_its_own_over_stdio() {
    // The driver on mcp-smol's own thread, whenever no caller drives.
    let client = bounded(connect(&fixture("good", &[]), quick())).unwrap();
    hammer(&client, echo_args);
    bounded(close_and_check(&client));
}

#[test]
fn callers_dropped_mid_call_on_many_threads_leave_every_answer_to_its_own_over_http() {
    let server = crate::http::fixture("good", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let client = bounded(connect(HttpServer::new(url), quick())).unwrap();
    hammer(&client, |message| json!({ "message": message }));
    bounded(crate::http::close_and_check(&client, server.port));
}

/// A driver started by hand and run on a thread of its own, under a plain `block_on`.
#[test]
fn callers_dropped_mid_call_race_a_driver_on_a_thread_of_its_own() {
    let (client, driver) = mcp_smol::start(fixture("good", &[]), quick()).unwrap();
    let driving = std::thread::spawn(move || futures_lite::future::block_on(driver));
    bounded(client.wait_ready()).unwrap();
    hammer(&client, echo_args);
    bounded(close_and_check(&client));
    driving.join().unwrap();
}

/// Callers on every thread call until the connection ends under them: each call answers
/// its own tag, or fails saying the connection was closed here, and so does every call after.
async fn caller_until_closed(
    client: Client,
    echo: fn(&str) -> Value,
    tag: String,
    answered: &AtomicUsize,
    enough: &smol::channel::Sender<()>,
) {
    for call in 0_usize.. {
        let tag = format!("{tag}-{call}");
        let patience = call.is_multiple_of(3).then_some(call % 2);
        match attempt(&client, echo(&tag), patience).await {
            Outcome::Answered(Ok(text)) => {
                assert_eq!(text, tag, "a call got another call's answer");
                if answered.fetch_add(1, Ordering::SeqCst) + 1 == THREADS * TASKS * 10 {
                    let _ = enough.try_send(());
                }
            }
            Outcome::Answered(Err(Error::Disconnected(disconnect))) => {
                assert_eq!(disconnect.reason, CloseReason::Local, "{disconnect}");
                let after = client.call_tool("echo", echo("after")).await.unwrap_err();
                assert!(matches!(after, Error::Disconnected(_)), "{after}");
                return;
            }
            Outcome::Answered(Err(error)) => panic!("call {tag} failed: {error}"),
            Outcome::Dropped => {}
        }
    }
}

/// Closes `client` once its callers on every thread have had ten answers each, on average.
fn close_under_callers(client: &Client, echo: fn(&str) -> Value) {
    let answered = AtomicUsize::new(0);
    let (enough, enough_seen) = smol::channel::bounded(1);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (client, answered, enough) = (client.clone(), &answered, enough.clone());
            scope.spawn(move || {
                let executor = smol::LocalExecutor::new();
                let tasks: Vec<_> = (0..TASKS)
                    .map(|task| {
                        let tag = format!("{thread}-{task}");
                        executor.spawn(caller_until_closed(
                            client.clone(),
                            echo,
                            tag,
                            answered,
                            &enough,
                        ))
                    })
                    .collect();
                bounded(executor.run(async {
                    for task in tasks {
                        task.await;
                    }
                }));
            });
        }
        bounded(async {
            enough_seen.recv().await.unwrap();
            client.close().await;
        });
    });
}

#[test]
fn a_close_under_callers_on_many_threads_ends_every_call_clearly_over_stdio() {
    let client = bounded(connect(&fixture("good", &[]), quick())).unwrap();
    close_under_callers(&client, echo_args);
    crate::support::assert_group_gone(client.pid());
}

#[test]
fn a_close_under_callers_on_many_threads_ends_every_call_clearly_over_http() {
    let server = crate::http::fixture("good", &[]);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let client = bounded(connect(HttpServer::new(url), quick())).unwrap();
    close_under_callers(&client, |message| json!({ "message": message }));
    bounded(crate::http::close_and_check(&client, server.port));
}
