//! Tool arguments from the command line, typed by the tool's `inputSchema`.
//!
//! `KEY=VALUE` takes its type from the schema: a string property keeps the text as is (`012`
//! stays `"012"`), number, integer and boolean parse strictly, array and object parse as JSON;
//! without a declared type the value is JSON if it parses, else a string. `KEY:=JSON` is always
//! raw JSON. `--args` supplies a whole object first; pairs override its keys. Only the top
//! level of the schema is checked: required properties, declared types (also as a nullable
//! `anyOf`/`oneOf`; a `null` for an optional property passes as "no value"), `enum` values, and names the schema does not declare (refused when it
//! says `additionalProperties: false`, or when a required one is missing too, which usually
//! means a misspelling), with the nearest declared name suggested.

use serde_json::{Map, Value};

use crate::names;

/// An argument problem, worded for the person at the keyboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError(pub String);

impl std::fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgumentError {}

fn error<T>(message: String) -> Result<T, ArgumentError> {
    Err(ArgumentError(message))
}

/// Builds the `arguments` object for `tools/call`.
pub fn build(
    schema: &Value,
    base: Option<Value>,
    pairs: &[String],
) -> Result<Map<String, Value>, ArgumentError> {
    let mut arguments = match base {
        None => Map::new(),
        Some(Value::Object(object)) => object,
        Some(other) => return error(format!("--args must be a JSON object, got {other}")),
    };
    for pair in pairs {
        let (key, value) = parse_pair(schema, pair)?;
        arguments.insert(key, value);
    }
    check(schema, &arguments)?;
    Ok(arguments)
}

fn parse_pair(schema: &Value, pair: &str) -> Result<(String, Value), ArgumentError> {
    let Some((key, text)) = pair.split_once('=') else {
        return error(format!("argument {pair:?} is not KEY=VALUE or KEY:=JSON"));
    };
    if let Some(key) = key.strip_suffix(':') {
        let value = serde_json::from_str(text)
            .or_else(|e| error(format!("argument {key}: {text:?} is not valid JSON ({e})")))?;
        return Ok((non_empty(key, pair)?, value));
    }
    let key = non_empty(key, pair)?;
    let types = declared_types(schema, &key);
    let value = typed_value(&key, text, &types)?;
    Ok((key, value))
}

fn non_empty(key: &str, pair: &str) -> Result<String, ArgumentError> {
    if key.is_empty() {
        return error(format!("argument {pair:?} has an empty key"));
    }
    Ok(key.to_owned())
}

/// The JSON types a property declares: `"type": "x"`, `"type": ["x", "null"]`, or one per
/// branch of an `anyOf` / `oneOf` (as generators write a nullable parameter).
fn declared_types(schema: &Value, key: &str) -> Vec<String> {
    schema
        .get("properties")
        .and_then(|properties| properties.get(key))
        .map(property_types)
        .unwrap_or_default()
}

/// The types one property schema declares: `"type": "x"`, `"type": ["x", "null"]`, or one per
/// branch of an `anyOf` / `oneOf`.
pub fn property_types(property: &Value) -> Vec<String> {
    match property.get("type") {
        Some(Value::String(name)) => return vec![name.clone()],
        Some(Value::Array(names)) => {
            return names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
        }
        _ => {}
    }
    let branches =
        (property.get("anyOf").or_else(|| property.get("oneOf"))).and_then(Value::as_array);
    let mut types: Vec<String> = Vec::new();
    for branch in branches.into_iter().flatten() {
        let branch_types = property_types(branch);
        // A branch without a type accepts anything, and so does the whole.
        if branch_types.is_empty() {
            return Vec::new();
        }
        for name in branch_types {
            if !types.contains(&name) {
                types.push(name);
            }
        }
    }
    types
}

fn typed_value(key: &str, text: &str, types: &[String]) -> Result<Value, ArgumentError> {
    if types.is_empty() {
        return Ok(json_value(text).unwrap_or_else(|| Value::String(text.to_owned())));
    }
    if types.iter().any(|t| t == "string") {
        return Ok(Value::String(text.to_owned()));
    }
    types
        .iter()
        .find_map(|type_name| parse_as(type_name, text))
        .ok_or_else(|| {
            let mut message = format!("argument {key}: {text:?} is not {}", describe_types(types));
            // `paths=a.txt` for an array: show how to write one.
            let is_json = json_value(text).is_some();
            if types.iter().any(|t| t == "array") && !is_json {
                let example = Value::Array(vec![Value::String(text.to_owned())]);
                message.push_str(&format!("; write an array as {key}:='{example}'"));
            }
            ArgumentError(message)
        })
}

