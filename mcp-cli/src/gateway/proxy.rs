//! `serve --proxy`: one tool, `mcp`, instead of every tool of every server, so that a model's
//! context holds one short definition however many servers there are.

use std::sync::Arc;

use mcp_smol::proto::{
    RawResult, RpcError,
    server::{ClientInfo, HostInput, HostRequestId},
};
use serde_json::{Map, Value, json};

use crate::gateway::{Gateway, HostCall, HostLink, tool_error};

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

/// How a host's `mcp` call came: its request, and for a stateless-era host what its `_meta`
/// said and the input rounds it answers.
pub(crate) struct Asked<'a> {
    pub(crate) host: &'a HostLink,
    pub(crate) id: HostRequestId,
    pub(crate) era: Option<&'a ClientInfo>,
    pub(crate) rounds: Option<HostInput>,
    /// The host's trace context, passed on to the backend.
    pub(crate) trace: Map<String, Value>,
}

/// Runs one `mcp` call; every outcome is a tool result, a mistake one with `isError`. A
/// `call` is a call like any other: a stateless-era host answers its forms in input rounds.
pub(crate) async fn run(
    gateway: &Arc<Gateway>,
    asked: Asked<'_>,
    input: Value,
) -> Result<RawResult, RpcError> {
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let served = gateway.servers();
    let backend = match text("server") {
        None => None,
        Some(given) => match gateway.hub.resolve(&given) {
            Ok(name) if served.contains(&name) => Some(name),
            _ => {
                let known = served.join(", ");
                let error = tool_error(&format!("unknown server {given}; servers: {known}"));
                return Ok(error.into());
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
                return Ok(tool_error(&crate::hints::explained(error)).into());
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
                return Ok(tool_error("call needs a tool").into());
            };
            let entry = match gateway.hub.find_tool(&backend, &tool).await {
                Ok(entry) => entry,
                Err(error) => return Ok(tool_error(&crate::hints::explained(&error)).into()),
            };
            let call = HostCall {
                entry,
                arguments: input.get("input").cloned().unwrap_or(json!({})),
                trace: asked.trace,
                progress: true,
            };
            let Asked {
                host,
                id,
                era,
                rounds,
                ..
            } = asked;
            return gateway.call_for_host(host, id, call, era, rounds).await;
        }
        (Some("call"), None) => tool_error("call needs a server"),
        (Some("search"), _) => {
            let query = text("query").unwrap_or_default();
            super::search::found(gateway, &query, SEARCH_LIMIT).await
        }
        _ => tool_error("action must be \"search\", \"list\" or \"call\""),
    };
    Ok(result.into())
}

/// A tool result holding `value`, as text for the model and as structured content.
pub(crate) fn text_result(value: &Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value})
}
