//! The HTTP exchanges a connection runs side by side: each performs one POST or GET the core
//! asked for ([`proto::http::Exchange`]), and reports what came back as plain facts
//! ([`proto::http::Reply`]) to the driver's inbox, in order. What those facts mean is the core's
//! business ([`proto::http::HttpConnection`]); nothing here looks inside a message.

use std::sync::Arc;
use std::time::Duration;

use async_channel::Sender;
use hyper::Method;
use hyper::body::Bytes;
use proto::http::{Answer, ExchangeId, Get, PIECES_FROM, Post, Reply, SseDecoder, SsePiece};
use url::Url;

use super::wire::{self, Outgoing, Pool, Response};
use super::{Authorizer, Challenge, Outbound};
use crate::Error;

/// What an exchange tells the driver.
#[derive(Debug)]
pub(super) enum Report {
    /// A fact for the core.
    Reply(ExchangeId, Reply),
    /// 401 or 403 that the authorizer could not fix, with the error the caller hears.
    Unauthorized(ExchangeId, Error),
    /// No HTTP answer at all from `url`: the sentence without the method and URL.
    Unreachable {
        exchange: ExchangeId,
        url: String,
        detail: String,
    },
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
    /// The static headers, then the protocol's.
    fn headers_with(&self, protocol: Vec<(String, String)>) -> Vec<(String, String)> {
        let mut headers = self.headers.clone();
        headers.extend(protocol);
        headers
    }

