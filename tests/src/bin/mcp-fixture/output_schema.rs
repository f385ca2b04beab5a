//! The `output-schema` mode's tools and answers.

use serde_json::{Map, Value, json};

/// Field `i` of `wide`: its schema type and the value it answers.
fn field(i: usize) -> (&'static str, Value) {
    match i % 4 {
        0 => ("integer", json!(i)),
        1 => ("string", json!(format!("value {i}"))),
        2 => ("boolean", json!(i.is_multiple_of(3))),
        _ => ("number", json!(i as f64 + 0.5)),
    }
}

pub(super) fn tools() -> Vec<Value> {
    let properties: Map<String, Value> = (0..100)
        .map(|i| (format!("f{i}"), json!({"type": field(i).0})))
        .collect();
    let required: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
    let weather = json!({"type": "object", "properties": {
        "temperature": {"type": "number"}, "conditions": {"type": "string"}
    }, "required": ["temperature", "conditions"]});
    let no_input = json!({"type": "object", "properties": {}});
    vec![
        json!({"name": "wide", "description": "Returns 100 structured fields.",
               "inputSchema": no_input,
               "outputSchema": {"type": "object", "properties": properties,
                                "required": required, "additionalProperties": false}}),
        json!({"name": "lying", "description": "Returns what its schema forbids.",
               "inputSchema": no_input, "outputSchema": weather}),
        json!({"name": "unstructured", "description": "Declares a schema, returns text.",
               "inputSchema": no_input, "outputSchema": weather}),
    ]
}

pub(super) fn answer(name: &str) -> Value {
    let structured = match name {
        "wide" => Value::Object((0..100).map(|i| (format!("f{i}"), field(i).1)).collect()),
        "lying" => json!({"temperature": "hot", "conditions": "sunny"}),
        _ => return json!({"content": [{"type": "text", "text": "sunny, 21 degrees"}]}),
    };
    json!({"content": [{"type": "text", "text": structured.to_string()}],
           "structuredContent": structured})
}
