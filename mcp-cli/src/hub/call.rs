//! Calling a tool: by the name a model gives or by a catalogue entry, with per-call options,
//! through the one policy gate.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use mcp_smol::ProgressInbox;
use mcp_smol::proto::{Progress, RawResult, Request, RequestError, tasks::Task};
use serde_json::{Map, Value};

use crate::hub::{Hub, HubError, Started, TaskHandle, ToolEntry};

/// The tool a [`Call`] calls: a qualified name (`SERVER__TOOL` as the catalogue shows it, or
/// `SERVER.TOOL`), or an entry found before. Made from `&str`, `&String` or `&ToolEntry`.
#[derive(Debug, Clone, Copy)]
pub enum ToolRef<'a> {
    /// A qualified name, looked up when the call starts.
    Name(&'a str),
    /// An entry from the catalogue or [`Hub::find`]; looked up again when the call starts.
    Entry(&'a ToolEntry),
}

impl<'a> From<&'a str> for ToolRef<'a> {
    fn from(name: &'a str) -> Self {
        Self::Name(name)
    }
}

impl<'a> From<&'a String> for ToolRef<'a> {
    fn from(name: &'a String) -> Self {
        Self::Name(name)
    }
}

impl<'a> From<&'a ToolEntry> for ToolRef<'a> {
    fn from(entry: &'a ToolEntry) -> Self {
        Self::Entry(entry)
    }
}

type OnProgress<'a> = Box<dyn Fn(Progress) + Send + Sync + 'a>;
type OnTask<'a> = Box<dyn Fn(&Task) + Send + Sync + 'a>;

/// One tool call, made by [`Hub::call`]: set its options, then `.await` it.
///
/// Dropping it before it is awaited does nothing. Dropping the awaited future (a `select!`, a
/// timeout of the caller's own, an aborted task) stops the call where it is: before the
/// request is sent (while the server starts, or an `ask` handler decides) nothing is sent;
/// once it is sent, the server is told with `notifications/cancelled` and the answer, if it
/// still comes, is dropped. The server keeps running for other calls.
#[must_use = "a call does nothing until it is awaited"]
pub struct Call<'a> {
    hub: &'a Hub,
    tool: ToolRef<'a>,
    arguments: Value,
    timeout: Option<Duration>,
    meta: Map<String, Value>,
    on_progress: Option<OnProgress<'a>>,
    on_task: Option<OnTask<'a>>,
    detach: bool,
    validate_output: bool,
    /// The result is handed back as the server's text ([`raw`](Self::raw)), not read.
    as_text: bool,
    /// The entry was found this moment: the gate's lookup is not made again.
    found: bool,
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("tool", &self.tool)
            .field("arguments", &self.arguments)
            .field("timeout", &self.timeout)
            .field("meta", &self.meta)
            .field("on_progress", &self.on_progress.is_some())
            .field("detach", &self.detach)
            .field("validate_output", &self.validate_output)
            .finish()
    }
}

