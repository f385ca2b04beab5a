//! What the fixture asks of the person beyond a form, for the gateway's relays: a -32042
//! naming a link to open (mode `url-required`), its roots during a call (mode `roots-call`),
//! a form while a prompt or a resource is read (mode `ask-in-reads`), and its roots again
//! when the client says they changed (any handshake-era mode).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use mcp_tests::stateless;
use serde_json::{Value, json};

use super::{Era, NAME, Server};

/// The link `needs_link` wants opened.
pub(crate) const LINK: &str = "https://auth.example.com/connect?id=link-1";

/// How many times `needs_link` has been called.
static LINK_CALLS: AtomicU64 = AtomicU64::new(0);

/// How many times prompt `greet` has been got in mode `ask-in-reads`.
static PROMPT_LINK_GETS: AtomicU64 = AtomicU64::new(0);

/// How many times the client said its roots changed.
static ROOTS_CHANGED: AtomicU64 = AtomicU64::new(0);

impl Server {
    /// Mode `url-required`, tool `needs_link`: the first call is answered -32042 (URL
    /// elicitation required, 2025-11-25) naming [`LINK`]; later ones go through, as if the
    /// person had opened it meanwhile.
    pub(crate) fn needs_link(&self, id: &Value) {
        let calls = LINK_CALLS.fetch_add(1, Ordering::SeqCst) + 1;
        if calls == 1 {
            return self.refuse(id, link_required());
        }
        let text = format!("linked after {calls} calls");
        self.answer(id, Ok(json!({"content": [{"type": "text", "text": text}]})));
    }

    /// Mode `roots-call`, tool `show_roots`: the client's roots, asked during the call, as
    /// JSON text. Handshake era: a `roots/list` request; stateless era: an input round (the
    /// client's `roots` capability is needed, else -32021).
    pub(crate) fn show_roots(self: &Arc<Self>, id: Value, params: &Value, stateless: bool) {
        if stateless {
            return self.show_roots_in_rounds(&id, params);
        }
        let server = self.clone();
        thread::spawn(move || {
            let key = format!("roots-of-{id}");
            server.send(&json!({"jsonrpc": "2.0", "id": key, "method": "roots/list"}));
            let answer = server.answer_to(&key);
            let text = match answer.get("result") {
                Some(result) => result["roots"].to_string(),
                None => format!("refused {}", answer["error"]),
            };
            let result = json!({"content": [{"type": "text", "text": text}]});
            server.answer(&id, Ok(result));
        });
    }