    /// Sends with the authorizer's headers, follows redirects, and gives a 401 (or a 403 for
    /// scope) one more try if the authorizer says it has fixed it: once per status, so a
    /// request that needs a login and then more scope still goes through, and once more for
    /// a 401 that only hands out a DPoP nonce.
    pub(super) async fn send(&self, request: Outgoing) -> Result<Response, Refusal> {
        let mut retried: Vec<(u16, bool)> = Vec::new();
        loop {
            // Copied only to carry the authorizer's headers.
            let mut authorized = None;
            if let Some(authorizer) = &self.authorizer {
                let outbound = Outbound {
                    method: request.method.as_str(),
                    url: request.url.as_str(),
                    body: &request.body,
                };
                match authorizer.authorization(outbound).await {
                    Ok(headers) if headers.is_empty() => {}
                    Ok(headers) => {
                        let mut attempt = request.clone();
                        (attempt.headers).retain(|(name, _)| {
                            !headers
                                .iter()
                                .any(|(ours, _)| ours.eq_ignore_ascii_case(name))
                        });
                        attempt.headers.extend(headers);
                        authorized = Some(attempt);
                    }
                    Err(error) => {
                        return Err(Refusal::Unreachable(format!("no authorization: {error}")));
                    }
                }
            }
            let attempt = authorized.as_ref().unwrap_or(&request);
            let response = wire::send_following(attempt, self.connect_timeout, Some(&self.pool))
                .await
                .map_err(Refusal::Unreachable)?;
            let status = response.status.as_u16();
            let dpop_nonce = response.header("dpop-nonce").map(str::to_owned);
            if let (Some(authorizer), Some(nonce)) = (&self.authorizer, &dpop_nonce) {
                authorizer.nonce(request.url.as_str(), nonce);
            }
            if status != 401 && status != 403 {
                return Ok(response);
            }
            let www_authenticate = response.header("www-authenticate").map(str::to_owned);
            let wants_nonce = status == 401
                && dpop_nonce.is_some()
                && (www_authenticate.as_deref())
                    .is_some_and(|value| value.contains("use_dpop_nonce"));
            let challenge = Challenge {
                url: self.url.to_string(),
                status,
                www_authenticate,
                dpop_nonce,
            };
            let may_fix = status == 401
                || (challenge.www_authenticate.as_deref())
                    .is_some_and(|value| value.contains("insufficient_scope"));
            if !retried.contains(&(status, wants_nonce))
                && may_fix
                && let Some(authorizer) = &self.authorizer
            {
                match authorizer.challenged(&challenge).await {
                    Ok(true) => {
                        retried.push((status, wants_nonce));
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

/// The most of an HTTP+SSE POST's own answer (an acknowledgement) that is read.
const LEGACY_ACK_LIMIT: usize = 64 * 1024;

/// Sends the reports of one exchange, in order.
struct Reporter {
    exchange: ExchangeId,
    inbox: Sender<Report>,
}

impl Reporter {
    /// Whether the driver still listens.
    async fn reply(&self, reply: Reply) -> bool {
        let report = Report::Reply(self.exchange, reply);
        self.inbox.send(report).await.is_ok()
    }

    /// How sending went wrong, when no HTTP answer came.
    async fn refusal(&self, url: &Url, refusal: Refusal) {
        let report = match refusal {
            Refusal::Unauthorized(error) => Report::Unauthorized(self.exchange, error),
            Refusal::Unreachable(detail) => Report::Unreachable {
                exchange: self.exchange,
                url: url.to_string(),
                detail,
            },
        };
        let _ = self.inbox.send(report).await;
    }

    /// A status other than 2xx: its status and the start of its body.
    async fn refused(&self, response: &mut Response) {
        let body = response.body_start().await;
        let detail = response.refusal(&body);
        let status = response.status.as_u16();
        self.reply(Reply::Refused {
            status,
            body,
            detail,
        })
        .await;
    }
}

/// POSTs one message and relays what comes back.
pub(super) async fn post(endpoint: Arc<Endpoint>, url: Url, post: Post, inbox: Sender<Report>) {
    let reporter = Reporter {
        exchange: post.id,
        inbox,
    };
    let request = Outgoing {
        method: Method::POST,
        url: url.clone(),
        headers: endpoint.headers_with(post.headers),
        body: Bytes::from(post.body),
    };
    let mut response = match endpoint.send(request).await {
        Ok(response) => response,
        Err(refusal) => return reporter.refusal(&url, refusal).await,
    };
    if !response.status.is_success() {
        return reporter.refused(&mut response).await;
    }
    let session = response.header("mcp-session-id").map(str::to_owned);
    reporter.reply(Reply::Head { session }).await;
    if post.answer == Answer::OnTheStream {
        // Reading this short body to its end lets the connection be reused.
        let _ = response.read_body(LEGACY_ACK_LIMIT).await;
        return;
    }
    let media = response.media_type();
    let reply = match media.as_deref() {
        Some("application/json") => {
            match relay_body(&mut response, endpoint.limit, &reporter, post.answer).await {
                Some(reply) => reply,
                None => return,
            }
        }
        Some("text/event-stream") => relay_events(&mut response, &endpoint, &reporter).await,
        _ if post.answer == Answer::None => return,
        _ if response.status.as_u16() == 202 => {
            Reply::Failed("HTTP 202 Accepted, with no answer to the request".to_owned())
        }
        _ => Reply::Failed(response.describe().await),
    };
    reporter.reply(reply).await;
}

/// The most of a large body or event that goes in one [`Reply::Part`]: the driver's inbox
/// holds a few dozen replies, so while the core parses, little waits there.
const PIECE: usize = 64 * 1024;

/// Relays a JSON body as it arrives: whole when it is short; in pieces once past
/// [`PIECES_FROM`], so that a large one is never held here. Returns how it ended, or `None`
/// when there is nothing more to say (an empty body where no answer was due, or the driver
/// gone).
async fn relay_body(
    response: &mut Response,
    limit: usize,
    reporter: &Reporter,
    answer: Answer,
) -> Option<Reply> {
    if let Some(size) = response.content_length()
        && size > limit
    {
        return Some(Reply::TooLarge { size });
    }
    let announced = response.content_length().unwrap_or(0);
    let mut held = Vec::with_capacity(announced.min(PIECES_FROM + PIECE));
    // The body's start, one byte past what is quoted so that a quote says it was cut.
    let mut start = Vec::new();
    let (mut size, mut in_pieces) = (0, false);
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(detail) => return Some(Reply::Failed(format!("the answer broke off: {detail}"))),
        };
        size += chunk.len();
        if size > limit {
            return Some(Reply::TooLarge { size });
        }
        let room = (wire::SNIPPET_LEN + 1).saturating_sub(start.len());
        start.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if in_pieces {
            for piece in chunk.chunks(PIECE) {
                if !reporter.reply(Reply::Part(piece.to_vec())).await {
                    return None;
                }
            }
            continue;
        }
        held.extend_from_slice(&chunk);
        if held.len() > PIECES_FROM {
            in_pieces = true;
            if !reporter.reply(Reply::Part(std::mem::take(&mut held))).await {
                return None;
            }
        }
    }
    if !in_pieces && answer == Answer::None && held.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let detail = format!(
        "{} with a JSON body that does not answer the request: {}",
        response.status_line(),
        wire::quote(&start)
    );
    reporter.reply(Reply::Message(held)).await;
    Some(Reply::BodyEnded(detail))
}

/// GETs an event stream (an answer's, resumed, or the server's own) and relays its events.
pub(super) async fn get(endpoint: Arc<Endpoint>, url: Url, get: Get, inbox: Sender<Report>) {
    async_io::Timer::after(get.delay).await;
    let reporter = Reporter {
        exchange: get.id,
        inbox,
    };
    let request = Outgoing {
        method: Method::GET,
        url: url.clone(),
        headers: endpoint.headers_with(get.headers),
        body: Bytes::new(),
    };
    let mut response = match endpoint.send(request).await {
        Ok(response) => response,
        Err(refusal) => return reporter.refusal(&url, refusal).await,
    };
    if !response.status.is_success() {
        return reporter.refused(&mut response).await;
    }
    if response.media_type().as_deref() != Some("text/event-stream") {
        let detail = response.describe().await;
        reporter.reply(Reply::Failed(detail)).await;
        return;
    }
    reporter.reply(Reply::Head { session: None }).await;
    let reply = if get.legacy {
        legacy_events(&mut response, &endpoint, &reporter).await
    } else {
        relay_events(&mut response, &endpoint, &reporter).await
    };
    reporter.reply(reply).await;
}

/// Relays each `message` event's data until the stream ends (a large one in pieces, as it
/// arrives); returns how it ended.
async fn relay_events(response: &mut Response, endpoint: &Endpoint, reporter: &Reporter) -> Reply {
    let mut decoder = SseDecoder::new(endpoint.limit).stream_from(PIECES_FROM);
    // Bytes since the last whole event: the size of the one being cut off, near enough.
    let mut since_event = 0;
    // Pieces of the current event's data have gone.
    let mut in_pieces = false;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return stream_ended(&decoder, "the event stream ended".to_owned()),
            Err(detail) => {
                let why = format!("the event stream broke off: {detail}");
                return stream_ended(&decoder, why);
            }
        };
        for slice in chunk.chunks(PIECE) {
            since_event += slice.len();
            decoder.push(slice);
            while let Some(piece) = decoder.next_piece() {
                let reply = match piece {
                    SsePiece::Data(data) => {
                        in_pieces = true;
                        Reply::Part(data)
                    }
                    SsePiece::Event(event) => {
                        since_event = 0;
                        match (event.event == "message", std::mem::take(&mut in_pieces)) {
                            (true, true) => Reply::Message(Vec::new()),
                            (true, false) if !event.data.is_empty() => {
                                Reply::Message(event.data.into_bytes())
                            }
                            (false, true) => Reply::PartsDropped,
                            _ => continue,
                        }
                    }
                    SsePiece::TooLong(_) => return Reply::TooLarge { size: since_event },
                };
                if !reporter.reply(reply).await {
                    return stream_ended(&decoder, "the connection is closing".to_owned());
                }
            }
        }
    }
}

fn stream_ended(decoder: &SseDecoder, why: String) -> Reply {
    Reply::StreamEnded {
        why,
        last_event_id: decoder.last_event_id().map(str::to_owned),
        retry: decoder.retry(),
    }
}

/// HTTP+SSE's one stream: its `endpoint` event says where to POST (on the stream's origin
/// only); its `message` events are the server's messages (a large one in pieces).
async fn legacy_events(response: &mut Response, endpoint: &Endpoint, reporter: &Reporter) -> Reply {
    let base = response.url.clone();
    let mut decoder = SseDecoder::new(endpoint.limit).stream_from(PIECES_FROM);
    let mut in_pieces = false;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return stream_ended(&decoder, "the event stream ended".to_owned()),
            Err(detail) => {
                let why = format!("the event stream broke off: {detail}");
                return stream_ended(&decoder, why);
            }
        };
        for slice in chunk.chunks(PIECE) {
            decoder.push(slice);
            while let Some(piece) = decoder.next_piece() {
                let event = match piece {
                    SsePiece::Data(data) => {
                        in_pieces = true;
                        if !reporter.reply(Reply::Part(data)).await {
                            return stream_ended(&decoder, "the connection is closing".to_owned());
                        }
                        continue;
                    }
                    SsePiece::Event(event) => event,
                    SsePiece::TooLong(too_long) => {
                        return stream_ended(&decoder, too_long.to_string());
                    }
                };
                let reply = match (event.event.as_str(), std::mem::take(&mut in_pieces)) {
                    ("message", true) => Reply::Message(Vec::new()),
                    ("message", false) if !event.data.is_empty() => {
                        Reply::Message(event.data.into_bytes())
                    }
                    ("endpoint", true) => {
                        let why = format!("an endpoint event of over {PIECES_FROM} bytes; refused");
                        return stream_ended(&decoder, why);
                    }
                    ("endpoint", false) => match base.join(event.data.trim()) {
                        Ok(target) if target.origin() == base.origin() => {
                            Reply::Endpoint(target.to_string())
                        }
                        Ok(target) => {
                            let why =
                                format!("the endpoint {target} is on another origin; refused");
                            return stream_ended(&decoder, why);
                        }
                        Err(error) => {
                            let why = format!("unreadable endpoint {:?}: {error}", event.data);
                            return stream_ended(&decoder, why);
                        }
                    },
                    (_, true) => Reply::PartsDropped,
                    _ => continue,
                };
                if !reporter.reply(reply).await {
                    return stream_ended(&decoder, "the connection is closing".to_owned());
                }
            }
        }
    }
}

/// Ends the session on close: `DELETE` with its headers. 405 (not allowed) and failures are fine.
pub(super) async fn delete_session(endpoint: &Endpoint, headers: Vec<(String, String)>) {
    let request = Outgoing {
        method: Method::DELETE,
        url: endpoint.url.clone(),
        headers: endpoint.headers_with(headers),
        body: Bytes::new(),
    };
    let _ = endpoint.send(request).await;
}
