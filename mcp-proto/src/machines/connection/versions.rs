//! What a server says of the revision it speaks: its `initialize` result, the revisions a
//! -32022 names, and the methods the stateless era no longer has.

use serde_json::Value;

use crate::model::error::{CloseReason, ErrorKind};
use crate::model::stateless;
use crate::model::types::{Implementation, ServerInfo};

use crate::model::versions::{HANDSHAKE_VERSIONS, STATELESS_VERSIONS};
use crate::wire::jsonrpc::RpcError;

pub(super) fn parse_initialize_result(
    result: Value,
    requested: &str,
) -> Result<ServerInfo, CloseReason> {
    let invalid = |detail: &str| CloseReason::InvalidInitializeResult(detail.to_owned());
    let Value::Object(mut result) = result else {
        return Err(invalid("not an object"));
    };
    let Some(Value::String(version)) = result.remove("protocolVersion") else {
        return Err(invalid("`protocolVersion` is missing or not a string"));
    };
    if !HANDSHAKE_VERSIONS.contains(&version.as_str()) {
        return Err(CloseReason::UnsupportedVersion {
            requested: requested.to_owned(),
            offered: version,
        });
    }
    // `serverInfo` and `capabilities` are required by the spec, but a server that forgets them
    // is still usable, so only a wrong `serverInfo` is fatal (`null` counts as missing);
    // capabilities of an odd shape declare nothing.
    let server = match result.remove("serverInfo") {
        None | Some(Value::Null) => Implementation::default(),
        Some(info) => serde_json::from_value(info)
            .map_err(|error| invalid(&format!("`serverInfo`: {error}")))?,
    };
    let (capabilities, instructions) =
        crate::model::stateless::capabilities_and_instructions(&mut result);
    Ok(ServerInfo {
        protocol_version: version,
        supported_versions: Vec::new(),
        server,
        capabilities,
        instructions,
        fallback: None,
    })
}

/// Whether `method` is gone from the stateless era.
pub(super) fn not_stateless(method: &str) -> bool {
    matches!(method, "ping" | "logging/setLevel")
}

/// The stateless revision a -32022 names that we speak, if it is one.
pub(super) fn other_stateless_revision(error: &RpcError) -> Option<&'static str> {
    match error.kind() {
        ErrorKind::UnsupportedVersion { supported, .. } => {
            stateless::mutual(&supported, STATELESS_VERSIONS)
        }
        _ => None,
    }
}
