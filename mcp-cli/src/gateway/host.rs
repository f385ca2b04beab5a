//! The gateway's side of its host: the connection once the host's handshake is done (or its
//! first stateless-era request came; what it declared decides what the gateway may offer its
//! servers), and the questions passed up to it: `ask` rules, and the forms a server asks for
//! (`elicitation/create`), as requests of ours to a handshake-era host or as `input_required`
//! rounds to a stateless-era one.

use std::sync::{Arc, Mutex, PoisonError};

use async_channel::{Receiver, Sender};
use mcp_smol::proto::{ClientInfo, ElicitResult, Era, Request, ServerConfig, ServerEvent};
use mcp_smol::{ServeDriver, Server};
use serde_json::json;

use crate::gateway::rounds::{Question, Rounds};
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
                    let link = HostLink {
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
    /// The roots of servers with none configured: this host's own, asked of it each time a
    /// server asks (a handshake-era host that declared `roots`; `None` for any other).
    pub(crate) fn roots_handler(&self) -> Option<RootsHandler> {
        let stateless = Era::of(&self.client.protocol_version) == Some(Era::Stateless);
        if stateless || !self.client.declares("roots") {
            return None;
        }
        let server = self.server.clone();
        Some(RootsHandler::new(move |_asking: String| {
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
    let (answer, answered) = async_channel::bounded(1);
    if questions.send(Question { params, answer }).await.is_err() {
        return Err("asking the host failed: the call ended".to_owned());
    }
    match answered.recv().await.map(|answer| answer_of(&answer)) {
        Ok(ElicitAnswer::Accept(_)) => Ok(()),
        Ok(ElicitAnswer::Decline) => Err("the host answered decline".to_owned()),
        _ => Err("the host answered cancel".to_owned()),
    }
}

/// Passes servers' forms up to the host whose request is waiting on that server. The
/// daemon's hosts share one hub, so a form goes to the latest host waiting on the server
/// that asks (or on any server: a command line run in the daemon); with none, it is declined,
/// as a run without a terminal declines it.
#[derive(Clone, Default)]
pub(crate) struct Relay(Arc<Mutex<Waiting>>);

#[derive(Default)]
struct Waiting {
    next: u64,
    /// `(ticket, server or any, host)`, oldest first.
    hosts: Vec<(u64, Option<String>, Asker)>,
}

/// Where a form goes to reach a host.
#[derive(Clone)]
enum Asker {
    /// A handshake-era host: a request of ours, of the kinds it declared it takes.
    Request(Server, Takes),
    /// A stateless-era host's call: an `input_required` round of that call.
    Round(Sender<Question>),
}

/// What a handshake-era host declared it answers.
#[derive(Clone, Copy)]
struct Takes {
    forms: bool,
    urls: bool,
    roots: bool,
}

impl Asker {
    fn takes_forms(&self) -> bool {
        !matches!(self, Asker::Request(_, takes) if !takes.forms)
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
    /// dropped. A host that can answer neither forms nor roots is not noted; nor is a
    /// stateless-era host, which takes no requests of ours (its calls wait in rounds instead:
    /// [`wait_in_rounds`](Self::wait_in_rounds)).
    pub(crate) fn wait_on(&self, server: Option<&str>, host: &HostLink) -> Option<Ticket> {
        let stateless = Era::of(&host.client.protocol_version) == Some(Era::Stateless);
        let takes = Takes {
            forms: host.client.declares("elicitation"),
            urls: host.client.takes_url_elicitation(),
            roots: host.client.declares("roots"),
        };
        if stateless || !(takes.forms || takes.roots) {
            return None;
        }
        Some(self.note(server, Asker::Request(host.server.clone(), takes)))
    }

    /// Notes that a stateless-era host's call waits on `server`: its forms go to `questions`,
    /// to become that call's `input_required` rounds. The caller checks that the request
    /// declared elicitation.
    pub(crate) fn wait_in_rounds(&self, server: &str, questions: Sender<Question>) -> Ticket {
        self.note(Some(server), Asker::Round(questions))
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

    /// The input rounds of the latest stateless-era call waiting on the server of `tool` (a
    /// shown name, `<server>__<tool>`).
    fn round_for_tool(&self, tool: &str) -> Option<Sender<Question>> {
        match self.asker_for_tool(tool) {
            Some(Asker::Round(questions)) => Some(questions),
            _ => None,
        }
    }

    /// The latest host whose call waits on the server of `tool` (a shown name,
    /// `<server>__<tool>`) and can be asked.
    fn asker_for_tool(&self, tool: &str) -> Option<Asker> {
        let waiting = self.waiting();
        let mut hosts = waiting.hosts.iter().rev();
        hosts.find_map(|(_, on, asker)| {
            let on = on.as_deref().filter(|_| asker.takes_forms())?;
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
                    Some(Asker::Request(server, _)) => ask_by_request(&server, &ask).await,
                    Some(Asker::Round(questions)) => ask_in_round(Some(questions), &ask).await,
                    None => Err("the host cannot be asked: its request did not declare the \
                                 elicitation capability; change the rule to allow, or use a \
                                 host that can"
                        .to_owned()),
                }
            }
        })
    }

    /// The roots of servers with none configured where many hosts share the hub (`serve
    /// --listen`): the roots of the latest handshake-era host whose call waits on the server
    /// that asks, asked of it each time, when it declared `roots`; none otherwise.
    pub(crate) fn roots_handler(&self) -> RootsHandler {
        let relay = self.clone();
        RootsHandler::new(move |asking: String| {
            let host = relay.roots_host(&asking);
            async move { host?.request(Request::new("roots/list", None)).await.ok() }
        })
    }

    fn roots_host(&self, server: &str) -> Option<Server> {
        let waiting = self.waiting();
        let mut hosts = waiting.hosts.iter().rev();
        hosts.find_map(|(_, on, host)| match host {
            Asker::Request(host, takes) if takes.roots && on.as_deref() == Some(server) => {
                Some(host.clone())
            }
            _ => None,
        })
    }

    fn host_for(&self, server: &str) -> Option<Asker> {
        let waiting = self.waiting();
        let mut hosts = waiting.hosts.iter().rev();
        let found = hosts.find(|(_, on, host)| {
            host.takes_forms() && on.as_deref().is_none_or(|on| on == server)
        });
        found.map(|(_, _, host)| host.clone())
    }

    /// The hub's handler: each form to the host waiting on the server that asks.
    pub(crate) fn handler(&self) -> ElicitHandler {
        let relay = self.clone();
        ElicitHandler::new(move |elicitation: Elicitation| {
            let host = relay.host_for(&elicitation.server);
            async move {
                let Some(host) = host else {
                    return ElicitAnswer::Decline;
                };
                // A link goes only to a host that said it can show one.
                let takes_urls = matches!(host, Asker::Request(_, takes) if takes.urls);
                if elicitation.url.is_some() && !takes_urls {
                    return ElicitAnswer::Decline;
                }
                let params = elicitation.relayed();
                match host {
                    Asker::Request(host, _) => {
                        let request = Request::new("elicitation/create", Some(params));
                        match host.request(request).await {
                            Ok(answer) => answer_of(&answer),
                            // A host that cannot answer has not said yes.
                            Err(_) => ElicitAnswer::Cancel,
                        }
                    }
                    Asker::Round(questions) => {
                        let (answer, answered) = async_channel::bounded(1);
                        let question = Question { params, answer };
                        match questions.send(question).await {
                            Ok(()) => match answered.recv().await {
                                Ok(answer) => answer_of(&answer),
                                Err(_) => ElicitAnswer::Cancel,
                            },
                            Err(_) => ElicitAnswer::Cancel,
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
