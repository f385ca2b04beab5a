//! The gateway's side of its host: the connection once the host's handshake is done (or its
//! first stateless-era request came; what it declared decides what the gateway may offer its
//! servers), and the questions passed up to it: `ask` rules, and what a server asks of the
//! person (`elicitation/create`, a form or a link, and `roots/list`), as requests of ours to a
//! handshake-era host or as `input_required` rounds to a stateless-era one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_channel::{Receiver, Sender};
use mcp_smol::proto::{
    ElicitResult, Era, Request,
    server::{ClientInfo, ServerConfig, ServerEvent},
};
use mcp_smol::{ServeDriver, Server};
use serde_json::{Value, json};

use crate::gateway::rounds::{Asked, Question, Rounds};
use crate::hub::{Ask, AskHandler, ElicitAnswer, ElicitHandler, Elicitation, RootsHandler};

/// A host whose handshake is done, or whose first stateless-era request came.
pub(crate) struct Host {
    pub(crate) link: HostLink,
    pub(crate) events: Receiver<ServerEvent>,
    pub(crate) driver: async_executor::Task<()>,
}

/// How the gateway reaches its host: requests to it, and what it declared about itself (in
/// the stateless era, in its first request; each request then says it again).
#[derive(Clone)]
pub(crate) struct HostLink {
    /// Tells this host's links from other hosts' (a session's, or a stateless-era request's).
    pub(crate) id: u64,
    pub(crate) server: Server,
    pub(crate) client: ClientInfo,
    /// Stateless era: its calls waiting on its answers; dropped with the last link, which
    /// cancels them.
    pub(crate) rounds: Rounds,
}

impl Host {
    /// Serves the server role over `reader` and `writer` until the host has finished its
    /// handshake or sent its first stateless-era request; `None` if it hung up first.
    pub(crate) async fn connect<R, W>(
        reader: R,
        writer: W,
        config: ServerConfig,
        executor: &async_executor::Executor<'static>,
    ) -> Option<Host>
    where
        R: futures_lite::io::AsyncRead + Unpin + Send + 'static,
        W: futures_lite::io::AsyncWrite + Unpin + Send + 'static,
    {
        Self::connect_sharing(reader, writer, config, executor, None).await
    }

    /// [`connect`](Self::connect), with the parked calls of `rounds` when given: a
    /// stateless-era host over HTTP gets a connection per request, and its retry must find
    /// the call its previous request parked.
    pub(crate) async fn connect_sharing<R, W>(
        reader: R,
        writer: W,
        config: ServerConfig,
        executor: &async_executor::Executor<'static>,
        rounds: Option<Rounds>,
    ) -> Option<Host>
    where
        R: futures_lite::io::AsyncRead + Unpin + Send + 'static,
        W: futures_lite::io::AsyncWrite + Unpin + Send + 'static,
    {
        let served = mcp_smol::serve(reader, writer, config);
        Self::connect_served(served, executor, rounds).await
    }

    /// [`connect_sharing`](Self::connect_sharing) for a server role already started (by
    /// [`mcp_smol::serve_messages`], whose host's messages come decoded).
    pub(crate) async fn connect_served(
        (server, events, driver): (Server, Receiver<ServerEvent>, ServeDriver),
        executor: &async_executor::Executor<'static>,
        rounds: Option<Rounds>,
    ) -> Option<Host> {
        let driver = executor.spawn(driver);
        // Before the handshake the host may only ping, which the core answers itself.
        loop {
            match events.recv().await {
                Ok(ServerEvent::Ready(client)) => {
                    let env = |key: &str| std::env::var(key).ok();
                    let rounds = rounds.unwrap_or_else(|| Rounds::new(&env));
                    static NEXT_LINK: AtomicU64 = AtomicU64::new(0);
                    let link = HostLink {
                        id: NEXT_LINK.fetch_add(1, Ordering::Relaxed),
                        server,
                        client,
                        rounds,
                    };
                    return Some(Host {
                        link,
                        events,
                        driver,
                    });
                }
                Ok(ServerEvent::Closed(_)) | Err(_) => {
                    driver.await;
                    return None;
                }
                Ok(_) => {}
            }
        }
    }
}

