//! Tasks for a host that declared the tasks extension (stateless era): a call a backend runs
//! as a task is handed to the host as one (`resultType: "task"`), under an id that names the
//! backend (`SERVER/ID`), and the host's `tasks/get`, `tasks/update` and `tasks/cancel` go
//! to that backend. A host that did not declare it never sees a task: the hub waits for it.

use mcp_smol::proto::{ClientInfo, RpcError, TASKS_EXTENSION, Task};
use serde_json::{Map, Value, json};

use crate::gateway::{Gateway, backend_error, invalid_params, tool_error};
use crate::hints;
use crate::hub::{Started, ToolEntry};

/// The methods a host drives its tasks with.
pub(crate) const METHODS: &[&str] = &["tasks/get", "tasks/update", "tasks/cancel"];

/// Whether this request's host takes tasks.
pub(crate) fn declared(era: Option<&ClientInfo>) -> bool {
    let extensions = era.and_then(|client| client.capabilities.get("extensions"));
    extensions.is_some_and(|extensions| extensions.get(TASKS_EXTENSION).is_some())
}

/// The task as the host sees it: the backend's, under the gateway's id.
fn for_host(server: &str, mut task: Task) -> Value {
    task.id = format!("{server}/{}", task.id);
    task.to_json()
}

impl Gateway {
    /// Calls `entry` for a host that takes tasks: its result, or the task running it.
    pub(crate) async fn call_as_task(
        &self,
        entry: &ToolEntry,
        arguments: Value,
        trace: Map<String, Value>,
    ) -> Value {
        let started = (self.hub)
            .call(entry, arguments)
            .timeout(self.call_timeout)
            .meta(trace)
            .detach()
            .start()
            .await;
        match started {
            Ok(Started::Done(result)) => result,
            Ok(Started::Task(handle)) => {
                let mut task = for_host(&entry.server, handle.task);
                task["resultType"] = json!("task");
                task
            }
            Err(error) => tool_error(&hints::explained(&error)),
        }
    }

    /// A host's `tasks/get`, `tasks/update` or `tasks/cancel`.
    pub(crate) async fn handle_task(
        &self,
        method: &str,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let given = params
            .get("taskId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // The longest served name the id starts with: names may hold a `/` themselves.
        let servers = self.servers();
        let owner = (servers.iter())
            .filter(|server| given.starts_with(&format!("{server}/")))
            .max_by_key(|server| server.len());
        let Some(server) = owner else {
            return Err(invalid_params(format!("unknown task {given}")));
        };
        let id = &given[server.len() + 1..];
        match method {
            "tasks/get" => {
                let task = self.hub.get_task(server, id).await.map_err(backend_error)?;
                Ok(for_host(server, task))
            }
            "tasks/update" => {
                let responses = match params.get("inputResponses") {
                    Some(Value::Object(responses)) => responses.clone(),
                    _ => Map::new(),
                };
                (self.hub.update_task(server, id, responses).await).map_err(backend_error)?;
                Ok(json!({}))
            }
            _ => {
                self.hub
                    .cancel_task(server, id)
                    .await
                    .map_err(backend_error)?;
                Ok(json!({}))
            }
        }
    }
}
