//! One request on its way: what [`Client::request`] returns, the options of that one call,
//! then awaited for its result read as the request's type, or [`Call::raw`] for it unread.
//! The one request path: every convenience method of [`Client`] is a call into it.

use std::borrow::Cow;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use proto::{FromResult, RawResult, Request};

use crate::client::Ask;
use crate::driver::{Flight, Route};
use crate::{Client, Error, ProgressInbox};

/// A request of `client`'s, with how its caller waits for it; nothing is sent until it is
/// awaited. Dropped while waiting, the request is cancelled (the server is told).
#[must_use = "a request is sent only when awaited"]
pub struct Call<'a, T> {
    client: &'a Client,
    request: Request<T>,
    progress: Option<Route>,
}

impl<T> std::fmt::Debug for Call<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("method", &self.request.method())
            .field("progress", &self.progress.is_some())
            .finish_non_exhaustive()
    }
}

impl<'a, T> Call<'a, T> {
    pub(crate) fn new(client: &'a Client, request: Request<T>) -> Self {
        Self {
            client,
            request,
            progress: None,
        }
    }

    /// The server's progress reports on this request go to `inbox`: those whose token is the
    /// inbox's, which the request must carry ([`Request::progress_token`]). Each one sent
    /// before the answer is there before the call returns; the driver routes them by token,
    /// with no subscription to the connection's notifications. They keep coming after the
    /// answer (a task's progress) until the inbox is dropped.
    pub fn progress(mut self, inbox: &ProgressInbox) -> Self {
        self.progress = Some(inbox.route());
        self
    }

    /// A deadline of its own instead of [`Config::request_timeout`](proto::Config): as
    /// [`Request::timeout`], which it replaces. Progress restarts it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.request = self.request.timeout(timeout);
        self
    }

    /// No deadline at all: the call waits for its answer, the end of the connection, or its
    /// caller to give up (drop it). For a request whose server times its own work.
    pub fn no_timeout(mut self) -> Self {
        self.request = self.request.no_timeout();
        self
    }

    /// Sends it and hands back its result unread, as text: for a caller that passes it on
    /// ([`RawResult::json`]) or reads it its own way, with no value built for it. Awaiting
    /// the call itself is this, then [`FromResult::answer_raw`].
    pub async fn raw(self) -> Result<RawResult, Error> {
        let Call {
            client,
            request,
            progress,
        } = self;
        client.send(request.untyped(), progress).await
    }
}

impl<'a, T: FromResult> IntoFuture for Call<'a, T> {
    type Output = Result<T, Error>;
    type IntoFuture = CallFuture<'a, T>;

    fn into_future(self) -> CallFuture<'a, T> {
        let Call {
            client,
            request,
            progress,
        } = self;
        CallFuture {
            method: method_name(request.method()),
            // Not boxed: the wait is the operation and a few pointers.
            raw: client.send(request.untyped(), progress),
            result: PhantomData,
        }
    }
}

/// The method of a call, for the error of a result that does not read as its type: the
/// methods of the typed requests are named without a copy made for every call.
fn method_name(method: &str) -> Cow<'static, str> {
    const TYPED: &[&str] = &[
        "tools/call",
        "tools/list",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "ping",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
    ];
    match TYPED.iter().find(|typed| **typed == method) {
        Some(typed) => Cow::Borrowed(typed),
        None => Cow::Owned(method.to_owned()),
    }
}

/// A [`Call`] awaited: its result, read as `T` on the caller's task (not the driver's).
#[must_use = "futures do nothing unless polled"]
pub struct CallFuture<'a, T> {
    method: Cow<'static, str>,
    raw: Flight<'a, Ask<'a, RawResult>>,
    result: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for CallFuture<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallFuture")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl<T: FromResult> Future for CallFuture<'_, T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, Error>> {
        let raw = std::task::ready!(Pin::new(&mut self.raw).poll(cx))?;
        Poll::Ready(Ok(T::answer_raw(&self.method, raw)?))
    }
}
