//! One listener of the hub's events: the newest [`CAPACITY`] events it has not taken yet, and
//! how many older ones were dropped to make room, which it is told before anything else.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use async_channel::{Receiver, Sender};
use futures_lite::Stream;

use super::HubEvent;

/// How many events a listener holds before the oldest are dropped.
pub(crate) const CAPACITY: usize = 256;

/// What the hub put in and the receiver has not taken yet.
#[derive(Debug, Default)]
struct Held {
    events: VecDeque<HubEvent>,
    /// Dropped from the front since the receiver last took anything.
    missed: u64,
}

/// The hub's end of one listener.
#[derive(Debug)]
pub(crate) struct Listener {
    held: Arc<Mutex<Held>>,
    /// Rung after each event. It holds one ring at most: the receiver takes every event held
    /// before it waits again, so one ring wakes it for them all.
    bell: Sender<()>,
}

/// A receiver of the hub's events, from [`Hub::events`](super::Hub::events). It holds the
/// newest 256; when more come, the oldest go, and the next receive returns
/// [`HubEvent::Lagged`] with how many went, then the held events in order. Ends, after the
/// events it holds, once the last clone of the hub is dropped. Also a [`Stream`].
#[derive(Debug)]
pub struct Events {
    held: Arc<Mutex<Held>>,
    /// Boxed: a waiting receive pins it, and `Events` itself stays free to move.
    bell: Pin<Box<Receiver<()>>>,
}

/// A new listener and its receiver.
pub(crate) fn listen() -> (Listener, Events) {
    let held = Arc::new(Mutex::new(Held::default()));
    let (ring, bell) = async_channel::bounded(1);
    let listener = Listener {
        held: held.clone(),
        bell: ring,
    };
    let bell = Box::pin(bell);
    (listener, Events { held, bell })
}

fn lock(held: &Mutex<Held>) -> MutexGuard<'_, Held> {
    // Every change leaves the queue whole: a panic while it was held loses nothing.
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Listener {
    /// Holds `event` for the receiver, dropping the oldest held one if there is no room.
    pub(crate) fn send(&self, event: &HubEvent) {
        {
            let mut held = lock(&self.held);
            if held.events.len() == CAPACITY {
                held.events.pop_front();
                held.missed += 1;
            }
            held.events.push_back(event.clone());
        }
        // Full means rung already and not yet heard: that ring covers this event too.
        let _ = self.bell.try_send(());
    }

    /// Whether the receiver was dropped.
    pub(crate) fn is_gone(&self) -> bool {
        self.bell.is_closed()
    }
}

impl Events {
    /// The next event if one is held, without waiting: [`HubEvent::Lagged`] first if older
    /// ones were dropped since the last one taken.
    pub fn try_recv(&self) -> Option<HubEvent> {
        let mut held = lock(&self.held);
        if held.missed > 0 {
            let missed = std::mem::take(&mut held.missed);
            return Some(HubEvent::Lagged { missed });
        }
        held.events.pop_front()
    }

    /// The next event, waiting for one; `None` once the hub is gone and every held event was
    /// taken.
    pub async fn recv(&self) -> Option<HubEvent> {
        loop {
            if let Some(event) = self.try_recv() {
                return Some(event);
            }
            // Rung after any event held since the look above; closed with the hub, after
            // which nothing more is held.
            if self.bell.recv().await.is_err() {
                return self.try_recv();
            }
        }
    }
}

impl Stream for Events {
    type Item = HubEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<HubEvent>> {
        loop {
            if let Some(event) = self.try_recv() {
                return Poll::Ready(Some(event));
            }
            match self.bell.as_mut().poll_next(cx) {
                Poll::Ready(Some(())) => {}
                Poll::Ready(None) => return Poll::Ready(self.try_recv()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::{StreamExt, future};

    fn changed(n: usize) -> HubEvent {
        HubEvent::ToolsChanged {
            server: format!("s{n}"),
        }
    }

    #[test]
    fn a_listener_that_drains_after_a_burst_learns_first_how_many_it_missed() {
        let (listener, events) = listen();
        let burst = CAPACITY + 5;
        for n in 0..burst {
            listener.send(&changed(n));
        }
        // Nothing comes after the burst: the count is told all the same, then the newest.
        assert_eq!(events.try_recv(), Some(HubEvent::Lagged { missed: 5 }));
        for n in 5..burst {
            assert_eq!(events.try_recv(), Some(changed(n)));
        }
        assert_eq!(events.try_recv(), None);
        // Caught up: the next event comes alone.
        listener.send(&changed(burst));
        assert_eq!(events.try_recv(), Some(changed(burst)));
        assert_eq!(events.try_recv(), None);
    }

    #[test]
    fn what_was_dropped_while_a_listener_lagged_is_counted_once_in_all() {
        let (listener, events) = listen();
        for n in 0..CAPACITY + 3 {
            listener.send(&changed(n));
        }
        // Half read, then overflowing again before the count was taken: one count for both.
        let taken = CAPACITY / 2;
        listener.send(&changed(CAPACITY + 3));
        assert_eq!(events.try_recv(), Some(HubEvent::Lagged { missed: 4 }));
        for n in 4..4 + taken {
            assert_eq!(events.try_recv(), Some(changed(n)));
        }
        for n in CAPACITY + 4..CAPACITY + 4 + taken + 2 {
            listener.send(&changed(n));
        }
        assert_eq!(events.try_recv(), Some(HubEvent::Lagged { missed: 2 }));
        assert_eq!(events.try_recv(), Some(changed(4 + taken + 2)));
    }

    #[test]
    fn a_listener_that_keeps_up_loses_nothing() {
        let (listener, events) = listen();
        future::block_on(async {
            for n in 0..CAPACITY * 4 {
                listener.send(&changed(n));
                assert_eq!(events.recv().await, Some(changed(n)));
            }
            // Behind by a full queue, never more: still nothing lost.
            for n in 0..CAPACITY {
                listener.send(&changed(n));
            }
            for n in 0..CAPACITY {
                assert_eq!(events.recv().await, Some(changed(n)));
            }
        });
        assert_eq!(events.try_recv(), None);
    }

    #[test]
    fn a_waiting_receiver_is_woken_and_the_stream_ends_after_what_it_holds() {
        let (listener, mut events) = listen();
        future::block_on(async {
            let sent = async {
                future::yield_now().await;
                listener.send(&changed(0));
                listener.send(&changed(1));
                listener
            };
            let (first, listener) = future::zip(events.recv(), sent).await;
            assert_eq!(first, Some(changed(0)));
            listener.send(&changed(2));
            drop(listener);
            let rest: Vec<HubEvent> = (&mut events).collect().await;
            assert_eq!(rest, [changed(1), changed(2)]);
            assert_eq!(events.recv().await, None);
        });
    }

    #[test]
    fn a_dropped_receiver_is_seen_as_gone() {
        let (listener, events) = listen();
        assert!(!listener.is_gone());
        drop(events);
        assert!(listener.is_gone());
    }
}
