//! The protocol revisions we speak, in their two eras, and how a caller chooses among them.

use std::fmt;

/// Revisions of the handshake era (`initialize`, then a session), newest first.
pub(crate) const HANDSHAKE_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Revisions of the stateless era (no handshake; every request carries its version and the
/// client's capabilities in `_meta`), newest first.
pub(crate) const STATELESS_VERSIONS: &[&str] = &["2026-07-28"];

/// Every revision we speak, newest first: the stateless era's, then the handshake era's.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// The handshake-era revision we ask for in `initialize`.
pub const LATEST_PROTOCOL_VERSION: &str = HANDSHAKE_VERSIONS[0];

/// The stateless-era revision we ask for first.
pub const LATEST_STATELESS_VERSION: &str = STATELESS_VERSIONS[0];

/// The two eras of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// `initialize`, `notifications/initialized`, then a session (2024-11-05 to 2025-11-25).
    Handshake,
    /// No handshake: `_meta` on every request, `server/discover` (2026-07-28 and later).
    Stateless,
}

impl Era {
    /// The era of a revision we speak; `None` for one we do not.
    pub fn of(version: &str) -> Option<Self> {
        if STATELESS_VERSIONS.contains(&version) {
            Some(Self::Stateless)
        } else if HANDSHAKE_VERSIONS.contains(&version) {
            Some(Self::Handshake)
        } else {
            None
        }
    }
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Handshake => "handshake",
            Self::Stateless => "stateless",
        })
    }
}

/// Which revision a connection speaks: found out, or fixed by the caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Find out: probe with `server/discover` in the newest stateless revision; a result or a
    /// recognised stateless-era error means the stateless era, anything else (another error,
    /// no answer in time) the handshake era, which then starts with `initialize` (refused
    /// with a -32022 naming a stateless revision we speak, it gives way to that revision).
    #[default]
    Auto,
    /// This revision (one of [`SUPPORTED_PROTOCOL_VERSIONS`]) and no other: no probe.
    Revision(&'static str),
}

impl Protocol {
    /// Reads `auto` or a revision we speak, as written in a config file or on a command line.
    pub fn parse(text: &str) -> Result<Self, UnknownRevision> {
        if text == "auto" {
            return Ok(Self::Auto);
        }
        match SUPPORTED_PROTOCOL_VERSIONS.iter().find(|v| **v == text) {
            Some(version) => Ok(Self::Revision(version)),
            None => Err(UnknownRevision(text.to_owned())),
        }
    }

    /// The era this choice fixes; `None` for [`Protocol::Auto`].
    pub fn era(self) -> Option<Era> {
        match self {
            Self::Auto => None,
            Self::Revision(version) => Era::of(version),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Revision(version) => f.write_str(version),
        }
    }
}

/// A revision named in a config or on a command line that we do not speak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRevision(pub String);

impl fmt::Display for UnknownRevision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown protocol revision `{}`: expected `auto` or one of {}",
            self.0,
            SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        )
    }
}

impl std::error::Error for UnknownRevision {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_revision_has_one_era_and_parses_back() {
        for version in SUPPORTED_PROTOCOL_VERSIONS {
            let protocol = Protocol::parse(version).unwrap();
            assert_eq!(protocol.to_string(), *version);
            assert!(protocol.era().is_some());
        }
        assert_eq!(
            HANDSHAKE_VERSIONS.len() + STATELESS_VERSIONS.len(),
            SUPPORTED_PROTOCOL_VERSIONS.len()
        );
        assert_eq!(Protocol::parse("auto"), Ok(Protocol::Auto));
        let error = Protocol::parse("2099-01-01").unwrap_err().to_string();
        assert!(
            error.contains("2099-01-01") && error.contains("2026-07-28"),
            "{error}"
        );
    }
}
