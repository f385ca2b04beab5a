//! The stateless era (revision 2026-07-28) as both fixture servers speak it, written from the
//! revision's pages: the `_meta` every request must carry, `server/discover`'s result, the fields
//! every result carries (`resultType`, the server's identity, cache hints), and the `ask` tool's
//! multi-round-trip exchange. What a transport adds (stdio's lines, HTTP's headers and statuses)
//! stays in each fixture.

use serde_json::{Value, json};

/// The one stateless revision there is.
pub const REVISION: &str = "2026-07-28";

pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const HEADER_MISMATCH: i64 = -32020;
pub const MISSING_CAPABILITY: i64 = -32021;
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// How long a client may keep a list or a read, in the results that carry cache hints.
pub const TTL_MS: u64 = 60_000;

/// The input schema of the fixture's `schemas` tool (mode `odd-tools`): JSON Schema 2020-12
/// keywords a client must pass on as sent, keys deliberately out of alphabetical order, a
/// `$ref` to a remote document that must never be fetched.
pub const SCHEMA_2020_INPUT: &str = r##"{"type":"object","$schema":"https://json-schema.org/draft/2020-12/schema","$id":"https://example.invalid/schemas/point","properties":{"point":{"$ref":"#/$defs/point"},"tags":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false},"remote":{"$ref":"https://example.invalid/never-fetched.json"},"kind":{"enum":["a","b"]}},"$defs":{"point":{"type":"object","properties":{"y":{"type":"number"},"x":{"type":"number"}},"unevaluatedProperties":false}},"dependentSchemas":{"tags":{"required":["point"]}},"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["point"]},"else":{"required":["tags"]},"$comment":"kept as sent"}"##;

/// The output schema of the fixture's `schemas` tool.
pub const SCHEMA_2020_OUTPUT: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","unevaluatedProperties":{"type":"string"},"minProperties":1,"$anchor":"out"}"##;

/// A JSON-RPC error object.
pub fn error(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// Whether a request says it is of the stateless era: its `_meta` names a revision.
pub fn is_stateless(params: &Value) -> bool {
    params["_meta"].get(META_VERSION).is_some()
}

/// The `_meta` check every stateless request goes through: both required fields present
/// (else -32602), and a revision in `supported` (else -32022 with `supported` and
/// `requested`). Returns the revision.
pub fn check_meta<'a>(params: &'a Value, supported: &[&str]) -> Result<&'a str, Value> {
    let version = required_meta(params)?;
    match supported.contains(&version) {
        true => Ok(version),
        false => Err(unsupported_version(version, supported)),
    }
}

/// The revision a request's `_meta` names, once both required fields are there (else -32602).
pub fn required_meta(params: &Value) -> Result<&str, Value> {
    let meta = &params["_meta"];
    let missing = |key: &str| {
        error(
            INVALID_PARAMS,
            format!("Invalid params: _meta[\"{key}\"] is required"),
        )
    };
    let Some(version) = meta.get(META_VERSION) else {
        return Err(missing(META_VERSION));
    };
    if !meta.get(META_CAPABILITIES).is_some_and(Value::is_object) {
        return Err(missing(META_CAPABILITIES));
    }
    Ok(version.as_str().unwrap_or_default())
}

/// -32022: the revision asked for is not one of `supported`.
pub fn unsupported_version(requested: &str, supported: &[&str]) -> Value {
    json!({"code": UNSUPPORTED_VERSION, "message": "Unsupported protocol version",
           "data": {"supported": supported, "requested": requested}})
}

/// The answer to `initialize` from a server of this era only: it has no handshake, and names
/// the revisions it speaks, as the revision asks (a legacy client can show nothing else).
pub fn initialize_refusal(params: &Value, supported: &[&str]) -> Value {
    let requested = params["protocolVersion"].as_str().unwrap_or_default();
    let mut refusal = unsupported_version(requested, supported);
    refusal["message"] = json!(format!(
        "Unsupported protocol version: this server has no initialize handshake and speaks only {}",
        supported.join(", ")
    ));
    refusal
}

/// Appends the revisions this server speaks to an error's message (for errors to `initialize`).
pub fn name_revisions(mut error: Value, supported: &[&str]) -> Value {
    let message = error["message"].as_str().unwrap_or_default();
    error["message"] = json!(format!(
        "{message} (this server speaks only protocol revision {})",
        supported.join(", ")
    ));
    error
}

/// `result` as a finished one: `resultType` and the server's identity.
pub fn complete(mut result: Value, server: &str) -> Value {
    result["resultType"] = json!("complete");
    result["_meta"][META_SERVER_INFO] = json!({"name": server, "version": "1.0.0"});
    result
}