impl<'a> Call<'a> {
    /// Gives this call `timeout` instead of the server's own call timeout (the CLI's
    /// `--timeout`): it limits this call alone, not the server's start, its listings, or
    /// anyone else's calls to it. When it runs out the call fails with [`HubError::Server`]
    /// holding `mcp_smol::Error::Request(RequestError::TimedOut { .. })`, which
    /// [`HubError::is_timeout`] tells without a match, and the server is told
    /// (`notifications/cancelled`). A progress report from the server starts it again, up to
    /// the connection's longest total (ten minutes by default). `None` keeps the server's own.
    pub fn timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.timeout = timeout.into();
        self
    }

    /// Adds `meta` to the call's `_meta`: a gateway passes its host's trace context
    /// (`traceparent`, `tracestate`, `baggage`) on. The hub's own members (the progress token,
    /// the era's) win over these.
    pub fn meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = meta;
        self
    }

    /// Whether the result's `structuredContent` is checked against the tool's
    /// `outputSchema` (the default, unless the server's config says `validate_output =
    /// false`); `false` (the CLI's `--no-validate`) returns it unchecked.
    pub fn validate_output(mut self, validate: bool) -> Self {
        self.validate_output = validate;
        self
    }

    /// Hears the server's progress notifications for this call (and no other call's) while
    /// it runs; every report sent before the answer arrives before the call returns.
    pub fn on_progress(mut self, on_progress: impl Fn(Progress) + Send + Sync + 'a) -> Self {
        self.on_progress = Some(Box::new(on_progress));
        self
    }

    /// Hears each new state of the task, when the server runs the call as one (its status
    /// and message), while the call waits for it.
    pub fn on_task(mut self, on_task: impl Fn(&Task) + Send + Sync + 'a) -> Self {
        self.on_task = Some(Box::new(on_task));
        self
    }

    /// Asks for the call to run in the background: [`start`](Self::start) then returns the
    /// task as soon as the server made one, instead of waiting for it. In the handshake era
    /// the call asks the server for a task where the tool allows one; in the stateless era
    /// the server decides.
    pub fn detach(mut self) -> Self {
        self.detach = true;
        self
    }

    /// The entry was found by [`Hub::find`] or [`Hub::find_tool`] just before, with no wait
    /// between: the policy and the pins it was found under are those of now, so the gate does
    /// not look it up again (an `ask` rule on it is still asked). A gateway's call looked its
    /// tool up to tell an unknown one from a failed call.
    #[cfg(feature = "cli")]
    pub(crate) fn found_just_now(mut self) -> Self {
        self.found = matches!(self.tool, ToolRef::Entry(_));
        self
    }

    /// Makes the call and returns its result, or the task running it
    /// ([`Started::Task`]) when [`detach`](Self::detach) asked for one and the server made
    /// one; without `detach` a task is waited for, as awaiting the call does. A task is
    /// recorded in the state folder either way, so a later process can wait for it.
    pub async fn start(self) -> Result<Started, HubError> {
        match Box::pin(self.run()).await? {
            Started::Done(result) => Ok(Started::Done(value_of(result))),
            Started::Task(handle) => Ok(Started::Task(handle)),
        }
    }

    /// Makes the call, as awaiting it does, and returns its result unread: the text the
    /// server sent (but for the stateless era's own members), for a caller that passes it on
    /// ([`RawResult::json`]). It is read only where it must be: to tell whether the server
    /// made a task, and to check it against the tool's `outputSchema`.
    pub async fn raw(mut self) -> Result<RawResult, HubError> {
        self.detach = false;
        self.as_text = true;
        match Box::pin(self.run()).await? {
            Started::Done(result) => Ok(result),
            Started::Task(handle) => Err(not_waited_for(*handle)),
        }
    }
}

impl<'a> IntoFuture for Call<'a> {
    type Output = Result<Value, HubError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    /// The result; a call the server runs as a task is waited for (past the call's timeout
    /// the task is cancelled: the call was not asked to outlive it).
    fn into_future(mut self) -> Self::IntoFuture {
        // Awaited, a call gives its result: a task is waited for, `detach` or not.
        self.detach = false;
        Box::pin(self.run_to_end())
    }
}

impl Call<'_> {
    /// The call's result, a task waited for: an `async fn` boxed as it is made, rather than a
    /// future holding [`run`](Self::run)'s moved into a box, which copied it once more.
    async fn run_to_end(self) -> Result<Value, HubError> {
        match self.run().await? {
            Started::Done(result) => Ok(value_of(result)),
            // Not detached, so `run` waited for it: never here.
            Started::Task(handle) => Err(not_waited_for(*handle)),
        }
    }
}

/// A task a call was not detached from, which `run` therefore waited for: never seen.
fn not_waited_for(handle: TaskHandle) -> HubError {
    HubError::TaskWaitTimedOut {
        server: handle.record.server,
        id: handle.record.task_id,
        status: handle.task.status,
        after: Duration::ZERO,
        cancelled: false,
    }
}

/// A result `run` read as a value already (the call was not [`raw`](Call::raw)): handed
/// back as it is.
fn value_of(result: RawResult) -> Value {
    result.into_value().unwrap_or_default()
}

