//! Pulling a registry's servers into a [`Snapshot`]: `GET /v0.1/servers?version=latest` page
//! by page (`metadata.nextCursor`), the first time whole, then only what changed since the
//! newest `updatedAt` seen (`updated_since`), merged over what was kept.
//!
//! A registry is a party we do not trust with our memory or our time: an answer that is not a
//! server list fails the sync naming the page, a cursor seen before (a loop) fails it, and so
//! do more pages or servers than any registry holds. One bad entry is skipped and counted,
//! never the whole page.

use std::collections::HashSet;

use serde_json::Value;

use super::model::{Listed, Status};
use super::snapshot::Snapshot;
use crate::auth::http::{Http, Request, printable};

/// How much one sync may take in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) pages: usize,
    pub(crate) servers: usize,
}

impl Limits {
    /// Far above the official registry's size (tens of thousands of servers, 100 a page).
    pub(crate) const DEFAULT: Limits = Limits {
        pages: 5_000,
        servers: 200_000,
    };
}

/// Servers asked for a page.
const PAGE: usize = 100;

/// What a sync did, for its report.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Synced {
    pub(crate) pages: usize,
    /// Entries taken in (new or changed).
    pub(crate) received: usize,
    /// Entries that did not read, each with why (the first few are shown).
    pub(crate) skipped: Vec<String>,
    /// Whether only the changes since the last sync were asked for.
    pub(crate) delta: bool,
}

/// Syncs `previous` (or, for the first sync or `full`, an empty snapshot of `url`) with the
/// registry at `url`; `progress` hears the number of servers taken in after every page. The
/// snapshot is returned whole, to be saved by the caller; on an error nothing is returned.
pub(crate) async fn sync(
    http: &dyn Http,
    url: &str,
    previous: Option<Snapshot>,
    limits: Limits,
    now: u64,
    progress: &mut dyn FnMut(usize),
) -> Result<(Snapshot, Synced), String> {
    let base = url.trim_end_matches('/');
    let mut snapshot = previous
        .filter(|kept| kept.url == base)
        .unwrap_or_else(|| Snapshot::new(base));
    let since = snapshot.since.clone();
    let mut synced = Synced {
        delta: since.is_some(),
        ..Synced::default()
    };
    let mut newest = since.clone();
    let mut cursor: Option<String> = None;
    let mut cursors = HashSet::new();
    loop {
        let page_url = page_url(base, since.as_deref(), cursor.as_deref())?;
        let response = http.send(Request::get(&page_url)).await?;
        if !response.is_success() {
            return Err(format!(
                "the registry at {base} answered {} to GET {page_url}",
                response.describe()
            ));
        }
        let page: Value = serde_json::from_slice(&response.body).map_err(|error| {
            format!("the registry at {base} answered GET {page_url} with something that is not JSON: {error}")
        })?;
        let Some(servers) = page.get("servers").and_then(Value::as_array) else {
            return Err(format!(
                "the registry at {base} answered GET {page_url} with JSON that is not a server list (no `servers` array)"
            ));
        };
        synced.pages += 1;
        for raw in servers {
            let listed = match Listed::read(raw.clone()) {
                Ok(listed) => listed,
                Err(why) => {
                    synced.skipped.push(why);
                    continue;
                }
            };
            // A registry that ignores `version=latest` sends older versions too.
            if listed.official.is_latest == Some(false) {
                continue;
            }
            if let Some(updated) = &listed.official.updated_at
                && is_timestamp(updated)
                && newest
                    .as_deref()
                    .is_none_or(|newest| later(updated, newest))
            {
                newest = Some(updated.clone());
            }
            synced.received += 1;
            snapshot.servers.insert(listed.server.name.clone(), listed);
        }
        if snapshot.servers.len() > limits.servers {
            return Err(format!(
                "the registry at {base} lists over {} servers, more than a snapshot keeps; the last good snapshot is kept",
                limits.servers
            ));
        }
        progress(snapshot.servers.len());
        let next = (page.pointer("/metadata/nextCursor").and_then(Value::as_str))
            .filter(|next| !next.is_empty());
        let Some(next) = next else { break };
        if !cursors.insert(next.to_owned()) {
            return Err(format!(
                "the registry at {base} gave the cursor {:?} twice: its pages run in a loop",
                printable(next)
            ));
        }
        if synced.pages >= limits.pages {
            return Err(format!(
                "the registry at {base} has over {} pages, more than a sync reads",
                limits.pages
            ));
        }
        cursor = Some(next.to_owned());
    }
    snapshot.synced_at = now;
    snapshot.since = newest;
    Ok((snapshot, synced))
}

