//! One host of `serve --listen`, in memory: a server-role machine served by the gateway as a
//! stdio host is. The messages of the host's HTTP requests go into it as they were decoded
//! from their bodies, once (no pipe in between to frame and decode them again), and what it
//! writes is routed, as it writes it, back to the HTTP request it belongs to.
//!
//! Each host request gets a [`Reply`]: its answer, and before it what relates to it when its
//! HTTP answer may be an event stream (the host accepts `text/event-stream`): its progress
//! notifications, the subscription's notifications of a `subscriptions/listen`, and in a
//! session the requests of ours (forms, `roots/list`) asked while it is open. A session's
//! other notifications (list changes) go to its standalone stream (`GET`) when one is open.
//! A request of ours with nowhere to go is answered at once with an error, which the gateway
//! takes as the host's "cancel": nothing waits for ever on a host that cannot be reached.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};

use async_channel::{Receiver, Sender};
use futures_lite::io::AsyncWrite;
use hyper::body::Bytes;
use mcp_smol::Server;
use mcp_smol::proto::server::HostMessage;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::gateway::rounds::Rounds;
use crate::gateway::{Gateway, Host, server_config};

/// At most this many requests of one host are answered at once; one more is refused.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// A stream this far behind its host loses notifications rather than holding them all.
const MAX_QUEUED: usize = 1024;

/// At most this many notifications wait for a session's standalone stream to open.
const MAX_HELD: usize = 16;

/// Why a request was not answered by the gateway.
#[derive(Debug)]
pub(crate) enum Refused {
    /// [`MAX_IN_FLIGHT`] of the host's requests are open.
    Busy,
    /// A request with the same id is open.
    DuplicateId,
    /// The connection ended first (the session was deleted, the gateway stops).
    Closed,
}

/// A message of the machine's for the host, as the machine wrote it (JSON without the line's
/// end): it goes out as written, never decoded and encoded again.
pub(crate) type Message = Bytes;

/// A message on its way to the host request it relates to.
struct Delivered {
    message: Message,
    /// Whether it is the request's answer.
    answer: bool,
}

/// Where one open host request's messages go.
struct Route {
    to: Sender<Delivered>,
    /// Its `_meta.progressToken`, as JSON text.
    progress_token: Option<String>,
    /// Whether more than its answer may go to it: its HTTP answer may be an event stream.
    streams: bool,
    /// When it was opened, in this machine's count: a request of ours goes to the latest.
    opened: u64,
}

/// The open host requests by their id's JSON text, and the session's standalone stream.
#[derive(Default)]
struct Routes {
    opened: u64,
    open: BTreeMap<String, Route>,
    standalone: Option<Sender<Message>>,
    /// Notifications for the standalone stream before the host opened it (a list change
    /// right after `initialize`), the latest [`MAX_HELD`].
    held: VecDeque<Message>,
}

type Shared = Arc<Mutex<Routes>>;

fn lock(routes: &Shared) -> std::sync::MutexGuard<'_, Routes> {
    routes.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A server-role machine of the gateway's, for one session or one stateless-era request.
/// Dropping it ends the machine, which drops its calls and so cancels them at their backends.
pub(crate) struct Bridge {
    /// The machine's handle, where the host's messages go in.
    server: Server,
    routes: Shared,
    _serving: async_executor::Task<()>,
}

impl Bridge {
    /// A new machine served by `gateway`; a stateless-era host's `rounds` are shared by all
    /// its requests' machines, so that a retry finds the call it answers.
    pub(crate) fn open(gateway: Arc<Gateway>, rounds: Option<Rounds>) -> Self {
        let routes = Shared::default();
        let refusals = Arc::new(OnceLock::new());
        let routing = Routing {
            routes: routes.clone(),
            refusals: refusals.clone(),
            partial: Vec::new(),
        };
        let served = mcp_smol::serve_messages(routing, server_config());
        let server = served.0.clone();
        let _ = refusals.set(server.clone());
        let executor = gateway.executor.clone();
        let serving = executor.spawn(async move {
            let executor = gateway.executor.clone();
            if let Some(host) = Host::connect_served(served, &executor, rounds).await {
                gateway.serve(host, None).await;
            }
        });
        Self {
            server,
            routes,
            _serving: serving,
        }
    }