impl Hub {
    /// Calls a tool, found by `tool`: the name a model gives (`"server__tool"`) or an entry
    /// from the catalogue. Await the [`Call`], after setting its options if need be:
    ///
    /// ```no_run
    /// # async fn demo(hub: &mcp_client_cli::hub::Hub) -> Result<(), mcp_client_cli::hub::HubError> {
    /// use std::time::Duration;
    /// use serde_json::json;
    /// let result = hub.call("everything__echo", json!({"message": "hi"})).await?;
    /// let slow = hub
    ///     .call("everything__trigger-long-running-operation", json!({"duration": 5, "steps": 5}))
    ///     .timeout(Duration::from_secs(30))
    ///     .on_progress(|p| eprintln!("{} of {:?}", p.progress, p.total))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// Starts the server if it must. The policy is applied when the call starts, to the
    /// server's tools as they are then, exactly as for [`find`](Self::find): a name the config
    /// does not define is [`HubError::UnknownServer`] and starts nothing; a tool a `deny` rule,
    /// a tool filter or a changed pin leaves out is refused; one an `ask` rule covers waits
    /// for [`Settings::ask`](crate::hub::Settings::ask) and is refused without it. An entry
    /// found before a pin changed, or made by hand, gets no further than a fresh name would.
    ///
    /// Returns the result object as the server sent it (decode it with
    /// [`CallToolResult::from_value`](crate::CallToolResult::from_value)); a result with
    /// `isError` is still `Ok`. A JSON-RPC error from the server is
    /// [`HubError::Server`], its code one call away ([`HubError::rpc_code`]). A result whose
    /// `structuredContent` does not match the tool's `outputSchema` is
    /// [`HubError::OutputMismatch`], which holds the result and the first failing path
    /// ([`Call::validate_output`] and the server's `validate_output` turn the check off).
    pub fn call<'a>(&'a self, tool: impl Into<ToolRef<'a>>, arguments: Value) -> Call<'a> {
        Call {
            hub: self,
            tool: tool.into(),
            arguments,
            timeout: None,
            meta: Map::new(),
            on_progress: None,
            on_task: None,
            detach: false,
            validate_output: true,
            as_text: false,
            found: false,
        }
    }
}

