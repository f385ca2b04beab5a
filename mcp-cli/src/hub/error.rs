//! Why the hub could not do what was asked, by who is at fault.

use mcp_smol::proto::{RequestError, RpcError};

use crate::config::Rule;
use crate::hub::{PinChange, State};

/// Why a hub operation failed. The variant says whose fault it is: the caller's (a name that
/// does not exist, a tool the policy denies) or the server's.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// No server of that name (nor of that provider-safe name).
    #[error("unknown server {given}{}; known servers: {}", did_you_mean(given, known), known.join(", "))]
    UnknownServer {
        /// The name as given.
        given: String,
        /// Every configured name.
        known: Vec<String>,
    },
    /// The name stands for more than one server once made provider-safe.
    #[error("server name {given} is ambiguous: it stands for {}; use the exact name", candidates.join(", "))]
    AmbiguousServer {
        /// The name as given.
        given: String,
        /// The servers it could mean.
        candidates: Vec<String>,
    },
    /// The server exists but cannot be used: disabled, denied, invalid, remote, or failed
    /// too often.
    #[error("server {server} is {state}: {reason}")]
    Unavailable {
        /// Its name.
        server: String,
        /// Why not, as [`Hub::status`](crate::hub::Hub::status) reports it.
        state: State,
        /// The details.
        reason: String,
    },
    /// The server has no tool of that name.
    #[error("server {server} has no tool {given}{}; it has: {}", did_you_mean(given, known), known.join(", "))]
    UnknownTool {
        /// The server.
        server: String,
        /// The tool name as given.
        given: String,
        /// The names it does offer (policy applied).
        known: Vec<String>,
    },
    /// The name stands for more than one of the server's tools.
    #[error("tool name {given} is ambiguous on server {server}: it stands for {}; use the exact name", candidates.join(", "))]
    AmbiguousTool {
        /// The server.
        server: String,
        /// The tool name as given.
        given: String,
        /// The tools it could mean.
        candidates: Vec<String>,
    },
    /// The server has no prompt of that name.
    #[error("server {server} has no prompt {given}; it has: {}", known.join(", "))]
    UnknownPrompt {
        /// The server.
        server: String,
        /// The prompt name as given.
        given: String,
        /// The names it does offer.
        known: Vec<String>,
    },
    /// The server has no skill of that name.
    #[error("server {server} has no skill {given}; {}", match known.is_empty() {
        true => "it offers none".to_owned(),
        false => format!("it has: {}", known.join(", ")),
    })]
    UnknownSkill {
        /// The server.
        server: String,
        /// The skill's name as given.
        given: String,
        /// The names it does offer.
        known: Vec<String>,
    },
    /// The server's `enabled_tools` / `disabled_tools` leave this tool out.
    #[error("tool {tool} is turned off for server {server} by its enabled_tools / disabled_tools")]
    ToolFiltered {
        /// The server.
        server: String,
        /// The tool's own name.
        tool: String,
    },
    /// A `deny` rule matches the tool.
    #[error("tool {tool} is denied by the rule tool = {:?} ({})", rule.tool.as_str(), rule.origin)]
    ToolDenied {
        /// The tool's shown name.
        tool: String,
        /// The rule that matched.
        rule: Rule,
    },
    /// The tool's definition changed since it was pinned (a "rug pull", or an update to
    /// review): it is neither listed nor called until the new definition is trusted
    /// ([`Hub::trust`](crate::hub::Hub::trust)).
    #[error("tool {tool} of server {server} is withheld: its definition {change}")]
    ToolWithheld {
        /// The server.
        server: String,
        /// The tool's own name.
        tool: String,
        /// What changed.
        change: PinChange,
    },
    /// The poisoning scan flagged the tool's definition when it was first seen or changed
    /// (invisible characters, instructions to the model, shadowing, hidden padding): it is
    /// neither listed nor called until it is trusted ([`Hub::trust`](crate::hub::Hub::trust)).
    #[error(
        "tool {tool} of server {server} is withheld: the poisoning scan flagged it{}",
        findings_text(findings)
    )]
    ToolFlagged {
        /// The server.
        server: String,
        /// The tool's own name.
        tool: String,
        /// What the scan found.
        findings: Vec<crate::scan::Finding>,
    },
    /// A warning, not a failure: the server is not the one whose tools were pinned under its
    /// name before (what it runs, or where it is, differs), so its tools are pinned anew
    /// rather than compared with the other server's. Its tools are listed.
    #[error(
        "server {server} is another server than the one whose tools were pinned under this \
         name before (it now runs `{command}`): its tools are pinned anew, not compared"
    )]
    AnotherServer {
        /// The server.
        server: String,
        /// What it runs now (or its URL).
        command: String,
    },
    /// The poisoning scan flagged a prompt, resource or resource template of the server: it is
    /// left out of listings (and a prompt is not got) until it is trusted
    /// ([`Hub::trust`](crate::hub::Hub::trust)).
    #[error(
        "{feature} {name} of server {server} is withheld: the poisoning scan flagged it{}",
        findings_text(findings)
    )]
    FeatureFlagged {
        /// The server.
        server: String,
        /// `prompt`, `resource`, `resource template` or `skill`.
        feature: &'static str,
        /// What identifies it: the prompt's own name, the resource's URI, the template's.
        name: String,
        /// What the scan found.
        findings: Vec<crate::scan::Finding>,
    },
    /// The server offered the tool with an invalid `x-mcp-header` annotation (the 2026-07-28
    /// revision over HTTP): the adapter left it out of the listing, and it is neither listed
    /// nor called.
    #[error("tool {tool} of server {server} is left out: {reason}")]
    ToolRejected {
        /// The server.
        server: String,
        /// The tool's own name.
        tool: String,
        /// Which annotation breaks which rule.
        reason: String,
    },
    /// The server listed more entries of one kind than its `max_listed` allows: the first
    /// `cap` are kept, the rest left out.
    #[error(
        "server {server} listed more than {cap} {list}s; the first {cap} are kept (`max_listed` in its entry raises the cap)"
    )]
    ListingCapped {
        /// The server.
        server: String,
        /// `tool`, `resource`, `resource template` or `prompt`.
        list: String,
        /// How many are kept.
        cap: usize,
    },
    /// An `ask` rule matches the tool and the call was not approved.
    #[error("tool {tool} needs approval (rule tool = {:?}, {}) and was not approved: {why}", rule.tool.as_str(), rule.origin)]
    NotApproved {
        /// The tool's shown name.
        tool: String,
        /// The rule that matched.
        rule: Rule,
        /// Declined, or why nobody could be asked.
        why: String,
    },
    /// The call's server asked for input (a form) that was declined or dismissed, and asked
    /// again instead of ending the call, until the bound on rounds: refused, as a call an
    /// `ask` rule was not approved for is.
    #[error(
        "tool {tool}: its server asked again for input that was declined (a form, {rounds} \
         rounds); gave up on the call"
    )]
    FormDeclined {
        /// The server.
        server: String,
        /// The tool's shown name.
        tool: String,
        /// The rounds it asked in.
        rounds: u32,
    },
    /// The server failed: it cannot start, it crashed, it timed out, it broke the protocol,
    /// or it refused the request.
    #[error("server {server}: {error}")]
    Server {
        /// The server.
        server: String,
        /// What the adapter reported.
        error: mcp_smol::Error,
    },
    /// A launcher confined by the entry's `permissions.filesystem` could not start the
    /// server for want of writing its cache (`npx` writes `~/.npm` at every start): the
    /// folder it needed is named.
    #[error(
        "server {server}: {error}\n(the sandbox keeps {launcher} from writing its cache, {}: \
         add \"{}\" to the entry's permissions.filesystem, or install the server once and run \
         it from where it is installed)",
        folder.display(), folder.display()
    )]
    LauncherCacheRefused {
        /// The server.
        server: String,
        /// The launcher (`npx`).
        launcher: String,
        /// The cache folder it needed.
        folder: std::path::PathBuf,
        /// How the start failed.
        error: mcp_smol::Error,
    },
    /// The server does not speak the protocol revision its config entry fixes (`protocol`).
    #[error(
        "server {server} does not speak protocol {configured}, which its config entry names \
         (`protocol`; \"auto\" finds out): {error}"
    )]
    WrongProtocol {
        /// The server.
        server: String,
        /// The revision the config names.
        configured: String,
        /// How the connection ended.
        error: mcp_smol::Error,
    },
    /// The task ended with an error (`failed`).
    #[error("task {id} of server {server} failed: {}", error.text())]
    TaskFailed {
        /// The server.
        server: String,
        /// The task's id.
        id: String,
        /// What the server said.
        error: RpcError,
    },
    /// The task was cancelled.
    #[error("task {id} of server {server} was cancelled{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    TaskCancelled {
        /// The server.
        server: String,
        /// The task's id.
        id: String,
        /// The server's message, if any.
        message: Option<String>,
    },
    /// The server does not know the task (any more): it refused `tasks/get`.
    #[error("server {server} does not know task {id} (it may have ended and been forgotten, or the server restarted since): {}", error.text())]
    TaskLost {
        /// The server.
        server: String,
        /// The task's id.
        id: String,
        /// The server's refusal.
        error: RpcError,
    },
    /// The wait for a task ran out before it ended.
    #[error("task {id} of server {server} is still {status} after {}s; {}", after.as_secs_f64(), if *cancelled { "it was cancelled" } else { "it runs on" })]
    TaskWaitTimedOut {
        /// The server.
        server: String,
        /// The task's id.
        id: String,
        /// Where it stood.
        status: mcp_smol::proto::tasks::TaskStatus,
        /// The wait's limit.
        after: std::time::Duration,
        /// Whether it was cancelled then (a call that was to wait for its result).
        cancelled: bool,
    },
    /// The tool answered, but its `structuredContent` does not match the tool's
    /// `outputSchema` (or is missing although the tool declares one). The result is here
    /// whole, for a caller that shows it all the same; the CLI prints it and exits 1.
    #[error("tool {tool}: the result does not match the tool's outputSchema {mismatch}")]
    OutputMismatch {
        /// The server.
        server: String,
        /// The tool's shown name.
        tool: String,
        /// The first place that fails, and why.
        mismatch: crate::hub::OutputMismatch,
        /// The result as the server sent it.
        result: Box<serde_json::Value>,
    },
    /// The hub is shutting down and starts nothing more.
    #[error("server {server}: not started, the hub is shutting down")]
    ShuttingDown {
        /// The server.
        server: String,
    },
}

