//! One HTTP/1.1 exchange with hyper over a fresh TCP or TLS connection: request out, response
//! head back, body read as it arrives (in chunks, or whole within a size limit). Redirects are followed here too.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_io::Timer;
use async_net::TcpStream;
use futures_lite::future::FutureExt;
use futures_lite::io::{AsyncRead, AsyncWrite};
use futures_rustls::TlsConnector;
use futures_rustls::rustls::pki_types::ServerName;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderName, HeaderValue, LOCATION};
use hyper::{HeaderMap, Method, StatusCode};
use url::Url;

use super::io::{HyperIo, ReadWhenReady};
use super::tls;

/// How many redirects one exchange follows before calling it a loop.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// How much of an error answer's body is quoted.
pub(crate) const SNIPPET_LEN: usize = 200;

/// How much of a refusal's body is read: enough for any JSON-RPC error (the core reads the
/// error; a message quotes its first [`SNIPPET_LEN`] bytes), never a whole web page.
const REFUSAL_LEN: usize = 64 * 1024;

/// How long an error answer's body may take to arrive.
const SNIPPET_WAIT: Duration = Duration::from_secs(2);

trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

type ConnectionTask = Pin<Box<dyn Future<Output = hyper::Result<()>> + Send>>;

/// What to send.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub(crate) method: Method,
    pub(crate) url: Url,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
}

/// A response whose head has arrived; the body is read with [`chunk`](Self::chunk).
pub(crate) struct Response {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    /// The URL that answered, after redirects.
    pub(crate) url: Url,
    body: Incoming,
    /// hyper's connection future, which must be polled for the body to move; `None` once
    /// it has finished.
    connection: Option<ConnectionTask>,
    /// Where the connection goes once the body has been read to its end.
    reuse: Option<Reuse>,
}

struct Reuse {
    pool: Arc<Pool>,
    origin: String,
    sender: SendRequest<Full<Bytes>>,
}

/// Kept-alive connections of one HTTP connection's exchanges, so that a call does not pay
/// for a TCP and TLS handshake each time. Idle ones are not polled: one the server closed
/// meanwhile is found out when it is taken.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Vec<Idle>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle.lock().map(|idle| idle.len()).unwrap_or_default();
        f.debug_struct("Pool").field("idle", &idle).finish()
    }
}

struct Idle {
    origin: String,
    sender: SendRequest<Full<Bytes>>,
    connection: ConnectionTask,
    since: Instant,
}

/// How long a connection may sit idle before it is not used again: under the 5 s after
/// which Node's HTTP servers close idle connections, so reuse rarely races their close.
const IDLE_LIMIT: Duration = Duration::from_secs(4);

/// How many idle connections are kept: at least as many as calls a client commonly has in
/// flight (32 in our benchmark), or every call past the eighth opened a new connection.
const MAX_IDLE: usize = 64;

impl Pool {
    async fn take(&self, origin: &str) -> Option<(SendRequest<Full<Bytes>>, ConnectionTask)> {
        loop {
            let mut entry = {
                let mut idle = self.idle.lock().ok()?;
                let found = idle.iter().rposition(|entry| entry.origin == origin)?;
                idle.swap_remove(found)
            };
            if entry.since.elapsed() > IDLE_LIMIT || entry.sender.is_closed() {
                continue;
            }
            // A connection the server closed while idle has finished by now.
            if futures_lite::future::poll_once(&mut entry.connection)
                .await
                .is_some()
            {
                continue;
            }
            return Some((entry.sender, entry.connection));
        }
    }

    fn put(&self, origin: String, sender: SendRequest<Full<Bytes>>, connection: ConnectionTask) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.retain(|entry| entry.since.elapsed() <= IDLE_LIMIT);
            if idle.len() < MAX_IDLE {
                let since = Instant::now();
                idle.push(Idle {
                    origin,
                    sender,
                    connection,
                    since,
                });
            }
        }
    }
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("url", &self.url.as_str())
            .finish()
    }
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Over the limit: `size` is the announced length, or what had arrived when it broke it.
    TooLarge {
        size: usize,
    },
    Failed(String),
}

impl Response {
    /// A header's value as text, if present and readable.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The media type without parameters, lower-cased: `application/json`.
    pub(crate) fn media_type(&self) -> Option<String> {
        let value = self.header(CONTENT_TYPE.as_str())?;
        let essence = value.split(';').next().unwrap_or_default();
        Some(essence.trim().to_ascii_lowercase())
    }

