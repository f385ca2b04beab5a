//! `serve --search`: three tools instead of every tool of every server. `search_tools` ranks
//! the tools by a plain-language query, `describe_tool` gives one tool's whole definition, and
//! `call_tool` calls it through the same path, policy, pins and `ask` as a direct call.

use mcp_smol::proto::RpcError;
use serde_json::{Value, json};

use crate::gateway::{Gateway, invalid_params};
use crate::search;

/// The tool that searches.
pub(crate) const SEARCH: &str = "search_tools";
/// The tool that gives one tool's whole definition.
pub(crate) const DESCRIBE: &str = "describe_tool";
/// The tool that calls one tool.
pub(crate) const CALL: &str = "call_tool";

/// How many results `search_tools` gives unless asked.
const LIMIT: usize = 10;

/// The three tools' definitions.
pub(crate) fn tools() -> Value {
    let name = json!({"type": "string",
                      "description": "The tool's name as search_tools gives it (SERVER__TOOL)."});
    json!([
        {
            "name": SEARCH,
            "description": "Find tools of the connected MCP servers by what they do. Returns \
                            the best matches first, each with its name, a one-line \
                            description and a score; then describe_tool gives a tool's \
                            parameters and call_tool calls it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string",
                              "description": "What you want to do, in plain words."},
                    "limit": {"type": "integer", "minimum": 1,
                              "description": "How many tools to return (default 10)."},
                },
                "required": ["query"],
            },
        },
        {
            "name": DESCRIBE,
            "description": "The whole definition of one tool: its description and the JSON \
                            Schema of its arguments.",
            "inputSchema": {
                "type": "object",
                "properties": {"name": name},
                "required": ["name"],
            },
        },
        {
            "name": CALL,
            "description": "Call one tool by name with its arguments.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": name,
                    "arguments": {"type": "object",
                                  "description": "The tool's arguments, as describe_tool's \
                                                  inputSchema says."},
                },
                "required": ["name"],
            },
        },
    ])
}

/// The served servers' tools their config always loads (`always_load`), as `tools/list`
/// shows them beside the three, under the hub's names (which `tools/call` takes directly).
pub(crate) async fn always_loaded(gateway: &Gateway) -> Vec<Value> {
    let servers: Vec<String> = (gateway.servers().into_iter())
        .filter(|server| (gateway.hub.server_spec(server)).is_ok_and(|s| !s.always_load.is_empty()))
        .collect();
    if servers.is_empty() {
        return Vec::new();
    }
    let catalogue = search::catalogue(&gateway.hub, &servers).await;
    let tools = catalogue
        .tools
        .iter()
        .filter(|entry| is_always_loaded(gateway, entry));
    tools
        .map(|entry| {
            let mut definition = serde_json::to_value(&*entry.tool).unwrap_or_default();
            definition["name"] = json!(entry.name);
            definition
        })
        .collect()
}

/// Whether `entry`'s server config always loads it.
pub(crate) fn is_always_loaded(gateway: &Gateway, entry: &crate::hub::ToolEntry) -> bool {
    (gateway.hub.server_spec(&entry.server)).is_ok_and(|spec| spec.always_loads(&entry.tool.name))
}

/// Runs `search_tools` or `describe_tool` (the gateway runs `call_tool` as it runs any call);
/// an unknown tool name is the host's mistake (-32602), as for a direct call, and every other
/// failure a tool result with `isError`.
pub(crate) async fn run(gateway: &Gateway, tool: &str, input: Value) -> Result<Value, RpcError> {
    let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
    match tool {
        SEARCH => {
            let limit = input.get("limit").and_then(Value::as_u64);
            let limit = limit.map_or(LIMIT, |n| usize::try_from(n).unwrap_or(usize::MAX));
            Ok(found(gateway, text("query"), limit).await)
        }
        DESCRIBE => match gateway.find(text("name")).await {
            Ok(entry) => {
                let mut definition = serde_json::to_value(&*entry.tool).unwrap_or_default();
                definition["name"] = json!(entry.name);
                Ok(text_result(&definition))
            }
            Err(error) => Ok(crate::gateway::tool_error(&error.message)),
        },
        _ => Err(unknown(tool)),
    }
}

/// A host's call of a tool `serve --search` does not list (-32602).
pub(crate) fn unknown(tool: &str) -> RpcError {
    invalid_params(format!(
        "unknown tool {tool}; with --search the tools are {SEARCH}, {DESCRIBE} and {CALL}, and \
         those the config loads always (always_load)"
    ))
}

/// The `limit` tools of the served servers that best match `query`, as a tool result.
pub(crate) async fn found(gateway: &Gateway, query: &str, limit: usize) -> Value {
    if query.trim().is_empty() {
        return crate::gateway::tool_error("search needs a query: what you want to do");
    }
    let catalogue = search::catalogue(&gateway.hub, &gateway.servers()).await;
    let left_out: Vec<String> = (catalogue.failures.iter())
        .map(|(server, error)| format!("{server}: {}", crate::hints::explained(error)))
        .collect();
    let (index, unreadable) = search::with_installed_model(catalogue.tools);
    if let Some(why) = unreadable {
        warn_once(&why);
    }
    let hits: Vec<Value> = (index.search(query, limit).iter())
        .map(search::Hit::to_json)
        .collect();
    let mut result = json!({ "tools": hits });
    if !left_out.is_empty() {
        result["serversLeftOut"] = json!(left_out);
    }
    text_result(&result)
}

/// Says `why` on stderr (the host's log of us) the first time only: a host searches often.
fn warn_once(why: &str) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        crate::output::diagnostic(&format!("mcp-cli: warning: {why}"));
    }
}

/// A tool result holding `value`, as text for the model and as structured content.
pub(crate) fn text_result(value: &Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value})
}
