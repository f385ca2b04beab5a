//! Paginated listings (`tools/list`, `resources/list`, `resources/templates/list`,
//! `prompts/list`): one result type for every page, and the one [`Pager`] that follows the
//! pages of any of them.
//!
//! Decoding is tolerant: an entry that cannot be read is left out and counted in the page's
//! `skipped`, and only a result whose list itself is missing or of the wrong type fails.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::model::request::{FromResult, Params, Request};

/// What a paginated listing lists: the method that asks for a page and the result member
/// that holds its entries.
pub trait Listed: DeserializeOwned {
    /// `tools/list`, ...
    const METHOD: &'static str;
    /// `tools`, ...
    const MEMBER: &'static str;
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
    /// How long the page may be kept (`ttlMs`, `cacheScope`); `None` when not said.
    pub cache: Option<CacheHint>,
}

/// A result's caching hint (2026-07-28): how long it stays fresh, and who may share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHint {
    /// `ttlMs`: fresh for this long after it arrived (zero: stale at once).
    pub ttl: Duration,
    /// `cacheScope`.
    pub scope: CacheScope,
}

/// Who may reuse a cached result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheScope {
    /// Anyone, across credentials (shared gateways and proxies too).
    Public,
    /// Only under the same credentials.
    Private,
}

impl CacheHint {
    /// Reads `ttlMs` and `cacheScope` from a result; `None` without a usable `ttlMs`. A
    /// missing or unknown scope counts as `Private`, the one that never over-shares.
    pub(crate) fn read(result: &Map<String, Value>) -> Option<Self> {
        let ttl = result.get("ttlMs")?.as_f64().filter(|ms| *ms >= 0.0)?;
        let ttl = Duration::try_from_secs_f64(ttl / 1000.0).ok()?;
        let scope = match result.get("cacheScope").and_then(Value::as_str) {
            Some("public") => CacheScope::Public,
            _ => CacheScope::Private,
        };
        Some(Self { ttl, scope })
    }

    /// Writes the hint into a result, as `ttlMs` and `cacheScope`.
    pub fn insert_into(&self, result: &mut Map<String, Value>) {
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let scope = match self.scope {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        };
        result.insert("ttlMs".to_owned(), json!(ttl));
        result.insert("cacheScope".to_owned(), json!(scope));
    }

    /// The hint of a whole made of two parts: the shorter life, and `Private` if either is.
    pub(crate) fn combine(self, other: Self) -> Self {
        let scope = match (self.scope, other.scope) {
            (CacheScope::Public, CacheScope::Public) => CacheScope::Public,
            _ => CacheScope::Private,
        };
        Self {
            ttl: self.ttl.min(other.ttl),
            scope,
        }
    }
}

impl<T: Listed> ListResult<T> {
    /// Reads one page; only a missing or non-array list member fails it.
    pub fn from_value(value: Value) -> Result<Self, String> {
        let Value::Object(mut object) = value else {
            return Err("not an object".to_owned());
        };
        let (items, skipped) = entries(&mut object, T::MEMBER)?;
        let cache = CacheHint::read(&object);
        let next_cursor = match object.remove("nextCursor") {
            Some(Value::String(cursor)) => Some(cursor),
            _ => None,
        };
        Ok(Self {
            items,
            next_cursor,
            skipped,
            cache,
        })
    }
}

impl<T: Listed + Serialize> ListResult<T> {
    /// The page as a server sends it: the entries under their member, `nextCursor` and the
    /// cache hint when there are any (`skipped` is the reader's count, not sent).
    pub fn to_json(&self) -> Map<String, Value> {
        let mut page = Map::new();
        let items = (self.items.iter()).map(|item| serde_json::to_value(item).unwrap_or_default());
        page.insert(T::MEMBER.to_owned(), Value::Array(items.collect()));
        if let Some(cursor) = &self.next_cursor {
            page.insert("nextCursor".to_owned(), json!(cursor));
        }
        if let Some(cache) = &self.cache {
            cache.insert_into(&mut page);
        }
        page
    }
}

impl<T: Listed> FromResult for ListResult<T> {
    fn from_result(result: Value) -> Result<Self, String> {
        Self::from_value(result)
    }
}

