//! The plain HTTP(S) exchanges an [`Authorizer`](super::Authorizer) makes of its own (OAuth
//! metadata, registration, tokens), with the transport's TLS setup and connection code.

use std::time::Duration;

use async_io::Timer;
use futures_lite::future::FutureExt;
use hyper::Method;
use hyper::body::Bytes;
use url::Url;

use super::wire::{self, BodyError, Outgoing};
use crate::Error;

/// The most of a body [`send`] reads.
const BODY_LIMIT: usize = 1024 * 1024;

/// One request for [`send`].
#[derive(Clone, Debug)]
pub struct Request {
    /// `GET`, `POST`...
    pub method: String,
    /// An `http://` or `https://` URL.
    pub url: String,
    /// Sent as they are.
    pub headers: Vec<(String, String)>,
    /// Empty for none.
    pub body: Vec<u8>,
    /// For the whole exchange: connecting, sending, and reading the answer.
    pub timeout: Duration,
}

/// What came back from [`send`].
#[derive(Clone, Debug)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// Every header as sent (values that are not text are left out).
    pub headers: Vec<(String, String)>,
    /// The whole body, at most 1 MiB.
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// One HTTP(S) exchange with the TLS setup of the HTTP transport, for an authorizer's OAuth
/// metadata, registration and token requests. Redirects are not followed (the caller sees the 3xx and
/// its `Location`); bodies over 1 MiB are refused. Any failure is [`Error::Http`].
pub async fn send(request: Request) -> Result<Response, Error> {
    send_up_to(request, BODY_LIMIT).await
}

/// [`send`], with bodies up to `limit` bytes: for a host's downloads (a registry's packages),
/// which outgrow an OAuth answer's 1 MiB.
pub async fn send_up_to(request: Request, limit: usize) -> Result<Response, Error> {
    let failed = |detail: String| Error::Http {
        url: request.url.clone(),
        detail,
    };
    let url = Url::parse(&request.url).map_err(|error| failed(format!("not a URL: {error}")))?;
    let method = Method::from_bytes(request.method.as_bytes())
        .map_err(|error| failed(format!("bad method {:?}: {error}", request.method)))?;
    let outgoing = Outgoing {
        method,
        url,
        headers: request.headers.clone(),
        body: Bytes::from(request.body.clone()),
    };
    let timeout = request.timeout;
    let exchange = async {
        let mut response = wire::send(&outgoing, timeout, None).await?;
        let body = match response.read_body(limit).await {
            Ok(body) => body,
            Err(BodyError::TooLarge { size }) => {
                return Err(format!(
                    "the answer is over {limit} bytes ({size} at least)"
                ));
            }
            Err(BodyError::Failed(detail)) => return Err(detail),
        };
        let headers = (response.headers.iter())
            .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
            .collect();
        Ok(Response {
            status: response.status.as_u16(),
            headers,
            body,
        })
    };
    let out_of_time = async {
        Timer::after(timeout).await;
        Err(format!("no answer within {timeout:?}"))
    };
    exchange.or(out_of_time).await.map_err(failed)
}
