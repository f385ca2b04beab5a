//! `serve --proxy`: one tool, `mcp`, instead of every tool of every server, so that a model's
//! context holds one short definition however many servers there are.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::gateway::Gateway;
use crate::gateway::errors::tool_error;
use crate::gateway::search::text_result;
use crate::hub::ToolEntry;

/// The one tool's name.
pub(crate) const NAME: &str = "mcp";

/// How many tools `action: "search"` returns.
const SEARCH_LIMIT: usize = 10;

/// The one tool's definition.
pub(crate) fn tool() -> Value {
    json!({
        "name": NAME,
        "description": "Use the tools of other MCP servers. action \"search\" with a query \
                        returns the tools that best match it, best first; action \"list\" \
                        with a server returns that server's tools and their input schemas \
                        (without a server, the servers); action \"call\" calls one tool of \
                        one server with input.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["search", "list", "call"]},
                "query": {"type": "string", "description": "What you want to do (for search)."},
                "server": {"type": "string", "description": "A server name."},
                "tool": {"type": "string", "description": "The tool's own name (for call)."},
                "input": {"type": "object", "description": "The tool's arguments (for call)."},
            },
            "required": ["action"],
        },
    })
}

/// What one `mcp` call comes to.
pub(crate) enum Step {
    /// A tool of a backend, with these arguments, called like any other: a stateless-era host
    /// answers its forms in input rounds.
    Call(Box<ToolEntry>, Value),
    /// A tool result, at once: a list, a search, or a mistake (with `isError`).
    Answered(Value),
}

/// Reads one `mcp` call.
pub(crate) async fn run(gateway: &Arc<Gateway>, input: Value) -> Step {
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let served = gateway.servers();
    let backend = match text("server") {
        None => None,
        Some(given) => match gateway.hub.resolve(&given) {
            Ok(name) if served.contains(&name) => Some(name),
            _ => {
                let known = served.join(", ");
                let error = tool_error(&format!("unknown server {given}; servers: {known}"));
                return Step::Answered(error);
            }
        },
    };
    let result = match (text("action").as_deref(), backend) {
        (Some("list"), None) => {
            let listed: Vec<Value> = (gateway.hub.status().into_iter())
                .filter(|status| served.contains(&status.name))
                .map(|status| json!({"server": status.name, "state": status.state}))
                .collect();
            text_result(&json!({ "servers": listed }))
        }
        (Some("list"), Some(backend)) => {
            let catalogue = gateway.hub.tools_of(std::slice::from_ref(&backend)).await;
            if let Some((_, error)) = catalogue.failures.first() {
                return Step::Answered(tool_error(&crate::hints::explained(error)));
            }
            let tools: Vec<Value> = (catalogue.tools.iter())
                .map(|entry| {
                    json!({
                        "name": entry.tool.name,
                        "description": entry.tool.description,
                        "inputSchema": entry.tool.input_schema,
                    })
                })
                .collect();
            text_result(&json!({ "server": backend, "tools": tools }))
        }
        (Some("call"), Some(backend)) => {
            let Some(tool) = text("tool") else {
                return Step::Answered(tool_error("call needs a tool"));
            };
            return match gateway.hub.find_tool(&backend, &tool).await {
                Ok(entry) => {
                    let arguments = input.get("input").cloned().unwrap_or(json!({}));
                    Step::Call(Box::new(entry), arguments)
                }
                Err(error) => Step::Answered(tool_error(&crate::hints::explained(&error))),
            };
        }
        (Some("call"), None) => tool_error("call needs a server"),
        (Some("search"), _) => {
            let query = text("query").unwrap_or_default();
            super::search::found(gateway, &query, SEARCH_LIMIT).await
        }
        _ => tool_error("action must be \"search\", \"list\" or \"call\""),
    };
    Step::Answered(result)
}
