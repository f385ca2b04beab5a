//! A host's `tools/list` in the plain mode: every served server's tools the catalogue has ever
//! seen, at once; the servers never listed, waited for within [`LIST_WAIT`]; and, past it, a
//! list that says it goes on (DESIGN §19).
//!
//! Many hosts list once: the Inspector's command line, a script on an SDK client, a CI check,
//! a 2026-07-28 host that holds no `subscriptions/listen`. A list change they never hear of is
//! no answer for them, so the first list must hold what can be had: a server kept in the
//! catalogue on disk costs nothing to list, whatever its cache hint says about reusing its
//! definitions for calls (calls list live), and one never listed is worth waiting for a while.
//! What is still starting after the wait is named by the list itself: a `nextCursor`, the
//! pagination both eras share ("there is more"), whose page waits for those servers again;
//! `_meta` names them; a 2026-07-28 host is told `ttlMs: 0` (list again before you rely on
//! it). A host that holds the connection is also sent `notifications/tools/list_changed` when
//! each is ready: the hub tells of a first listing nobody waited for as of a change.

use std::time::{Duration, Instant};

use futures_lite::future::FutureExt;
use mcp_smol::proto::{ListResult, RpcError, Tool, server::ClientInfo};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Gateway;
use super::errors::invalid_params;
use super::features::STALE_AT_ONCE;
use crate::hints;
use crate::hub::Catalogue;

/// How long `tools/list` waits for servers never listed before, unless `MCP_CLI_LIST_WAIT_MS`
/// says. Under the shortest limit a common host puts on it (Codex gives a server 10 s to start
/// and list its tools; Claude Code 30 s; the SDK clients and the Inspector 60 s or none), with
/// room left for the host's own start of the gateway and its handshake; and over what a
/// Python or Node server takes to start cold from an installed package (1 to 5 s). Servers
/// the catalogue has seen are never waited for, so this is paid once, on a cold catalogue.
pub(crate) const LIST_WAIT: Duration = Duration::from_secs(8);

/// The `_meta` key of a list page naming the servers whose tools are still to come.
const STARTING: &str = "mcp-cli/starting";

/// Past this many pages a list stops saying it goes on: a server still starting then is
/// stuck, and its list change (or the next list) is all a host can have of it.
const MAX_PAGES: u32 = 8;

/// What a `nextCursor` of ours stands for: the servers still starting when the page before
/// was answered, and the page it asks for (so that no two cursors of one list are the same:
/// a client stops at a repeated cursor, as ours does).
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    starting: Vec<String>,
    page: u32,
}

impl Gateway {
    /// The tools of the servers this gateway stands for (`params` without a cursor) or of
    /// those a cursor of ours names: those with a listing at hand (running, or kept on disk)
    /// at once, the others when they are ready within [`Gateway::list_wait`]; past it, the
    /// listing last kept however old, and for a server never listed, a `nextCursor`. Hosts
    /// give `tools/list` some seconds and give up on every server when one takes longer.
    pub(super) async fn list_tools(
        &self,
        params: &Value,
        era: Option<&ClientInfo>,
    ) -> Result<Value, RpcError> {
        let (servers, page) = match params.get("cursor") {
            None | Some(Value::Null) => (self.servers(), 1),
            Some(cursor) => self.read_cursor(cursor)?,
        };
        let deadline = Instant::now() + self.list_wait;
        let listings: Vec<_> = (servers.iter().cloned())
            .map(|server| {
                let hub = self.hub.clone();
                (self.executor)
                    .spawn(async move { hub.tools_of(std::slice::from_ref(&server)).await })
            })
            .collect();
        // By position, so that the tools come in the order of the servers whenever each was
        // ready: hosts want a stable order.
        let mut lists: Vec<Option<Catalogue>> = Vec::new();
        let mut waiting = Vec::new();
        for (index, mut listing) in listings.into_iter().enumerate() {
            let timeout = async {
                async_io::Timer::at(deadline).await;
                None
            };
            match async { Some((&mut listing).await) }.or(timeout).await {
                Some(catalogue) => lists.push(Some(catalogue)),
                None => {
                    lists.push(None);
                    waiting.push((index, listing));
                }
            }
        }
        // A listing that ended meanwhile is in; one that goes on is told of by the hub.
        let mut starting = Vec::new();
        for (index, listing) in waiting {
            if listing.is_finished() {
                lists[index] = Some(listing.await);
                continue;
            }
            listing.detach();
            match self.hub.last_kept_tools(&servers[index]) {
                Some(kept) => lists[index] = Some(kept),
                None => starting.push(servers[index].clone()),
            }
        }
        let catalogue = (lists.into_iter().flatten()).fold(Catalogue::default(), |mut all, one| {
            all.tools.extend(one.tools);
            all.failures.extend(one.failures);
            all
        });
        for (server, error) in &catalogue.failures {
            let error = hints::explained(error);
            crate::output::diagnostic(&format!("mcp-cli serve: {server} left out: {error}"));
        }
        let goes_on = !starting.is_empty() && page < MAX_PAGES;
        let next_cursor = goes_on.then(|| {
            let next = Cursor {
                starting: starting.clone(),
                page: page + 1,
            };
            serde_json::to_string(&next).unwrap_or_default()
        });
        // Every page of a list that ran past the wait: stale at once, and of one scope, as
        // the revision asks of a list's pages.
        let cache = match era.is_some() && (goes_on || page > 1) {
            true => Some(STALE_AT_ONCE),
            false => self.list_hint(era, false),
        };
        let page = ListResult {
            // Under the hub's names, which `tools/call` takes.
            items: (catalogue.tools.iter())
                .map(|entry| Tool {
                    name: entry.name.clone(),
                    ..(*entry.tool).clone()
                })
                .collect(),
            next_cursor,
            skipped: 0,
            cache,
        };
        let mut page = page.to_json();
        if !starting.is_empty() {
            page.insert("_meta".to_owned(), json!({ STARTING: starting }));
        }
        Ok(Value::Object(page))
    }

    /// The servers a cursor of ours names, among those this gateway stands for, and its page.
    fn read_cursor(&self, cursor: &Value) -> Result<(Vec<String>, u32), RpcError> {
        let unknown = || invalid_params(format!("unknown cursor {cursor}"));
        let text = cursor.as_str().ok_or_else(unknown)?;
        let Cursor { starting, page } = serde_json::from_str(text).map_err(|_| unknown())?;
        // A host's cursor names no server it could not list from the start.
        if starting.is_empty() || !starting.iter().all(|server| self.serves(server)) {
            return Err(unknown());
        }
        Ok((starting, page.max(2)))
    }
}
