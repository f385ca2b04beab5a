//! Tasks the hub's servers run in the background: made by a call
//! ([`Call::detach`](crate::hub::Call::detach) hands one over), kept in the state folder so a
//! later process can find them, and waited for, polled or cancelled by server and task id.
//!
//! One record per task ([`TaskRecord`]), a file of its own in [`Settings::task_dir`] named by
//! a digest of the server's name and the task's id, replaced whole (0600) when its status
//! changes: two processes watching different tasks never write the same file.
//!
//! [`Settings::task_dir`]: crate::hub::Settings::task_dir

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcp_smol::proto::{
    Era, RpcError,
    tasks::{Task, TaskEnd, TaskStatus, TaskWatch},
};
use mcp_smol::{Client, TaskInput};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::files;
use crate::hub::{Elicitation, Hub, HubError};

/// What is remembered of a task, in the state folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    /// The server running it.
    pub server: String,
    /// The server's id for it.
    pub task_id: String,
    /// The tool whose call made it, as shown (`server__tool`); empty when not known.
    pub tool: String,
    /// When the call made it, in milliseconds since the Unix epoch.
    pub started: u64,
    /// Its status when last seen, as the protocol spells it, or `lost` once the server no
    /// longer knew it.
    pub status: String,
    /// The server's message with that status, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When it was last seen, in milliseconds since the Unix epoch.
    pub updated: u64,
    /// The local server's process when the call made the task, and when that process
    /// started (in the system's clock ticks since boot): a local server stops with the
    /// command whose hub started it, and with it its tasks. `None` for a remote server, or
    /// where the system does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_process: Option<(u32, u64)>,
}

/// The status of a task the server no longer knows.
pub(crate) const LOST: &str = "lost";

/// When process `pid` started, in clock ticks since boot (`/proc/PID/stat`'s 22nd field),
/// if it runs.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command's name, in parentheses, may hold blanks: the fields after it are counted.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process marked `(pid, started)` is known to be gone: no process of that pid,
/// or another one that took the pid since. Where `/proc` says nothing, nothing is known.
fn is_gone((pid, started): (u32, u64)) -> bool {
    if process_start(std::process::id()).is_none() {
        return false;
    }
    process_start(pid) != Some(started)
}

impl TaskRecord {
    /// Whether it can change no more: ended, or lost.
    pub fn is_done(&self) -> bool {
        TaskStatus::parse(&self.status).is_none_or(TaskStatus::is_terminal)
    }

    /// The record as `--json` prints it.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A task a call handed over: where it runs and what the server last said of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskHandle {
    /// Its record, as saved.
    pub record: TaskRecord,
    /// The task as the server last described it.
    pub task: Task,
}

impl TaskHandle {
    /// The handle as `call --async --json` prints it: the record, and the task as sent.
    pub fn to_json(&self) -> Value {
        let mut handle = self.record.to_json();
        handle["task"] = self.task.to_json();
        handle
    }
}

/// What a call that may become a task came to: its result (a value, or with
/// [`Call::raw`](crate::hub::Call::raw) the text the server sent), or the task it made.
#[derive(Debug, Clone, PartialEq)]
pub enum Started<R = Value> {
    /// The result, as the server sent it.
    Done(R),
    /// A task runs it.
    Task(Box<TaskHandle>),
}

fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// The task records, one file each.
#[derive(Debug)]
pub(crate) struct Records {
    dir: Option<PathBuf>,
}

impl Records {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    fn path(&self, server: &str, id: &str) -> Option<PathBuf> {
        let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
        hash.update(server.as_bytes());
        hash.update(&[0]);
        hash.update(id.as_bytes());
        let name: String = (hash.finish().as_ref().iter().take(12))
            .map(|byte| format!("{byte:02x}"))
            .collect();
        Some(self.dir.as_ref()?.join(format!("{name}.json")))
    }

