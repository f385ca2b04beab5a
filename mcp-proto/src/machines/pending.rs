//! The requests a connection waits on, for either role: the ids handed out, each request by
//! id, and their deadlines in order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::model::request::Params;
use crate::wire::jsonrpc::read_id;

/// Far enough to mean "never" without overflowing `Instant`.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// `timeout` after `now`, a timeout too long to add meaning "never".
pub(crate) fn deadline_after(now: Instant, timeout: Duration) -> Instant {
    now.checked_add(timeout.min(LONGEST_TIMEOUT)).unwrap_or(now)
}

/// Our requests still waiting for an answer, in either role.
pub(crate) struct Outstanding {
    requests: PendingMap,
    deadlines: Deadlines,
    /// The caller's id of each request re-sent under a new wire id (a multi-round-trip
    /// retry, a retry in another revision), by that wire id.
    aliases: HashMap<u64, u64, BuildHasherDefault<IdHasher>>,
    /// What was asked, by id, for the requests that may have to go again: held ones, and
    /// every one of the stateless era (a retry in another revision, a multi-round-trip retry).
    /// Apart from the requests, so that keeping one costs no allocation of its own: the map
    /// keeps its room, where a box per request cost the stateless era a tenth of a call.
    origins: HashMap<u64, Origin, BuildHasherDefault<IdHasher>>,
    next_id: u64,
}

impl Default for Outstanding {
    fn default() -> Self {
        Self {
            requests: PendingMap::default(),
            deadlines: Deadlines::default(),
            aliases: HashMap::default(),
            origins: HashMap::default(),
            next_id: 1,
        }
    }
}

impl Outstanding {
    /// The id the next request will get.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Hands out an id for a request this table does not keep (the client's `initialize`).
    pub(crate) fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Starts a request under the next id, due `timeout` from `now` (`None`: never): on the
    /// wire under that id, or `held` back (then `origin` must say what to send once released).
    pub(crate) fn start(
        &mut self,
        now: Instant,
        timeout: Option<Duration>,
        progress_token: Option<ProgressToken>,
        held: bool,
        origin: Option<Origin>,
    ) -> u64 {
        let id = self.take_id();
        let deadline = timeout.map(|timeout| deadline_after(now, timeout));
        let pending = Pending {
            started: now,
            deadline,
            timeout,
            progress_token,
            wire: (!held).then_some(id),
            held,
            awaiting_ack: false,
        };
        if let Some(origin) = origin {
            self.origins.insert(id, origin);
        }
        if let Some(deadline) = deadline {
            self.deadlines.push(deadline, id);
        }
        self.requests.insert(id, pending);
        id
    }

