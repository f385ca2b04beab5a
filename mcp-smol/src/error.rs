//! What can go wrong: the core's errors as they are, plus what only the adapter knows (the
//! program that would not start, how the server ended).

use std::fmt;

use proto::{CloseReason, PageError, RequestError, SendError};

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The program is not on `PATH`.
    #[error("cannot start {program}: not found on PATH ({path})")]
    NotFound {
        /// As configured.
        program: String,
        /// The `PATH` searched.
        path: String,
    },
    /// The program was found but could not be started.
    #[error("cannot start {program}: {reason}")]
    Spawn {
        /// As configured.
        program: String,
        /// What the system said.
        reason: String,
    },
    /// The request failed: the server's error, a timeout, a cancellation, an unreadable answer.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The request could not be sent (bad params, a progress token in use).
    #[error(transparent)]
    Send(#[from] SendError),
    /// A listing was abandoned because the server would make it loop.
    #[error(transparent)]
    Paging(#[from] PageError),
    /// The connection is over; every call fails with this from then on.
    #[error("{0}")]
    Disconnected(Box<Disconnect>),
    /// An HTTP server refused us (401, or 403 for lack of scope) and the authorizer, if there
    /// was one, could not fix it.
    #[error(
        "{url} needs authorization (HTTP {status}){}",
        challenge_suffix(www_authenticate)
    )]
    Unauthorized {
        /// The endpoint that refused.
        url: String,
        /// 401 or 403.
        status: u16,
        /// The `WWW-Authenticate` header as sent.
        www_authenticate: Option<String>,
    },
    /// An HTTP exchange outside a connection failed ([`authorize::send`](crate::authorize::send)), or an HTTP
    /// server could not be reached at all (DNS, refused, TLS).
    #[error("{url}: {detail}")]
    Http {
        /// Where we tried to go.
        url: String,
        /// What went wrong, as a sentence.
        detail: String,
    },
}

fn challenge_suffix(www_authenticate: &Option<String>) -> String {
    match www_authenticate {
        Some(challenge) => format!("; it asks for: {challenge}"),
        None => String::new(),
    }
}

impl Error {
    /// The handshake or a request ran out of time.
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::Request(RequestError::TimedOut { .. }) => true,
            Self::Disconnected(d) => matches!(d.reason, CloseReason::HandshakeTimedOut { .. }),
            _ => false,
        }
    }

    /// The core's failure as this crate reports it: an ending of the connection becomes
    /// [`Error::Disconnected`], which the driver fills in with how the server ended.
    pub(crate) fn from_request(error: RequestError) -> Self {
        match error {
            RequestError::Closed(reason) => Self::Disconnected(Box::new(Disconnect::bare(reason))),
            other => Self::Request(other),
        }
    }
}

/// How a connection ended, with what the server left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnect {
    /// Why the core closed the connection.
    pub reason: CloseReason,
    /// Set when the server had exited by the time the connection closed.
    pub exit_status: Option<std::process::ExitStatus>,
    /// The last lines of the server's stderr written since the last time no request was left
    /// waiting for an answer: older ones went with work that went well, and would pass for
    /// the cause of this failure. (The server's log keeps them all.)
    pub stderr: Vec<String>,
    /// How many stdout lines were skipped as not JSON-RPC (banners, logs, broken lines).
    pub skipped_lines: u64,
    /// Why the last of them was skipped.
    pub last_skipped: Option<String>,
}

impl Disconnect {
    /// A disconnect known only by its reason.
    pub fn bare(reason: CloseReason) -> Self {
        Self {
            reason,
            exit_status: None,
            stderr: Vec::new(),
            skipped_lines: 0,
            last_skipped: None,
        }
    }

    /// What is known when the driver future was dropped before it could record an ending.
    pub(crate) fn driver_dropped() -> Self {
        Self::bare(CloseReason::Local)
    }
}

impl fmt::Display for Disconnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.reason, self.exit_status) {
            (CloseReason::Eof, Some(status)) => write!(f, "server exited ({status})")?,
            (CloseReason::Eof, None) => f.write_str("server closed its stdout")?,
            (reason, _) => write!(f, "{reason}")?,
        }
        // Noise on stdout often explains a failed start: a server logging to the wrong stream.
        if let Some(last) = &self.last_skipped {
            let count = self.skipped_lines;
            write!(f, "; {count} stdout line(s) skipped, the last: {last}")?;
        }
        if !self.stderr.is_empty() {
            f.write_str("; last stderr lines:")?;
            for line in &self.stderr {
                write!(f, "\n    {line}")?;
            }
        }
        Ok(())
    }
}
