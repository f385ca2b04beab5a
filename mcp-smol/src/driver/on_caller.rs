//! Sharing the driver between its background task and the callers waiting on it: the
//! driver future as it is, so every transport (a byte stream, HTTP) shares it alike.
//!
//! A call answered through a background task crosses threads twice (the task's executor
//! wakes, then wakes the caller). So while one task's callers are the only ones waiting, they
//! drive the connection themselves, on that task's thread: the task is the *pilot*, and
//! whichever of its waits is polled drives (many calls in flight from one task need no other
//! thread either; a wait that joins others leaves its request queued until the task polls
//! them again, so that they leave in one write). The background task drives whenever no caller does: between calls
//! (notifications, timeouts, close), and as soon as a caller of another task waits, so that a
//! task that stops polling its waits cannot hold up another one. While a pilot's waits are
//! all kept aside, the notifications that arrive meanwhile wait for one to be polled again or
//! dropped.
//!
//! The driver future is always polled with one waker, the [`Router`]'s, so whatever it waits
//! on stays registered whoever polls it next; the router passes each wake-up to the pilot if
//! there is one, else to the background task. Whoever holds the slot's lock polls, one at a
//! time; the lock is held for one poll, never across an await.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::task::{Context, Poll, Wake, Waker};

use super::Driver;

type Inner = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The driver future, shared by the background task and the pilot.
pub(crate) struct Pilot {
    /// `None` once the driver has finished, or its background handle was dropped.
    driver: Mutex<Option<Inner>>,
    /// Set when the driver must be polled again; a poller that finds the lock taken sets it,
    /// so that the holder polls once more instead of the wake-up being lost.
    again: AtomicBool,
    router: Arc<Router>,
    /// The router as a waker, made once.
    waker: Waker,
}

/// Where the driver's wake-ups go.
struct Router {
    route: Mutex<Route>,
}

struct Route {
    background: Option<Waker>,
    /// The task driving.
    pilot: Option<Controls>,
    /// The driver was woken and nobody has polled it since.
    woken: bool,
    /// How many callers are waiting.
    callers: usize,
    next_ticket: u64,
    finished: bool,
}

/// Who holds the controls: one task's waits, all under one ticket.
struct Controls {
    ticket: u64,
    waker: Waker,
    /// How many of that task's waits are boarded.
    flights: usize,
    /// One of its waits is being polled: it looks at `woken` before it returns, so a wake-up
    /// meanwhile (its own request going to the driver, the driver's I/O) need not wake the
    /// task to poll it again.
    polling: bool,
}

impl Default for Router {
    fn default() -> Self {
        let route = Route {
            background: None,
            pilot: None,
            // A driver not yet polled has nothing registered to wake it: it must be polled
            // once to start.
            woken: true,
            callers: 0,
            next_ticket: 0,
            finished: false,
        };
        Self {
            route: Mutex::new(route),
        }
    }
}

