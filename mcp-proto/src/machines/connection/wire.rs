//! A request of ours as it goes on the wire, and what a transport that sends each message
//! on its own (HTTP) is told of what it sends.

use serde_json::{Map, Value};

use crate::model::params::{CallToolParams, Input, Meta, ObjectParams, StatelessMeta};
use crate::model::request::Params;
use crate::model::request::RequestId;
use crate::wire::jsonrpc;

/// What a queued message is, for a transport that sends each message on its own (HTTP), so
/// that it never parses what it sends:
///
/// - `Initialize` and `Initialized`: the handshake era's two messages.
/// - `Discover`: `server/discover`, either the probe of [`Protocol::Auto`](crate::Protocol::Auto)
///   (`probe`) or the
///   discover of a fixed stateless revision; `version` is the revision in its `_meta` (the
///   `MCP-Protocol-Version` header).
/// - `Request`: any other request of ours, by the caller's id (a request sent again, for a
///   multi-round-trip retry or in another revision, keeps it under a new wire id). Its
///   [`Outgoing`] details come only in the stateless era, and only once the transport asked
///   for them with [`Connection::tag_requests`](super::Connection::tag_requests), so stdio pays nothing for them.
/// - `Cancelled`: `notifications/cancelled` for that request (over HTTP, the stateless era
///   cancels by closing the request's stream instead).
/// - `Other`: any other notification, or an answer to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sent {
    Initialize(RequestId),
    Initialized,
    Discover {
        id: RequestId,
        probe: bool,
        version: &'static str,
    },
    Request(RequestId, Option<Box<Outgoing>>),
    Cancelled(RequestId),
    Other,
}

/// A stateless-era request as its HTTP headers need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outgoing {
    /// The `Mcp-Method` header.
    pub(crate) method: String,
    /// The `MCP-Protocol-Version` header, equal to the `_meta`'s.
    pub(crate) version: &'static str,
    /// The `Mcp-Name` header: `params.name` of `tools/call` and `prompts/get`, `params.uri`
    /// of `resources/read`.
    pub(crate) name: Option<String>,
    /// `tools/call`: the arguments, for the `Mcp-Param-*` headers a tool's `x-mcp-header`
    /// asks for.
    pub(crate) arguments: Option<Value>,
}
/// Request `caller` as it goes on the wire under id `wire`: in the stateless era with `meta`'s
/// `_meta` members, and on a retry with `input`.
pub(super) fn encode(
    meta: Option<&StatelessMeta>,
    wire: u64,
    caller: u64,
    method: &str,
    params: &Params,
    input: Input<'_>,
) -> Vec<u8> {
    let plain = meta.is_none() && input.responses.is_none() && input.state.is_none();
    match params {
        Params::CallTool {
            name,
            arguments,
            progress_token,
            meta: added,
            task,
        } => {
            let empty = Value::Object(Map::new());
            let arguments = if arguments.is_null() {
                &empty
            } else {
                arguments
            };
            let call = |token| CallToolParams {
                name,
                arguments,
                input_responses: input.responses,
                request_state: input.state,
                task: task.as_deref(),
                meta: Meta {
                    progress_token: Some(token),
                    caller: added.as_ref(),
                    era: meta,
                },
            };
            match progress_token {
                // The caller's id, whatever the round: it stays the request's one token.
                None => jsonrpc::request(wire, method, Some(&call(&Value::from(caller)))),
                Some(token) => jsonrpc::request(wire, method, Some(&call(token))),
            }
        }
        Params::Value(Value::Object(params)) if !plain => {
            let params = ObjectParams {
                params: Some(params),
                input,
                era: meta,
            };
            jsonrpc::request(wire, method, Some(&params))
        }
        // Array params have nowhere to put `_meta`; they go as given.
        Params::Value(params) => jsonrpc::request(wire, method, Some(params)),
        Params::None if !plain => {
            let params = ObjectParams {
                params: None,
                input,
                era: meta,
            };
            jsonrpc::request(wire, method, Some(&params))
        }
        Params::None => jsonrpc::request::<Value>(wire, method, None),
    }
}

/// What the HTTP headers of a stateless-era request need.
pub(super) fn outgoing(version: &'static str, method: &str, params: &Params) -> Outgoing {
    let member = |name: &str| match params {
        Params::Value(params) => params.get(name)?.as_str().map(str::to_owned),
        _ => None,
    };
    let (name, arguments) = match (method, params) {
        (
            "tools/call",
            Params::CallTool {
                name, arguments, ..
            },
        ) => (Some(name.clone()), Some(arguments.clone())),
        ("tools/call", Params::Value(params)) => (member("name"), params.get("arguments").cloned()),
        ("prompts/get", _) => (member("name"), None),
        ("resources/read", _) => (member("uri"), None),
        (method, _) if crate::model::tasks::TASK_METHODS.contains(&method) => {
            (member("taskId"), None)
        }
        _ => (None, None),
    };
    Outgoing {
        method: method.to_owned(),
        version,
        name,
        arguments,
    }
}
