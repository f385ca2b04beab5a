//! Tasks through `mcp-cli serve` for hosts that ask for them: a handshake-era host (our own
//! client at 2025-11-25) that sends `task` on its calls gets tasks from backends of both eras
//! and drives them with `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel`; a form
//! the backend asks for before or while it runs a task reaches the host, in either host era.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_smol::proto::{
    CallToolResult, ClientCapabilities, Era, Protocol, Request,
    tasks::{Task, TaskEnd, TaskWatch},
};
use mcp_smol::{Client, Options};
use serde_json::{Value, json};

use crate::support::{bounded, close_and_check, quick, start, text};
use crate::tasks::{ERAS, Tasks, completed_through_the_gateway, gateway};

/// Our client as a host at `revision`, declaring elicitation and (stateless era) the tasks
/// extension.
fn host(revision: &'static str) -> Options {
    let mut options = quick();
    options.core.protocol = Protocol::Revision(revision);
    options.core.handshake_timeout = Duration::from_secs(30);
    options.core.request_timeout = Duration::from_secs(30);
    options.core.capabilities = ClientCapabilities {
        elicitation: true,
        tasks: true,
        ..ClientCapabilities::default()
    };
    options
}

/// Answers every form the host is asked with the name Grace; counts them.
async fn answer_forms(client: &Client) -> Arc<AtomicUsize> {
    let asked = client.server_requests().await;
    let count = Arc::new(AtomicUsize::new(0));
    let (counted, client) = (count.clone(), client.clone());
    smol::spawn(async move {
        while let Ok(request) = asked.recv().await {
            assert_eq!(request.method, "elicitation/create");
            counted.fetch_add(1, Ordering::SeqCst);
            let answer = json!({"action": "accept", "content": {"name": "Grace"}});
            client.respond(request.id, Ok(answer)).await;
        }
    })
    .detach();
    count
}

/// Calls `tool` as a task, as a handshake-era host does; the task as sent, and as read.
async fn call_as_task(client: &Client, tool: &str, arguments: Value) -> (Value, Task) {
    let call = Request::call_tool(tool, arguments).as_task(None).untyped();
    let raw = client.request(call).await.unwrap();
    let task = Task::created_by(&raw)
        .unwrap_or_else(|| panic!("not a task: {raw}"))
        .unwrap();
    (raw["task"].clone(), task)
}

/// Waits for a handshake-era task through the gateway; its text.
async fn finish(client: &Client, task: Task) -> String {
    let mut watch = TaskWatch::new(Instant::now(), Era::Handshake, task);
    let end = client.wait_task(&mut watch, None, &|_| {}).await.unwrap();
    let TaskEnd::Completed(result) = end else {
        panic!("{end:?}")
    };
    text(&CallToolResult::from_value(result).unwrap())
}

#[test]
fn a_handshake_host_that_asks_gets_tasks_from_backends_of_both_eras() {
    for era in ERAS {
        let tasks = Tasks::new("gateway-handshake", era, &[]);
        let command = gateway(&tasks.scratch);
        bounded(async {
            let client = start(&command, host("2025-11-25"));
            let info = client.wait_ready().await.unwrap();
            let declared = info.capabilities.tasks;
            assert!(
                declared.tool_calls && declared.list && declared.cancel,
                "{era}"
            );
            let forms = answer_forms(&client).await;

            // The backend's task, in this era's spelling, under an id naming the backend.
            let (sent, task) = call_as_task(&client, "fx__task_sleep", json!({"ms": 300})).await;
            assert!(task.id.starts_with("fx/task-"), "{era}: {sent}");
            assert!(
                sent["createdAt"].is_string() && sent.get("ttl").is_some(),
                "{sent}"
            );
            assert!(
                sent.get("ttlMs").is_none() && sent.get("result").is_none(),
                "{sent}"
            );
            assert_eq!(finish(&client, task.clone()).await, "slept 300 ms", "{era}");
            let listed = client.request(Request::list_tasks(None)).await.unwrap();
            let found = (listed["tasks"].as_array().unwrap().iter())
                .find(|listed| listed["taskId"] == task.id.as_str());
            assert_eq!(found.unwrap()["status"], "completed", "{era}: {listed}");

            // A form while the task runs, and one before the backend makes it: the host's.
            let (_, asking) = call_as_task(&client, "fx__task_ask", json!({})).await;
            assert_eq!(finish(&client, asking).await, "hello Grace", "{era}");
            let (_, first) = call_as_task(&client, "fx__task_ask_first", json!({})).await;
            assert_eq!(finish(&client, first).await, "hello Grace", "{era}");
            assert_eq!(forms.load(Ordering::SeqCst), 2, "{era}");

            // A failed task: `tasks/result` is the backend's error.
            let (_, failing) = call_as_task(&client, "fx__task_fail", json!({})).await;
            let mut watch = TaskWatch::new(Instant::now(), Era::Handshake, failing);
            let end = client.wait_task(&mut watch, None, &|_| {}).await.unwrap();
            assert!(matches!(&end, TaskEnd::Failed(error) if error.message.contains("disk full")));

            // Cancelled through the gateway: the answer is the task, and the backend hears.
            let (_, long) =
                call_as_task(&client, "fx__task_sleep", json!({"ms": 1u64 << 40})).await;
            let cancelled = client
                .request(Request::cancel_task(&long.id))
                .await
                .unwrap();
            assert_eq!(cancelled["taskId"], long.id.as_str());
            assert_eq!(cancelled["status"], "cancelled", "{era}: {cancelled}");

            // A tool the backend answers at once still gives the task asked for, ended.
            let (sent, echo) = call_as_task(&client, "fx__echo", json!({"text": "hi"})).await;
            assert!(echo.id.starts_with("gateway-"), "{sent}");
            assert_eq!(sent["status"], "completed");
            let result = client
                .request(Request::task_result(&echo.id))
                .await
                .unwrap();
            assert_eq!(result["content"][0]["text"], "hi", "{result}");
            let related = &result["_meta"]["io.modelcontextprotocol/related-task"];
            assert_eq!(related["taskId"], echo.id.as_str());
            let refused = client.request(Request::cancel_task(&echo.id)).await;
            assert!(refused.unwrap_err().to_string().contains("already ended"));

            // A call that did not ask is awaited for the host.
            let call = Request::call_tool("fx__task_sleep", json!({"ms": 300}));
            assert_eq!(text(&client.request(call).await.unwrap()), "slept 300 ms");
            close_and_check(&client).await;
        });
        assert_eq!(tasks.received("tasks/cancel"), 1, "{era}");
    }
}

#[test]
fn a_stateless_host_answers_the_form_a_backend_asks_before_its_task() {
    for era in ERAS {
        let tasks = Tasks::new("gateway-ask-first", era, &[]);
        let command = gateway(&tasks.scratch);
        bounded(async {
            let client = start(&command, host("2026-07-28"));
            let forms = answer_forms(&client).await;
            let call = Request::call_tool("fx__task_ask_first", json!({})).untyped();
            let raw = client.request(call).await.unwrap();
            let result = completed_through_the_gateway(&client, &raw, era).await;
            assert_eq!(text(&result), "hello Grace", "{era}");
            assert_eq!(forms.load(Ordering::SeqCst), 1, "{era}");
            close_and_check(&client).await;
        });
    }
}
