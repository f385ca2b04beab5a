//! Typed MCP results: server info, tools, tool-call results and their content.
//!
//! Decoding is lenient where the spec lets servers grow: unknown fields are ignored, and a content
//! item of an unknown (or malformed) kind is kept as [`Content::Unknown`] instead of failing the
//! whole result.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::model::capabilities::ServerCapabilities;
use crate::model::listing::{ListResult, Listed};
use crate::model::raw_result::RawResult;
use crate::model::request::{FromResult, Params, Request};
use crate::model::versions::Era;

/// `clientInfo` / `serverInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Implementation {
    /// The program's name.
    pub name: String,
    #[serde(default)]
    /// Its version; empty when not sent.
    pub version: String,
    #[serde(default)]
    /// A name for people, if given.
    pub title: Option<String>,
}

/// What the server told us: its `initialize` answer (handshake era) or its `server/discover`
/// answer (stateless era); carried by [`Event::Ready`](crate::Event::Ready).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The revision spoken, one of
    /// [`SUPPORTED_PROTOCOL_VERSIONS`](crate::SUPPORTED_PROTOCOL_VERSIONS): [`ServerInfo::era`]
    /// tells its era.
    pub protocol_version: String,
    /// Stateless era: every revision the server listed in `supportedVersions`, ours or not.
    /// Empty in the handshake era.
    pub supported_versions: Vec<String>,
    /// The server's `serverInfo`; empty names when it sent none.
    pub server: Implementation,
    /// What the server's `capabilities` object declares.
    pub capabilities: ServerCapabilities,
    /// How to use the server, for the model; if sent.
    pub instructions: Option<String>,
    /// Why the handshake era is spoken, when [`Protocol::Auto`](crate::Protocol::Auto) chose
    /// it because the `server/discover` probe went unanswered or was refused; `None` otherwise.
    pub fallback: Option<Fallback>,
}

/// Why a connection that was to find out its era ([`Protocol::Auto`](crate::Protocol::Auto))
/// speaks the handshake era.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// `server/discover` had no answer within this budget (the handshake's).
    Unanswered {
        /// The budget.
        after: std::time::Duration,
    },
    /// `server/discover` was refused, or answered without a stateless revision we speak; the
    /// detail says how.
    Refused(String),
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unanswered { after } => write!(
                f,
                "the server did not answer `server/discover` within {after:?}"
            ),
            Self::Refused(detail) => write!(f, "the server refused `server/discover`: {detail}"),
        }
    }
}

impl ServerInfo {
    /// The era of [`protocol_version`](Self::protocol_version).
    pub fn era(&self) -> Option<Era> {
        Era::of(&self.protocol_version)
    }
}

/// One entry of a `tools/list` page. Serialises back to the spec's field names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The name to call it by.
    pub name: String,
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    /// A name for people, if given.
    pub title: Option<String>,
    #[serde(
        default,
        deserialize_with = "string_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    /// What it does, for the model.
    pub description: Option<String>,
    /// JSON Schema of the arguments; `{}` when the server sent none.
    #[serde(default = "empty_object")]
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// JSON Schema of `structuredContent`, if declared.
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Hints such as `readOnlyHint`, as sent.
    pub annotations: Option<Value>,
    /// How it runs (2025-11-25): `{"taskSupport": "forbidden" | "optional" | "required"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Value>,
    /// Every other member, as sent (`_meta`, `icons`, what later revisions add), so that the
    /// tool serialises back whole.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

impl Tool {
    /// Whether it can only run as a task (`execution.taskSupport: "required"`): in the
    /// handshake era it must be called with [`Request::as_task`].
    pub fn requires_tasks(&self) -> bool {
        let support = self.execution.as_ref().and_then(|e| e.get("taskSupport"));
        support.and_then(Value::as_str) == Some("required")
    }

