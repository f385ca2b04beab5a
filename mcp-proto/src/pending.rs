//! The requests a connection waits on: by our own id, and their deadlines in order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

/// How progress notifications find a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ProgressToken {
    /// The token is the request's own id, as `call_tool` sends it: no lookup table needed.
    OwnId,
    /// Any other token, as JSON text.
    Other(String),
}

pub(crate) struct Pending {
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    pub(crate) timeout: Duration,
    pub(crate) progress_token: Option<ProgressToken>,
    /// The encoded request while it waits for the handshake; `None` once queued for writing.
    pub(crate) held: Option<Vec<u8>>,
}

/// Pending requests by id. Looked up and removed once per response, so a hash map: a B-tree
/// costs several times as much on that path. Where order shows (failing every request on
/// close, releasing held requests), the ids are sorted first.
pub(crate) type PendingMap = HashMap<u64, Pending, BuildHasherDefault<IdHasher>>;

/// Hashes request ids with one multiplication instead of SipHash: the map only ever holds ids
/// we handed out ourselves, counting up, so a peer has no say in how they collide.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(self.0 ^ u64::from(byte));
        }
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: the table uses the top bits too, which a plain id leaves zero.
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Every pending request's deadline, earliest first, so that finding the next one costs
/// nothing however many requests are in flight. A heap rather than a sorted set: a request
/// that ends leaves its entry behind (no search, no allocation), and entries left behind are
/// dropped once they reach the top, or all at once when they outnumber the pending requests.
/// After every change the top is a pending request's current deadline.
#[derive(Default)]
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl Deadlines {
    pub(crate) fn push(&mut self, deadline: Instant, id: u64) {
        self.heap.push(Reverse((deadline, id)));
    }

    pub(crate) fn first(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((deadline, _))| *deadline)
    }

    /// Drops entries of requests that have ended or moved their deadline since.
    pub(crate) fn prune(&mut self, pending: &PendingMap) {
        while let Some(&Reverse(entry)) = self.heap.peek()
            && !is_current(pending, entry)
        {
            self.heap.pop();
        }
        if self.heap.len() > 2 * pending.len() + 64 {
            self.heap
                .retain(|&Reverse(entry)| is_current(pending, entry));
        }
    }

    /// Takes the requests whose deadline is at or before `now`, earliest first.
    pub(crate) fn expired(&mut self, now: Instant, pending: &PendingMap) -> Vec<u64> {
        let mut expired = Vec::new();
        while let Some(&Reverse((deadline, id))) = self.heap.peek() {
            if is_current(pending, (deadline, id)) {
                if deadline > now {
                    break;
                }
                expired.push(id);
            }
            self.heap.pop();
        }
        expired
    }

    /// How many entries the heap holds, left-behind ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(crate) fn clear(&mut self) {
        self.heap.clear();
    }
}

/// Whether `(deadline, id)` is a pending request's current deadline.
fn is_current(pending: &PendingMap, (deadline, id): (Instant, u64)) -> bool {
    pending.get(&id).is_some_and(|p| p.deadline == deadline)
}
