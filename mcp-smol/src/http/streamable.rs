//! The HTTP link: what the driver's one loop ([`crate::driver`]) runs over a remote server.
//! The core is the connection's HTTP state machine ([`proto::http::HttpConnection`]); every exchange
//! it asks for runs on an executor of the driver's own, so the driver works under any
//! executor and nothing outlives it. It moves bytes and HTTP heads; the machine decides what
//! they mean.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use async_executor::{Executor, Task};
use async_io::Timer;
use futures_lite::future::FutureExt;
use proto::{
    CloseReason, Event,
    http::{Affected, Exchange, ExchangeId, HttpConnection, Reply},
};
use url::Url;

use super::HttpServer;
use super::exchanges::{self, Endpoint, Report};
use crate::driver::{ClientLink, ClientRole, Core, Driver, Link, Loop, Op, Shared, run_client};
use crate::{Disconnect, Error, Options, queue};

/// How many reports from exchanges may wait for the driver before they wait to send more.
const INBOX: usize = 64;

/// Builds the handles' side and the driver future.
pub(super) fn start(
    server: HttpServer,
    options: &Options,
) -> (queue::Sender<Op>, Arc<Shared>, Driver) {
    let (ops_sender, ops) = queue::unbounded();
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
    let exchanges = Exchanges {
        endpoint,
        executor: executor.clone(),
        inbox,
        inbox_sender,
        tasks: BTreeMap::new(),
        fatal,
        grace: options.grace_period,
    };
    let role = ClientRole::new(http, shared.clone());
    let driver = Loop::new(role, exchanges, ops);
    let main = async move {
        executor.run(run_client(driver)).await;
        // Whatever exchange was still in flight goes with the executor, sockets included.
        drop(executor);
        drop(done_sender);
    };
    (ops_sender, shared, Driver(Box::pin(main)))
}

/// The core as the loop sees it.
impl Core for HttpConnection {
    type Event = Event;

    fn poll_event(&mut self) -> Option<Event> {
        self.poll_event()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.handle_timeout(now);
    }

    fn close(&mut self) {
        self.close();
    }
}

/// The exchanges of one connection: each POST and GET the core asks for, running on the
/// driver's executor and reporting to its inbox.
struct Exchanges {
    endpoint: Arc<Endpoint>,
    executor: Arc<Executor<'static>>,
    inbox: Receiver<Report>,
    inbox_sender: Sender<Report>,
    /// Every exchange in flight; dropping one cancels it and closes its socket.
    tasks: BTreeMap<ExchangeId, Task<()>>,
    /// What every caller hears when the connection could not start, if not the disconnect.
    fatal: Option<Error>,
    /// How long the session's `DELETE` may take at the end.
    grace: Duration,
}

type HttpRole = ClientRole<HttpConnection>;

impl Link<HttpRole> for Exchanges {
    type Input = Report;

    /// Starts (or stops) every exchange the machine asks for; they run while the loop waits.
    async fn send(&mut self, role: &mut HttpRole) {
        while let Some(exchange) = role.core.poll_exchange() {
            self.start(exchange);
        }
    }

    async fn next_input(&mut self) -> Report {
        match self.inbox.recv().await {
            Ok(report) => report,
            // Never: the link holds a sender.
            Err(_) => std::future::pending().await,
        }
    }

    async fn handle(&mut self, now: Instant, report: Report, role: &mut HttpRole) {
        self.receive(now, report, role);
        publish_rejected_tools(role);
    }
}

impl ClientLink<HttpConnection> for Exchanges {
    async fn ended(
        &mut self,
        reason: CloseReason,
        _: &mut HttpRole,
    ) -> (Disconnect, Option<Error>) {
        (Disconnect::bare(reason), self.fatal.take())
    }

    /// Stops every exchange, and ends the session with a `DELETE` (bounded by the grace
    /// period).
    async fn finish(&mut self, http: &mut HttpConnection) {
        self.tasks.clear();
        if let Some(headers) = http.session_end() {
            let delete = exchanges::delete_session(&self.endpoint, headers);
            let grace = self.grace;
            delete
                .or(async {
                    Timer::after(grace).await;
                })
                .await;
        }
    }
}

/// Copies the core's rejected tools where the handles read them, before the listing that
/// changed them is answered.
fn publish_rejected_tools(role: &HttpRole) {
    let rejected = role.core.rejected_tools();
    if let Ok(mut shown) = role.shared.rejected_tools.lock()
        && *shown != rejected
    {
        *shown = rejected.to_vec();
    }
}

impl Exchanges {
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
    fn receive(&mut self, now: Instant, report: Report, role: &mut HttpRole) {
        let http = &mut role.core;
        match report {
            Report::Reply(id, reply) => {
                if matches!(reply, Reply::Done) {
                    self.tasks.remove(&id);
                }
                http.handle_reply(now, id, reply);
            }
            Report::Unreachable {
                exchange,
                url,
                detail,
            } => {
                let reply = Reply::Unreachable(detail.clone());
                if http.handle_reply(now, exchange, reply) == Affected::Connection {
                    self.fatal = self.fatal.take().or(Some(Error::Http { url, detail }));
                }
            }
            Report::Unauthorized(exchange, error) => {
                let reply = Reply::Unauthorized(error.to_string());
                match http.handle_reply(now, exchange, reply) {
                    Affected::Connection => self.fatal = Some(error),
                    // The caller hears `Unauthorized` itself, so the host can offer a login.
                    Affected::Request(id) => role.callers.answer(id, Err(error)),
                    Affected::Nothing => {}
                }
            }
        }
    }
}
