//! The event streams of an HTTP connection: an answer's stream resumed from its last event,
//! the server's own stream (opened, ended, opened again), and HTTP+SSE's one stream.

use std::time::{Duration, Instant};

use super::{
    Affected, DEFAULT_RETRY, Exchange, ExchangeId, Get, HttpConnection, LISTEN_FAILURES, Listener,
    MAX_RESUMES, Mode, Purpose, Reply, SHORT_STREAM,
};
use crate::model::error::{CloseReason, RequestError};
use crate::model::request::RequestId;
use crate::wire::sse::SseTooLong;

impl HttpConnection {
    /// An event stream that was to carry request `id`'s answer ended. Resume it with
    /// `Last-Event-ID` after the server's `retry` if the answer has not come, or fail the
    /// request at once if the stream gave nothing to resume from.
    pub(super) fn stream_ended(
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
        if self.stateless() {
            // Streams are not resumable in this era; sending the request again is the
            // caller's choice (`subscriptions/listen` is listened to again by its host).
            let error = RequestError::Transport(format!("{why} before the answer"));
            self.connection.fail_request(now, id, error);
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
        let purpose = Purpose::Resume {
            request: id,
            from: last_event_id.clone(),
        };
        let exchange = self.get(purpose, last_event_id, delay);
        if let Some(old) = self.by_request.insert(id, exchange) {
            self.stop_exchange(old);
        }
    }

    pub(super) fn resume_reply(
        &mut self,
        now: Instant,
        exchange: ExchangeId,
        id: RequestId,
        from: Option<String>,
        reply: Reply,
    ) -> Affected {
        let failed = |detail: String| {
            let url = &self.url;
            RequestError::Transport(format!(
                "GET {url} (resuming the answer's event stream): {detail}"
            ))
        };
        let error = match reply {
            Reply::Unauthorized(why) => {
                let error = RequestError::Transport(why);
                self.connection.fail_request(now, id, error);
                return Affected::Request(id);
            }
            Reply::Unreachable(detail)
            | Reply::Failed(detail)
            | Reply::BodyEnded(detail)
            | Reply::Refused { detail, .. } => failed(detail),
            Reply::TooLarge { size } => {
                let limit = self.connection.config().max_line_len;
                RequestError::ResponseTooLarge { size, limit }
            }
            // Taken by `handle_reply`.
            Reply::Message(_) | Reply::Part(_) | Reply::PartsDropped => return Affected::Nothing,
            Reply::StreamEnded {
                why,
                last_event_id,
                retry,
            } => {
                let why = format!("GET {}: {why}", self.url);
                self.stream_ended(now, id, last_event_id.or(from), retry, why);
                return Affected::Nothing;
            }
            Reply::Head { .. } | Reply::Endpoint(_) => return Affected::Nothing,
            Reply::Done => {
                self.exchanges.remove(&exchange);
                return Affected::Nothing;
            }
        };
        self.connection.fail_request(now, id, error);
        Affected::Nothing
    }

    /// The server's own stream: 404 or 405 (or any failure to reach it) means the server
    /// offers none, which is fine; when it ends, it is opened again after the server's
    /// `retry`, from its last event, unless it failed [`LISTEN_FAILURES`] times in a row.
    pub(super) fn listen_reply(&mut self, now: Instant, exchange: ExchangeId, reply: Reply) {
        let Some(listener) = self.listener.as_mut() else {
            return;
        };
        match reply {
            Reply::Unreachable(_) | Reply::Unauthorized(_) | Reply::TooLarge { .. } => {
                listener.stopped = true;
            }
            Reply::Refused {
                status: 404 | 405, ..
            } => listener.stopped = true,
            Reply::Refused { .. } | Reply::Failed(_) | Reply::BodyEnded(_) => {
                listener.failures += 1;
            }
            Reply::Head { .. } => listener.opened = Some(now),
            Reply::StreamEnded {
                last_event_id,
                retry,
                ..
            } => {
                if last_event_id.is_some() {
                    listener.last_event_id = last_event_id;
                }
                if let Some(retry) = retry {
                    listener.delay = retry;
                }
                let opened = listener.opened.take();
                if opened.is_some_and(|opened| now.duration_since(opened) >= SHORT_STREAM) {
                    listener.failures = 0;
                } else {
                    listener.failures += 1;
                }
            }
            // Messages are taken by `handle_reply`.
            Reply::Message(_) | Reply::Part(_) | Reply::PartsDropped | Reply::Endpoint(_) => {}
            Reply::Done => {
                self.exchanges.remove(&exchange);
                listener.exchange = None;
                if listener.failures >= LISTEN_FAILURES {
                    listener.stopped = true;
                }
                if listener.stopped {
                    return;
                }
                let (from, delay) = (listener.last_event_id.clone(), listener.delay);
                listener.delay = DEFAULT_RETRY;
                let exchange = self.get(Purpose::Listen, from, delay);
                if let Some(listener) = self.listener.as_mut() {
                    listener.exchange = Some(exchange);
                }
            }
        }
    }

    /// HTTP+SSE's stream: its end, however it comes, ends the connection.
    pub(super) fn legacy_reply(&mut self, reply: Reply) -> Affected {
        let detail = match reply {
            Reply::Unauthorized(why) => {
                self.connection.fail(CloseReason::Transport(why));
                return Affected::Connection;
            }
            Reply::Endpoint(url) => {
                if let Mode::Legacy { endpoint, queued } = &mut self.mode {
                    *endpoint = Some(url);
                    for (message, sent) in std::mem::take(queued) {
                        self.transmit(message, sent);
                    }
                }
                return Affected::Nothing;
            }
            // Taken by `handle_reply`.
            Reply::Message(_) | Reply::Part(_) | Reply::PartsDropped => return Affected::Nothing,
            Reply::Unreachable(detail)
            | Reply::Failed(detail)
            | Reply::BodyEnded(detail)
            | Reply::Refused { detail, .. }
            | Reply::StreamEnded { why: detail, .. } => detail,
            Reply::TooLarge { .. } => {
                let limit = self.connection.config().max_line_len;
                SseTooLong { limit }.to_string()
            }
            Reply::Head { .. } | Reply::Done => return Affected::Nothing,
        };
        let detail = format!("GET {} (HTTP+SSE): {detail}", self.url);
        let reason = match self.fell_back.take() {
            Some(why) => format!("{why}; and as an HTTP+SSE server: {detail}"),
            None => detail,
        };
        self.connection.fail(CloseReason::Transport(reason));
        Affected::Nothing
    }

    /// Opens the GET stream for the server's own messages, once the session is ready, the
    /// `initialize` exchange is over (a stream that answered it resumes here) and so is
    /// `notifications/initialized`. The stateless era has no such stream.
    pub(super) fn open_listener(&mut self) {
        if matches!(self.mode, Mode::Legacy { .. })
            || self.stateless()
            || self.listener.is_some()
            || self.gate.is_some()
            || self.connection.server_info().is_none()
            || self.initialize.is_some()
        {
            return;
        }
        let (from, delay) = self.listen_from.take().unwrap_or((None, Duration::ZERO));
        let exchange = self.get(Purpose::Listen, from.clone(), delay);
        // A reconnection resumes from there too, until the stream gives an id of its own.
        self.listener = Some(Listener {
            exchange: Some(exchange),
            last_event_id: from,
            delay: DEFAULT_RETRY,
            ..Listener::default()
        });
    }

    pub(super) fn open_legacy_stream(&mut self) {
        let id = self.next_id();
        let headers = vec![("Accept".to_owned(), "text/event-stream".to_owned())];
        self.outgoing.push_back(Exchange::Get(Get {
            id,
            url: self.url.clone(),
            headers,
            delay: Duration::ZERO,
            legacy: true,
        }));
        self.exchanges.insert(id, Purpose::LegacyStream);
    }

    /// Queues a GET of the configured URL's event stream, from `last_event_id` if any.
    pub(super) fn get(
        &mut self,
        purpose: Purpose,
        last_event_id: Option<String>,
        delay: Duration,
    ) -> ExchangeId {
        let id = self.next_id();
        let mut headers = self.headers();
        headers.push(("Accept".to_owned(), "text/event-stream".to_owned()));
        if let Some(last) = last_event_id {
            headers.push(("Last-Event-ID".to_owned(), last));
        }
        self.outgoing.push_back(Exchange::Get(Get {
            id,
            url: self.url.clone(),
            headers,
            delay,
            legacy: false,
        }));
        self.exchanges.insert(id, purpose);
        id
    }
}
