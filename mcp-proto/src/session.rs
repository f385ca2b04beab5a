//! What a Streamable HTTP server's refusal of a message that carried a session id means.

/// Whether the server refused a message carrying a session id because it no longer knows
/// that session, so that a new session should be started (once) and the message sent again:
/// a 404, as the specification says, or a 400 whose body names the session, as servers built
/// on the TypeScript SDK answer after a restart ("Bad Request: No valid session ID
/// provided"). Any other refusal is the message's own failure.
///
/// ```
/// use mcp_proto::session_lost;
/// let body = br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#;
/// assert!(session_lost(400, body));
/// assert!(session_lost(404, b""));
/// assert!(!session_lost(400, b"Bad Request: unknown tool"));
/// assert!(!session_lost(500, b"session store unavailable"));
/// ```
pub fn session_lost(status: u16, body: &[u8]) -> bool {
    let needle = b"session";
    match status {
        404 => true,
        400 => (body.windows(needle.len())).any(|window| window.eq_ignore_ascii_case(needle)),
        _ => false,
    }
}