impl HostLink {
    /// Decides `ask` rules by asking this host for a yes through elicitation, when it
    /// declared that it can; otherwise the call is refused with the reason. A stateless-era
    /// host is asked in an input round of the call the rule covers, found through `relay`.
    pub(crate) fn ask_handler(&self, relay: &Relay) -> AskHandler {
        let (server, can_ask) = (self.server.clone(), self.client.declares("elicitation"));
        let stateless = Era::of(&self.client.protocol_version) == Some(Era::Stateless);
        let relay = relay.clone();
        AskHandler::new(move |ask: Ask| {
            let server = server.clone();
            let round = stateless.then(|| relay.round_for_tool(&ask.tool));
            async move {
                if let Some(round) = round {
                    return ask_in_round(round, &ask).await;
                }
                if !can_ask {
                    return Err(
                        "the host cannot be asked: it did not declare the elicitation \
                                capability; change the rule to allow, or use a host that can"
                            .to_owned(),
                    );
                }
                ask_by_request(&server, &ask).await
            }
        })
    }
}

impl HostLink {
    /// The roots of servers with none configured: this host's own, when it declared `roots`
    /// (`None` for any other). A handshake-era host is asked each time a server asks, whether
    /// or not a call waits; a stateless-era host only in an input round of a call of its
    /// that waits on the server asking ([`Relay::roots_handler`]).
    pub(crate) fn roots_handler(&self, relay: &Relay) -> Option<RootsHandler> {
        if !self.client.declares("roots") {
            return None;
        }
        if Era::of(&self.client.protocol_version) == Some(Era::Stateless) {
            return Some(relay.roots_handler());
        }
        let (server, link, relay) = (self.server.clone(), self.id, relay.clone());
        Some(RootsHandler::new(move |asking: String| {
            relay.given(&asking, link);
            let server = server.clone();
            async move { server.request(Request::new("roots/list", None)).await.ok() }
        }))
    }
}

/// Asks a handshake-era host about an `ask` rule with a form of ours.
async fn ask_by_request(server: &Server, ask: &Ask) -> Result<(), String> {
    let (message, form) = ask_form(ask);
    match server.request(Request::elicit(message, form)).await {
        Ok(answer) if answer.accepted() => Ok(()),
        Ok(answer) => Err(format!("the host answered {}", answer.action)),
        Err(error) => Err(format!("asking the host failed: {error}")),
    }
}

/// The question an `ask` rule puts to the host: a plain yes or no, a form without fields.
fn ask_form(ask: &Ask) -> (String, serde_json::Value) {
    let message = format!(
        "Allow {} with arguments {}? (rule tool = {:?}, {})",
        ask.tool,
        ask.arguments,
        ask.rule.tool.as_str(),
        ask.rule.origin
    );
    (message, json!({"type": "object", "properties": {}}))
}

/// Asks a stateless-era host about an `ask` rule in an input round of the call it covers;
/// without such a call (the request did not declare elicitation), refuses with the reason.
async fn ask_in_round(round: Option<Sender<Question>>, ask: &Ask) -> Result<(), String> {
    let Some(questions) = round else {
        return Err(
            "the host cannot be asked: its request did not declare the elicitation \
                    capability; change the rule to allow, or use a host that can"
                .to_owned(),
        );
    };
    let (message, form) = ask_form(ask);
    let params = json!({"message": message, "requestedSchema": form});
    match in_round(&questions, Asked::Elicitation(params)).await {
        None => Err("asking the host failed: the call ended".to_owned()),
        Some(answer) => match answer_of(&answer) {
            ElicitAnswer::Accept(_) => Ok(()),
            ElicitAnswer::Decline => Err("the host answered decline".to_owned()),
            ElicitAnswer::Cancel => Err("the host answered cancel".to_owned()),
        },
    }
}

/// Puts `asked` to a stateless-era host in the next input round of its call; its answer, or
/// `None` when the call ended first.
pub(crate) async fn in_round(questions: &Sender<Question>, asked: Asked) -> Option<Value> {
    let (answer, answered) = async_channel::bounded(1);
    questions.send(Question { asked, answer }).await.ok()?;
    answered.recv().await.ok()
}

