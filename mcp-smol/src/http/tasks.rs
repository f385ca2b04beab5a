//! The exchanges a driver runs side by side: each is a future that talks HTTP and reports to
//! the driver's inbox, never touching the connection itself.

use std::sync::Arc;
use std::time::Duration;

use async_channel::Sender;
use hyper::Method;
use hyper::body::Bytes;
use proto::{RequestError, RequestId, SseDecoder};
use url::Url;

use super::exchange::{self, BodyError, Outgoing, Pool, Response};
use super::{Authorizer, Challenge};
use crate::Error;

/// What an exchange tells the driver. Sent in order, so a stream's messages arrive as sent.
#[derive(Debug)]
pub(super) enum Inbound {
    /// The server named the session (the `initialize` answer's `Mcp-Session-Id`).
    Session(String),
    /// One JSON-RPC message: a body, or an event's data.
    Message(Vec<u8>),
    /// A JSON body answering request `id` has been passed on; if the request is still
    /// pending, the body did not answer it and `why` says so.
    BodyDone { id: RequestId, why: String },
    /// One request failed in transit.
    Failed { id: RequestId, error: RequestError },
    /// The exchange carrying `initialize` failed: the connection cannot start.
    Fatal {
        error: Option<Error>,
        reason: String,
    },
    /// 401 or 403 that the authorizer could not fix.
    Unauthorized {
        id: Option<RequestId>,
        initialize: bool,
        error: Error,
    },
    /// A refusal of a message that carried this session id, meaning the server forgot the
    /// session (see [`proto::session_lost`]); `refusal` is its status and body.
    SessionExpired {
        message: Vec<u8>,
        session: String,
        refusal: String,
    },
    /// `initialize` refused with 400, 404 or 405: try the HTTP+SSE transport.
    Fallback { message: Vec<u8>, why: String },
    /// An event stream answering a request ended; `id` is that request.
    StreamEnded {
        id: RequestId,
        last_event_id: Option<String>,
        retry: Option<Duration>,
        why: String,
    },
    /// HTTP+SSE: where to POST messages.
    Endpoint(Url),
    /// HTTP+SSE: the event stream failed or ended; the connection is over.
    LegacyEnded(String),
    /// This exchange is over.
    Done(u64),
}

/// What every exchange of one connection shares.
#[derive(Debug)]
pub(super) struct Endpoint {
    /// As configured: the MCP endpoint, or the HTTP+SSE event stream.
    pub(super) url: Url,
    pub(super) headers: Vec<(String, String)>,
    pub(super) authorizer: Option<Arc<dyn Authorizer>>,
    pub(super) connect_timeout: Duration,
    /// The most one message (body or event) may take.
    pub(super) limit: usize,
    /// Kept-alive connections to the server.
    pub(super) pool: Arc<Pool>,
}

/// Why an exchange got no usable answer.
pub(super) enum Refusal {
    Unauthorized(Error),
    /// No HTTP answer at all (DNS, refused, TLS, redirect loop): the sentence without the
    /// method and URL.
    Unreachable(String),
}

