//! The HTTP driver: one future that owns the connection's HTTP state machine
//! ([`proto::HttpConnection`]) and runs every exchange it asks for on an executor of its own,
//! so it works under any executor and nothing outlives it. It moves bytes and HTTP heads;
//! the machine decides what they mean.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use async_channel::{Receiver, Sender};
use async_executor::{Executor, Task};
use async_io::Timer;
use futures_lite::future::FutureExt;
use proto::{Affected, CloseReason, Event, Exchange, ExchangeId, HttpConnection, Reply};
use url::Url;

use super::HttpServer;
use super::exchanges::{self, Endpoint, Report};
use crate::driver::{Callers, Driver, Op, Shared};
use crate::{Disconnect, Error, Options};

/// How many reports from exchanges may wait for the driver before they wait to send more.
const INBOX: usize = 64;

/// Builds the handles' side and the driver future.
pub(super) fn start(server: HttpServer, options: Options) -> (Sender<Op>, Arc<Shared>, Driver) {
    let (ops_sender, ops) = async_channel::unbounded();
    let (done_sender, done) = async_channel::bounded(1);
    let shared = Arc::new(Shared::without_process(done));
    let mut fatal = None;
    let url = match Url::parse(&server.url) {
        Ok(url) => Ok(url),
        Err(error) => {
            let detail = format!("not a URL: {error}");
            let reason = format!("{}: {detail}", server.url);
            let url = server.url.clone();
            fatal = Some(Error::Http { url, detail });
            Err(reason)
        }
    };
    let shown = url
        .as_ref()
        .map_or_else(|_| server.url.clone(), Url::to_string);
    let now = Instant::now();
    let mut http = HttpConnection::new(now, options.core.clone(), shown, server.transport);
    let url = url.unwrap_or_else(|reason| {
        http.fail(CloseReason::Transport(reason));
        Url::parse("http://invalid.invalid/").expect("a valid URL")
    });
    let endpoint = Arc::new(Endpoint {
        url,
        headers: server.headers.clone(),
        authorizer: server.authorizer.clone(),
        connect_timeout: options.core.handshake_timeout,
        limit: options.core.max_line_len,
        pool: Arc::default(),
    });
    let (inbox_sender, inbox) = async_channel::bounded(INBOX);
    let executor = Arc::new(Executor::new());
    let mut driver = Loop {
        http,
        ops,
        shared: shared.clone(),
        options,
        endpoint,
        executor: executor.clone(),
        inbox,
        inbox_sender,
        tasks: BTreeMap::new(),
        fatal,
        callers: Callers::default(),
    };
    let main = async move {
        let reason = executor.run(driver.run()).await;
        driver.shut_down(reason).await;
        // Whatever exchange was still in flight goes with the executor, sockets included.
        drop(driver);
        drop(executor);
        drop(done_sender);
    };
    (ops_sender, shared, Driver(Box::pin(main)))
}

enum Wake {
    Op(Option<Op>),
    Report(Report),
    Timeout,
}

struct Loop {
    http: HttpConnection,
    ops: Receiver<Op>,
    shared: Arc<Shared>,
    options: Options,
    endpoint: Arc<Endpoint>,
    executor: Arc<Executor<'static>>,
    inbox: Receiver<Report>,
    inbox_sender: Sender<Report>,
    /// Every exchange in flight; dropping one cancels it and closes its socket.
    tasks: BTreeMap<ExchangeId, Task<()>>,
    /// What `wait_ready` reports when the connection could not start, if not the disconnect.
    fatal: Option<Error>,
    callers: Callers,
}

impl Loop {
    /// Feeds the connection until it closes; returns why.
    async fn run(&mut self) -> CloseReason {
        loop {
            let mut busy = true;
            while busy {
                busy = false;
                while let Some(exchange) = self.http.poll_exchange() {
                    self.start(exchange);
                    busy = true;
                }
                while let Some(event) = self.http.poll_event() {
                    if let Event::Closed(reason) = event {
                        return reason;
                    }
                    self.dispatch(event);
                    busy = true;
                }
            }
            let deadline = self.http.poll_timeout();
            let wake = self.next_wake(deadline).await;
            let now = Instant::now();
            match wake {
                Wake::Op(Some(op)) => {
                    self.callers.apply(&mut self.http, now, op, true);
                }
                // Every handle is gone.
                Wake::Op(None) => self.http.close(),
                Wake::Report(report) => {
                    self.receive(now, report);
                    self.publish_rejected_tools();
                }
                Wake::Timeout => self.http.handle_timeout(now),
            }
        }
    }

    async fn next_wake(&mut self, deadline: Option<Instant>) -> Wake {
        let op = async { Wake::Op(self.ops.recv().await.ok()) };
        let report = async {
            match self.inbox.recv().await {
                Ok(report) => Wake::Report(report),
                // Never: the loop holds a sender.
                Err(_) => std::future::pending().await,
            }
        };
        let timeout = async {
            match deadline {
                Some(deadline) => {
                    Timer::at(deadline).await;
                    Wake::Timeout
                }
                None => std::future::pending().await,
            }
        };
        op.race(report).race(timeout).await
    }

