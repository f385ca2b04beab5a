//! URL-mode elicitation through the gateway. A backend's link (2025-11-25) reaches a host that
//! declared `elicitation.url` (the [`Relay`](super::Relay) declines it for any other): a
//! handshake-era host as a request of ours, followed by the backend's
//! `notifications/elicitation/complete`; a stateless-era host as an input round of its call,
//! without the `elicitationId` and the completion, which the 2026-07-28 revision removed (such
//! a host learns the outcome from its retry, which the backend answers once it knows).
//!
//! A backend's -32042 (URL elicitation required, 2025-11-25 only) names links to open before
//! the request is made again: a handshake-era host that takes links gets the error as it is;
//! a stateless-era request that declared links gets them as an input round, and the call (or
//! the `prompts/get`, the `resources/read`) is made again once all are accepted; any other
//! host gets a tool error naming the links (for a prompt or a read, the error as it came).

use std::future::Future;

use async_channel::Sender;
use mcp_smol::proto::{Era, ErrorKind, Notification, RpcError};
use serde_json::{Value, json};

use crate::gateway::errors::tool_error;
use crate::gateway::rounds::{Asked, Question};
use crate::gateway::{HostLink, host};

/// Tells `host` that the interaction `id` names has finished, if it is a handshake-era host
/// that takes URL-mode elicitations (a host ignores an id it does not know, as the spec says
/// it must).
pub(crate) fn complete(host: &HostLink, id: &str) {
    let stateless = Era::of(&host.client.protocol_version) == Some(Era::Stateless);
    if !stateless && host.client.takes_url_elicitation() {
        let params = json!({ "elicitationId": id });
        (host.server).notify(Notification::ELICITATION_COMPLETE, Some(params));
    }
}

/// The tool error for a -32042 a host cannot be shown: the links to open, and that the call
/// is then to be made again.
pub(crate) fn explained(tool: &str, required: &RpcError) -> Value {
    tool_error(&format!(
        "{tool} could not run yet: {required}; open the link in a browser, then call {tool} \
         again"
    ))
}

/// At most this many -32042 answers to one stateless-era request are put to the host as links.
const MAX_AGAIN: usize = 4;

/// How a request to be made again once its links were opened ended without a result.
pub(crate) enum Unopened {
    /// The backend's error: not a -32042, or one whose links the host could not be asked.
    Failed(RpcError),
    /// The host answered `action` (not `accept`) to a link of the backend's -32042.
    Refused { action: String, required: RpcError },
    /// The backend still asked for links after [`MAX_AGAIN`] tries: its last -32042.
    GaveUp(RpcError),
}

impl Unopened {
    /// The tool error a call of `tool` ends in, which says why.
    pub(crate) fn for_tool(self, tool: &str) -> Value {
        match self {
            Unopened::Failed(error) => explained(tool, &error),
            Unopened::Refused { action, .. } => tool_error(&format!(
                "{tool} could not run: the server needs a link opened first, and the host \
                 answered {action}"
            )),
            Unopened::GaveUp(required) => tool_error(&format!(
                "{tool}: the server still asked for links to be opened after {MAX_AGAIN} tries; \
                 gave up: {required}"
            )),
        }
    }

    /// The backend's error, for a request that is not a call (`prompts/get`,
    /// `resources/read`): its own JSON-RPC error, which names the links.
    pub(crate) fn into_error(self) -> RpcError {
        match self {
            Unopened::Failed(error) | Unopened::GaveUp(error) => error,
            Unopened::Refused { required, .. } => required,
        }
    }
}

/// Makes a stateless-era host's request: `call` with `work`; a -32042 is put to the host as an
/// input round through `questions` (when the request declared links) and, once it accepted
/// every link, `call` is made again with a copy of `work` (copied only when it may be).
pub(crate) async fn again_once_opened<T, R, F, Fut>(
    questions: Option<&Sender<Question>>,
    work: T,
    mut call: F,
) -> Result<R, Unopened>
where
    T: Clone,
    F: FnMut(T) -> Fut,
    Fut: Future<Output = Result<R, RpcError>>,
{
    let kept = questions.map(|_| work.clone());
    let mut next = Some(work);
    let mut required = None;
    for _ in 0..MAX_AGAIN {
        // Without questions the first failure ends it: there is always a next try here.
        let Some(this) = next.take() else { break };
        next = kept.clone();
        let error = match call(this).await {
            Ok(result) => return Ok(result),
            Err(error) => error,
        };
        let ErrorKind::UrlElicitationRequired { elicitations } = error.kind() else {
            return Err(Unopened::Failed(error));
        };
        let Some(questions) = questions.filter(|_| !elicitations.is_empty()) else {
            return Err(Unopened::Failed(error));
        };
        for elicitation in elicitations {
            let mut params = host::link_for_round(elicitation);
            params["mode"] = json!("url");
            let answer = host::in_round(questions, Asked::Elicitation(params)).await;
            let action = answer.as_ref().and_then(|a| a.get("action")?.as_str());
            if action != Some("accept") {
                let action = action.unwrap_or("cancel").to_owned();
                return Err(Unopened::Refused {
                    action,
                    required: error,
                });
            }
        }
        required = Some(error);
    }
    // Asked at least once: `MAX_AGAIN` is not 0.
    let required = required.unwrap_or_else(|| RpcError {
        code: RpcError::URL_ELICITATION_REQUIRED,
        message: "links to open".to_owned(),
        data: None,
    });
    Err(Unopened::GaveUp(required))
}