    /// Saves `record`; a record that cannot be written costs only a later process's finding
    /// it, so the failure is returned for the caller to mention, never fatal.
    pub(crate) fn save(&self, record: &TaskRecord) -> Result<(), String> {
        let Some(path) = self.path(&record.server, &record.task_id) else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            files::private_dir(dir).map_err(|e| e.to_string())?;
        }
        let bytes = serde_json::to_vec_pretty(record).unwrap_or_default();
        files::replace(&path, &bytes, 0o600, || Ok::<(), ()>(()))
            .map_err(|_| format!("cannot write {}", path.display()))
    }

    /// The record of task `id` of `server`, if kept.
    pub(crate) fn load(&self, server: &str, id: &str) -> Option<TaskRecord> {
        let text = files::read_private(&self.path(server, id)?).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Every readable record, oldest first.
    pub(crate) fn all(&self) -> Vec<TaskRecord> {
        let Some(entries) = self
            .dir
            .as_ref()
            .and_then(|dir| std::fs::read_dir(dir).ok())
        else {
            return Vec::new();
        };
        let mut records: Vec<TaskRecord> = (entries.flatten())
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|entry| files::read_private(&entry.path()).ok())
            .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
            .collect();
        records.sort_by(|a, b| {
            (a.started, &a.server, &a.task_id).cmp(&(b.started, &b.server, &b.task_id))
        });
        records
    }
}

impl Hub {
    /// The tasks kept in the state folder (of `server`, or of every server), oldest first.
    /// A task still running when last seen whose local server is gone since (it stopped
    /// with the command that started it) is listed `lost`. Only listed so, its record left as
    /// it was: a server that keeps its tasks on disk knows them when started again, which
    /// [`wait_task`](Self::wait_task) and a daemon started again ask it.
    pub fn task_records(&self, server: Option<&str>) -> Vec<TaskRecord> {
        let mut records = self.inner.tasks.all();
        records.retain(|record| server.is_none_or(|server| record.server == server));
        for record in &mut records {
            let gone = record.server_process.filter(|&process| is_gone(process));
            if let (false, Some((pid, _))) = (record.is_done(), gone) {
                record.status = LOST.to_owned();
                record.status_message = Some(format!(
                    "its server (pid {pid}) has stopped since, and the task with it: a local \
                     server runs as long as the command, or the daemon, that started it \
                     (`tasks wait` asks a server that keeps its tasks again)"
                ));
            }
        }
        records
    }

    /// Where task `id` of `server` stands now: one `tasks/get` (starting the server if it must),
    /// its record brought up to date.
    /// Once the task has ended, its outcome comes with it in either era (the handshake era's
    /// from `tasks/result`).
    pub async fn get_task(&self, server: &str, id: &str) -> Result<Task, HubError> {
        let slot = self.inner.slot(server)?;
        let live = slot.ensure_running(&self.inner).await?;
        let mut task = match live.client.get_task(id).await {
            Ok(task) => task,
            Err(error) => return Err(self.task_error(server, id, error)),
        };
        self.note_task(server, &task);
        let handshake =
            (live.client.wait_ready().await).is_ok_and(|info| info.era() != Some(Era::Stateless));
        let ended = matches!(task.status, TaskStatus::Completed | TaskStatus::Failed);
        if handshake && ended {
            match live
                .client
                .request(mcp_smol::proto::Request::task_result(id))
                .await
            {
                Ok(result) => task.result = Some(result),
                Err(mcp_smol::Error::Request(mcp_smol::proto::RequestError::Remote(error))) => {
                    task.error = Some(error);
                }
                Err(error) => return Err(self.task_error(server, id, error)),
            }
        }
        Ok(task)
    }

    /// Where task `id` of `server` stands now, by one `tasks/get` and nothing more (its
    /// outcome, in the handshake era, stays with the server until `tasks/result`): for a
    /// gateway answering its host's `tasks/get` or `tasks/list`.
    pub async fn peek_task(&self, server: &str, id: &str) -> Result<Task, HubError> {
        let slot = self.inner.slot(server)?;
        let live = slot.ensure_running(&self.inner).await?;
        let task = (live.client.get_task(id).await).map_err(|e| self.task_error(server, id, e))?;
        self.note_task(server, &task);
        Ok(task)
    }

