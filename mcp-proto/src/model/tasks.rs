//! Tasks: a `tools/call` that the server runs in the background, in both eras, and every
//! transition of a client watching one ([`TaskWatch`]).
//!
//! Stateless era (the `io.modelcontextprotocol/tasks` extension, declared with
//! [`ClientCapabilities::tasks`](crate::ClientCapabilities::tasks)): any `tools/call` may
//! answer `resultType: "task"`; the client polls `tasks/get`, whose task carries the result
//! (`completed`), the error (`failed`) or the server's `inputRequests` (`input_required`,
//! answered with `tasks/update`), and cancels with `tasks/cancel`; `notifications/tasks`
//! carries the same task to a `subscriptions/listen` that named it. Handshake era (2025-11-25,
//! experimental): the client asks for a task with the call's `task` parameter
//! ([`Request::as_task`]) where the server declares `tasks.requests.tools.call`; the answer is
//! `{"task": {...}}`; `tasks/get` polls, `tasks/result` fetches the outcome (and, while the
//! task is `input_required`, carries the server's own requests), `tasks/list` and
//! `tasks/cancel`, and `notifications/tasks/status`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::model::error::RequestError;
use crate::model::request::{FromResult, Params, Request};
use crate::model::types::{CallToolResult, Notification};
use crate::model::versions::Era;
use crate::wire::jsonrpc::RpcError;

/// Polls are never closer together than this, whatever the server asks (`0` included).
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Nor further apart than this (an hour included), so a finished task is seen soon enough.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(30);
/// The interval when the server suggests none.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for answers to the server's requests.
    InputRequired,
    /// Done; the result is ready. Terminal.
    Completed,
    /// Ended by a JSON-RPC error. Terminal.
    Failed,
    /// Cancelled. Terminal.
    Cancelled,
}

impl TaskStatus {
    /// As the protocol spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Reads the protocol's spelling.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// Whether the task can change no more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task as the server last described it (a `CreateTaskResult`, a `tasks/get` answer, a
/// status notification). Both eras' spellings are read: `ttlMs`/`pollIntervalMs` and
/// `ttl`/`pollInterval`.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The server's id for it.
    pub id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// `statusMessage`, for people.
    pub message: Option<String>,
    /// `createdAt`, as sent (ISO 8601).
    pub created_at: Option<String>,
    /// `lastUpdatedAt`, as sent.
    pub last_updated_at: Option<String>,
    /// How long the server keeps it, from its creation; `None` for unlimited or unsaid.
    pub ttl_ms: Option<u64>,
    /// The poll interval the server suggests; [`poll_interval`](Self::poll_interval) bounds it.
    pub poll_interval_ms: Option<u64>,
    /// Stateless era, `completed`: the call's result as the server sent it.
    pub result: Option<Value>,
    /// Stateless era, `failed`: the error that ended it.
    pub error: Option<RpcError>,
    /// Stateless era, `input_required`: the server's requests, by key.
    pub input_requests: Map<String, Value>,
}

impl Task {
    /// Reads a task object; the error says what is wrong with it.
    pub fn read(value: &Value) -> Result<Self, String> {
        let Some(task) = value.as_object() else {
            return Err("the task is not an object".to_owned());
        };
        let text = |name: &str| task.get(name).and_then(Value::as_str).map(str::to_owned);
        let number = |names: [&str; 2]| names.iter().find_map(|n| task.get(*n)?.as_u64());
        let id = text("taskId").ok_or("the task has no string `taskId`")?;
        let status = match task.get("status") {
            Some(Value::String(status)) => TaskStatus::parse(status)
                .ok_or_else(|| format!("task {id} has an unknown status {status:?}"))?,
            _ => return Err(format!("task {id} has no string `status`")),
        };
        let error = match task.get("error") {
            Some(error @ Value::Object(_)) => Some(RpcError {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: (error.get("message").and_then(Value::as_str))
                    .unwrap_or_default()
                    .to_owned(),
                data: error.get("data").cloned(),
            }),
            _ => None,
        };
        let input_requests = match task.get("inputRequests") {
            Some(Value::Object(requests)) => requests.clone(),
            _ => Map::new(),
        };
        Ok(Self {
            status,
            message: text("statusMessage"),
            created_at: text("createdAt"),
            last_updated_at: text("lastUpdatedAt"),
            ttl_ms: number(["ttlMs", "ttl"]),
            poll_interval_ms: number(["pollIntervalMs", "pollInterval"]),
            result: task.get("result").filter(|r| r.is_object()).cloned(),
            error,
            input_requests,
            id,
        })
    }

