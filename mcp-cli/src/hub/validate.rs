//! Checking a call's `structuredContent` against the tool's `outputSchema`, as the spec asks
//! clients to: each schema compiled once per listing, never loading a `$ref` from anywhere.
//!
//! The dialect is the one the schema names in `$schema`, and JSON Schema 2020-12 when it
//! names none (the spec's default). References resolve only inside the schema itself: the
//! validator's loader refuses every URL, so a schema pointing at `https://...` or
//! `file:///...` is reported as unusable rather than fetched or read. Depth is bounded by what
//! reaches us: serde_json refuses JSON nested deeper than 128 levels, schemas and results
//! alike, and the validator follows recursive `$ref`s only as deep as the value it checks.
//!
//! `format` is checked where the dialect makes it an assertion (draft-07 and older, or a
//! meta-schema requiring the format-assertion vocabulary) and is an annotation otherwise;
//! draft-07's `contentEncoding` and `contentMediaType` are checked too. A `pattern` using
//! look-around or a backreference, which the validator's regex engine cannot run, is left
//! out of the check rather than making the whole schema unusable: zod 4's JSON Schema output
//! has one in every e-mail field.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use boon::{CompileError, ErrorKind, ValidationError};
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

/// One tool's compiled schema: the set boon compiles into and the schema's place in it.
struct Checker {
    schemas: boon::Schemas,
    root: boon::SchemaIndex,
}

/// One tool's compiled schema, or why it cannot be used.
type Compiled = Arc<Result<Checker, String>>;

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
            None => Arc::new(compile(schema, false)),
        };
        match compiled.as_ref() {
            Ok(checker) => (checker.schemas)
                .validate(structured, checker.root)
                .err()
                .map(|error| first_failure(&error)),
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
            return Arc::new(compile(schema, false));
        };
        (current.compiled)
            .entry(tool.to_owned())
            .or_insert_with(|| Arc::new(compile(schema, false)))
            .clone()
    }
}

/// Why `content`, a form's answer, does not fit the form's `schema` (`requestedSchema`), if
/// it does not. Formats (`email`, `uri`, `date`, ...) are checked whatever the dialect: a form
/// names them to be filled in so. A schema that cannot be used checks nothing: the server
/// judges the answer itself, as it did before there was a check.
pub(crate) fn check_answer(schema: &Value, content: &Value) -> Option<OutputMismatch> {
    let checker = compile(schema, true).ok()?;
    (checker.schemas)
        .validate(content, checker.root)
        .err()
        .map(|error| first_failure(&error))
}

/// Where the tool's schema is kept while compiling: a base of its own, so a relative `$ref`
/// resolves to a URL the loader refuses rather than to a file beside the working directory.
const SCHEMA_URL: &str = "json-schema:///outputSchema";

/// A validator for `schema`: its own `$schema` dialect, else 2020-12; no reference loaded.
/// Each `pattern` the regex engine cannot run is taken out and the rest compiled again; every
/// round takes out at least one, so the loop ends.
fn compile(schema: &Value, formats: bool) -> Result<Checker, String> {
    let mut schema = std::borrow::Cow::Borrowed(schema);
    loop {
        let error = match compile_as_sent(&schema, formats) {
            Ok(checker) => return Ok(checker),
            Err(error) => error,
        };
        let unrunnable = match error.as_ref() {
            CompileError::ValidationError { url, src } => {
                // What was checked: the whole schema (`...#`), or a part a `$ref` points
                // into that is not a subschema by its place (`...#/x/y`).
                let checked = (url.strip_prefix(SCHEMA_URL))
                    .and_then(|rest| rest.strip_prefix('#'))
                    .map(|pointer| {
                        percent_encoding::percent_decode_str(pointer).decode_utf8_lossy()
                    });
                let places = checked.map(|checked| {
                    (unrunnable_patterns(src).into_iter())
                        .map(|place| format!("{checked}{place}"))
                        .collect()
                });
                places.unwrap_or_default()
            }
            _ => Vec::new(),
        };
        let schema = schema.to_mut();
        let removed = (unrunnable.iter())
            .filter(|place| remove_pattern(schema, place))
            .count();
        if removed == 0 {
            return Err(compile_error_text(&error));
        }
    }
}

