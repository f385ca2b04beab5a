//! The `resources` modes: what they list, read and get.

use serde_json::{Value, json};

use crate::poisoned_offer;

/// The binary resource's bytes: every byte value, so any mangling shows.
pub(crate) fn blob() -> Vec<u8> {
    (0..=255u8).rev().collect()
}

pub(crate) const TEXT: &str = "hello from the fixture\n";

/// Whether `mode` serves resources and prompts.
pub(crate) fn served(mode: &str) -> bool {
    matches!(
        mode,
        "resources"
            | "repeat-resource-cursor"
            | "malformed-resources"
            | "ask-in-reads"
            | "poisoned-offer"
    )
}

pub(crate) fn answer(
    mode: &str,
    method: &str,
    params: &Value,
    page_size: u64,
    shifty: Option<String>,
) -> Result<Value, (i64, String)> {
    let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
    match method {
        "resources/list" => Ok(list(mode, params, page_size, shifty)),
        "resources/templates/list" => {
            let mut templates = vec![
                json!({"uriTemplate": "fx://items/{id}", "name": "item", "mimeType": "text/plain"}),
            ];
            if mode == "poisoned-offer" {
                templates.extend(poisoned_offer::templates());
            }
            Ok(json!({ "resourceTemplates": templates }))
        }
        "resources/read" => match uri {
            "fx://text/hello" => Ok(json!({"contents": [
                {"uri": uri, "mimeType": "text/plain", "text": TEXT}
            ]})),
            "fx://blob/bytes" => Ok(json!({"contents": [
                {"uri": uri, "mimeType": "application/octet-stream", "blob": base64(&blob())}
            ]})),
            _ => match uri.strip_prefix("fx://items/") {
                Some(item) => Ok(json!({"contents": [
                    {"uri": uri, "mimeType": "text/plain", "text": format!("item {item}")}
                ]})),
                None => Err((-32002, format!("Resource not found: {uri}"))),
            },
        },
        "prompts/list" => {
            let mut prompts = json!([
                {"name": "greet", "description": "Greets someone.", "arguments": [
                    {"name": "name", "description": "Who to greet", "required": true},
                    {"name": "greeting", "description": "The word to use"}
                ]},
                {"name": "plain", "description": "No arguments."}
            ]);
            if let (Some(description), Some(prompts)) = (shifty, prompts.as_array_mut()) {
                prompts.push(json!({"name": "shifty", "description": description}));
            }
            if let (true, Some(prompts)) = (mode == "poisoned-offer", prompts.as_array_mut()) {
                prompts.extend(poisoned_offer::prompts());
            }
            Ok(json!({ "prompts": prompts }))
        }
        "prompts/get" => {
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            let text = |key: &str| arguments.get(key).and_then(Value::as_str);
            match params.get("name").and_then(Value::as_str) {
                Some("greet") => match text("name") {
                    Some(name) => {
                        let greeting = text("greeting").unwrap_or("Hello");
                        Ok(json!({"description": "A greeting", "messages": [
                            {"role": "user", "content": {"type": "text", "text": format!("{greeting}, {name}!")}}
                        ]}))
                    }
                    None => Err((-32602, "Missing required argument: name".to_owned())),
                },
                Some("review") if mode == "poisoned-offer" => Ok(poisoned_offer::review()),
                Some("plain") => Ok(json!({"messages": [
                    {"role": "user", "content": {"type": "text", "text": "Plain."}},
                    {"role": "assistant", "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"}}
                ]})),
                other => Err((-32602, format!("Unknown prompt: {other:?}"))),
            }
        }
        _ => Err((-32601, format!("Method not found: {method}"))),
    }
}

fn list(mode: &str, params: &Value, page_size: u64, shifty: Option<String>) -> Value {
    let mut resources = vec![
        json!({"uri": "fx://text/hello", "name": "hello", "mimeType": "text/plain", "size": TEXT.len()}),
        json!({"uri": "fx://blob/bytes", "name": "bytes", "mimeType": "application/octet-stream"}),
        json!({"uri": "fx://text/third", "name": "third", "title": "The third"}),
    ];
    if let Some(description) = shifty {
        resources
            .push(json!({"uri": "fx://text/shifty", "name": "shifty", "description": description}));
    }
    if mode == "poisoned-offer" {
        resources.extend(poisoned_offer::resources());
    }
    if mode == "malformed-resources" {
        resources.insert(1, json!({"name": "no uri"}));
        resources.push(json!(42));
    }
    if mode == "repeat-resource-cursor" {
        return json!({"resources": resources[..1], "nextCursor": "again"});
    }
    let size = page_size.max(1) as usize;
    let start: usize = (params.get("cursor").and_then(Value::as_str))
        .and_then(|c| c.strip_prefix('r')?.parse().ok())
        .unwrap_or(0);
    let end = (start + size).min(resources.len());
    let mut page = json!({"resources": resources.get(start..end).unwrap_or(&[])});
    if end < resources.len() {
        page["nextCursor"] = json!(format!("r{end}"));
    }
    page
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                text.push('=');
            }
        }
    }
    text
}