    /// Sends a request, `message`; its answer, and what relates to it when `streams`, come
    /// through the [`Reply`]. If the reply is dropped before the answer (the host hung up)
    /// and `cancel` is set, the gateway is told the host cancelled the request.
    pub(crate) fn request(
        self: &Arc<Self>,
        message: HostMessage,
        cancel: bool,
        streams: bool,
    ) -> Result<Reply, Refused> {
        let id = message.id().cloned().unwrap_or(Value::Null);
        let key = id.to_string();
        let progress_token = (message.meta("progressToken"))
            .filter(|token| !token.is_null())
            .map(Value::to_string);
        let (to, messages) = async_channel::unbounded();
        {
            let mut routes = lock(&self.routes);
            if routes.open.len() >= MAX_IN_FLIGHT {
                return Err(Refused::Busy);
            }
            if routes.open.contains_key(&key) {
                return Err(Refused::DuplicateId);
            }
            let route = Route {
                to,
                progress_token,
                streams,
                opened: routes.opened,
            };
            routes.opened += 1;
            routes.open.insert(key.clone(), route);
        }
        let reply = Reply {
            bridge: self.clone(),
            messages,
            key,
            id,
            cancel,
            answered: false,
        };
        match self.server.receive(message) {
            true => Ok(reply),
            false => Err(Refused::Closed),
        }
    }

    /// Sends a notification, or the host's answer to a request of ours.
    pub(crate) fn send(&self, message: HostMessage) -> Result<(), Refused> {
        match self.server.receive(message) {
            true => Ok(()),
            false => Err(Refused::Closed),
        }
    }

    /// The session's standalone stream: what the machine sends that relates to no open
    /// request (list changes), until the machine ends, beginning with what came before it
    /// opened. A new one replaces the one before.
    pub(crate) fn standalone(&self) -> Standalone {
        let (to, messages) = async_channel::unbounded();
        let mut routes = lock(&self.routes);
        for message in routes.held.drain(..) {
            let _ = to.try_send(message);
        }
        routes.standalone = Some(to);
        Standalone {
            messages,
            server: self.server.clone(),
        }
    }
}

/// A session's standalone stream. When dropped (its host hung up), the requests of ours
/// still queued on it are refused, so that nothing waits on a question never written.
pub(crate) struct Standalone {
    messages: Receiver<Message>,
    server: Server,
}

impl Standalone {
    /// The next message for the host; `None` once the machine ended or another stream
    /// replaced this one and all that was sent here has been taken.
    pub(crate) async fn next(&self) -> Option<Message> {
        self.messages.recv().await.ok()
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        let queued = std::iter::from_fn(|| self.messages.try_recv().ok());
        refuse_queued(&self.server, queued);
    }
}

/// One host request on its way: its answer, and before it what relates to it. When dropped
/// before the answer and it was to be cancelled, the gateway hears the host cancelled it.
pub(crate) struct Reply {
    bridge: Arc<Bridge>,
    messages: Receiver<Delivered>,
    key: String,
    id: Value,
    cancel: bool,
    answered: bool,
}

impl Reply {
    /// The next message for the host, `None` once the answer has come (or the machine ended
    /// first: then [`answered`](Self::answered) stays `false`).
    pub(crate) async fn next(&mut self) -> Option<Message> {
        if self.answered {
            return None;
        }
        let Delivered { message, answer } = self.messages.recv().await.ok()?;
        // Its route went with its answer: nothing more goes to it, even while its stream is
        // still being written.
        self.answered |= answer;
        Some(message)
    }

    /// The host's id of the request.
    pub(crate) fn id(&self) -> &Value {
        &self.id
    }