impl Wake for Router {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waker = {
            let mut route = self.lock();
            route.woken = true;
            match &route.pilot {
                Some(pilot) if pilot.polling => None,
                Some(pilot) => Some(pilot.waker.clone()),
                None => route.background.clone(),
            }
        };
        // Outside the lock: a waker may run code of its own.
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Router {
    fn lock(&self) -> MutexGuard<'_, Route> {
        self.route
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Pilot {
    /// Shares `driver`: returns the handle callers drive through, and the background future
    /// that drives whenever no caller does.
    pub(crate) fn share(driver: Driver) -> (Arc<Pilot>, Driver) {
        let router = Arc::new(Router::default());
        let pilot = Arc::new(Pilot {
            driver: Mutex::new(Some(driver.0)),
            again: AtomicBool::new(false),
            waker: Waker::from(router.clone()),
            router,
        });
        let background = Background(pilot.clone());
        (pilot, Driver(Box::pin(background)))
    }

    /// Waits for `future` while driving the connection, if no other caller is driving it.
    /// The wait owns it, unpinned (a future of its own, or one pinned by its caller): an
    /// `async fn` here kept it twice, as its argument and pinned.
    pub(crate) fn fly<F: Future + Unpin>(&self, future: F) -> Flight<'_, F> {
        Flight {
            pilot: self,
            boarded: false,
            ticket: None,
            future,
        }
    }

    /// Polls the driver unless someone else is polling it, in which case they poll again;
    /// `false` then.
    fn drive(&self) -> bool {
        loop {
            self.again.store(true, Ordering::SeqCst);
            let mut slot = match self.driver.try_lock() {
                Ok(slot) => slot,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => return false,
            };
            while self.again.swap(false, Ordering::SeqCst) {
                self.router.lock().woken = false;
                let Some(driver) = slot.as_mut() else { break };
                if driver
                    .as_mut()
                    .poll(&mut Context::from_waker(&self.waker))
                    .is_ready()
                {
                    *slot = None;
                    self.finish();
                }
            }
            drop(slot);
            // A poller may have come between the last check and the unlock.
            if !self.again.load(Ordering::SeqCst) {
                return true;
            }
        }
    }

    /// The driver has ended (or is dropped): the background task may return.
    fn finish(&self) {
        let background = {
            let mut route = self.router.lock();
            route.finished = true;
            route.background.take()
        };
        if let Some(waker) = background {
            waker.wake();
        }
    }

    /// A caller starts waiting: it takes the controls if it is the only one, or shares them
    /// if every caller waiting is of the same task; returns the ticket if so. Once callers of
    /// two tasks wait the background task drives, so that a task that stops polling its waits
    /// (a future kept aside in a `select`) cannot hold up another.
    fn board(&self, waker: &Waker) -> Option<Boarding> {
        let mut route = self.router.lock();
        route.callers += 1;
        let callers = route.callers;
        if !route.finished {
            match &mut route.pilot {
                None if callers == 1 => {
                    let ticket = route.next_ticket;
                    route.next_ticket += 1;
                    route.pilot = Some(Controls {
                        ticket,
                        waker: waker.clone(),
                        flights: 1,
                        polling: false,
                    });
                    let shared = false;
                    return Some(Boarding { ticket, shared });
                }
                Some(pilot) if pilot.flights + 1 == callers && pilot.waker.will_wake(waker) => {
                    pilot.flights += 1;
                    let ticket = pilot.ticket;
                    let shared = true;
                    return Some(Boarding { ticket, shared });
                }
                _ => {}
            }
        }
        let background = route.revoke();
        drop(route);
        wake(background);
        None
    }

    /// The pilot holding `ticket` starts polling one of its waits, if it has something to
    /// drive: its first poll (which hands the driver its request) or a driver woken since.
    /// Wake-ups of the driver are then noted, not passed on, until [`Pilot::pilot_woken`]
    /// says there are none or [`Pilot::stop_polling`]. Keeps its waker current; `None` once
    /// it is no longer the pilot.
    fn start_polling(&self, ticket: u64, waker: &Waker, first: bool) -> Option<bool> {
        let mut route = self.router.lock();
        let woken = route.woken;
        let pilot = route.controls(ticket)?;
        if !pilot.waker.will_wake(waker) {
            pilot.waker = waker.clone();
        }
        pilot.polling = first || woken;
        Some(pilot.polling)
    }

    /// Whether the pilot holding `ticket` should poll the driver now (`None` once it is no
    /// longer the pilot). When not, it stops polling in the same breath, so that a wake-up
    /// from then on wakes its task.
    fn pilot_woken(&self, ticket: u64) -> Option<bool> {
        let mut route = self.router.lock();
        let woken = route.woken;
        route.controls(ticket)?.polling = woken;
        Some(woken)
    }

    /// The pilot holding `ticket` is about to wait: wake-ups go to its task again.
    fn stop_polling(&self, ticket: u64) {
        if let Some(pilot) = self.router.lock().controls(ticket) {
            pilot.polling = false;
        }
    }

    /// A caller stops waiting; the pilot's last one gives up the controls.
    fn land(&self, ticket: Option<u64>) {
        let mut route = self.router.lock();
        route.callers = route.callers.saturating_sub(1);
        let background = match &mut route.pilot {
            Some(pilot) if Some(pilot.ticket) == ticket => {
                // Also after a poll that unwound before it could stop polling.
                pilot.polling = false;
                pilot.flights = pilot.flights.saturating_sub(1);
                if pilot.flights == 0 {
                    route.revoke()
                } else {
                    None
                }
            }
            _ => None,
        };
        drop(route);
        wake(background);
    }
}

impl Route {
    /// The controls, if the pilot holding them holds `ticket`.
    fn controls(&mut self, ticket: u64) -> Option<&mut Controls> {
        self.pilot.as_mut().filter(|pilot| pilot.ticket == ticket)
    }

    /// Hands the controls back to the background task; returns its waker if a wake-up
    /// is waiting for it.
    fn revoke(&mut self) -> Option<Waker> {
        self.pilot.take()?;
        if self.woken {
            self.background.clone()
        } else {
            None
        }
    }
}

fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// A wait that has taken the controls, alone or with other waits of its task.
struct Boarding {
    ticket: u64,
    shared: bool,
}

/// A caller's wait, driving while it is the pilot.
pub(crate) struct Flight<'a, F> {
    pilot: &'a Pilot,
    /// Whether it has boarded (counts among the callers), and its ticket if it drives.
    boarded: bool,
    ticket: Option<u64>,
    future: F,
}

impl<F> std::fmt::Debug for Flight<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flight")
            .field("boarded", &self.boarded)
            .field("ticket", &self.ticket)
            .finish_non_exhaustive()
    }
}

