//! Tasks: a `tools/call` that the server runs in the background, in both eras: the task as
//! the server describes it, and the requests that drive one. The client's side of watching
//! one is [`TaskWatch`](crate::tasks::TaskWatch), among the machines.
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

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::model::request::{FromResult, Params, Request};
use crate::model::types::{CallToolResult, Notification};
use crate::wire::jsonrpc::RpcError;

/// Polls are never closer together than this, whatever the server asks (`0` included).
pub(crate) const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Nor further apart than this (an hour included), so a finished task is seen soon enough.
pub(crate) const MAX_POLL_INTERVAL: Duration = Duration::from_secs(30);
/// The interval when the server suggests none.
pub(crate) const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

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
    /// The poll interval the server suggests; a [`TaskWatch`](crate::tasks::TaskWatch) keeps
    /// it between 100 ms and 30 s.
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
        let ours = [STATUS_NOTIFICATION, Notification::TASK_STATUS];
        if !ours.contains(&notification.method.as_str()) {
            return None;
        }
        Self::read(notification.params.as_ref()?).ok()
    }

    /// The wait before the next poll: the server's suggestion, bounded by
    /// [`MIN_POLL_INTERVAL`] and [`MAX_POLL_INTERVAL`]; [`DEFAULT_POLL_INTERVAL`] unsaid.
    pub(crate) fn poll_interval(&self) -> Duration {
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
}
