//! What a client connection tells its caller: its events, and the ids and counters in them.

use serde_json::Value;

#[cfg(doc)]
use super::{Config, Connection};
use crate::model::error::{CloseReason, RequestError};
use crate::model::raw_result::RawResult;
use crate::model::request::RequestId;
use crate::model::types::{Notification, ServerInfo};
use crate::wire::line_error::LineError;

/// Identifies one server request that waits for [`Connection::respond`]. Our own counter:
/// the server's id, whatever its type, is echoed by the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerRequestId(pub(crate) u64);

/// A request from the server that a declared capability makes the caller's to answer: a
/// JSON-RPC request of the server's, or (stateless era) one input request of an
/// `input_required` result. Both are answered alike, with [`Connection::respond`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRequest {
    /// What to pass to [`Connection::respond`].
    pub id: ServerRequestId,
    /// `roots/list`, `elicitation/create` or `sampling/createMessage`.
    pub method: String,
    /// As sent; `None` when the server sent no `params`.
    pub params: Option<Value>,
    /// The request of ours it is asked for: the one answered `input_required` (stateless
    /// era); `None` for a request the server sent on its own.
    pub request: Option<RequestId>,
}

/// What happened, drained with [`Connection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The server is known: the handshake is done (held requests have been queued after
    /// `notifications/initialized`), or `server/discover` answered (stateless era).
    Ready(ServerInfo),
    /// A request of ours ended. Every request ends exactly once.
    Response {
        /// The request, as [`Connection::request`] returned it.
        id: RequestId,
        /// Its `result` member, as the server sent it, or why it failed.
        result: Result<RawResult, RequestError>,
    },
    /// A notification from the server (progress, logging, list changes, anything else).
    Notification(Notification),
    /// The server asks something a declared capability covers; answer it with
    /// [`Connection::respond`] before [`Config::server_request_timeout`], or it is refused.
    ///
    /// In the stateless era a `tools/call`, `prompts/get` or `resources/read` may answer
    /// `input_required`: each of its input requests comes as one of these (its
    /// [`request`](ServerRequest::request) names ours), and once every one is answered, or
    /// refused at its deadline, our request goes again under a new wire id (its
    /// [`RequestId`] stays) with the `requestState` and the answers in `inputResponses`
    /// under the server's keys. An `Err` answer, or none in time, leaves its key out: the
    /// server may ask again, within [`Config::max_input_rounds`].
    ServerRequest(ServerRequest),
    /// A line from the server was skipped; the connection goes on.
    Malformed(LineError),
    /// The connection ended; always the last event. Pending requests have already failed.
    Closed(CloseReason),
}

/// Counters for diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Responses whose id matched no pending request (late, duplicate or invented).
    pub stray_responses: u64,
    /// Lines reported as [`Event::Malformed`].
    pub malformed_lines: u64,
    /// Refusals of server requests dropped because too many piled up during the handshake.
    pub dropped_replies: u64,
}