    pub(crate) fn get(&self, id: u64) -> Option<&Pending> {
        self.requests.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut Pending> {
        self.requests.get_mut(&id)
    }

    /// What outstanding request `id` asked, if it is kept.
    pub(crate) fn origin(&self, id: u64) -> Option<&Origin> {
        self.origins.get(&id)
    }

    pub(crate) fn origin_mut(&mut self, id: u64) -> Option<&mut Origin> {
        self.origins.get_mut(&id)
    }

    /// Stops keeping what request `id` asked: nothing will send it again.
    pub(crate) fn forget_origin(&mut self, id: u64) {
        self.origins.remove(&id);
    }

    /// The outstanding request whose current wire id is `wire`: neither held, nor waiting for
    /// input, nor re-sent since under another id.
    pub(crate) fn on_wire(&self, wire: u64) -> Option<u64> {
        let id = self.aliases.get(&wire).copied().unwrap_or(wire);
        let pending = self.requests.get(&id)?;
        (pending.wire == Some(wire)).then_some(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.requests.len()
    }

    /// The outstanding request a response's `id` answers ([`read_id`]); both roles read ids
    /// alike.
    pub(crate) fn answered(&self, id: &Value) -> Option<u64> {
        self.on_wire(read_id(id)?)
    }

    /// Ends request `id`, if it is outstanding.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Pending> {
        let pending = self.requests.remove(&id)?;
        self.origins.remove(&id);
        if let Some(wire) = pending.wire {
            self.aliases.remove(&wire);
        }
        self.deadlines.prune(&self.requests);
        Some(pending)
    }

    /// Puts request `id` back on the wire under the new wire id `wire`, due `timeout` from
    /// `now` as if it had just started: an answer to its former wire id is now a stray.
    pub(crate) fn resend(&mut self, id: u64, wire: u64, now: Instant) {
        self.off_wire(id);
        let Some(pending) = self.requests.get_mut(&id) else {
            return;
        };
        pending.wire = Some(wire);
        if wire != id {
            self.aliases.insert(wire, id);
        }
        let timeout = pending.timeout;
        self.set_deadline(id, now, timeout);
    }

    /// Takes request `id` off the wire while the caller answers the input requests of a
    /// multi-round-trip request: it has no deadline of its own meanwhile (each input request
    /// has one, and the retry restarts its clock).
    pub(crate) fn await_input(&mut self, id: u64, now: Instant) {
        self.off_wire(id);
        self.set_deadline(id, now, None);
    }

    /// An acknowledged subscription: it has no deadline any more.
    pub(crate) fn acknowledge(&mut self, id: u64, now: Instant) {
        if let Some(pending) = self.requests.get_mut(&id) {
            pending.awaiting_ack = false;
        }
        self.set_deadline(id, now, None);
    }

    fn off_wire(&mut self, id: u64) {
        if let Some(pending) = self.requests.get_mut(&id)
            && let Some(wire) = pending.wire.take()
        {
            self.aliases.remove(&wire);
        }
    }

    /// Restarts request `id`'s clock at `now`, due `timeout` later, or never.
    fn set_deadline(&mut self, id: u64, now: Instant, timeout: Option<Duration>) {
        let Some(pending) = self.requests.get_mut(&id) else {
            return;
        };
        pending.started = now;
        pending.deadline = timeout.map(|timeout| deadline_after(now, timeout));
        if let Some(deadline) = pending.deadline {
            self.deadlines.push(deadline, id);
        }
        self.deadlines.prune(&self.requests);
    }

    /// Moves request `id`'s deadline (progress came in): `timeout` from `now`, never past its
    /// start plus the longer of `timeout` and `longest`.
    pub(crate) fn extend(&mut self, id: u64, now: Instant, longest: Duration) {
        // Without a deadline (an acknowledged subscription, a request given none) there is
        // nothing to extend.
        let Some(pending) = self.requests.get_mut(&id).filter(|p| p.deadline.is_some()) else {
            return;
        };
        let Some(timeout) = pending.timeout else {
            return;
        };
        let hard_deadline = deadline_after(pending.started, longest.max(timeout));
        let deadline = deadline_after(now, timeout).min(hard_deadline);
        if Some(deadline) != pending.deadline {
            pending.deadline = Some(deadline);
            self.deadlines.push(deadline, id);
            self.deadlines.prune(&self.requests);
        }
    }

    /// The requests whose deadline is at or before `now`, earliest first, each with how long
    /// it was given: up to its deadline, not to `now`, so that a timer that fires late on a
    /// busy machine does not turn "within 1s" into "within 1.004s". They stay outstanding
    /// until removed.
    pub(crate) fn expired(&mut self, now: Instant) -> Vec<(u64, Duration)> {
        let expired = self.deadlines.expired(now, &self.requests);
        (expired.into_iter())
            .filter_map(|id| {
                let pending = self.requests.get(&id)?;
                let deadline = pending.deadline?;
                Some((id, deadline.saturating_duration_since(pending.started)))
            })
            .collect()
    }

    /// The earliest deadline.
    pub(crate) fn first_deadline(&self) -> Option<Instant> {
        self.deadlines.first()
    }

    /// Releases the requests held back for the handshake (or the probe) onto the wire under
    /// their own ids, returning those ids in order.
    pub(crate) fn release_held(&mut self) -> Vec<u64> {
        let mut held: Vec<u64> = (self.requests.iter_mut())
            .filter(|(_, p)| p.held)
            .map(|(&id, p)| {
                p.held = false;
                p.wire = Some(id);
                id
            })
            .collect();
        held.sort_unstable();
        held
    }

    /// Ends every request, returning their ids in order (the order failures are reported).
    pub(crate) fn take_all(&mut self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.requests.drain().map(|(id, _)| id).collect();
        ids.sort_unstable();
        self.deadlines.clear();
        self.aliases.clear();
        self.origins.clear();
        ids
    }

    /// How many deadline entries are kept, left-behind ones included.
    #[cfg(test)]
    pub(crate) fn deadline_entries(&self) -> usize {
        self.deadlines.len()
    }
}

/// How progress notifications find a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ProgressToken {
    /// The token is the request's own id, as `call_tool` sends it: no lookup table needed.
    OwnId,
    /// Any other token, as JSON text.
    Other(String),
}

