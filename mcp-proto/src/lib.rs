//! A sans-IO client for the Model Context Protocol: bytes from the server go in; bytes to
//! write, events and the next deadline come out.
//!
//! This crate does no I/O, spawns no threads, reads no clock and is not async. The caller owns
//! the server process and its pipes and passes the current time into every input, so the same
//! [`Connection`] runs under any runtime and in tests in virtual time.
//!
//! # The run loop
//!
//! 1. Create the connection with [`Connection::new`]. It queues its first message at once:
//!    the `server/discover` probe ([`Protocol::Auto`], the default), `server/discover` at a
//!    fixed stateless revision, or `initialize` at a fixed handshake revision (see
//!    [`Config::protocol`] and "The two eras" below).
//! 2. Write every line from [`Connection::poll_transmit`] to the server's stdin, in order.
//! 3. Handle every [`Event`] from [`Connection::poll_event`]: [`Event::Ready`] once the
//!    server is known (the handshake is done, or `server/discover` answered),
//!    [`Event::Response`] when a request ends (each ends exactly once; its result is a
//!    [`RawResult`], the server's text, to read into a type with [`FromResult::from_raw`] or
//!    pass on),
//!    [`Event::Notification`], [`Event::ServerRequest`] (only for the capabilities you
//!    declared, whether the server sent a request or a stateless-era `input_required`
//!    result; answer each with [`Connection::respond`]), [`Event::Malformed`] for skipped
//!    lines, and [`Event::Closed`] last of all.
//! 4. If [`Connection::is_closed`], stop: close the server's stdin and reap the process.
//! 5. Wait for the first of: bytes on the server's stdout, a command from your program, or the
//!    instant from [`Connection::poll_timeout`].
//! 6. Feed what woke you: [`Connection::handle_bytes`] (any fragment of the stream),
//!    [`Connection::handle_eof`] when stdout closes, [`Connection::handle_timeout`] when the
//!    deadline passed, or a command such as [`Connection::request`] with a [`Request`]. Go
//!    back to step 2.
//!
//! Commands may be issued before the handshake ends: the requests are held and written right
//! after `notifications/initialized`, while their deadlines already run.
//!
//! # The two eras
//!
//! The handshake era (2024-11-05 to 2025-11-25) opens with `initialize`; the stateless era
//! (2026-07-28) has no handshake: every request carries the revision, the client's capabilities and
//! info (and [`Config::log_level`]) in `params._meta`. [`Protocol::Auto`] finds out which one a
//! server speaks: it sends `server/discover` and holds every other request; a result (or a -32022
//! naming a stateless revision we speak, retried once) means the stateless era, any other error or
//! no answer within [`Config::handshake_timeout`] the handshake era, on the same connection (whose
//! `initialize`, if refused with a -32022 naming a stateless revision we speak, as a server too
//! slow for the probe does, gives way to `server/discover` in it); [`ServerInfo::fallback`] then
//! says which of the two it was. A server that closes its output on the probe ends the connection
//! with [`CloseReason::EndedOnProbe`]: start it again at a handshake revision. A fixed stateless
//! revision (a verdict cached from an earlier probe) costs no round trip: `server/discover` goes
//! first and requests right behind it; if it is refused, the connection closes with
//! [`CloseReason::NotStateless`]. [`Connection::era`] tells the era.
//!
//! In the stateless era `ping` and `logging/setLevel` are refused at the call
//! ([`SendError::NotInEra`]); a result's `resultType` is checked, and the members that
//! describe the exchange (`resultType: "complete"`, `_meta`'s
//! `io.modelcontextprotocol/serverInfo`) are read out of it, so a result reads as a
//! handshake-era server would send it; `tools/call`,
//! `prompts/get` and `resources/read` may take several rounds (`input_required`: each
//! input request comes as an [`Event::ServerRequest`] naming the request, answered with
//! [`Connection::respond`] like any other; then the request goes again under a new wire id
//! with the answers and the server's `requestState`, and the caller keeps one
//! [`RequestId`]); [`Request::listen`] opens a subscription, which
//! has no deadline once acknowledged. Listings and `resources/read` carry a [`CacheHint`].
//!
//! # Tasks
//!
//! A `tools/call` may run in the background as a task: in the stateless era when the caller
//! declares [`ClientCapabilities::tasks`] and the server decides so, in the handshake era when
//! the call asks with [`Request::as_task`]. [`Task::created_by`](tasks::Task::created_by)
//! reads the task from the call's result; a [`TaskWatch`](tasks::TaskWatch) then says what
//! to send (`tasks/get`, `tasks/result`, `tasks/update`) and when, at the server's poll
//! interval (kept between 100 ms and 30 s), until the task ends. The [`tasks`] module holds
//! them.
//!
//! # Guarantees
//!
//! - A panic means a bug in this crate, never bad input: any bytes from the server are either
//!   used, or skipped and reported as [`Event::Malformed`].
//! - Memory for a partial line is bounded by [`Config::max_line_len`] plus one input chunk, and
//!   input is scanned once, so a huge line in small chunks costs linear time.
//! - A response that cannot be used never leaves its request to time out: one that grows past
//!   [`Config::max_line_len`] fails it with [`RequestError::ResponseTooLarge`] as it crosses the
//!   limit (or, if its `id` comes last, at its end), one that is not UTF-8, JSON or JSON-RPC
//!   with [`RequestError::InvalidResponse`], whenever its `id` shows at its start or end.
//! - Closing is sticky: after [`Event::Closed`], inputs are ignored and commands return
//!   [`SendError::Closed`] with the same reason.
//! - Server requests other than `ping` are refused with error -32601 unless the caller declared
//!   the matching capability in [`Config::capabilities`]: then they arrive as
//!   [`Event::ServerRequest`], answered with [`Connection::respond`] or refused when
//!   [`Config::server_request_timeout`] passes first. The connection stays healthy either way.
//!
//! # HTTP
//!
//! [`HttpConnection`](http::HttpConnection) wraps a [`Connection`] for the Streamable HTTP
//! transport and the older HTTP+SSE one: instead of lines to write, it asks for HTTP exchanges
//! ([`Exchange`](http::Exchange): a POST or a GET with the protocol's headers), and the caller
//! feeds back what each brought ([`Reply`](http::Reply): a status, a session id, a message, a
//! stream's end). It decides what those mean: the session's headers, nothing overtaking
//! `notifications/initialized`, when the server's own stream opens, fallback to HTTP+SSE, what a
//! 404 means, resumption budgets; in the stateless era, which era a refusal of the probe means, the
//! headers that mirror each request (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) and the tools whose
//! annotations make them unusable. The caller never looks inside a message.
//!
//! # The server role
//!
//! [`ServerConnection`](server::ServerConnection) is the peer of [`Connection`], for a program that
//! stands as an MCP server before a host (a gateway). It runs the same loop with
//! [`ServerEvent`](server::ServerEvent)s: it answers `initialize` itself, refuses every request but
//! `ping` until `notifications/initialized`, and hands the host's requests over as
//! [`ServerEvent::Request`](server::ServerEvent::Request), to be answered with
//! [`ServerConnection::respond`](server::ServerConnection::respond);
//! [`ServerEvent::Cancelled`](server::ServerEvent::Cancelled) says the host gave one up. Bad lines
//! are answered with JSON-RPC errors (-32700, -32600) and skipped, and at most
//! [`ServerConfig::max_open_requests`](server::ServerConfig::max_open_requests) requests are open
//! at once. A stateless-era host needs no handshake: it answers `server/discover`, reads each
//! request's `_meta` (its revision, -32022 for one we do not speak, and the host's capabilities in
//! [`HostRequest::client`](server::HostRequest::client)), serves `subscriptions/listen` (what
//! [`ServerConnection::notify`](server::ServerConnection::notify) sends goes to the subscriptions
//! that asked for it), and takes [`InputRequired`](server::InputRequired) results whose retries
//! [`HostInput`](server::HostInput) reads.
//!
//! # Inside
//!
//! The crate's files stand on three floors, each importing only the floors below it, with no
//! circle among the files of one floor (`tests/floors.rs` checks both from the source): the
//! **wire** (`src/wire/`: lines, Server-Sent Events, the streaming JSON parser, JSON-RPC;
//! nothing about eras), the **model** (`src/model/`: tools, content, features, listings,
//! requests and their params, results kept as text, tasks, revisions, errors) and the
//! **machines** (`src/machines/`: [`Connection`], [`HttpConnection`](http::HttpConnection),
//! [`ServerConnection`](server::ServerConnection), [`TaskWatch`](tasks::TaskWatch)). This
//! file stands on top of them and says what is public: the run loop's vocabulary and the
//! typed model at the root, the HTTP transport in [`http`], the server role in [`server`],
//! tasks in [`tasks`]. The floors' own modules stay private.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use mcp_proto::{Config, Connection, Event, Protocol};
//!
//! # fn run(start: Instant) {
//! let config = Config { protocol: Protocol::Revision("2025-11-25"), ..Config::default() };
//! let mut conn = Connection::new(start, config);
//! let initialize = conn.poll_transmit().unwrap();
//! let initialize: serde_json::Value = serde_json::from_slice(&initialize).unwrap();
//! assert_eq!(initialize["method"], "initialize");
//!
//! // The server's answer arrives in two fragments.
//! let later = start + Duration::from_millis(5);
//! conn.handle_bytes(later, br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","#);
//! conn.handle_bytes(later, br#""capabilities":{},"serverInfo":{"name":"demo","version":"1"}}}"#);
//! conn.handle_bytes(later, b"\n");
//! assert!(matches!(conn.poll_event(), Some(Event::Ready(info)) if info.server.name == "demo"));
//! let initialized = conn.poll_transmit().unwrap();
//! assert!(initialized.ends_with(b"\n"));
//! let initialized: serde_json::Value = serde_json::from_slice(&initialized).unwrap();
//! assert_eq!(initialized["method"], "notifications/initialized");
//! # }
//! ```

