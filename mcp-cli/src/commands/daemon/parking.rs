//! Parked questions: a call run for a command line that parks them (`call --park`, with no
//! terminal to ask on) whose server asks a form or a link answers its command line at once
//! with the question, and waits here, its server's request open, until `mcp-cli answer`
//! brings the answer or [`WAIT`] passes (then it is cancelled, as a person dismissing it).
//!
//! The call runs as a task of its own, which outlives the connection that started it; its
//! questions reach it through the relay as a stateless-era host's input rounds do, noted
//! under its server, and every step it takes (a question, its end) comes here on a channel,
//! so that whichever connection is waiting on it (the call's own, then each answer's) gets
//! the next one.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use futures_lite::future::FutureExt;
use mcp_smol::proto::RpcError;
use serde_json::{Value, json};

use crate::exit::Exit;
use crate::gateway::{Asked, Question, Relay, Takes};
use crate::hub::Elicitation;

/// How long a question waits for its answer: within the five minutes a server's request
/// may stay open before the core refuses it.
pub(crate) const WAIT: Duration = Duration::from_secs(240);

/// The time a parked call has to end, unless its command line gives one (`--timeout`): a
/// question and its answer fit in it.
pub(crate) const CALL_TIME: Duration = Duration::from_secs(300);

/// The questions parked calls wait on, by id.
#[derive(Default)]
pub(crate) struct Parking(Mutex<BTreeMap<String, Parked>>);

/// A call that waits on a question.
struct Parked {
    call: Call,
    /// The question's `elicitation/create` params, as relayed (naming the server asking).
    asked: Value,
    answer: Sender<Value>,
    until: Instant,
}

/// A call run for a command line, as this module follows it.
struct Call {
    server: String,
    tool: String,
    steps: Receiver<Step>,
}

/// What a parked call did next.
enum Step {
    Asked(Question),
    /// It ended: what its command line prints, `{"exit", "lines"}`.
    Done(Value),
}

