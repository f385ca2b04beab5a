//! What a host is told when something fails, in one place: the host's own mistakes are
//! JSON-RPC errors (-32602); a backend's JSON-RPC error passes through as it came; every other
//! failure of a tool call is a tool result with `isError`, so that the model reads why.

use mcp_smol::proto::{RawResult, RpcError};
use serde_json::{Value, json};

use crate::hints;
use crate::hub::{Catalogue, HubError};

/// The host asked for something that is not there, or not in a form we take (-32602).
pub(crate) fn invalid_params(message: String) -> RpcError {
    RpcError {
        code: RpcError::INVALID_PARAMS,
        message,
        data: None,
    }
}

/// A tool the host named that cannot be called: unknown, refused by the policy, or its
/// server down (the host may retry that one). The spec makes an unknown tool -32602.
pub(crate) fn unknown_tool(name: &str, error: HubError) -> RpcError {
    match error {
        HubError::Server { .. } | HubError::WrongProtocol { .. } | HubError::Unavailable { .. } => {
            invalid_params(format!("{name}: {}", hints::explained(&error)))
        }
        other => invalid_params(hints::explained(&other)),
    }
}

/// A resource no served server has (-32002, the spec's code for it).
pub(crate) fn resource_not_found(message: String) -> RpcError {
    RpcError {
        code: RpcError::RESOURCE_NOT_FOUND,
        message,
        data: None,
    }
}

/// A failure on our side or a backend's that is no JSON-RPC error of the backend's (-32603).
pub(crate) fn internal_error(message: String) -> RpcError {
    RpcError {
        code: RpcError::INTERNAL_ERROR,
        message,
        data: None,
    }
}

/// A backend's JSON-RPC error passes through as it is; any other failure is an internal error
/// that names the server and the cause.
pub(crate) fn backend_error(error: HubError) -> RpcError {
    match error.rpc_error() {
        Some(rpc) => rpc.clone(),
        None => internal_error(hints::explained(&error)),
    }
}

/// A backend's -32042 (URL elicitation required), split from any other failure: the caller
/// passes it on, or explains it, as its host can take it.
pub(crate) fn link_required(error: HubError) -> Result<RpcError, HubError> {
    match error.rpc_error() {
        Some(rpc) if rpc.code == RpcError::URL_ELICITATION_REQUIRED => Ok(rpc.clone()),
        _ => Err(error),
    }
}

/// A failed call of `tool` as its host sees the result: the backend's JSON-RPC error, a
/// result that broke its schema, or why the call could not be made.
pub(crate) fn failed_call(tool: &str, error: HubError) -> Value {
    match error {
        error @ HubError::OutputMismatch { .. } => mismatched(error),
        error => match error.rpc_error() {
            Some(rpc) => tool_error(&format!("{tool} failed: {}", rpc.text())),
            None => tool_error(&hints::explained(&error)),
        },
    }
}

/// A tool result that reports a failure to the model.
pub(crate) fn tool_error(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// A backend's result read as a value, to change or to hand on as one: one that cannot be
/// (nested too deep) is a tool error that says so.
pub(crate) fn read_result(result: RawResult) -> Value {
    (result.into_value())
        .unwrap_or_else(|error| tool_error(&format!("the tool's result cannot be read: {error}")))
}

/// A result whose `structuredContent` fails the tool's `outputSchema`, for the host: its
/// content kept, with why it failed first, as a tool error (which need not match the schema
/// the host was shown, so the structured content that breaks it is left out).
fn mismatched(error: HubError) -> Value {
    let message = error.to_string();
    let HubError::OutputMismatch { result, .. } = error else {
        return tool_error(&message);
    };
    let mut result = *result;
    let note = json!({"type": "text", "text": message});
    let Some(object) = result.as_object_mut() else {
        return tool_error(&message);
    };
    object.remove("structuredContent");
    object.insert("isError".to_owned(), json!(true));
    match object.get_mut("content").and_then(Value::as_array_mut) {
        Some(content) => content.insert(0, note),
        None => _ = object.insert("content".to_owned(), json!([note])),
    }
    result
}

/// The error for a prompt or resource the poisoning scan withholds from the catalogue
/// (`feature` is `prompt`, by its shown name, or `resource`, by its URI), if it is one: that
/// it is, and no more; neither the flagged text nor the command that clears it, which are the
/// person's to see and run.
pub(crate) fn withheld(catalogue: &Catalogue, feature: &str, asked: &str) -> Option<RpcError> {
    let flagged = (catalogue.withheld.iter()).any(|error| match error {
        HubError::FeatureFlagged {
            server,
            feature: flagged,
            name,
            ..
        } if *flagged == feature => match feature {
            "prompt" => crate::names::qualified(server, name) == asked,
            _ => name == asked,
        },
        _ => false,
    });
    flagged.then(|| {
        invalid_params(format!(
            "{feature} {asked} is withheld: the poisoning scan flagged it; a person must review \
             it on the command line"
        ))
    })
}
