//! Answering what servers ask of the hub: `roots/list` from the server's configured roots
//! (else through the [`RootsHandler`] in the settings), `elicitation/create` through the
//! [`ElicitHandler`] in the settings. Anything else, and anything asked of a hub that declared
//! nothing, is refused by the core. A server given the handler's roots is told when they
//! change ([`Hub::roots_changed`]), so that it asks again.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_channel::{Receiver, Sender};
use mcp_smol::Client;
use mcp_smol::proto::{Era, RpcError, ServerRequest};
use serde_json::{Map, Value, json};

/// A form a server wants filled in (`elicitation/create`).
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    /// The server asking.
    pub server: String,
    /// What it says to the person.
    pub message: String,
    /// The requested schema: an object whose `properties` are flat fields (string, number,
    /// integer, boolean, enums), some `required`, some with a `default`.
    pub schema: Value,
    /// URL mode (2025-11-25): the link the server asks the person to open, and its id for
    /// the interaction; `None` for a form. Reaches only a handler that
    /// [takes URLs](ElicitHandler::taking_urls).
    pub url: Option<UrlElicitation>,
}

/// What a URL-mode elicitation asks: open `url` (out of band; the answer `accept` is consent,
/// not completion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlElicitation {
    /// The link.
    pub url: String,
    /// `elicitationId`, which `notifications/elicitation/complete` names later.
    pub id: String,
}

/// The `_meta` key that names the server asking, on a form passed on to another program (the
/// gateway's host, the command line the daemon runs a command for), which shows it as that
/// server's.
#[cfg(feature = "cli")]
const ASKING_SERVER: &str = "mcp-cli/server";

impl Elicitation {
    /// The `elicitation/create` params that pass this form on, naming the server asking.
    #[cfg(feature = "cli")]
    pub(crate) fn relayed(&self) -> Value {
        match &self.url {
            Some(url) => json!({
                "mode": "url",
                "message": self.message,
                "url": url.url,
                "elicitationId": url.id,
                "_meta": { ASKING_SERVER: self.server },
            }),
            None => json!({
                "message": self.message,
                "requestedSchema": self.schema,
                "_meta": { ASKING_SERVER: self.server },
            }),
        }
    }

    /// A form passed on with [`relayed`](Self::relayed): as the server it names asks it, else
    /// as `relay` does.
    #[cfg(feature = "cli")]
    pub(crate) fn of_relayed(relay: &str, params: Option<&Value>) -> Self {
        let meta = params.and_then(|params| params.get("_meta"));
        let asking = meta.and_then(|meta| meta.get(ASKING_SERVER));
        Self::of(asking.and_then(Value::as_str).unwrap_or(relay), params)
    }

    /// The form `server` asks for with the `params` of its `elicitation/create`.
    pub(crate) fn of(server: &str, params: Option<&Value>) -> Self {
        let text = |key: &str| params.and_then(|p| p.get(key)).and_then(Value::as_str);
        let schema = params.and_then(|params| params.get("requestedSchema"));
        Elicitation {
            server: server.to_owned(),
            message: text("message").unwrap_or_default().to_owned(),
            schema: schema.cloned().unwrap_or(json!({})),
            url: (text("mode") == Some("url")).then(|| UrlElicitation {
                url: text("url").unwrap_or_default().to_owned(),
                id: text("elicitationId").unwrap_or_default().to_owned(),
            }),
        }
    }
}

/// The person's answer to an [`Elicitation`].
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// Submitted, with these field values.
    Accept(Map<String, Value>),
    /// Said no.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

impl ElicitAnswer {
    /// The `elicitation/create` result that carries this answer.
    pub(crate) fn to_result(&self) -> Value {
        match self {
            ElicitAnswer::Accept(content) => json!({"action": "accept", "content": content}),
            ElicitAnswer::Decline => json!({"action": "decline"}),
            ElicitAnswer::Cancel => json!({"action": "cancel"}),
        }
    }
}

type Fill = dyn Fn(Elicitation) -> Pin<Box<dyn Future<Output = ElicitAnswer> + Send>> + Send + Sync;

