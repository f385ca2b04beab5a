//! One task watched by a client until it ends ([`TaskWatch`]): every transition of the
//! client's side, sans-IO like the connection. The task itself, and the requests that drive
//! it, are the model's (`model/tasks.rs`).

use std::collections::BTreeSet;
use std::time::Instant;

use serde_json::Value;

use crate::model::error::RequestError;
use crate::model::request::Request;
use crate::model::tasks::{Task, TaskStatus};
use crate::model::versions::Era;
use crate::wire::jsonrpc::RpcError;

/// How a task ended, as a watch saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEnd {
    /// `completed`: the call's result as the server sent it (it may carry `isError`).
    Completed(Value),
    /// `failed`, or a `tasks/result` that answered with an error: what the server said.
    Failed(RpcError),
    /// `cancelled`, with the server's message if any.
    Cancelled(Option<String>),
    /// The server no longer knows the task (`tasks/get` refused it): its words.
    Lost(RpcError),
}

/// What a [`TaskWatch`] wants done next.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskStep {
    /// Nothing before this instant; then ask again.
    Wait(Instant),
    /// Send this `tasks/get`; feed its answer to [`TaskWatch::handle_task`] or
    /// [`TaskWatch::handle_error`].
    Get(Request<Task>),
    /// Handshake era: send this `tasks/result` and feed its answer to
    /// [`TaskWatch::handle_result`]. While the task is `input_required` the server's own
    /// requests arrive meanwhile, as any server request does.
    Fetch(Request<Value>),
    /// Stateless era: the server asks these (method and params, by key), each asked once;
    /// answer them with a [`Request::update_task`] and call [`TaskWatch::answered`].
    Input(Vec<(String, String, Option<Value>)>),
    /// The task ended.
    Done(TaskEnd),
}

/// One task watched by a client until it ends: every transition of the client's side lives
/// here. Sans-IO like the connection: the caller sends what [`step`](Self::step) asks for,
/// feeds the answers back and waits until the instant it names.
#[derive(Debug, Clone)]
pub struct TaskWatch {
    era: Era,
    task: Task,
    state: WatchState,
    /// Input request keys already handed out: each is asked once (the server repeats them on
    /// every poll until they are answered).
    asked: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum WatchState {
    /// The next `tasks/get` goes at this instant.
    Waiting(Instant),
    /// A `tasks/get` is out.
    Polling,
    /// Handshake era: `tasks/result` is next.
    Fetch,
    /// Handshake era: `tasks/result` is out.
    Fetching,
    /// Stateless era: the server asks for input not yet handed out.
    Asking,
    /// Stateless era: input requests were handed out; waiting for [`TaskWatch::answered`].
    Answering,
    /// Terminal.
    Done(TaskEnd),
}

impl TaskWatch {
    /// Watches `task`, as a call just created it or as a record remembered it, on a
    /// connection speaking `era`.
    pub fn new(now: Instant, era: Era, task: Task) -> Self {
        let ended = matches!(task.status, TaskStatus::Completed | TaskStatus::Failed);
        let mut watch = Self {
            era,
            state: WatchState::Polling,
            task: task.clone(),
            asked: BTreeSet::new(),
        };
        if era == Era::Stateless && ended && task.result.is_none() && task.error.is_none() {
            // A call's `CreateTaskResult` carries no outcome: `tasks/get` has it.
            watch.state = WatchState::Waiting(now);
        } else {
            watch.handle_task(now, task);
        }
        watch
    }

    /// The task as last seen.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// How it ended, once it has.
    #[cfg(test)]
    fn end(&self) -> Option<&TaskEnd> {
        match &self.state {
            WatchState::Done(end) => Some(end),
            _ => None,
        }
    }

