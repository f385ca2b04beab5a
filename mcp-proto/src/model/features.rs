//! The server features besides tools: resources, resource templates, prompts, argument
//! completion and the logging level, and the client's answer to a form (elicitation); their
//! requests and their typed results. Their listings are in `listing.rs`.
//!
//! Decoding is tolerant the same way everywhere: members this crate does not know are kept in
//! each entry's `extra` map, an entry that cannot be read is left out and counted in the page's
//! `skipped`, and only a result whose list itself is missing or of the wrong type fails.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};

use crate::model::listing::{CacheHint, ListResult, Listed, entries};
use crate::model::request::{FromResult, Params, Request};
use crate::model::types::Content;

/// One entry of a `resources/list` page. Serialises back to the spec's field names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Where it is read from.
    pub uri: String,
    /// Its name; empty when the server sent none.
    #[serde(default, deserialize_with = "string_or_empty")]
    pub name: String,
    /// A name for people, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
    /// What it is, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub description: Option<String>,
    /// Such as `text/plain`, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub mime_type: Option<String>,
    /// Every other member as sent (`size`, `annotations`, `_meta`, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of a `resources/templates/list` page.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// An RFC 6570 URI template, such as `file:///{path}`.
    pub uri_template: String,
    /// Its name; empty when the server sent none.
    #[serde(default, deserialize_with = "string_or_empty")]
    pub name: String,
    /// A name for people, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
    /// What it stands for, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub description: Option<String>,
    /// The MIME type of what it expands to, if all share one.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub mime_type: Option<String>,
    /// Every other member as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One item of a `resources/read` result: `text`, or base64 `blob`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    /// The URI of this item (a directory read may answer with many).
    pub uri: String,
    /// Such as `image/png`, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub text: Option<String>,
    /// Base64 of binary contents; [`blob_bytes`](Self::blob_bytes) decodes it.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub blob: Option<String>,
    /// Every other member as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ResourceContents {
    /// The decoded `blob`, if there is one; the error says what is wrong with its base64.
    pub fn blob_bytes(&self) -> Option<Result<Vec<u8>, String>> {
        self.blob.as_deref().map(decode_base64)
    }
}

/// One entry of a `prompts/list` page.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Prompt {
    /// The name to get it by.
    pub name: String,
    /// A name for people, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
    /// What it is for, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub description: Option<String>,
    /// Its arguments; one without a string `name` is left out.
    #[serde(default, deserialize_with = "readable_entries")]
    pub arguments: Vec<PromptArgument>,
    /// Every other member as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One argument of a [`Prompt`]. Prompt arguments are strings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// A name for people, if given.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
    /// What to give, if said.
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub description: Option<String>,
    /// Whether `prompts/get` needs it.
    #[serde(default, deserialize_with = "true_or_false")]
    pub required: bool,
    /// Every other member as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One message of a `prompts/get` result.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// What it says; an unknown kind is kept as [`Content::Unknown`].
    pub content: Content,
}

impl Listed for Resource {
    const METHOD: &'static str = "resources/list";
    const MEMBER: &'static str = "resources";
}

impl Listed for ResourceTemplate {
    const METHOD: &'static str = "resources/templates/list";
    const MEMBER: &'static str = "resourceTemplates";
}

impl Listed for Prompt {
    const METHOD: &'static str = "prompts/list";
    const MEMBER: &'static str = "prompts";
}

/// One page of `resources/list`.
pub type ListResourcesResult = ListResult<Resource>;
/// One page of `resources/templates/list`.
pub type ListResourceTemplatesResult = ListResult<ResourceTemplate>;
/// One page of `prompts/list`.
pub type ListPromptsResult = ListResult<Prompt>;

// The listings by name, each a one-line call into `Request::list`.

impl Request<ListResourcesResult> {
    /// One page of `resources/list`.
    pub fn list_resources(cursor: Option<&str>) -> Self {
        Self::list(cursor)
    }
}

impl Request<ListResourceTemplatesResult> {
    /// One page of `resources/templates/list`.
    pub fn list_resource_templates(cursor: Option<&str>) -> Self {
        Self::list(cursor)
    }
}

impl Request<ListPromptsResult> {
    /// One page of `prompts/list`.
    pub fn list_prompts(cursor: Option<&str>) -> Self {
        Self::list(cursor)
    }
}

/// The result of `resources/read`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResourceResult {
    /// The items that could be read, in order.
    pub contents: Vec<ResourceContents>,
    /// How many items could not be read and were left out.
    pub skipped: usize,
    /// How long it may be kept (`ttlMs`, `cacheScope`); `None` when not said.
    pub cache: Option<CacheHint>,
}

