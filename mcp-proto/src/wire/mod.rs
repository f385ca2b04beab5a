//! The wire: bytes to messages and back, nothing about the protocol's eras.

pub(crate) mod framing;
pub(crate) mod jsonrpc;
pub(crate) mod line_error;
pub(crate) mod sse;
pub(crate) mod stream_json;
