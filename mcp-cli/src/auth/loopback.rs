//! The loopback redirect target (RFC 8252 §7.3): a listener on 127.0.0.1 that waits for the
//! browser to come back to `/callback` and answers it with a page saying how it went.
//!
//! Only the request line of a GET matters here, so it is read by hand: this is a browser on
//! the same machine hitting a one-shot listener, not a general HTTP server.

use std::io;
use std::time::Duration;

use async_net::{TcpListener, TcpStream};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

use super::urls::Url;

/// How long one connection may take to send its request line before it is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEAD: usize = 16 * 1024;

#[derive(Debug)]
pub(crate) struct Loopback {
    listener: TcpListener,
    port: u16,
}

impl Loopback {
    /// Listens on 127.0.0.1:`port` (0: any free port).
    pub(crate) async fn bind(port: u16) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        Ok(Self { listener, port })
    }

    pub(crate) fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits for a request to `/callback` and hands its URL to `check`; the browser is told
    /// the outcome. Requests for other paths (a favicon) get a 404 and the wait goes on.
    pub(crate) async fn wait<T>(
        &self,
        check: impl Fn(&Url) -> Result<T, String>,
    ) -> Result<T, String> {
        loop {
            let (mut stream, _) = (self.listener.accept().await)
                .map_err(|error| format!("the login callback listener failed: {error}"))?;
            let target = futures_lite::future::or(read_target(&mut stream), async {
                async_io::Timer::after(REQUEST_TIMEOUT).await;
                None
            })
            .await;
            let Some(target) = target else { continue };
            let url = super::urls::parse(&format!("http://127.0.0.1:{}{target}", self.port)).ok();
            let Some(url) = url.filter(|url| url.path() == "/callback") else {
                respond(&mut stream, "404 Not Found", "Not found.").await;
                continue;
            };
            let outcome = check(&url);
            match &outcome {
                Ok(_) => {
                    let text = "mcp-cli is logged in. You can close this tab.";
                    respond(&mut stream, "200 OK", text).await;
                }
                Err(error) => {
                    let text = format!("mcp-cli could not log in: {error}");
                    respond(&mut stream, "400 Bad Request", &text).await;
                }
            }
            return outcome;
        }
    }
}

/// The request target of a GET (`/callback?code=...`), once the head has arrived.
async fn read_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut parts = line.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    (method == "GET" && target.starts_with('/')).then(|| target.to_owned())
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>mcp-cli</title><p>{}</p>\n",
        escape(text)
    );
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\nCache-Control: no-store\r\n\r\n",
        body.len()
    );
    // The browser going away before it reads the page changes nothing for us.
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.flush().await;
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, target: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let request = format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer
    }

    #[test]
    fn waits_for_the_callback_and_answers_the_browser() {
        async_io::block_on(async {
            let loopback = Loopback::bind(0).await.expect("bind");
            let port = loopback.port;
            assert_eq!(
                loopback.redirect_uri(),
                format!("http://127.0.0.1:{port}/callback")
            );
            let browser = async move {
                let favicon = get(port, "/favicon.ico").await;
                let callback = get(port, "/callback?code=c&state=<s>").await;
                (favicon, callback)
            };
            let wait =
                loopback.wait(
                    |url| match crate::auth::urls::param(url, "state").as_deref() {
                        Some("ok") => Ok(()),
                        other => Err(format!("state {other:?}")),
                    },
                );
            let (outcome, (favicon, callback)) = futures_lite::future::zip(wait, browser).await;
            assert_eq!(outcome, Err("state Some(\"<s>\")".into()));
            assert!(favicon.starts_with("HTTP/1.1 404"), "{favicon}");
            assert!(callback.starts_with("HTTP/1.1 400"), "{callback}");
            assert!(
                callback.contains("state Some(&quot;&lt;s&gt;&quot;)"),
                "{callback}"
            );
        });
    }
}
