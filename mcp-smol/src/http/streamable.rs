//! The HTTP driver: one future that owns the connection and runs every exchange in flight on
//! an executor of its own, so it works under any executor and nothing outlives it. It speaks
//! Streamable HTTP, or the 2024-11-05 HTTP+SSE transport when told to or when the server
//! turns out to speak only that.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use async_executor::{Executor, Task};
use async_io::Timer;
use futures_lite::future::FutureExt;
use proto::{CloseReason, Connection, Event, RequestError, RequestId, outgoing_request_id};
use url::Url;

use super::tasks::{self, DEFAULT_RETRY, Endpoint, Inbound, Listen, Post};
use super::{HttpServer, HttpTransport};
use crate::driver::{Callers, Driver, Op, Shared};
use crate::{Disconnect, Error, Options};

/// How many reports from exchanges may wait for the driver before they wait to send more.
const INBOX: usize = 64;

/// How many times in a row one answer's event stream is resumed from the same event before
/// the request fails.
const MAX_RESUMES: u32 = 5;

/// Builds the handles' side and the driver future.
pub(super) fn start(server: HttpServer, options: Options) -> (Sender<Op>, Arc<Shared>, Driver) {
    let (ops_sender, ops) = async_channel::unbounded();
    let (done_sender, done) = async_channel::bounded(1);
    let shared = Arc::new(Shared::without_process(done));
    let mut connection = Connection::new(Instant::now(), options.core.clone());
    let mut fatal = None;
    let url = match Url::parse(&server.url) {
        Ok(url) => url,
        Err(error) => {
            let detail = format!("not a URL: {error}");
            let reason = format!("{}: {detail}", server.url);
            connection.fail(CloseReason::Transport(reason));
            let url = server.url.clone();
            fatal = Some(Error::Http { url, detail });
            Url::parse("http://invalid.invalid/").expect("a valid URL")
        }
    };
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
    let legacy = server.transport == HttpTransport::Sse;
    let mut driver = Loop {
        connection,
        ops,
        shared: shared.clone(),
        options,
        endpoint,
        executor: executor.clone(),
        inbox,
        inbox_sender,
        tasks: BTreeMap::new(),
        next_task: 0,
        by_request: BTreeMap::new(),
        resumes: BTreeMap::new(),
        session: None,
        may_fall_back: server.transport == HttpTransport::Auto,
        fell_back: None,
        legacy: legacy.then(Legacy::default),
        restarting: false,
        restarted_unanswered: false,
        resend: Vec::new(),
        resent: BTreeSet::new(),
        initialize: None,
        listen_from: None,
        listener: None,
        gate: None,
        fatal,
        callers: Callers::default(),
    };
    let main = async move {
        if legacy {
            driver.open_legacy_stream();
        }
        let reason = executor.run(driver.run()).await;
        driver.shut_down(reason).await;
        // Whatever exchange was still in flight goes with the executor, sockets included.
        drop(driver);
        drop(executor);
        drop(done_sender);
    };
    (ops_sender, shared, Driver(Box::pin(main)))
}

/// HTTP+SSE state: where to POST, once the stream has said.
#[derive(Default)]
struct Legacy {
    endpoint: Option<Url>,
    /// Messages waiting for the endpoint.
    queued: Vec<Vec<u8>>,
}

enum Wake {
    Op(Option<Op>),
    Inbound(Inbound),
    Timeout,
}