    /// The status as `HTTP 500 Internal Server Error`.
    pub(crate) fn status_line(&self) -> String {
        let reason = self.status.canonical_reason().unwrap_or_default();
        format!("HTTP {} {reason}", self.status.as_u16())
            .trim_end()
            .to_owned()
    }

    /// The next piece of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, String> {
        loop {
            let frame = self.body.frame().or(drive(&mut self.connection)).await;
            match frame {
                None => {
                    self.release();
                    return Ok(None);
                }
                Some(Err(error)) => return Err(describe_hyper(&error)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// Hands the connection back to the pool, the body having been read to its end, unless
    /// the server said it closes it.
    fn release(&mut self) {
        let closing =
            (self.header("connection")).is_some_and(|value| value.eq_ignore_ascii_case("close"));
        if closing {
            return;
        }
        if let (Some(reuse), Some(connection)) = (self.reuse.take(), self.connection.take()) {
            reuse.pool.put(reuse.origin, reuse.sender, connection);
        }
    }

    /// The body's length, if the head announced it.
    pub(crate) fn content_length(&self) -> Option<usize> {
        (self.header(CONTENT_LENGTH.as_str())).and_then(|length| length.trim().parse().ok())
    }

    /// The whole body, refused as soon as it is known to be over `limit` bytes.
    pub(crate) async fn read_body(&mut self, limit: usize) -> Result<Vec<u8>, BodyError> {
        let announced = self.content_length();
        if let Some(size) = announced
            && size > limit
        {
            return Err(BodyError::TooLarge { size });
        }
        let mut body = Vec::with_capacity(announced.unwrap_or(0));
        while let Some(chunk) = self.chunk().await.map_err(BodyError::Failed)? {
            if body.len() + chunk.len() > limit {
                return Err(BodyError::TooLarge {
                    size: body.len() + chunk.len(),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The start of the body (what came of its first [`REFUSAL_LEN`] bytes in a short
    /// while, in however many pieces), for a decision or an error message.
    pub(crate) async fn body_start(&mut self) -> Vec<u8> {
        let mut start = Vec::new();
        let read = async {
            while start.len() < REFUSAL_LEN {
                match self.chunk().await {
                    Ok(Some(chunk)) => start.extend_from_slice(&chunk),
                    _ => break,
                }
            }
        };
        read.or(async {
            Timer::after(SNIPPET_WAIT).await;
        })
        .await;
        start
    }

    /// Why this answer is not what was asked for: status, media type and the start of the body.
    pub(crate) async fn describe(&mut self) -> String {
        let body = self.body_start().await;
        self.refusal(&body)
    }

    /// [`describe`](Self::describe) for a body whose start is already read.
    pub(crate) fn refusal(&self, body: &[u8]) -> String {
        let mut detail = self.status_line();
        if self.status.is_success() {
            let media = self
                .media_type()
                .unwrap_or_else(|| "no content type".to_owned());
            detail = format!("{detail} with {media}, not JSON or an event stream");
        }
        match quote(body) {
            quoted if quoted.is_empty() => detail,
            quoted => format!("{detail}: {quoted}"),
        }
    }
}

/// Up to [`SNIPPET_LEN`] bytes as one line of text: runs of white space as one space (an HTML
/// page's lines and indents), other control characters escaped, `…` where it was cut.
pub(crate) fn quote(bytes: &[u8]) -> String {
    let cut = bytes.len() > SNIPPET_LEN;
    let shown = &bytes[..bytes.len().min(SNIPPET_LEN)];
    // Compact JSON, as every answer's body is quoted in case it answers nothing: printable
    // ASCII with single spaces inside is shown as it is.
    let printable = shown
        .iter()
        .all(|&byte| byte.is_ascii_graphic() || byte == b' ');
    if printable
        && !shown.starts_with(b" ")
        && !shown.ends_with(b" ")
        && !shown.windows(2).any(|pair| pair == b"  ")
    {
        let mut quoted = String::from_utf8_lossy(shown).into_owned();
        if cut {
            quoted.push('…');
        }
        return quoted;
    }
    let text = String::from_utf8_lossy(shown);
    // A character cut in two at the end is not the body's.
    let text = if cut {
        text.trim_end_matches('\u{fffd}')
    } else {
        &text
    };
    let mut quoted = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !quoted.is_empty() {
            quoted.push(' ');
        }
        for c in word.chars() {
            match c.is_control() {
                true => quoted.extend(c.escape_default()),
                false => quoted.push(c),
            }
        }
    }
    if cut {
        quoted.push('…');
    }
    quoted
}

/// Polls hyper's connection future forever (it must run for the exchange to move), dropping
/// it once it has finished.
async fn drive<T>(connection: &mut Option<ConnectionTask>) -> T {
    if let Some(task) = connection.as_mut() {
        let _ = task.await;
    }
    *connection = None;
    std::future::pending().await
}

/// Sends one request and waits for the response head: on a kept-alive connection of `pool`
/// to the same origin if there is one, else on a new connection. Errors are sentences
/// without the method and URL, which the caller puts in front.
pub(crate) async fn send(
    request: &Outgoing,
    connect_timeout: Duration,
    pool: Option<&Arc<Pool>>,
) -> Result<Response, String> {
    // The pool's key: scheme, user, host and port, as the URL writes them (without its
    // default port), cheaper per request than the origin's serialization.
    let origin = &request.url[..url::Position::BeforePath];
    if let Some(pool) = pool
        && let Some((sender, connection)) = pool.take(origin).await
    {
        // A kept-alive connection the server closed as we reused it has no answer for us:
        // the request goes once more, on a new connection.
        if let Ok(response) = exchange_on(sender, connection, request, Some((pool, origin))).await {
            return Ok(response);
        }
    }
    let (sender, connection) = connect(&request.url, connect_timeout).await?;
    exchange_on(sender, connection, request, pool.map(|pool| (pool, origin))).await
}

/// Opens a connection (TCP, then TLS for https) and runs hyper's handshake on it.
async fn connect(
    url: &Url,
    connect_timeout: Duration,
) -> Result<(SendRequest<Full<Bytes>>, ConnectionTask), String> {
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url
        .port_or_known_default()
        .ok_or("the URL has no port and its scheme none by default")?;
    let tls = match url.scheme() {
        "http" => None,
        "https" => Some(tls::client_config()?),
        other => {
            return Err(format!(
                "unsupported URL scheme {other}: (use http or https)"
            ));
        }
    };
    let timed_out = |what: &str| format!("{what} timed out after {connect_timeout:?}");
    let address = host.trim_start_matches('[').trim_end_matches(']');
    let tcp = TcpStream::connect((address, port))
        .or(async {
            Timer::after(connect_timeout).await;
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                timed_out("connecting"),
            ))
        })
        .await
        .map_err(|error| format!("cannot connect to {host}:{port}: {error}"))?;
    let _ = tcp.set_nodelay(true);
    let tcp = ReadWhenReady::new(tcp);
    let stream: Box<dyn Stream> = match tls {
        None => Box::new(tcp),
        Some(config) => {
            let name = ServerName::try_from(address.to_owned())
                .map_err(|error| format!("TLS: bad server name {address}: {error}"))?;
            let handshake = TlsConnector::from(config).connect(name, tcp);
            let stream = handshake
                .or(async {
                    Timer::after(connect_timeout).await;
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        timed_out("the TLS handshake"),
                    ))
                })
                .await
                .map_err(|error| tls::describe(&error))?;
            Box::new(stream)
        }
    };
    let (sender, connection) = hyper::client::conn::http1::handshake(HyperIo::new(stream))
        .await
        .map_err(|error| describe_hyper(&error))?;
    Ok((sender, Box::pin(connection)))
}

/// hyper's request for `request`, its head filled in place: `http`'s builder moves itself
/// (a few hundred bytes) on every header it adds.
fn build(request: &Outgoing) -> Result<hyper::Request<Full<Bytes>>, hyper::http::Error> {
    let url = &request.url;
    let mut outgoing = hyper::Request::new(Full::new(request.body.clone()));
    *outgoing.method_mut() = request.method.clone();
    *outgoing.uri_mut() = url[url::Position::BeforePath..url::Position::AfterQuery].parse()?;
    let headers = outgoing.headers_mut();
    headers.reserve(request.headers.len() + 1);
    let host = &url[url::Position::BeforeHost..url::Position::BeforePath];
    headers.insert(HOST, HeaderValue::from_str(host)?);
    for (name, value) in &request.headers {
        let name = HeaderName::from_bytes(name.as_bytes())?;
        headers.append(name, HeaderValue::from_str(value)?);
    }
    Ok(outgoing)
}

/// Sends `request` on one connection and waits for the response head; with a pool, the
/// connection goes back to it once the body has been read to its end.
async fn exchange_on(
    mut sender: SendRequest<Full<Bytes>>,
    connection: ConnectionTask,
    request: &Outgoing,
    pool: Option<(&Arc<Pool>, &str)>,
) -> Result<Response, String> {
    let url = &request.url;
    let mut connection = Some(connection);
    let outgoing = build(request).map_err(|error| format!("cannot build the request: {error}"))?;
    let send = async {
        sender.ready().await?;
        sender.send_request(outgoing).await
    };
    let response = send
        .or(drive(&mut connection))
        .await
        .map_err(|error| describe_hyper(&error))?;
    let (head, body) = response.into_parts();
    let reuse = pool.map(|(pool, origin)| Reuse {
        pool: pool.clone(),
        origin: origin.to_owned(),
        sender,
    });
    Ok(Response {
        status: head.status,
        headers: head.headers,
        url: url.clone(),
        body,
        connection,
        reuse,
    })
}

/// [`send`], following redirects as a browser would: 307 and 308 repeat the request at the
/// new place; 303, and 301 or 302 after a POST, turn it into a GET without a body. An
/// `Authorization` header is not carried to another origin.
pub(crate) async fn send_following(
    request: &Outgoing,
    connect_timeout: Duration,
    pool: Option<&Arc<Pool>>,
) -> Result<Response, String> {
    // Copied only to follow a redirect.
    let mut redirected: Option<Outgoing> = None;
    for _ in 0..=MAX_REDIRECTS {
        let request = redirected.as_ref().unwrap_or(request);
        let response = send(request, connect_timeout, pool).await?;
        let status = response.status.as_u16();
        let location = response.header(LOCATION.as_str());
        let (true, Some(location)) = (matches!(status, 301 | 302 | 303 | 307 | 308), location)
        else {
            return Ok(response);
        };
        let next = (request.url.join(location)).map_err(|error| {
            format!("HTTP {status} to an unreadable location {location:?}: {error}")
        })?;
        let mut following = request.clone();
        if (status == 303 && following.method != Method::HEAD)
            || (matches!(status, 301 | 302) && following.method == Method::POST)
        {
            following.method = Method::GET;
            following.body = Bytes::new();
            following
                .headers
                .retain(|(name, _)| !name.eq_ignore_ascii_case("content-type"));
        }
        if next.origin() != following.url.origin() {
            // The token, and the proof of its key (made for the first URL anyway), stay home.
            let credential = |name: &str| {
                name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("dpop")
            };
            following.headers.retain(|(name, _)| !credential(name));
        }
        following.url = next;
        redirected = Some(following);
    }
    let last = redirected.as_ref().unwrap_or(request);
    Err(format!(
        "redirect loop: more than {MAX_REDIRECTS} redirects, the last to {}",
        last.url
    ))
}

/// hyper's error with its causes, TLS ones in plain words.
fn describe_hyper(error: &hyper::Error) -> String {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(inner) = cause {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return format!("{error}: {}", tls::describe(io));
        }
        cause = inner.source();
    }
    error.to_string()
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_are_one_line_and_bounded() {
        assert_eq!(quote(b"boom\n\tat line 1\r\n"), "boom at line 1");
        let page = b"<!DOCTYPE html>\n<html>\n  <body>\n    <pre>Cannot POST /mcp</pre>\n";
        assert_eq!(
            quote(page),
            "<!DOCTYPE html> <html> <body> <pre>Cannot POST /mcp</pre>"
        );
        assert_eq!(quote(&[b' '; 500]), "…");
        // Cut in the middle of a character.
        let cut = quote(format!("a{}", "é".repeat(150)).as_bytes());
        assert_eq!(cut, format!("a{}…", "é".repeat(99)));
        assert_eq!(quote(b"\x1b[31mred\x1b[0m"), "\\u{1b}[31mred\\u{1b}[0m");
        let long = quote(&[b'x'; 500]);
        assert_eq!(long, format!("{}…", "x".repeat(200)));
        assert_eq!(quote(b"\xff\xfe ok"), "\u{fffd}\u{fffd} ok");
        let json = br#"{"id":1,"result":{"text":"a b"}}"#;
        assert_eq!(quote(json).as_bytes(), json);
        assert_eq!(quote(b"a  b "), "a b");
    }
}
