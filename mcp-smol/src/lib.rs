//! Runs an MCP server as a child process and drives an [`mcp_proto`] connection over its stdio.
//!
//! [`start`] spawns the server and returns a [`Client`] handle and a [`Driver`] future. The
//! driver owns the connection, the child and its pipes; run it on any executor (smol, tokio, a
//! plain `block_on`). Handles are cheap clones that send it operations and await the answers.
//! [`connect`] does both and runs the driver on smol's global executor.
//!
//! ```no_run
//! # smol::block_on(async {
//! let command = mcp_smol::ServerCommand::new("npx")
//!     .args(["-y", "@modelcontextprotocol/server-everything"]);
//! let client = mcp_smol::connect(&command, mcp_smol::Options::default()).await?;
//! let result = client.call_tool("echo", serde_json::json!({"message": "hi"})).await?;
//! println!("{:?}", result.content);
//! client.close().await;
//! # Ok::<_, mcp_smol::Error>(()) });
//! ```
//!
//! Process hygiene: the server leads its own process group. Closing (or dropping the last
//! handle) closes its stdin, waits [`Options::grace_period`], sends SIGTERM to the group, waits
//! [`Options::term_period`], sends SIGKILL to the group and reaps it, so wrappers such as `npx`
//! leave nothing behind. Processes that leave the group themselves (`setsid`) are out of reach.

mod driver;
mod process;

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use proto::{CallToolResult, CloseReason, RpcError, ServerInfo, Tool, ToolPager};
use serde_json::{Value, json};
use smol::channel::{Receiver, Sender};

pub use driver::Driver;
pub use process::{ServerCommand, StderrSink};
pub use proto;

/// How to run one server.
pub struct Options {
    /// Spawn plus `initialize` must finish within this.
    pub handshake_timeout: Duration,
    /// Default per-request deadline, restarted by progress notifications.
    pub request_timeout: Duration,
    /// Cap on a request's total time however much progress it reports.
    pub max_request_time: Duration,
    /// How long the server gets to exit after its stdin closes, before SIGTERM.
    pub grace_period: Duration,
    /// How long after SIGTERM before SIGKILL.
    pub term_period: Duration,
    pub max_line_len: usize,
    pub client_name: String,
    pub client_version: String,
    /// Receives a copy of everything the server writes to stderr.
    pub stderr_sink: Option<StderrSink>,
}

impl Default for Options {
    fn default() -> Self {
        let core = proto::Config::default();
        Self {
            handshake_timeout: core.handshake_timeout,
            request_timeout: core.request_timeout,
            max_request_time: core.max_request_time,
            grace_period: Duration::from_secs(2),
            term_period: Duration::from_secs(2),
            max_line_len: core.max_line_len,
            client_name: "mcp-smol".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            stderr_sink: None,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("handshake_timeout", &self.handshake_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("grace_period", &self.grace_period)
            .field("term_period", &self.term_period)
            .field("stderr_sink", &self.stderr_sink.is_some())
            .finish_non_exhaustive()
    }
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("cannot start {program}: not found on PATH ({path})")]
    NotFound { program: String, path: String },
    #[error("cannot start {program}: {reason}")]
    Spawn { program: String, reason: String },
    /// The connection is over; every call fails with this from then on.
    #[error("{0}")]
    Disconnected(Box<Disconnect>),
    #[error("server returned an error: {0}")]
    Remote(RpcError),
    #[error("no response within {:.1}s", after.as_secs_f64())]
    TimedOut { after: Duration },
    #[error("request cancelled")]
    Cancelled,
    #[error("server sent an invalid response: {0}")]
    InvalidResponse(String),
    #[error("params must be a JSON object or array, and tool arguments an object")]
    InvalidParams,
    #[error("progressToken is already used by a pending request")]
    ProgressTokenInUse,
    #[error(transparent)]
    Paging(#[from] proto::PageError),
}

impl Error {
    /// The handshake or a request ran out of time.
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::TimedOut { .. } => true,
            Self::Disconnected(d) => matches!(d.reason, CloseReason::HandshakeTimedOut { .. }),
            _ => false,
        }
    }
}

