//! The wire, the bottom floor: bytes to messages and back. It knows JSON-RPC and how lines and
//! event streams are cut, and nothing about the protocol's eras; where a message carries what
//! an era adds, the floor above hands it a hook ([`jsonrpc::ResponseResult`] to read a
//! result, [`jsonrpc::RequestParams::spliced`] to write a request's params).
//!
//! - `line_error.rs`: `LineError`, why a line could not be used, below everything else here
//! - `answered.rs`: whom a message answers, its top-level `id` read from its first or last
//!   bytes, for a line that cannot be used
//! - `stream_json.rs`: `JsonStream`, one JSON text parsed as its bytes arrive
//! - `framing.rs`: `LineDecoder`, the peer's output cut into bounded lines, a long one parsed
//!   as it arrives; for the connection, also whom an unusable line answers, as soon as that
//!   shows (the `id` at a line's head the moment it grows past the limit, or at the head or
//!   the end of one that is not JSON), so that its request fails at once
//! - `sse.rs`: `SseDecoder`, Server-Sent Events
//! - `jsonrpc.rs`: JSON-RPC messages classified and encoded, `RpcError`, ids as peers echo them

pub(crate) mod answered;
pub(crate) mod framing;
pub(crate) mod jsonrpc;
pub(crate) mod line_error;
pub(crate) mod sse;
pub(crate) mod stream_json;
