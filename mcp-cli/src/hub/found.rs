//! Tools found before, kept for the next lookup of the same name: a gateway looks a tool up on
//! every call, and the policy, the pins and the poisoning scan gave the same answer each time
//! (a seventh of a call's CPU). A kept answer stands only while nothing it was decided on has
//! changed: the server's listing (the same one, still fresh, its connection up), the servers
//! configured (which also names the scan's other servers), the pins as last read, and the time
//! the pin file may go unlooked at. Only tools found are kept: a refusal is decided afresh.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use mcp_smol::proto::Tool;

use crate::hub::ToolEntry;

/// How many located names are kept.
const MOST_LOCATED: usize = 1024;

/// The tools found before and the names located before, by the generation they were found in.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Counts the changes that may change a lookup: a server added, replaced or removed, pins
    /// read anew, accepted or due for a fresh look.
    generation: AtomicU64,
    /// By server, then by the name the tool was asked for.
    tools: Mutex<BTreeMap<String, BTreeMap<String, Kept>>>,
    /// A qualified name's server and tool part.
    located: Mutex<BTreeMap<String, (u64, String, String)>>,
}

/// One tool found, and what its finding stands on.
#[derive(Debug)]
struct Kept {
    generation: u64,
    /// The listing it was found in, held so that its address names it.
    listing: Arc<Vec<Tool>>,
    /// When the pin file must be looked at again.
    pins: NextLook,
    entry: ToolEntry,
}

/// When a server's pin file is to be looked at again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextLook {
    /// No pins are kept.
    Never,
    /// Once this time has come.
    At(Instant),
    /// At the next lookup.
    Now,
}

impl Found {
    /// The generation now: read it before a lookup, and keep what it found under it.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Something a lookup stands on changed: everything kept is looked up afresh.
    pub(crate) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Tool `given` of `server`, as found before, if it still stands with `lists` saying
    /// whether a listing is still the server's current one.
    pub(crate) fn tool(
        &self,
        server: &str,
        given: &str,
        lists: impl FnOnce(&Arc<Vec<Tool>>) -> bool,
    ) -> Option<ToolEntry> {
        let generation = self.generation();
        let tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = tools.get(server)?.get(given)?;
        let pins_stand = match kept.pins {
            NextLook::Never => true,
            NextLook::At(time) => Instant::now() < time,
            NextLook::Now => false,
        };
        (kept.generation == generation && pins_stand && lists(&kept.listing))
            .then(|| kept.entry.clone())
    }

    /// Keeps `entry`, found as `given` in `listing` of `server` in `generation`.
    pub(crate) fn keep(
        &self,
        (server, given): (&str, &str),
        generation: u64,
        listing: &Arc<Vec<Tool>>,
        pins: NextLook,
        entry: &ToolEntry,
    ) {
        if pins == NextLook::Now {
            return;
        }
        let kept = Kept {
            generation,
            listing: listing.clone(),
            pins,
            entry: entry.clone(),
        };
        let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        let server = tools.entry(server.to_owned()).or_default();
        // Names asked for before another listing came would otherwise pile up.
        server.retain(|_, old| Arc::ptr_eq(&old.listing, listing));
        server.insert(given.to_owned(), kept);
    }

    /// The server and tool part of `qualified`, as located before in this generation.
    pub(crate) fn located(&self, qualified: &str) -> Option<(String, String)> {
        let generation = self.generation();
        let located = self.located.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, server, tool) = located.get(qualified)?;
        (*kept == generation).then(|| (server.clone(), tool.clone()))
    }

    /// Keeps where `qualified` was located in `generation`.
    pub(crate) fn keep_located(
        &self,
        qualified: &str,
        generation: u64,
        (server, tool): (&str, &str),
    ) {
        let mut located = self.located.lock().unwrap_or_else(PoisonError::into_inner);
        // Names of an older generation are of no more use; and a host that makes up names
        // of a known server (each located, then found unknown) cannot grow this without end.
        located.retain(|_, (kept, ..)| *kept == generation);
        if located.len() >= MOST_LOCATED {
            located.clear();
        }
        let place = (generation, server.to_owned(), tool.to_owned());
        located.insert(qualified.to_owned(), place);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn listing() -> Arc<Vec<Tool>> {
        let tool = json!({"name": "echo", "inputSchema": {"type": "object"}});
        Arc::new(vec![serde_json::from_value(tool).unwrap()])
    }

    fn entry(listing: &Arc<Vec<Tool>>) -> ToolEntry {
        ToolEntry {
            server: "s".to_owned(),
            name: "s__echo".to_owned(),
            tool: Arc::new(listing[0].clone()),
            ask: None,
        }
    }

    #[test]
    fn a_found_tool_stands_until_its_listing_generation_or_pin_look_changes() {
        let found = Found::default();
        let (listing, other) = (listing(), listing());
        let same = |kept: &Arc<Vec<Tool>>| Arc::ptr_eq(kept, &listing);
        let keep = |pins| {
            let generation = found.generation();
            found.keep(("s", "echo"), generation, &listing, pins, &entry(&listing));
        };
        keep(NextLook::Never);
        assert_eq!(found.tool("s", "echo", same), Some(entry(&listing)));
        assert_eq!(found.tool("s", "other", same), None);
        // Another listing (the server's list changed, or it restarted).
        assert_eq!(
            found.tool("s", "echo", |kept| Arc::ptr_eq(kept, &other)),
            None
        );
        // The config, the pins read: every kept tool is found again.
        found.changed();
        assert_eq!(found.tool("s", "echo", same), None);
        // The pin file is due a look.
        keep(NextLook::At(Instant::now() + Duration::from_secs(60)));
        assert!(found.tool("s", "echo", same).is_some());
        keep(NextLook::At(Instant::now() - Duration::from_millis(1)));
        assert_eq!(found.tool("s", "echo", same), None);
        keep(NextLook::Now);
        assert_eq!(found.tool("s", "echo", same), None);
    }

    #[test]
    fn located_names_stand_for_their_generation_and_are_bounded() {
        let found = Found::default();
        found.keep_located("s__echo", found.generation(), ("s", "echo"));
        let located = Some(("s".to_owned(), "echo".to_owned()));
        assert_eq!(found.located("s__echo"), located);
        found.changed();
        assert_eq!(found.located("s__echo"), None);
        for n in 0..MOST_LOCATED * 2 {
            found.keep_located(&format!("s__{n}"), found.generation(), ("s", "x"));
        }
        assert!(found.located.lock().unwrap().len() <= MOST_LOCATED);
    }
}