/// How a connection ended, with what the server left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnect {
    pub reason: CloseReason,
    /// Set when the server had exited by the time the connection closed.
    pub exit_status: Option<std::process::ExitStatus>,
    /// The last lines of the server's stderr.
    pub stderr: Vec<String>,
    /// How many stdout lines were skipped as not JSON-RPC (banners, logs, broken lines).
    pub skipped_lines: u64,
    /// Why the last of them was skipped.
    pub last_skipped: Option<String>,
}

impl Disconnect {
    /// A disconnect known only by its reason.
    fn bare(reason: CloseReason) -> Self {
        Self {
            reason,
            exit_status: None,
            stderr: Vec::new(),
            skipped_lines: 0,
            last_skipped: None,
        }
    }

    /// What is known when the driver future was dropped before it could record an ending.
    fn driver_dropped() -> Self {
        Self::bare(CloseReason::Local)
    }
}

impl fmt::Display for Disconnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.reason, self.exit_status) {
            (CloseReason::Eof, Some(status)) => write!(f, "server exited ({status})")?,
            (CloseReason::Eof, None) => f.write_str("server closed its stdout")?,
            (reason, _) => write!(f, "{reason}")?,
        }
        // Noise on stdout often explains a failed start: a server logging to the wrong stream.
        if let Some(last) = &self.last_skipped {
            let count = self.skipped_lines;
            write!(f, "; {count} stdout line(s) skipped, the last: {last}")?;
        }
        if !self.stderr.is_empty() {
            f.write_str("; last stderr lines:")?;
            for line in &self.stderr {
                write!(f, "\n    {line}")?;
            }
        }
        Ok(())
    }
}

/// A notification from the server (progress, log message, list change, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub method: String,
    pub params: Option<Value>,
}

type Reply<T> = Sender<Result<T, Error>>;

/// What a handle asks of the driver.
enum Op {
    Request {
        method: String,
        params: Option<Value>,
        timeout: Option<Duration>,
        reply: Reply<Value>,
    },
    CallTool {
        name: String,
        arguments: Value,
        timeout: Option<Duration>,
        reply: Reply<Value>,
    },
    WaitReady(Reply<ServerInfo>),
    Subscribe(Sender<Notification>),
    /// A caller stopped waiting for an answer: cancel the requests nobody waits for.
    Abandoned,
    Close,
}

impl Op {
    /// Answers an operation the driver can no longer carry out.
    fn fail(self, error: Error) {
        match self {
            Op::Request { reply, .. } | Op::CallTool { reply, .. } => {
                _ = reply.try_send(Err(error))
            }
            Op::WaitReady(reply) => _ = reply.try_send(Err(error)),
            Op::Subscribe(_) | Op::Abandoned | Op::Close => {}
        }
    }
}

/// A caller waiting for its answer. Dropped while still waiting, it closes the answer channel
/// first and then tells the driver, which cancels every request whose channel is closed.
struct Waiting<'a, T> {
    answer: Option<Receiver<Result<T, Error>>>,
    ops: &'a Sender<Op>,
}

impl<T> Drop for Waiting<'_, T> {
    fn drop(&mut self) {
        if let Some(answer) = self.answer.take() {
            drop(answer);
            // The channel is unbounded, so this never waits; a stopped driver needs no telling.
            let _ = self.ops.try_send(Op::Abandoned);
        }
    }
}

/// State the handles read without asking the driver.
struct Shared {
    pid: u32,
    /// Set once, before the driver stops taking operations.
    disconnect: OnceLock<Disconnect>,
    stderr: Arc<Mutex<process::StderrTail>>,
    /// Closed by the driver when the server has been reaped.
    done: Receiver<()>,
}

/// A cheap, cloneable handle to one server connection.
#[derive(Clone)]
pub struct Client {
    ops: Sender<Op>,
    shared: Arc<Shared>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("pid", &self.shared.pid)
            .finish()
    }
}

/// Spawns the server and returns a handle and the driver future, which must be polled for
/// anything to happen. The handshake starts at once; calls made before it ends are held.
pub fn start(command: &ServerCommand, options: Options) -> Result<(Client, Driver), Error> {
    driver::start(command, options)
}

