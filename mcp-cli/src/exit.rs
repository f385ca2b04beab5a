//! Exit codes and the failure type that carries one.

use std::fmt;

use mcp_smol::Error;

use crate::hints::{Hint, Naming};
use crate::hub::{HubError, State};
use mcp_smol::proto::{CloseReason, RequestError, RpcError, SendError};

/// The process exit status, by who is at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command did what it was asked.
    Success = 0,
    /// The tool ran and reported an error (`isError: true`).
    ToolError = 1,
    /// Bad flags, unknown server or tool, arguments that do not fit, invalid config.
    Usage = 2,
    /// The server cannot start, failed the handshake, crashed or broke the protocol.
    Server = 3,
    /// The handshake budget or the call timeout ran out.
    Timeout = 4,
    /// The call waits for an answer only the person can give: a question parked on the
    /// daemon (`call --park`), which `mcp-cli answer ID` answers.
    Parked = 5,
    /// The task was cancelled (as a shell reports a command stopped by Ctrl-C).
    Cancelled = 130,
}

impl Exit {
    /// The number the process exits with.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The status a command line run elsewhere (in the daemon) exited with; one we do not
    /// know, or none, is a server failure.
    pub(crate) fn of_code(code: Option<i64>) -> Self {
        let known = [
            Self::Success,
            Self::ToolError,
            Self::Usage,
            Self::Server,
            Self::Timeout,
            Self::Parked,
            Self::Cancelled,
        ];
        (known.into_iter())
            .find(|exit| Some(i64::from(exit.code())) == code)
            .unwrap_or(Self::Server)
    }

    /// Its name in `--json` errors (`"kind"`): `usage`, `server`, `timeout`, ...
    pub fn kind(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::ToolError => "tool_error",
            Self::Usage => "usage",
            Self::Server => "server",
            Self::Timeout => "timeout",
            Self::Parked => "parked",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Why a command failed, and the exit status that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The status the process exits with.
    pub exit: Exit,
    /// What went wrong, one line for a person, without the `mcp-cli: ` prefix.
    pub message: String,
    /// The command that gets past it, spelled only when printed: the run knows how it names
    /// the server, the code that failed does not.
    pub(crate) hint: Option<Hint>,
    /// A login started for the person to finish (`"login"` in the JSON error object), when
    /// the failure is a server that needs one.
    pub(crate) login: Option<serde_json::Value>,
}

impl Failure {
    /// A failure with this status and message, and no hint.
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self {
            exit,
            message: message.into(),
            hint: None,
            login: None,
        }
    }

    /// A failure of the person's own making (exit 2): bad flags, an unknown name, arguments
    /// that do not fit.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// The failure as the command line prints it: `mcp-cli: message`, or one JSON object
    /// under `--json`; its hint names servers as `naming` says.
    pub(crate) fn text(&self, json: bool, naming: &Naming) -> String {
        let hint = self.hint.as_ref().map(|hint| hint.text(naming));
        let message = format!("{}{}", self.message, hint.unwrap_or_default());
        if json {
            let mut error = serde_json::json!({
                "kind": self.exit.kind(),
                "exitCode": self.exit.code(),
                "message": message,
            });
            if let Some(login) = &self.login {
                error["login"] = login.clone();
            }
            serde_json::json!({ "error": error }).to_string()
        } else {
            format!("mcp-cli: {message}")
        }
    }

    /// The failure as a warning, for what went wrong without failing the command (a tool
    /// withheld, a listing cut): as [`text`](Self::text), but under `--json` a `warning`
    /// object, never an `error` beside a success.
    pub(crate) fn warning_text(&self, json: bool, naming: &Naming) -> String {
        if !json {
            return self.text(json, naming);
        }
        let hint = self.hint.as_ref().map(|hint| hint.text(naming));
        let message = format!("{}{}", self.message, hint.unwrap_or_default());
        let warning = serde_json::json!({ "warning": {
            "kind": self.exit.kind(),
            "message": message,
        }});
        warning.to_string()
    }

    /// Prints [`text`](Self::text) on stderr.
    pub(crate) fn report(&self, json: bool, naming: &Naming) {
        crate::output::diagnostic(&self.text(json, naming));
    }