    /// Copies the core's rejected tools where the handles read them, before the listing
    /// that changed them is answered.
    fn publish_rejected_tools(&self) {
        let rejected = self.http.rejected_tools();
        if let Ok(mut shown) = self.shared.rejected_tools.lock()
            && *shown != rejected
        {
            *shown = rejected.to_vec();
        }
    }

    /// Starts (or stops) what the machine asked for, on the driver's executor.
    fn start(&mut self, exchange: Exchange) {
        let endpoint = self.endpoint.clone();
        let inbox = self.inbox_sender.clone();
        let (id, work): (_, futures_lite::future::Boxed<()>) = match exchange {
            Exchange::Cancel(id) => {
                self.tasks.remove(&id);
                return;
            }
            Exchange::Post(post) => {
                let (id, timeout) = (post.id, post.timeout);
                let url = self.url(&post.url);
                let exchange = exchanges::post(endpoint, url, post, inbox.clone());
                let work = async move {
                    match timeout {
                        Some(limit) => {
                            exchange
                                .or(async {
                                    Timer::after(limit).await;
                                })
                                .await
                        }
                        None => exchange.await,
                    }
                };
                (id, Box::pin(work))
            }
            Exchange::Get(get) => {
                let (id, url) = (get.id, self.url(&get.url));
                (
                    id,
                    Box::pin(exchanges::get(endpoint, url, get, inbox.clone())),
                )
            }
        };
        let task = self.executor.spawn(async move {
            work.await;
            let _ = inbox.send(Report::Reply(id, Reply::Done)).await;
        });
        self.tasks.insert(id, task);
    }

    /// The machine's URLs are the configured one (most often, not parsed again) and one the
    /// server named, both parsed before.
    fn url(&self, url: &str) -> Url {
        if url == self.endpoint.url.as_str() {
            return self.endpoint.url.clone();
        }
        Url::parse(url).unwrap_or_else(|_| self.endpoint.url.clone())
    }

    /// What an exchange reported.
    fn receive(&mut self, now: Instant, report: Report) {
        match report {
            Report::Reply(id, reply) => {
                if matches!(reply, Reply::Done) {
                    self.tasks.remove(&id);
                }
                self.http.handle_reply(now, id, reply);
            }
            Report::Unreachable {
                exchange,
                url,
                detail,
            } => {
                let reply = Reply::Unreachable(detail.clone());
                if self.http.handle_reply(now, exchange, reply) == Affected::Connection {
                    self.fatal = self.fatal.take().or(Some(Error::Http { url, detail }));
                }
            }
            Report::Unauthorized(exchange, error) => {
                let reply = Reply::Unauthorized(error.to_string());
                match self.http.handle_reply(now, exchange, reply) {
                    Affected::Connection => self.fatal = Some(error),
                    // The caller hears `Unauthorized` itself, so the host can offer a login.
                    Affected::Request(id) => self.callers.answer(id, Err(error)),
                    Affected::Nothing => {}
                }
            }
        }
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Ready(info) => self.callers.ready(&info),
            Event::Response {
                result: Err(proto::RequestError::Closed(_)),
                ..
            } => {}
            Event::Response { id, result } => {
                self.callers.answer(id, result.map_err(Error::from_request));
            }
            Event::Notification(notification) => self.callers.notify(&notification),
            Event::ServerRequest(request) => {
                self.callers.pass_on(&mut self.http, request);
            }
            Event::Malformed(_) | Event::Closed(_) => {}
        }
    }

    /// Fails whatever is still waiting, stops every exchange, and ends the session with a
    /// `DELETE` (bounded by the grace period).
    async fn shut_down(&mut self, reason: CloseReason) {
        let error = self.shared.end(Disconnect::bare(reason), self.fatal.take());
        self.refuse_operations(&error);
        self.callers.fail_all(&error);
        self.tasks.clear();
        if let Some(headers) = self.http.session_end() {
            let delete = exchanges::delete_session(&self.endpoint, headers);
            let grace = self.options.grace_period;
            delete
                .or(async {
                    Timer::after(grace).await;
                })
                .await;
        }
    }

    /// Stops taking operations and fails those already queued.
    fn refuse_operations(&mut self, error: &Error) {
        self.ops.close();
        while let Ok(op) = self.ops.try_recv() {
            op.fail(error.clone());
        }
    }
}

impl Drop for Loop {
    /// Also when the driver future is dropped unfinished: no caller may be left waiting.
    fn drop(&mut self) {
        let error = (self.shared).end(Disconnect::driver_dropped(), None);
        self.refuse_operations(&error);
    }
}