    /// Whether the last message [`next`](Self::next) gave was the answer.
    pub(crate) fn answered(&self) -> bool {
        self.answered
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        // Answered, it was taken off the routes then.
        if self.answered {
            return;
        }
        lock(&self.bridge.routes).open.remove(&self.key);
        // What was queued for this request and not written (the host hung up first) never
        // reaches the host: the requests of ours among it are refused.
        let queued = std::iter::from_fn(|| self.messages.try_recv().ok());
        refuse_queued(
            &self.bridge.server,
            queued.map(|delivered| delivered.message),
        );
        if !self.cancel {
            return;
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": self.id, "reason": "the host hung up"}});
        receive(&self.bridge.server, &note);
    }
}

/// Refuses each request of ours among `queued`, messages that will never be written.
fn refuse_queued(server: &Server, queued: impl Iterator<Item = Message>) {
    for refusal in refusals_of(queued) {
        receive(server, &refusal);
    }
}

/// The refusals of the requests of ours among `messages`; answers and notifications need
/// none.
fn refusals_of(messages: impl Iterator<Item = Message>) -> Vec<Value> {
    let refusals = messages.filter_map(|message| {
        let envelope = serde_json::from_slice::<Envelope>(&message).ok()?;
        refusal(&envelope, HUNG_UP)
    });
    refusals.collect()
}

/// Passes `message`, one of ours made as a host's (a cancellation, a refusal), to the
/// machine.
fn receive(server: &Server, message: &Value) {
    let text = serde_json::to_vec(message).unwrap_or_default();
    if let Ok(message) = HostMessage::decode(&text) {
        server.receive(message);
    }
}

/// Where the machine writes: each line it writes is passed on, as it is written, to where it
/// belongs ([`deliver`]); a request of ours with nowhere to go is refused at once.
struct Routing {
    routes: Shared,
    /// The machine's handle, for the refusals; set once the machine is made.
    refusals: Arc<OnceLock<Server>>,
    /// The start of a line whose end is still to come.
    partial: Vec<u8>,
}

impl Routing {
    fn route(&mut self, line: &[u8]) {
        let message = match self.partial.is_empty() {
            true => Bytes::copy_from_slice(line),
            false => {
                self.partial.extend_from_slice(line);
                Bytes::from(std::mem::take(&mut self.partial))
            }
        };
        if let Some(refusal) = deliver(&self.routes, message)
            && let Some(server) = self.refusals.get()
        {
            receive(server, &refusal);
        }
    }
}

impl AsyncWrite for Routing {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let routing = self.get_mut();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&byte| byte == b'\n') {
            routing.route(&rest[..end]);
            rest = &rest[end + 1..];
        }
        routing.partial.extend_from_slice(rest);
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// What routing reads of a message of the machine's; the rest is skipped, not decoded.
#[derive(Deserialize)]
struct Envelope<'a> {
    /// Present (`null` too) in requests and answers.
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// What routing reads of a notification's `params`.
#[derive(Deserialize)]
struct NotificationParams {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<Value>,
    #[serde(rename = "_meta", default)]
    meta: Option<NotificationMeta>,
}

#[derive(Deserialize)]
struct NotificationMeta {
    /// The `subscriptions/listen` the notification is sent on.
    #[serde(rename = "io.modelcontextprotocol/subscriptionId", default)]
    subscription: Option<Value>,
}

/// A member that is there, whatever its value (`null` too).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// The key of an id as the routes keep it: its JSON text as serde_json writes it.
fn key_of(id: &RawValue) -> String {
    serde_json::from_str::<Value>(id.get())
        .map_or_else(|_| id.get().to_owned(), |id| id.to_string())
}

/// Passes one message of the machine's on: an answer to the request it answers; a request of
/// ours to the latest open request that streams, else to the standalone stream; progress to
/// the request whose token it names; a subscription's notification to its
/// `subscriptions/listen`; any other notification to the standalone stream. Returns the
/// refusal to send back for a request of ours that none of these can take.
fn deliver(routes: &Shared, message: Message) -> Option<Value> {
    if let Some(id) = answer_id(&message) {
        // Taken out with its answer, as below.
        let answered = lock(routes).open.remove(id);
        if let Some(route) = answered {
            let message = message.clone();
            let _ = route.to.try_send(Delivered {
                message,
                answer: true,
            });
        }
        return None;
    }
    let Ok(envelope) = serde_json::from_slice::<Envelope>(&message) else {
        return None;
    };
    let method = envelope.method.as_deref();
    let mut routes = lock(routes);
    let mut answer = false;
    // Taken out of the routes with its answer: a request of ours routed to it after that
    // would be queued behind the answer, which ends its stream, and never reach the host.
    let answered;
    let target = match (envelope.id, method) {
        (Some(id), None) => {
            answer = true;
            answered = routes.open.remove(&key_of(id));
            answered.as_ref().map(|route| &route.to)
        }
        (Some(_), Some(_)) => {
            let latest = (routes.open.values())
                .filter(|route| route.streams)
                .max_by_key(|route| route.opened);
            match latest {
                Some(route) => Some(&route.to),
                None => return refuse_or_stream(&mut routes, message.clone(), &envelope),
            }
        }
        (None, _) => {
            let params = (envelope.params)
                .and_then(|params| serde_json::from_str::<NotificationParams>(params.get()).ok());
            let params = params.as_ref();
            let subscription = params
                .and_then(|params| params.meta.as_ref())
                .and_then(|meta| meta.subscription.as_ref());
            // `Some` when it relates to a request: it goes there or nowhere.
            let related = match (subscription, method) {
                (Some(subscription), _) => Some(routes.open.get(&subscription.to_string())),
                (None, Some("notifications/progress")) => {
                    let token = params
                        .and_then(|params| params.progress_token.as_ref())
                        .map(Value::to_string);
                    let mut open = routes.open.values();
                    Some(open.find(|route| token.is_some() && route.progress_token == token))
                }
                (None, _) => None,
            };
            let to = match related {
                Some(route) => route.filter(|route| route.streams).map(|route| &route.to),
                None => return to_standalone(&mut routes, message.clone()),
            };
            // Notifications may be lost to a host that does not read them; nothing else is.
            to.filter(|to| to.len() < MAX_QUEUED)
        }
    };
    let delivered = target.is_some_and(|to| {
        let message = message.clone();
        to.try_send(Delivered { message, answer }).is_ok()
    });
    match delivered {
        true => None,
        false => refusal(&envelope, NO_STREAM),
    }
}

/// The id of an answer, as the machine writes one (`{"jsonrpc":"2.0","id":ID,"result":...`,
/// or `"error"`; the `jsonrpc` member first or after the id), read without going through
/// the rest, which may be large: the route's key, as the id's JSON text is the same. `None`
/// for any other message, and for an answer written otherwise, which [`Envelope`] reads.
fn answer_id(message: &[u8]) -> Option<&str> {
    const VERSION: &[u8] = br#""jsonrpc":"2.0","#;
    let rest = message.strip_prefix(b"{")?;
    let rest = rest.strip_prefix(VERSION).unwrap_or(rest);
    let rest = rest.strip_prefix(br#""id":"#)?;
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<&RawValue>();
    let id = values.next()?.ok()?;
    let after = rest.get(values.byte_offset()..)?.strip_prefix(b",")?;
    let after = after.strip_prefix(VERSION).unwrap_or(after);
    let answers = after.starts_with(br#""result":"#) || after.starts_with(br#""error":"#);
    answers.then(|| id.get())
}

/// A request of ours when no open request streams: to the standalone stream, else refused.
fn refuse_or_stream(routes: &mut Routes, message: Message, envelope: &Envelope) -> Option<Value> {
    let taken = (routes.standalone.as_ref()).is_some_and(|to| to.try_send(message).is_ok());
    match taken {
        true => None,
        false => refusal(envelope, NO_STREAM),
    }
}

/// A notification that relates to no request: to the standalone stream, or held for it
/// until the host opens it.
fn to_standalone(routes: &mut Routes, message: Message) -> Option<Value> {
    match &routes.standalone {
        Some(to) if !to.is_closed() => {
            if to.len() < MAX_QUEUED {
                let _ = to.try_send(message);
            }
        }
        _ => {
            if routes.held.len() == MAX_HELD {
                routes.held.pop_front();
            }
            routes.held.push_back(message);
        }
    }
    None
}

/// Why a request of ours went nowhere, when no open request streams.
const NO_STREAM: &str =
    "this host is served over HTTP with no stream open to take requests of the server's";

/// Why a request of ours went nowhere, when its stream closed before it was written.
const HUNG_UP: &str = "the host's stream closed before the request was written to it";

/// The refusal, saying `why`, to send back for a request of ours that nothing can take;
/// `None` for any other message.
fn refusal(envelope: &Envelope, why: &str) -> Option<Value> {
    let (Some(id), Some(method)) = (envelope.id, envelope.method.as_deref()) else {
        return None;
    };
    let id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    Some(json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32601,
        "message": format!("{method}: {why}"),
    }}))
}