/// Passes servers' questions (forms, links, roots) up to the host whose request is waiting on
/// that server. The daemon's hosts share one hub, so a question goes to the latest host
/// waiting on the server that asks (or on any server: a command line run in the daemon) that
/// takes that kind of question; with none, a form or link is declined, as a run without a
/// terminal declines it. Roots asked while no call waits go to the handshake-era host that
/// last called the server, while its connection lasts.
#[derive(Clone, Default)]
pub(crate) struct Relay(Arc<Mutex<Waiting>>);

#[derive(Default)]
struct Waiting {
    next: u64,
    /// `(ticket, server or any, host)`, oldest first.
    hosts: Vec<(u64, Option<String>, Asker)>,
    /// By server: the handshake-era host that declared `roots` and called it last (its
    /// link's id, and its connection), asked for the server's roots when no call waits.
    last_caller: BTreeMap<String, (u64, Server)>,
    /// By server: the host (its link's id) whose roots it was given last, which its
    /// `notifications/roots/list_changed` concerns.
    given: BTreeMap<String, u64>,
}

/// Where a question goes to reach a host.
#[derive(Clone)]
enum Asker {
    /// A handshake-era host: a request of ours, of the kinds it declared it takes.
    Request {
        host: Server,
        /// Its link's id.
        link: u64,
        takes: Takes,
    },
    /// A stateless-era host's call: an `input_required` round of that call, of the kinds its
    /// request declared.
    Round(Sender<Question>, Takes),
}

impl Asker {
    fn takes(&self) -> Takes {
        match self {
            Asker::Request { takes, .. } | Asker::Round(_, takes) => *takes,
        }
    }
}

/// What a host declared it answers (a stateless-era host: in the request at hand).
#[derive(Clone, Copy, Default)]
pub(crate) struct Takes {
    pub(crate) forms: bool,
    pub(crate) urls: bool,
    pub(crate) roots: bool,
}

impl Takes {
    pub(crate) fn of(client: &ClientInfo) -> Self {
        let elicitation = client.capabilities.get("elicitation");
        let elicitation = elicitation.filter(|e| e.is_object());
        let mode = |name: &str| elicitation.is_some_and(|e| e.get(name).is_some());
        Takes {
            // `elicitation: {}` is forms only; `{"url": {}}` is links only.
            forms: elicitation.is_some() && (mode("form") || !mode("url")),
            urls: client.takes_url_elicitation(),
            roots: client.declares("roots"),
        }
    }

    /// Whether it takes any question a server may ask.
    pub(crate) fn any(self) -> bool {
        self.forms || self.urls || self.roots
    }
}

/// A host's place in the [`Relay`], given up when dropped.
pub(crate) struct Ticket {
    relay: Relay,
    ticket: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.relay
            .waiting()
            .hosts
            .retain(|(t, _, _)| *t != self.ticket);
    }
}

impl Relay {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that `host` waits on `server` (`None`: on whichever server) until the ticket is
    /// dropped, and, when it declared `roots`, that it called `server` last. A host that can
    /// answer no question is not noted; nor is a stateless-era host, which takes no requests
    /// of ours (its calls wait in rounds instead: [`wait_in_rounds`](Self::wait_in_rounds)).
    pub(crate) fn wait_on(&self, server: Option<&str>, host: &HostLink) -> Option<Ticket> {
        let stateless = Era::of(&host.client.protocol_version) == Some(Era::Stateless);
        let takes = Takes::of(&host.client);
        if stateless || !takes.any() {
            return None;
        }
        if let Some(server) = server.filter(|_| takes.roots) {
            let caller = (host.id, host.server.clone());
            self.waiting().last_caller.insert(server.to_owned(), caller);
        }
        let asker = Asker::Request {
            host: host.server.clone(),
            link: host.id,
            takes,
        };
        Some(self.note(server, asker))
    }

    /// Notes that a stateless-era host's call waits on `server`: the questions its request
    /// declared it `takes` go to `questions`, to become that call's `input_required` rounds.
    pub(crate) fn wait_in_rounds(
        &self,
        server: &str,
        questions: Sender<Question>,
        takes: Takes,
    ) -> Ticket {
        self.note(Some(server), Asker::Round(questions, takes))
    }

    fn note(&self, server: Option<&str>, asker: Asker) -> Ticket {
        let mut waiting = self.waiting();
        let ticket = waiting.next;
        waiting.next += 1;
        (waiting.hosts).push((ticket, server.map(str::to_owned), asker));
        Ticket {
            relay: self.clone(),
            ticket,
        }
    }

