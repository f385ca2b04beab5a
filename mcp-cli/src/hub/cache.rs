//! How long a listing the hub holds may be served from memory: for its cache hint's `ttlMs`
//! from when it was asked for (stateless era); without a hint (handshake era), until a list
//! change says otherwise. The hint itself is kept beside it, for the catalogue on disk
//! ([`stored`](super::stored)), which must know a listing's `ttlMs` and `cacheScope`.

use std::time::Instant;

use mcp_smol::proto::{CacheHint, CacheScope};

/// Until when a listing is fresh, and the hint that says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Freshness {
    /// `None`: no end but a list change.
    until: Option<Instant>,
    /// The hint it came with; for a whole, the strictest of its parts'.
    hint: Option<CacheHint>,
}

impl Freshness {
    /// A listing asked for at `asked` that came with `hint`.
    pub(crate) fn of(hint: Option<CacheHint>, asked: Instant) -> Self {
        Self {
            // A life too long for the clock is as good as none.
            until: hint.and_then(|hint| asked.checked_add(hint.ttl)),
            hint,
        }
    }

    /// The cache hint it came with (the strictest, for a whole).
    pub(crate) fn hint(self) -> Option<CacheHint> {
        self.hint
    }

    /// The freshness of a whole made of both: it ends with the first.
    pub(crate) fn and(self, other: Self) -> Self {
        let until = match (self.until, other.until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let hint = match (self.hint, other.hint) {
            (Some(a), Some(b)) => Some(CacheHint {
                ttl: a.ttl.min(b.ttl),
                scope: match (a.scope, b.scope) {
                    (CacheScope::Public, CacheScope::Public) => CacheScope::Public,
                    _ => CacheScope::Private,
                },
            }),
            (a, b) => a.or(b),
        };
        Self { until, hint }
    }

    /// The hint to pass on at `now` for a whole made of this: what is left of its life, and
    /// `private` when any part is; `None` when no part came with a hint.
    pub(crate) fn hint_left(self, now: Instant) -> Option<CacheHint> {
        let until = self.until?;
        let scope = self.hint?.scope;
        let ttl = until.saturating_duration_since(now);
        Some(CacheHint { ttl, scope })
    }

    /// Whether it must be listed again before it is used at `now`.
    pub(crate) fn is_stale(self, now: Instant) -> bool {
        self.until.is_some_and(|until| until <= now)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn hint(ms: u64) -> Option<CacheHint> {
        let ttl = Duration::from_millis(ms);
        let scope = CacheScope::Private;
        Some(CacheHint { ttl, scope })
    }

    #[test]
    fn fresh_for_its_ttl_and_for_ever_without_a_hint() {
        let asked = Instant::now();
        let fresh = Freshness::of(hint(100), asked);
        assert!(!fresh.is_stale(asked + Duration::from_millis(99)));
        assert!(fresh.is_stale(asked + Duration::from_millis(100)));
        assert!(Freshness::of(hint(0), asked).is_stale(asked));
        let unhinted = Freshness::of(None, asked);
        assert!(!unhinted.is_stale(asked + Duration::from_secs(86_400)));
    }

    #[test]
    fn a_whole_ends_with_its_first_part() {
        let asked = Instant::now();
        let (short, long) = (
            Freshness::of(hint(10), asked),
            Freshness::of(hint(50), asked),
        );
        let later = asked + Duration::from_millis(20);
        assert!(short.and(long).is_stale(later));
        assert!(Freshness::of(None, asked).and(short).is_stale(later));
        assert!(!long.and(Freshness::of(None, asked)).is_stale(later));
        // The strictest hint: the shorter ttl, private if either part is.
        let public = Some(CacheHint {
            ttl: Duration::from_millis(5),
            scope: CacheScope::Public,
        });
        let whole = Freshness::of(public, asked).and(long);
        let expected = Some(CacheHint {
            ttl: Duration::from_millis(5),
            scope: CacheScope::Private,
        });
        assert_eq!(whole.hint(), expected);
        let alone = Freshness::of(None, asked).and(Freshness::of(public, asked));
        assert_eq!(alone.hint(), public);
    }

    #[test]
    fn the_hint_passed_on_is_the_strictest_part() {
        let asked = Instant::now();
        let public = CacheHint {
            ttl: Duration::from_millis(50),
            scope: CacheScope::Public,
        };
        let whole = Freshness::of(Some(public), asked).and(Freshness::of(hint(100), asked));
        let later = asked + Duration::from_millis(20);
        let expected = CacheHint {
            ttl: Duration::from_millis(30),
            scope: CacheScope::Private,
        };
        assert_eq!(whole.hint_left(later), Some(expected));
        let alone = Freshness::of(Some(public), asked).hint_left(asked);
        assert_eq!(alone, Some(public));
        assert_eq!(Freshness::of(None, asked).hint_left(asked), None);
    }
}