/// The result of `prompts/get`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetPromptResult {
    /// What the prompt is, if said.
    pub description: Option<String>,
    /// The messages that could be read, in order.
    pub messages: Vec<PromptMessage>,
    /// How many messages could not be read and were left out.
    pub skipped: usize,
}

/// The result of `completion/complete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompleteResult {
    /// Suggested values (the spec caps them at 100), non-strings left out.
    pub values: Vec<String>,
    /// How many there are in all, if the server knows.
    pub total: Option<u64>,
    /// Whether there are more than `values`.
    pub has_more: bool,
}

/// What a `completion/complete` request completes an argument of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRef {
    /// An argument of the prompt of this name.
    Prompt(String),
    /// A variable of the resource template with this URI template.
    ResourceTemplate(String),
}

/// A host's answer to `elicitation/create` (a server asking, through its host, a person).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElicitResult {
    /// `accept`, `decline` or `cancel`.
    pub action: String,
    /// The form's values, when accepted.
    pub content: Option<Map<String, Value>>,
}

impl ElicitResult {
    /// Whether the person said yes.
    pub fn accepted(&self) -> bool {
        self.action == "accept"
    }
}

impl FromResult for ElicitResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let action = result.get("action").and_then(Value::as_str);
        let action = action.ok_or("`action` is missing or not a string")?;
        let content = result.get("content").and_then(Value::as_object).cloned();
        Ok(Self {
            action: action.to_owned(),
            content,
        })
    }
}

impl Request<ElicitResult> {
    /// `elicitation/create`, which the server role sends its host: `message` for the person,
    /// and the flat object schema of the form (`{"type": "object", "properties": {}}` for a
    /// plain yes or no).
    pub fn elicit(message: impl Into<String>, requested_schema: Value) -> Self {
        let params = json!({ "message": message.into(), "requestedSchema": requested_schema });
        Self::with("elicitation/create".to_owned(), Params::Value(params))
    }
}

impl Request<ReadResourceResult> {
    /// `resources/read` of one URI.
    pub fn read_resource(uri: &str) -> Self {
        Self::with(
            "resources/read".to_owned(),
            Params::Value(json!({ "uri": uri })),
        )
    }
}

impl Request<GetPromptResult> {
    /// `prompts/get` with its arguments (the spec wants string values).
    pub fn get_prompt(name: &str, arguments: Map<String, Value>) -> Self {
        let params = json!({ "name": name, "arguments": arguments });
        Self::with("prompts/get".to_owned(), Params::Value(params))
    }
}

impl Request<CompleteResult> {
    /// `completion/complete`: values for argument `argument` of `reference`, given what has
    /// been typed (`value`) and the other arguments chosen so far (`context`).
    pub fn complete(
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: Option<Map<String, Value>>,
    ) -> Self {
        let reference = match reference {
            CompletionRef::Prompt(name) => json!({ "type": "ref/prompt", "name": name }),
            CompletionRef::ResourceTemplate(uri) => json!({ "type": "ref/resource", "uri": uri }),
        };
        let mut params = json!({
            "ref": reference,
            "argument": { "name": argument, "value": value },
        });
        if let Some(arguments) = context {
            params["context"] = json!({ "arguments": arguments });
        }
        Self::with("completion/complete".to_owned(), Params::Value(params))
    }
}

impl Request<Value> {
    /// `resources/subscribe`: the server then sends `notifications/resources/updated` for
    /// `uri` (see [`Notification::resource_updated`](crate::Notification::resource_updated)).
    pub fn subscribe(uri: &str) -> Self {
        Self::new("resources/subscribe", Some(json!({ "uri": uri })))
    }

    /// `resources/unsubscribe`.
    pub fn unsubscribe(uri: &str) -> Self {
        Self::new("resources/unsubscribe", Some(json!({ "uri": uri })))
    }

    /// `logging/setLevel`: `debug`, `info`, `notice`, `warning`, `error`, `critical`,
    /// `alert` or `emergency`.
    pub fn set_logging_level(level: &str) -> Self {
        Self::new("logging/setLevel", Some(json!({ "level": level })))
    }
}

// ----- decoding -----

/// The members of a result object; anything else is not a result.
fn members(result: Value) -> Result<Map<String, Value>, String> {
    match result {
        Value::Object(object) => Ok(object),
        _ => Err("not an object".to_owned()),
    }
}