    /// Whether it may run as a task (`execution.taskSupport` `"required"` or `"optional"`).
    pub fn allows_tasks(&self) -> bool {
        let support = self.execution.as_ref().and_then(|e| e.get("taskSupport"));
        matches!(
            support.and_then(Value::as_str),
            Some("required" | "optional")
        )
    }
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl Listed for Tool {
    const METHOD: &'static str = "tools/list";
    const MEMBER: &'static str = "tools";
}

/// One page of `tools/list`.
pub type ListToolsResult = ListResult<Tool>;

impl Request<ListToolsResult> {
    /// One page of `tools/list`.
    pub fn list_tools(cursor: Option<&str>) -> Self {
        Self::list(cursor)
    }
}

/// The result of `tools/call`. `is_error: true` is a tool failure reported successfully; only a
/// JSON-RPC error is a protocol failure.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    #[serde(default, deserialize_with = "null_as_default")]
    /// The items, in order; an unknown kind is kept as [`Content::Unknown`].
    pub content: Vec<Content>,
    #[serde(default)]
    /// Structured output, when the tool declares an output schema.
    pub structured_content: Option<Value>,
    #[serde(default, deserialize_with = "null_as_default")]
    /// The tool failed; `content` says why.
    pub is_error: bool,
}

impl CallToolResult {
    /// The text items, each followed by a newline unless it ends in one: what a person
    /// reading the result sees first. Other items are left out.
    pub fn text(&self) -> String {
        let mut text = String::new();
        for item in &self.content {
            if let Content::Text { text: item } = item {
                text.push_str(item);
                if !item.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        text
    }

    /// Decodes a `tools/call` result, moving its parts out of `value` rather than copying them.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let usual = |object: &serde_json::Map<String, Value>| {
            matches!(
                object.get("content"),
                None | Some(Value::Null | Value::Array(_))
            ) && matches!(
                object.get("isError"),
                None | Some(Value::Null | Value::Bool(_))
            )
        };
        let mut object = match value {
            Value::Object(object) if usual(&object) => object,
            // Anything else goes through serde, which says what is wrong with it.
            other => return serde_json::from_value(other),
        };
        let content = match object.remove("content") {
            Some(Value::Array(items)) => items.into_iter().map(Content::from_owned).collect(),
            _ => Vec::new(),
        };
        Ok(Self {
            content,
            structured_content: object.remove("structuredContent").filter(|v| !v.is_null()),
            is_error: object.get("isError") == Some(&Value::Bool(true)),
        })
    }
}

impl Request<CallToolResult> {
    /// `tools/call`. `arguments` must be an object (`null` sends `{}`). The request carries a
    /// progress token of its own, so `notifications/progress` keeps it alive.
    pub fn call_tool(name: impl Into<String>, arguments: Value) -> Self {
        let name = name.into();
        Self::with(
            "tools/call".to_owned(),
            Params::CallTool {
                name,
                arguments,
                progress_token: None,
                meta: None,
                task: None,
            },
        )
    }

    /// The call with `members` in its `params._meta`: for a gateway passing on its host's
    /// trace context (`traceparent`, `tracestate`, `baggage`). The progress token and the
    /// stateless era's own members win over members of the same name.
    #[must_use]
    pub fn meta(mut self, members: Map<String, Value>) -> Self {
        if let Params::CallTool { meta, .. } = &mut self.params {
            *meta = Some(members).filter(|members| !members.is_empty());
        }
        self
    }

    /// The call with a progress token the caller chose instead of its own id: for a caller
    /// that routes progress to whoever made the call, such as a gateway passing its host's
    /// calls on. It must not be the token of another pending request.
    #[must_use]
    pub fn progress_token(mut self, token: Value) -> Self {
        if let Params::CallTool { progress_token, .. } = &mut self.params {
            *progress_token = Some(token);
        }
        self
    }
}

impl FromResult for CallToolResult {
    fn from_result(result: Value) -> Result<Self, String> {
        Self::from_value(result).map_err(|error| error.to_string())
    }