    /// Answers a task's input requests (`tasks/update`, stateless era): for a gateway passing
    /// its host's answers on.
    pub async fn update_task(
        &self,
        server: &str,
        id: &str,
        responses: serde_json::Map<String, Value>,
    ) -> Result<(), HubError> {
        let request = mcp_smol::proto::Request::update_task(id, responses);
        self.request(server, request).await.map(|_| ())
    }

    /// Waits for task `id` of `server` to end and returns the call's result as the server sent
    /// it; `on_update` hears each new state. A task that failed, was cancelled, or is no
    /// longer known to the server is an error that says so ([`HubError::TaskFailed`],
    /// [`HubError::TaskCancelled`], [`HubError::TaskLost`]); past `timeout` the wait ends
    /// with [`HubError::TaskWaitTimedOut`] and the task runs on.
    pub async fn wait_task(
        &self,
        server: &str,
        id: &str,
        timeout: Option<Duration>,
        on_update: impl Fn(&Task) + Send + Sync,
    ) -> Result<Value, HubError> {
        let slot = self.inner.slot(server)?;
        let live = slot.ensure_running(&self.inner).await?;
        // Polled at once: where it stands is what the record cannot tell.
        let mut task = Task::read(&json!({"taskId": id, "status": "working", "pollIntervalMs": 0}))
            .map_err(|detail| self.invalid(server, detail))?;
        if let Some(record) = self.inner.tasks.load(server, id) {
            task.status = TaskStatus::parse(&record.status)
                .filter(|status| !status.is_terminal())
                .unwrap_or(TaskStatus::Working);
        }
        self.follow(server, &live.client, task, timeout, false, &on_update)
            .await
    }

    /// Asks `server` to cancel task `id` (`tasks/cancel`). Cancellation is the server's to
    /// honour; the record says `cancelled` once it does.
    pub async fn cancel_task(&self, server: &str, id: &str) -> Result<(), HubError> {
        let slot = self.inner.slot(server)?;
        let live = slot.ensure_running(&self.inner).await?;
        // A refusal here is not the task lost: servers refuse to cancel a task already ended.
        (live.client.cancel_task(id).await).map_err(|error| HubError::Server {
            server: server.to_owned(),
            error,
        })?;
        // Asked of the server, whether it honours it: a fresh look says.
        if let Ok(task) = live.client.get_task(id).await {
            self.note_task(server, &task);
        }
        Ok(())
    }

    /// Watches every task whose record says it has not ended, on the servers that ran them,
    /// until each ends (its record then says how): for the daemon, after a restart. Returns
    /// once every watch has ended; dropping the future stops them all.
    pub async fn resume_tasks(&self) {
        let mut watches = Vec::new();
        // As recorded: those whose server stopped with the daemon before are asked again.
        for record in self.inner.tasks.all() {
            if record.is_done() || self.inner.slot(&record.server).is_err() {
                continue;
            }
            let hub = self.clone();
            watches.push(self.inner.spawn(async move {
                let _ = (hub.wait_task(&record.server, &record.task_id, None, |_| {})).await;
            }));
        }
        for watch in watches {
            watch.await;
        }
    }

    /// Records a task a call of `tool` on `server` just made.
    pub(crate) fn record_task(&self, server: &str, tool: &str, task: Task) -> Box<TaskHandle> {
        let now = now_ms();
        let pid = (self.inner.slot(server).ok()).and_then(|slot| slot.status().pid);
        let record = TaskRecord {
            server: server.to_owned(),
            task_id: task.id.clone(),
            tool: tool.to_owned(),
            started: now,
            status: task.status.as_str().to_owned(),
            status_message: task.message.clone(),
            updated: now,
            server_process: pid.and_then(|pid| Some((pid, process_start(pid)?))),
        };
        if let Err(error) = self.inner.tasks.save(&record) {
            crate::output::diagnostic(&format!("mcp-cli: warning: task {}: {error}", task.id));
        }
        Box::new(TaskHandle { record, task })
    }

