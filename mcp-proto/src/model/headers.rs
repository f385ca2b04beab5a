//! The request headers of the stateless era's Streamable HTTP that mirror the body: the value
//! encoding, `Mcp-Name`, and the `Mcp-Param-*` headers a tool's `x-mcp-header` annotations ask
//! for.
//!
//! Pure functions over JSON: [`HeaderParams::from_schema`] checks a tool's annotations once (at
//! `tools/list`), and [`HeaderParams::headers`] reads a call's arguments.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// Where a value that is not safe as a plain header value starts and ends.
const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// A value as a header value: itself when it is safe as is, else `=?base64?…?=` around the
/// standard base64 of its UTF-8.
///
/// Safe means visible ASCII and inner spaces only, with no space at either end, and not looking
/// like the sentinel form itself. A tab is allowed by RFC 9110 but always encoded here, because
/// some servers (the conformance suite among them) treat any control character as unsafe and
/// every server must decode the encoded form anyway.
pub(crate) fn encode_header_value(value: &str) -> String {
    let visible = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let sentinel = value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END);
    if visible && !padded && !sentinel {
        value.to_owned()
    } else {
        format!(
            "{SENTINEL_START}{}{SENTINEL_END}",
            encode_base64(value.as_bytes())
        )
    }
}

/// The standard base64 alphabet (RFC 4648 §4), padded.
fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                let index = (group >> (18 - 6 * i)) & 0x3f;
                out.push(char::from(ALPHABET[index as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `Mcp-Param-*` headers one tool's `x-mcp-header` annotations ask for: each header's name
/// and the chain of `properties` keys that leads to its argument. Empty for a tool without
/// annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeaderParams {
    params: Vec<HeaderParam>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct HeaderParam {
    /// The annotation's value: the header is `Mcp-Param-{name}`.
    name: String,
    /// Property names from the arguments object down to the value.
    path: Vec<String>,
}

impl HeaderParams {
    /// Reads and checks every `x-mcp-header` annotation of an `inputSchema`; the first one that
    /// breaks a rule of the revision makes the whole tool invalid.
    pub(crate) fn from_schema(schema: &Value) -> Result<Self, InvalidHeaderAnnotation> {
        let mut params: Vec<HeaderParam> = Vec::new();
        let mut found = Vec::new();
        annotations(schema, &mut Vec::new(), false, &mut found);
        for (location, property) in found {
            let invalid = |rule| InvalidHeaderAnnotation {
                property: pointer(&location),
                rule,
            };
            let path = property_path(&location).ok_or_else(|| invalid(HeaderRule::Unreachable))?;
            let name = property
                .get("x-mcp-header")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(HeaderRule::NotAString))?;
            if name.is_empty() {
                return Err(invalid(HeaderRule::Empty));
            }
            if let Some(bad) = name.chars().find(|c| !is_tchar(*c)) {
                return Err(invalid(HeaderRule::Character(bad)));
            }
            if !primitive(property.get("type")) {
                let declared = property.get("type").map(Value::to_string);
                return Err(invalid(HeaderRule::NotPrimitive(declared)));
            }
            if let Some(other) = params.iter().find(|p| p.name.eq_ignore_ascii_case(name)) {
                let other = pointer_of_path(&other.path);
                return Err(invalid(HeaderRule::Duplicate(other)));
            }
            params.push(HeaderParam {
                name: name.to_owned(),
                path,
            });
        }
        Ok(Self { params })
    }

    /// Whether the tool marks no argument for a header.
    pub(crate) fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The `Mcp-Param-{Name}` headers for a call with these `arguments`, ordered by the path of
    /// their properties.
    ///
    /// A header is left out when its argument is absent or `null` (the revision says so), and
    /// when it is an object or an array, which the tool's own schema forbids. Strings are
    /// encoded with [`encode_header_value`], numbers written as JSON writes them (integers in
    /// decimal), booleans as `true` or `false`.
    pub(crate) fn headers(&self, arguments: &Value) -> Vec<(String, String)> {
        let mut headers = Vec::new();
        for param in &self.params {
            let value = param
                .path
                .iter()
                .try_fold(arguments, |value, key| value.get(key));
            let text = match value {
                Some(Value::String(text)) => encode_header_value(text),
                Some(Value::Number(number)) => number.to_string(),
                Some(Value::Bool(flag)) => flag.to_string(),
                _ => continue,
            };
            headers.push((format!("Mcp-Param-{}", param.name), text));
        }
        headers
    }
}

/// Collects every schema object that carries an `x-mcp-header` key, with the keys leading to
/// it. Inside a `properties` map the keys are property names, not keywords; values of the
/// keywords that hold data rather than schemas (`const`, `default`, `enum`, `examples`) are
/// not searched, since an `x-mcp-header` there annotates nothing.
fn annotations<'a>(
    node: &'a Value,
    location: &mut Vec<String>,
    names: bool,
    found: &mut Vec<(Vec<String>, &'a Map<String, Value>)>,
) {
    let children: Box<dyn Iterator<Item = (String, &Value)>> = match node {
        Value::Object(map) => {
            if !names && map.contains_key("x-mcp-header") {
                found.push((location.clone(), map));
            }
            Box::new(map.iter().map(|(k, v)| (k.clone(), v)))
        }
        Value::Array(items) => Box::new(items.iter().enumerate().map(|(i, v)| (i.to_string(), v))),
        _ => return,
    };
    for (key, child) in children {
        if !names && matches!(key.as_str(), "const" | "default" | "enum" | "examples") {
            continue;
        }
        let child_names = !names && key == "properties" && child.is_object();
        location.push(key);
        annotations(child, location, child_names, found);
        location.pop();
    }
}

/// The property names of a location made only of `properties` steps, or `None` for any other
/// place (the schema's root, `items`, `anyOf`, `$defs`, ...).
fn property_path(location: &[String]) -> Option<Vec<String>> {
    if location.is_empty() || !location.len().is_multiple_of(2) {
        return None;
    }
    location
        .chunks(2)
        .map(|step| (step[0] == "properties").then(|| step[1].clone()))
        .collect()
}

/// `string`, `integer`, `boolean`, or a list of those that may also allow `null` (an argument
/// that is `null` simply sends no header).
fn primitive(declared: Option<&Value>) -> bool {
    let allowed = |t: &Value| matches!(t.as_str(), Some("string" | "integer" | "boolean"));
    match declared {
        Some(Value::Array(types)) => {
            types.iter().any(allowed)
                && types
                    .iter()
                    .all(|t| allowed(t) || t.as_str() == Some("null"))
        }
        Some(one) => allowed(one),
        None => false,
    }
}

/// RFC 9110's `tchar`: what a header field name is made of.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn pointer(location: &[String]) -> String {
    location
        .iter()
        .map(|key| format!("/{}", key.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn pointer_of_path(path: &[String]) -> String {
    let location: Vec<String> = path
        .iter()
        .flat_map(|name| ["properties".to_owned(), name.clone()])
        .collect();
    pointer(&location)
}

/// A tool a `tools/list` result offered that was left out of what the caller sees, because its
/// `x-mcp-header` annotations are invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedTool {
    /// The tool's name.
    pub name: String,
    /// Why.
    pub reason: InvalidHeaderAnnotation,
}

impl fmt::Display for RejectedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tool {:?} left out: {}", self.name, self.reason)
    }
}

/// What the `tools/list` results seen so far say about each tool's `Mcp-Param-*` headers.
#[derive(Debug, Default)]
pub(crate) struct ToolHeaders {
    /// The annotated tools of the last full listing, by name.
    params: BTreeMap<String, HeaderParams>,
    /// The tools that listing left out, and why.
    rejected: Vec<RejectedTool>,
}

impl ToolHeaders {
    /// Reads one `tools/list` page's result and removes from it every tool whose annotations
    /// are invalid. The first page (`first`: asked for without a cursor) starts a new listing,
    /// so what an earlier listing said is forgotten.
    pub(crate) fn learn(&mut self, first: bool, result: &mut Value) {
        if first {
            self.params.clear();
            self.rejected.clear();
        }
        let Some(Value::Array(tools)) = result.get_mut("tools") else {
            return;
        };
        tools.retain(|tool| {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                // Not a tool the caller can call; the listing's decoder counts it.
                return true;
            };
            let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
            match HeaderParams::from_schema(schema) {
                Ok(params) => {
                    if params.is_empty() {
                        self.params.remove(name);
                    } else {
                        self.params.insert(name.to_owned(), params);
                    }
                    true
                }
                Err(reason) => {
                    let name = name.to_owned();
                    self.params.remove(&name);
                    self.rejected.push(RejectedTool { name, reason });
                    false
                }
            }
        });
    }

    /// Relays one message that came on a `tools/list` exchange: an answer with a result is
    /// read with [`learn`](Self::learn) and written again without the tools it rejects;
    /// anything else (a notification, an error, bytes that are not JSON) goes on as it came.
    pub(crate) fn relay(&mut self, first: bool, message: Vec<u8>) -> Vec<u8> {
        let Ok(mut value) = serde_json::from_slice::<Value>(&message) else {
            return message;
        };
        let Some(result) = value.get_mut("result") else {
            return message;
        };
        self.learn(first, result);
        serde_json::to_vec(&value).unwrap_or(message)
    }

    /// The `Mcp-Param-*` headers for a call of tool `name` with `arguments`; none for a tool
    /// no listing has shown.
    pub(crate) fn headers(&self, name: &str, arguments: &Value) -> Vec<(String, String)> {
        self.params
            .get(name)
            .map(|params| params.headers(arguments))
            .unwrap_or_default()
    }

    /// The tools the last listing left out.
    pub(crate) fn rejected(&self) -> &[RejectedTool] {
        &self.rejected
    }
}