    /// The usual result is read straight from its text, and a text item with no value
    /// built. Any other (a member of an unexpected type, or given twice) is read as a value
    /// first, as [`from_result`](Self::from_result) reads it, which says what is wrong with it.
    fn from_raw(result: RawResult) -> Result<Self, String> {
        /// The members read, as [`CallToolResult::from_value`] reads them.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Usual<'a> {
            #[serde(borrow)]
            content: Option<Vec<&'a RawValue>>,
            structured_content: Option<Value>,
            is_error: Option<bool>,
        }
        /// [`Usual`] when every item is text, read in the same pass: no item is skipped
        /// over first to be read again. Anything else fails it, and `Usual` reads it.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct AllText {
            content: Option<Vec<TextOnly>>,
            structured_content: Option<Value>,
            is_error: Option<bool>,
        }
        if let Some(text) = result.as_text()
            && let Ok(all) = serde_json::from_str::<AllText>(text)
        {
            let content = all.content.unwrap_or_default();
            return Ok(Self {
                content: content
                    .into_iter()
                    .map(|TextOnly(text)| Content::Text { text })
                    .collect(),
                structured_content: all.structured_content,
                is_error: all.is_error == Some(true),
            });
        }
        let usual = (result.as_text()).and_then(|text| {
            let usual = serde_json::from_str::<Usual>(text).ok()?;
            let content = usual.content.unwrap_or_default();
            let content = content.into_iter().map(Content::from_raw);
            Some(Self {
                content: content.collect::<Option<_>>()?,
                structured_content: usual.structured_content,
                is_error: usual.is_error == Some(true),
            })
        });
        match usual {
            Some(usual) => Ok(usual),
            None => Self::from_result(result.into_value()?),
        }
    }
}

/// Optional text the server may send as anything: only a string counts.
fn string_or_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::String(text) => Ok(Some(text)),
        _ => Ok(None),
    }
}

fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// One item of a tool result's `content`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Base64 of the image.
        data: String,
        /// Such as `image/png`.
        mime_type: String,
    },
    /// A sound.
    Audio {
        /// Base64 of the sound.
        data: String,
        /// Such as `audio/wav`.
        mime_type: String,
    },
    /// A pointer to a resource the client may read.
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// Its name; empty when not sent.
        name: String,
        /// Its MIME type, if given.
        mime_type: Option<String>,
    },
    /// An embedded resource: `text` or base64 `blob` contents.
    Resource {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, if given.
        mime_type: Option<String>,
        /// Text contents.
        text: Option<String>,
        /// Base64 contents.
        blob: Option<String>,
    },
    /// A type this crate does not know, or a known type missing its required fields: kept whole.
    Unknown(Value),
}

impl Content {
    /// Sorts a content item by its `type`. Never fails: what it cannot read becomes `Unknown`.
    pub(crate) fn from_value(value: Value) -> Self {
        Self::decode(&value).unwrap_or(Content::Unknown(value))
    }

    fn decode(value: &Value) -> Option<Self> {
        let text = |key: &str| value.get(key)?.as_str().map(str::to_owned);
        let content = match value.get("type")?.as_str()? {
            "text" => Content::Text {
                text: text("text")?,
            },
            "image" => Content::Image {
                data: text("data")?,
                mime_type: text("mimeType")?,
            },
            "audio" => Content::Audio {
                data: text("data")?,
                mime_type: text("mimeType")?,
            },
            "resource_link" => Content::ResourceLink {
                uri: text("uri")?,
                name: text("name").unwrap_or_default(),
                mime_type: text("mimeType"),
            },
            "resource" => {
                let resource = value.get("resource")?;
                let field = |key: &str| resource.get(key)?.as_str().map(str::to_owned);
                Content::Resource {
                    uri: field("uri")?,
                    mime_type: field("mimeType"),
                    text: field("text"),
                    blob: field("blob"),
                }
            }
            _ => return None,
        };
        Some(content)
    }
}