    /// Brings the record of `task` up to date, if its status or message changed.
    fn note_task(&self, server: &str, task: &Task) {
        self.note_status(
            server,
            &task.id,
            task.status.as_str(),
            task.message.as_deref(),
        );
    }

    fn note_status(&self, server: &str, id: &str, status: &str, message: Option<&str>) {
        let kept = self.inner.tasks.load(server, id);
        let same = kept
            .as_ref()
            .is_some_and(|kept| kept.status == status && kept.status_message.as_deref() == message);
        if same {
            return;
        }
        let now = now_ms();
        let record = TaskRecord {
            status: status.to_owned(),
            status_message: message.map(str::to_owned),
            updated: now,
            ..kept.unwrap_or_else(|| TaskRecord {
                server: server.to_owned(),
                task_id: id.to_owned(),
                tool: String::new(),
                started: now,
                status: String::new(),
                status_message: None,
                updated: now,
                server_process: None,
            })
        };
        let _ = self.inner.tasks.save(&record);
    }

    /// Watches `task` on `client` until it ends; past `timeout` the wait ends, and the task
    /// too when `cancel_on_timeout` (a call that was not asked to run in the background).
    pub(crate) async fn follow(
        &self,
        server: &str,
        client: &Client,
        task: Task,
        timeout: Option<Duration>,
        cancel_on_timeout: bool,
        on_update: &(dyn Fn(&Task) + Send + Sync),
    ) -> Result<Value, HubError> {
        let era = match client.wait_ready().await {
            Ok(info) => info.era().unwrap_or(Era::Handshake),
            Err(error) => return Err(self.task_error(server, &task.id, error)),
        };
        let id = task.id.clone();
        let mut watch = TaskWatch::new(Instant::now(), era, task);
        let input = self.task_input(server);
        let heard = |task: &Task| {
            self.note_task(server, task);
            on_update(task);
        };
        let waited = client.wait_task(&mut watch, input.as_deref(), &heard);
        let ended = match timeout {
            None => waited.await,
            Some(limit) => {
                let expired = async {
                    async_io::Timer::after(limit).await;
                    Ok(None)
                };
                let waited = async { waited.await.map(Some) };
                match futures_lite::future::or(waited, expired).await {
                    Ok(Some(end)) => Ok(end),
                    Ok(None) => {
                        let status = watch.task().status;
                        let cancelled = cancel_on_timeout && client.cancel_task(&id).await.is_ok();
                        if cancelled {
                            self.note_status(server, &id, TaskStatus::Cancelled.as_str(), None);
                        }
                        return Err(HubError::TaskWaitTimedOut {
                            server: server.to_owned(),
                            id,
                            status,
                            after: limit,
                            cancelled,
                        });
                    }
                    Err(error) => Err(error),
                }
            }
        };
        let end = ended.map_err(|error| self.task_error(server, &id, error))?;
        let server = server.to_owned();
        match end {
            TaskEnd::Completed(result) => {
                self.note_status(&server, &id, TaskStatus::Completed.as_str(), None);
                Ok(result)
            }
            TaskEnd::Failed(error) => {
                let status = TaskStatus::Failed.as_str();
                self.note_status(&server, &id, status, Some(error.text()));
                Err(HubError::TaskFailed { server, id, error })
            }
            TaskEnd::Cancelled(message) => {
                let status = TaskStatus::Cancelled.as_str();
                self.note_status(&server, &id, status, message.as_deref());
                Err(HubError::TaskCancelled {
                    server,
                    id,
                    message,
                })
            }
            TaskEnd::Lost(error) => {
                self.note_status(&server, &id, LOST, Some(error.text()));
                Err(HubError::TaskLost { server, id, error })
            }
        }
    }

