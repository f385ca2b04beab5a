//! Remote servers over HTTP: the Streamable HTTP transport (2025-03-26 onwards) and the older
//! HTTP+SSE transport (2024-11-05), with hyper for HTTP/1.1 and rustls for TLS.
//!
//! [`start`](crate::start) with a [`Transport::Http`](crate::Transport) returns the same
//! [`Client`] and [`Driver`] as over stdio; the driver owns the connection and every HTTP exchange in flight (on an executor of its own,
//! so it runs under any executor), and when it ends no socket is left open.
//!
//! The transport's rules are the core's ([`proto::http::HttpConnection`]): `streamable.rs` is the
//! link the driver's one loop ([`crate::driver`]) runs over, as it runs over a byte stream;
//! `exchanges.rs` performs each POST and GET it asks for and reports
//! what came back as plain facts, and `wire.rs` is one HTTP/1.1 exchange with hyper
//! (connecting, TLS, the pool of kept-alive connections, redirects).
//!
//! How it behaves:
//! - Each message is one POST; POSTs run side by side, except that nothing overtakes
//!   `notifications/initialized`. An answer is a JSON body or an event stream whose events
//!   (progress, server requests, then the answer) are handled as they arrive. Connections
//!   are kept alive and reused.
//! - [`Options::core`](crate::Options)'s `max_line_len` bounds each body and each event: a
//!   larger answer fails its request at once with `ResponseTooLarge`. A body or an event's
//!   data over 1 MiB ([`proto::http::PIECES_FROM`]) goes to the core in pieces as it arrives and is
//!   parsed as they come, never held whole beside the value it becomes. The core's deadlines
//!   apply as over stdio; its `handshake_timeout` also bounds connecting (TCP and TLS).
//! - A failed exchange (a 4xx or 5xx, an HTML page, another content type, a body that
//!   answers nothing, a stream cut with nothing to resume from) fails its request with
//!   `RequestError::Transport`, a sentence naming the method, URL, status and the start of
//!   the body (200 bytes at most, on one line); on `initialize` it ends the connection with
//!   `CloseReason::Transport`, or [`Error::Http`] when no HTTP answer came at all (DNS,
//!   refused, TLS, redirect loop).
//! - An event stream cut before its answer is resumed with `Last-Event-ID` after the
//!   server's `retry` (1 s without one), at most 5 times in a row without a new event. A GET stream carries the server's
//!   own messages where the server offers one. A 404 on the session, or a 400 whose body
//!   names the session ([`proto::http::session_lost`]), starts a new session and sends the refused
//!   request again, once, after the new session's `notifications/initialized`; a new session
//!   refused before it answered anything ends the connection. Closing sends `DELETE` for the session, waiting at
//!   most [`Options::grace_period`](crate::Options) for it.
//! - Redirects (301, 302, 303, 307, 308) are followed up to 5 hops; `Authorization` is not
//!   carried to another origin.
//! - 401 (or 403 with `insufficient_scope`) is put to the [`Authorizer`], and the request
//!   sent once more if it says so; otherwise the caller gets [`Error::Unauthorized`].
//!
//! What lives here:
//!
//! - `mod.rs`: `HttpServer`, the `Authorizer` trait and its `Challenge`
//! - `streamable.rs`: the HTTP link: the core's `HttpConnection` and its exchanges
//! - `exchanges.rs`: each POST and GET the core asks for, and what came back
//! - `wire.rs`: one HTTP/1.1 exchange with hyper: connecting, the pool, redirects
//! - `io.rs`: a socket as hyper reads and writes it
//! - `tls.rs`: rustls with ring and the system's roots
//! - `fetch.rs`: the plain exchanges an `Authorizer` makes of its own

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::Options;
use crate::driver::{Driver, Op, Shared};

mod exchanges;
mod fetch;
mod io;
mod streamable;
mod tls;
mod wire;