impl Content {
    /// [`from_value`](Self::from_value) for an item we own: a text item's text is moved out,
    /// so a 16 MiB text is never copied.
    fn from_owned(value: Value) -> Self {
        let Value::Object(mut object) = value else {
            return Content::Unknown(value);
        };
        let is_text = object.get("type").and_then(Value::as_str) == Some("text")
            && object.get("text").is_some_and(Value::is_string);
        if is_text && let Some(Value::String(text)) = object.remove("text") {
            return Content::Text { text };
        }
        Content::from_value(Value::Object(object))
    }
}

/// A text item: the members [`Content::from_owned`] reads of one.
#[derive(Deserialize)]
struct TextItem<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    text: String,
}

/// An item [`Content::from_raw`] reads as text, read in place: its text, or an error for
/// any other, which [`CallToolResult::from_raw`] then reads the long way.
struct TextOnly(String);

impl<'de> Deserialize<'de> for TextOnly {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match TextItem::deserialize(deserializer)? {
            TextItem { kind, text } if kind == "text" => Ok(TextOnly(text)),
            _ => Err(serde::de::Error::custom("not a text item")),
        }
    }
}

impl Content {
    /// [`from_owned`](Self::from_owned) of an item's text: a text item, read as it reads
    /// one, builds no value. `None` for text nested too deep to be a value.
    fn from_raw(item: &RawValue) -> Option<Self> {
        match serde_json::from_str::<TextItem>(item.get()) {
            Ok(TextItem { kind, text }) if kind == "text" => Some(Content::Text { text }),
            _ => serde_json::from_str(item.get())
                .ok()
                .map(Content::from_owned),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Content::from_owned(Value::deserialize(deserializer)?))
    }
}

/// A notification from the server: progress, a log message, a list change, anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// `notifications/progress`, `notifications/tools/list_changed`, ...
    pub method: String,
    /// As sent; `None` when the server sent no `params`.
    pub params: Option<Value>,
}

impl Notification {
    /// `notifications/tools/list_changed`.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// `notifications/progress`.
    pub const PROGRESS: &str = "notifications/progress";
    /// `notifications/resources/list_changed`.
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// `notifications/prompts/list_changed`.
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// `notifications/roots/list_changed`: the host's roots changed (host to server).
    pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
    /// `notifications/elicitation/complete`: a URL-mode elicitation finished (2025-11-25).
    pub const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";
    /// `notifications/tasks/status`: a task's status, in the handshake era (2025-11-25).
    pub const TASK_STATUS: &str = "notifications/tasks/status";
    /// `notifications/initialized`: the client's handshake is done.
    pub(crate) const INITIALIZED: &str = "notifications/initialized";
    /// `notifications/cancelled`: a request is given up on, by either side.
    pub(crate) const CANCELLED: &str = "notifications/cancelled";
    /// `notifications/resources/updated`.
    pub(crate) const RESOURCE_UPDATED: &str = "notifications/resources/updated";
    /// `notifications/message`: a log message.
    pub(crate) const MESSAGE: &str = "notifications/message";

    /// The URI of a subscribed resource that changed, if this is a readable
    /// `notifications/resources/updated`.
    pub fn resource_updated(&self) -> Option<&str> {
        if self.method != Self::RESOURCE_UPDATED {
            return None;
        }
        self.params.as_ref()?.get("uri")?.as_str()
    }

    /// The log message, if this is a readable `notifications/message`.
    pub fn log_message(&self) -> Option<LogMessage> {
        if self.method != Self::MESSAGE {
            return None;
        }
        LogMessage::deserialize(self.params.as_ref()?).ok()
    }

    /// The progress report, if this is a readable `notifications/progress`.
    pub fn progress(&self) -> Option<Progress> {
        if self.method != Self::PROGRESS {
            return None;
        }
        Progress::deserialize(self.params.as_ref()?).ok()
    }
}

/// `notifications/message` parameters: one log message from the server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LogMessage {
    /// `debug` up to `emergency`.
    pub level: String,
    #[serde(default, deserialize_with = "string_or_none")]
    /// Which part of the server it comes from, if said.
    pub logger: Option<String>,
    /// The message: any JSON, usually a string.
    #[serde(default)]
    pub data: Value,
}

