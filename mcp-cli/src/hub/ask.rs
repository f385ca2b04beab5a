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

/// Decides on calls that an `ask` rule covers: a terminal prompt in the CLI, an elicitation
/// to the host in a gateway. Without one, such calls are refused.
pub type AskHandler =
    Arc<dyn Fn(Ask) -> Pin<Box<dyn Future<Output = Approval> + Send>> + Send + Sync>;