    /// A failed task request: a refusal means the server does not know the task.
    fn task_error(&self, server: &str, id: &str, error: mcp_smol::Error) -> HubError {
        match error {
            mcp_smol::Error::Request(mcp_smol::proto::RequestError::Remote(error)) => {
                self.note_status(server, id, LOST, Some(error.text()));
                HubError::TaskLost {
                    server: server.to_owned(),
                    id: id.to_owned(),
                    error,
                }
            }
            error => HubError::Server {
                server: server.to_owned(),
                error,
            },
        }
    }

    fn invalid(&self, server: &str, detail: String) -> HubError {
        HubError::Server {
            server: server.to_owned(),
            error: mcp_smol::Error::Request(mcp_smol::proto::RequestError::InvalidResponse(detail)),
        }
    }

    /// Answers a task's input requests as the server's own requests are answered: forms
    /// through the settings' handler; anything else is refused.
    fn task_input(&self, server: &str) -> Option<Box<TaskInput>> {
        let handler = self.inner.settings.elicit.clone()?;
        let server = server.to_owned();
        Some(Box::new(move |method: String, params: Option<Value>| {
            let handler = handler.clone();
            let server = server.clone();
            Box::pin(async move {
                match method.as_str() {
                    "elicitation/create" => {
                        let form = Elicitation::of(&server, params.as_ref());
                        Ok(handler.fill(form).await.to_result())
                    }
                    other => Err(RpcError::method_not_found(other)),
                }
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn record(server: &str, id: &str, started: u64, status: &str) -> TaskRecord {
        TaskRecord {
            server: server.to_owned(),
            task_id: id.to_owned(),
            tool: format!("{server}__slow"),
            started,
            status: status.to_owned(),
            status_message: None,
            updated: started,
            server_process: None,
        }
    }

    #[test]
    fn a_process_is_gone_once_it_ended_or_its_pid_was_taken() {
        let ours = std::process::id();
        let started = process_start(ours).expect("/proc on Linux");
        assert!(!is_gone((ours, started)));
        assert!(
            is_gone((ours, started + 1)),
            "another process under our pid"
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let child_started = process_start(pid);
        child.wait().unwrap();
        if let Some(child_started) = child_started {
            assert!(is_gone((pid, child_started)));
        }
    }

    #[test]
    fn records_are_private_files_listed_oldest_first_and_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-task-records-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let records = Records::new(Some(dir.clone()));
        // Ids need not be file names: they are hashed with the server's name.
        let odd = record("a", "../../etc/passwd", 2, "working");
        records.save(&odd).unwrap();
        records.save(&record("b", "t-1", 1, "completed")).unwrap();
        records
            .save(&record("a", "t-1", 3, "input_required"))
            .unwrap();
        let listed: Vec<(String, String)> = (records.all().into_iter())
            .map(|record| (record.server, record.task_id))
            .collect();
        let expected = [("b", "t-1"), ("a", "../../etc/passwd"), ("a", "t-1")];
        let expected: Vec<(String, String)> = (expected.iter())
            .map(|(server, id)| ((*server).to_owned(), (*id).to_owned()))
            .collect();
        assert_eq!(listed, expected);
        let replaced = record("a", "../../etc/passwd", 2, "lost");
        records.save(&replaced).unwrap();
        assert_eq!(
            records.load("a", "../../etc/passwd"),
            Some(replaced.clone())
        );
        assert!(replaced.is_done() && !record("a", "x", 0, "working").is_done());
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{:?}", entry.path());
        }
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
        let _ = std::fs::remove_dir_all(&dir);
        // Without a folder nothing is kept, and nothing fails.
        let none = Records::new(None);
        none.save(&odd).unwrap();
        assert!(none.all().is_empty() && none.load("a", "t-1").is_none());
    }
}
