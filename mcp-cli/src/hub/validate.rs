//! Checking a call's `structuredContent` against the tool's `outputSchema`, as the spec asks
//! clients to: each schema compiled once per listing, never fetching a `$ref` from anywhere.
//!
//! The dialect is the one the schema names in `$schema`, and JSON Schema 2020-12 when it
//! names none (the spec's default). References resolve only inside the schema itself: the
//! validator is built offline, so a schema pointing at `https://...` or `file:///...` is
//! reported as unusable rather than fetched. Depth is bounded by what reaches us: serde_json
//! refuses JSON nested deeper than 128 levels, schemas and results alike, and the validator
//! follows recursive `$ref`s only as deep as the value it checks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use mcp_smol::proto::Tool;
use serde_json::Value;

/// Why a result does not match its tool's `outputSchema`: the first failing place and what
/// fails there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputMismatch {
    /// Where in `structuredContent` it fails, as a JSON Pointer (`/items/0/name`); empty for
    /// the whole value (or for a result with no `structuredContent` at all).
    pub path: String,
    /// What fails there, in the validator's words.
    pub message: String,
}

impl std::fmt::Display for OutputMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "at {path}: {}", self.message)
    }
}

/// One tool's compiled schema, or why it cannot be used.
type Compiled = Arc<Result<jsonschema::Validator, String>>;

/// The compiled schemas of one server's listing, kept while that listing is the current one.
struct Listing {
    tools: Arc<Vec<Tool>>,
    compiled: HashMap<String, Compiled>,
}

/// Every server's compiled output schemas.
#[derive(Default)]
pub(crate) struct Validators {
    servers: Mutex<HashMap<String, Listing>>,
}

impl std::fmt::Debug for Validators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validators").finish_non_exhaustive()
    }
}

impl Validators {
    /// Checks `result` (a `tools/call` result as sent) of `tool`, whose schema came in
    /// `listing` (the server's current tools, when it runs): `None` when it matches, when the
    /// tool declares no output schema, or when the result is a tool error (which need not
    /// match).
    pub(crate) fn check(
        &self,
        server: &str,
        listing: Option<Arc<Vec<Tool>>>,
        tool: &Tool,
        result: &Value,
    ) -> Option<OutputMismatch> {
        let schema = tool.output_schema.as_ref()?;
        if result.get("isError") == Some(&Value::Bool(true)) {
            return None;
        }
        let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) else {
            return Some(OutputMismatch {
                path: String::new(),
                message: "the tool declares an outputSchema but the result has no \
                          structuredContent"
                    .to_owned(),
            });
        };
        let compiled = match listing {
            Some(listing) => self.compiled(server, listing, &tool.name, schema),
            // Not running any more: checked all the same, compiled for this once.
            None => Arc::new(compile(schema)),
        };
        match compiled.as_ref() {
            Ok(validator) => validator
                .validate(structured)
                .err()
                .map(|error| OutputMismatch {
                    path: error.instance_path().as_str().to_owned(),
                    message: error.to_string(),
                }),
            Err(why) => Some(OutputMismatch {
                path: String::new(),
                message: format!("the tool's outputSchema cannot be used: {why}"),
            }),
        }
    }

    /// `tool`'s compiled schema from `listing`: compiled on first use, kept until the server
    /// lists its tools anew.
    fn compiled(
        &self,
        server: &str,
        listing: Arc<Vec<Tool>>,
        tool: &str,
        schema: &Value,
    ) -> Compiled {
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = servers
            .get(server)
            .is_some_and(|kept| Arc::ptr_eq(&kept.tools, &listing));
        if !kept {
            servers.insert(
                server.to_owned(),
                Listing {
                    tools: listing,
                    compiled: HashMap::new(),
                },
            );
        }
        let Some(current) = servers.get_mut(server) else {
            return Arc::new(compile(schema));
        };
        (current.compiled)
            .entry(tool.to_owned())
            .or_insert_with(|| Arc::new(compile(schema)))
            .clone()
    }
}

/// A validator for `schema`: its own `$schema` dialect, else 2020-12; no reference fetched.
fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .offline()
        .build(schema)
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(schema: Value) -> Tool {
        serde_json::from_value(json!({
            "name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema
        }))
        .unwrap()
    }

    fn check(schema: Value, result: Value) -> Option<OutputMismatch> {
        Validators::default().check("s", None, &tool(schema), &result)
    }

    #[test]
    fn the_first_failing_path_is_named() {
        let schema = json!({"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        }});
        let found = check(
            schema.clone(),
            json!({"structuredContent": {"items": [{"n": 1}, {"n": "two"}]}}),
        )
        .unwrap();
        assert_eq!(found.path, "/items/1/n");
        assert!(found.message.contains("integer"), "{}", found.message);
        assert_eq!(
            check(schema, json!({"structuredContent": {"items": [{"n": 1}]}})),
            None
        );
    }

    #[test]
    fn tool_errors_and_tools_without_a_schema_are_not_checked() {
        let strict = json!({"type": "object", "required": ["x"]});
        assert_eq!(
            check(strict.clone(), json!({"isError": true, "content": []})),
            None
        );
        let plain: Tool =
            serde_json::from_value(json!({"name": "t", "inputSchema": {"type": "object"}}))
                .unwrap();
        let anything = json!({"structuredContent": 1});
        assert_eq!(
            Validators::default().check("s", None, &plain, &anything),
            None
        );
        let missing = check(strict, json!({"content": []})).unwrap();
        assert!(missing.message.contains("no structuredContent"));
    }

    #[test]
    fn a_remote_reference_is_never_fetched() {
        let schema = json!({"$ref": "http://127.0.0.1:9/schema.json"});
        let found = check(schema, json!({"structuredContent": {}})).unwrap();
        assert!(
            found
                .message
                .starts_with("the tool's outputSchema cannot be used"),
            "{}",
            found.message
        );
    }

    #[test]
    fn the_dialect_defaults_to_2020_12() {
        // `prefixItems` is 2020-12's; an older dialect would ignore it.
        let schema = json!({"type": "array", "prefixItems": [{"type": "string"}]});
        assert!(check(schema.clone(), json!({"structuredContent": [1]})).is_some());
        let draft7 = json!({"$schema": "http://json-schema.org/draft-07/schema#",
                            "type": "array", "prefixItems": [{"type": "string"}]});
        assert_eq!(check(draft7, json!({"structuredContent": [1]})), None);
    }

    #[test]
    fn a_listing_compiles_each_schema_once() {
        let validators = Validators::default();
        let listed = Arc::new(vec![tool(json!({"type": "object"}))]);
        let first = validators.compiled("s", listed.clone(), "t", &json!({"type": "object"}));
        let again = validators.compiled("s", listed, "t", &json!({"type": "object"}));
        assert!(Arc::ptr_eq(&first, &again));
        let relisted = Arc::new(vec![tool(json!({"type": "object"}))]);
        let fresh = validators.compiled("s", relisted, "t", &json!({"type": "object"}));
        assert!(!Arc::ptr_eq(&first, &fresh));
    }
}
