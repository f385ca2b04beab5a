//! What `serve --listen` reads of a posted message before it passes the text on: its id, its
//! method and `params._meta`. The rest (a call's arguments) is skipped, not decoded: the
//! machine reads the text. Decoding the whole message into a `Value` here, to drop it, cost a
//! twelfth of serving a call.

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// A posted JSON object, as far as it is read here.
pub(super) struct Posted {
    /// `None` when absent (a notification, an answer has one), `Some(Null)` for `null`.
    id: Option<Value>,
    method: Option<Value>,
    /// `params._meta`; `Null` when absent.
    meta: Value,
}

/// Why a body is not one message.
pub(super) enum Unread {
    Batch,
    NotAnObject,
    Invalid(serde_json::Error),
}

/// The members read, borrowed from the body.
#[derive(Deserialize)]
struct Members<'a> {
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    method: Option<Value>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Params {
    #[serde(rename = "_meta", default)]
    meta: Value,
}

/// A member that is there, whatever its value (`null` too).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Posted {
    pub(super) fn read(body: &[u8]) -> Result<Self, Unread> {
        // A struct is also read from an array (its members in order): only an object will do.
        let object = body.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{');
        if object && let Ok(members) = serde_json::from_slice::<Members>(body) {
            let meta = match members.params {
                Some(params) if params.get().starts_with('{') => {
                    match serde_json::from_str::<Params>(params.get()) {
                        Ok(params) => params.meta,
                        // `_meta` twice: as a `Value` reads it, the last one.
                        Err(_) => (serde_json::from_str::<Value>(params.get()))
                            .map_or(Value::Null, |params| params["_meta"].clone()),
                    }
                }
                // Not an object: no `_meta`.
                _ => Value::Null,
            };
            return Ok(Self {
                id: members.id,
                method: members.method,
                meta,
            });
        }
        // Not an object, not JSON, or an object with a member twice (the last one counts).
        match serde_json::from_slice::<Value>(body) {
            Ok(message @ Value::Object(_)) => Ok(Self {
                id: message.get("id").cloned(),
                method: message.get("method").cloned(),
                meta: message["params"]["_meta"].clone(),
            }),
            Ok(Value::Array(_)) => Err(Unread::Batch),
            Ok(_) => Err(Unread::NotAnObject),
            Err(error) => Err(Unread::Invalid(error)),
        }
    }

    /// The id, `Null` when there is none.
    pub(super) fn id(&self) -> Value {
        self.id.clone().unwrap_or(Value::Null)
    }

    /// A request: a method and an id.
    pub(super) fn is_request(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }

    /// The method, `""` when there is none or it is not a string.
    pub(super) fn method(&self) -> &str {
        (self.method.as_ref())
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// A member of `params._meta`; `Null` when absent.
    pub(super) fn meta(&self, name: &str) -> &Value {
        &self.meta[name]
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
    fn reads_what_a_value_would() {
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
        // A null id is an id; a method that is not a string is none by name.
        let odd = read(r#"{"id":null,"method":5,"params":[{"_meta":{"progressToken":1}}]}"#);
        assert!(odd.is_request());
        assert_eq!(
            (odd.method(), odd.meta("progressToken")),
            ("", &Value::Null)
        );
        // A member twice: the last one counts, as in a `Value`.
        let twice =
            read(r#"{"id":1,"id":2,"method":"a","params":{"_meta":{"x":1},"_meta":{"x":2}}}"#);
        assert_eq!((twice.id(), twice.meta("x")), (json!(2), &json!(2)));
        let twice = read(r#"{"id":1,"method":"a","params":{"_meta":{"x":1},"_meta":{"x":2}}}"#);
        assert_eq!(twice.meta("x"), &json!(2));
        let spaced = read(" {\"id\": 1, \"method\": \"a\", \"params\": {\"_meta\": {\"x\": 3}}}");
        assert_eq!(spaced.meta("x"), &json!(3));
    }

    #[test]
    fn refuses_what_is_not_one_message() {
        assert!(matches!(Posted::read(b"[{}]"), Err(Unread::Batch)));
        assert!(matches!(Posted::read(b" [1, 2]"), Err(Unread::Batch)));
        assert!(matches!(Posted::read(b"\"x\""), Err(Unread::NotAnObject)));
        assert!(matches!(Posted::read(b"{\"id\":"), Err(Unread::Invalid(_))));
    }
}
