//! Why a line from the peer could not be used: what the framing and the decoding of a line
//! report, below both.

use serde_json::Value;

/// Why a line could not be used. Only the line decoder produces `TooLong` (a line over the
/// limit); the rest come from decoding a complete line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// A line grew past the configured maximum; it was discarded up to its newline, and is
    /// reported once that newline arrives. (A connection fails the request such a line
    /// answers earlier, as soon as the limit is crossed, when the line's first bytes name it.)
    TooLong {
        /// [`Config::max_line_len`](crate::Config::max_line_len).
        limit: usize,
        /// The line's length, without its terminator.
        size: usize,
        /// The message's top-level `id`, when it could be found at the line's start or end:
        /// the request or response that was too large.
        id: Option<Value>,
    },
    /// The line is not valid UTF-8.
    NotUtf8,
    /// The line is UTF-8 but not JSON (a banner, a log line, a truncated message).
    NotJson {
        /// The parser's complaint and the start of the line.
        detail: String,
    },
    /// The line is JSON but not a JSON-RPC 2.0 message.
    NotJsonRpc {
        /// What is missing or wrong.
        detail: String,
    },
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLong { limit, size, .. } => {
                write!(
                    f,
                    "line of {size} bytes is over the limit of {limit}, discarded"
                )
            }
            Self::NotUtf8 => f.write_str("line is not valid UTF-8"),
            Self::NotJson { detail } => write!(f, "line is not JSON: {detail}"),
            Self::NotJsonRpc { detail } => write!(f, "line is not a JSON-RPC message: {detail}"),
        }
    }
}

impl std::error::Error for LineError {}

/// The start of a line, for error messages about it.
pub(crate) fn preview(line: &str) -> String {
    const MAX: usize = 60;
    match line.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}...", &line[..end]),
        None => line.to_owned(),
    }
}