impl Endpoint {
    /// Sends with the authorizer's header, follows redirects, and gives a 401 (or a 403 for
    /// scope) one more try if the authorizer says it has fixed it: once per status, so a
    /// request that needs a login and then more scope still goes through.
    pub(super) async fn send(&self, request: Outgoing) -> Result<Response, Refusal> {
        let mut retried: Vec<u16> = Vec::new();
        loop {
            let mut attempt = request.clone();
            if let Some(authorizer) = &self.authorizer {
                match authorizer.authorization().await {
                    Ok(Some(value)) => {
                        (attempt.headers)
                            .retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
                        attempt.headers.push(("Authorization".to_owned(), value));
                    }
                    Ok(None) => {}
                    Err(error) => {
                        return Err(Refusal::Unreachable(format!("no authorization: {error}")));
                    }
                }
            }
            let response =
                exchange::send_following(&attempt, self.connect_timeout, Some(&self.pool))
                    .await
                    .map_err(Refusal::Unreachable)?;
            let status = response.status.as_u16();
            if status != 401 && status != 403 {
                return Ok(response);
            }
            let www_authenticate = response.header("www-authenticate").map(str::to_owned);
            let challenge = Challenge {
                url: self.url.to_string(),
                status,
                www_authenticate,
            };
            let may_fix = status == 401
                || (challenge.www_authenticate.as_deref())
                    .is_some_and(|value| value.contains("insufficient_scope"));
            if !retried.contains(&status)
                && may_fix
                && let Some(authorizer) = &self.authorizer
            {
                match authorizer.challenged(&challenge).await {
                    Ok(true) => {
                        retried.push(status);
                        continue;
                    }
                    Ok(false) => {}
                    Err(error) => {
                        return Err(Refusal::Unreachable(format!(
                            "authorization failed: {error}"
                        )));
                    }
                }
            }
            return Err(Refusal::Unauthorized(Error::Unauthorized {
                url: challenge.url,
                status,
                www_authenticate: challenge.www_authenticate,
            }));
        }
    }
}

/// One message to POST (Streamable HTTP, or HTTP+SSE's message endpoint).
#[derive(Debug)]
pub(super) struct Post {
    pub(super) url: Url,
    pub(super) body: Vec<u8>,
    /// Ours and the static ones; `Authorization` is added on the way.
    pub(super) headers: Vec<(String, String)>,
    pub(super) id: Option<RequestId>,
    pub(super) initialize: bool,
    /// The session id the POST carries.
    pub(super) session: Option<String>,
    /// `initialize` under [`HttpTransport::Auto`](super::HttpTransport): 400, 404 or 405
    /// mean "try HTTP+SSE".
    pub(super) may_fall_back: bool,
    /// HTTP+SSE: the answer comes on the event stream; the POST's own answer is only an
    /// acknowledgement.
    pub(super) legacy: bool,
}

/// How one exchange's failure reaches the driver.
fn failure(post: &Post, detail: String, unreachable: bool) -> Option<Inbound> {
    let sentence = format!("POST {}: {detail}", post.url);
    if post.initialize {
        let error = unreachable.then(|| Error::Http {
            url: post.url.to_string(),
            detail: detail.clone(),
        });
        return Some(Inbound::Fatal {
            error,
            reason: sentence,
        });
    }
    let id = post.id?;
    Some(Inbound::Failed {
        id,
        error: RequestError::Transport(sentence),
    })
}

/// The most of an HTTP+SSE POST's own answer (an acknowledgement) that is read.
const LEGACY_ACK_LIMIT: usize = 64 * 1024;