/// Why a tool's `x-mcp-header` annotation makes the tool unusable over Streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidHeaderAnnotation {
    /// Where the annotated schema sits in `inputSchema`, as a JSON pointer
    /// (`/properties/region`).
    pub property: String,
    /// The rule it breaks.
    pub rule: HeaderRule,
}

/// A rule of the revision for `x-mcp-header` annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderRule {
    /// The annotation is not a string.
    NotAString,
    /// The annotation is empty.
    Empty,
    /// The annotation holds a character a header name cannot (a space, a colon, a control
    /// character, anything outside ASCII).
    Character(char),
    /// The property is not of type string, integer or boolean (its `type` as sent, if any).
    NotPrimitive(Option<String>),
    /// The annotation is not reached from the root through `properties` alone.
    Unreachable,
    /// Another property (this pointer) has the same header name, ignoring case.
    Duplicate(String),
}

impl fmt::Display for InvalidHeaderAnnotation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "x-mcp-header at {}: ", self.property)?;
        match &self.rule {
            HeaderRule::NotAString => f.write_str("the header name is not a string"),
            HeaderRule::Empty => f.write_str("the header name is empty"),
            HeaderRule::Character(c) => {
                write!(f, "the header name holds {c:?}, not allowed in a header name")
            }
            HeaderRule::NotPrimitive(Some(declared)) => write!(
                f,
                "only string, integer and boolean properties may be headers, not {declared}"
            ),
            HeaderRule::NotPrimitive(None) => f.write_str(
                "only string, integer and boolean properties may be headers, and this one has no type",
            ),
            HeaderRule::Unreachable => f.write_str(
                "only properties reached through `properties` alone may be headers (not items, \
                 anyOf, $defs or the like)",
            ),
            HeaderRule::Duplicate(other) => {
                write!(f, "the header name is already used by {other} (ignoring case)")
            }
        }
    }
}