    /// The task a `tools/call` result creates, if it is one: `resultType: "task"` (stateless
    /// era) or a `task` object in place of content (handshake era). `Some(Err)` for one that
    /// says it is a task but cannot be read.
    pub fn created_by(result: &Value) -> Option<Result<Self, String>> {
        if result.get("resultType").and_then(Value::as_str) == Some("task") {
            return Some(Self::read(result));
        }
        let task = result.get("task").filter(|task| task.is_object())?;
        if result.get("content").is_some() {
            return None;
        }
        Some(Self::read(task))
    }

    /// The task a notification carries, if it is a task status notification of either era.
    pub fn of_notification(notification: &Notification) -> Option<Self> {
        let ours = [STATUS_NOTIFICATION, HANDSHAKE_STATUS_NOTIFICATION];
        if !ours.contains(&notification.method.as_str()) {
            return None;
        }
        Self::read(notification.params.as_ref()?).ok()
    }

    /// The wait before the next poll: the server's suggestion, bounded by
    /// [`MIN_POLL_INTERVAL`] and [`MAX_POLL_INTERVAL`]; [`DEFAULT_POLL_INTERVAL`] unsaid.
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval_ms
            .map_or(DEFAULT_POLL_INTERVAL, Duration::from_millis)
            .clamp(MIN_POLL_INTERVAL, MAX_POLL_INTERVAL)
    }

    /// The task as the protocol spells it, in the stateless era's names (`--json` prints it).
    pub fn to_json(&self) -> Value {
        let mut task = json!({ "taskId": self.id, "status": self.status.as_str() });
        let members = [
            ("statusMessage", self.message.clone().map(Value::from)),
            ("createdAt", self.created_at.clone().map(Value::from)),
            (
                "lastUpdatedAt",
                self.last_updated_at.clone().map(Value::from),
            ),
            ("ttlMs", self.ttl_ms.map(Value::from)),
            ("pollIntervalMs", self.poll_interval_ms.map(Value::from)),
            ("result", self.result.clone()),
            ("error", self.error.as_ref().map(RpcError::to_json)),
        ];
        for (name, value) in members {
            if let Some(value) = value {
                task[name] = value;
            }
        }
        if !self.input_requests.is_empty() {
            task["inputRequests"] = Value::Object(self.input_requests.clone());
        }
        task
    }
}

impl Task {
    /// The task as the handshake era (2025-11-25) spells it, for a host of that era: `ttl`
    /// (`null` for unlimited) and `pollInterval`, and no outcome (that comes with
    /// `tasks/result`). `now` stands in for the timestamps the schema requires where the
    /// server sent none.
    pub fn to_handshake_json(&self, now: &str) -> Value {
        let stamp = |given: &Option<String>| given.clone().unwrap_or_else(|| now.to_owned());
        let mut task = json!({
            "taskId": self.id,
            "status": self.status.as_str(),
            "createdAt": stamp(&self.created_at),
            "lastUpdatedAt": stamp(&self.last_updated_at),
            "ttl": self.ttl_ms,
        });
        if let Some(message) = &self.message {
            task["statusMessage"] = json!(message);
        }
        if let Some(interval) = self.poll_interval_ms {
            task["pollInterval"] = json!(interval);
        }
        task
    }
}

impl FromResult for Task {
    /// A `tasks/get` result: the task itself (stateless era, and 2025-11-25).
    fn from_result(mut result: Value) -> Result<Self, String> {
        // The call's outcome is moved, not copied: it may be most of a large answer.
        let outcome = (result.as_object_mut())
            .and_then(|task| task.remove("result"))
            .filter(Value::is_object);
        let mut task = Self::read(&result)?;
        task.result = outcome;
        Ok(task)
    }
}

/// Stateless era: the task status notification.
pub const STATUS_NOTIFICATION: &str = "notifications/tasks";
/// Handshake era (2025-11-25): the task status notification.
pub const HANDSHAKE_STATUS_NOTIFICATION: &str = "notifications/tasks/status";

/// The methods a task is driven with, whose HTTP `Mcp-Name` is the task id.
pub(crate) const TASK_METHODS: &[&str] =
    &["tasks/get", "tasks/update", "tasks/cancel", "tasks/result"];

fn by_id(method: &str, id: &str) -> Request<Value> {
    Request::new(method, Some(json!({ "taskId": id })))
}

impl Request<Task> {
    /// `tasks/get`: where the task stands (both eras).
    pub fn get_task(id: &str) -> Self {
        Self::with(
            "tasks/get".to_owned(),
            Params::Value(json!({ "taskId": id })),
        )
    }
}

impl Request<Value> {
    /// `tasks/cancel` (both eras); the answer is an acknowledgement (stateless era) or the
    /// cancelled task (handshake era).
    pub fn cancel_task(id: &str) -> Self {
        by_id("tasks/cancel", id)
    }

    /// `tasks/result` (handshake era): the call's result once the task is terminal; the server
    /// holds the answer until then, sending its own requests for the task meanwhile.
    pub fn task_result(id: &str) -> Self {
        by_id("tasks/result", id)
    }