struct Loop {
    connection: Connection,
    ops: Receiver<Op>,
    shared: Arc<Shared>,
    options: Options,
    endpoint: Arc<Endpoint>,
    executor: Arc<Executor<'static>>,
    inbox: Receiver<Inbound>,
    inbox_sender: Sender<Inbound>,
    /// Every exchange in flight; dropping one cancels it and closes its socket.
    tasks: BTreeMap<u64, Task<()>>,
    next_task: u64,
    /// The exchange carrying each request's answer.
    by_request: BTreeMap<RequestId, u64>,
    /// How often each request's answer stream has been resumed in a row from the same event,
    /// and that event's id.
    resumes: BTreeMap<RequestId, (u32, Option<String>)>,
    session: Option<String>,
    /// `HttpTransport::Auto` before the first answer to `initialize`.
    may_fall_back: bool,
    /// Why the Streamable HTTP `initialize` was refused, once we fell back to HTTP+SSE.
    fell_back: Option<String>,
    /// `Some` when speaking HTTP+SSE.
    legacy: Option<Legacy>,
    /// A new session is being set up after the server forgot the last one.
    restarting: bool,
    /// A new session was started and has answered no request yet: if the server refuses it
    /// too, the connection fails rather than start another.
    restarted_unanswered: bool,
    /// Requests the server refused for a lost session, to send again in the new one.
    resend: Vec<Vec<u8>>,
    /// Requests already sent again in a new session: a second refusal fails them.
    resent: BTreeSet<RequestId>,
    /// The `initialize` in flight: its request id and exchange.
    initialize: Option<(RequestId, u64)>,
    /// Where the server's own stream resumes from, when the `initialize` answer was a stream
    /// that gave an event id (and how long to wait first).
    listen_from: Option<(Option<String>, Duration)>,
    /// The GET stream for the server's own messages.
    listener: Option<u64>,
    /// The exchange carrying `notifications/initialized`: nothing else is sent until it is
    /// over, since servers (the Python SDK's) refuse requests that overtake it.
    gate: Option<u64>,
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
                while self.gate.is_none()
                    && let Some(message) = self.connection.poll_transmit()
                {
                    self.transmit(message);
                    busy = true;
                }
                while let Some(event) = self.connection.poll_event() {
                    if let Event::Closed(reason) = event {
                        return reason;
                    }
                    self.dispatch(event);
                    busy = true;
                }
            }
            let deadline = self.connection.poll_timeout();
            let wake = self.next_wake(deadline).await;
            let now = Instant::now();
            match wake {
                Wake::Op(Some(op)) => self.apply(now, op),
                // Every handle is gone.
                Wake::Op(None) => self.connection.close(),
                Wake::Inbound(inbound) => self.receive(now, inbound),
                Wake::Timeout => self.connection.handle_timeout(now),
            }
        }
    }

    async fn next_wake(&mut self, deadline: Option<Instant>) -> Wake {
        let op = async { Wake::Op(self.ops.recv().await.ok()) };
        let inbound = async {
            match self.inbox.recv().await {
                Ok(inbound) => Wake::Inbound(inbound),
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
        op.race(inbound).race(timeout).await
    }

    /// Starts an exchange on the driver's executor.
    fn spawn<F>(&mut self, exchange: impl FnOnce(Sender<Inbound>) -> F) -> u64
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let key = self.next_task;
        self.next_task += 1;
        let inbox = self.inbox_sender.clone();
        let work = exchange(inbox.clone());
        let task = self.executor.spawn(async move {
            work.await;
            let _ = inbox.send(Inbound::Done(key)).await;
        });
        self.tasks.insert(key, task);
        key
    }

    /// Our headers for a message to the Streamable HTTP endpoint, after the static ones.
    fn headers(&self) -> Vec<(String, String)> {
        let mut headers = self.endpoint.headers.clone();
        if let Some(session) = &self.session {
            headers.push(("Mcp-Session-Id".to_owned(), session.clone()));
        }
        if let Some(info) = self.connection.server_info() {
            let version = info.protocol_version.clone();
            headers.push(("MCP-Protocol-Version".to_owned(), version));
        }
        headers
    }

    /// Sends one message from the core: one POST, or held until HTTP+SSE knows where.
    fn transmit(&mut self, mut message: Vec<u8>) {
        if message.last() == Some(&b'\n') {
            message.pop();
        }
        // Issued before the session was lost, it would go out with no session at all.
        if self.restarting && !is_initialize(&message) {
            self.resend.push(message);
            return;
        }
        match &mut self.legacy {
            Some(Legacy {
                endpoint: Some(url),
                ..
            }) => {
                let url = url.clone();
                self.post(url, message, true);
            }
            Some(legacy) => legacy.queued.push(message),
            None => {
                let url = self.endpoint.url.clone();
                self.post(url, message, false);
            }
        }
    }

    fn post(&mut self, url: Url, body: Vec<u8>, legacy: bool) {
        let id = outgoing_request_id(&body);
        let initialize = id.is_some() && is_initialize(&body);
        let mut headers = if legacy {
            self.endpoint.headers.clone()
        } else {
            self.headers()
        };
        headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
        headers.push((
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ));
        let post = Post {
            url,
            body,
            headers,
            id,
            initialize,
            session: if legacy { None } else { self.session.clone() },
            may_fall_back: initialize && self.may_fall_back,
            legacy,
        };
        let endpoint = self.endpoint.clone();
        // A notification nobody answers must not hold a socket for ever.
        let limit = (id.is_none()).then_some(self.options.core.request_timeout);
        let initialized = id.is_none() && is_initialized_notice(&post.body);
        let key = self.spawn(|inbox| async move {
            let exchange = tasks::post(endpoint, post, inbox);
            match limit {
                Some(limit) => {
                    exchange
                        .or(async {
                            Timer::after(limit).await;
                        })
                        .await
                }
                None => exchange.await,
            }
        });
        if initialized {
            self.gate = Some(key);
        }
        if let Some(id) = id {
            if initialize {
                self.initialize = Some((id, key));
            } else if !legacy {
                self.by_request.insert(id, key);
            }
        }
    }

    fn open_legacy_stream(&mut self) {
        let listen = Listen {
            url: self.endpoint.url.clone(),
            headers: self.endpoint.headers.clone(),
            last_event_id: None,
            delay: Duration::ZERO,
        };
        let endpoint = self.endpoint.clone();
        self.listener = Some(self.spawn(|inbox| tasks::legacy_stream(endpoint, listen, inbox)));
    }

    /// Opens the GET stream for the server's own messages, once the session is ready, the
    /// `initialize` exchange is over (a stream that answered it resumes here) and so is
    /// `notifications/initialized`.
    fn open_listener(&mut self) {
        if self.legacy.is_some()
            || self.listener.is_some()
            || self.gate.is_some()
            || self.connection.server_info().is_none()
            || self.initialize.is_some()
        {
            return;
        }
        let (last_event_id, delay) = self.listen_from.take().unwrap_or((None, Duration::ZERO));
        let listen = Listen {
            url: self.endpoint.url.clone(),
            headers: self.headers(),
            last_event_id,
            delay,
        };
        let endpoint = self.endpoint.clone();
        self.listener = Some(self.spawn(|inbox| tasks::listen(endpoint, listen, inbox)));
    }

    /// What an exchange reported.
    fn receive(&mut self, now: Instant, inbound: Inbound) {
        match inbound {
            Inbound::Session(session) => self.session = Some(session),
            Inbound::Message(message) => {
                // The server answered as a Streamable HTTP server: no falling back now.
                self.may_fall_back = false;
                self.connection.handle_message(now, &message);
            }
            Inbound::Failed { id, error } => _ = self.connection.fail_request(now, id, error),
            Inbound::BodyDone { id, why } => {
                let handshaking = self.connection.server_info().is_none() || self.restarting;
                if self.initialize.is_some_and(|(init, _)| init == id) && handshaking {
                    self.connection.fail(CloseReason::Transport(why));
                } else if self.by_request.contains_key(&id) {
                    let error = RequestError::Transport(why);
                    self.connection.fail_request(now, id, error);
                }
            }
            Inbound::Fatal { error, reason } => {
                if self.connection.server_info().is_none() || self.restarting {
                    self.fatal = self.fatal.take().or(error);
                    self.connection.fail(CloseReason::Transport(reason));
                }
            }
            Inbound::Unauthorized {
                id,
                initialize,
                error,
            } => {
                if initialize {
                    let reason = error.to_string();
                    self.fatal = Some(error);
                    self.connection.fail(CloseReason::Transport(reason));
                } else if let Some(id) = id {
                    // The caller hears `Unauthorized` itself, so the host can offer a login.
                    self.callers.answer(id, Err(error.clone()));
                    let reason = RequestError::Transport(error.to_string());
                    self.connection.fail_request(now, id, reason);
                }
            }
            Inbound::SessionExpired {
                message,
                session,
                refusal,
            } => {
                let id = outgoing_request_id(&message);
                // Sent again in a new session and refused again: the refusal is not about the
                // session, and another restart would only loop.
                if let Some(id) = id
                    && !self.resent.insert(id)
                {
                    let why = format!(
                        "POST {}: {refusal}, in a new session too",
                        self.endpoint.url
                    );
                    self.connection
                        .fail_request(now, id, RequestError::Transport(why));
                    return;
                }
                if self.session.as_deref() == Some(session.as_str()) {
                    // A new session refused before it answered anything: another would go
                    // round for ever (`notifications/initialized` opens each).
                    if self.restarted_unanswered {
                        let why = format!(
                            "POST {}: {refusal}, in a new session that had answered nothing yet",
                            self.endpoint.url
                        );
                        self.connection.fail(CloseReason::Transport(why));
                        return;
                    }
                    self.restarted_unanswered = true;
                    self.session = None;
                    self.restarting = true;
                    if let Some(old) = self.listener.take() {
                        self.tasks.remove(&old);
                    }
                    self.connection.restart_session(now);
                }
                if id.is_some() {
                    if self.restarting {
                        self.resend.push(message);
                    } else {
                        let url = self.endpoint.url.clone();
                        self.post(url, message, false);
                    }
                }
            }
            Inbound::Fallback { message, why } => {
                if self.may_fall_back && self.legacy.is_none() {
                    self.may_fall_back = false;
                    self.fell_back = Some(why);
                    self.initialize = None;
                    self.legacy = Some(Legacy {
                        endpoint: None,
                        queued: vec![message],
                    });
                    self.open_legacy_stream();
                }
            }
            Inbound::StreamEnded {
                id,
                last_event_id,
                retry,
                why,
            } => self.stream_ended(now, id, last_event_id, retry, why),
            Inbound::Endpoint(url) => {
                if let Some(legacy) = &mut self.legacy {
                    legacy.endpoint = Some(url.clone());
                    for message in std::mem::take(&mut legacy.queued) {
                        self.post(url.clone(), message, true);
                    }
                }
            }
            Inbound::LegacyEnded(detail) => {
                let reason = match self.fell_back.take() {
                    Some(why) => format!("{why}; and as an HTTP+SSE server: {detail}"),
                    None => detail,
                };
                self.connection.fail(CloseReason::Transport(reason));
            }
            Inbound::Done(key) => {
                self.tasks.remove(&key);
                if self.gate == Some(key) {
                    self.gate = None;
                    self.open_listener();
                }
                if self.initialize.is_some_and(|(_, task)| task == key) {
                    self.initialize = None;
                    self.open_listener();
                }
            }
        }
    }

    /// An event stream that was to carry request `id`'s answer ended. Resume it with
    /// `Last-Event-ID` after the server's `retry` if the answer has not come, or fail the
    /// request at once if the stream gave nothing to resume from.
    fn stream_ended(
        &mut self,
        now: Instant,
        id: RequestId,
        last_event_id: Option<String>,
        retry: Option<Duration>,
        why: String,
    ) {
        let delay = retry.unwrap_or(DEFAULT_RETRY);
        if self.initialize.is_some_and(|(init, _)| init == id) {
            if self.connection.server_info().is_some() {
                // Answered: the server's own stream takes over where this one stopped.
                if last_event_id.is_some() {
                    self.listen_from = Some((last_event_id, delay));
                }
            } else {
                let reason = format!("{why} before the answer to initialize");
                self.connection.fail(CloseReason::Transport(reason));
            }
            return;
        }
        if !self.by_request.contains_key(&id) {
            return;
        }
        // Only streams that brought nothing new count: a server may end a long call's stream
        // on purpose, again and again, each time a little further on.
        let (attempts, seen) = self.resumes.entry(id).or_default();
        if *seen != last_event_id {
            *attempts = 0;
            seen.clone_from(&last_event_id);
        }
        *attempts += 1;
        let error = match last_event_id {
            None => Some(format!(
                "{why} before the answer, with no event id to resume from"
            )),
            Some(_) if *attempts > MAX_RESUMES => Some(format!(
                "{why} before the answer, {MAX_RESUMES} times without a new event; giving up"
            )),
            Some(_) => None,
        };
        if let Some(error) = error {
            self.connection
                .fail_request(now, id, RequestError::Transport(error));
            return;
        }
        let listen = Listen {
            url: self.endpoint.url.clone(),
            headers: self.headers(),
            last_event_id,
            delay,
        };
        let endpoint = self.endpoint.clone();
        let key = self.spawn(|inbox| tasks::resume(endpoint, listen, id, inbox));
        if let Some(old) = self.by_request.insert(id, key) {
            self.tasks.remove(&old);
        }
    }

    fn apply(&mut self, now: Instant, op: Op) {
        let ready = !self.restarting;
        self.callers.apply(&mut self.connection, now, op, ready);
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Ready(info) => {
                self.restarting = false;
                self.may_fall_back = false;
                // The probe's refusal explains a handshake that fails both ways, not a later
                // failure of the HTTP+SSE stream.
                self.fell_back = None;
                self.callers.ready(&info);
                for message in std::mem::take(&mut self.resend) {
                    let url = self.endpoint.url.clone();
                    self.post(url, message, false);
                }
                self.open_listener();
            }
            Event::Response {
                result: Err(RequestError::Closed(_)),
                ..
            } => {}
            Event::Response { id, result } => {
                if matches!(result, Ok(_) | Err(RequestError::Remote(_))) {
                    self.restarted_unanswered = false;
                }
                // Its exchange has done its job: dropping it closes the stream.
                if let Some(key) = self.by_request.remove(&id) {
                    self.tasks.remove(&key);
                }
                self.resumes.remove(&id);
                self.resent.remove(&id);
                self.callers.answer(id, result.map_err(Error::from_request));
            }
            Event::Notification(notification) => self.callers.notify(&notification),
            Event::ServerRequest(request) => self.callers.pass_on(&mut self.connection, request),
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
        if self.legacy.is_none()
            && let Some(session) = self.session.take()
        {
            let mut headers = self.endpoint.headers.clone();
            headers.push(("Mcp-Session-Id".to_owned(), session));
            if let Some(info) = self.connection.server_info() {
                let version = info.protocol_version.clone();
                headers.push(("MCP-Protocol-Version".to_owned(), version));
            }
            let delete = tasks::delete_session(&self.endpoint, headers);
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

/// Whether a message from the core is `notifications/initialized`.
fn is_initialized_notice(message: &[u8]) -> bool {
    let needle = br#""method":"notifications/initialized""#;
    message.len() < 200 && message.windows(needle.len()).any(|window| window == needle)
}

/// Whether a request from the core is `initialize` (its encoding puts the method right
/// after the id).
fn is_initialize(message: &[u8]) -> bool {
    let needle = br#","method":"initialize""#;
    message
        .windows(needle.len())
        .take(40)
        .any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_s_handshake_messages_are_recognised() {
        let now = Instant::now();
        let mut connection = Connection::new(now, proto::Config::default());
        let initialize = connection.poll_transmit().unwrap_or_default();
        assert!(is_initialize(&initialize));
        assert!(!is_initialized_notice(&initialize));
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#;
        connection.handle_message(now, answer);
        let initialized = connection.poll_transmit().unwrap_or_default();
        assert!(is_initialized_notice(&initialized), "{initialized:?}");
        assert!(!is_initialize(&initialized));
        // A request whose arguments mention the method is not the handshake.
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"a":",\"method\":\"initialize\""}}}"#;
        assert!(!is_initialize(call));
    }
}
