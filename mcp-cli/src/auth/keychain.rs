//! The OS keychain through the `keyring` crate: the Secret Service on Linux (over D-Bus),
//! Keychain on macOS, the Credential Manager on Windows. One entry per MCP server URL, its
//! secret the whole stored [`Record`] as JSON.
//!
//! Built only with the `keychain` feature (on by default). Without it no keychain ever
//! answers: `auto` keeps tokens in the file and `keyring` fails with a message naming the
//! feature.

use super::store::Record;

/// Why the keychain could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unavailable(pub(crate) String);

#[cfg(not(feature = "keychain"))]
pub(crate) use absent::{available, load, load_secret, remove, remove_secret, save, save_secret};
#[cfg(feature = "keychain")]
pub(crate) use os::{available, load, load_secret, remove, remove_secret, save, save_secret};

#[cfg(feature = "keychain")]
mod os {
    use super::{Record, Unavailable};

    /// The service name our entries are filed under.
    const SERVICE: &str = "mcp-cli oauth";

    fn unavailable(error: keyring::Error) -> Unavailable {
        Unavailable(describe(&error))
    }

    fn describe(error: &keyring::Error) -> String {
        match error {
            keyring::Error::NoDefaultStore => {
                "no keychain answers (on Linux: no Secret Service on the D-Bus session bus)".into()
            }
            error => error.to_string(),
        }
    }

    /// Whether a keychain answers at all (it is connected to once per process).
    pub(crate) fn available() -> Result<(), Unavailable> {
        let status = keyring::Entry::store_status().as_ref();
        status
            .map_err(|error| Unavailable(describe(error)))
            .copied()
    }

    fn entry(server_url: &str) -> Result<keyring::Entry, Unavailable> {
        available()?;
        keyring::Entry::new(SERVICE, server_url).map_err(unavailable)
    }

    /// The record kept for `server_url`; `Ok(None)` when there is none (or it is unreadable: the
    /// next login rewrites it).
    pub(crate) fn load(server_url: &str) -> Result<Option<Record>, Unavailable> {
        match entry(server_url)?.get_secret() {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(error) => Err(unavailable(error)),
        }
    }

    pub(crate) fn save(record: &Record) -> Result<(), Unavailable> {
        let text = serde_json::to_vec(record).map_err(|error| Unavailable(error.to_string()))?;
        entry(&record.server_url)?
            .set_secret(&text)
            .map_err(unavailable)
    }

    /// Deletes the entry; whether there was one.
    pub(crate) fn remove(server_url: &str) -> Result<bool, Unavailable> {
        match entry(server_url)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(error) => Err(unavailable(error)),
        }
    }

    /// The service the values of `${secret:NAME}` are filed under, one entry a name.
    const SECRETS: &str = "mcp-cli secret";

    fn secret_entry(name: &str) -> Result<keyring::Entry, Unavailable> {
        available()?;
        keyring::Entry::new(SECRETS, name).map_err(unavailable)
    }

    /// The secret kept as `name`; `Ok(None)` when there is none.
    pub(crate) fn load_secret(name: &str) -> Result<Option<String>, Unavailable> {
        match secret_entry(name)?.get_password() {
            Ok(value) => Ok(Some(value)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(error) => Err(unavailable(error)),
        }
    }

    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub(crate) fn save_secret(name: &str, value: &str) -> Result<(), Unavailable> {
        secret_entry(name)?.set_password(value).map_err(unavailable)
    }

    /// Deletes the secret; whether there was one.
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub(crate) fn remove_secret(name: &str) -> Result<bool, Unavailable> {
        match secret_entry(name)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(error) => Err(unavailable(error)),
        }
    }
}

/// A build without the `keychain` feature: the same calls, none of which finds a keychain.
#[cfg(not(feature = "keychain"))]
mod absent {
    use super::{Record, Unavailable};

    fn missing() -> Unavailable {
        Unavailable(
            "this build has no keychain support (mcp-client-cli's `keychain` feature is off); \
             use token_store = \"file\" or \"auto\""
                .into(),
        )
    }

    pub(crate) fn available() -> Result<(), Unavailable> {
        Err(missing())
    }

    pub(crate) fn load(_server_url: &str) -> Result<Option<Record>, Unavailable> {
        Err(missing())
    }

    pub(crate) fn save(_record: &Record) -> Result<(), Unavailable> {
        Err(missing())
    }

    pub(crate) fn remove(_server_url: &str) -> Result<bool, Unavailable> {
        Err(missing())
    }

    pub(crate) fn load_secret(_name: &str) -> Result<Option<String>, Unavailable> {
        Err(missing())
    }

    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub(crate) fn save_secret(_name: &str, _value: &str) -> Result<(), Unavailable> {
        Err(missing())
    }

    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub(crate) fn remove_secret(_name: &str) -> Result<bool, Unavailable> {
        Err(missing())
    }
}