impl std::error::Error for InvalidHeaderAnnotation {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::features::decode_base64;

    fn rule(schema: Value) -> HeaderRule {
        HeaderParams::from_schema(&schema).unwrap_err().rule
    }

    fn one(property: Value) -> Value {
        json!({"type": "object", "properties": {"value": property}})
    }

    #[test]
    fn values_follow_the_revisions_encoding_examples() {
        let cases = [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
            ("us west 1", "us west 1"),
            ("", ""),
        ];
        for (value, header) in cases {
            assert_eq!(encode_header_value(value), header, "{value:?}");
        }
    }

    #[test]
    fn unsafe_values_round_trip_through_base64() {
        for value in [
            " us-west1",
            "us-west1 ",
            "line1\r\nline2",
            "\tindented",
            "a\tb",
            "é",
        ] {
            let header = encode_header_value(value);
            let inner = header
                .strip_prefix(SENTINEL_START)
                .and_then(|h| h.strip_suffix(SENTINEL_END))
                .unwrap_or_else(|| panic!("{value:?} sent plain"));
            assert_eq!(decode_base64(inner).unwrap(), value.as_bytes());
        }
        for bytes in [
            &b""[..],
            b"a",
            b"ab",
            b"abc",
            b"abcd",
            &[0xff, 0xfe, 0x00, 0x80],
        ] {
            assert_eq!(decode_base64(&encode_base64(bytes)).unwrap(), bytes);
        }
    }