/// What an agent asks of a failure, without matching variants: each answers for every variant
/// that means it, so a new variant of that kind is counted where it belongs.
impl HubError {
    /// A time limit ran out: the call's (or the request's) timeout, the server's handshake
    /// budget, or the wait for a task.
    pub fn is_timeout(&self) -> bool {
        match self {
            HubError::Server { error, .. } => error.is_timeout(),
            HubError::TaskWaitTimedOut { .. } => true,
            _ => false,
        }
    }

    /// The policy refused the tool: a `deny` rule, the server's `enabled_tools` /
    /// `disabled_tools`, or an `ask` rule's call that was not approved. Asking again will
    /// not help; a change of config or a person's yes will.
    pub fn is_denied(&self) -> bool {
        matches!(
            self,
            HubError::ToolDenied { .. }
                | HubError::ToolFiltered { .. }
                | HubError::NotApproved { .. }
        )
    }

    /// The tool (or prompt, resource) is withheld until it is trusted
    /// ([`Hub::trust`](crate::hub::Hub::trust)): its definition changed since it was pinned,
    /// or the poisoning scan flagged it.
    pub fn is_withheld(&self) -> bool {
        matches!(
            self,
            HubError::ToolWithheld { .. }
                | HubError::ToolFlagged { .. }
                | HubError::FeatureFlagged { .. }
        )
    }

