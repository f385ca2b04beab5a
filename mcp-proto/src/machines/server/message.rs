//! A host's message decoded once, for a transport that reads each message whole (an HTTP
//! request's body) and must look at it before the machine does (its id, its method, its
//! `_meta`): what it reads is what the machine then takes, with no second decode.

use serde_json::Value;

use crate::model::result_members::ResultMembers;
use crate::wire::jsonrpc::{self, Message, Messages};
use crate::wire::line_error::LineError;

/// One JSON-RPC message of the host's, decoded; give it to
/// [`ServerConnection::handle_message`](super::ServerConnection::handle_message).
#[derive(Debug, Clone, PartialEq)]
pub struct HostMessage(pub(super) Message<ResultMembers>);

impl HostMessage {
    /// Decodes `text`, one JSON-RPC message (white space and line ends anywhere JSON allows
    /// them). A batch, or JSON that is not a message, is [`LineError::NotJsonRpc`]; what is
    /// not JSON is [`LineError::NotJson`] or [`LineError::NotUtf8`].
    pub fn decode(text: &[u8]) -> Result<Self, LineError> {
        match jsonrpc::decode(text) {
            Messages::One(Some(message)) => message.map(Self),
            Messages::One(None) | Messages::Batch(_) => Err(LineError::NotJsonRpc {
                detail: "a batch, where one message was expected".to_owned(),
            }),
        }
    }

    /// A request's or an answer's id (a request's is a string or a number); `None` for a
    /// notification.
    pub fn id(&self) -> Option<&Value> {
        match &self.0 {
            Message::Request { id, .. } | Message::Response { id, .. } => Some(id),
            Message::Notification { .. } => None,
        }
    }

    /// A request's or a notification's method; `None` for an answer.
    pub fn method(&self) -> Option<&str> {
        match &self.0 {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } => None,
        }
    }

    /// Whether it is a request: it has a method and an id.
    pub fn is_request(&self) -> bool {
        matches!(self.0, Message::Request { .. })
    }

    /// Member `name` of `params._meta`, if there is one.
    pub fn meta(&self, name: &str) -> Option<&Value> {
        let params = match &self.0 {
            Message::Request { params, .. } | Message::Notification { params, .. } => params,
            Message::Response { .. } => &None,
        };
        params.as_ref()?.get("_meta")?.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::HostMessage;
    use crate::wire::line_error::LineError;
    use serde_json::json;

    #[test]
    fn reads_a_request_a_notification_and_an_answer() {
        let call = HostMessage::decode(
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\n \"params\":{\"name\":\"x\",\
              \"_meta\":{\"progressToken\":\"t\"}}}",
        )
        .unwrap();
        assert!(call.is_request());
        assert_eq!(
            (call.id(), call.method()),
            (Some(&json!(7)), Some("tools/call"))
        );
        assert_eq!(call.meta("progressToken"), Some(&json!("t")));
        assert_eq!(call.meta("other"), None);

        let note =
            HostMessage::decode(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let note = note.unwrap();
        assert!(!note.is_request());
        assert_eq!((note.id(), note.meta("x")), (None, None));

        let answer = HostMessage::decode(br#"{"jsonrpc":"2.0","id":"s1","result":{}}"#).unwrap();
        assert_eq!((answer.id(), answer.method()), (Some(&json!("s1")), None));
        assert!(!answer.is_request());
    }

    #[test]
    fn refuses_what_is_not_one_message() {
        let not_one = |text: &[u8]| HostMessage::decode(text).unwrap_err();
        assert!(matches!(
            not_one(b"[{\"jsonrpc\":\"2.0\",\"method\":\"a\"}]"),
            LineError::NotJsonRpc { .. }
        ));
        assert!(matches!(not_one(b"\"x\""), LineError::NotJsonRpc { .. }));
        assert!(matches!(
            not_one(b"{\"id\":1,\"method\":5}"),
            LineError::NotJsonRpc { .. }
        ));
        assert!(matches!(
            not_one(b"{\"id\":null,\"method\":\"a\"}"),
            LineError::NotJsonRpc { .. }
        ));
        assert!(matches!(not_one(b"{\"id\":"), LineError::NotJson { .. }));
        assert!(matches!(not_one(b"\xff"), LineError::NotUtf8));
    }
}
