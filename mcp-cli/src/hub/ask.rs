//! Asking a person (or a host) before a tool that an `ask` rule covers is called.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::config::Rule;

/// A call waiting for approval.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The tool's shown name (`<server>__<tool>`).
    pub tool: String,
    /// The arguments it would be called with.
    pub arguments: Value,
    /// The `ask` rule that matched.
    pub rule: Rule,
}

/// The answer to an [`Ask`]: `Ok(())` to go ahead, `Err(why)` to refuse.
pub type Approval = Result<(), String>;

type Decide = dyn Fn(Ask) -> Pin<Box<dyn Future<Output = Approval> + Send>> + Send + Sync;

/// Decides on calls that an `ask` rule covers: a terminal prompt in the CLI, an elicitation
/// to the host in a gateway. Without one, such calls are refused. Cheap to clone.
///
/// The call waits while the handler does; dropping the call's future drops the handler's
/// future with it, and a call whose approval never comes is never sent.
#[derive(Clone)]
pub struct AskHandler(Arc<Decide>);

impl AskHandler {
    /// A handler from an async closure (or any function returning a future):
    ///
    /// ```
    /// use mcp_client_cli::hub::{Ask, AskHandler};
    /// let handler = AskHandler::new(|ask: Ask| async move {
    ///     if ask.tool.ends_with("__echo") { Ok(()) } else { Err("not this one".to_owned()) }
    /// });
    /// ```
    pub fn new<F, Fut>(decide: F) -> Self
    where
        F: Fn(Ask) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Approval> + Send + 'static,
    {
        Self(Arc::new(move |ask| Box::pin(decide(ask))))
    }

    /// Asks; the hub calls this once per call that an `ask` rule covers.
    pub(crate) async fn decide(&self, ask: Ask) -> Approval {
        (self.0)(ask).await
    }
}

impl std::fmt::Debug for AskHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AskHandler")
    }
}