impl Parking {
    fn table(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Parked>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether any question waits (the daemon does not exit idle then).
    pub(crate) fn is_empty(&self) -> bool {
        self.table().is_empty()
    }

    /// Runs `run`, a command line's call of `tool` on `server`, with the questions that
    /// server asks it parked; answers with what the command line prints: the call's end,
    /// or its first question.
    pub(crate) async fn run(
        self: &Arc<Self>,
        (server, tool): (String, String),
        run: impl Future<Output = Value> + Send + 'static,
        relay: &Relay,
        executor: &async_executor::Executor<'static>,
    ) -> Result<Value, RpcError> {
        let (questions, asked) = async_channel::bounded(1);
        let takes = Takes {
            forms: true,
            urls: true,
            roots: false,
        };
        let ticket = relay.wait_in_rounds(&server, questions, takes);
        let (step, steps) = async_channel::unbounded();
        let running = async move {
            let _ticket = ticket;
            let forward = async {
                while let Ok(question) = asked.recv().await {
                    if step.send(Step::Asked(question)).await.is_err() {
                        break;
                    }
                }
                std::future::pending().await
            };
            let output = run.or(forward).await;
            let _ = step.send(Step::Done(output)).await;
        };
        executor.spawn(running).detach();
        let call = Call {
            server,
            tool,
            steps,
        };
        self.next(call, executor).await
    }

    /// `mcp-cli/answer {id, action, pairs}`: the answer checked against the question, given
    /// to the call, and what the command line prints once the call ends or asks again. A bad
    /// answer leaves the question parked.
    pub(crate) async fn answer(
        self: &Arc<Self>,
        params: &Value,
        executor: &async_executor::Executor<'static>,
    ) -> Result<Value, RpcError> {
        let id = params["id"].as_str().unwrap_or_default();
        let action = params["action"].as_str().unwrap_or("accept");
        let pairs: Vec<String> =
            serde_json::from_value(params["pairs"].clone()).unwrap_or_default();
        let Some(parked) = self.table().remove(id) else {
            return Ok(refused(&format!(
                "no question is parked as {id}: answered already, cancelled after {} s \
                 unanswered, or parked on a daemon since stopped (`mcp-cli parked` lists those \
                 that wait)",
                WAIT.as_secs()
            )));
        };
        let result = match reply(&parked.asked, action, &pairs) {
            Ok(result) => result,
            Err(why) => {
                self.table().insert(id.to_owned(), parked);
                return Ok(refused(&format!("{id}: {why}; the question still waits")));
            }
        };
        // Gone when the call ended meanwhile (its server gave up asking): its end is next.
        let _ = parked.answer.try_send(result);
        self.next(parked.call, executor).await
    }

    /// `mcp-cli/parked`: every question that waits, oldest first.
    pub(crate) fn list(&self) -> Value {
        let table = self.table();
        let mut parked: Vec<(&String, &Parked)> = table.iter().collect();
        parked.sort_by_key(|(_, parked)| parked.until);
        let questions = parked.iter().map(|(id, parked)| shown_question(id, parked));
        json!({ "parked": questions.collect::<Vec<_>>() })
    }

    /// The call's next step: its end, or its next question, parked under a new id.
    async fn next(
        self: &Arc<Self>,
        call: Call,
        executor: &async_executor::Executor<'static>,
    ) -> Result<Value, RpcError> {
        loop {
            let step = call.steps.recv().await.map_err(|_| RpcError {
                code: RpcError::INTERNAL_ERROR,
                message: "the daemon stopped before the call ended".to_owned(),
                data: None,
            })?;
            let question = match step {
                Step::Done(output) => return Ok(output),
                Step::Asked(question) => question,
            };
            // Only forms and links are relayed here, never roots (which it does not take).
            let Asked::Elicitation(asked) = question.asked else {
                let _ = question.answer.try_send(json!({ "roots": [] }));
                continue;
            };
            let id = new_id();
            let parked = Parked {
                call,
                asked,
                answer: question.answer,
                until: Instant::now() + WAIT,
            };
            let shown = shown_question(&id, &parked);
            self.table().insert(id.clone(), parked);
            executor.spawn(self.clone().expire(id)).detach();
            return Ok(json!({ "exit": Exit::Parked.code(), "parked": shown }));
        }
    }

    /// Cancels question `id` once [`WAIT`] has passed, if it still waits, and every later
    /// question of its call: nobody is there to print the call's end.
    async fn expire(self: Arc<Self>, id: String) {
        async_io::Timer::after(WAIT).await;
        let Some(parked) = self.table().remove(&id) else {
            return;
        };
        eprintln!(
            "mcp-cli daemon: question {id} of {} (a call of {}) waited {} s unanswered: cancelled",
            parked.call.server,
            parked.call.tool,
            WAIT.as_secs()
        );
        let cancel = json!({ "action": "cancel" });
        let _ = parked.answer.try_send(cancel.clone());
        while let Ok(Step::Asked(question)) = parked.call.steps.recv().await {
            let _ = question.answer.try_send(cancel.clone());
        }
    }
}

/// The result a question is answered with, from `mcp-cli answer`'s action and pairs: a form
/// filled in and checked against its schema, a link said yes to (with no pairs).
fn reply(asked: &Value, action: &str, pairs: &[String]) -> Result<Value, String> {
    match action {
        "decline" | "cancel" => return Ok(json!({ "action": action })),
        "accept" => {}
        other => {
            return Err(format!(
                "{other:?} is not an answer (accept, decline, cancel)"
            ));
        }
    }
    let form = Elicitation::of_relayed("the daemon", Some(asked));
    if form.url.is_some() {
        return match pairs.is_empty() {
            true => Ok(json!({ "action": "accept" })),
            false => Err("it is a link, not a form: answer it with no KEY=VALUE".to_owned()),
        };
    }
    let content = crate::elicit::filled(&form.schema, pairs)?;
    Ok(json!({ "action": "accept", "content": content }))
}

/// What a command line prints for question `id`: `mcp-cli parked`'s entries, and what a
/// parked call answers with.
fn shown_question(id: &str, parked: &Parked) -> Value {
    let form = Elicitation::of_relayed(&parked.call.server, Some(&parked.asked));
    let left = parked.until.saturating_duration_since(Instant::now());
    let mut shown = json!({
        "id": id,
        "server": form.server,
        "tool": parked.call.tool,
        "message": form.message,
        "expiresInSeconds": left.as_secs(),
    });
    match &form.url {
        Some(link) => {
            shown["kind"] = json!("link");
            shown["url"] = json!(link.url);
            shown["answerWith"] = json!(format!("mcp-cli answer {id} --open"));
        }
        None => {
            shown["kind"] = json!("form");
            shown["answerWith"] = json!(answer_command(id, &form.schema));
            shown["requestedSchema"] = form.schema;
        }
    }
    shown
}

/// `mcp-cli answer ID name=VALUE ...`, naming the required fields without a default.
fn answer_command(id: &str, schema: &Value) -> String {
    let required = schema.get("required").and_then(Value::as_array);
    let fields = schema.get("properties");
    let needed = (required.into_iter().flatten().filter_map(Value::as_str))
        .filter(|name| fields.and_then(|f| f.get(name)?.get("default")).is_none())
        .map(|name| format!(" {name}=VALUE"));
    format!("mcp-cli answer {id}{}", needed.collect::<String>())
}

/// What a command line prints when its answer is refused: exit 2 with the reason.
fn refused(message: &str) -> Value {
    json!({ "exit": Exit::Usage.code(), "error": message })
}

/// An id no other question of this daemon, nor of one before it, has: `q` and 8 hex digits.
fn new_id() -> String {
    let mut bytes = [0u8; 4];
    // A clock's nanoseconds stand in if the system's randomness fails, which it does not.
    if getrandom::getrandom(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        bytes = nanos.to_le_bytes();
    }
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("q{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({"message": "Who?", "requestedSchema": {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "n": {"type": "integer", "default": 1}}}})
    }

    #[test]
    fn an_answer_is_checked_against_the_question() {
        let pairs = |pairs: &[&str]| pairs.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            reply(&form(), "accept", &pairs(&["name=Ada"])),
            Ok(json!({"action": "accept", "content": {"name": "Ada", "n": 1}}))
        );
        assert_eq!(
            reply(&form(), "accept", &pairs(&["n=x", "name=Ada"])),
            Err("n: \"x\" is not an integer".to_owned())
        );
        assert_eq!(
            reply(&form(), "decline", &[]),
            Ok(json!({"action": "decline"}))
        );
        let link = json!({"mode": "url", "message": "Log in", "url": "https://a.example/x"});
        assert_eq!(reply(&link, "accept", &[]), Ok(json!({"action": "accept"})));
        assert!(reply(&link, "accept", &pairs(&["a=b"])).is_err());
    }

    #[test]
    fn the_answer_command_names_the_fields_without_a_default() {
        let schema = &form()["requestedSchema"];
        assert_eq!(answer_command("q1", schema), "mcp-cli answer q1 name=VALUE");
        let ids: std::collections::BTreeSet<String> = (0..50).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 50, "{ids:?}");
        assert!(ids.iter().all(|id| id.len() == 9 && id.starts_with('q')));
    }
}
