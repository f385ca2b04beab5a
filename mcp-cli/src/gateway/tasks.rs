//! Tasks for a host that asks for them, in either era, whatever era the backend speaks: a
//! call a backend runs as a task is handed to the host as one, under an id that names the
//! backend (`SERVER/ID`), and the host's task requests go to that backend.
//!
//! Stateless era: the host declared the tasks extension; it gets `resultType: "task"` and
//! drives it with `tasks/get`, `tasks/update` and `tasks/cancel`. Handshake era (2025-11-25,
//! experimental tasks): the host sent `task` on its `tools/call`; it gets `{"task": ...}` and
//! drives it with `tasks/get`, `tasks/result` (which relays the backend's forms while it
//! waits, and tells the host each new status with `notifications/tasks/status`), `tasks/list`
//! and `tasks/cancel`. A handshake-era call the backend answered at once still gets the task
//! the host asked for: one of the gateway's own, already ended (`gateway-N`, no `/`).
//!
//! A host that asked for neither never sees a task: the hub waits for it. Forms the backend
//! asks for before it makes the task reach the host as any call's do, and so does a -32042
//! (URL elicitation required) answering the call before any task is made.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use mcp_smol::proto::{
    Notification, RpcError, TASKS_EXTENSION,
    server::ClientInfo,
    tasks::{Task, TaskStatus},
};
use serde_json::{Map, Value, json};

use crate::gateway::errors::{
    backend_error, failed_call, internal_error, invalid_params, link_required,
};
use crate::gateway::{Gateway, HostLink};
use crate::hints;
use crate::hub::{HubError, Started, ToolEntry};

/// The methods a host drives its tasks with, in both eras.
pub(crate) const METHODS: &[&str] = &[
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "tasks/result",
    "tasks/list",
];

/// At most this many tasks are remembered for `tasks/list`, and at most this many of the
/// gateway's own ended tasks are kept for `tasks/result`; older ones are forgotten first.
const KEPT: usize = 128;

/// Whether this host request asks for a task: a stateless-era host that declared the
/// extension, or a handshake-era call with the `task` parameter.
pub(crate) fn wanted(era: Option<&ClientInfo>, params: &Value) -> bool {
    match era {
        Some(client) => {
            let extensions = client.capabilities.get("extensions");
            extensions.is_some_and(|extensions| extensions.get(TASKS_EXTENSION).is_some())
        }
        None => params.get("task").is_some_and(Value::is_object),
    }
}

/// The tasks handed to this gateway's hosts, newest last, and the gateway's own ended ones.
#[derive(Default)]
pub(crate) struct Handed(Mutex<HandedInner>);

#[derive(Default)]
struct HandedInner {
    next: u64,
    /// `(server, id)` of the backends' tasks, for `tasks/list`.
    relayed: VecDeque<(String, String)>,
    /// The gateway's own: the task, ended, and the call's result.
    own: VecDeque<(Task, Value)>,
}

impl Handed {
    fn inner(&self) -> std::sync::MutexGuard<'_, HandedInner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn note(&self, server: &str, id: &str) {
        let mut inner = self.inner();
        if inner.relayed.len() == KEPT {
            inner.relayed.pop_front();
        }
        inner.relayed.push_back((server.to_owned(), id.to_owned()));
    }

    /// Makes an ended task of the gateway's own for `result`.
    fn own(&self, result: Value, now: &str) -> Task {
        let mut inner = self.inner();
        inner.next += 1;
        // A tool result with `isError` is a failed task, as the spec says.
        let failed = result.get("isError") == Some(&json!(true));
        let task = Task {
            id: format!("gateway-{}", inner.next),
            status: if failed {
                TaskStatus::Failed
            } else {
                TaskStatus::Completed
            },
            message: None,
            created_at: Some(now.to_owned()),
            last_updated_at: Some(now.to_owned()),
            ttl_ms: None,
            poll_interval_ms: None,
            result: None,
            error: None,
            input_requests: Map::new(),
        };
        if inner.own.len() == KEPT {
            inner.own.pop_front();
        }
        inner.own.push_back((task.clone(), result));
        task
    }

    fn find_own(&self, id: &str) -> Option<(Task, Value)> {
        let inner = self.inner();
        inner.own.iter().find(|(task, _)| task.id == id).cloned()
    }

    fn listed(&self) -> (Vec<(String, String)>, Vec<Task>) {
        let inner = self.inner();
        let relayed = inner.relayed.iter().cloned().collect();
        (
            relayed,
            inner.own.iter().map(|(task, _)| task.clone()).collect(),
        )
    }
}