    /// What to do now; `None` while an answer of ours is awaited (a `tasks/get`, a
    /// `tasks/result`, the answers to input requests). The first `Done` step hands a completed
    /// task's result over; later ones carry `null` in its place.
    pub fn step(&mut self, now: Instant) -> Option<TaskStep> {
        let step = match &mut self.state {
            WatchState::Waiting(at) if *at > now => TaskStep::Wait(*at),
            WatchState::Waiting(_) => {
                self.state = WatchState::Polling;
                TaskStep::Get(Request::get_task(&self.task.id))
            }
            WatchState::Fetch => {
                self.state = WatchState::Fetching;
                TaskStep::Fetch(Request::task_result(&self.task.id))
            }
            WatchState::Asking => {
                self.state = WatchState::Answering;
                TaskStep::Input(self.take_input())
            }
            // Handed over, not copied: the result may be large, and the watch is done.
            WatchState::Done(TaskEnd::Completed(result)) => {
                TaskStep::Done(TaskEnd::Completed(std::mem::take(result)))
            }
            WatchState::Done(end) => TaskStep::Done(end.clone()),
            WatchState::Polling | WatchState::Fetching | WatchState::Answering => return None,
        };
        Some(step)
    }

    /// A `tasks/get` answer or a status notification: where the task stands now. A task of
    /// another id, or one seen after the end, changes nothing.
    pub fn handle_task(&mut self, now: Instant, mut task: Task) {
        if task.id != self.task.id || matches!(self.state, WatchState::Done(_)) {
            return;
        }
        let poll = now + task.poll_interval();
        self.state = match (self.era, task.status) {
            // The result moves to the end: the task as last seen keeps no second copy.
            (Era::Stateless, TaskStatus::Completed) => match task.result.take() {
                Some(result) => WatchState::Done(TaskEnd::Completed(result)),
                // Seen before its result: the next poll carries it.
                None => WatchState::Waiting(poll),
            },
            (Era::Stateless, TaskStatus::Failed) => {
                WatchState::Done(TaskEnd::Failed(task.error.clone().unwrap_or_else(|| {
                    RpcError {
                        code: 0,
                        message: task
                            .message
                            .clone()
                            .unwrap_or_else(|| "the task failed".into()),
                        data: None,
                    }
                })))
            }
            (_, TaskStatus::Cancelled) => {
                WatchState::Done(TaskEnd::Cancelled(task.message.clone()))
            }
            (Era::Stateless, TaskStatus::InputRequired) => {
                let fresh = (task.input_requests.keys()).any(|key| !self.asked.contains(key));
                if fresh {
                    WatchState::Asking
                } else {
                    WatchState::Waiting(poll)
                }
            }
            // Handshake era: the outcome, and the server's requests, come with `tasks/result`.
            (Era::Handshake, TaskStatus::Completed | TaskStatus::Failed)
            | (Era::Handshake, TaskStatus::InputRequired) => match self.state {
                WatchState::Fetching => WatchState::Fetching,
                _ => WatchState::Fetch,
            },
            (_, TaskStatus::Working) => match self.state {
                // A notification while `tasks/result` is out: the answer still comes.
                WatchState::Fetching => WatchState::Fetching,
                _ => WatchState::Waiting(poll),
            },
        };
        self.task = task;
    }

    /// Stateless era: the input requests not handed out before.
    fn take_input(&mut self) -> Vec<(String, String, Option<Value>)> {
        let mut fresh = Vec::new();
        for (key, request) in &self.task.input_requests {
            if self.asked.insert(key.clone()) {
                let method = request.get("method").and_then(Value::as_str);
                let params = request.get("params").cloned();
                fresh.push((key.clone(), method.unwrap_or_default().to_owned(), params));
            }
        }
        fresh
    }

    /// Stateless era: the `tasks/update` carrying the answers was acknowledged (or failed);
    /// polling goes on.
    pub fn answered(&mut self, now: Instant) {
        if self.state == WatchState::Answering {
            self.state = WatchState::Waiting(now + self.task.poll_interval());
        }
    }

    /// A `tasks/get` (or `tasks/update`) that failed: a refusal from the server means it no
    /// longer knows the task; a failure on our side (a timeout, a closed connection) is the
    /// caller's to report, and polling goes on at the next interval if it does not.
    pub fn handle_error(&mut self, now: Instant, error: &RequestError) {
        match error {
            RequestError::Remote(refusal) => {
                self.state = WatchState::Done(TaskEnd::Lost(refusal.clone()))
            }
            _ => self.state = WatchState::Waiting(now + self.task.poll_interval()),
        }
    }