/// POSTs one message and relays what comes back.
pub(super) async fn post(endpoint: Arc<Endpoint>, post: Post, inbox: Sender<Inbound>) {
    let report = |message: Option<Inbound>| {
        let inbox = inbox.clone();
        async move {
            if let Some(message) = message {
                let _ = inbox.send(message).await;
            }
        }
    };
    let request = Outgoing {
        method: Method::POST,
        url: post.url.clone(),
        headers: post.headers.clone(),
        body: Bytes::from(post.body.clone()),
    };
    let mut response = match endpoint.send(request).await {
        Ok(response) => response,
        Err(Refusal::Unauthorized(error)) => {
            let id = post.id;
            let initialize = post.initialize;
            return report(Some(Inbound::Unauthorized {
                id,
                initialize,
                error,
            }))
            .await;
        }
        Err(Refusal::Unreachable(detail)) => return report(failure(&post, detail, true)).await,
    };
    let status = response.status.as_u16();
    if !response.status.is_success()
        && let Some(session) = post.session.clone()
    {
        let body = response.body_start().await;
        let refusal = response.refusal(&body);
        if proto::session_lost(status, &body) {
            let message = post.body;
            let expired = Inbound::SessionExpired {
                message,
                session,
                refusal,
            };
            return report(Some(expired)).await;
        }
        return report(failure(&post, refusal, false)).await;
    }
    if post.may_fall_back && matches!(status, 400 | 404 | 405) {
        let why = format!("POST {}: {}", post.url, response.describe().await);
        let message = post.body;
        return report(Some(Inbound::Fallback { message, why })).await;
    }
    if !response.status.is_success() {
        let detail = response.describe().await;
        return report(failure(&post, detail, false)).await;
    }
    if post.legacy {
        // The answer comes on the event stream; reading this one's short body to its end
        // lets the connection be reused.
        let _ = response.read_body(LEGACY_ACK_LIMIT).await;
        return;
    }
    if post.initialize
        && let Some(session) = response.header("mcp-session-id")
    {
        let _ = inbox.send(Inbound::Session(session.to_owned())).await;
    }
    let media = response.media_type();
    match media.as_deref() {
        Some("application/json") => match response.read_body(endpoint.limit).await {
            Ok(body) if body.iter().all(u8::is_ascii_whitespace) && post.id.is_none() => {}
            Ok(body) => {
                let quoted = exchange::quote(&body);
                let _ = inbox.send(Inbound::Message(body)).await;
                if let Some(id) = post.id {
                    let why = format!(
                        "POST {}: {} with a JSON body that does not answer the request: {quoted}",
                        post.url,
                        response.status_line()
                    );
                    let _ = inbox.send(Inbound::BodyDone { id, why }).await;
                }
            }
            Err(BodyError::TooLarge { size }) => {
                let limit = endpoint.limit;
                report(too_large(&post, size, limit)).await;
            }
            Err(BodyError::Failed(detail)) => {
                let detail = format!("the answer broke off: {detail}");
                report(failure(&post, detail, false)).await;
            }
        },
        Some("text/event-stream") => {
            let mut decoder = SseDecoder::new(endpoint.limit);
            let end = relay_events(&mut response, &mut decoder, &inbox).await;
            let Some(id) = post.id else { return };
            match end {
                StreamEnd::TooLarge { size } => {
                    report(too_large(&post, size, endpoint.limit)).await
                }
                StreamEnd::Ended(why) => {
                    let last_event_id = decoder.last_event_id().map(str::to_owned);
                    let retry = decoder.retry();
                    let why = format!("POST {}: {why}", post.url);
                    let ended = Inbound::StreamEnded {
                        id,
                        last_event_id,
                        retry,
                        why,
                    };
                    let _ = inbox.send(ended).await;
                }
            }
        }
        // A notification or an answer needs no answer back: any 2xx will do.
        _ if post.id.is_none() && !post.initialize => {}
        _ if status == 202 => {
            let detail = "HTTP 202 Accepted, with no answer to the request".to_owned();
            report(failure(&post, detail, false)).await;
        }
        _ => {
            let detail = response.describe().await;
            report(failure(&post, detail, false)).await;
        }
    }
}

fn too_large(post: &Post, size: usize, limit: usize) -> Option<Inbound> {
    let error = RequestError::ResponseTooLarge { size, limit };
    if post.initialize {
        let reason = format!("POST {}: initialize failed: {error}", post.url);
        return Some(Inbound::Fatal {
            error: None,
            reason,
        });
    }
    Some(Inbound::Failed {
        id: post.id?,
        error,
    })
}

/// How an event stream stopped.
pub(super) enum StreamEnd {
    /// It ended or broke; the text says which.
    Ended(String),
    /// An event over the limit: `size` is what had come of it.
    TooLarge { size: usize },
}