    /// Notes that `server` was given the roots of the host whose link is `link`.
    fn given(&self, server: &str, link: u64) {
        self.waiting().given.insert(server.to_owned(), link);
    }

    /// The servers given `host`'s roots last: those its `notifications/roots/list_changed`
    /// concerns.
    pub(crate) fn given_roots_of(&self, host: &HostLink) -> Vec<String> {
        let waiting = self.waiting();
        let given = waiting.given.iter().filter(|(_, link)| **link == host.id);
        given.map(|(server, _)| server.clone()).collect()
    }

    /// The input rounds of the latest stateless-era call waiting on the server of `tool` (a
    /// shown name, `<server>__<tool>`) whose request declared forms.
    fn round_for_tool(&self, tool: &str) -> Option<Sender<Question>> {
        match self.asker_for_tool(tool) {
            Some(Asker::Round(questions, _)) => Some(questions),
            _ => None,
        }
    }

    /// The latest host whose call waits on the server of `tool` (a shown name,
    /// `<server>__<tool>`) and can be asked with a form.
    fn asker_for_tool(&self, tool: &str) -> Option<Asker> {
        let waiting = self.waiting();
        let mut hosts = waiting.hosts.iter().rev();
        hosts.find_map(|(_, on, asker)| {
            let on = on.as_deref().filter(|_| asker.takes().forms)?;
            let calls = tool.strip_prefix(on).is_some_and(|t| t.starts_with("__"));
            calls.then(|| asker.clone())
        })
    }

    /// `ask` rules where many hosts share the hub (`serve --listen`): each is put to the host
    /// whose call it covers, as a form of ours or an input round of that call; a host that
    /// did not declare elicitation cannot be asked, and the call is refused with the reason.
    pub(crate) fn ask_handler(&self) -> AskHandler {
        let relay = self.clone();
        AskHandler::new(move |ask: Ask| {
            let asker = relay.asker_for_tool(&ask.tool);
            async move {
                match asker {
                    Some(Asker::Request { host, .. }) => ask_by_request(&host, &ask).await,
                    Some(Asker::Round(questions, _)) => ask_in_round(Some(questions), &ask).await,
                    None => Err("the host cannot be asked: its request did not declare the \
                                 elicitation capability; change the rule to allow, or use a \
                                 host that can"
                        .to_owned()),
                }
            }
        })
    }

    /// The roots of servers with none configured, from the host whose call waits on the
    /// server that asks and declared `roots`, the latest such: a handshake-era host is sent
    /// `roots/list`, a stateless-era call gets it as an input round. With no call waiting,
    /// the handshake-era host that last called that server (and declared `roots`) is asked,
    /// while its connection lasts; otherwise the server gets no roots.
    pub(crate) fn roots_handler(&self) -> RootsHandler {
        let relay = self.clone();
        RootsHandler::new(move |asking: String| {
            let asker = relay.roots_asker(&asking);
            let relay = relay.clone();
            async move {
                match asker? {
                    Asker::Request { host, link, .. } => {
                        relay.given(&asking, link);
                        host.request(Request::new("roots/list", None)).await.ok()
                    }
                    Asker::Round(questions, _) => in_round(&questions, Asked::Roots).await,
                }
            }
        })
    }

    fn roots_asker(&self, server: &str) -> Option<Asker> {
        let waiting = self.waiting();
        let mut hosts = waiting.hosts.iter().rev();
        let waits =
            hosts.find(|(_, on, asker)| asker.takes().roots && on.as_deref() == Some(server));
        if let Some((_, _, asker)) = waits {
            return Some(asker.clone());
        }
        let (link, host) = waiting.last_caller.get(server)?;
        let takes = Takes {
            roots: true,
            ..Takes::default()
        };
        Some(Asker::Request {
            host: host.clone(),
            link: *link,
            takes,
        })
    }

    /// The latest host waiting on `server` that takes a link (`url`) or a form; else the
    /// latest waiting on any server (a command line run in the daemon, whose server is not
    /// known here), which is less sure to be the one the question is for.
    fn host_for(&self, server: &str, url: bool) -> Option<Asker> {
        let waiting = self.waiting();
        let takes = |host: &Asker| {
            let takes = host.takes();
            if url { takes.urls } else { takes.forms }
        };
        let latest = |on_server: bool| {
            let mut hosts = waiting.hosts.iter().rev();
            let found = hosts.find(|(_, on, host)| {
                let waits = match on.as_deref() {
                    Some(on) => on_server && on == server,
                    None => !on_server,
                };
                waits && takes(host)
            });
            found.map(|(_, _, host)| host.clone())
        };
        latest(true).or_else(|| latest(false))
    }

