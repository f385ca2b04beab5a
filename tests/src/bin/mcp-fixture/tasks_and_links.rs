//! What the fixture does beside plain calls: a URL-mode elicitation, a form before a task,
//! a task's result, and `subscriptions/listen` with the notifications it carries.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use mcp_tests::{stateless, tasks};
use serde_json::{Value, json};

use super::{NAME, Server, resources};

impl Server {
    /// Mode `url-elicitation`: a URL-mode form, then its completion, then the answer.
    pub(crate) fn open_link(self: &Arc<Self>, id: Value) {
        let server = self.clone();
        thread::spawn(move || {
            let key = format!("link-{id}");
            let form = json!({"mode": "url", "message": "Connect your account",
                              "url": "https://auth.example.com/connect?id=link-1",
                              "elicitationId": "link-1"});
            server.send(&json!({"jsonrpc": "2.0", "id": key, "method": "elicitation/create", "params": form}));
            loop {
                let answers = server.answers.lock().unwrap().clone();
                if let Some(answer) = answers.iter().find(|answer| answer["id"] == key.as_str()) {
                    let action = answer["result"]["action"].as_str().unwrap_or("none");
                    server.send(
                        &json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                                        "params": {"elicitationId": "link-1"}}),
                    );
                    let text = format!("link {action}");
                    let result = json!({"content": [{"type": "text", "text": text}]});
                    return server.answer(&id, Ok(result));
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
    }

    /// Handshake era, `task_ask_first`: asks the client for the name before the call makes
    /// its task (an `elicitation/create` tied to the call's request).
    pub(crate) fn ask_first(self: &Arc<Self>, id: Value, mut params: Value) {
        let server = self.clone();
        thread::spawn(move || {
            let key = format!("first-{id}");
            server.send(&json!({"jsonrpc": "2.0", "id": key, "method": "elicitation/create", "params": tasks::ask_form()}));
            loop {
                let answers = server.answers.lock().unwrap().clone();
                if let Some(answer) = answers.iter().find(|answer| answer["id"] == key.as_str()) {
                    params["inputResponses"] = json!({"name": answer["result"]});
                    return server.reply(&id, server.tasks().call(&params));
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
    }

    /// Handshake era: `tasks/result` waits until the task ends, asking the client for
    /// `task_ask`'s name meanwhile (an `elicitation/create` tied to the task).
    pub(crate) fn task_result(self: &Arc<Self>, id: Value, params: Value) {
        let server = self.clone();
        thread::spawn(move || {
            let mut asked = None;
            loop {
                match server.tasks().result(&params) {
                    Some(Ok(answer)) => return server.reply(&id, answer),
                    Some(Err(key)) if asked.as_ref() != Some(&key) => {
                        let task = params["taskId"].clone();
                        let mut form = tasks::ask_form();
                        form["_meta"] =
                            json!({"io.modelcontextprotocol/related-task": {"taskId": task}});
                        server.send(&json!({"jsonrpc": "2.0", "id": key, "method": "elicitation/create", "params": form}));
                        asked = Some(key);
                    }
                    Some(Err(key)) => {
                        let answers = server.answers.lock().unwrap().clone();
                        if let Some(answer) =
                            answers.iter().find(|answer| answer["id"] == key.as_str())
                        {
                            let task = params["taskId"].as_str().unwrap_or_default();
                            server.tasks().answered(task, &answer["result"]);
                        }
                    }
                    None => {}
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
    }

    /// A list or read result of the stateless era, its cache hints `--ttl-ms` and
    /// `--cache-scope` if given.
    pub(crate) fn cacheable(&self, result: Value) -> Value {
        let mut result = stateless::cacheable(result, NAME);
        if let Some(ttl) = self.options.get("ttl-ms") {
            result["ttlMs"] = json!(ttl.parse::<u64>().unwrap());
        }
        if let Some(scope) = self.options.get("cache-scope") {
            result["cacheScope"] = json!(scope);
        }
        result
    }

    /// `subscriptions/listen`: acknowledged, then kept open for list changes (and, in mode
    /// `tasks`, for the end of the tasks it names).
    pub(crate) fn listen(self: &Arc<Self>, id: Value, params: &Value) {
        if self.mode == "listen-no-ack" {
            return;
        }
        // A change made before the stream is open, which no stream carries: the client
        // must list again once acknowledged to see it.
        if self.options.contains_key("grow-at-start") {
            *self.grown.lock().unwrap() = true;
        }
        let mut honoured = vec!["toolsListChanged"];
        if resources::served(&self.mode) {
            honoured.extend(["resourcesListChanged", "promptsListChanged"]);
        }
        let mut acknowledgement = stateless::acknowledge(&id, params, &honoured);
        let task_ids = params["notifications"]["taskIds"].clone();
        let watch_tasks = self.tasks.is_some() && task_ids.is_array();
        if watch_tasks {
            acknowledgement["params"]["notifications"]["taskIds"] = task_ids.clone();
        }
        self.send(&acknowledgement);
        if self.mode == "listen-ends" {
            let ended = json!({"_meta": {stateless::META_SUBSCRIPTION: id}});
            return self.answer(&id, Ok(stateless::complete(ended, NAME)));
        }
        let tools = params["notifications"]["toolsListChanged"] == json!(true);
        self.listens.lock().unwrap().push((id.clone(), tools));
        if watch_tasks {
            for task in task_ids
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
            {
                self.notify_task_end(id.clone(), task.to_owned());
            }
        }
    }

    /// Mode `tasks`: once task `task` ends, `notifications/tasks` with the whole task on the
    /// listen stream `listen`, unless that stream was cancelled first.
    pub(crate) fn notify_task_end(self: &Arc<Self>, listen: Value, task: String) {
        let server = self.clone();
        thread::spawn(move || {
            loop {
                thread::sleep(Duration::from_millis(20));
                let open = (server.listens.lock().unwrap())
                    .iter()
                    .any(|(id, _)| *id == listen);
                if !open {
                    return;
                }
                match server.tasks().snapshot(&task) {
                    Some((mut detailed, true)) => {
                        detailed["_meta"] = json!({ stateless::META_SUBSCRIPTION: listen });
                        let mut note =
                            json!({"jsonrpc": "2.0", "method": tasks::STATUS_NOTIFICATION});
                        // Moved in: `json!` would copy a large result.
                        note["params"] = detailed;
                        return server.send(&note);
                    }
                    Some((_, false)) => {}
                    None => return,
                }
            }
        });
    }
}
