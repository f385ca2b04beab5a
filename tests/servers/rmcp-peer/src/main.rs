//! A small server on rmcp, the Rust SDK, a modern test peer (dual-era, as rmcp serves).
//!
//! Usage: `rmcp-peer [--http PORT]`. Over HTTP it prints `http://127.0.0.1:PORT/mcp` on stdout
//! once listening (PORT 0 picks a free port).
//!
//! Offers: `add {a, b}`, `confirm {action}` (asks through `input_required`), `sleep {ms}`
//! (reports progress until cancelled), `add_tool` (adds `extra`, so the tool list changes),
//! `research {ms}` (a task of the tasks extension, to a client that declares it: done after
//! `ms`, cancelled by `tasks/cancel`), the resource `peer://greeting`, the prompt
//! `greet {name}`, and through the skills extension (SEP-2640) the skills of the folder
//! `skills/` beside this crate (`release-notes`), served by rmcp's own catalog.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::skill_catalog::SkillCatalog;
use rmcp::handler::server::tool::{InputResponses, RequestState, ToolCallContext};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    ContentBlock, CreateTaskResult, DetailedTask, ElicitRequest, ElicitRequestParams, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetSkillRequestParams,
    GetSkillResult, GetTaskParams, GetTaskResult, InputRequest, InputRequests, InputRequiredResult,
    ListPromptsResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig, SubscriptionFilter, Task,
    TaskPayload, TaskStatus,
};
use rmcp::schemars::JsonSchema;
use rmcp::serde::Deserialize;
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{RoleServer, ServerHandler, ServiceExt, tool, tool_router};
use serde_json::json;
use tokio::sync::watch;

/// What every instance shares: over HTTP each session or request gets its own instance.
struct Shared {
    /// Whether `add_tool` has run; bumping it is the tool-list change listeners wait for.
    extra_added: watch::Sender<bool>,
    /// `research` tasks by id: when each began, how long it runs, whether it was cancelled.
    tasks: Mutex<HashMap<String, (Instant, u64, bool)>>,
    /// The skills of `skills/`.
    skills: SkillCatalog,
}

#[derive(Clone)]
struct Peer {
    shared: Arc<Shared>,
    /// Watches taken for listens not yet running, oldest first: rmcp acknowledges a listen
    /// before it calls `listen`, so a watch taken there would miss a change made in between.
    listens: Arc<Mutex<VecDeque<watch::Receiver<bool>>>>,
    tool_router: ToolRouter<Self>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "rmcp::serde")]
#[schemars(crate = "rmcp::schemars")]
struct AddArgs {
    a: f64,
    b: f64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "rmcp::serde")]
#[schemars(crate = "rmcp::schemars")]
struct ConfirmArgs {
    action: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "rmcp::serde")]
#[schemars(crate = "rmcp::schemars")]
struct SleepArgs {
    ms: u64,
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

#[tool_router]
impl Peer {
    fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            listens: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Adds two numbers")]
    async fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> CallToolResult {
        text((a + b).to_string())
    }

    #[tool(description = "Asks the user to confirm an action")]
    async fn confirm(
        &self,
        Parameters(ConfirmArgs { action }): Parameters<ConfirmArgs>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> Result<CallToolResponse, ErrorData> {
        let answer = responses
            .as_ref()
            .and_then(|responses| responses.get("confirm"));
        let Some(answer) = answer else {
            let schema = json!({
                "type": "object",
                "properties": { "ok": { "type": "boolean" } },
                "required": ["ok"]
            });
            let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: format!("Really {action}?"),
                requested_schema: serde_json::from_value(schema)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?,
            });
            let mut requests = InputRequests::new();
            requests.insert("confirm".into(), InputRequest::Elicitation(request));
            let state = format!("confirm:{action}");
            return Ok(InputRequiredResult::new(Some(requests), Some(state)).into());
        };
        let verdict = if answer["content"]["ok"] == json!(true) {
            "confirmed"
        } else {
            "declined"
        };
        let state = state.unwrap_or_default();
        Ok(text(format!("{verdict} {action} (state {state})")).into())
    }

    #[tool(description = "Sleeps until cancelled or ms pass, reporting progress")]
    async fn sleep(
        &self,
        Parameters(SleepArgs { ms }): Parameters<SleepArgs>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let token = context.meta.get_progress_token();
        for waited in (0..ms).step_by(100) {
            if let Some(token) = &token {
                let progress = ProgressNotificationParam::new(token.clone(), waited as f64)
                    .with_total(ms as f64);
                let _ = context.peer.notify_progress(progress).await;
            }
            tokio::select! {
                () = context.ct.cancelled() => {
                    eprintln!("rmcp-peer: sleep cancelled");
                    return text("cancelled");
                }
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        text("slept")
    }

    #[tool(description = "Researches for ms milliseconds, in the background (a task)")]
    async fn research(
        &self,
        Parameters(SleepArgs { ms }): Parameters<SleepArgs>,
    ) -> CallToolResult {
        // Reached only by a client that takes no tasks: `call_tool` makes one for the others.
        text(format!("researched {ms} ms at once"))
    }

    #[tool(description = "Adds the tool `extra`")]
    async fn add_tool(&self) -> CallToolResult {
        self.shared
            .extra_added
            .send_if_modified(|added| !std::mem::replace(added, true));
        text("added extra")
    }

    #[tool(description = "Added by add_tool")]
    async fn extra(&self) -> CallToolResult {
        text("extra")
    }

    fn extra_added(&self) -> bool {
        *self.shared.extra_added.borrow()
    }
}

/// Whether the request came in on the 2026-07-28 revision. rmcp fills in the default cache
/// hints (0 ms, private) there, and leaves a 2025 result as the handler made it, where the
/// hint fields do not exist.
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version >= rmcp::model::ProtocolVersion::V_2026_07_28)
}

