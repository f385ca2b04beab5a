//! A posted body read as one message of the host's, decoded once: what `serve --listen` reads
//! of it (its id, its method, `params._meta`) is read from the message its machine then takes,
//! never from the text again.

use mcp_smol::proto::{LineError, server::HostMessage};
use serde_json::Value;

/// A posted JSON-RPC message.
pub(super) struct Posted(HostMessage);

/// Why a body is not one message.
pub(super) enum Unread {
    Batch,
    /// JSON, but not a JSON-RPC message (not an object, a request with a null id, ...).
    NotAMessage(LineError),
    /// Not JSON.
    Invalid(LineError),
}

impl Posted {
    pub(super) fn read(body: &[u8]) -> Result<Self, Unread> {
        if body.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'[') {
            return Err(Unread::Batch);
        }
        match HostMessage::decode(body) {
            Ok(message) => Ok(Self(message)),
            Err(error @ LineError::NotJsonRpc { .. }) => Err(Unread::NotAMessage(error)),
            Err(error) => Err(Unread::Invalid(error)),
        }
    }

    /// The id, `Null` when there is none.
    pub(super) fn id(&self) -> Value {
        self.0.id().cloned().unwrap_or(Value::Null)
    }

    /// A request: a method and an id.
    pub(super) fn is_request(&self) -> bool {
        self.0.is_request()
    }

    /// The method, `""` when there is none.
    pub(super) fn method(&self) -> &str {
        self.0.method().unwrap_or_default()
    }

    /// A member of `params._meta`; `Null` when absent.
    pub(super) fn meta(&self, name: &str) -> &Value {
        self.0.meta(name).unwrap_or(&Value::Null)
    }

    /// The message, for its machine.
    pub(super) fn into_message(self) -> HostMessage {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::{Posted, Unread};
    use serde_json::{Value, json};

    fn read(text: &str) -> Posted {
        Posted::read(text.as_bytes()).unwrap_or_else(|_| panic!("unread: {text}"))
    }

    #[test]
    fn reads_id_method_and_meta() {
        let call = read(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x",
                "arguments":{"a":[1,{"b":null}]},"_meta":{"progressToken":"t"}}}"#,
        );
        assert!(call.is_request());
        assert_eq!((call.id(), call.method()), (json!(7), "tools/call"));
        assert_eq!(call.meta("progressToken"), &json!("t"));
        assert_eq!(call.meta("other"), &Value::Null);

        let note = read(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(!note.is_request());
        assert_eq!(note.id(), Value::Null);
        let answer = read(r#"{"jsonrpc":"2.0","id":"s","result":{}}"#);
        assert!(!answer.is_request());
        assert_eq!((answer.id(), answer.method()), (json!("s"), ""));
        let spaced = read(" {\"id\": 1, \"method\": \"a\",\n \"params\": {\"_meta\": {\"x\": 3}}}");
        assert_eq!(spaced.meta("x"), &json!(3));
    }

    #[test]
    fn refuses_what_is_not_one_message() {
        assert!(matches!(Posted::read(b"[{}]"), Err(Unread::Batch)));
        assert!(matches!(Posted::read(b" [1, 2]"), Err(Unread::Batch)));
        assert!(matches!(
            Posted::read(b"\"x\""),
            Err(Unread::NotAMessage(_))
        ));
        let odd = b"{\"id\":null,\"method\":\"a\"}";
        assert!(matches!(Posted::read(odd), Err(Unread::NotAMessage(_))));
        assert!(matches!(
            Posted::read(b"{\"id\":1,\"method\":5}"),
            Err(Unread::NotAMessage(_))
        ));
        assert!(matches!(Posted::read(b"{\"id\":"), Err(Unread::Invalid(_))));
    }
}