/// Fills in servers' forms: a form on the terminal in the CLI. With one in the settings, the
/// hub declares the `elicitation` capability; without, it does not, and servers do not ask.
/// Cheap to clone.
#[derive(Clone)]
pub struct ElicitHandler {
    fill: Arc<Fill>,
    urls: bool,
}

impl ElicitHandler {
    /// A handler from an async closure (or any function returning a future), for forms
    /// only.
    pub fn new<F, Fut>(fill: F) -> Self
    where
        F: Fn(Elicitation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ElicitAnswer> + Send + 'static,
    {
        let fill: Arc<Fill> = Arc::new(move |elicitation| Box::pin(fill(elicitation)));
        Self { fill, urls: false }
    }

    /// The handler takes URL-mode elicitations too ([`Elicitation::url`]), so servers are
    /// told the hub can (`elicitation: {"form": {}, "url": {}}`). It must show the link's
    /// host and open it only once the person agrees.
    #[must_use]
    pub fn taking_urls(mut self) -> Self {
        self.urls = true;
        self
    }

    /// Whether it takes URL-mode elicitations.
    pub(crate) fn takes_urls(&self) -> bool {
        self.urls
    }

    pub(crate) async fn fill(&self, elicitation: Elicitation) -> ElicitAnswer {
        (self.fill)(elicitation).await
    }
}

impl std::fmt::Debug for ElicitHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ElicitHandler")
    }
}

type ListRoots =
    dyn Fn(String) -> Pin<Box<dyn Future<Output = Option<Value>> + Send>> + Send + Sync;

/// Names the roots of servers that have none configured: a gateway's host's own. With one in
/// the settings, every server is told the hub has roots. Cheap to clone.
#[derive(Clone)]
pub struct RootsHandler {
    list: Arc<ListRoots>,
    answered: Arc<Mutex<Vec<Answered>>>,
}

/// A server whose roots may come from a [`RootsHandler`], and where to tell it they changed.
type Answered = (String, Sender<()>);

impl RootsHandler {
    /// A handler from an async closure given the asking server's name, answering the
    /// `roots/list` result (`{"roots": [...]}`), or `None` for no roots.
    pub fn new<F, Fut>(list: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<Value>> + Send + 'static,
    {
        Self {
            list: Arc::new(move |server| Box::pin(list(server))),
            answered: Arc::default(),
        }
    }

    /// The roots for `server`: the handler's answer when it is a list of roots, else none.
    async fn list(&self, server: &str) -> Value {
        match (self.list)(server.to_owned()).await {
            Some(result) if result.get("roots").is_some_and(Value::is_array) => result,
            _ => roots_result(&[]),
        }
    }

    /// Where a change of `server`'s roots is heard, until the receiver is dropped.
    fn changes_of(&self, server: &str) -> Receiver<()> {
        let (tell, hear) = async_channel::bounded(1);
        let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        answered.retain(|(_, tell)| !tell.is_closed());
        answered.push((server.to_owned(), tell));
        hear
    }

    /// Tells each of `servers` answered from this handler that its roots changed.
    #[cfg(feature = "cli")]
    fn changed(&self, servers: &[String]) {
        let answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        for (server, tell) in answered.iter() {
            if servers.contains(server) {
                // Full: a change it has yet to hear of, which covers this one.
                let _ = tell.try_send(());
            }
        }
    }
}

#[cfg(feature = "cli")]
impl crate::hub::Hub {
    /// The roots `servers` were given through the settings' [`RootsHandler`] changed: each one
    /// running in the handshake era is sent `notifications/roots/list_changed`, and asks again
    /// (the 2026-07-28 revision has no such notification; its servers ask on each request).
    pub(crate) fn roots_changed(&self, servers: &[String]) {
        if let Some(handler) = &self.inner.settings.roots {
            handler.changed(servers);
        }
    }
}

impl std::fmt::Debug for RootsHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RootsHandler")
    }
}

/// What a server's requests are answered from.
pub(crate) struct Answers {
    /// The server's configured roots.
    pub(crate) roots: Vec<PathBuf>,
    /// The roots of a server with none configured.
    pub(crate) host_roots: Option<RootsHandler>,
    pub(crate) elicit: Option<ElicitHandler>,
    /// Counts the forms declined or dismissed that were asked within a call (a stateless-era
    /// `input_required` round): a call that then runs out of rounds was asked again what was
    /// refused, which is not the server's failure.
    pub(crate) declined: Arc<AtomicU64>,
}

