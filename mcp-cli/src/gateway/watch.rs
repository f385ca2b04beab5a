//! Watching the config files: their modification times are polled every second (simple and
//! portable, and a second is quick enough for an edit by hand), and an edit is applied to the
//! hub.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::{Config, ConfigError};
use crate::files::{Stamp, stamps};
use crate::hub::Hub;

/// How often the files are looked at.
const POLL: Duration = Duration::from_secs(1);

type Loader = Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// The config files and how to read them again.
pub(crate) struct Watch {
    files: Vec<PathBuf>,
    seen: Vec<Option<Stamp>>,
    load: Loader,
}

impl Watch {
    /// Watches `files` (missing ones too: creating one is an edit).
    pub(crate) fn new(files: Vec<PathBuf>, load: Loader) -> Self {
        let seen = stamps(&files);
        Self { files, seen, load }
    }

    /// Returns once a file has changed since the last look.
    pub(crate) async fn changed(&mut self) {
        loop {
            async_io::Timer::after(POLL).await;
            let now = stamps(&self.files);
            if now != self.seen {
                self.seen = now;
                return;
            }
        }
    }

    /// Reads the config again and applies it; `true` if the servers changed. A config that
    /// no longer reads is reported and changes nothing.
    pub(crate) fn apply(&self, hub: &Hub) -> bool {
        match (self.load)() {
            Ok(config) => hub.apply(config),
            Err(error) => {
                let message = format!("mcp-cli serve: config not applied: {error}");
                crate::output::diagnostic(&message);
                false
            }
        }
    }
}