impl ServerHandler for Peer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_prompts()
                .enable_tasks()
                .enable_skills()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new("rmcp-peer", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.tool_router.list_all();
        if !self.extra_added() {
            tools.retain(|tool| tool.name != "extra");
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "extra" && !self.extra_added() {
            return Err(ErrorData::invalid_params("tool not found", None));
        }
        let takes_tasks = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if request.name == "research" && takes_tasks {
            let ms = (request.arguments.as_ref())
                .and_then(|arguments| arguments.get("ms"))
                .and_then(|ms| ms.as_u64())
                .unwrap_or(0);
            let mut tasks = self.shared.tasks.lock().unwrap();
            let id = format!("research-{}", tasks.len() + 1);
            tasks.insert(id.clone(), (Instant::now(), ms, false));
            let task = Task::new(
                id,
                TaskStatus::Working,
                "2026-07-28T00:00:00Z",
                "2026-07-28T00:00:00Z",
            )
            .with_poll_interval_ms(100);
            return Ok(CreateTaskResult::new(task).into());
        }
        let call = ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let greeting = Resource::new("peer://greeting", "greeting").with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![greeting]))
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        Ok(self.shared.skills.list_skills())
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.shared.skills.get_skill(&request.uri)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if let Some(file) = self.shared.skills.read_resource(&request.uri) {
            return Ok(file.into());
        }
        if request.uri != "peer://greeting" {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                Some(json!({ "uri": request.uri })),
            ));
        }
        let contents = ResourceContents::text("hello from rmcp-peer", "peer://greeting")
            .with_mime_type("text/plain");
        let mut result = ReadResourceResult::new(vec![contents]);
        if modern(&context) {
            result = result
                .with_ttl_ms(60_000)
                .with_cache_scope(CacheScope::Public);
        }
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let name = PromptArgument::new("name").with_required(true);
        let greet = Prompt::new("greet", Some("Greets someone"), Some(vec![name]));
        Ok(ListPromptsResult::with_all_items(vec![greet]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let name = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("name"))
            .and_then(|name| name.as_str())
            .ok_or_else(|| ErrorData::invalid_params("greet needs a name", None))?;
        let message = PromptMessage::new_text(Role::User, format!("Say hello to {name}."));
        Ok(GetPromptResult::new(vec![message]).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let tasks = self.shared.tasks.lock().unwrap();
        let Some(&(began, ms, cancelled)) = tasks.get(&request.task_id) else {
            return Err(ErrorData::invalid_params(
                format!("no task {}", request.task_id),
                None,
            ));
        };
        let elapsed = began.elapsed().as_millis() as u64;
        let payload = if cancelled {
            TaskPayload::Cancelled
        } else if elapsed >= ms {
            let result =
                json!({"content": [{"type": "text", "text": format!("researched {ms} ms")}]});
            let result = serde_json::from_value(result)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            TaskPayload::Completed { result }
        } else {
            TaskPayload::Working
        };
        let task = Task::new(
            &request.task_id,
            TaskStatus::Working,
            "2026-07-28T00:00:00Z",
            "2026-07-28T00:00:00Z",
        )
        .with_poll_interval_ms(100)
        .with_status_message(format!("{} of {ms} ms", elapsed.min(ms)));
        Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let mut tasks = self.shared.tasks.lock().unwrap();
        let Some(task) = tasks.get_mut(&request.task_id) else {
            return Err(ErrorData::invalid_params(
                format!("no task {}", request.task_id),
                None,
            ));
        };
        task.2 = true;
        eprintln!("rmcp-peer: task {} cancelled", request.task_id);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Called before the acknowledgement goes out: watch from here on.
        let changes = self.shared.extra_added.subscribe();
        self.listens.lock().unwrap().push_back(changes);
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let taken = self.listens.lock().unwrap().pop_front();
        let mut changes = taken.unwrap_or_else(|| self.shared.extra_added.subscribe());
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let _ = context.sink().notify_tool_list_changed().await;
                }
            }
        }
    }
}

async fn serve_http(shared: Arc<Shared>, port: u16) -> std::io::Result<()> {
    let service: StreamableHttpService<Peer, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(Peer::new(shared.clone())),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, router).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let shared = Arc::new(Shared {
        extra_added: watch::Sender::new(false),
        tasks: Mutex::default(),
        skills: SkillCatalog::from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/skills"))?,
    });
    let args: Vec<String> = std::env::args().collect();
    if let Some(flag) = args.iter().position(|arg| arg == "--http") {
        let port = args.get(flag + 1).map_or(Ok(0), |port| port.parse())?;
        serve_http(shared, port).await?;
    } else {
        let running = Peer::new(shared).serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
    }
    Ok(())
}
