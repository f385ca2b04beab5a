//! How the connection's messages go out: one POST each (or held for a session or the
//! HTTP+SSE endpoint), with the headers the session and the era ask for.

use crate::machines::connection::{Outgoing, Sent};
use crate::model::headers::encode_header_value;

use super::{Answer, Exchange, ExchangeId, HttpConnection, Mode, Post, Purpose};

impl HttpConnection {
    /// Sends one message from the connection: one POST, or held until a new session or
    /// HTTP+SSE's endpoint is ready for it.
    pub(super) fn transmit(&mut self, mut message: Vec<u8>, sent: Sent) {
        if message.last() == Some(&b'\n') {
            message.pop();
        }
        match sent {
            // Over HTTP the stateless era cancels by closing the request's stream.
            Sent::Cancelled(id) if self.stateless() => {
                if let Some(exchange) = self.by_request.remove(&id) {
                    self.stop_exchange(exchange);
                }
                return;
            }
            // The answer to the new `initialize` has come: the new session is ready.
            Sent::Initialized => self.restarting = false,
            // Issued before the session was lost, it would go out with no session at all.
            Sent::Request(..) | Sent::Other if self.restarting => {
                self.resend.push((message, sent));
                return;
            }
            _ => {}
        }
        let (url, legacy) = match &mut self.mode {
            Mode::Legacy {
                endpoint: Some(url),
                ..
            } => (url.clone(), true),
            Mode::Legacy { queued, .. } => return queued.push((message, sent)),
            Mode::Probing | Mode::Streamable => (self.url.clone(), false),
        };
        self.post(url, message, sent, legacy);
    }

    pub(super) fn post(&mut self, url: String, body: Vec<u8>, sent: Sent, legacy: bool) {
        let mut headers = match &sent {
            _ if legacy => Vec::new(),
            Sent::Discover { version, .. } => stateless_headers(version, "server/discover", None),
            Sent::Request(_, Some(outgoing)) => self.request_headers(outgoing),
            _ => self.headers(),
        };
        headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
        headers.push((
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ));
        let answer = match sent {
            Sent::Initialize(_) | Sent::Request(..) | Sent::Discover { .. } if legacy => {
                Answer::OnTheStream
            }
            Sent::Initialize(_) | Sent::Request(..) | Sent::Discover { .. } => Answer::InResponse,
            Sent::Initialized | Sent::Cancelled(_) | Sent::Other => Answer::None,
        };
        let timeout = (answer == Answer::None).then_some(self.connection.config().request_timeout);
        let id = self.next_id();
        let session = if legacy { None } else { self.session.clone() };
        self.outgoing.push_back(Exchange::Post(Post {
            id,
            url: url.clone(),
            headers,
            body: body.clone(),
            answer,
            timeout,
        }));
        match &sent {
            Sent::Initialized => self.gate = Some(id),
            Sent::Initialize(request) => self.initialize = Some((*request, id)),
            Sent::Request(request, _) if !legacy => _ = self.by_request.insert(*request, id),
            _ => {}
        }
        let purpose = Purpose::Post {
            url,
            body,
            sent,
            session,
            legacy,
        };
        self.exchanges.insert(id, purpose);
    }

    /// The headers of a stateless-era request: the protocol version, `Mcp-Method`, `Mcp-Name`
    /// and, for `tools/call`, the `Mcp-Param-*` headers the tool's listing asked for (none for
    /// a tool not listed yet).
    pub(super) fn request_headers(&self, outgoing: &Outgoing) -> Vec<(String, String)> {
        let name = outgoing.name.as_deref();
        let mut headers = stateless_headers(outgoing.version, &outgoing.method, name);
        if let (Some(name), Some(arguments)) = (name, &outgoing.arguments) {
            headers.extend(self.tools.headers(name, arguments));
        }
        headers
    }

    /// Stops an exchange: its stream closes, what it still brings is ignored.
    pub(super) fn stop_exchange(&mut self, exchange: ExchangeId) {
        self.answered.remove(&exchange);
        self.pieces.remove(&exchange);
        if self.exchanges.remove(&exchange).is_some() {
            self.outgoing.push_back(Exchange::Cancel(exchange));
        }
    }

    pub(super) fn next_id(&mut self) -> ExchangeId {
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        id
    }

    /// The session's headers for a message to the Streamable HTTP endpoint.
    pub(super) fn headers(&self) -> Vec<(String, String)> {
        let mut headers = Vec::new();
        if let Some(session) = &self.session {
            headers.push(("Mcp-Session-Id".to_owned(), session.clone()));
        }
        if let Some(info) = self.connection.server_info() {
            let version = info.protocol_version.clone();
            headers.push(("MCP-Protocol-Version".to_owned(), version));
        }
        headers
    }
}

/// `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`, `prompts/get`,
/// `resources/read`) `Mcp-Name`, encoded when it is not a safe header value.
pub(super) fn stateless_headers(
    version: &str,
    method: &str,
    name: Option<&str>,
) -> Vec<(String, String)> {
    let mut headers = vec![
        ("MCP-Protocol-Version".to_owned(), version.to_owned()),
        ("Mcp-Method".to_owned(), method.to_owned()),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name".to_owned(), encode_header_value(name)));
    }
    headers
}