impl<F: Future + Unpin> Future for Flight<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // A wait that joins others of its task leaves its request queued for now: the task is
        // woken by it and polls its waits again, and the first to drive writes every request
        // its waits queued meanwhile at once (32 calls in flight, one write).
        let mut queue_only = false;
        let first = !self.boarded;
        if first {
            self.boarded = true;
            let boarding = self.pilot.board(cx.waker());
            queue_only = boarding.as_ref().is_some_and(|boarding| boarding.shared);
            self.ticket = boarding.map(|boarding| boarding.ticket);
        }
        let mut polled = Poll::Pending;
        if let Some(ticket) = self.ticket {
            match self.pilot.start_polling(ticket, cx.waker(), first) {
                Some(true) => polled = self.drive_until_waiting(ticket, queue_only, cx.waker()),
                // Nothing to drive: among many waits of one task, most polls are this one.
                Some(false) => {}
                None => self.ticket = None,
            }
        }
        // Only once it has to wait is the task's waker handed to what the caller waits on:
        // an answer read while this poll drove was seen above, rather than waking the task to
        // poll it again (each such wake-up costs the executor a trip through its reactor).
        if polled.is_pending() {
            polled = Pin::new(&mut self.future).poll(cx);
        }
        if polled.is_ready() {
            self.boarded = false;
            self.pilot.land(self.ticket.take());
        }
        polled
    }
}

