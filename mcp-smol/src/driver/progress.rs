//! Where the server's progress reports on a caller's requests arrive: the driver routes each
//! `notifications/progress` by its token to the inbox of the request that carries it, so a
//! caller that hears its progress needs no subscription to every notification of the
//! connection (a channel, and every notification copied into it, per call).

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Poll, Waker};

use proto::{Notification, Progress};
use serde_json::Value;

/// The progress reports carrying one token on the requests sent with it
/// ([`Call::progress`](crate::Call::progress)), in the
/// order the server sent them. Every report sent before a request's answer is here by the
/// time the answer reaches its caller. Dropped, it takes no more: the driver forgets it.
pub struct ProgressInbox(Arc<Inbox>);

struct Inbox {
    token: Value,
    reports: Mutex<Reports>,
}

#[derive(Default)]
struct Reports {
    queue: VecDeque<Progress>,
    waker: Option<Waker>,
}

impl std::fmt::Debug for ProgressInbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let token = &self.0.token;
        f.debug_struct("ProgressInbox")
            .field("token", token)
            .finish()
    }
}

impl ProgressInbox {
    /// An empty inbox for the reports whose `progressToken` is `token`: the one the requests
    /// sent with it carry (given to
    /// [`Request::progress_token`](proto::Request::progress_token)).
    pub fn new(token: Value) -> Self {
        let reports = Mutex::default();
        Self(Arc::new(Inbox { token, reports }))
    }

    /// The next report, once there is one.
    pub async fn next(&self) -> Progress {
        poll_fn(|cx| {
            let mut reports = self.0.lock();
            match reports.queue.pop_front() {
                Some(progress) => Poll::Ready(progress),
                None => {
                    let known = reports.waker.as_ref();
                    if !known.is_some_and(|waker| waker.will_wake(cx.waker())) {
                        reports.waker = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// The next report, if one has arrived.
    pub fn try_next(&self) -> Option<Progress> {
        self.0.lock().queue.pop_front()
    }

    /// The driver's end.
    pub(crate) fn route(&self) -> Route {
        Route(Arc::downgrade(&self.0))
    }
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, Reports> {
        // Nothing runs under the lock that could panic and leave the queue half changed.
        (self.reports.lock()).unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Where the driver puts the reports carrying one token; it holds the inbox weakly, so a
/// caller that stopped listening is forgotten at the next look.
pub(crate) struct Route(Weak<Inbox>);

/// The routes of the requests whose callers hear their progress.
#[derive(Default)]
pub(crate) struct Routes(Vec<Route>);

impl Routes {
    /// Adds a route, forgetting those whose inbox is gone.
    pub(crate) fn add(&mut self, route: Route) {
        self.0.retain(|route| route.0.strong_count() > 0);
        self.0.push(route);
    }

    /// Puts a progress notification in the inbox its token names, if any still listens.
    pub(crate) fn deliver(&mut self, notification: &Notification) {
        if self.0.is_empty() || notification.method != Notification::PROGRESS {
            return;
        }
        let Some(progress) = notification.progress() else {
            return;
        };
        self.0.retain(|route| route.0.strong_count() > 0);
        let mut inboxes = self.0.iter().filter_map(|route| route.0.upgrade());
        let Some(inbox) = inboxes.find(|inbox| inbox.token == progress.progress_token) else {
            return;
        };
        let waker = {
            let mut reports = inbox.lock();
            reports.queue.push_back(progress);
            reports.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The connection has ended: no more reports come.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn progress(token: Value, progress: f64) -> Notification {
        let params = json!({"progressToken": token, "progress": progress});
        Notification {
            method: Notification::PROGRESS.to_owned(),
            params: Some(params),
        }
    }

    #[test]
    fn a_report_reaches_the_inbox_of_its_token_only() {
        let (first, second) = (ProgressInbox::new(json!("a")), ProgressInbox::new(json!(7)));
        let mut routes = Routes::default();
        routes.add(first.route());
        routes.add(second.route());
        routes.deliver(&progress(json!("a"), 1.0));
        routes.deliver(&progress(json!(7), 2.0));
        routes.deliver(&progress(json!("a"), 3.0));
        routes.deliver(&progress(json!("7"), 4.0));
        let heard = |inbox: &ProgressInbox| {
            std::iter::from_fn(|| inbox.try_next())
                .map(|p| p.progress)
                .collect::<Vec<_>>()
        };
        assert_eq!(heard(&first), [1.0, 3.0]);
        assert_eq!(heard(&second), [2.0]);
    }

    #[test]
    fn an_inbox_dropped_is_forgotten() {
        let mut routes = Routes::default();
        let gone = ProgressInbox::new(json!("a"));
        routes.add(gone.route());
        drop(gone);
        routes.deliver(&progress(json!("a"), 1.0));
        assert!(routes.0.is_empty());
        let kept = ProgressInbox::new(json!("b"));
        routes.add(kept.route());
        assert_eq!(routes.0.len(), 1);
    }
}