    /// Mode `ask-in-reads` (handshake era): a `prompts/get` or a `resources/read` asks the
    /// person a form first, and what they answered is the prompt's text or the resource's.
    /// Its prompt `greet` is answered -32042 naming [`LINK`] on the first get, as `needs_link`
    /// is, and `linked after N gets` after.
    pub(crate) fn ask_then_read(self: &Arc<Self>, id: Value, method: &str, params: &Value) {
        let prompt = method == "prompts/get";
        if prompt && params["name"] == "greet" {
            let gets = PROMPT_LINK_GETS.fetch_add(1, Ordering::SeqCst) + 1;
            if gets == 1 {
                return self.refuse(&id, link_required());
            }
            let text = format!("linked after {gets} gets");
            let result = json!({"messages": [{"role": "user",
                                              "content": {"type": "text", "text": text}}]});
            return self.answer(&id, Ok(result));
        }
        let server = self.clone();
        let uri = params["uri"].clone();
        thread::spawn(move || {
            let key = format!("form-of-{id}");
            let form = json!({"message": "Which colour?", "requestedSchema": {"type": "object",
                              "properties": {"colour": {"type": "string"}}}});
            server.send(
                &json!({"jsonrpc": "2.0", "id": key, "method": "elicitation/create",
                                "params": form}),
            );
            let answer = server.answer_to(&key);
            let text = match answer.get("result") {
                Some(result) => format!("{} {}", result["action"], result["content"]),
                None => format!("refused {}", answer["error"]),
            };
            let result = match prompt {
                true => json!({"messages": [{"role": "user",
                                             "content": {"type": "text", "text": text}}]}),
                false => {
                    json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]})
                }
            };
            server.answer(&id, Ok(result));
        });
    }

    /// Mode `ask-in-reads`, stateless era: the same form as an input round of the
    /// `prompts/get` or `resources/read` (state `colour`), and on the retry what the person
    /// answered as the prompt's or the resource's text.
    pub(crate) fn ask_then_read_in_rounds(&self, id: &Value, method: &str, params: &Value) {
        let answer = &params["inputResponses"]["colour"];
        if params["requestState"] != "colour" || !answer.is_object() {
            let form = json!({"message": "Which colour?", "requestedSchema": {"type": "object",
                              "properties": {"colour": {"type": "string"}}}});
            let asked = json!({"method": "elicitation/create", "params": form});
            let mut result = json!({"resultType": "input_required",
                                    "inputRequests": {"colour": asked}, "requestState": "colour"});
            result["_meta"][stateless::META_SERVER_INFO] =
                json!({"name": NAME, "version": "1.0.0"});
            return self.answer(id, Ok(result));
        }
        let text = format!("{} {}", answer["action"], answer["content"]);
        let result = match method {
            "prompts/get" => json!({"messages": [{"role": "user",
                                                  "content": {"type": "text", "text": text}}]}),
            _ => {
                json!({"contents": [{"uri": params["uri"], "mimeType": "text/plain", "text": text}]})
            }
        };
        self.answer(id, Ok(stateless::complete(result, NAME)));
    }

    /// The client's answer to our request `key`, once it came.
    fn answer_to(&self, key: &str) -> Value {
        loop {
            let answers = self.answers.lock().unwrap();
            if let Some(answer) = answers.iter().find(|answer| answer["id"] == key) {
                return answer.clone();
            }
            drop(answers);
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn show_roots_in_rounds(&self, id: &Value, params: &Value) {
        let declared = &params["_meta"][stateless::META_CAPABILITIES];
        if declared.get("roots").is_none() {
            let mut refusal = stateless::error(
                stateless::MISSING_CAPABILITY,
                "Missing required client capability: roots",
            );
            refusal["data"] = json!({"requiredCapabilities": {"roots": {}}});
            return self.refuse(id, refusal);
        }
        let answered = &params["inputResponses"]["roots"];
        if params["requestState"] == "roots" && answered.is_object() {
            let text = answered["roots"].to_string();
            let result = json!({"content": [{"type": "text", "text": text}]});
            return self.answer(id, Ok(stateless::complete(result, NAME)));
        }
        let mut result = json!({"resultType": "input_required",
                                "inputRequests": {"roots": {"method": "roots/list"}},
                                "requestState": "roots"});
        result["_meta"][stateless::META_SERVER_INFO] = json!({"name": NAME, "version": "1.0.0"});
        self.answer(id, Ok(result));
    }

    /// `notifications/roots/list_changed`: asks for the roots again (`roots-again-N`), as
    /// servers do; `report` shows the answers.
    pub(crate) fn roots_changed(&self) {
        if self.era == Era::Stateless {
            return;
        }
        let count = ROOTS_CHANGED.fetch_add(1, Ordering::SeqCst) + 1;
        let key = format!("roots-again-{count}");
        self.send(&json!({"jsonrpc": "2.0", "id": key, "method": "roots/list"}));
    }
}

/// The -32042 (URL elicitation required) naming [`LINK`].
fn link_required() -> Value {
    let elicitation = json!({"mode": "url", "elicitationId": "link-1", "url": LINK,
                             "message": "Connect your account"});
    json!({"code": -32042, "message": "This request requires more information.",
           "data": {"elicitations": [elicitation]}})
}