#[cfg(test)]
mod tests {
    use super::{Message, answer_id, refusals_of};
    use serde_json::json;

    #[test]
    fn of_what_was_queued_and_never_written_only_the_requests_of_ours_are_refused() {
        let queued = [
            json!({"jsonrpc": "2.0", "id": "g-1", "method": "roots/list"}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 4, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": {}}),
        ];
        let queued = queued
            .iter()
            .map(|message| Message::from(message.to_string()));
        let refusals = refusals_of(queued);
        let ids: Vec<_> = refusals.iter().map(|refusal| &refusal["id"]).collect();
        assert_eq!(ids, [&json!("g-1"), &json!(9)]);
        let message = refusals[0]["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("roots/list: the host's stream closed"),
            "{message}"
        );
    }

    #[test]
    fn an_answers_id_is_read_as_the_routes_key_and_nothing_else_is_an_answer() {
        for id in [
            json!(7),
            json!("a\"b\\u00e9"),
            json!(-1.5e3),
            json!(u64::MAX),
        ] {
            for body in [json!({"x": [1, 2]}), json!(null)] {
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": body});
                let text = serde_json::to_vec(&answer).unwrap();
                assert_eq!(answer_id(&text), Some(id.to_string().as_str()), "{answer}");
            }
            let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": 1, "message": "m"}});
            let text = serde_json::to_vec(&error).unwrap();
            assert_eq!(answer_id(&text), Some(id.to_string().as_str()));
        }
        // The version after the id, as a map sorted by key writes it.
        let sorted = br#"{"id":"s","jsonrpc":"2.0","result":{}}"#;
        assert_eq!(answer_id(sorted), Some(r#""s""#));
        for other in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":1"#,
            br#"{"result":{},"jsonrpc":"2.0","id":1}"#,
            b"",
        ] {
            assert_eq!(answer_id(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