impl FromResult for ReadResourceResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let mut object = members(result)?;
        let (contents, skipped) = entries(&mut object, "contents")?;
        let cache = CacheHint::read(&object);
        Ok(Self {
            contents,
            skipped,
            cache,
        })
    }
}

impl FromResult for GetPromptResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let mut object = members(result)?;
        let (messages, skipped) = entries(&mut object, "messages")?;
        let description = match object.remove("description") {
            Some(Value::String(text)) => Some(text),
            _ => None,
        };
        Ok(Self {
            description,
            messages,
            skipped,
        })
    }
}

impl FromResult for CompleteResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let mut object = members(result)?;
        let Some(Value::Object(completion)) = object.remove("completion") else {
            return Err("`completion` is missing or not an object".to_owned());
        };
        let values = match completion.get("values") {
            Some(Value::Array(values)) => values
                .iter()
                .filter_map(|value| value.as_str().map(str::to_owned))
                .collect(),
            _ => return Err("`completion.values` is missing or not an array".to_owned()),
        };
        Ok(Self {
            values,
            total: completion.get("total").and_then(Value::as_u64),
            has_more: completion.get("hasMore") == Some(&Value::Bool(true)),
        })
    }
}

/// Optional text the server may send as anything: only a string counts.
fn string_or_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::String(text) => Ok(Some(text)),
        _ => Ok(None),
    }
}

fn string_or_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(string_or_none(deserializer)?.unwrap_or_default())
}

fn true_or_false<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Value::deserialize(deserializer)? == Value::Bool(true))
}

fn readable_entries<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    let entries = match Value::deserialize(deserializer)? {
        Value::Array(entries) => entries,
        _ => Vec::new(),
    };
    let read = entries
        .into_iter()
        .filter_map(|e| serde_json::from_value(e).ok());
    Ok(read.collect())
}

