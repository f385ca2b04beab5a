//! The HTTP exchanges OAuth makes, behind a small trait so unit tests can answer them without
//! a network; the real one is [`mcp_smol::authorize::send`], the exchange mcp-smol offers
//! authorizers with its transport's TLS setup.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::de::DeserializeOwned;

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) method: &'static str,
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Request {
    pub(crate) fn get(url: &str) -> Self {
        Self {
            method: "GET",
            url: url.to_owned(),
            headers: vec![("Accept".into(), "application/json".into())],
            body: Vec::new(),
        }
    }

    pub(crate) fn post(url: &str, content_type: &str, body: String) -> Self {
        Self {
            method: "POST",
            url: url.to_owned(),
            headers: vec![
                ("Accept".into(), "application/json".into()),
                ("Content-Type".into(), content_type.into()),
            ],
            body: body.into_bytes(),
        }
    }

    pub(crate) fn header(mut self, name: &str, value: String) -> Self {
        self.headers.push((name.to_owned(), value));
        self
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON of type `T`; the error names `what` and `url`.
    pub(crate) fn json<T: DeserializeOwned>(&self, what: &str, url: &str) -> Result<T, String> {
        serde_json::from_slice(&self.body)
            .map_err(|error| format!("the {what} at {url} is not valid: {error}"))
    }

    /// A short account of an unwanted answer, for error messages: the status and, when the
    /// server said why in OAuth's words or in a short text, that too.
    pub(crate) fn describe(&self) -> String {
        let mut out = format!("HTTP {}", self.status);
        if let Ok(body) = serde_json::from_slice::<serde_json::Value>(&self.body) {
            if let Some(error) = body.get("error").and_then(|e| e.as_str()) {
                out.push_str(&format!(": {}", printable(error)));
                if let Some(text) = body.get("error_description").and_then(|e| e.as_str()) {
                    out.push_str(&format!(" ({})", printable(text)));
                }
            }
        } else if let Ok(text) = std::str::from_utf8(&self.body) {
            let text = text.trim();
            if !text.is_empty() && text.len() <= 200 && !text.starts_with('<') {
                out.push_str(&format!(": {}", printable(text)));
            }
        }
        out
    }
}

/// Peer text made safe to print: control characters (terminal escapes) dropped, length capped.
pub(crate) fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(300).collect()
}

/// Sends one request and returns whatever the server answered; `Err` only when there was no
/// answer (connection, TLS, timeout), worded as a sentence naming the URL.
pub(crate) trait Http: Send + Sync + fmt::Debug {
    fn send(&self, request: Request) -> BoxFuture<'_, Result<Response, String>>;
}

/// The real thing: [`mcp_smol::authorize::send`], which never follows redirects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Network {
    pub(crate) timeout: Duration,
}

impl Http for Network {
    fn send(&self, request: Request) -> BoxFuture<'_, Result<Response, String>> {
        let outgoing = mcp_smol::authorize::Request {
            method: request.method.to_owned(),
            url: request.url.clone(),
            headers: request.headers,
            body: request.body,
            timeout: self.timeout,
        };
        Box::pin(async move {
            match mcp_smol::authorize::send(outgoing).await {
                Ok(response) => Ok(Response {
                    status: response.status,
                    headers: response.headers,
                    body: response.body,
                }),
                Err(error) => Err(format!("{} {}: {error}", request.method, request.url)),
            }
        })
    }
}

#[cfg(test)]
pub(crate) mod canned {
    //! An [`Http`] that answers from a table and records what it was asked.

    use std::sync::Mutex;

    use super::*;

    type Handler = Box<dyn Fn(&Request) -> Response + Send + Sync>;

    #[derive(Default)]
    pub(crate) struct Canned {
        routes: Vec<(&'static str, String, Handler)>,
        pub(crate) log: Mutex<Vec<Request>>,
    }

    impl fmt::Debug for Canned {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Canned")
        }
    }

    pub(crate) fn json(status: u16, body: serde_json::Value) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    impl Canned {
        /// Answers `method url` (the URL without its query) with `handler`; later routes win.
        pub(crate) fn on(
            mut self,
            method: &'static str,
            url: &str,
            handler: impl Fn(&Request) -> Response + Send + Sync + 'static,
        ) -> Self {
            self.routes
                .insert(0, (method, url.to_owned(), Box::new(handler)));
            self
        }

        pub(crate) fn json(self, url: &str, body: serde_json::Value) -> Self {
            self.on("GET", url, move |_| json(200, body.clone()))
        }

        pub(crate) fn urls(&self) -> Vec<String> {
            let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            log.iter()
                .map(|r| format!("{} {}", r.method, r.url))
                .collect()
        }
    }

    impl Http for Canned {
        fn send(&self, request: Request) -> BoxFuture<'_, Result<Response, String>> {
            let path = request.url.split('?').next().unwrap_or_default().to_owned();
            let found = (self.routes.iter())
                .find(|(method, url, _)| *method == request.method && *url == path)
                .map(|(_, _, handler)| handler(&request));
            let answer = found.unwrap_or_else(|| json(404, serde_json::json!({})));
            (self.log.lock().unwrap_or_else(|e| e.into_inner())).push(request);
            Box::pin(async move { Ok(answer) })
        }
    }
}
