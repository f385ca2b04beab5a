//! The rest of what servers offer besides tools: resources, resource templates, prompts,
//! argument completion and the logging level; their requests, their typed results, and the one
//! [`Pager`] that follows any paginated listing.
//!
//! Decoding is tolerant the same way everywhere: members this crate does not know are kept in
//! each entry's `extra` map, an entry that cannot be read is left out and counted in the page's
//! `skipped`, and only a result whose list itself is missing or of the wrong type fails.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};

use crate::request::{FromResult, Params, Request};
use crate::types::{Content, ListToolsResult, Tool};

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

/// The result of one `resources/list` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResourcesResult {
    /// The entries that could be read.
    pub resources: Vec<Resource>,
    /// The cursor of the next page; `None` on the last.
    pub next_cursor: Option<String>,
    /// How many entries could not be read and were left out.
    pub skipped: usize,
}

/// The result of one `resources/templates/list` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResourceTemplatesResult {
    /// The entries that could be read.
    pub resource_templates: Vec<ResourceTemplate>,
    /// The cursor of the next page; `None` on the last.
    pub next_cursor: Option<String>,
    /// How many entries could not be read and were left out.
    pub skipped: usize,
}

/// The result of one `prompts/list` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPromptsResult {
    /// The entries that could be read.
    pub prompts: Vec<Prompt>,
    /// The cursor of the next page; `None` on the last.
    pub next_cursor: Option<String>,
    /// How many entries could not be read and were left out.
    pub skipped: usize,
}

/// The result of `resources/read`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResourceResult {
    /// The items that could be read, in order.
    pub contents: Vec<ResourceContents>,
    /// How many items could not be read and were left out.
    pub skipped: usize,
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

impl Request<ListResourcesResult> {
    /// One page of `resources/list`; [`Pager`] follows the pages.
    pub fn list_resources(cursor: Option<&str>) -> Self {
        Self::with("resources/list".to_owned(), cursor_params(cursor))
    }
}

impl Request<ListResourceTemplatesResult> {
    /// One page of `resources/templates/list`; [`Pager`] follows the pages.
    pub fn list_resource_templates(cursor: Option<&str>) -> Self {
        Self::with("resources/templates/list".to_owned(), cursor_params(cursor))
    }
}

impl Request<ListPromptsResult> {
    /// One page of `prompts/list`; [`Pager`] follows the pages.
    pub fn list_prompts(cursor: Option<&str>) -> Self {
        Self::with("prompts/list".to_owned(), cursor_params(cursor))
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

fn cursor_params(cursor: Option<&str>) -> Params {
    match cursor {
        Some(cursor) => Params::Value(json!({ "cursor": cursor })),
        None => Params::None,
    }
}

/// A paginated listing's page type: how to ask for a page and what it holds.
pub trait Page: FromResult {
    /// What the listing lists.
    type Item;

    /// The request for the page at `cursor` (`None` for the first).
    fn request(cursor: Option<&str>) -> Request<Self>;

    /// The page's entries, its `nextCursor` and how many entries it left out.
    fn into_parts(self) -> (Vec<Self::Item>, Option<String>, usize);
}

impl Page for ListToolsResult {
    type Item = Tool;

    fn request(cursor: Option<&str>) -> Request<Self> {
        Request::list_tools(cursor)
    }

    fn into_parts(self) -> (Vec<Tool>, Option<String>, usize) {
        (self.tools, self.next_cursor, self.skipped)
    }
}

impl Page for ListResourcesResult {
    type Item = Resource;

    fn request(cursor: Option<&str>) -> Request<Self> {
        Request::list_resources(cursor)
    }

    fn into_parts(self) -> (Vec<Resource>, Option<String>, usize) {
        (self.resources, self.next_cursor, self.skipped)
    }
}

impl Page for ListResourceTemplatesResult {
    type Item = ResourceTemplate;

    fn request(cursor: Option<&str>) -> Request<Self> {
        Request::list_resource_templates(cursor)
    }

    fn into_parts(self) -> (Vec<ResourceTemplate>, Option<String>, usize) {
        (self.resource_templates, self.next_cursor, self.skipped)
    }
}

impl Page for ListPromptsResult {
    type Item = Prompt;

    fn request(cursor: Option<&str>) -> Request<Self> {
        Request::list_prompts(cursor)
    }

    fn into_parts(self) -> (Vec<Prompt>, Option<String>, usize) {
        (self.prompts, self.next_cursor, self.skipped)
    }
}

/// Every entry of a listing, and how many entries its pages left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<T> {
    /// The entries, in the server's order.
    pub items: Vec<T>,
    /// Entries that could not be read, over all pages.
    pub skipped: usize,
}

/// Follows the pages of any listing (`Pager<ListToolsResult>`, `Pager<ListPromptsResult>`,
/// ...), refusing a server that would make us loop.
///
/// Send [`next_request`](Self::next_request) and feed its result to
/// [`add_page`](Self::add_page) until there is no next request; then [`finish`](Self::finish).
pub struct Pager<P: Page> {
    listing: Listing<P::Item>,
    /// The cursor of the next page: `Some(None)` for the first, `None` once complete.
    next: Option<Option<String>>,
    cursors_seen: BTreeSet<String>,
    pages: usize,
    max_pages: usize,
}

impl<P: Page> std::fmt::Debug for Pager<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pager")
            .field("items", &self.listing.items.len())
            .field("skipped", &self.listing.skipped)
            .field("next", &self.next)
            .field("pages", &self.pages)
            .finish_non_exhaustive()
    }
}