/// Feeds each `message` event's data to the driver until the stream ends.
pub(super) async fn relay_events(
    response: &mut Response,
    decoder: &mut SseDecoder,
    inbox: &Sender<Inbound>,
) -> StreamEnd {
    // Bytes since the last whole event: the size of the one being cut off, near enough.
    let mut since_event = 0;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return StreamEnd::Ended("the event stream ended".to_owned()),
            Err(detail) => {
                return StreamEnd::Ended(format!("the event stream broke off: {detail}"));
            }
        };
        since_event += chunk.len();
        decoder.push(&chunk);
        while let Some(event) = decoder.next_event() {
            match event {
                Ok(event) => {
                    since_event = 0;
                    if event.event == "message" && !event.data.is_empty() {
                        let message = Inbound::Message(event.data.into_bytes());
                        if inbox.send(message).await.is_err() {
                            return StreamEnd::Ended("the connection is closing".to_owned());
                        }
                    }
                }
                Err(_) => return StreamEnd::TooLarge { size: since_event },
            }
        }
    }
}

/// A GET for an event stream: the headers to send and where.
#[derive(Debug, Clone)]
pub(super) struct Listen {
    pub(super) url: Url,
    pub(super) headers: Vec<(String, String)>,
    pub(super) last_event_id: Option<String>,
    /// How long to wait before the first GET.
    pub(super) delay: Duration,
}

impl Listen {
    fn request(&self) -> Outgoing {
        let mut headers = self.headers.clone();
        headers.push(("Accept".to_owned(), "text/event-stream".to_owned()));
        if let Some(id) = &self.last_event_id {
            headers.push(("Last-Event-ID".to_owned(), id.clone()));
        }
        Outgoing {
            method: Method::GET,
            url: self.url.clone(),
            headers,
            body: Bytes::new(),
        }
    }
}

/// Resumes the event stream that was answering request `id`, with `Last-Event-ID`.
pub(super) async fn resume(
    endpoint: Arc<Endpoint>,
    listen: Listen,
    id: RequestId,
    inbox: Sender<Inbound>,
) {
    async_io::Timer::after(listen.delay).await;
    let url = listen.url.clone();
    let failed = |detail: String| Inbound::Failed {
        id,
        error: RequestError::Transport(format!(
            "GET {url} (resuming the answer's event stream): {detail}"
        )),
    };
    let message = match endpoint.send(listen.request()).await {
        Err(Refusal::Unauthorized(error)) => Inbound::Unauthorized {
            id: Some(id),
            initialize: false,
            error,
        },
        Err(Refusal::Unreachable(detail)) => failed(detail),
        Ok(mut response)
            if response.status.is_success()
                && response.media_type().as_deref() == Some("text/event-stream") =>
        {
            let mut decoder = SseDecoder::new(endpoint.limit);
            match relay_events(&mut response, &mut decoder, &inbox).await {
                StreamEnd::TooLarge { size } => Inbound::Failed {
                    id,
                    error: RequestError::ResponseTooLarge {
                        size,
                        limit: endpoint.limit,
                    },
                },
                StreamEnd::Ended(why) => Inbound::StreamEnded {
                    id,
                    last_event_id: decoder
                        .last_event_id()
                        .map(str::to_owned)
                        .or(listen.last_event_id),
                    retry: decoder.retry(),
                    why: format!("GET {url}: {why}"),
                },
            }
        }
        Ok(mut response) => failed(response.describe().await),
    };
    let _ = inbox.send(message).await;
}

/// How many GETs for server messages may fail in a row before the driver stops asking.
const LISTEN_FAILURES: u32 = 3;

