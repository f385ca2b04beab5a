//! The machines: the state that runs a connection, in either role, over either transport.

pub(crate) mod connection;
pub(crate) mod pending;
pub(crate) mod server;
pub(crate) mod server_stateless;
pub(crate) mod streamable;
pub(crate) mod task_watch;