/// Answers one server's requests until its connection ends; `roots_answered` hears once a
/// `roots/list` has been answered.
pub(crate) async fn serve(
    server: String,
    client: Client,
    requests: async_channel::Receiver<ServerRequest>,
    answers: Answers,
    roots_answered: async_channel::Sender<()>,
) {
    let Answers {
        roots,
        host_roots,
        elicit,
        declined,
    } = answers;
    let changes = (host_roots.as_ref())
        .filter(|_| roots.is_empty())
        .map(|handler| handler.changes_of(&server));
    enum Next {
        Asked(ServerRequest),
        RootsChanged,
    }
    loop {
        let asked = async { requests.recv().await.ok().map(Next::Asked) };
        let changed = async {
            if let Some(changes) = &changes
                && changes.recv().await.is_ok()
            {
                return Some(Next::RootsChanged);
            }
            std::future::pending().await
        };
        let request = match futures_lite::future::or(asked, changed).await {
            Some(Next::Asked(request)) => request,
            Some(Next::RootsChanged) => {
                let era = client.wait_ready().await.ok().and_then(|info| info.era());
                if era == Some(Era::Handshake) {
                    client
                        .notify("notifications/roots/list_changed", None)
                        .await;
                }
                continue;
            }
            None => break,
        };
        let result = match (request.method.as_str(), &elicit) {
            ("roots/list", _) => match &host_roots {
                Some(handler) if roots.is_empty() => Ok(handler.list(&server).await),
                _ => Ok(roots_result(&roots)),
            },
            ("elicitation/create", Some(handler)) => {
                let elicitation = Elicitation::of(&server, request.params.as_ref());
                let answer = fill_checked(handler, elicitation).await;
                if request.request.is_some() && !matches!(answer, ElicitAnswer::Accept(_)) {
                    declined.fetch_add(1, Ordering::SeqCst);
                }
                Ok(answer.to_result())
            }
            (method, _) => Err(RpcError::method_not_found(method)),
        };
        let roots_asked = request.method == "roots/list";
        client.respond(request.id, result).await;
        if roots_asked {
            // Full after the first: later answers need no telling.
            let _ = roots_answered.try_send(());
        }
    }
}

/// How often a form whose answer does not fit is asked again before it is declined.
const FORM_ATTEMPTS: usize = 3;

/// The handler's answer to `elicitation`, checked against its schema first: an answer that
/// does not fit (`email: "agent"`, a choice not among the `enum`'s) never reaches the server.
/// The form is asked again, its message saying which field and why, and declined after
/// [`FORM_ATTEMPTS`] answers that do not fit (a handler that answers the same each time).
pub(crate) async fn fill_checked(
    handler: &ElicitHandler,
    elicitation: Elicitation,
) -> ElicitAnswer {
    let mut asked = elicitation.clone();
    for _ in 0..FORM_ATTEMPTS {
        let answer = handler.fill(asked.clone()).await;
        let ElicitAnswer::Accept(content) = &answer else {
            return answer;
        };
        // A link's answer has no fields; a form without a schema constrains nothing.
        if elicitation.url.is_some() || elicitation.schema.as_object().is_none_or(Map::is_empty) {
            return answer;
        }
        let content = Value::Object(content.clone());
        let Some(mismatch) = crate::hub::validate::check_answer(&elicitation.schema, &content)
        else {
            return answer;
        };
        let field = mismatch.path.trim_start_matches('/');
        let place = match field.is_empty() {
            true => "the answer".to_owned(),
            false => format!("field {field}"),
        };
        asked.message = format!(
            "{place} does not fit the form: {}. {}",
            mismatch.message, elicitation.message
        );
    }
    ElicitAnswer::Decline
}