    /// No tool answers to the name: the server has none of that name (its `known` names
    /// are in the error), or no server answers to the name's server part.
    pub fn is_unknown_tool(&self) -> bool {
        matches!(
            self,
            HubError::UnknownTool { .. } | HubError::UnknownServer { .. }
        )
    }

    /// The JSON-RPC error the server answered with, when that is why the request failed.
    pub fn rpc_error(&self) -> Option<&RpcError> {
        match self {
            HubError::Server {
                error: mcp_smol::Error::Request(RequestError::Remote(error)),
                ..
            } => Some(error),
            _ => None,
        }
    }

    /// The code of [`rpc_error`](Self::rpc_error), such as [`RpcError::METHOD_NOT_FOUND`].
    pub fn rpc_code(&self) -> Option<i64> {
        self.rpc_error().map(|error| error.code)
    }
}

/// `; did you mean NAME?` when one of `known` is the likely meaning of `given`.
fn did_you_mean(given: &str, known: &[String]) -> String {
    match crate::names::nearest(given, known.iter().map(String::as_str)) {
        Some(nearest) => format!("; did you mean {nearest}?"),
        None => String::new(),
    }
}

/// Findings one to a line, under the message that names the tool.
fn findings_text(findings: &[crate::scan::Finding]) -> String {
    findings
        .iter()
        .map(|finding| format!("\n    {finding}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Action, Glob};
    use mcp_smol::proto::tasks::TaskStatus;
    use std::time::Duration;

    fn server(error: mcp_smol::Error) -> HubError {
        HubError::Server {
            server: "fx".into(),
            error,
        }
    }

    #[test]
    fn agents_ask_what_kind_of_failure_it_is() {
        let timed_out = server(mcp_smol::Error::Request(RequestError::TimedOut {
            after: Duration::from_secs(1),
        }));
        let remote = server(mcp_smol::Error::Request(RequestError::Remote(
            RpcError::method_not_found("x"),
        )));
        let waited = HubError::TaskWaitTimedOut {
            server: "fx".into(),
            id: "1".into(),
            status: TaskStatus::Working,
            after: Duration::from_secs(1),
            cancelled: false,
        };
        let rule = Rule {
            tool: Glob::new("fx__*").unwrap(),
            action: Action::Deny,
            origin: "config.toml line 2".into(),
            parkable: false,
        };
        let denied = HubError::ToolDenied {
            tool: "fx__echo".into(),
            rule: rule.clone(),
        };
        let unapproved = HubError::NotApproved {
            tool: "fx__echo".into(),
            rule,
            why: "declined".into(),
        };
        let withheld = HubError::ToolFlagged {
            server: "fx".into(),
            tool: "echo".into(),
            findings: Vec::new(),
        };
        let unknown = HubError::UnknownTool {
            server: "fx".into(),
            given: "nope".into(),
            known: vec!["echo".into()],
        };
        let kinds = |error: &HubError| {
            [
                error.is_timeout(),
                error.is_denied(),
                error.is_withheld(),
                error.is_unknown_tool(),
            ]
        };
        assert_eq!(kinds(&timed_out), [true, false, false, false]);
        assert_eq!(kinds(&waited), [true, false, false, false]);
        assert_eq!(kinds(&remote), [false; 4]);
        assert_eq!(kinds(&denied), [false, true, false, false]);
        assert_eq!(kinds(&unapproved), [false, true, false, false]);
        assert_eq!(kinds(&withheld), [false, false, true, false]);
        assert_eq!(kinds(&unknown), [false, false, false, true]);
    }
}