pub use fetch::{Request, Response, send, send_up_to};
pub use io::{HyperIo, ReadWhenReady};
pub use proto::http::HttpTransport;

/// A remote server: where it is and how to speak to it.
#[derive(Clone, Debug)]
pub struct HttpServer {
    /// The MCP endpoint (Streamable HTTP) or the event stream (HTTP+SSE): `http://` or
    /// `https://`.
    pub url: String,
    /// Static headers sent on every request.
    pub headers: Vec<(String, String)>,
    /// Which transport to speak.
    pub transport: HttpTransport,
    /// Supplies `Authorization` and answers 401 and 403; `None` sends none.
    pub authorizer: Option<Arc<dyn Authorizer>>,
}

impl HttpServer {
    /// A server at `url`, with the transport chosen by the specification's fallback rule.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            transport: HttpTransport::Auto,
            authorizer: None,
        }
    }
}

/// Supplies the `Authorization` header (and, for tokens bound to a key, the `DPoP` proof
/// beside it) and reacts to 401 and 403. Implemented by the host (OAuth); the adapter never
/// stores tokens. The exchanges it makes of its own (metadata, registration, tokens) go
/// through [`authorize::send`](crate::authorize::send), with the transport's TLS setup.
///
/// Its methods return boxed futures (`Pin<Box<dyn Future + Send>>`), so the trait stays
/// object safe: write them as `Box::pin(async move { ... })`.
pub trait Authorizer: Send + Sync + fmt::Debug {
    /// The headers that authorize `request` (e.g. `Authorization: Bearer abc`), refreshing
    /// first if it knows the token has expired; none sends none. A proof of possession signs
    /// the request's method, URL and body, so it is asked for each request anew.
    // Spelt out, as `challenged` is, so an implementor sees the whole type it writes.
    #[allow(clippy::type_complexity)]
    fn authorization<'a>(
        &'a self,
        request: Outbound<'a>,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<(String, String)>, String>> + Send + 'a>>;

    /// The server answered 401, or 403 with `insufficient_scope`. Return `Ok(true)` when a
    /// new authorization was obtained and the request should be sent once more; `Ok(false)`
    /// to give up (the request or the connection then fails with [`Error::Unauthorized`](crate::Error::Unauthorized)).
    /// A 401 that hands out a DPoP nonce (RFC 9449 §9) gets one try of its own beside that.
    fn challenged<'a>(
        &'a self,
        challenge: &'a Challenge,
    ) -> Pin<Box<dyn Future<Output = Result<bool, String>> + Send + 'a>>;

    /// An answer of any status carried `DPoP-Nonce` (RFC 9449 §8.2): the nonce the server
    /// wants in the next proof. Ignored unless the authorizer makes proofs.
    fn nonce(&self, _url: &str, _nonce: &str) {}
}

/// The request an [`Authorizer`] authorizes: what a DPoP proof signs.
#[derive(Clone, Copy, Debug)]
pub struct Outbound<'a> {
    /// `POST`, `GET` or `DELETE`.
    pub method: &'a str,
    /// The URL it goes to.
    pub url: &'a str,
    /// Its body (empty for a GET).
    pub body: &'a [u8],
}

/// A refusal for the [`Authorizer`] to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// The MCP endpoint that refused.
    pub url: String,
    /// 401 or 403.
    pub status: u16,
    /// The `WWW-Authenticate` header as sent.
    pub www_authenticate: Option<String>,
    /// The `DPoP-Nonce` header, when the server sent one.
    pub dpop_nonce: Option<String>,
}

/// Starts a connection to a remote server: what a [`Client`](crate::Client) is made of and
/// the driver future, which [`start`](crate::start) hands a waiting caller to drive as it
/// does over stdio. Nothing is sent until the driver is polled.
pub(crate) fn start(
    server: HttpServer,
    options: &Options,
) -> (crate::queue::Sender<Op>, Arc<Shared>, Driver) {
    streamable::start(server, options)
}