/// The task as a handshake-era host sees it: the backend's, under the gateway's id.
fn for_handshake_host(server: &str, task: &Task) -> Value {
    let mut task = task.to_handshake_json(&crate::logs::iso8601_now());
    task["taskId"] = json!(format!(
        "{server}/{}",
        task["taskId"].as_str().unwrap_or("")
    ));
    task
}

/// A task that did not end well, as `tasks/result` answers it.
fn ended_badly(error: HubError) -> RpcError {
    match error {
        HubError::TaskFailed { error, .. } => error,
        HubError::TaskLost { server, id, error } => {
            invalid_params(format!("unknown task {server}/{id}: {}", error.text()))
        }
        other @ HubError::TaskCancelled { .. } => internal_error(hints::explained(&other)),
        other => backend_error(other),
    }
}

impl Gateway {
    /// The task as a stateless-era host sees it: the backend's, under the gateway's id
    /// (`SERVER/ID`; as one of several replicas, a sealed handle that names this one).
    fn for_host(&self, server: &str, mut task: Task) -> Value {
        task.id = match &self.replicas {
            Some(replicas) => replicas.handle(server, &task.id),
            None => format!("{server}/{}", task.id),
        };
        task.to_json()
    }

    /// Starts `entry`'s call for a host that asked for a task ([`wanted`]): the task running
    /// it, or its result, as the host's era spells them (`handshake`: a task in any case, one
    /// of the gateway's own for a call answered at once). A -32042 before any task was made is
    /// the error, for the caller to put to the host as it can take it.
    pub(crate) async fn start_task_for_host(
        &self,
        entry: &ToolEntry,
        arguments: Value,
        trace: Map<String, Value>,
        handshake: bool,
    ) -> Result<Value, RpcError> {
        let result = match self.start_task(entry, arguments, trace).await {
            Ok(Started::Task(handle)) if handshake => {
                self.handed.note(&entry.server, &handle.task.id);
                return Ok(json!({ "task": for_handshake_host(&entry.server, &handle.task) }));
            }
            Ok(Started::Task(handle)) => {
                let mut task = self.for_host(&entry.server, handle.task);
                task["resultType"] = json!("task");
                return Ok(task);
            }
            Ok(Started::Done(result)) => result,
            // Before any task was made: as for a call without one.
            Err(error) => match link_required(error) {
                Ok(required) => return Err(required),
                Err(error) => failed_call(&entry.name, error),
            },
        };
        Ok(match handshake {
            true => json!({ "task": self.own_task(result) }),
            false => result,
        })
    }

    async fn start_task(
        &self,
        entry: &ToolEntry,
        arguments: Value,
        trace: Map<String, Value>,
    ) -> Result<Started, HubError> {
        (self.hub)
            .call(entry, arguments)
            .timeout(self.call_timeout)
            .meta(trace)
            .detach()
            .start()
            .await
    }

    pub(crate) fn own_task(&self, result: Value) -> Value {
        let now = crate::logs::iso8601_now();
        self.handed.own(result, &now).to_handshake_json(&now)
    }

