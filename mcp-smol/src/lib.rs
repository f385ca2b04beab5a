//! Drives an [`mcp_proto`] connection over a child process's stdio (see the crate README).