impl Call<'_> {
    async fn run(self) -> Result<Started<RawResult>, HubError> {
        let Call {
            hub,
            tool,
            arguments,
            timeout,
            meta,
            on_progress,
            on_task,
            detach,
            validate_output,
            as_text,
            found,
        } = self;
        let hears_progress = on_progress.is_some();
        let on_progress = |progress| {
            if let Some(on_progress) = &on_progress {
                on_progress(progress);
            }
        };
        // Borrowed when found just now: a gateway's every call otherwise cloned the entry
        // (its two strings) and dropped the clone.
        let tool: std::borrow::Cow<'_, ToolEntry> = match tool {
            ToolRef::Entry(entry) if found => {
                hub.approve(entry, &arguments).await?;
                std::borrow::Cow::Borrowed(entry)
            }
            ToolRef::Name(qualified) => {
                let (server, name) = hub.locate(qualified)?;
                std::borrow::Cow::Owned(hub.admit(&server, &name, &arguments).await?)
            }
            ToolRef::Entry(entry) => std::borrow::Cow::Owned(
                hub.admit(&entry.server, &entry.tool.name, &arguments)
                    .await?,
            ),
        };
        let slot = hub.inner.slot(&tool.server)?;
        let live = slot.ensure_running(&hub.inner).await?;
        // A token of the hub's own, so that calls running side by side on one server (a
        // gateway's hosts) each hear only their own progress.
        let token = Value::String(format!("mcp-cli-{}", hub.inner.next_progress_token()));
        // Only a caller that hears progress has an inbox for it, where the driver routes the
        // reports that carry this call's token.
        let inbox = hears_progress.then(|| ProgressInbox::new(token.clone()));
        let mut request = (Request::call_tool(&tool.tool.name, arguments))
            .progress_token(token)
            .meta(meta);
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        // Handshake era: a call is a task only when it asks to be one, which a tool that
        // requires it must, where the server takes tasks for calls.
        let wants_task = tool.tool.requires_tasks() || (detach && tool.tool.allows_tasks());
        if live.asks_for_tasks && wants_task {
            request = request.as_task(None);
        }
        let on_task = |task: &Task| {
            if let Some(on_task) = &on_task {
                on_task(task);
            }
        };
        let _in_flight = live.calls.enter(&tool.tool.name);
        let declined_before = live.declined.load(Ordering::SeqCst);
        let call = async {
            // Boxed: the client's request future is kilobytes, which every move of this
            // call's future (into its box, into a task) would otherwise copy.
            let mut call = live.client.request(request);
            if let Some(inbox) = &inbox {
                call = call.progress(inbox);
            }
            let raw = Box::pin(call.raw()).await;
            let raw = raw.map_err(|error| match error {
                // Asked again after a form of this call was declined: the person's no, not a
                // server that failed. Another call's decline meanwhile on the same server
                // counts too; the server was still refused what it asked.
                mcp_smol::Error::Request(RequestError::TooManyInputRounds { rounds })
                    if live.declined.load(Ordering::SeqCst) > declined_before =>
                {
                    HubError::FormDeclined {
                        server: tool.server.clone(),
                        tool: tool.name.clone(),
                        rounds,
                    }
                }
                error => HubError::Server {
                    server: tool.server.clone(),
                    error,
                },
            })?;
            // Read only when it may tell of a task: most results go on as text.
            if !raw.may_name_a_task() {
                return Ok(Started::Done(raw));
            }
            let raw = read(&tool.server, raw)?;
            let task = match Task::created_by(&raw) {
                None => return Ok(Started::Done(RawResult::from(raw))),
                Some(Ok(task)) => task,
                Some(Err(detail)) => {
                    let detail = format!("tools/call: {detail}");
                    return Err(HubError::Server {
                        server: tool.server.clone(),
                        error: mcp_smol::Error::Request(RequestError::InvalidResponse(detail)),
                    });
                }
            };
            let handle = hub.record_task(&tool.server, &tool.name, task.clone());
            if detach {
                return Ok(Started::Task(handle));
            }
            on_task(&task);
            // Boxed: following a task is rare, and its state would weigh on every call's.
            let result = hub.follow(&tool.server, &live.client, task, timeout, true, &on_task);
            Box::pin(result)
                .await
                .map(|result| Started::Done(RawResult::from(result)))
        };
        let progress = async {
            if let Some(inbox) = &inbox {
                loop {
                    on_progress(inbox.next().await);
                }
            }
            // Nobody hears progress; the call goes on to its end.
            std::future::pending().await
        };
        let result = futures_lite::future::or(call, progress).await;
        // Progress the server sent just before its answer is already in the inbox: it was
        // routed first, so it is passed on before the result is.
        while let Some(progress) = inbox.as_ref().and_then(ProgressInbox::try_next) {
            on_progress(progress);
        }
        let result = match result? {
            Started::Done(result) => result,
            task => return Ok(task),
        };
        // A task's result is checked as a direct one is, once it has arrived; only a tool
        // with an `outputSchema` has its result read for that.
        let validate = validate_output && slot.spec().is_ok_and(|spec| spec.validate_output);
        let result = match validate && tool.tool.output_schema.is_some() {
            true => read(&tool.server, result)?,
            false if as_text => return Ok(Started::Done(result)),
            false => return Ok(Started::Done(RawResult::from(read(&tool.server, result)?))),
        };
        let listing = slot.client_tools();
        let mismatch = (hub.inner.validators).check(&tool.server, listing, &tool.tool, &result);
        match mismatch {
            Some(mismatch) => Err(HubError::OutputMismatch {
                server: tool.server.clone(),
                tool: tool.name.clone(),
                mismatch,
                result: Box::new(result),
            }),
            None => Ok(Started::Done(RawResult::from(result))),
        }
    }
}

/// A result read as a value; one that cannot be (nested too deep) fails the call, as an
/// invalid response from `server`.
fn read(server: &str, result: RawResult) -> Result<Value, HubError> {
    result.into_value().map_err(|error| {
        let detail = format!("tools/call: {error}");
        HubError::Server {
            server: server.to_owned(),
            error: mcp_smol::Error::Request(RequestError::InvalidResponse(detail)),
        }
    })
}