    /// The tool of the conformance suite's `http-custom-headers` and the arguments it calls it
    /// with.
    #[test]
    fn the_suites_custom_headers_are_mirrored() {
        let annotated = |ty: &str, name: &str| json!({"type": ty, "x-mcp-header": name});
        let schema = json!({"type": "object", "properties": {
            "region": annotated("string", "Region"),
            "priority": annotated("integer", "Priority"),
            "verbose": annotated("boolean", "Verbose"),
            "debug": annotated("boolean", "Debug"),
            "empty_val": annotated("string", "EmptyVal"),
            "method_val": annotated("string", "Method"),
            "float_val": {"type": "number"},
            "non_ascii_val": annotated("string", "NonAscii"),
            "whitespace_val": annotated("string", "Whitespace"),
            "leading_space_val": annotated("string", "LeadingSpace"),
            "trailing_space_val": annotated("string", "TrailingSpace"),
            "internal_space_val": annotated("string", "InternalSpace"),
            "control_char_val": annotated("string", "ControlChar"),
            "crlf_val": annotated("string", "CrLf"),
            "tab_val": annotated("string", "Tab"),
            "query": {"type": "string"},
        }});
        let arguments = json!({
            "region": "us-west1", "priority": 42, "verbose": false, "debug": true,
            "empty_val": "", "method_val": "test-method", "float_val": 2.5,
            "non_ascii_val": "Hello, 世界", "whitespace_val": " padded ",
            "leading_space_val": " us-west1", "trailing_space_val": "us-west1 ",
            "internal_space_val": "us west 1", "control_char_val": "line1\nline2",
            "crlf_val": "line1\r\nline2", "tab_val": "\tindented", "query": "SELECT * FROM users",
        });
        let params = HeaderParams::from_schema(&schema).unwrap();
        let headers = params.headers(&arguments);
        let expected = [
            ("Region", "us-west1"),
            ("Priority", "42"),
            ("Verbose", "false"),
            ("Debug", "true"),
            ("EmptyVal", ""),
            ("Method", "test-method"),
            ("NonAscii", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("Whitespace", "=?base64?IHBhZGRlZCA=?="),
            ("LeadingSpace", "=?base64?IHVzLXdlc3Qx?="),
            ("TrailingSpace", "=?base64?dXMtd2VzdDEg?="),
            ("InternalSpace", "us west 1"),
            ("ControlChar", "=?base64?bGluZTEKbGluZTI=?="),
            ("CrLf", "=?base64?bGluZTENCmxpbmUy?="),
            ("Tab", "=?base64?CWluZGVudGVk?="),
        ];
        let mut expected: Vec<(String, String)> = expected
            .iter()
            .map(|(name, value)| (format!("Mcp-Param-{name}"), value.to_string()))
            .collect();
        let mut sorted = headers.clone();
        sorted.sort();
        expected.sort();
        assert_eq!(sorted, expected);

        // `test_custom_headers_null`: a null argument sends no header, and neither does a
        // missing one.
        let null = params.headers(&json!({"region": "us-east1", "priority": 1, "verbose": null}));
        // Sorted: the order follows the schema's map, which serde_json's `preserve_order`
        // (on in the workspace's test builds) keeps as written.
        let mut names: Vec<&str> = null.iter().map(|(name, _)| name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["Mcp-Param-Priority", "Mcp-Param-Region"]);
    }

    #[test]
    fn nested_properties_are_read_at_their_exact_path() {
        let schema = json!({"type": "object", "properties": {"target": {
            "type": "object",
            "properties": {"zone": {"type": ["string", "null"], "x-mcp-header": "Zone"}},
        }}});
        let params = HeaderParams::from_schema(&schema).unwrap();
        let zone = |arguments: Value| params.headers(&arguments);
        assert_eq!(
            zone(json!({"target": {"zone": "eu-1"}})),
            [("Mcp-Param-Zone".to_owned(), "eu-1".to_owned())]
        );
        assert!(zone(json!({"zone": "eu-1"})).is_empty());
        assert!(zone(json!({"target": "eu-1"})).is_empty());
        assert!(zone(json!({"target": {"zone": null}})).is_empty());
        assert!(zone(json!({"target": {"zone": {"a": 1}}})).is_empty());
    }

    #[test]
    fn a_tool_without_annotations_has_no_headers() {
        let params = HeaderParams::from_schema(&one(json!({"type": "string"}))).unwrap();
        assert!(params.is_empty());
        assert!(params.headers(&json!({"value": "x"})).is_empty());
        assert!(HeaderParams::from_schema(&json!({})).unwrap().is_empty());
        // A property that is merely named like the keyword annotates nothing, and neither
        // does the keyword inside a default value.
        let named = json!({"properties": {"x-mcp-header": {"type": "object",
            "default": {"x-mcp-header": "Nope"}}}});
        assert!(HeaderParams::from_schema(&named).unwrap().is_empty());
    }

    /// The invalid tools of the conformance suite's `http-invalid-tool-headers`.
    #[test]
    fn the_suites_invalid_annotations_are_rejected_by_rule() {
        let typed = |ty: &str| one(json!({"type": ty, "x-mcp-header": "Data"}));
        let not_primitive = |ty: &str| HeaderRule::NotPrimitive(Some(format!("\"{ty}\"")));
        assert_eq!(
            rule(one(json!({"type": "string", "x-mcp-header": ""}))),
            HeaderRule::Empty
        );
        for ty in ["object", "array", "null", "number"] {
            assert_eq!(rule(typed(ty)), not_primitive(ty), "{ty}");
        }
        let pair = |a: &str, b: &str| {
            json!({"type": "object", "properties": {
                "field1": {"type": "string", "x-mcp-header": a},
                "field2": {"type": "string", "x-mcp-header": b},
            }})
        };
        let duplicate = HeaderRule::Duplicate("/properties/field1".to_owned());
        assert_eq!(rule(pair("Region", "Region")), duplicate);
        assert_eq!(rule(pair("MyField", "myfield")), duplicate);
        for (name, bad) in [
            ("My Region", ' '),
            ("Region:Primary", ':'),
            ("Région", 'é'),
            ("Region\t1", '\t'),
            ("Region\r\n", '\r'),
        ] {
            let schema = one(json!({"type": "string", "x-mcp-header": name}));
            assert_eq!(rule(schema), HeaderRule::Character(bad), "{name:?}");
        }
        let valid = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}});
        assert!(!HeaderParams::from_schema(&valid).unwrap().is_empty());
    }

    #[test]
    fn other_rules_name_the_property() {
        assert_eq!(
            rule(one(json!({"x-mcp-header": "Untyped"}))),
            HeaderRule::NotPrimitive(None)
        );
        assert_eq!(
            rule(one(json!({"type": "string", "x-mcp-header": 7}))),
            HeaderRule::NotAString
        );
        let nullable_number = one(json!({"type": ["number", "null"], "x-mcp-header": "N"}));
        assert!(matches!(rule(nullable_number), HeaderRule::NotPrimitive(_)));
        let unreachable = [
            json!({"type": "string", "x-mcp-header": "Root"}),
            json!({"properties": {"tags": {"type": "array",
                "items": {"type": "string", "x-mcp-header": "Tag"}}}}),
            json!({"properties": {"v": {"anyOf": [{"type": "string", "x-mcp-header": "V"}]}}}),
            json!({"$defs": {"v": {"type": "string", "x-mcp-header": "V"}}}),
            json!({"additionalProperties": {"type": "string", "x-mcp-header": "V"}}),
        ];
        for schema in unreachable {
            assert_eq!(rule(schema.clone()), HeaderRule::Unreachable, "{schema}");
        }
        let error = HeaderParams::from_schema(&json!({"properties": {"tags": {"type": "array",
            "items": {"type": "string", "x-mcp-header": "Tag"}}}}))
        .unwrap_err();
        assert_eq!(error.property, "/properties/tags/items");
        let message = error.to_string();
        assert!(
            message.starts_with("x-mcp-header at /properties/tags/items: "),
            "{message}"
        );
        let space =
            HeaderParams::from_schema(&one(json!({"type": "string", "x-mcp-header": "A B"})));
        assert_eq!(
            space.unwrap_err().to_string(),
            "x-mcp-header at /properties/value: the header name holds ' ', not allowed in a header name"
        );
    }
    #[test]
    fn a_listing_drops_invalid_tools_and_keeps_the_others_headers() {
        let tool = |name: &str, header: &str| {
            json!({"name": name, "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": header}}}})
        };
        let mut known = ToolHeaders::default();
        let mut page = json!({"tools": [tool("good", "Region"), tool("bad", "My Region"),
            {"name": "plain"}, {"title": "no name"}]});
        known.learn(true, &mut page);
        let names: Vec<&Value> = page["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["name"])
            .collect();
        assert_eq!(names, [&json!("good"), &json!("plain"), &Value::Null]);
        let [rejected] = known.rejected() else {
            panic!("{:?}", known.rejected())
        };
        assert_eq!(rejected.name, "bad");
        assert_eq!(rejected.reason.rule, HeaderRule::Character(' '));
        assert!(
            rejected
                .to_string()
                .starts_with("tool \"bad\" left out: x-mcp-header at /properties/region")
        );
        let arguments = json!({"region": "eu"});
        assert_eq!(
            known.headers("good", &arguments),
            [("Mcp-Param-Region".to_owned(), "eu".to_owned())]
        );
        assert!(known.headers("bad", &arguments).is_empty());
        assert!(known.headers("plain", &arguments).is_empty());

        // A later page adds to the listing; a new listing starts afresh.
        known.learn(false, &mut json!({"tools": [tool("next", "Zone")]}));
        assert!(!known.headers("next", &arguments).is_empty());
        assert_eq!(known.rejected().len(), 1);
        known.learn(true, &mut json!({"tools": [tool("bad", "Region")]}));
        assert!(known.rejected().is_empty());
        assert!(known.headers("good", &arguments).is_empty());
        assert!(!known.headers("bad", &arguments).is_empty());
    }
}