impl<F: Future + Unpin> Flight<'_, F> {
    /// Drives while the driver has been woken, until the caller's answer is in or someone
    /// else is driving; the caller's future is polled with a waker that does nothing, and
    /// the driver's wake-ups are noted rather than passed on, meanwhile.
    fn drive_until_waiting(
        &mut self,
        ticket: u64,
        queue_only: bool,
        waker: &Waker,
    ) -> Poll<F::Output> {
        let mut quiet = Context::from_waker(Waker::noop());
        loop {
            // Its first poll hands the driver the request.
            if let Poll::Ready(output) = Pin::new(&mut self.future).poll(&mut quiet) {
                self.pilot.stop_polling(ticket);
                return Poll::Ready(output);
            }
            match self.pilot.pilot_woken(ticket) {
                Some(true) if queue_only => {
                    // The wake-up that would have brought the task back was only noted.
                    self.pilot.stop_polling(ticket);
                    waker.wake_by_ref();
                    return Poll::Pending;
                }
                // Whoever is polling it instead will poll again and see what woke it; this
                // caller hears of it through the driver's waker or its own answer.
                Some(true) if !self.pilot.drive() => {
                    self.pilot.stop_polling(ticket);
                    return Poll::Pending;
                }
                Some(true) => {}
                Some(false) => return Poll::Pending,
                None => {
                    self.ticket = None;
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<F> Drop for Flight<'_, F> {
    fn drop(&mut self) {
        if self.boarded {
            self.pilot.land(self.ticket.take());
        }
    }
}

/// The background task: drives whenever no caller does, and owns the driver: dropping it
/// unfinished drops the driver (which takes the server's process group down).
struct Background(Arc<Pilot>);

impl Future for Background {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let pilot = &self.0;
        {
            let mut route = pilot.router.lock();
            if route.finished {
                return Poll::Ready(());
            }
            let registered = route.background.as_ref();
            if !registered.is_some_and(|waker| waker.will_wake(cx.waker())) {
                route.background = Some(cx.waker().clone());
            }
            if route.pilot.is_some() {
                return Poll::Pending;
            }
        }
        let _ = pilot.drive();
        if pilot.router.lock().finished {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let driver = match self.0.driver.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        // Dropped outside the lock: the driver's own drop answers every caller.
        drop(driver);
        self.0.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_channel::{Receiver, Sender, unbounded};

    /// A stand-in driver: answers each number sent to it with its double.
    fn doubler() -> (Sender<u32>, Receiver<u32>, Driver) {
        let (ask, asked) = unbounded::<u32>();
        let (answer, answers) = unbounded();
        let driver = async move {
            while let Ok(n) = asked.recv().await {
                let _ = answer.send(n * 2).await;
            }
        };
        (ask, answers, Driver(Box::pin(driver)))
    }

    #[test]
    fn a_lone_caller_drives_without_the_background_task() {
        let (ask, answers, driver) = doubler();
        let (pilot, _background) = Pilot::share(driver);
        let answer = async_io::block_on(pilot.fly(Box::pin(async {
            ask.send(21).await.unwrap();
            answers.recv().await.unwrap()
        })));
        assert_eq!(answer, 42);
    }

    /// A stand-in driver that answers each number, sent with its own reply channel, with its
    /// double.
    fn replier() -> (Sender<(u32, Sender<u32>)>, Driver) {
        let (ask, asked) = unbounded::<(u32, Sender<u32>)>();
        let driver = async move {
            while let Ok((n, reply)) = asked.recv().await {
                let _ = reply.send(n * 2).await;
            }
        };
        (ask, Driver(Box::pin(driver)))
    }

    /// Asks 1, 2 and 3 of a [`replier`]-like driver at once, from one task.
    fn three_calls_at_once(pilot: &Pilot, ask: &Sender<(u32, Sender<u32>)>) -> (u32, (u32, u32)) {
        let call = |n: u32| {
            let ask = ask.clone();
            pilot.fly(Box::pin(async move {
                let (reply, answer) = unbounded();
                ask.send((n, reply)).await.unwrap();
                answer.recv().await.unwrap()
            }))
        };
        async_io::block_on(futures_lite::future::zip(
            call(1),
            futures_lite::future::zip(call(2), call(3)),
        ))
    }

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_answer_read_while_its_caller_drives_does_not_wake_the_caller_s_task() {
        let (ask, driver) = replier();
        let (pilot, _background) = Pilot::share(driver);
        let wakes = Arc::new(Counting::default());
        let waker = Waker::from(wakes.clone());
        let mut call = Box::pin(pilot.fly(Box::pin(async {
            let (reply, answer) = unbounded();
            ask.send((21, reply)).await.unwrap();
            answer.recv().await.unwrap()
        })));
        // The request reaches the driver and its answer comes back within this one poll: a
        // wake-up on top would only make the executor poll the task again for nothing.
        assert_eq!(
            call.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready(42)
        );
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn waits_of_one_task_drive_together_without_the_background_task() {
        let (ask, driver) = replier();
        let (pilot, _background) = Pilot::share(driver);
        assert_eq!(three_calls_at_once(&pilot, &ask), (2, (4, 6)));
    }

    #[test]
    fn waits_joining_others_of_their_task_leave_their_requests_to_go_together() {
        let (ask, asked) = unbounded::<(u32, Sender<u32>)>();
        let (sizes, batches) = unbounded::<usize>();
        // Answers once it has three requests, noting how many it found each time it woke.
        let driver = async move {
            let mut pending = Vec::new();
            while pending.len() < 3 {
                let Ok(first) = asked.recv().await else {
                    return;
                };
                let before = pending.len();
                pending.push(first);
                while let Ok(more) = asked.try_recv() {
                    pending.push(more);
                }
                let _ = sizes.try_send(pending.len() - before);
            }
            for (n, reply) in pending {
                let _ = reply.send(n * 2).await;
            }
        };
        let (pilot, _background) = Pilot::share(Driver(Box::pin(driver)));
        assert_eq!(three_calls_at_once(&pilot, &ask), (2, (4, 6)));
        // The first, alone, went at once; the two that joined it went together.
        let seen: Vec<usize> = std::iter::from_fn(|| batches.try_recv().ok()).collect();
        assert_eq!(seen, [1, 2]);
    }

    #[test]
    fn a_task_keeping_its_wait_aside_does_not_hold_up_another() {
        let (ask, answers, driver) = doubler();
        let (pilot, background) = Pilot::share(driver);
        // Polled once by another task, so it has taken the controls, then never again.
        let mut aside = Box::pin(pilot.fly(std::future::pending::<()>()));
        let mut elsewhere = Context::from_waker(Waker::noop());
        assert!(aside.as_mut().poll(&mut elsewhere).is_pending());
        async_io::block_on(async {
            let second = pilot.fly(Box::pin(async {
                ask.send(5).await.unwrap();
                answers.recv().await.unwrap()
            }));
            // The background task runs beside it; it never ends while the driver has work.
            let background = async {
                background.await;
                0
            };
            assert_eq!(futures_lite::future::or(second, background).await, 10);
        });
    }

    #[test]
    fn a_caller_dropped_while_it_drives_hands_the_driver_back() {
        let (ask, answers, driver) = doubler();
        let (pilot, mut background) = Pilot::share(driver);
        let mut context = Context::from_waker(Waker::noop());
        // Its first poll takes the controls and drives (the driver then waits for a number);
        // then its caller gives up.
        let mut flight = Box::pin(pilot.fly(std::future::pending::<()>()));
        assert!(flight.as_mut().poll(&mut context).is_pending());
        drop(flight);
        // With no caller left, what comes next is the background task's to drive.
        ask.try_send(5).unwrap();
        assert!(Pin::new(&mut background).poll(&mut context).is_pending());
        assert_eq!(answers.try_recv(), Ok(10));
    }

    #[test]
    fn dropping_the_background_task_drops_the_driver() {
        let (ask, _answers, driver) = doubler();
        let (_pilot, background) = Pilot::share(driver);
        drop(background);
        assert!(ask.is_closed());
    }
}
