//! Paginated listings (`tools/list`, `resources/list`, `resources/templates/list`,
//! `prompts/list`): one result type for every page, and the one [`Pager`] that follows the
//! pages of any of them.
//!
//! Decoding is tolerant: an entry that cannot be read is left out and counted in the page's
//! `skipped`, and only a result whose list itself is missing or of the wrong type fails.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::request::{FromResult, Params, Request};
use crate::surface::{Prompt, Resource, ResourceTemplate};
use crate::types::Tool;

/// What a paginated listing lists: the method that asks for a page and the result member
/// that holds its entries.
pub trait Listed: DeserializeOwned {
    /// `tools/list`, ...
    const METHOD: &'static str;
    /// `tools`, ...
    const MEMBER: &'static str;
}

impl Listed for Tool {
    const METHOD: &'static str = "tools/list";
    const MEMBER: &'static str = "tools";
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

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResult<T> {
    /// The entries that could be read, in the server's order.
    pub items: Vec<T>,
    /// The cursor of the next page; `None` on the last.
    pub next_cursor: Option<String>,
    /// How many entries were left out because they could not be read (a tool without a
    /// string `name`, an entry that is not an object, ...).
    pub skipped: usize,
}

/// One page of `tools/list`.
pub type ListToolsResult = ListResult<Tool>;
/// One page of `resources/list`.
pub type ListResourcesResult = ListResult<Resource>;
/// One page of `resources/templates/list`.
pub type ListResourceTemplatesResult = ListResult<ResourceTemplate>;
/// One page of `prompts/list`.
pub type ListPromptsResult = ListResult<Prompt>;

impl<T: Listed> ListResult<T> {
    /// Reads one page; only a missing or non-array list member fails it.
    pub fn from_value(value: Value) -> Result<Self, String> {
        let Value::Object(mut object) = value else {
            return Err("not an object".to_owned());
        };
        let (items, skipped) = entries(&mut object, T::MEMBER)?;
        let next_cursor = match object.remove("nextCursor") {
            Some(Value::String(cursor)) => Some(cursor),
            _ => None,
        };
        Ok(Self {
            items,
            next_cursor,
            skipped,
        })
    }
}

impl<T: Listed> FromResult for ListResult<T> {
    fn from_result(result: Value) -> Result<Self, String> {
        Self::from_value(result)
    }
}

impl<T: Listed> Request<ListResult<T>> {
    /// The page at `cursor` (`None` for the first); [`Pager`] follows the pages.
    pub fn list(cursor: Option<&str>) -> Self {
        let params = match cursor {
            Some(cursor) => Params::Value(json!({ "cursor": cursor })),
            None => Params::None,
        };
        Self::with(T::METHOD.to_owned(), params)
    }
}

// The listings by name, each a one-line call into `list`.

impl Request<ListToolsResult> {
    /// One page of `tools/list`.
    pub fn list_tools(cursor: Option<&str>) -> Self {
        Self::list(cursor)
    }
}

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

/// Every entry of a listing, and how many entries its pages left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<T> {
    /// The entries, in the server's order.
    pub items: Vec<T>,
    /// Entries that could not be read, over all pages.
    pub skipped: usize,
}

/// Follows the pages of any listing (`Pager<Tool>`, `Pager<Prompt>`, ...), refusing a server
/// that would make us loop.
///
/// Send [`next_request`](Self::next_request) and feed its result to
/// [`add_page`](Self::add_page) until there is no next request; then [`finish`](Self::finish).
pub struct Pager<T> {
    listing: Listing<T>,
    /// The cursor of the next page: `Some(None)` for the first, `None` once complete.
    next: Option<Option<String>>,
    cursors_seen: BTreeSet<String>,
    pages: usize,
    max_pages: usize,
}

impl<T> std::fmt::Debug for Pager<T> {
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

impl<T: Listed> Pager<T> {
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
    pub fn next_request(&self) -> Option<Request<ListResult<T>>> {
        let cursor = self.next.as_ref()?;
        Some(Request::list(cursor.as_deref()))
    }

    /// Takes one page. An empty `nextCursor` counts as none: some servers send `""` on the
    /// last page.
    pub fn add_page(&mut self, page: ListResult<T>) -> Result<(), PageError> {
        self.pages += 1;
        self.listing.items.extend(page.items);
        self.listing.skipped += page.skipped;
        self.next = None;
        let cursor = match page.next_cursor {
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
    pub fn finish(self) -> Listing<T> {
        self.listing
    }
}

impl<T: Listed> Default for Pager<T> {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_PAGES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listing_asks_its_own_method_with_the_cursor() {
        assert_eq!(
            Request::<ListToolsResult>::list(None).method(),
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
}
