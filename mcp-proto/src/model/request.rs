//! Requests as values: a typed helper (or [`Request::new`] for any method) builds one,
//! [`Connection::request`](crate::Connection::request) sends it, and the result that comes back
//! reads as the helper's type through [`FromResult`].

use std::marker::PhantomData;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::model::error::RequestError;
use crate::model::raw_result::RawResult;

/// Identifies one request of ours. Ids count up from 1 and are never reused (0 is skipped
/// because some servers treat a falsy id as absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub(crate) u64);

impl serde::Serialize for RequestId {
    /// As it goes on the wire: the number in the message's `id`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One request to send, typed by what its result reads as: `Request<CallToolResult>` from
/// [`Request::call_tool`], `Request<Value>` (the result as sent) from [`Request::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct Request<T = Value> {
    pub(crate) method: String,
    pub(crate) params: Params,
    pub(crate) deadline: Deadline,
    result: PhantomData<fn() -> T>,
}

/// How long a request may wait for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// [`Config::request_timeout`](crate::Config::request_timeout) (or the server role's).
    Default,
    /// A time of its own.
    After(Duration),
    /// Until it is answered, cancelled or the connection ends.
    Never,
}

impl Deadline {
    /// The time the request is given, `default` unless it chose; `None` for no deadline.
    pub(crate) fn or(self, default: Duration) -> Option<Duration> {
        match self {
            Deadline::Default => Some(default),
            Deadline::After(timeout) => Some(timeout),
            Deadline::Never => None,
        }
    }
}

/// What goes in `params`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Params {
    None,
    Value(Value),
    /// Encoded at send time, when the id (the progress token, unless one is given) is known.
    CallTool {
        name: String,
        arguments: Value,
        progress_token: Option<Value>,
        /// Members of `_meta` the caller adds (a host's trace context, passed on).
        meta: Option<Map<String, Value>>,
        /// Handshake era: the `task` parameter asking for a task ([`Request::as_task`]).
        task: Option<Box<Value>>,
    },
}

impl Request<Value> {
    /// Any method, with `params` as given (an object or an array, if any). A
    /// `params._meta.progressToken` lets progress notifications extend the deadline.
    pub fn new(method: impl Into<String>, params: Option<Value>) -> Self {
        let params = params.map_or(Params::None, Params::Value);
        Self::with(method.into(), params)
    }
}

impl<T> Request<T> {
    pub(crate) fn with(method: String, params: Params) -> Self {
        Self {
            method,
            params,
            deadline: Deadline::Default,
            result: PhantomData,
        }
    }

    /// A deadline of its own instead of
    /// [`Config::request_timeout`](crate::Config::request_timeout); progress notifications restart
    /// it.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.deadline = Deadline::After(timeout);
        self
    }

    /// No deadline: it waits for its answer, its cancellation or the end of the connection.
    /// For a request whose server times its own work.
    #[must_use]
    pub fn no_timeout(mut self) -> Self {
        self.deadline = Deadline::Never;
        self
    }

    /// The JSON-RPC method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The tool and arguments of a `tools/call`, however it was made (by
    /// [`Request::call_tool`] or by [`Request::new`]): what a host's policy must see before
    /// the call is sent. `None` for any other method.
    pub fn tool_call(&self) -> Option<(&str, &Value)> {
        static NO_ARGUMENTS: Value = Value::Null;
        if self.method != "tools/call" {
            return None;
        }
        match &self.params {
            Params::CallTool {
                name, arguments, ..
            } => Some((name, arguments)),
            Params::Value(params) => Some((
                params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                params.get("arguments").unwrap_or(&NO_ARGUMENTS),
            )),
            Params::None => Some(("", &NO_ARGUMENTS)),
        }
    }

    /// The same request, its result kept as the server sent it.
    pub fn untyped(self) -> Request<Value> {
        Request::<Value> {
            method: self.method,
            params: self.params,
            deadline: self.deadline,
            result: PhantomData,
        }
    }
}

/// A result type that a request's `result` member reads as.
pub trait FromResult: Sized {
    /// Reads the `result` member; the error says what is wrong with it.
    fn from_result(result: Value) -> Result<Self, String>;

    /// [`from_result`](Self::from_result) as the answer to `method`: a result that cannot be
    /// read fails the request with [`RequestError::InvalidResponse`].
    fn answer(method: &str, result: Value) -> Result<Self, RequestError> {
        Self::from_result(result)
            .map_err(|error| RequestError::InvalidResponse(format!("{method}: {error}")))
    }

    /// Reads a result as the server sent it ([`Connection::poll_event`]); the same as
    /// [`from_result`](Self::from_result) of [`RawResult::into_value`]'s value, which is what
    /// it does unless a type reads the text itself, without that value.
    ///
    /// [`Connection::poll_event`]: crate::Connection::poll_event
    fn from_raw(result: RawResult) -> Result<Self, String> {
        Self::from_result(result.into_value()?)
    }

    /// [`answer`](Self::answer) for a result as the server sent it.
    fn answer_raw(method: &str, result: RawResult) -> Result<Self, RequestError> {
        Self::from_raw(result)
            .map_err(|error| RequestError::InvalidResponse(format!("{method}: {error}")))
    }
}

impl FromResult for Value {
    fn from_result(result: Value) -> Result<Self, String> {
        Ok(result)
    }
}