/// The server's own stream (Streamable HTTP's GET): server requests and notifications that
/// belong to no request. 405 means the server offers none, which is fine. Reconnects after
/// the server's `retry` when the stream ends.
pub(super) async fn listen(endpoint: Arc<Endpoint>, mut listen: Listen, inbox: Sender<Inbound>) {
    let mut failures = 0;
    loop {
        async_io::Timer::after(listen.delay).await;
        listen.delay = DEFAULT_RETRY;
        let Ok(mut response) = endpoint.send(listen.request()).await else {
            return;
        };
        if response.status.as_u16() == 405 || response.status.as_u16() == 404 {
            return;
        }
        if response.status.is_success()
            && response.media_type().as_deref() == Some("text/event-stream")
        {
            let opened = std::time::Instant::now();
            let mut decoder = SseDecoder::new(endpoint.limit);
            let end = relay_events(&mut response, &mut decoder, &inbox).await;
            if inbox.is_closed() || matches!(end, StreamEnd::TooLarge { .. }) {
                return;
            }
            if let Some(id) = decoder.last_event_id() {
                listen.last_event_id = Some(id.to_owned());
            }
            if let Some(retry) = decoder.retry() {
                listen.delay = retry;
            }
            // A stream that ends as soon as it opens counts as a failure, so a server that
            // does that is not asked again every second for ever.
            if opened.elapsed() >= SHORT_STREAM {
                failures = 0;
                continue;
            }
        }
        failures += 1;
        if failures >= LISTEN_FAILURES {
            return;
        }
    }
}

/// A server stream shorter than this does not reset the count of failures.
const SHORT_STREAM: Duration = Duration::from_secs(1);

/// How long to wait before reconnecting when the server gave no `retry`.
pub(super) const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// HTTP+SSE: the one event stream everything arrives on. Its `endpoint` event says where to
/// POST; its `message` events are the server's messages.
pub(super) async fn legacy_stream(endpoint: Arc<Endpoint>, listen: Listen, inbox: Sender<Inbound>) {
    let url = listen.url.clone();
    let ended = |detail: String| Inbound::LegacyEnded(format!("GET {url} (HTTP+SSE): {detail}"));
    let mut response = match endpoint.send(listen.request()).await {
        Ok(response) => response,
        Err(Refusal::Unauthorized(error)) => {
            let message = Inbound::Unauthorized {
                id: None,
                initialize: true,
                error,
            };
            let _ = inbox.send(message).await;
            return;
        }
        Err(Refusal::Unreachable(detail)) => {
            let _ = inbox.send(ended(detail)).await;
            return;
        }
    };
    if !response.status.is_success()
        || response.media_type().as_deref() != Some("text/event-stream")
    {
        let detail = response.describe().await;
        let _ = inbox.send(ended(detail)).await;
        return;
    }
    let base = response.url.clone();
    let mut decoder = SseDecoder::new(endpoint.limit);
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                let _ = inbox.send(ended("the event stream ended".to_owned())).await;
                return;
            }
            Err(detail) => {
                let _ = inbox
                    .send(ended(format!("the event stream broke off: {detail}")))
                    .await;
                return;
            }
        };
        decoder.push(&chunk);
        while let Some(event) = decoder.next_event() {
            let message = match event {
                Ok(event) if event.event == "endpoint" => match base.join(event.data.trim()) {
                    Ok(target) if target.origin() == base.origin() => Inbound::Endpoint(target),
                    Ok(target) => ended(format!(
                        "the endpoint {target} is on another origin; refused"
                    )),
                    Err(error) => ended(format!("unreadable endpoint {:?}: {error}", event.data)),
                },
                Ok(event) if event.event == "message" && !event.data.is_empty() => {
                    Inbound::Message(event.data.into_bytes())
                }
                Ok(_) => continue,
                Err(too_long) => ended(format!("{too_long}")),
            };
            let over = matches!(message, Inbound::LegacyEnded(_));
            if inbox.send(message).await.is_err() || over {
                return;
            }
        }
    }
}

/// Ends the session on close: `DELETE` with its id. 405 (not allowed) and failures are fine.
pub(super) async fn delete_session(endpoint: &Endpoint, headers: Vec<(String, String)>) {
    let request = Outgoing {
        method: Method::DELETE,
        url: endpoint.url.clone(),
        headers,
        body: Bytes::new(),
    };
    let _ = endpoint.send(request).await;
}
