//! A coarse timer for hyper's header-read timeout in `serve --listen`.
//!
//! Hyper starts that timeout for every request it reads. With async-io's timer each start
//! inserts a timer into the reactor, which wakes the reactor's thread (an `eventfd` write, an
//! `epoll` return, a `timerfd` reset): a cost per request for a bound of 30 seconds. Here a
//! sleep is an entry in a list, and one task looks at the list every [`RESOLUTION`] while it
//! holds any, waking those whose deadline has passed: no system call per request.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};

/// How late a sleep may end.
const RESOLUTION: Duration = Duration::from_secs(1);

/// The sleeps waiting, and how to wake the task that ends them.
struct Sleeps {
    next_key: u64,
    waiting: BTreeMap<u64, (Instant, Waker)>,
}

struct Shared {
    sleeps: Mutex<Sleeps>,
    /// Told when a sleep begins to wait while none did.
    started: Sender<()>,
}

impl Shared {
    fn sleeps(&self) -> std::sync::MutexGuard<'_, Sleeps> {
        self.sleeps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Hyper's timer for one listener; [`tick`](Self::tick) must run for its sleeps to end.
#[derive(Clone)]
pub(crate) struct CoarseTimer(Arc<Shared>);

impl CoarseTimer {
    /// The timer, and the task that ends its sleeps (it ends when every copy of the timer
    /// has been dropped).
    pub(crate) fn new() -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (started, starts) = async_channel::bounded(1);
        let shared = Arc::new(Shared {
            sleeps: Mutex::new(Sleeps {
                next_key: 0,
                waiting: BTreeMap::new(),
            }),
            started,
        });
        let ticking = tick(Arc::downgrade(&shared), starts);
        (Self(shared), ticking)
    }
}

/// Every [`RESOLUTION`] while sleeps wait, wakes those whose deadline has passed; waits for
/// one to begin when none does.
async fn tick(shared: std::sync::Weak<Shared>, starts: Receiver<()>) {
    loop {
        let idle = match shared.upgrade() {
            Some(shared) => shared.sleeps().waiting.is_empty(),
            None => return,
        };
        if idle && starts.recv().await.is_err() {
            return;
        }
        async_io::Timer::after(RESOLUTION).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let now = Instant::now();
        let woken: Vec<Waker> = {
            let mut sleeps = shared.sleeps();
            let due: Vec<u64> = (sleeps.waiting.iter())
                .filter(|(_, (deadline, _))| *deadline <= now)
                .map(|(key, _)| *key)
                .collect();
            (due.iter())
                .filter_map(|key| sleeps.waiting.remove(key))
                .map(|(_, waker)| waker)
                .collect()
        };
        woken.into_iter().for_each(Waker::wake);
    }
}

impl hyper::rt::Timer for CoarseTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep {
            shared: self.0.clone(),
            deadline,
            key: None,
        })
    }
}

/// One sleep: done once its deadline has passed.
struct Sleep {
    shared: Arc<Shared>,
    deadline: Instant,
    /// Its entry among the waiting, once polled.
    key: Option<u64>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.forget();
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        let shared = self.shared.clone();
        let mut sleeps = shared.sleeps();
        let was_idle = sleeps.waiting.is_empty();
        let key = *self.key.get_or_insert_with(|| {
            sleeps.next_key += 1;
            sleeps.next_key
        });
        sleeps.waiting.insert(key, (deadline, cx.waker().clone()));
        drop(sleeps);
        if was_idle {
            let _ = shared.started.try_send(());
        }
        Poll::Pending
    }
}

impl hyper::rt::Sleep for Sleep {}

impl Sleep {
    fn forget(&mut self) {
        if let Some(key) = self.key.take() {
            self.shared.sleeps().waiting.remove(&key);
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.forget();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Timer;

    #[test]
    fn a_sleep_ends_after_its_deadline_and_a_dropped_one_leaves_nothing_behind() {
        let (timer, ticking) = CoarseTimer::new();
        futures_lite::future::block_on(async {
            let ticking = async {
                ticking.await;
                true
            };
            let slept = async {
                let started = Instant::now();
                // Polled once and dropped: its entry goes with it.
                let dropped = timer.sleep(Duration::from_secs(3600));
                let _ = futures_lite::future::poll_once(dropped).await;
                assert!(timer.0.sleeps().waiting.is_empty());
                timer.sleep(Duration::from_millis(10)).await;
                assert!(started.elapsed() >= Duration::from_millis(10));
                assert!(timer.0.sleeps().waiting.is_empty());
                false
            };
            let ended_first = futures_lite::future::or(slept, ticking).await;
            assert!(!ended_first, "the ticking task ended while its timer lived");
        });
    }
}