/// Boxed: boon's error is some 200 bytes.
fn compile_as_sent(schema: &Value, formats: bool) -> Result<Checker, Box<CompileError>> {
    let mut compiler = boon::Compiler::new();
    if formats {
        compiler.enable_format_assertions();
    }
    // Said outright: boon's own default follows its newest draft, which may change.
    compiler.set_default_draft(boon::Draft::V2020_12);
    compiler.use_loader(Box::new(NoLoading));
    // Draft-07 leaves checking `contentEncoding` and `contentMediaType` to the validator;
    // they have always been checked there, so results keep passing or failing on them as
    // they did (later drafts make them annotations).
    let draft = (schema.get("$schema"))
        .and_then(Value::as_str)
        .and_then(boon::Draft::from_url);
    if draft == Some(boon::Draft::V7) {
        compiler.enable_content_assertions();
    }
    compiler
        .add_resource(SCHEMA_URL, schema.clone())
        .map_err(Box::new)?;
    let mut schemas = boon::Schemas::new();
    // boon calls a regex past its engine's size limit (`(a{1000}){1000}`) a bug of its own and
    // asserts on that in debug builds; caught, so a server's schema cannot end a debug build.
    // Release builds return the same error without the assertion.
    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compiler.compile(SCHEMA_URL, &mut schemas).map_err(Box::new)
    }));
    let root = match compiled {
        Ok(compiled) => compiled?,
        Err(panic) => {
            let said = (panic.downcast_ref::<String>().cloned()).unwrap_or_default();
            return Err(Box::new(CompileError::Bug(said.into())));
        }
    };
    Ok(Checker { schemas, root })
}

/// The loader boon asks for any document the schema refers to outside itself: it refuses
/// them all, `file://` included (boon's default loader would read files), without looking.
/// The meta-schemas of the known drafts are built into boon and never come here.
struct NoLoading;

impl boon::UrlLoader for NoLoading {
    fn load(&self, _url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err("not loaded: references are followed only within the schema".into())
    }
}

/// Where `error` (from checking a schema against its meta-schema) says a `pattern` keyword
/// holds a regex that is valid ECMA-262 but that boon's engine cannot run: look-around and
/// backreferences. A pattern that is no regex at all is left to make the schema unusable.
fn unrunnable_patterns(error: &ValidationError) -> Vec<String> {
    let mut found: Vec<String> = error.causes.iter().flat_map(unrunnable_patterns).collect();
    if let ErrorKind::Format {
        want: "regex", err, ..
    } = &error.kind
    {
        let unsupported = err
            .downcast_ref::<regex_syntax::ast::Error>()
            .is_some_and(|err| {
                matches!(
                    err.kind(),
                    regex_syntax::ast::ErrorKind::UnsupportedLookAround
                        | regex_syntax::ast::ErrorKind::UnsupportedBackreference
                )
            });
        let place = error.instance_location.to_string();
        if unsupported && place.ends_with("/pattern") {
            found.push(place);
        }
    }
    found
}

/// Takes the `pattern` keyword at `place` (a JSON Pointer ending in `/pattern`) out of
/// `schema`; whether it was there.
fn remove_pattern(schema: &mut Value, place: &str) -> bool {
    let Some((parent, keyword)) = place.rsplit_once('/') else {
        return false;
    };
    (schema.pointer_mut(parent))
        .and_then(Value::as_object_mut)
        .and_then(|parent| parent.shift_remove(keyword))
        .is_some()
}

/// Why a schema cannot be used, on one line.
fn compile_error_text(error: &CompileError) -> String {
    match error {
        CompileError::ValidationError { src, .. } => {
            let failure = first_failure(src);
            format!("it breaks its meta-schema {failure}")
        }
        // What boon calls its own bug is, so far, a regex too large for its engine.
        CompileError::Bug(_) => {
            let mut said = error.to_string();
            while let Some(rest) = said.strip_prefix(BOON_BUG) {
                said = rest.to_owned();
            }
            format!("the validator cannot compile it: {}", one_line(&said))
        }
        // The alternate form adds the cause (what the loader said, a regex's error), which
        // may take several lines.
        _ => one_line(&format!("{error:#}")),
    }
}

