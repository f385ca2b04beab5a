//! The model, the middle floor: what the messages mean, as types, in both eras. It reads and
//! writes values and JSON text, and imports only the wire; no state lives here.
//!
//! - `versions.rs`: the revisions we speak, `Era`, `Protocol`
//! - `error.rs`: errors by who is at fault, and what the protocol's error codes mean
//! - `result_members.rs`: what a stateless-era result says of the exchange (`resultType`,
//!   `serverInfo`), read out as its line is decoded
//! - `raw_result.rs`: `RawResult`, a result kept as the server's text
//! - `request.rs`: `Request` and `RequestId`, and `FromResult`, how a result reads as a type
//! - `params.rs`: a request's params as they go on the wire, with the stateless era's `_meta`
//! - `headers.rs`: the HTTP headers a stateless-era request mirrors (`Mcp-Name`, `Mcp-Param-*`)
//! - `listing.rs`: paginated listings, `Pager`, cache hints
//! - `capabilities.rs`: the server's capabilities, read and written
//! - `types.rs`: server info, tools, tool results and their content, notifications
//! - `tasks.rs`: a task in both eras, and the requests that drive one
//! - `stateless.rs`: the stateless era's messages: `server/discover`, input rounds,
//!   `subscriptions/listen`
//! - `features.rs`: resources, prompts and completion
//! - `skills.rs`: the skills extension's entries, `skills/list` and `skills/get`

pub(crate) mod capabilities;
pub(crate) mod error;
pub(crate) mod features;
pub(crate) mod headers;
pub(crate) mod listing;
pub(crate) mod params;
pub(crate) mod raw_result;
pub(crate) mod request;
pub(crate) mod result_members;
pub(crate) mod skills;
pub(crate) mod stateless;
pub(crate) mod tasks;
pub(crate) mod types;
pub(crate) mod versions;
