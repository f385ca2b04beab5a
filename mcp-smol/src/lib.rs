//! Runs an MCP server as a child process and drives an [`mcp_proto`](proto) connection over its stdio.
//!
//! [`start`] opens a [`Transport`] (a server to spawn, a stream someone else opened, a remote
//! server over HTTP) and returns a [`Client`] handle and a [`Driver`] future. The driver owns
//! the connection and its transport (a child and its pipes, a stream, HTTP exchanges), and
//! runs the same loop over each: it waits for exactly one of the server, an operation from a
//! handle or the connection's next deadline, then feeds the connection and hands out what it
//! says. Run it on any executor (smol, tokio, a plain `block_on`). Handles are cheap clones
//! that send it operations and await the answers; over every transport, a caller waiting
//! alone drives the connection itself, on its own thread, so its answer crosses no thread.
//! [`connect`] does both and runs the driver, when no caller does, on a background thread of
//! this crate's.
//!
//! ```no_run
//! # async_io::block_on(async {
//! let command = mcp_smol::ServerCommand::new("npx")
//!     .args(["-y", "@modelcontextprotocol/server-everything"]);
//! let client = mcp_smol::connect(&command, mcp_smol::Options::default()).await?;
//! let result = client.call_tool("echo", serde_json::json!({"message": "hi"})).await?;
//! println!("{:?}", result.content);
//! client.close().await;
//! # Ok::<_, mcp_smol::Error>(()) });
//! ```
//!
//! Every request goes through [`Client::request`], which takes a [`proto::Request`] and
//! returns a [`Call`]: the options of that one call (a timeout of its own or none at all, an
//! inbox for its progress), then awaited for the result read as the request's type, or
//! [`Call::raw`] for it unread, as the server sent it:
//!
//! ```no_run
//! # async fn demo(client: mcp_smol::Client) -> Result<(), mcp_smol::Error> {
//! use std::time::Duration;
//! use mcp_smol::proto::Request;
//! let call = Request::call_tool("slow", serde_json::json!({}));
//! let result = client.request(call).timeout(Duration::from_secs(300)).await?;
//! let tools = client.request(Request::list_tools(None)).no_timeout().raw().await?;
//! println!("{}", tools.json());
//! # Ok(()) }
//! ```
//!
//! Either era of the protocol by default ([`proto::Protocol::Auto`] in
//! [`Options::core`](Options)): a `server/discover` probe, then the stateless era (2026-07-28)
//! or the `initialize` handshake; a fixed revision skips the probe. [`connect`] starts a server
//! that exits on the probe once more in the handshake era; [`start`] leaves that to its caller.
//! What a server asks (its requests, and a stateless-era `input_required` result's input
//! requests alike) reaches [`Client::server_requests`] for the capabilities declared.
//!
//! Over a stream someone else opened (a Unix socket), `start((reader, writer), options)`.
//! Over HTTP, `start(HttpServer::new(url), options)`: Streamable HTTP, or the older HTTP+SSE
//! transport, over TLS with the system's roots; an [`Authorizer`] supplied by the host answers
//! 401s, and makes its own OAuth exchanges through [`authorize::send`] with the same TLS setup.
//!
//! The other role, too: [`serve`] drives a [`proto::server::ServerConnection`] over any byte stream
//! (our own stdin and stdout, a Unix socket), for a program that stands as an MCP server.
//!
//! Process hygiene: the server leads its own process group, spawned through `async-process`
//! whose reaper our driver drives (no thread waits on a server). Closing (or dropping the
//! last handle) closes its stdin, waits [`Options::grace_period`], sends SIGTERM to the group,
//! waits [`Options::term_period`], sends SIGKILL to the group and reaps it, so wrappers such
//! as `npx` leave nothing behind; [`Client::terminate`] skips the grace period. Processes that
//! leave the group themselves (`setsid`, a double fork) are found by a mark in their
//! environment and killed too; [`adopt_orphans`] makes the process their reaper, so that they
//! are reaped before it exits.

#![warn(missing_docs)]

mod background;
mod buffer;
mod call;
mod client;
mod driver;
mod error;
mod http;
mod oneshot;
mod options;
mod pipe;
mod process;
mod queue;
mod sandbox;
mod serve;
mod task;
mod tree;

pub use call::{Call, CallFuture};
pub use client::{Client, Transport, connect, start};
pub use driver::{Driver, ProgressInbox};
pub use error::{Disconnect, Error};
pub use http::{
    Authorizer, Challenge, HttpServer, HttpTransport, HyperIo, Outbound, ReadWhenReady,
};
pub use options::Options;
pub use process::{MINIMAL_ENVIRONMENT, ServerCommand, StderrSink};
pub use proto;
pub use proto::Notification;
pub use sandbox::Sandbox;
/// The JSON values requests and results are made of, so an embedder needs no dependency of
/// its own for them.
pub use serde_json;
pub use serve::{ServeDriver, Server, serve, serve_messages};
pub use task::TaskInput;
pub use tree::adopt_orphans;

/// What an [`Authorizer`] needs beyond the connection: one plain HTTP(S) exchange at a time
/// (OAuth metadata, registration, tokens) with the transport's TLS setup, so the host does not
/// build a second HTTP client. Not a general HTTP client: no redirects, bodies up to 1 MiB
/// (`send_up_to` for a larger one, a host's download).
pub mod authorize {
    pub use crate::http::{Request, Response, send, send_up_to};
}