/// `BASE/v0.1/servers?limit=..&version=latest[&updated_since=..][&cursor=..]`.
fn page_url(base: &str, since: Option<&str>, cursor: Option<&str>) -> Result<String, String> {
    let mut url = url::Url::parse(&format!("{base}/v0.1/servers"))
        .map_err(|error| format!("{base:?} is not a registry URL: {error}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{base:?} is not an http or https URL"));
    }
    {
        let mut query = url.query_pairs_mut();
        query.append_pair("limit", &PAGE.to_string());
        query.append_pair("version", "latest");
        if let Some(since) = since {
            query.append_pair("updated_since", since);
        }
        if let Some(cursor) = cursor {
            query.append_pair("cursor", cursor);
        }
    }
    Ok(url.into())
}

/// Whether `text` looks like an RFC 3339 time: only digits and its punctuation, so that a
/// registry's odd value is never echoed back into a query as something else.
fn is_timestamp(text: &str) -> bool {
    text.len() <= 40
        && text.starts_with(|c: char| c.is_ascii_digit())
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || "-:.TZ+".contains(c))
}

/// Whether RFC 3339 time `a` is later than `b`: by their date and time to the second, then
/// by the fraction of a second, which is right for the UTC times registries give.
fn later(a: &str, b: &str) -> bool {
    let seconds = |time: &str| time.get(..19).unwrap_or(time).to_owned();
    let fraction = |time: &str| {
        let digits = (time.get(19..).and_then(|rest| rest.strip_prefix('.')))
            .map(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .unwrap_or_default();
        format!("{digits:0<9}")
    };
    (seconds(a), fraction(a)) > (seconds(b), fraction(b))
}

/// The servers of `snapshot` a person may still install: not deleted.
pub(crate) fn offered(snapshot: &Snapshot) -> impl Iterator<Item = &Listed> {
    (snapshot.servers.values()).filter(|listed| listed.official.status != Status::Deleted)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::http::canned::{Canned, json as answer};

    fn entry(name: &str, version: &str, updated: &str) -> Value {
        json!({
            "server": {"name": name, "version": version, "description": format!("{name} server")},
            "_meta": {"io.modelcontextprotocol.registry/official": {
                "status": "active", "updatedAt": updated, "isLatest": true
            }}
        })
    }

    fn run(
        canned: &Canned,
        previous: Option<Snapshot>,
        limits: Limits,
    ) -> Result<(Snapshot, Synced), String> {
        let mut seen = Vec::new();
        let out = futures_lite::future::block_on(sync(
            canned,
            "https://r.example/",
            previous,
            limits,
            42,
            &mut |count| seen.push(count),
        ));
        if let Ok((snapshot, _)) = &out {
            assert_eq!(seen.last(), Some(&snapshot.servers.len()));
        }
        out
    }

    const URL: &str = "https://r.example/v0.1/servers";

    #[test]
    fn pages_are_followed_then_only_changes_asked_for() {
        let canned = Canned::default().on("GET", URL, |request| {
            let query = request.url.split_once('?').map(|(_, q)| q).unwrap_or_default();
            let body = if query.contains("updated_since=2026-02-01T00%3A00%3A00Z") {
                json!({"servers": [
                    entry("a.b/one", "2.0.0", "2026-03-01T00:00:00Z"),
                    {"server": {"name": "a.b/two", "version": "1.0.0"},
                     "_meta": {"io.modelcontextprotocol.registry/official": {"status": "deleted", "updatedAt": "2026-03-02T00:00:00Z"}}}
                ]})
            } else if query.contains("cursor=page2") {
                json!({"servers": [entry("a.b/two", "1.0.0", "2026-02-01T00:00:00Z"), {"server": {"name": "bad name"}}],
                       "metadata": {"nextCursor": ""}})
            } else {
                assert!(query.contains("version=latest") && query.contains("limit=100"), "{query}");
                json!({"servers": [entry("a.b/one", "1.0.0", "2026-01-01T00:00:00Z")],
                       "metadata": {"nextCursor": "page2", "count": 1}})
            };
            answer(200, body)
        });
        let (first, synced) = run(&canned, None, Limits::DEFAULT).unwrap();
        assert_eq!(
            (
                synced.pages,
                synced.received,
                synced.skipped.len(),
                synced.delta
            ),
            (2, 2, 1, false)
        );
        assert_eq!(first.since.as_deref(), Some("2026-02-01T00:00:00Z"));
        assert_eq!(first.synced_at, 42);
        assert_eq!(first.url, "https://r.example");
        let (second, synced) = run(&canned, Some(first), Limits::DEFAULT).unwrap();
        assert!(synced.delta);
        assert_eq!(second.servers["a.b/one"].server.version, "2.0.0");
        assert_eq!(second.servers["a.b/two"].official.status, Status::Deleted);
        assert_eq!(offered(&second).count(), 1);
        assert_eq!(second.since.as_deref(), Some("2026-03-02T00:00:00Z"));
    }

    #[test]
    fn garbage_loops_and_floods_fail_naming_the_cause() {
        let garbage = Canned::default().on("GET", URL, |_| crate::auth::http::Response {
            status: 200,
            headers: Vec::new(),
            body: b"<html>maintenance</html>".to_vec(),
        });
        let error = run(&garbage, None, Limits::DEFAULT).unwrap_err();
        assert!(error.contains("not JSON"), "{error}");
        let not_a_list = Canned::default().json(URL, json!({"servers": {"a": 1}}));
        let error = run(&not_a_list, None, Limits::DEFAULT).unwrap_err();
        assert!(error.contains("not a server list"), "{error}");
        let looping = Canned::default().on("GET", URL, |request| {
            let next = if request.url.contains("cursor=x") {
                "y"
            } else {
                "x"
            };
            answer(
                200,
                json!({"servers": [], "metadata": {"nextCursor": next}}),
            )
        });
        let error = run(&looping, None, Limits::DEFAULT).unwrap_err();
        assert!(error.contains("\"x\" twice"), "{error}");
        let pages = std::sync::atomic::AtomicUsize::new(0);
        let endless = Canned::default().on("GET", URL, move |_| {
            let n = pages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            answer(
                200,
                json!({"servers": [], "metadata": {"nextCursor": format!("c{n}")}}),
            )
        });
        let limits = Limits {
            pages: 3,
            servers: 10,
        };
        let error = run(&endless, None, limits).unwrap_err();
        assert!(error.contains("over 3 pages"), "{error}");
        let flood = Canned::default().on("GET", URL, |_| {
            let servers: Vec<Value> = (0..20)
                .map(|i| entry(&format!("a.b/s{i}"), "1", "2026-01-01T00:00:00Z"))
                .collect();
            answer(200, json!({"servers": servers}))
        });
        let error = run(&flood, None, limits).unwrap_err();
        assert!(error.contains("over 10 servers"), "{error}");
        let refused = Canned::default().on("GET", URL, |_| answer(503, json!({"error": "down"})));
        let error = run(&refused, None, limits).unwrap_err();
        assert!(error.contains("HTTP 503: down"), "{error}");
    }

    #[test]
    fn times_compare_and_odd_ones_are_not_echoed() {
        assert!(later("2026-03-01T00:00:00Z", "2026-02-28T23:59:59.999Z"));
        assert!(later("2026-03-01T00:00:00.5Z", "2026-03-01T00:00:00Z"));
        assert!(!later("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"));
        assert!(is_timestamp("2025-08-07T13:15:04.280Z"));
        assert!(!is_timestamp("2026&cursor=evil"));
    }
}