    /// A failure of server `name`, classified by its cause.
    pub fn server(name: &str, error: &Error) -> Self {
        let exit = match error {
            _ if error.is_timeout() => Exit::Timeout,
            // The server judged the arguments invalid: the caller's to fix.
            Error::Request(RequestError::Remote(rpc)) if rpc.code == RpcError::INVALID_PARAMS => {
                Exit::Usage
            }
            // MCP's "resource not found": a URI the caller got wrong.
            Error::Request(RequestError::Remote(rpc))
                if rpc.code == RpcError::RESOURCE_NOT_FOUND =>
            {
                Exit::Usage
            }
            Error::Send(SendError::InvalidParams) => Exit::Usage,
            _ => Exit::Server,
        };
        let mut message = format!("server {name}: {error}");
        let hint = matches!(error, Error::Unauthorized { .. }).then(|| Hint::Auth {
            server: name.to_owned(),
        });
        if let Error::Disconnected(disconnect) = error
            && let CloseReason::HandshakeTimedOut { .. } = disconnect.reason
        {
            message.push_str(
                "\n(if it needs longer to start, a first download for instance, raise timeout_sec \
                 in its config entry, or set MCP_TIMEOUT in milliseconds)",
            );
        }
        Self {
            hint,
            ..Self::new(exit, message)
        }
    }
}

impl Failure {
    /// A failed `tools/call` of `tool` (its shown name), worded for the tool. A JSON-RPC error
    /// answering it is the tool failing (older servers report failures so): exit 1 with the
    /// server's words, unless it refuses the arguments (-32602), which is the caller's to fix.
    /// Any other failure is classified as every failure is.
    pub fn of_call(tool: &str, error: HubError) -> Self {
        let HubError::Server { error: cause, .. } = &error else {
            return Self::from(error);
        };
        match cause {
            Error::Request(RequestError::Remote(rpc)) if rpc.code == RpcError::INVALID_PARAMS => {
                Self::usage(format!(
                    "{tool}: the server refused the arguments: {}",
                    rpc.text()
                ))
            }
            // Its words name the links to open; then the call can go through.
            Error::Request(RequestError::Remote(rpc))
                if rpc.code == RpcError::URL_ELICITATION_REQUIRED =>
            {
                Self::new(
                    Exit::ToolError,
                    format!("{tool} could not run yet: {rpc}; open the link, then call it again"),
                )
            }
            Error::Request(RequestError::Remote(rpc)) => {
                Self::new(Exit::ToolError, format!("{tool} failed: {}", rpc.text()))
            }
            Error::Request(timeout @ RequestError::TimedOut { .. }) => Self::new(
                Exit::Timeout,
                format!(
                    "{tool}: {timeout}; allow it longer with --timeout SECS, or call_timeout_sec \
                     in the server's config entry"
                ),
            ),
            _ => Self::from(error),
        }
    }
}

impl From<HubError> for Failure {
    /// The caller's mistakes (names, policy) are usage errors; the server's failures are
    /// classified by their cause.
    fn from(error: HubError) -> Self {
        let failure = match &error {
            HubError::Server { server, error } => return Self::server(server, error),
            HubError::Unavailable {
                state: State::Failed,
                ..
            }
            | HubError::WrongProtocol { .. }
            | HubError::LauncherCacheRefused { .. }
            | HubError::ShuttingDown { .. }
            | HubError::TaskLost { .. } => Self::new(Exit::Server, error.to_string()),
            HubError::TaskFailed { .. } => Self::new(Exit::ToolError, error.to_string()),
            HubError::TaskCancelled { .. } => Self::new(Exit::Cancelled, error.to_string()),
            HubError::TaskWaitTimedOut { .. } => Self::new(Exit::Timeout, error.to_string()),
            HubError::OutputMismatch { .. } => Self::new(Exit::ToolError, error.to_string()),
            HubError::UnknownServer { .. }
            | HubError::AmbiguousServer { .. }
            | HubError::Unavailable { .. }
            | HubError::UnknownTool { .. }
            | HubError::UnknownPrompt { .. }
            | HubError::UnknownSkill { .. }
            | HubError::AmbiguousTool { .. }
            | HubError::ToolFiltered { .. }
            | HubError::ToolDenied { .. }
            | HubError::ToolWithheld { .. }
            | HubError::ToolFlagged { .. }
            | HubError::FeatureFlagged { .. }
            | HubError::ToolRejected { .. }
            | HubError::AnotherServer { .. }
            | HubError::ListingCapped { .. }
            | HubError::NotApproved { .. }
            | HubError::FormDeclined { .. } => Self::usage(error.to_string()),
        };
        Self {
            hint: Hint::of(&error),
            ..failure
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}