pub(crate) struct Pending {
    /// When it went on the wire (its latest round, for a re-sent request).
    pub(crate) started: Instant,
    /// `None` for a subscription once acknowledged: it ends when answered or cancelled.
    pub(crate) deadline: Option<Instant>,
    /// The time each round is given; `None` for a request that has no deadline.
    pub(crate) timeout: Option<Duration>,
    pub(crate) progress_token: Option<ProgressToken>,
    /// The id it is on the wire under; `None` while held or waiting for input.
    pub(crate) wire: Option<u64>,
    /// Held back until the handshake (or the probe) ends; its origin says what to send then.
    pub(crate) held: bool,
    /// A `subscriptions/listen` whose acknowledgement has not come yet.
    pub(crate) awaiting_ack: bool,
}

/// A request as the caller made it, and what its rounds so far added.
#[derive(Debug)]
pub(crate) struct Origin {
    pub(crate) method: String,
    pub(crate) params: Params,
    /// `input_required` answers taken so far.
    pub(crate) rounds: u32,
    /// The last round's `requestState`, echoed exactly on the retry.
    pub(crate) request_state: Option<String>,
    /// The caller's answers to the last round's `inputRequests`.
    pub(crate) input_responses: Option<Map<String, Value>>,
    /// Whether it was already sent again in another revision (at most once).
    pub(crate) version_retried: bool,
}

impl Origin {
    pub(crate) fn new(method: String, params: Params) -> Self {
        Self {
            method,
            params,
            rounds: 0,
            request_state: None,
            input_responses: None,
            version_retried: false,
        }
    }
}

/// Pending requests by id. Looked up and removed once per response, so a hash map: a B-tree
/// costs several times as much on that path. Where order shows (failing every request on
/// close, releasing held requests), the ids are sorted first.
type PendingMap = HashMap<u64, Pending, BuildHasherDefault<IdHasher>>;

/// Hashes request ids with one multiplication instead of SipHash: the map only ever holds ids
/// we handed out ourselves, counting up, so a peer has no say in how they collide.
#[derive(Default)]
struct IdHasher(u64);

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
struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl Deadlines {
    fn push(&mut self, deadline: Instant, id: u64) {
        self.heap.push(Reverse((deadline, id)));
    }

    fn first(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((deadline, _))| *deadline)
    }

    /// Drops entries of requests that have ended or moved their deadline since.
    fn prune(&mut self, pending: &PendingMap) {
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
    fn expired(&mut self, now: Instant, pending: &PendingMap) -> Vec<u64> {
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
    fn len(&self) -> usize {
        self.heap.len()
    }

    fn clear(&mut self) {
        self.heap.clear();
    }
}

/// Whether `(deadline, id)` is a pending request's current deadline.
fn is_current(pending: &PendingMap, (deadline, id): (Instant, u64)) -> bool {
    pending
        .get(&id)
        .is_some_and(|p| p.deadline == Some(deadline))
}