    /// The hub's handler: each form, or link, to the host waiting on the server that asks
    /// and able to show it; declined when there is none.
    pub(crate) fn handler(&self) -> ElicitHandler {
        let relay = self.clone();
        ElicitHandler::new(move |elicitation: Elicitation| {
            let host = relay.host_for(&elicitation.server, elicitation.url.is_some());
            async move {
                let Some(host) = host else {
                    return ElicitAnswer::Decline;
                };
                let params = elicitation.relayed();
                match host {
                    Asker::Request { host, .. } => {
                        let request = Request::new("elicitation/create", Some(params));
                        match host.request(request).await {
                            Ok(answer) => answer_of(&answer),
                            // A host that cannot answer has not said yes.
                            Err(_) => ElicitAnswer::Cancel,
                        }
                    }
                    Asker::Round(questions, _) => {
                        let asked = Asked::Elicitation(link_for_round(params));
                        match in_round(&questions, asked).await {
                            Some(answer) => answer_of(&answer),
                            None => ElicitAnswer::Cancel,
                        }
                    }
                }
            }
        })
        .taking_urls()
    }
}

/// The host's answer to a form, as the hub passes it to the server.
fn answer_of(result: &serde_json::Value) -> ElicitAnswer {
    use mcp_smol::proto::FromResult;
    match ElicitResult::from_result(result.clone()) {
        Ok(answer) if answer.accepted() => ElicitAnswer::Accept(answer.content.unwrap_or_default()),
        Ok(answer) if answer.action == "decline" => ElicitAnswer::Decline,
        _ => ElicitAnswer::Cancel,
    }
}

/// A relayed link's `elicitation/create` params as the 2026-07-28 revision has them: without
/// `elicitationId`, which only its completion notification used.
pub(crate) fn link_for_round(mut params: Value) -> Value {
    if let Some(params) = params.as_object_mut() {
        params.remove("elicitationId");
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    fn takes(capabilities: Value) -> (bool, bool, bool) {
        let client = ClientInfo {
            protocol_version: "2026-07-28".to_owned(),
            client: Default::default(),
            capabilities,
        };
        let takes = Takes::of(&client);
        (takes.forms, takes.urls, takes.roots)
    }

    #[test]
    fn what_a_host_takes_is_read_from_its_capabilities_as_the_spec_says() {
        assert_eq!(takes(json!({})), (false, false, false));
        // A bare `elicitation` is forms only.
        assert_eq!(takes(json!({"elicitation": {}})), (true, false, false));
        assert_eq!(
            takes(json!({"elicitation": {"url": {}}})),
            (false, true, false)
        );
        let both = json!({"elicitation": {"form": {}, "url": {}}, "roots": {}});
        assert_eq!(takes(both), (true, true, true));
    }

    #[test]
    fn a_question_goes_to_a_host_waiting_on_its_server_before_one_waiting_on_any() {
        let relay = Relay::default();
        let forms = Takes {
            forms: true,
            ..Takes::default()
        };
        let (on_st, _asked_st) = async_channel::bounded(1);
        let (on_any, _asked_any) = async_channel::bounded(1);
        let _st = relay.wait_in_rounds("st", on_st.clone(), forms);
        // Later, and so first were both waiting on any server.
        let _any = relay.note(None, Asker::Round(on_any.clone(), forms));
        let round = |asker: Option<Asker>| match asker {
            Some(Asker::Round(questions, _)) => Some(questions),
            _ => None,
        };
        let for_st = round(relay.host_for("st", false)).unwrap();
        assert!(for_st.same_channel(&on_st));
        let for_other = round(relay.host_for("other", false)).unwrap();
        assert!(for_other.same_channel(&on_any));
        // Neither takes links.
        assert!(relay.host_for("st", true).is_none());
        drop(_st);
        assert!(
            round(relay.host_for("st", false))
                .unwrap()
                .same_channel(&on_any)
        );
    }
}