    /// A host's task request (one of [`METHODS`]); `era` is `None` for a handshake-era host.
    pub(crate) async fn handle_task(
        &self,
        host: &HostLink,
        method: &str,
        params: &Value,
        era: Option<&ClientInfo>,
    ) -> Result<Value, RpcError> {
        if method == "tasks/list" {
            return Ok(self.list_tasks(era.is_some()).await);
        }
        let given = params
            .get("taskId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some((task, result)) = self.handed.find_own(given) {
            return match method {
                "tasks/result" => Ok(related(result, given)),
                "tasks/cancel" => Err(invalid_params(format!("task {given} has already ended"))),
                _ if era.is_some() => Ok(task.to_json()),
                _ => Ok(task.to_handshake_json(&crate::logs::iso8601_now())),
            };
        }
        let servers = self.servers();
        let sealed =
            (self.replicas.as_ref()).and_then(|replicas| Some((replicas, replicas.open(given)?)));
        let (server, id) = match sealed {
            // A replica's: answered where its task runs.
            Some((replicas, routed)) => {
                let routed = routed?;
                if !replicas.answers_here(&routed, params) {
                    return replicas.forward(&routed, method, params).await;
                }
                match servers.iter().find(|server| **server == routed.server) {
                    Some(server) => (server, routed.id),
                    None => return Err(invalid_params(format!("unknown task {given}"))),
                }
            }
            None => {
                // The longest served name the id starts with: names may hold a `/` themselves.
                let owner = (servers.iter())
                    .filter(|server| given.starts_with(&format!("{server}/")))
                    .max_by_key(|server| server.len());
                let Some(server) = owner else {
                    return Err(invalid_params(format!("unknown task {given}")));
                };
                (server, given[server.len() + 1..].to_owned())
            }
        };
        let id = id.as_str();
        match (method, era) {
            ("tasks/get", Some(_)) => {
                let task = self.hub.get_task(server, id).await.map_err(backend_error)?;
                Ok(self.for_host(server, task))
            }
            ("tasks/get", None) => {
                let task = (self.hub.peek_task(server, id).await).map_err(ended_badly)?;
                Ok(for_handshake_host(server, &task))
            }
            ("tasks/update", _) => {
                let responses = match params.get("inputResponses") {
                    Some(Value::Object(responses)) => responses.clone(),
                    _ => Map::new(),
                };
                (self.hub.update_task(server, id, responses).await).map_err(backend_error)?;
                Ok(json!({}))
            }
            ("tasks/result", _) => {
                // The backend's forms while the task waits on them go to this host.
                let _waiting = self.relay.wait_on(Some(server), host);
                let status = |task: &Task| {
                    let task = for_handshake_host(server, task);
                    (host.server).notify(Notification::TASK_STATUS, Some(task));
                };
                let waited = self.hub.wait_task(server, id, None, status).await;
                Ok(related(waited.map_err(ended_badly)?, given))
            }
            (_, era) => {
                (self.hub.cancel_task(server, id).await).map_err(backend_error)?;
                if era.is_some() {
                    return Ok(json!({}));
                }
                let task = (self.hub.peek_task(server, id).await).map_err(ended_badly)?;
                Ok(for_handshake_host(server, &task))
            }
        }
    }

    /// `tasks/list`: the tasks handed to hosts here, each as its backend says it stands now
    /// (those it no longer knows left out), then the gateway's own.
    async fn list_tasks(&self, stateless: bool) -> Value {
        let (relayed, own) = self.handed.listed();
        let now = crate::logs::iso8601_now();
        let mut tasks = Vec::new();
        for (server, id) in relayed {
            if let Ok(task) = self.hub.peek_task(&server, &id).await {
                tasks.push(match stateless {
                    true => self.for_host(&server, task),
                    false => for_handshake_host(&server, &task),
                });
            }
        }
        tasks.extend(own.iter().map(|task| match stateless {
            true => task.to_json(),
            false => task.to_handshake_json(&now),
        }));
        json!({ "tasks": tasks })
    }
}

/// A task's result as `tasks/result` answers it: naming the task, as the spec asks.
fn related(mut result: Value, id: &str) -> Value {
    if let Value::Object(object) = &mut result {
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            let related = json!({ "taskId": id });
            meta.insert("io.modelcontextprotocol/related-task".to_owned(), related);
        }
    }
    result
}
