//! The queue that carries the handles' operations to their driver: many senders, one
//! receiver (the driver), no bound.
//!
//! Every call puts one operation on it and the driver polls it on each of its turns, a few
//! times a call. A general channel (`async_channel::unbounded`) paid for what this queue does
//! not need (an event list, its listeners made and dropped, a lock-free block list): about
//! 1,600 instructions a call of the 23,000 a sequential call cost. Here it is one lock taken
//! briefly on each side, and one waker.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// A queue: the senders go to the handles, the receiver to the driver.
pub(crate) fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            waker: None,
            senders: 1,
            closed: false,
        }),
    });
    (Sender(shared.clone()), Receiver(shared))
}

struct Shared<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    items: VecDeque<T>,
    /// The receiver's, while it waits: taken by the first send that wakes it.
    waker: Option<Waker>,
    senders: usize,
    /// Set by [`Receiver::close`] or when the receiver goes: sends fail from then on.
    closed: bool,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nothing runs under the lock that could panic and leave the state half changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// A handle's side; cheap to clone.
pub(crate) struct Sender<T>(Arc<Shared<T>>);

/// The item of a send to a closed queue, handed back.
#[derive(Debug)]
pub(crate) struct Closed<T>(pub(crate) T);

impl<T> Sender<T> {
    /// Queues `item` and wakes the receiver, unless the queue is closed. Never waits.
    pub(crate) fn send(&self, item: T) -> Result<(), Closed<T>> {
        let mut state = self.0.lock();
        if state.closed {
            return Err(Closed(item));
        }
        state.items.push_back(item);
        let waker = state.waker.take();
        drop(state);
        // Outside the lock: waking may run code of the caller's executor.
        wake(waker);
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.0.lock().senders += 1;
        Self(self.0.clone())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.senders -= 1;
        // The last one gone: the receiver hears the end once it has taken what is queued.
        let waker = if state.senders == 0 {
            state.waker.take()
        } else {
            None
        };
        drop(state);
        wake(waker);
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sender { .. }")
    }
}

/// The driver's side.
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

impl<T> Receiver<T> {
    /// The next item, if one is queued.
    pub(crate) fn try_recv(&self) -> Option<T> {
        self.0.lock().items.pop_front()
    }

    /// The next item; `None` once the queue is empty and every sender is gone, or it is
    /// closed.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.0.lock();
        if let Some(item) = state.items.pop_front() {
            return Poll::Ready(Some(item));
        }
        if state.senders == 0 || state.closed {
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Refuses every send from now on; what is queued stays to be received.
    pub(crate) fn close(&self) {
        self.0.lock().closed = true;
    }
}

impl<T> Drop for Receiver<T> {
    /// Nobody will take what is queued: it goes now (its callers hear so), not with the
    /// last sender.
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.closed = true;
        let items = std::mem::take(&mut state.items);
        drop(state);
        drop(items);
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Receiver { .. }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll<T>(receiver: &Receiver<T>) -> Poll<Option<T>> {
        receiver.poll_recv(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn items_come_in_the_order_they_were_sent() {
        let (sender, receiver) = unbounded();
        let other = sender.clone();
        sender.send(1).unwrap();
        other.send(2).unwrap();
        assert_eq!(poll(&receiver), Poll::Ready(Some(1)));
        assert_eq!(receiver.try_recv(), Some(2));
        assert_eq!(poll(&receiver), Poll::Pending);
    }

    #[test]
    fn a_send_wakes_the_waiting_receiver() {
        let (sender, receiver) = unbounded();
        let sending = std::thread::spawn(move || sender.send("op").unwrap());
        let received =
            futures_lite::future::block_on(std::future::poll_fn(|cx| receiver.poll_recv(cx)));
        assert_eq!(received, Some("op"));
        sending.join().unwrap();
    }

    #[test]
    fn the_end_comes_after_what_is_queued_once_every_sender_is_gone() {
        let (sender, receiver) = unbounded();
        let other = sender.clone();
        sender.send(1).unwrap();
        drop(sender);
        assert_eq!(poll(&receiver), Poll::Ready(Some(1)));
        assert_eq!(poll(&receiver), Poll::Pending);
        drop(other);
        assert_eq!(poll(&receiver), Poll::Ready(None));
    }

    #[test]
    fn a_closed_queue_refuses_sends_and_keeps_what_it_holds() {
        let (sender, receiver) = unbounded();
        sender.send(1).unwrap();
        receiver.close();
        assert!(matches!(sender.send(2), Err(Closed(2))));
        assert_eq!(receiver.try_recv(), Some(1));
        assert_eq!(poll(&receiver), Poll::Ready(None));
    }

    #[test]
    fn what_is_queued_goes_with_the_receiver() {
        let item = Arc::new(());
        let (sender, receiver) = unbounded();
        sender.send(item.clone()).unwrap();
        drop(receiver);
        assert_eq!(Arc::strong_count(&item), 1);
        assert!(sender.send(item.clone()).is_err());
    }
}
