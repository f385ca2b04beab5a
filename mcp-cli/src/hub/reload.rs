//! Applying an edited config to a running hub: what changed is replaced (and closed if it
//! ran), what went away is closed and forgotten, the rest keeps running untouched.

use std::collections::BTreeMap;
use std::sync::PoisonError;

use crate::config::{Config, Server};
use crate::hub::Hub;

impl Hub {
    /// Applies the servers of an edited `config`: a new or changed entry replaces the old one
    /// (which is closed if it was running, so the next use starts the new one), a removed one
    /// is closed and forgotten. Returns whether anything changed. The policy stays the one
    /// the hub was made with.
    pub fn apply(&self, config: Config) -> bool {
        *(self.inner.pending.write()).unwrap_or_else(PoisonError::into_inner) = config.pending;
        let current: BTreeMap<String, Server> = (self.inner.slots().into_iter())
            .map(|slot| (slot.name().to_owned(), slot.server.clone()))
            .collect();
        let mut changed = false;
        let mut kept = Vec::new();
        for server in config.servers {
            kept.push(server.name.clone());
            if current.get(&server.name) != Some(&server) {
                self.add(server);
                changed = true;
            }
        }
        for name in current.keys().filter(|name| !kept.contains(name)) {
            self.remove(name);
            changed = true;
        }
        changed
    }

    /// Closes a server (if it runs) and forgets it.
    pub fn remove(&self, name: &str) {
        let mut slots = (self.inner.slots.write()).unwrap_or_else(PoisonError::into_inner);
        let old = slots.remove(name);
        self.inner.found.changed();
        if let Some(old) = old
            && let Some(closing) = old.stop()
        {
            self.inner
                .spawn(async move { closing.close(false).await })
                .detach();
        }
    }
}