    /// Handshake era: the answer to `tasks/result`, the call's own answer.
    pub fn handle_result(&mut self, now: Instant, answer: Result<Value, RequestError>) {
        self.state = match answer {
            Ok(result) => {
                self.task.status = TaskStatus::Completed;
                WatchState::Done(TaskEnd::Completed(result))
            }
            Err(RequestError::Remote(error)) => {
                if self.task.status == TaskStatus::Completed {
                    // Completed, yet the result cannot be had: gone since.
                    WatchState::Done(TaskEnd::Lost(error))
                } else {
                    self.task.status = TaskStatus::Failed;
                    WatchState::Done(TaskEnd::Failed(error))
                }
            }
            // Ours: try again after a poll.
            Err(_) => WatchState::Waiting(now + self.task.poll_interval()),
        };
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Map, json};

    use super::*;
    use crate::model::request::Params;
    use crate::model::tasks::{MAX_POLL_INTERVAL, MIN_POLL_INTERVAL, STATUS_NOTIFICATION};
    use crate::model::types::Notification;

    fn task(value: Value) -> Task {
        Task::read(&value).unwrap()
    }

    fn working(interval: Value) -> Task {
        task(json!({"taskId": "t1", "status": "working", "pollIntervalMs": interval}))
    }

    #[test]
    fn stateless_task_polls_at_the_bounded_interval_until_its_result() {
        let start = Instant::now();
        let mut watch = TaskWatch::new(start, Era::Stateless, working(json!(0)));
        let first = start + MIN_POLL_INTERVAL;
        assert_eq!(watch.step(start), Some(TaskStep::Wait(first)));
        let Some(TaskStep::Get(get)) = watch.step(first) else {
            panic!("no poll")
        };
        assert_eq!(get.method(), "tasks/get");
        assert_eq!(get.params, Params::Value(json!({"taskId": "t1"})));
        // Nothing more while the poll is out.
        assert_eq!(watch.step(first), None);
        let done = task(json!({"taskId": "t1", "status": "completed",
                               "result": {"content": [{"type": "text", "text": "ok"}]}}));
        watch.handle_task(first, done);
        let end = TaskEnd::Completed(json!({"content": [{"type": "text", "text": "ok"}]}));
        assert_eq!(watch.step(first), Some(TaskStep::Done(end)));
    }

    #[test]
    fn an_hour_long_interval_still_polls_within_the_bound() {
        let start = Instant::now();
        let mut watch = TaskWatch::new(start, Era::Stateless, working(json!(3_600_000)));
        assert_eq!(
            watch.step(start),
            Some(TaskStep::Wait(start + MAX_POLL_INTERVAL))
        );
    }

    #[test]
    fn a_task_created_ended_is_polled_once_for_its_outcome() {
        let now = Instant::now();
        let seed = task(json!({"taskId": "t1", "status": "failed", "statusMessage": "x"}));
        let mut watch = TaskWatch::new(now, Era::Stateless, seed);
        assert!(matches!(watch.step(now), Some(TaskStep::Get(_))));
    }

    #[test]
    fn stateless_failure_and_cancellation_end_the_watch() {
        let now = Instant::now();
        let failed = task(json!({"taskId": "t1", "status": "failed",
                                 "error": {"code": -32000, "message": "disk full"}}));
        let mut watch = TaskWatch::new(now, Era::Stateless, failed);
        let Some(TaskStep::Done(TaskEnd::Failed(error))) = watch.step(now) else {
            panic!()
        };
        assert_eq!((error.code, error.message.as_str()), (-32000, "disk full"));
        let cancelled =
            task(json!({"taskId": "t1", "status": "cancelled", "statusMessage": "bye"}));
        let mut watch = TaskWatch::new(now, Era::Stateless, cancelled);
        let end = TaskEnd::Cancelled(Some("bye".to_owned()));
        assert_eq!(watch.step(now), Some(TaskStep::Done(end)));
    }

