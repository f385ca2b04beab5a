//! Live updates in the stateless era: such a server sends list changes only on a
//! `subscriptions/listen` stream, so the hub opens one per connection for the lists whose
//! capabilities say `listChanged`. Its notifications carry the same methods as a
//! handshake-era server's unasked ones and reach the same watcher.
//!
//! A listen that is refused, never acknowledged, or whose stream ends is written to the
//! server's log and the hub goes on without live updates: one listen again after a stream
//! that ended once acknowledged, then nothing until the next connection.

use std::io::Write as _;
use std::time::Duration;

use async_channel::{Receiver, Sender};
use mcp_smol::Client;
use mcp_smol::proto::{Era, ListenFilter, Request, ServerInfo};

use crate::hub::Inner;
use crate::logs::RunLog;

/// What to listen for on a server: the lists its capabilities say change. `None` in the
/// handshake era (changes come unasked) and when no list changes.
pub(crate) fn filter(info: &ServerInfo) -> Option<ListenFilter> {
    if info.era() != Some(Era::Stateless) {
        return None;
    }
    let capabilities = &info.capabilities;
    let filter = ListenFilter {
        tools_list_changed: capabilities.tools.is_some_and(|c| c.list_changed),
        prompts_list_changed: capabilities.prompts.is_some_and(|c| c.list_changed),
        resources_list_changed: capabilities.resources.is_some_and(|c| c.list_changed),
        resource_uris: Vec::new(),
        task_ids: Vec::new(),
    };
    (filter != ListenFilter::default()).then_some(filter)
}

/// One connection's subscription while the hub listens.
#[derive(Debug, Clone)]
pub(crate) struct Listening {
    stop: Sender<()>,
    /// Closed once the listening task has let go of its request.
    done: Receiver<()>,
}

impl Listening {
    /// Cancels the subscription (the core's `cancel`) and waits until that is queued, so that
    /// a close that follows sends it first.
    pub(crate) async fn stop(&self) {
        self.stop.close();
        let _ = self.done.recv().await;
    }
}

/// Listens on `client` for what `filter` asks; an acknowledgement must come within
/// `ack_within`, and what each one agreed to goes to `acks`. Notes go to `log`.
pub(crate) fn start(
    hub: &Inner,
    client: Client,
    filter: ListenFilter,
    ack_within: Duration,
    log: Option<RunLog>,
    acks: Sender<ListenFilter>,
) -> Listening {
    let (stop, stopped) = async_channel::bounded::<()>(1);
    let (finished, done) = async_channel::bounded::<()>(1);
    hub.spawn_watcher(async move {
        // Dropped when the task ends or is dropped: `done` closes.
        let _finished = finished;
        let note = |text: String| {
            if let Some(log) = &log {
                let _ = writeln!(log.clone(), "mcp-cli: {text}");
            }
        };
        let listening = listen(&client, &filter, ack_within, note, &acks);
        let stopping = async {
            let _ = stopped.recv().await;
        };
        // Stopped first: the listen request is dropped unanswered, which cancels it.
        futures_lite::future::or(stopping, listening).await;
    });
    Listening { stop, done }
}

/// How one listen went.
enum Outcome {
    /// Acknowledged, then the stream ended.
    Ended(String),
    /// Never acknowledged; why.
    Refused(String),
    /// The connection is over: its watcher tells.
    Gone,
}

async fn listen(
    client: &Client,
    filter: &ListenFilter,
    ack_within: Duration,
    note: impl Fn(String),
    acks: &Sender<ListenFilter>,
) {
    let off = "live updates are off until the server is started again";
    for again in [false, true] {
        match listen_once(client, filter, ack_within, &note, acks).await {
            Outcome::Gone => return,
            Outcome::Refused(why) => return note(format!("subscriptions/listen: {why}; {off}")),
            Outcome::Ended(why) if !again => {
                note(format!("subscriptions/listen: {why}; listening again once"));
            }
            Outcome::Ended(why) => {
                return note(format!("subscriptions/listen: {why} again; {off}"));
            }
        }
    }
}

async fn listen_once(
    client: &Client,
    filter: &ListenFilter,
    ack_within: Duration,
    note: &impl Fn(String),
    acks: &Sender<ListenFilter>,
) -> Outcome {
    // Subscribed before the request goes, so that the acknowledgement cannot slip past.
    let notes = client.notifications().await;
    let mut request = (client.request(Request::listen(filter)))
        .timeout(ack_within)
        .into_future();
    let acknowledged = async {
        while let Ok(notification) = notes.recv().await {
            if let Some(agreed) = notification.acknowledged() {
                return Ok(agreed);
            }
        }
        // The connection ended; the request is about to say so.
        std::future::pending().await
    };
    let answered = async { Err((&mut request).await) };
    let (agreed, answer) = match futures_lite::future::or(acknowledged, answered).await {
        Ok(agreed) => (Some(agreed), None),
        // Waiting for its answer, the request may drive the connection itself and read the
        // acknowledgement and the answer in one go: the acknowledgement is then still queued.
        Err(answer) => {
            let mut queued = std::iter::from_fn(|| notes.try_recv().ok());
            (queued.find_map(|n| n.acknowledged()), Some(answer))
        }
    };
    drop(notes);
    let Some(agreed) = agreed else {
        return match answer {
            Some(Ok(_)) => Outcome::Refused("the server ended it without acknowledging it".into()),
            Some(Err(error)) if client.disconnect().is_none() => {
                Outcome::Refused(error.to_string())
            }
            _ => Outcome::Gone,
        };
    };
    // The watcher lists again what this stream carries: a change made before it was open
    // (since the listing, or while a stream that ended was being replaced) was on none.
    let _ = acks.try_send(agreed.clone());
    let left_out = left_out(filter, &agreed);
    if !left_out.is_empty() {
        note(format!(
            "subscriptions/listen: the server does not send {}; those lists are refreshed \
             only when the server is started again",
            left_out.join(", ")
        ));
    }
    let ended = match answer {
        Some(answer) => answer,
        None => request.await,
    };
    match ended {
        _ if client.disconnect().is_some() => Outcome::Gone,
        Ok(_) => Outcome::Ended("the server ended the stream".to_owned()),
        Err(error) => Outcome::Ended(format!("the stream failed: {error}")),
    }
}

/// The notification types asked for in `asked` that `agreed` leaves out.
fn left_out(asked: &ListenFilter, agreed: &ListenFilter) -> Vec<&'static str> {
    let kinds = [
        (
            "toolsListChanged",
            asked.tools_list_changed,
            agreed.tools_list_changed,
        ),
        (
            "promptsListChanged",
            asked.prompts_list_changed,
            agreed.prompts_list_changed,
        ),
        (
            "resourcesListChanged",
            asked.resources_list_changed,
            agreed.resources_list_changed,
        ),
    ];
    (kinds.into_iter())
        .filter(|(_, asked, agreed)| *asked && !agreed)
        .map(|(kind, ..)| kind)
        .collect()
}