    /// `tasks/update` (stateless era): answers to the server's `inputRequests`, by key.
    pub fn update_task(id: &str, responses: Map<String, Value>) -> Self {
        let params = json!({ "taskId": id, "inputResponses": responses });
        Request::new("tasks/update", Some(params))
    }

    /// `tasks/list` (handshake era), one page.
    pub fn list_tasks(cursor: Option<&str>) -> Self {
        let params = cursor.map(|cursor| json!({ "cursor": cursor }));
        Request::new("tasks/list", params)
    }
}

impl Request<CallToolResult> {
    /// Handshake era (2025-11-25): the call asks to run as a task (`task: {"ttl": ...}`),
    /// which a server that declares `tasks.requests.tools.call` answers with `{"task": ...}`
    /// ([`Task::created_by`]). The stateless era needs no flag: the server decides.
    #[must_use]
    pub fn as_task(mut self, ttl: Option<Duration>) -> Self {
        if let Params::CallTool { task, .. } = &mut self.params {
            let ttl = ttl.map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
            *task = Some(Box::new(match ttl {
                Some(ttl) => json!({ "ttl": ttl }),
                None => json!({}),
            }));
        }
        self
    }
}

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
    pub fn end(&self) -> Option<&TaskEnd> {
        match &self.state {
            WatchState::Done(end) => Some(end),
            _ => None,
        }
    }

    /// What to do now; `None` while an answer of ours is awaited (a `tasks/get`, a
    /// `tasks/result`, the answers to input requests). The first `Done` step hands a completed
    /// task's result over; later ones (and [`end`](Self::end)) carry `null` in its place.
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
    use super::*;

    fn task(value: Value) -> Task {
        Task::read(&value).unwrap()
    }

    fn working(interval: Value) -> Task {
        task(json!({"taskId": "t1", "status": "working", "pollIntervalMs": interval}))
    }

    #[test]
    fn poll_interval_is_bounded_both_ways() {
        let ms = Duration::from_millis;
        assert_eq!(working(json!(0)).poll_interval(), MIN_POLL_INTERVAL);
        assert_eq!(working(json!(3_600_000)).poll_interval(), MAX_POLL_INTERVAL);
        assert_eq!(working(json!(250)).poll_interval(), ms(250));
        assert_eq!(working(Value::Null).poll_interval(), DEFAULT_POLL_INTERVAL);
        let handshake = task(json!({"taskId": "t", "status": "working", "pollInterval": 5000}));
        assert_eq!(handshake.poll_interval(), ms(5000));
    }

    #[test]
    fn created_tasks_are_read_in_both_eras() {
        let stateless = json!({"resultType": "task", "taskId": "a", "status": "working",
                               "ttlMs": 60000, "pollIntervalMs": 5});
        let created = Task::created_by(&stateless).unwrap().unwrap();
        assert_eq!((created.id.as_str(), created.ttl_ms), ("a", Some(60000)));
        let handshake = json!({"task": {"taskId": "b", "status": "working", "ttl": null}});
        let created = Task::created_by(&handshake).unwrap().unwrap();
        assert_eq!((created.id.as_str(), created.ttl_ms), ("b", None));
        let plain = json!({"content": [], "task": {"taskId": "c", "status": "working"}});
        assert!(Task::created_by(&plain).is_none());
        let broken = json!({"resultType": "task", "status": "working"});
        assert!(Task::created_by(&broken).unwrap().is_err());
        let odd = json!({"resultType": "task", "taskId": "x", "status": "sleeping"});
        assert!(
            Task::created_by(&odd)
                .unwrap()
                .unwrap_err()
                .contains("sleeping")
        );
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
    fn a_task_is_spelt_for_a_handshake_host_without_its_outcome() {
        let mut stateless = task(json!({"taskId": "t", "status": "completed",
            "ttlMs": 60000, "pollIntervalMs": 500, "createdAt": "2026-01-01T00:00:00Z"}));
        stateless.result = Some(json!({"content": []}));
        let spelt = stateless.to_handshake_json("2026-02-02T00:00:00Z");
        assert_eq!(
            spelt,
            json!({"taskId": "t", "status": "completed", "createdAt": "2026-01-01T00:00:00Z",
                   "lastUpdatedAt": "2026-02-02T00:00:00Z", "ttl": 60000, "pollInterval": 500})
        );
        let unlimited = task(json!({"taskId": "u", "status": "working"}));
        assert_eq!(unlimited.to_handshake_json("x")["ttl"], Value::Null);
    }

    #[test]
    fn handshake_failure_is_the_result_error() {
        let now = Instant::now();
        let failed = task(json!({"taskId": "t1", "status": "failed"}));
        let mut watch = TaskWatch::new(now, Era::Handshake, failed);
        assert!(matches!(watch.step(now), Some(TaskStep::Fetch(_))));
        let error = RpcError {
            code: -32603,
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