/// `notifications/progress` parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// The token of the request this reports on.
    pub progress_token: Value,
    /// Progress so far; grows with each report.
    pub progress: f64,
    #[serde(default)]
    /// The total, if known.
    pub total: Option<f64>,
    #[serde(default)]
    /// What is happening, for people.
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_content_kind_decodes_and_unknown_ones_are_kept() {
        let result = CallToolResult::from_value(json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"priority": 1}},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
                {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a", "name": "a"},
                {"type": "resource", "resource": {"uri": "file:///b", "text": "b"}},
                {"type": "hologram", "depth": 3},
                {"type": "text"},
                "not even an object"
            ],
            "structuredContent": {"ok": true},
            "isError": true,
            "extra": 1
        }))
        .unwrap();
        assert!(result.is_error);
        assert_eq!(result.structured_content, Some(json!({"ok": true})));
        assert_eq!(
            result.content,
            [
                Content::Text { text: "hi".into() },
                Content::Image {
                    data: "AA==".into(),
                    mime_type: "image/png".into()
                },
                Content::Audio {
                    data: "AA==".into(),
                    mime_type: "audio/wav".into()
                },
                Content::ResourceLink {
                    uri: "file:///a".into(),
                    name: "a".into(),
                    mime_type: None
                },
                Content::Resource {
                    uri: "file:///b".into(),
                    mime_type: None,
                    text: Some("b".into()),
                    blob: None
                },
                Content::Unknown(json!({"type": "hologram", "depth": 3})),
                Content::Unknown(json!({"type": "text"})),
                Content::Unknown(json!("not even an object")),
            ]
        );
    }

    #[test]
    fn text_joins_the_text_items() {
        let result = CallToolResult::from_value(json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "text", "text": "two\n"}
        ]}))
        .unwrap();
        assert_eq!(result.text(), "one\ntwo\n");
    }

    #[test]
    fn decoding_by_moving_parts_matches_serde() {
        let results = [
            json!({}),
            json!({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "AA==",
                   "mimeType": "image/png"}, {"type": "new"}, 5], "isError": true, "extra": 1}),
            json!({"content": null, "structuredContent": {"k": [1]}, "isError": false}),
            json!({"structuredContent": null, "isError": null}),
        ];
        for result in results {
            let serde: CallToolResult = serde_json::from_value(result.clone()).unwrap();
            assert_eq!(CallToolResult::from_value(result).unwrap(), serde);
        }
        for bad in [json!({"content": "x"}), json!({"isError": "yes"}), json!(7)] {
            assert!(CallToolResult::from_value(bad).is_err());
        }
    }

    #[test]
    fn odd_members_are_data_not_failures() {
        let result = json!({"content": null, "isError": null, "structuredContent": null});
        let result = CallToolResult::from_value(result).unwrap();
        assert_eq!((result.content.len(), result.is_error), (0, false));
        let page = json!({
            "tools": [
                {"name": "ok", "description": 7, "title": null},
                {"description": "no name"},
                {"name": 5},
                "not a tool",
                {"name": "also.ok", "inputSchema": {"type": "object"}}
            ],
            "nextCursor": 12
        });
        let page = ListToolsResult::from_value(page).unwrap();
        let names: Vec<&str> = page.items.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(names, ["ok", "also.ok"]);
        assert_eq!(page.items[0].description, None);
        assert_eq!(page.next_cursor, None);
    }

    #[test]
    fn tools_keep_every_member_and_say_when_they_need_tasks() {
        let sent = json!({
            "name": "research", "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required"},
            "icons": [{"src": "https://x.invalid/i.png"}], "_meta": {"k": 1}
        });
        let page = ListToolsResult::from_value(json!({"tools": [sent.clone()]})).unwrap();
        let tool = &page.items[0];
        assert!(tool.requires_tasks());
        assert_eq!(serde_json::to_value(tool).unwrap(), sent);
        let plain = ListToolsResult::from_value(json!({"tools": [{"name": "t",
            "execution": {"taskSupport": "optional"}}]}))
        .unwrap();
        assert!(!plain.items[0].requires_tasks());
    }

    #[test]
    fn tools_default_their_schema() {
        let page = ListToolsResult::from_value(json!({"tools": [{"name": "t"}]})).unwrap();
        assert_eq!(page.items[0].input_schema, json!({}));
        assert_eq!(page.next_cursor, None);
    }

    type ToolPager = crate::model::listing::Pager<Tool>;
    use crate::model::listing::PageError;

    fn page(names: &[&str], cursor: Option<&str>) -> ListToolsResult {
        ListToolsResult::from_value(json!({
            "tools": names.iter().map(|name| json!({"name": name})).collect::<Vec<_>>(),
            "nextCursor": cursor,
        }))
        .unwrap()
    }

    /// The cursor the pager asks for next: `Some(None)` for a first page, `None` when done.
    fn next_cursor(pager: &ToolPager) -> Option<Option<Value>> {
        let request = pager.next_request()?;
        Some(match request.params {
            crate::model::request::Params::Value(params) => Some(params["cursor"].clone()),
            _ => None,
        })
    }

    #[test]
    fn pager_follows_cursors_and_stops_on_repeats() {
        let mut pager = ToolPager::default();
        assert_eq!(next_cursor(&pager), Some(None));
        assert_eq!(pager.add_page(page(&["a"], Some("1"))), Ok(()));
        assert_eq!(next_cursor(&pager), Some(Some(json!("1"))));
        assert_eq!(pager.add_page(page(&["b"], Some("2"))), Ok(()));
        assert_eq!(next_cursor(&pager), Some(Some(json!("2"))));
        assert_eq!(pager.add_page(page(&["c"], Some(""))), Ok(()));
        assert_eq!(next_cursor(&pager), None);
        let names: Vec<_> = pager.finish().items.into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["a", "b", "c"]);

        let mut pager = ToolPager::default();
        assert_eq!(pager.add_page(page(&[], Some("x"))), Ok(()));
        assert_eq!(
            pager.add_page(page(&[], Some("x"))),
            Err(PageError::RepeatedCursor("x".into()))
        );
        assert_eq!(next_cursor(&pager), None);
    }

    #[test]
    fn pager_keeps_the_first_entries_over_all_pages_and_asks_no_more() {
        let names = |listing: crate::model::listing::Listing<Tool>| -> Vec<String> {
            listing.items.into_iter().map(|t| t.name).collect()
        };
        let mut pager = ToolPager::default().max_items(3);
        assert_eq!(pager.add_page(page(&["a", "b"], Some("1"))), Ok(()));
        assert_eq!(pager.add_page(page(&["c", "d"], Some("2"))), Ok(()));
        assert_eq!(next_cursor(&pager), None, "no page past the cap");
        let listing = pager.finish();
        assert_eq!(listing.capped, Some(3));
        assert_eq!(names(listing), ["a", "b", "c"]);

        // Exactly the cap is not over it, on the last page or before one.
        let mut pager = ToolPager::default().max_items(2);
        assert_eq!(pager.add_page(page(&["a", "b"], Some("1"))), Ok(()));
        assert_eq!(next_cursor(&pager), Some(Some(json!("1"))));
        assert_eq!(pager.add_page(page(&[], None)), Ok(()));
        assert_eq!(pager.finish().capped, None);
    }

    #[test]
    fn every_listing_is_one_the_streaming_parser_bounds() {
        use crate::{Listed, Prompt, Resource, ResourceTemplate};
        let members = [
            Tool::MEMBER,
            Resource::MEMBER,
            ResourceTemplate::MEMBER,
            Prompt::MEMBER,
        ];
        assert_eq!(members, crate::wire::stream_json::LISTED_MEMBERS);
    }

    #[test]
    fn pager_caps_the_number_of_pages() {
        let mut pager = ToolPager::new(2);
        assert_eq!(pager.add_page(page(&[], Some("1"))), Ok(()));
        assert_eq!(
            pager.add_page(page(&[], Some("2"))),
            Err(PageError::TooManyPages(2))
        );
    }
}