impl<T: Listed> Request<ListResult<T>> {
    /// The page at `cursor` (`None` for the first); [`Pager`] follows the pages.
    pub(crate) fn list(cursor: Option<&str>) -> Self {
        let params = match cursor {
            Some(cursor) => Params::Value(json!({ "cursor": cursor })),
            None => Params::None,
        };
        Self::with(T::METHOD.to_owned(), params)
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
    /// The pages' hints combined (the shortest time to live, the narrowest scope); `None` if a
    /// page had none.
    pub cache: Option<CacheHint>,
    /// `Some(cap)` when the server listed more than the pager's
    /// [`max_items`](Pager::max_items): the first `cap` entries are kept, the rest and any
    /// later pages left out.
    pub capped: Option<usize>,
}

/// Follows the pages of any listing (`Pager<Tool>`, `Pager<Prompt>`, ...), refusing a server
/// that would make us loop.
///
/// Send [`next_request`](Self::next_request) and feed its result to
/// [`add_page`](Self::add_page) until there is no next request; then [`finish`](Self::finish).
/// With [`max_items`](Self::max_items), a listing longer than that is cut there (and says so)
/// and no further page is asked for.
pub struct Pager<T> {
    listing: Listing<T>,
    /// The cursor of the next page: `Some(None)` for the first, `None` once complete.
    next: Option<Option<String>>,
    cursors_seen: BTreeSet<String>,
    pages: usize,
    max_pages: usize,
    max_items: usize,
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
    pub(crate) fn new(max_pages: usize) -> Self {
        Self {
            listing: Listing {
                items: Vec::new(),
                skipped: 0,
                cache: None,
                capped: None,
            },
            next: Some(None),
            cursors_seen: BTreeSet::new(),
            pages: 0,
            max_pages,
            max_items: usize::MAX,
        }
    }

    /// Keeps at most `max` entries over all pages ([`Config::max_listed`]); past them the
    /// listing is [`capped`](Listing::capped).
    ///
    /// [`Config::max_listed`]: crate::Config::max_listed
    #[must_use]
    pub fn max_items(mut self, max: usize) -> Self {
        self.max_items = max;
        self
    }

    /// The request for the next page, or `None` once the listing is complete.
    pub fn next_request(&self) -> Option<Request<ListResult<T>>> {
        let cursor = self.next.as_ref()?;
        Some(Request::list(cursor.as_deref()))
    }

    /// Takes one page. An empty `nextCursor` counts as none: some servers send `""` on the
    /// last page.
    pub fn add_page(&mut self, page: ListResult<T>) -> Result<(), PageError> {
        self.listing.cache = match (self.pages, self.listing.cache, page.cache) {
            (0, _, cache) => cache,
            (_, Some(listing), Some(page)) => Some(listing.combine(page)),
            _ => None,
        };
        self.pages += 1;
        self.listing.skipped += page.skipped;
        self.next = None;
        let room = self.max_items.saturating_sub(self.listing.items.len());
        if page.items.len() > room {
            // More than may be kept: what is kept is the server's first entries.
            let mut items = page.items;
            items.truncate(room);
            self.listing.items.extend(items);
            self.listing.capped = Some(self.max_items);
            return Ok(());
        }
        self.listing.items.extend(page.items);
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
    use crate::model::features::Prompt;

    #[test]
    fn a_page_written_reads_back_the_same() {
        let prompt: Prompt = serde_json::from_value(json!({"name": "greet"})).unwrap();
        let page = ListResult {
            items: vec![prompt],
            next_cursor: Some("2".to_owned()),
            skipped: 0,
            cache: Some(CacheHint {
                ttl: Duration::from_millis(1500),
                scope: CacheScope::Public,
            }),
        };
        let written = page.to_json();
        assert_eq!(written["ttlMs"], json!(1500));
        assert_eq!(written["cacheScope"], json!("public"));
        let read = ListResult::<Prompt>::from_value(Value::Object(written)).unwrap();
        assert_eq!(read, page);
        let last = ListResult::<Prompt> {
            items: Vec::new(),
            next_cursor: None,
            skipped: 3,
            cache: None,
        };
        assert_eq!(Value::Object(last.to_json()), json!({"prompts": []}));
    }
}