/// `text` as JSON, if it is. Text that cannot begin a JSON value (`cold`, `a.txt`) is not
/// parsed at all: a failed parse builds an error with its line and column, which costs more
/// than the rest of the argument handling.
fn json_value(text: &str) -> Option<Value> {
    let first = text.trim_start().bytes().next()?;
    if !matches!(
        first,
        b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
    ) {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// Parses `text` strictly as one JSON type.
fn parse_as(type_name: &str, text: &str) -> Option<Value> {
    let json = || json_value(text);
    match type_name {
        "boolean" => match text {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        "null" => (text == "null").then_some(Value::Null),
        other => json().filter(|value| has_type(value, other)),
    }
}

fn has_type(value: &Value, type_name: &str) -> bool {
    match type_name {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => is_integer(value),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        // A type we do not know is not ours to refuse.
        _ => true,
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(number) => {
            number.is_i64() || number.is_u64() || number.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn describe_types(types: &[String]) -> String {
    let names: Vec<String> = types.iter().map(|t| article(t)).collect();
    names.join(" or ")
}

fn article(type_name: &str) -> String {
    match type_name {
        "integer" | "array" | "object" => format!("an {type_name}"),
        "null" => "null".to_owned(),
        _ => format!("a {type_name}"),
    }
}

/// Checks the assembled object against the top level of the schema.
fn check(schema: &Value, arguments: &Map<String, Value>) -> Result<(), ArgumentError> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let declared: Vec<&str> = properties
        .into_iter()
        .flatten()
        .map(|(name, _)| name.as_str())
        .collect();
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let missing = required.iter().find(|name| !arguments.contains_key(**name));
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let unknown = arguments
        .keys()
        .find(|key| !declared.contains(&key.as_str()));
    // An undeclared name beside a missing required one is most likely a misspelling of it.
    if let Some(key) = unknown
        && (closed || missing.is_some())
        && properties.is_some()
    {
        let mut message = format!("unknown argument {key}");
        let candidates = declared
            .iter()
            .copied()
            .filter(|name| !arguments.contains_key(*name));
        if let Some(nearest) = names::nearest(key, candidates) {
            message.push_str(&format!("; did you mean {nearest}?"));
        }
        message.push_str(&format!(" (it takes: {})", declared.join(", ")));
        return error(message);
    }
    if let Some(name) = missing {
        let types = declared_types(schema, name);
        let expected = if types.is_empty() {
            String::new()
        } else {
            format!(" ({})", types.join(" | "))
        };
        return error(format!("missing required argument {name}{expected}"));
    }
    for (key, value) in arguments {
        // An optional property's `null` says "no value" (a server leaves it out, and no
        // `Mcp-Param-*` header carries it), whatever type the property declares.
        if value.is_null() && !required.contains(&key.as_str()) {
            continue;
        }
        let types = declared_types(schema, key);
        if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
            return error(format!(
                "argument {key}: {value} is not {}",
                describe_types(&types)
            ));
        }
        let choices = (properties.and_then(|p| p.get(key)))
            .and_then(|property| property.get("enum"))
            .and_then(Value::as_array);
        if let Some(choices) = choices
            && !choices.contains(value)
        {
            let listed: Vec<String> = choices.iter().map(Value::to_string).collect();
            return error(format!(
                "argument {key}: {value} is not one of {}",
                listed.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "s": {"type": "string"},
                "n": {"type": "number"},
                "i": {"type": "integer"},
                "b": {"type": "boolean"},
                "arr": {"type": "array"},
                "obj": {"type": "object"},
                "opt": {"type": ["integer", "null"]},
                "free": {}
            },
            "required": ["s"]
        })
    }

    fn build_pairs(pairs: &[&str]) -> Result<Value, ArgumentError> {
        let pairs: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
        build(&schema(), None, &pairs).map(Value::Object)
    }

    #[test]
    fn values_follow_the_schema_types() {
        let args = build_pairs(&[
            "s=012",
            "n=1.5",
            "i=-3",
            "b=true",
            "arr=[1,2]",
            "obj={\"k\":1}",
            "opt=null",
            "free=7",
            "other=text",
        ])
        .unwrap();
        assert_eq!(
            args,
            json!({"s": "012", "n": 1.5, "i": -3, "b": true, "arr": [1, 2], "obj": {"k": 1},
                   "opt": null, "free": 7, "other": "text"})
        );
    }

    #[test]
    fn untyped_values_are_json_when_they_parse_else_text() {
        let args = build_pairs(&[
            "s=x",
            "u1=cold",
            "u2= [1]",
            "u3=nothing",
            "u4=-",
            "u5=",
            "u6=\"q\"",
            "u7=false",
        ])
        .unwrap();
        assert_eq!(
            args,
            json!({"s": "x", "u1": "cold", "u2": [1], "u3": "nothing", "u4": "-", "u5": "",
                   "u6": "q", "u7": false})
        );
    }

    #[test]
    fn raw_json_and_base_object() {
        let pairs = vec!["s:=\"x\"".to_owned(), "n:=2".to_owned()];
        let args = build(&schema(), Some(json!({"s": "base", "i": 1})), &pairs).unwrap();
        assert_eq!(Value::Object(args), json!({"s": "x", "n": 2, "i": 1}));
    }

    #[test]
    fn a_null_passes_for_an_optional_property_of_any_type_not_for_a_required_one() {
        let base = json!({"s": "x", "b": null, "n": null});
        let args = build(&schema(), Some(base.clone()), &[]).unwrap();
        assert_eq!(Value::Object(args), base);
        assert_eq!(
            build_pairs(&["s:=null"]),
            Err(ArgumentError("argument s: null is not a string".into()))
        );
    }

    #[test]
    fn wrong_values_are_named() {
        let cases = [
            (vec!["s=x", "n=abc"], "argument n: \"abc\" is not a number"),
            (
                vec!["s=x", "i=1.5"],
                "argument i: \"1.5\" is not an integer",
            ),
            (vec!["s=x", "b=yes"], "argument b: \"yes\" is not a boolean"),
            (
                vec!["s=x", "arr={}"],
                "argument arr: \"{}\" is not an array",
            ),
            (vec!["s:=5"], "argument s: 5 is not a string"),
            (vec!["n=1"], "missing required argument s (string)"),
            (
                vec!["s=x", "nokey"],
                "argument \"nokey\" is not KEY=VALUE or KEY:=JSON",
            ),
            (vec!["s=x", "=1"], "argument \"=1\" has an empty key"),
            (
                vec!["s:={"],
                "argument s: \"{\" is not valid JSON (EOF while parsing an object at line 1 column 1)",
            ),
        ];
        for (pairs, message) in cases {
            assert_eq!(
                build_pairs(&pairs),
                Err(ArgumentError(message.to_owned())),
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn closed_schemas_refuse_unknown_keys() {
        let schema = json!({"properties": {"a": {}}, "additionalProperties": false});
        let pairs = vec!["b=1".to_owned()];
        assert_eq!(
            build(&schema, None, &pairs),
            Err(ArgumentError("unknown argument b (it takes: a)".into()))
        );
    }

    #[test]
    fn a_misspelt_name_is_named_with_the_nearest_declared_one() {
        let schema = json!({"properties": {"message": {"type": "string"}, "count": {}},
                            "required": ["message"]});
        let pairs = vec!["msg=hi".to_owned()];
        assert_eq!(
            build(&schema, None, &pairs),
            Err(ArgumentError(
                "unknown argument msg; did you mean message? (it takes: count, message)".into()
            ))
        );
        // An open schema with everything required given lets extra names through.
        let pairs = vec!["message=hi".to_owned(), "extra=1".to_owned()];
        assert!(build(&schema, None, &pairs).is_ok());
    }

    #[test]
    fn enums_and_nullable_any_of() {
        let schema = json!({"properties": {
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "paths": {"type": "array"}
        }});
        let build_one = |pair: &str| build(&schema, None, &[pair.to_owned()]).map(Value::Object);
        assert_eq!(build_one("mode=fast"), Ok(json!({"mode": "fast"})));
        assert_eq!(
            build_one("mode=medium"),
            Err(ArgumentError(
                "argument mode: \"medium\" is not one of \"fast\", \"slow\"".into()
            ))
        );
        assert_eq!(build_one("maybe=3"), Ok(json!({"maybe": 3})));
        assert_eq!(build_one("maybe=null"), Ok(json!({"maybe": null})));
        assert_eq!(
            build_one("maybe=x"),
            Err(ArgumentError(
                "argument maybe: \"x\" is not an integer or null".into()
            ))
        );
        assert_eq!(
            build_one("paths=a.txt"),
            Err(ArgumentError(
                "argument paths: \"a.txt\" is not an array; write an array as paths:='[\"a.txt\"]'"
                    .into()
            ))
        );
    }

    #[test]
    fn base_must_be_an_object() {
        assert!(build(&schema(), Some(json!([1])), &[]).is_err());
    }
}