/// Decodes standard or URL-safe base64; padding is optional and whitespace is ignored.
pub(crate) fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::with_capacity(text.len() / 4 * 3);
    let mut buffer: u32 = 0;
    let mut bits = 0;
    let mut padding = false;
    for (index, byte) in text.bytes().enumerate() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => {
                padding = true;
                continue;
            }
            _ if byte.is_ascii_whitespace() => continue,
            _ => return Err(format!("invalid base64 at byte {index}")),
        };
        if padding {
            return Err(format!("base64 goes on after its padding, at byte {index}"));
        }
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    // A lone sixth of a byte left over cannot come from any input.
    if bits >= 6 {
        return Err("base64 ends in the middle of a byte".to_owned());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elicitation_asks_with_a_form_and_reads_the_answer() {
        let request = Request::elicit("Allow it?", json!({"type": "object", "properties": {}}));
        assert_eq!(request.method(), "elicitation/create");
        assert_eq!(
            request.params,
            Params::Value(json!({"message": "Allow it?",
                "requestedSchema": {"type": "object", "properties": {}}}))
        );
        let yes = ElicitResult::from_result(json!({"action": "accept", "content": {"a": 1}}));
        let yes = yes.unwrap();
        assert!(yes.accepted());
        assert_eq!(yes.content.unwrap()["a"], 1);
        let no = ElicitResult::from_result(json!({"action": "decline"})).unwrap();
        assert!(!no.accepted() && no.content.is_none());
        assert!(ElicitResult::from_result(json!({"content": {}})).is_err());
    }

    #[test]
    fn every_listing_asks_its_own_method_with_the_cursor() {
        assert_eq!(
            Request::<crate::model::types::ListToolsResult>::list(None).method(),
            "tools/list"
        );
        let page = Request::<ListResourceTemplatesResult>::list(Some("c2"));
        assert_eq!(page.method(), "resources/templates/list");
        assert_eq!(page.params, Params::Value(json!({"cursor": "c2"})));
        assert_eq!(
            Request::<ListPromptsResult>::list(None).params,
            Params::None
        );
    }

    #[test]
    fn unknown_members_are_kept_and_bad_entries_counted() {
        let page = ListResult::<Resource>::from_result(json!({
            "resources": [
                {"uri": "demo://a", "name": "a", "mimeType": "text/plain", "size": 3,
                 "_meta": {"k": 1}},
                {"name": "no uri"},
                {"uri": 7},
                "not an entry",
                {"uri": "demo://b", "name": null, "title": 5}
            ],
            "nextCursor": "n1",
            "other": true
        }))
        .unwrap();
        assert_eq!(page.skipped, 3);
        assert_eq!(page.next_cursor.as_deref(), Some("n1"));
        let first = &page.items[0];
        assert_eq!(first.mime_type.as_deref(), Some("text/plain"));
        assert_eq!(
            first.extra,
            *json!({"size": 3, "_meta": {"k": 1}}).as_object().unwrap()
        );
        assert_eq!(
            serde_json::to_value(first).unwrap(),
            json!({"uri": "demo://a", "name": "a", "mimeType": "text/plain", "size": 3,
                   "_meta": {"k": 1}})
        );
        assert_eq!(
            (page.items[1].name.as_str(), &page.items[1].title),
            ("", &None)
        );
        for bad in [json!({}), json!({"resources": {}}), json!([])] {
            assert!(ListResult::<Resource>::from_result(bad).is_err());
        }
    }

    #[test]
    fn templates_prompts_and_their_arguments_decode() {
        let templates = ListResult::<ResourceTemplate>::from_result(json!({
            "resourceTemplates": [{"uriTemplate": "demo://t/{id}", "name": "t"}, {"name": "x"}]
        }))
        .unwrap();
        assert_eq!(templates.items[0].uri_template, "demo://t/{id}");
        assert_eq!(templates.skipped, 1);
        let prompts = ListResult::<Prompt>::from_result(json!({"prompts": [
            {"name": "p", "arguments": [{"name": "city", "required": true},
                                         {"name": "state"}, {"required": true}]},
            {"name": "q", "arguments": "odd"},
            {"description": "no name"}
        ]}))
        .unwrap();
        assert_eq!(prompts.skipped, 1);
        let arguments = &prompts.items[0].arguments;
        assert_eq!(arguments.len(), 2);
        assert!(arguments[0].required && !arguments[1].required);
        assert!(prompts.items[1].arguments.is_empty());
    }

    #[test]
    fn read_and_get_results_decode() {
        let read = ReadResourceResult::from_result(json!({"contents": [
            {"uri": "demo://a", "text": "hello"},
            {"uri": "demo://b", "mimeType": "image/png", "blob": "aGk="},
            {"text": "no uri"}
        ]}))
        .unwrap();
        assert_eq!(read.skipped, 1);
        assert_eq!(read.contents[0].text.as_deref(), Some("hello"));
        assert_eq!(read.contents[1].blob_bytes(), Some(Ok(b"hi".to_vec())));
        assert_eq!(read.contents[0].blob_bytes(), None);
        let got = GetPromptResult::from_result(json!({"description": "d", "messages": [
            {"role": "user", "content": {"type": "text", "text": "What?"}},
            {"role": "user", "content": {"type": "video"}},
            {"content": {"type": "text", "text": "no role"}}
        ]}))
        .unwrap();
        assert_eq!(got.skipped, 1);
        assert_eq!(
            got.messages[0].content,
            Content::Text {
                text: "What?".into()
            }
        );
        assert!(matches!(got.messages[1].content, Content::Unknown(_)));
        let completed = CompleteResult::from_result(json!({"completion":
            {"values": ["Engineering", 5], "total": 1, "hasMore": false}}))
        .unwrap();
        assert_eq!(
            (completed.values, completed.total),
            (vec!["Engineering".to_owned()], Some(1))
        );
        assert!(CompleteResult::from_result(json!({"completion": {}})).is_err());
    }

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("").unwrap(), b"");
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVsbG8").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVs\nbG8h").unwrap(), b"hello!");
        assert_eq!(decode_base64("_-8=").unwrap(), [0xff, 0xef]);
        assert!(decode_base64("a").is_err());
        assert!(decode_base64("aGk=aGk=").is_err());
        assert!(decode_base64("a*==").is_err());
    }

    #[test]
    fn requests_carry_their_params() {
        let params = |request: Request<Value>| match request.params {
            Params::Value(value) => value,
            _ => Value::Null,
        };
        let reference = CompletionRef::Prompt("p".into());
        let context = json!({"department": "Sales"}).as_object().cloned();
        assert_eq!(
            params(Request::complete(&reference, "name", "D", context).untyped()),
            json!({"ref": {"type": "ref/prompt", "name": "p"},
                   "argument": {"name": "name", "value": "D"},
                   "context": {"arguments": {"department": "Sales"}}})
        );
        let arguments = json!({"city": "Paris"}).as_object().cloned().unwrap();
        assert_eq!(
            params(Request::get_prompt("p", arguments).untyped()),
            json!({"name": "p", "arguments": {"city": "Paris"}})
        );
        assert_eq!(
            params(Request::subscribe("demo://a")),
            json!({"uri": "demo://a"})
        );
        assert_eq!(Request::list_prompts(None).method(), "prompts/list");
    }
}
