//! A channel for one value: how a driver hands each request it carries its answer.
//!
//! Every call makes one, so it is kept to one small allocation and a lock taken a few times,
//! where a general channel (`async_channel::bounded(1)`) costs a cache-aligned allocation and
//! an event list per side: about a tenth of a sequential call's instructions.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// A pair: the sender goes to the driver, the receiver stays with the caller.
pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            value: None,
            waker: None,
            sender_gone: false,
            receiver_gone: false,
        }),
    });
    (Sender(shared.clone()), Receiver(shared))
}

struct Shared<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_gone: bool,
    receiver_gone: bool,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nothing runs under the lock that could panic and leave the state half changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The driver's side.
pub(crate) struct Sender<T>(Arc<Shared<T>>);

impl<T> Sender<T> {
    /// Hands `value` over. The receiver is woken as `self` goes, at the end of this call: the
    /// one wake-up path for an answer and for a sender dropped without one. A value nobody
    /// waits for any more goes with the last handle, which is then this one.
    pub(crate) fn send(self, value: T) {
        self.0.lock().value = Some(value);
    }

    /// Whether the receiver has stopped waiting.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.lock().receiver_gone
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.sender_gone = true;
        let waker = state.waker.take();
        drop(state);
        // Outside the lock: waking may run code of the caller's executor.
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The sender went away without sending.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Closed;

/// The caller's side.
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

impl<T> Receiver<T> {
    /// Waits for the value, or for the sender to go away without one.
    pub(crate) fn recv(&self) -> Recv<'_, T> {
        Recv(self)
    }

    /// Polls for the value, or for the sender to go away without one.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Result<T, Closed>> {
        let mut state = self.0.lock();
        if let Some(value) = state.value.take() {
            return Poll::Ready(Ok(value));
        }
        if state.sender_gone {
            return Poll::Ready(Err(Closed));
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.receiver_gone = true;
        // A value that arrived unread goes now, not with the sender.
        let value = state.value.take();
        drop(state);
        drop(value);
    }
}

/// The future of [`Receiver::recv`].
pub(crate) struct Recv<'a, T>(&'a Receiver<T>);

impl<T> Future for Recv<'_, T> {
    type Output = Result<T, Closed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_sent_before_the_wait_is_there_at_once() {
        let (sender, receiver) = channel();
        sender.send(7);
        assert_eq!(futures_lite::future::block_on(receiver.recv()), Ok(7));
    }

    #[test]
    fn a_value_sent_from_another_thread_wakes_the_wait() {
        let (sender, receiver) = channel();
        let sending = std::thread::spawn(move || sender.send("answer"));
        assert_eq!(
            futures_lite::future::block_on(receiver.recv()),
            Ok("answer")
        );
        sending.join().unwrap();
    }

    #[test]
    fn a_sender_dropped_without_sending_ends_the_wait() {
        let (sender, receiver) = channel::<u8>();
        let mut wait = Box::pin(receiver.recv());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        drop(sender);
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(Err(Closed)));
    }

    #[test]
    fn the_sender_sees_a_receiver_that_stopped_waiting() {
        let (sender, receiver) = channel::<u8>();
        assert!(!sender.is_closed());
        drop(receiver);
        assert!(sender.is_closed());
        sender.send(1);
    }

    #[test]
    fn a_value_nobody_reads_is_dropped_with_the_receiver() {
        let value = Arc::new(());
        let (sender, receiver) = channel();
        sender.send(value.clone());
        drop(receiver);
        assert_eq!(Arc::strong_count(&value), 1);
    }
}
