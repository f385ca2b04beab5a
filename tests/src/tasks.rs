//! Tasks as the stdio fixture serves them (mode `tasks`), in both eras, written from the
//! specification's pages: the stateless era's extension (`resultType: "task"`, `tasks/get`
//! carrying the result, error or `inputRequests`, `tasks/update`, `tasks/cancel`) and the
//! handshake era's experimental tasks (`task` on `tools/call`, `{"task": ...}`, `tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel`).
//!
//! A task's state is worked out from the clock when asked (`task_sleep` is done once its
//! `ms` have passed since it was made), so no thread runs it; with a folder, each task is a
//! file there, so a server started again (by a restarted daemon) still knows the tasks of the
//! one before, as a server whose tasks are durable does.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The extension's name.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The stateless era's task status notification.
pub const STATUS_NOTIFICATION: &str = "notifications/tasks";

/// The tools of mode `tasks`: each runs only as a task.
pub fn tools() -> Vec<Value> {
    let object = |properties: Value| json!({"type": "object", "properties": properties});
    let required = json!({"taskSupport": "required"});
    vec![
        json!({"name": "task_sleep", "description": "A task that ends after `ms` (never, with a huge one); with `bytes`, its result is that many bytes of text.",
               "inputSchema": object(json!({"ms": {"type": "integer"}, "bytes": {"type": "integer"}})), "execution": required}),
        json!({"name": "task_fail", "description": "A task that fails.",
               "inputSchema": object(json!({})), "execution": required}),
        json!({"name": "task_ask", "description": "A task that asks for a name mid-way, then greets it.",
               "inputSchema": object(json!({})), "execution": required}),
        json!({"name": "task_ask_first", "description": "Asks for a name before it makes its task, which then greets it.",
               "inputSchema": object(json!({})), "execution": required}),
        json!({"name": "task_optional", "description": "Runs as a task only when asked to.",
               "inputSchema": object(json!({})), "execution": {"taskSupport": "optional"}}),
    ]
}

/// Whether `name` is one of [`tools`].
pub fn is_task_tool(name: &str) -> bool {
    name.starts_with("task_")
}

/// The form `task_ask` asks for: one field with a default, which `--yes` accepts.
pub fn ask_form() -> Value {
    json!({"mode": "form", "message": "Whom should the task greet?",
           "requestedSchema": {"type": "object",
               "properties": {"name": {"type": "string", "default": "Ada"}}, "required": ["name"]}})
}

/// One task, as kept.
#[derive(Debug, Clone)]
struct Record {
    id: String,
    tool: String,
    arguments: Value,
    /// Milliseconds since the epoch.
    created: u64,
    cancelled: bool,
    /// `task_ask`: the name given.
    answer: Option<String>,
}

fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    since.as_millis() as u64
}

/// Where a task stands now.
enum Status {
    Working(String),
    InputRequired,
    Completed(Value),
    Failed(Value),
    Cancelled,
}

impl Record {
    fn to_json(&self) -> Value {
        json!({"id": self.id, "tool": self.tool, "arguments": self.arguments,
               "created": self.created, "cancelled": self.cancelled, "answer": self.answer})
    }

    fn from_json(value: &Value) -> Option<Self> {
        Some(Self {
            id: value["id"].as_str()?.to_owned(),
            tool: value["tool"].as_str()?.to_owned(),
            arguments: value["arguments"].clone(),
            created: value["created"].as_u64()?,
            cancelled: value["cancelled"].as_bool()?,
            answer: value["answer"].as_str().map(str::to_owned),
        })
    }

    fn status(&self) -> Status {
        if self.cancelled {
            return Status::Cancelled;
        }
        // The text is moved in, not copied as `json!` copies what it is given: a large result
        // costs this server one copy, so a memory figure over the client and its server is the
        // client's.
        let text = |text: String| {
            let mut result = json!({"content": [{"type": "text"}]});
            result["content"][0]["text"] = Value::String(text);
            result
        };
        match self.tool.as_str() {
            "task_sleep" => {
                let ms = self.arguments["ms"].as_u64().unwrap_or(0);
                let elapsed = now_ms().saturating_sub(self.created);
                if elapsed >= ms {
                    let done = match self.arguments["bytes"].as_u64() {
                        Some(bytes) => "x".repeat(usize::try_from(bytes).unwrap_or(0)),
                        None => format!("slept {ms} ms"),
                    };
                    Status::Completed(text(done))
                } else {
                    Status::Working(format!("slept {elapsed} of {ms} ms"))
                }
            }
            "task_fail" => {
                Status::Failed(json!({"code": -32000, "message": "the work failed: disk full"}))
            }
            "task_ask" | "task_ask_first" => match &self.answer {
                Some(name) => Status::Completed(text(format!("hello {name}"))),
                None => Status::InputRequired,
            },
            _ => Status::Completed(text(format!("ran {}", self.tool))),
        }
    }
}