/// How boon's `CompileError::Bug` begins; the cause follows.
const BOON_BUG: &str = "encountered bug in jsonschema compiler. please report: ";

/// `text` with its lines joined by spaces.
fn one_line(text: &str) -> String {
    text.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// What `kind` says, on one line: a regex's error in its short form, without the pattern
/// drawn again with a caret under it.
fn kind_text(kind: &ErrorKind) -> String {
    if let ErrorKind::Format { got, want, err } = kind
        && let Some(regex) = err.downcast_ref::<regex_syntax::ast::Error>()
    {
        return format!("{got} is not valid {want}: {}", regex.kind());
    }
    one_line(&kind.to_string())
}

/// The first failing place under `error` and what fails there. Wrappers (the schema itself,
/// a `$ref`, `allOf`) are looked through to their first cause; `anyOf` and `oneOf` list
/// what each alternative wanted, as no one of them alone is what failed.
fn first_failure(error: &ValidationError) -> OutputMismatch {
    let path = error.instance_location.to_string();
    let first_cause = error.causes.first();
    match (&error.kind, first_cause) {
        (
            ErrorKind::Group
            | ErrorKind::Schema { .. }
            | ErrorKind::Reference { .. }
            | ErrorKind::AllOf,
            Some(cause),
        ) => first_failure(cause),
        (ErrorKind::PropertyName { .. }, Some(cause)) => OutputMismatch {
            message: format!(
                "{}: {}",
                kind_text(&error.kind),
                first_failure(cause).message
            ),
            path,
        },
        (ErrorKind::AnyOf | ErrorKind::OneOf(None), Some(_)) => {
            let wanted: Vec<String> = (error.causes.iter())
                .map(|cause| {
                    let failure = first_failure(cause);
                    if failure.path == path {
                        failure.message
                    } else {
                        failure.to_string()
                    }
                })
                .collect();
            OutputMismatch {
                message: format!("{} ({})", kind_text(&error.kind), wanted.join("; ")),
                path,
            }
        }
        _ => OutputMismatch {
            message: kind_text(&error.kind),
            path,
        },
    }
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
        // Nothing even connects: a connection made while compiling would be waiting in the
        // listener's backlog by now.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/schema.json", listener.local_addr().unwrap());
        assert!(unusable(json!({"$ref": url})).contains("not loaded"));
        let waiting = listener.accept().map(|_| ()).map_err(|error| error.kind());
        assert_eq!(waiting, Err(std::io::ErrorKind::WouldBlock));
    }

    fn unusable(schema: Value) -> String {
        let found = check(schema, json!({"structuredContent": {}})).unwrap();
        assert_eq!(found.path, "");
        let why = found
            .message
            .strip_prefix("the tool's outputSchema cannot be used: ");
        why.unwrap_or_else(|| panic!("{}", found.message))
            .to_owned()
    }

    #[test]
    fn a_file_reference_is_never_read() {
        // A real file holding a valid schema: had the loader read it, the schema would
        // compile and `{}` would pass.
        let dir = std::env::temp_dir().join(format!("mcp-validate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("schema.json");
        std::fs::write(&file, r#"{"type": "object"}"#).unwrap();
        let url = format!("file://{}", file.display());
        let absolute = unusable(json!({"$ref": url}));
        assert!(absolute.contains("not loaded"), "{absolute}");
        // Relative to the schema's own base, a path is a URL the loader refuses too, never a
        // file beside the working directory.
        let relative = unusable(json!({"$ref": file.display().to_string()}));
        assert!(relative.contains("not loaded"), "{relative}");
        let meta = unusable(json!({"$schema": url}));
        assert!(meta.contains("not loaded"), "{meta}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn references_inside_the_schema_are_followed() {
        let schema = json!({
            "$defs": {"point": {"type": "object", "required": ["x"],
                                "properties": {"x": {"type": "integer"}}}},
            "type": "array", "items": {"$ref": "#/$defs/point"}
        });
        assert_eq!(
            check(schema.clone(), json!({"structuredContent": [{"x": 1}]})),
            None
        );
        let found = check(schema, json!({"structuredContent": [{"x": 1}, {"x": 0.5}]})).unwrap();
        assert_eq!(found.path, "/1/x");
        assert!(found.message.contains("integer"), "{}", found.message);
    }

    #[test]
    fn each_alternative_of_an_any_of_is_named() {
        let schema = json!({"type": "object", "properties": {
            "when": {"anyOf": [{"type": "string"}, {"type": "null"}]}
        }});
        let found = check(schema, json!({"structuredContent": {"when": 3}})).unwrap();
        assert_eq!(found.path, "/when");
        assert!(
            found.message.contains("string") && found.message.contains("null"),
            "{}",
            found.message
        );
    }

    #[test]
    fn a_schema_that_breaks_its_meta_schema_is_unusable() {
        let why = unusable(json!({"type": "obj"}));
        assert!(why.contains("at /type"), "{why}");
        // Not a regex at all.
        let why = unusable(json!({"type": "string", "pattern": "[a-"}));
        assert_eq!(
            why,
            "it breaks its meta-schema at /pattern: \"[a-\" is not valid regex: unclosed \
             character class"
        );
    }

    #[test]
    fn a_pattern_too_large_for_the_engine_makes_the_schema_unusable_not_a_panic() {
        let why = unusable(json!({"type": "string", "pattern": "(a{1000}){1000}"}));
        assert_eq!(
            why,
            "the validator cannot compile it: Compiled regex exceeds size limit of 10485760 bytes."
        );
    }

    #[test]
    fn a_pattern_the_engine_cannot_run_is_left_out_and_the_rest_checked() {
        // zod 4's e-mail pattern, with look-ahead.
        let email = r"^(?!\.)(?!.*\.\.)([A-Za-z0-9_'+\-\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$";
        let schema = json!({"type": "object", "properties": {
            "email": {"type": "string", "format": "email", "pattern": email},
            "again": {"type": "string", "pattern": r"^(a)\1$"},
            "code": {"type": "string", "pattern": "^[0-9]+$"}
        }});
        let passes = json!({"structuredContent": {"email": ".a@b", "again": "x", "code": "12"}});
        assert_eq!(check(schema.clone(), passes), None);
        let found = check(schema.clone(), json!({"structuredContent": {"email": 1}})).unwrap();
        assert_eq!(found.path, "/email");
        let found = check(schema, json!({"structuredContent": {"code": "x"}})).unwrap();
        assert_eq!(found.path, "/code");
        // In a part of the schema only a `$ref` makes one, checked on its own.
        let schema = json!({"$ref": "#/parts/email",
                            "parts": {"email": {"type": "string", "pattern": email}}});
        assert_eq!(
            check(schema.clone(), json!({"structuredContent": ".a"})),
            None
        );
        assert!(check(schema, json!({"structuredContent": 1})).is_some());
    }

    #[test]
    fn formats_are_asserted_where_the_dialect_says_so() {
        let email = json!({"type": "string", "format": "email"});
        assert_eq!(check(email, json!({"structuredContent": "nope"})), None);
        let draft7 = json!({"$schema": "http://json-schema.org/draft-07/schema#",
                            "type": "string", "format": "email"});
        let found = check(draft7, json!({"structuredContent": "nope"})).unwrap();
        assert!(found.message.contains("email"), "{}", found.message);
        // draft-07's content keywords too, and not 2020-12's.
        let content = json!({"type": "string", "contentMediaType": "application/json"});
        assert_eq!(
            check(content.clone(), json!({"structuredContent": "{"})),
            None
        );
        let mut draft7 = content;
        draft7["$schema"] = json!("http://json-schema.org/draft-07/schema#");
        assert!(check(draft7, json!({"structuredContent": "{"})).is_some());
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