#![warn(missing_docs)]

mod machines;
mod model;
mod wire;

// The run loop's vocabulary.
pub use machines::connection::{
    ClientCapabilities, Config, Connection, Event, ServerRequest, ServerRequestId, Stats,
};
pub use model::error::{CloseReason, ErrorKind, RequestError, SendError};
pub use model::params::PROTOCOL_VERSION as META_PROTOCOL_VERSION;
pub use model::raw_result::RawResult;
pub use model::request::{FromResult, Request, RequestId};
pub use model::versions::{
    Era, LATEST_PROTOCOL_VERSION, LATEST_STATELESS_VERSION, Protocol, SUPPORTED_PROTOCOL_VERSIONS,
    UnknownRevision,
};
pub use wire::jsonrpc::RpcError;
pub use wire::line_error::LineError;

// The typed model.
pub use model::capabilities::{
    ListCapability, ResourcesCapability, ServerCapabilities, SkillsCapability, TASKS_EXTENSION,
    TasksCapability,
};
pub use model::features::{
    CompleteResult, CompletionRef, ElicitResult, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, Prompt, PromptArgument, PromptMessage,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
pub use model::listing::{
    CacheHint, CacheScope, DEFAULT_MAX_PAGES, ListResult, Listed, Listing, PageError, Pager,
};
pub use model::stateless::ListenFilter;
pub use model::types::{
    CallToolResult, Content, Fallback, Implementation, ListToolsResult, LogMessage, Notification,
    Progress, ServerInfo, Tool,
};

/// Tasks: a `tools/call` that runs in the background, in either era, and
/// [`TaskWatch`](tasks::TaskWatch), which follows one until it ends.
pub mod tasks {
    pub use crate::machines::task_watch::{TaskEnd, TaskStep, TaskWatch};
    pub use crate::model::tasks::{STATUS_NOTIFICATION, Task, TaskStatus};
}

/// The skills extension (SEP-2640): the skills a server offers, each a folder of files read as
/// resources, and what their entries promise of those files.
pub mod skills {
    pub use crate::model::skills::{
        GetSkillResult, MANIFEST, SKILLS_EXTENSION, Skill, SkillFile, SkillResources,
    };
}

/// The Streamable HTTP transport and the older HTTP+SSE one, client side:
/// [`HttpConnection`](http::HttpConnection) and the exchanges it asks for.
pub mod http {
    pub use crate::machines::streamable::{
        Affected, Answer, Exchange, ExchangeId, Get, HttpConnection, HttpTransport, PIECES_FROM,
        Post, Reply, session_lost,
    };
    pub use crate::model::headers::{HeaderRule, InvalidHeaderAnnotation, RejectedTool};
    pub use crate::wire::sse::{SseDecoder, SseEvent, SsePiece, SseTooLong};
}

/// The server role, for a program that stands as an MCP server before a host (a gateway):
/// [`ServerConnection`](server::ServerConnection).
pub mod server {
    pub use crate::machines::server::{
        ClientInfo, HostMessage, HostRequest, HostRequestId, ServerConfig, ServerConnection,
        ServerEvent,
    };
    pub use crate::machines::server_stateless::{HostInput, InputRequired};

    /// The server half of Streamable HTTP: [`HttpServer`](http::HttpServer) says which machine a host's HTTP
    /// request goes to and how each message a machine writes goes back.
    pub mod http {
        pub use crate::machines::http_server::{
            Abandon, ExchangeId, HttpLimits, HttpRequest, HttpResponse, HttpServer, MachineId,
            Part, Routed, Written, event,
        };
    }
}

/// The wire decoders the connection runs on, public only for the fuzz targets (the `fuzzing`
/// feature): no promise is made about them.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod wire_for_fuzzing {
    pub use crate::wire::framing::LineDecoder;
    pub use crate::wire::stream_json::JsonStream;
}