/// The fixture's tasks.
#[derive(Debug)]
pub struct Tasks {
    stateless: bool,
    poll_ms: u64,
    /// Every `tasks/get` is refused, as by a server that lost its tasks.
    forget: bool,
    dir: Option<PathBuf>,
    kept: Mutex<BTreeMap<String, Record>>,
}

/// The answer to one request: a result, or an error object.
pub type Answer = Result<Value, Value>;

fn error(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

impl Tasks {
    pub fn new(stateless: bool, poll_ms: u64, forget: bool, dir: Option<PathBuf>) -> Self {
        Self {
            stateless,
            poll_ms,
            forget,
            dir,
            kept: Mutex::new(BTreeMap::new()),
        }
    }

    /// The capabilities that declare tasks, in this era, to merge into the server's.
    pub fn capabilities(&self) -> Value {
        if self.stateless {
            json!({"extensions": {EXTENSION: {}}})
        } else {
            json!({"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}})
        }
    }

    fn save(&self, record: &Record) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::create_dir_all(dir);
            let bytes = record.to_json().to_string();
            let _ = std::fs::write(dir.join(format!("{}.json", record.id)), bytes);
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.insert(record.id.clone(), record.clone());
    }

    fn load(&self, id: &str) -> Option<Record> {
        if let Some(record) = self.kept.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
            return Some(record.clone());
        }
        let dir = self.dir.as_ref()?;
        let safe = id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        let bytes = std::fs::read(dir.join(format!("{id}.json")))
            .ok()
            .filter(|_| safe)?;
        Record::from_json(&serde_json::from_slice(&bytes).ok()?)
    }

    /// Handshake era: whether this `tools/call` must first ask for a name (`task_ask_first`
    /// without the answer the fixture puts in its `inputResponses`).
    pub fn asks_first(&self, params: &Value) -> bool {
        !self.stateless
            && params["name"] == "task_ask_first"
            && params.get("inputResponses").is_none()
    }

    /// A `tools/call` of a task tool: the task it makes, or a refusal. `params` as sent.
    pub fn call(&self, params: &Value) -> Answer {
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        let asked = if self.stateless {
            let capabilities = &params["_meta"]["io.modelcontextprotocol/clientCapabilities"];
            capabilities["extensions"].get(EXTENSION).is_some()
        } else {
            params.get("task").is_some_and(Value::is_object)
        };
        if !asked {
            if name == "task_optional" {
                return Ok(
                    json!({"content": [{"type": "text", "text": "ran task_optional at once"}]}),
                );
            }
            return Err(match self.stateless {
                true => json!({"code": -32021, "message": "Missing required client capability",
                               "data": {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}}),
                false => error(-32601, format!("{name} runs only as a task")),
            });
        }
        // `task_ask_first`'s name comes before the task: an input round of the call in the
        // stateless era, a form the fixture asked for and put here in the handshake era.
        let given = &params["inputResponses"]["name"];
        let mut answer = given["content"]["name"].as_str().map(str::to_owned);
        if name == "task_ask_first" && answer.is_none() && !self.stateless {
            answer = Some("nobody".to_owned());
        }
        if name == "task_ask_first" && answer.is_none() {
            let form = json!({"method": "elicitation/create", "params": ask_form()});
            return Ok(
                json!({"resultType": "input_required", "inputRequests": {"name": form},
                             "requestState": "asked-first"}),
            );
        }
        let record = Record {
            id: format!("task-{}-{}", std::process::id(), now_ms()),
            tool: name,
            arguments: params.get("arguments").cloned().unwrap_or(json!({})),
            created: now_ms(),
            cancelled: false,
            answer,
        };
        self.save(&record);
        eprintln!("created {}", record.id);
        let task = self.task(&record, false);
        Ok(match self.stateless {
            true => {
                let mut task = task;
                task["resultType"] = json!("task");
                task
            }
            false => json!({ "task": task }),
        })
    }

    /// The task object: its status, and in the stateless era (`detailed`) its result, error
    /// or input requests.
    fn task(&self, record: &Record, detailed: bool) -> Value {
        let status = record.status();
        let (name, message) = match &status {
            Status::Working(message) => ("working", Some(message.clone())),
            Status::InputRequired => ("input_required", Some("waiting for a name".to_owned())),
            Status::Completed(_) => ("completed", None),
            Status::Failed(_) => ("failed", Some("disk full".to_owned())),
            Status::Cancelled => ("cancelled", Some("cancelled by request".to_owned())),
        };
        let created = format!("{}", record.created);
        let mut task = json!({"taskId": record.id, "status": name, "createdAt": created,
                              "lastUpdatedAt": created});
        if let Some(message) = message {
            task["statusMessage"] = json!(message);
        }
        let (ttl, poll) = match self.stateless {
            true => ("ttlMs", "pollIntervalMs"),
            false => ("ttl", "pollInterval"),
        };
        task[ttl] = Value::Null;
        task[poll] = json!(self.poll_ms);
        if detailed && self.stateless {
            match status {
                Status::Completed(result) => task["result"] = result,
                Status::Failed(error) => task["error"] = error,
                Status::InputRequired => {
                    let key = format!("name-{}", record.id);
                    task["inputRequests"] =
                        json!({ key: {"method": "elicitation/create", "params": ask_form()} });
                }
                _ => {}
            }
        }
        task
    }

    fn known(&self, params: &Value) -> Result<Record, Value> {
        let id = params["taskId"].as_str().unwrap_or_default();
        match self.load(id) {
            Some(record) if !self.forget => Ok(record),
            _ => Err(error(-32602, format!("Unknown task: {id}"))),
        }
    }

    /// `tasks/get`.
    pub fn get(&self, params: &Value) -> Answer {
        let record = self.known(params)?;
        Ok(self.task(&record, true))
    }

    /// Task `id` as `tasks/get` gives it, and whether it has ended; `None` when unknown.
    pub fn snapshot(&self, id: &str) -> Option<(Value, bool)> {
        let record = self.load(id).filter(|_| !self.forget)?;
        let ended = !matches!(record.status(), Status::Working(_) | Status::InputRequired);
        Some((self.task(&record, true), ended))
    }

    /// `tasks/update` (stateless era): a name for `task_ask`.
    pub fn update(&self, params: &Value) -> Answer {
        let mut record = self.known(params)?;
        let key = format!("name-{}", record.id);
        let response = &params["inputResponses"][&key];
        if response["action"] == "accept"
            && let Some(name) = response["content"]["name"].as_str()
        {
            record.answer = Some(name.to_owned());
            self.save(&record);
        }
        Ok(json!({}))
    }

    /// `tasks/cancel`: refused for a task already ended (as the handshake era says).
    pub fn cancel(&self, params: &Value) -> Answer {
        let mut record = self.known(params)?;
        if matches!(
            record.status(),
            Status::Completed(_) | Status::Failed(_) | Status::Cancelled
        ) {
            return Err(error(
                -32602,
                format!("task {} has already ended", record.id),
            ));
        }
        record.cancelled = true;
        self.save(&record);
        eprintln!("cancelled task {}", record.id);
        Ok(match self.stateless {
            true => json!({}),
            false => self.task(&record, false),
        })
    }

    /// `tasks/list` (handshake era).
    pub fn list(&self) -> Answer {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let tasks: Vec<Value> = kept
            .values()
            .map(|record| self.task(record, false))
            .collect();
        Ok(json!({ "tasks": tasks }))
    }

    /// Handshake era: whether `tasks/result` can be answered now (the task ended), and what
    /// with; `Err(key)` while `task_ask` waits for the name asked under `key`.
    pub fn result(&self, params: &Value) -> Option<Result<Answer, String>> {
        let record = match self.known(params) {
            Ok(record) => record,
            Err(refusal) => return Some(Ok(Err(refusal))),
        };
        let related = json!({"io.modelcontextprotocol/related-task": {"taskId": record.id}});
        match record.status() {
            Status::Completed(mut result) => {
                result["_meta"] = related;
                Some(Ok(Ok(result)))
            }
            Status::Failed(error) => Some(Ok(Err(error))),
            Status::Cancelled => Some(Ok(Err(error(-32800, "the task was cancelled")))),
            Status::InputRequired => Some(Err(format!("ask-{}", record.id))),
            Status::Working(_) => None,
        }
    }

    /// Handshake era: the name the client gave for `task_ask` (its `elicitation/create`
    /// answer).
    pub fn answered(&self, id: &str, answer: &Value) {
        if let Some(mut record) = self.load(id) {
            let name = answer["content"]["name"].as_str().unwrap_or("nobody");
            record.answer = Some(name.to_owned());
            self.save(&record);
        }
    }
}
