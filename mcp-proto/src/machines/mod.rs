//! The machines, the top floor: the state that runs a connection, in either role and over
//! either transport, built from the model's types and the wire's messages. Every state
//! transition lives here.
//!
//! - `pending.rs`: the requests a connection waits on, for both roles
//! - `connection.rs` (and `connection/`): `Connection`, the client machine
//! - `streamable.rs` (and `streamable/`): `HttpConnection`, the HTTP transports around a
//!   `Connection`
//! - `server.rs` (and `server/`), `server_stateless.rs`: `ServerConnection`, the server role,
//!   and what it does in the stateless era
//! - `http_server.rs` (and `http_server/`): `HttpServer`, the server half of Streamable
//!   HTTP: which machine a host's HTTP request goes to, and how each answer goes back
//! - `task_watch.rs`: `TaskWatch`, a client following one task until it ends

pub(crate) mod connection;
pub(crate) mod http_server;
pub(crate) mod pending;
pub(crate) mod server;
pub(crate) mod server_stateless;
pub(crate) mod streamable;
pub(crate) mod task_watch;