/// Why a listing was abandoned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageError {
    /// The server sent a `nextCursor` it had already sent.
    RepeatedCursor(String),
    /// More pages than the cap.
    TooManyPages(usize),
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RepeatedCursor(cursor) => write!(
                f,
                "the listing repeated the cursor {cursor:?}; stopped to avoid a loop"
            ),
            Self::TooManyPages(cap) => write!(f, "the listing has more than {cap} pages"),
        }
    }
}

impl std::error::Error for PageError {}

/// The page cap of [`Pager::default`].
pub const DEFAULT_MAX_PAGES: usize = 1000;

impl<P: Page> Pager<P> {
    /// A listing that gives up after `max_pages` pages.
    pub fn new(max_pages: usize) -> Self {
        Self {
            listing: Listing {
                items: Vec::new(),
                skipped: 0,
            },
            next: Some(None),
            cursors_seen: BTreeSet::new(),
            pages: 0,
            max_pages,
        }
    }

    /// The request for the next page, or `None` once the listing is complete.
    pub fn next_request(&self) -> Option<Request<P>> {
        let cursor = self.next.as_ref()?;
        Some(P::request(cursor.as_deref()))
    }

    /// Takes one page. An empty `nextCursor` counts as none: some servers send `""` on the
    /// last page.
    pub fn add_page(&mut self, page: P) -> Result<(), PageError> {
        let (items, next_cursor, skipped) = page.into_parts();
        self.pages += 1;
        self.listing.items.extend(items);
        self.listing.skipped += skipped;
        self.next = None;
        let cursor = match next_cursor {
            Some(cursor) if !cursor.is_empty() => cursor,
            _ => return Ok(()),
        };
        if self.pages >= self.max_pages {
            return Err(PageError::TooManyPages(self.max_pages));
        }
        if !self.cursors_seen.insert(cursor.clone()) {
            return Err(PageError::RepeatedCursor(cursor));
        }
        self.next = Some(Some(cursor));
        Ok(())
    }

    /// Every entry of the pages taken so far.
    pub fn finish(self) -> Listing<P::Item> {
        self.listing
    }
}

impl<P: Page> Default for Pager<P> {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_PAGES)
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

/// The readable entries of list member `key`, and how many were not.
pub(crate) fn entries<T: DeserializeOwned>(
    object: &mut Map<String, Value>,
    key: &str,
) -> Result<(Vec<T>, usize), String> {
    let items = match object.remove(key) {
        Some(Value::Array(items)) => items,
        Some(_) => return Err(format!("`{key}` is not an array")),
        None => return Err(format!("`{key}` is missing")),
    };
    let total = items.len();
    let read: Vec<T> = (items.into_iter())
        .filter_map(|item| serde_json::from_value(item).ok())
        .collect();
    let skipped = total - read.len();
    Ok((read, skipped))
}

/// A `nextCursor` member: only a string counts.
pub(crate) fn next_cursor(object: &mut Map<String, Value>) -> Option<String> {
    match object.remove("nextCursor") {
        Some(Value::String(cursor)) => Some(cursor),
        _ => None,
    }
}

impl FromResult for ListResourcesResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let mut object = members(result)?;
        let (resources, skipped) = entries(&mut object, "resources")?;
        let next_cursor = next_cursor(&mut object);
        Ok(Self {
            resources,
            next_cursor,
            skipped,
        })
    }
}

impl FromResult for ListResourceTemplatesResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let mut object = members(result)?;
        let (resource_templates, skipped) = entries(&mut object, "resourceTemplates")?;
        let next_cursor = next_cursor(&mut object);
        Ok(Self {
            resource_templates,
            next_cursor,
            skipped,
        })
    }
}

impl FromResult for ListPromptsResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let mut object = members(result)?;
        let (prompts, skipped) = entries(&mut object, "prompts")?;
        let next_cursor = next_cursor(&mut object);
        Ok(Self {
            prompts,
            next_cursor,
            skipped,
        })
    }
}

impl FromResult for ReadResourceResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let mut object = members(result)?;
        let (contents, skipped) = entries(&mut object, "contents")?;
        Ok(Self { contents, skipped })
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
pub fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
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
    fn unknown_members_are_kept_and_bad_entries_counted() {
        let page = ListResourcesResult::from_result(json!({
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
        let first = &page.resources[0];
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
            (page.resources[1].name.as_str(), &page.resources[1].title),
            ("", &None)
        );
        for bad in [json!({}), json!({"resources": {}}), json!([])] {
            assert!(ListResourcesResult::from_result(bad).is_err());
        }
    }

    #[test]
    fn templates_prompts_and_their_arguments_decode() {
        let templates = ListResourceTemplatesResult::from_result(json!({
            "resourceTemplates": [{"uriTemplate": "demo://t/{id}", "name": "t"}, {"name": "x"}]
        }))
        .unwrap();
        assert_eq!(
            templates.resource_templates[0].uri_template,
            "demo://t/{id}"
        );
        assert_eq!(templates.skipped, 1);
        let prompts = ListPromptsResult::from_result(json!({"prompts": [
            {"name": "p", "arguments": [{"name": "city", "required": true},
                                         {"name": "state"}, {"required": true}]},
            {"name": "q", "arguments": "odd"},
            {"description": "no name"}
        ]}))
        .unwrap();
        assert_eq!(prompts.skipped, 1);
        let arguments = &prompts.prompts[0].arguments;
        assert_eq!(arguments.len(), 2);
        assert!(arguments[0].required && !arguments[1].required);
        assert!(prompts.prompts[1].arguments.is_empty());
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