/// The event a server's `notifications/elicitation/complete` makes, if `note` is one.
pub(crate) fn elicitation_complete(
    note: &mcp_smol::proto::Notification,
    server: impl Fn() -> String,
) -> Option<crate::hub::HubEvent> {
    if note.method != "notifications/elicitation/complete" {
        return None;
    }
    let id = note.params.as_ref()?.get("elicitationId")?.as_str()?;
    Some(crate::hub::HubEvent::ElicitationComplete {
        server: server(),
        id: id.to_owned(),
    })
}

/// `{"roots": [{"uri": "file:///...", "name": "..."}]}` for absolute paths.
fn roots_result(roots: &[PathBuf]) -> Value {
    let roots: Vec<Value> = (roots.iter())
        .map(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            json!({"uri": file_uri(path), "name": name.unwrap_or_else(|| "/".to_owned())})
        })
        .collect();
    json!({ "roots": roots })
}

/// A `file://` URI for an absolute path, with the bytes URIs cannot hold percent-encoded.
pub(crate) fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = "file://".to_owned();
    for &byte in path.as_os_str().as_bytes() {
        let plain = byte.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&byte);
        if plain {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer that does not fit its form is not sent: the form is asked again saying
    /// which field and why, and declined if the answers never fit.
    #[test]
    fn a_form_answer_is_checked_against_its_schema_before_it_is_sent() {
        let schema = json!({"type": "object", "required": ["email", "size"], "properties": {
            "email": {"type": "string", "format": "email"},
            "size": {"type": "string", "enum": ["s", "m"]},
            "colour": {"oneOf": [{"const": "red", "title": "Red"}, {"const": "blue"}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        }});
        let form = Elicitation {
            server: "fx".to_owned(),
            message: "Who are you?".to_owned(),
            schema,
            url: None,
        };
        let answers = |answers: Vec<Value>| {
            let asked = Arc::new(Mutex::new(Vec::new()));
            let queue = Arc::new(Mutex::new(answers));
            let seen = asked.clone();
            let handler = ElicitHandler::new(move |form: Elicitation| {
                seen.lock().unwrap().push(form.message);
                let next = queue.lock().unwrap().remove(0);
                async move { ElicitAnswer::Accept(next.as_object().unwrap().clone()) }
            });
            (handler, asked)
        };
        let good = json!({"email": "ada@example.com", "size": "m", "colour": "red", "tags": ["a"]});
        let cases = [
            (json!({"email": "agent", "size": "m"}), "field email"),
            (json!({"email": "a@b.org", "size": "xl"}), "field size"),
            (
                json!({"email": "a@b.org", "size": "s", "colour": "green"}),
                "field colour",
            ),
            (
                json!({"email": "a@b.org", "size": "s", "tags": ["c"]}),
                "field tags/0",
            ),
            (json!({"size": "s"}), "the answer"),
        ];
        for (bad, place) in cases {
            let (handler, asked) = answers(vec![bad.clone(), good.clone()]);
            let answer = futures_lite::future::block_on(fill_checked(&handler, form.clone()));
            assert_eq!(
                answer,
                ElicitAnswer::Accept(good.as_object().unwrap().clone())
            );
            let asked = asked.lock().unwrap().clone();
            assert_eq!(asked.len(), 2, "{bad}: {asked:?}");
            assert_eq!(asked[0], "Who are you?");
            assert!(
                asked[1].starts_with(&format!("{place} does not fit the form: ")),
                "{bad}: {asked:?}"
            );
            assert!(asked[1].ends_with(". Who are you?"), "{asked:?}");
        }
        let bad = json!({"email": "agent", "size": "m"});
        let (handler, asked) = answers(vec![bad.clone(), bad.clone(), bad]);
        let answer = futures_lite::future::block_on(fill_checked(&handler, form));
        assert_eq!(answer, ElicitAnswer::Decline);
        assert_eq!(asked.lock().unwrap().len(), FORM_ATTEMPTS);
    }

    #[test]
    fn roots_are_file_uris_named_by_their_last_part() {
        let roots = [PathBuf::from("/home/a b/project"), PathBuf::from("/")];
        assert_eq!(
            roots_result(&roots),
            json!({"roots": [
                {"uri": "file:///home/a%20b/project", "name": "project"},
                {"uri": "file:///", "name": "/"}
            ]})
        );
    }
}