    #[test]
    fn input_requests_are_handed_out_once_then_polling_resumes() {
        let now = Instant::now();
        let asking = json!({"taskId": "t1", "status": "input_required", "pollIntervalMs": 200,
            "inputRequests": {"name": {"method": "elicitation/create", "params": {"message": "?"}}}});
        let mut watch = TaskWatch::new(now, Era::Stateless, task(asking.clone()));
        let expected = vec![(
            "name".to_owned(),
            "elicitation/create".to_owned(),
            Some(json!({"message": "?"})),
        )];
        assert_eq!(watch.step(now), Some(TaskStep::Input(expected)));
        assert_eq!(watch.step(now), None);
        watch.answered(now);
        let later = now + Duration::from_millis(200);
        assert_eq!(watch.step(now), Some(TaskStep::Wait(later)));
        assert!(matches!(watch.step(later), Some(TaskStep::Get(_))));
        // The server repeats the request it has its answer to: not asked again.
        watch.handle_task(later, task(asking));
        let again = later + Duration::from_millis(200);
        assert_eq!(watch.step(later), Some(TaskStep::Wait(again)));
        let update = Request::update_task("t1", Map::from_iter([("name".into(), json!({}))]));
        assert_eq!(update.method(), "tasks/update");
    }

    #[test]
    fn handshake_task_fetches_its_result_once_terminal_or_asking() {
        let now = Instant::now();
        let mut watch = TaskWatch::new(now, Era::Handshake, working(json!(100)));
        let poll = now + MIN_POLL_INTERVAL;
        assert!(matches!(watch.step(poll), Some(TaskStep::Get(_))));
        watch.handle_task(
            poll,
            task(json!({"taskId": "t1", "status": "input_required"})),
        );
        let Some(TaskStep::Fetch(fetch)) = watch.step(poll) else {
            panic!("no fetch")
        };
        assert_eq!(fetch.method(), "tasks/result");
        assert_eq!(watch.step(poll), None);
        let result = json!({"content": [], "isError": false});
        watch.handle_result(poll, Ok(result.clone()));
        assert_eq!(
            watch.step(poll),
            Some(TaskStep::Done(TaskEnd::Completed(result)))
        );
        assert_eq!(watch.task().status, TaskStatus::Completed);
    }

    #[test]
    fn handshake_failure_is_the_result_error() {
        let now = Instant::now();
        let failed = task(json!({"taskId": "t1", "status": "failed"}));
        let mut watch = TaskWatch::new(now, Era::Handshake, failed);
        assert!(matches!(watch.step(now), Some(TaskStep::Fetch(_))));
        let error = RpcError {
            code: RpcError::INTERNAL_ERROR,
            message: "boom".into(),
            data: None,
        };
        watch.handle_result(now, Err(RequestError::Remote(error.clone())));
        assert_eq!(
            watch.step(now),
            Some(TaskStep::Done(TaskEnd::Failed(error)))
        );
    }

    #[test]
    fn a_forgotten_task_is_lost_and_a_timeout_polls_again() {
        let now = Instant::now();
        let mut watch = TaskWatch::new(now, Era::Stateless, working(json!(100)));
        let poll = now + MIN_POLL_INTERVAL;
        assert!(matches!(watch.step(poll), Some(TaskStep::Get(_))));
        watch.handle_error(
            poll,
            &RequestError::TimedOut {
                after: Duration::from_secs(1),
            },
        );
        assert_eq!(
            watch.step(poll),
            Some(TaskStep::Wait(poll + MIN_POLL_INTERVAL))
        );
        let later = poll + MIN_POLL_INTERVAL;
        assert!(matches!(watch.step(later), Some(TaskStep::Get(_))));
        let unknown = RpcError {
            code: -32602,
            message: "unknown task t1".into(),
            data: None,
        };
        watch.handle_error(later, &RequestError::Remote(unknown.clone()));
        assert_eq!(
            watch.step(later),
            Some(TaskStep::Done(TaskEnd::Lost(unknown)))
        );
    }

    #[test]
    fn notifications_carry_tasks_and_others_are_ignored() {
        let now = Instant::now();
        let note = Notification {
            method: STATUS_NOTIFICATION.to_owned(),
            params: Some(json!({"taskId": "t1", "status": "completed", "result": {"content": []}})),
        };
        let seen = Task::of_notification(&note).unwrap();
        let mut watch = TaskWatch::new(now, Era::Stateless, working(json!(100)));
        let mut other = seen.clone();
        other.id = "t2".to_owned();
        watch.handle_task(now, other);
        assert!(watch.end().is_none());
        watch.handle_task(now, seen);
        assert_eq!(
            watch.end(),
            Some(&TaskEnd::Completed(json!({"content": []})))
        );
        let progress = Notification {
            method: Notification::PROGRESS.to_owned(),
            params: None,
        };
        assert!(Task::of_notification(&progress).is_none());
    }
}