/// Spawns the server, runs its driver on smol's global executor and completes the handshake.
pub async fn connect(command: &ServerCommand, options: Options) -> Result<Client, Error> {
    let (client, driver) = start(command, options)?;
    smol::spawn(driver).detach();
    match client.wait_ready().await {
        Ok(_) => Ok(client),
        Err(error) => {
            client.close().await;
            Err(error)
        }
    }
}

impl Client {
    /// The server's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.shared.pid
    }

    /// The last lines the server wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        match self.shared.stderr.lock() {
            Ok(tail) => tail.lines(),
            Err(_) => Vec::new(),
        }
    }

    /// Waits for the handshake; returns what the server said about itself.
    pub async fn wait_ready(&self) -> Result<ServerInfo, Error> {
        self.ask(Op::WaitReady).await
    }

    /// Lists every tool, following `tools/list` pages (at most
    /// [`ToolPager::DEFAULT_MAX_PAGES`], and never the same cursor twice).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        let mut pager = ToolPager::default();
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.map(|cursor| json!({ "cursor": cursor }));
            let page = self.request("tools/list", params).await?;
            let page = proto::ListToolsResult::from_value(page)
                .map_err(|error| Error::InvalidResponse(format!("tools/list: {error}")))?;
            cursor = pager.add_page(page)?;
            if cursor.is_none() {
                return Ok(pager.into_tools());
            }
        }
    }

    /// Calls a tool with the default timeout. A result with `is_error` is still `Ok`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call(name, arguments, None).await
    }

    /// Calls a tool; `timeout` replaces the default and is restarted by progress.
    pub async fn call_tool_with_timeout(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<CallToolResult, Error> {
        self.call(name, arguments, Some(timeout)).await
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<CallToolResult, Error> {
        let result = self.call_tool_raw(name, arguments, timeout).await?;
        CallToolResult::from_value(result)
            .map_err(|error| Error::InvalidResponse(format!("tools/call: {error}")))
    }

    /// Calls a tool and returns the result object undecoded (for callers that print it whole).
    /// `timeout`, if given, replaces the default.
    pub async fn call_tool_raw(
        &self,
        name: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, Error> {
        self.ask(|reply| Op::CallTool {
            name: name.to_owned(),
            arguments,
            timeout,
            reply,
        })
        .await
    }

    /// Sends any request and returns its raw result.
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, Error> {
        self.request_with_timeout(method, params, None).await
    }

    pub async fn request_with_timeout(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Option<Duration>,
    ) -> Result<Value, Error> {
        self.ask(|reply| Op::Request {
            method: method.to_owned(),
            params,
            timeout,
            reply,
        })
        .await
    }

    /// A stream of the server's notifications from now on. It holds the latest 1024; when the
    /// receiver falls further behind, newer ones are dropped rather than blocking the driver.
    pub async fn notifications(&self) -> Receiver<Notification> {
        let (sender, receiver) = smol::channel::bounded(1024);
        let _ = self.ops.send(Op::Subscribe(sender)).await;
        receiver
    }

    /// Closes the connection and waits until the server process has been reaped.
    pub async fn close(&self) {
        let _ = self.ops.send(Op::Close).await;
        let _ = self.shared.done.recv().await;
    }

    /// How the connection ended, if it has.
    pub fn disconnect(&self) -> Option<Disconnect> {
        self.shared.disconnect.get().cloned()
    }

    async fn ask<T>(&self, op: impl FnOnce(Reply<T>) -> Op) -> Result<T, Error> {
        let (reply, answer) = smol::channel::bounded(1);
        if self.ops.send(op(reply)).await.is_ok() {
            // A caller that drops this future (a timeout of its own, a select) stops waiting:
            // the server is told to stop working on it too.
            let mut waiting = Waiting {
                answer: Some(answer),
                ops: &self.ops,
            };
            let answered = match &waiting.answer {
                Some(answer) => answer.recv().await,
                None => Err(smol::channel::RecvError),
            };
            waiting.answer = None;
            if let Ok(result) = answered {
                return result;
            }
        }
        // The driver has stopped: it recorded why before it did, unless it was dropped.
        let disconnect = self.disconnect().unwrap_or_else(Disconnect::driver_dropped);
        Err(Error::Disconnected(Box::new(disconnect)))
    }
}