/// `result` as a finished one that may be cached (lists, reads, discovery).
pub fn cacheable(result: Value, server: &str) -> Value {
    let mut result = complete(result, server);
    result["ttlMs"] = json!(TTL_MS);
    result["cacheScope"] = json!("public");
    result
}

/// `server/discover`'s result.
pub fn discover(capabilities: Value, server: &str, supported: &[&str]) -> Value {
    let result = json!({"supportedVersions": supported, "capabilities": capabilities,
                        "instructions": "fixture server"});
    cacheable(result, server)
}

/// The acknowledgement of a `subscriptions/listen` request `id`: of what it asked in its
/// `notifications` filter, only what `honoured` says this server sends.
pub fn acknowledge(id: &Value, params: &Value, honoured: &[&str]) -> Value {
    let mut agreed = json!({});
    for kind in honoured {
        if params["notifications"][kind] == json!(true) {
            agreed[kind] = json!(true);
        }
    }
    json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
           "params": {"_meta": {META_SUBSCRIPTION: id}, "notifications": agreed}})
}

/// A notification of `method` on the listen stream opened by request `id`.
pub fn on_stream(id: &Value, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": {"_meta": {META_SUBSCRIPTION: id}}})
}

/// How the `ask` tool plays its rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// One form, then the answer, if the state came back untouched.
    Once,
    /// A new form and a new state every round, for ever.
    Loop,
    /// `Once`, with a state of 1 MiB.
    Huge,
}

/// The `ask` tool's definition.
pub fn ask_tool() -> Value {
    json!({"name": "ask", "description": "Asks for a name (input_required), then greets it.",
           "inputSchema": {"type": "object", "properties": {}}})
}

/// A `tools/call` of `ask`: an elicitation form and a state the first time; on the retry,
/// what the form returned, or a tool error when the state did not come back byte for byte.
/// Refused with -32021 when the client has not declared elicitation.
pub fn ask(params: &Value, how: Ask, server: &str) -> Result<Value, Value> {
    if params["_meta"][META_CAPABILITIES]
        .get("elicitation")
        .is_none()
    {
        let mut refusal = error(
            MISSING_CAPABILITY,
            "Missing required client capability: elicitation",
        );
        refusal["data"] = json!({"requiredCapabilities": {"elicitation": {}}});
        return Err(refusal);
    }
    let returned = params.get("requestState");
    let answer = &params["inputResponses"]["name"];
    let state = match (how, returned) {
        (_, None) if params.get("inputResponses").is_some() => {
            return Ok(tool_error("requestState missing from the retry", server));
        }
        (_, None) => first_state(how),
        (Ask::Loop, Some(returned)) => {
            let round: u64 = (returned.as_str())
                .and_then(|state| state.strip_prefix("round-")?.parse().ok())
                .unwrap_or(0);
            format!("round-{}", round + 1)
        }
        (_, Some(returned)) => {
            let expected = first_state(how);
            let returned = returned.as_str().unwrap_or_default();
            if returned != expected {
                return Ok(tool_error(&altered(&expected, returned), server));
            }
            if answer.is_object() {
                let text = format!(
                    "{} {}",
                    answer["action"].as_str().unwrap_or("?"),
                    answer["content"]
                );
                return Ok(complete(
                    json!({"content": [{"type": "text", "text": text}]}),
                    server,
                ));
            }
            // The form went unanswered: ask again, as the revision recommends.
            expected
        }
    };
    let form = json!({"method": "elicitation/create", "params": {
        "mode": "form",
        "message": "What is your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    }});
    let mut result = json!({"resultType": "input_required", "inputRequests": {"name": form},
                            "requestState": state});
    result["_meta"][META_SERVER_INFO] = json!({"name": server, "version": "1.0.0"});
    Ok(result)
}

/// The state of the first round. The plain one has what a careless client mangles: quotes,
/// backslashes, non-ASCII, a trailing space.
fn first_state(how: Ask) -> String {
    match how {
        Ask::Once => "ask/1: \"quoted\" \\back\\slash é ☃ +/= ".to_owned(),
        Ask::Loop => "round-1".to_owned(),
        Ask::Huge => huge_state(),
    }
}

/// 1 MiB of random-looking but reproducible base64 characters (xorshift from a fixed seed).
pub fn huge_state() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u64 = 0x2026_0728_dead_beef;
    (0..1024 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x >> 58) as usize] as char
        })
        .collect()
}

/// How a returned state differs from the one sent.
fn altered(expected: &str, returned: &str) -> String {
    let at = (expected.bytes().zip(returned.bytes()))
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(returned.len()));
    format!(
        "requestState came back altered: sent {} bytes, got {} bytes, first difference at byte {at}",
        expected.len(),
        returned.len()
    )
}

fn tool_error(text: &str, server: &str) -> Value {
    complete(
        json!({"content": [{"type": "text", "text": text}], "isError": true}),
        server,
    )
}
