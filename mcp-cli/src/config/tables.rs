//! A file's top level, read in one pass: each key a format knows goes to that format, the
//! rest (the host's other settings) is skipped. Each syntax lists its keys in one place, an
//! impl of [`Tables`].

use std::collections::BTreeSet;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Error as _, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::expand::RawServers;

/// What one syntax reads from a file's top level.
pub(super) trait Tables: Default {
    /// Reads the value under `key` if the key is one of ours; `Ok(false)` leaves it unread.
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
}

/// A file's top level as `T` read it.
pub(super) struct TopLevel<T> {
    pub tables: T,
    /// No key at all: a file not filled in yet.
    pub empty: bool,
}

/// Adds a format's servers to those found so far; `None` until some table is found, so that a
/// file holding none is told apart from one holding an empty table.
pub(super) fn add(servers: &mut Option<RawServers>, more: RawServers) {
    servers.get_or_insert_default().extend(more);
}

impl<'de, T: Tables> Deserialize<'de> for TopLevel<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TopVisitor(PhantomData))
    }
}

struct TopVisitor<T>(PhantomData<T>);

impl<'de, T: Tables> Visitor<'de> for TopVisitor<T> {
    type Value = TopLevel<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut tables = T::default();
        let mut seen = BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(A::Error::custom(format!("duplicate key `{key}`")));
            }
            if !tables.read(&key, &mut map)? {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(TopLevel {
            tables,
            empty: seen.is_empty(),
        })
    }
}
