//! One machine's open HTTP requests, and where each message it writes goes: an answer to the
//! request it answers; a request of ours to the latest open request that streams, else to the
//! session's standalone stream; progress to the request whose token it names; a
//! subscription's notification to its `subscriptions/listen`; any other notification to the
//! standalone stream (held until it opens). A request of ours that none of these can take is
//! refused at once, so nothing waits for ever on a host that cannot be reached.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// One host request open on a machine, whose HTTP response is still to be given or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExchangeId(pub(super) u64);

/// At most this many notifications wait for a session's standalone stream to open.
const MAX_HELD: usize = 16;

/// One open host request of a machine's.
pub(super) struct Open {
    pub(super) exchange: ExchangeId,
    /// Its `_meta.progressToken`, as JSON text.
    pub(super) progress_token: Option<String>,
    /// Whether more than its answer may go to it: its HTTP answer may be an event stream.
    pub(super) streams: bool,
    /// When it was opened, in this machine's count: a request of ours goes to the latest.
    opened: u64,
}

/// What a message routed to a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Carried {
    /// The request's answer, which ends it.
    Answer,
    /// A request of ours, which must reach the host.
    Request,
    /// A notification, which may be lost to a host too slow to read it.
    Notification,
}

/// Where a message a machine wrote goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// To an open request's HTTP answer, as `what`.
    Request { exchange: ExchangeId, what: Carried },
    /// To the session's standalone stream.
    Standalone,
    /// To the standalone stream once it opens: a notification that relates to no request.
    Hold,
    /// Nowhere: an answer to no open request, or a notification that relates to a request
    /// whose answer is no stream.
    Nowhere,
    /// A request of ours that nothing can take; `why` for its refusal.
    Refused(&'static str),
}

/// The open host requests of one machine, by their id's JSON text.
#[derive(Default)]
pub(super) struct Routes {
    opened: u64,
    pub(super) open: BTreeMap<String, Open>,
    /// How many of the session's standalone streams (`GET`) are open.
    pub(super) standalone: usize,
    /// Notifications for the standalone stream before the host opened it (a list change
    /// right after `initialize`), the latest [`MAX_HELD`].
    pub(super) held: VecDeque<Vec<u8>>,
}

impl Routes {
    /// Opens a request whose id's JSON text is `key`.
    pub(super) fn open(
        &mut self,
        key: String,
        exchange: ExchangeId,
        token: Option<String>,
        streams: bool,
    ) {
        let opened = self.opened;
        self.opened += 1;
        let open = Open {
            exchange,
            progress_token: token,
            streams,
            opened,
        };
        self.open.insert(key, open);
    }

    /// Where `message`, written by the machine, goes; an answer takes its request off.
    pub(super) fn route(&mut self, message: &[u8]) -> Target {
        if let Some(id) = answer_id(message) {
            return self.answered(id);
        }
        let Ok(envelope) = serde_json::from_slice::<Envelope>(message) else {
            return Target::Nowhere;
        };
        match (envelope.id, envelope.method.as_deref()) {
            (Some(id), None) => self.answered(&key_of(id)),
            (Some(_), Some(_)) => {
                let latest = (self.open.values())
                    .filter(|open| open.streams)
                    .max_by_key(|open| open.opened);
                match (latest, self.standalone > 0) {
                    (Some(open), _) => Target::Request {
                        exchange: open.exchange,
                        what: Carried::Request,
                    },
                    (None, true) => Target::Standalone,
                    (None, false) => Target::Refused(NO_STREAM),
                }
            }
            (None, method) => self.notification(method, envelope.params),
        }
    }

    fn answered(&mut self, key: &str) -> Target {
        match self.open.remove(key) {
            Some(open) => Target::Request {
                exchange: open.exchange,
                what: Carried::Answer,
            },
            None => Target::Nowhere,
        }
    }

    fn notification(&mut self, method: Option<&str>, params: Option<&RawValue>) -> Target {
        let params =
            params.and_then(|params| serde_json::from_str::<NotificationParams>(params.get()).ok());
        let params = params.as_ref();
        let subscription = params
            .and_then(|params| params.meta.as_ref())
            .and_then(|meta| meta.subscription.as_ref());
        // `Some` when it relates to a request: it goes there or nowhere.
        let related = match (subscription, method) {
            (Some(subscription), _) => Some(self.open.get(&subscription.to_string())),
            (None, Some("notifications/progress")) => {
                let token = params
                    .and_then(|params| params.progress_token.as_ref())
                    .map(Value::to_string);
                let mut open = self.open.values();
                Some(open.find(|open| token.is_some() && open.progress_token == token))
            }
            (None, _) => None,
        };
        match related {
            Some(Some(open)) if open.streams => Target::Request {
                exchange: open.exchange,
                what: Carried::Notification,
            },
            Some(_) => Target::Nowhere,
            None if self.standalone > 0 => Target::Standalone,
            None => Target::Hold,
        }
    }

    /// Holds a notification for the standalone stream, the latest [`MAX_HELD`].
    pub(super) fn hold(&mut self, message: &[u8]) {
        if self.held.len() == MAX_HELD {
            self.held.pop_front();
        }
        self.held.push_back(message.to_vec());
    }
}

/// Why a request of ours went nowhere, when no open request streams.
const NO_STREAM: &str =
    "this host is served over HTTP with no stream open to take requests of the server's";

/// Why a request of ours went nowhere, when its stream closed before it was written.
pub(super) const HUNG_UP: &str = "the host's stream closed before the request was written to it";

/// What routing reads of a message of the machine's; the rest is skipped, not decoded.
#[derive(Deserialize)]
struct Envelope<'a> {
    /// Present (`null` too) in requests and answers.
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// What routing reads of a notification's `params`.
#[derive(Deserialize)]
struct NotificationParams {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<Value>,
    #[serde(rename = "_meta", default)]
    meta: Option<NotificationMeta>,
}

#[derive(Deserialize)]
struct NotificationMeta {
    /// The `subscriptions/listen` the notification is sent on.
    #[serde(rename = "io.modelcontextprotocol/subscriptionId", default)]
    subscription: Option<Value>,
}

/// A member that is there, whatever its value (`null` too).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// The key of an id as the routes keep it: its JSON text as serde_json writes it.
pub(super) fn key_of(id: &RawValue) -> String {
    serde_json::from_str::<Value>(id.get())
        .map_or_else(|_| id.get().to_owned(), |id| id.to_string())
}

/// The refusal, saying `why`, of `message` when it is a request of ours (for the machine, as
/// the host's answer); `None` for any other message.
pub(super) fn refusal(message: &[u8], why: &str) -> Option<Vec<u8>> {
    let envelope = serde_json::from_slice::<Envelope>(message).ok()?;
    let (Some(id), Some(method)) = (envelope.id, envelope.method.as_deref()) else {
        return None;
    };
    let error = serde_json::json!({"code": -32601, "message": format!("{method}: {why}")});
    let id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    serde_json::to_vec(&serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error})).ok()
}

/// The id of an answer, as the machine writes one (`{"jsonrpc":"2.0","id":ID,"result":...`,
/// or `"error"`; the `jsonrpc` member first or after the id), read without going through
/// the rest, which may be large: the route's key, as the id's JSON text is the same. `None`
/// for any other message, and for an answer written otherwise, which [`Envelope`] reads.
pub(super) fn answer_id(message: &[u8]) -> Option<&str> {
    let (id, _) = answer_parts(message)?;
    Some(id)
}

/// An answer's id and what follows it (`"result":...` or `"error":...`), as [`answer_id`]
/// reads them.
pub(super) fn answer_parts(message: &[u8]) -> Option<(&str, &[u8])> {
    const VERSION: &[u8] = br#""jsonrpc":"2.0","#;
    let rest = message.strip_prefix(b"{")?;
    let rest = rest.strip_prefix(VERSION).unwrap_or(rest);
    let rest = rest.strip_prefix(br#""id":"#)?;
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<&RawValue>();
    let id = values.next()?.ok()?;
    let after = rest.get(values.byte_offset()..)?.strip_prefix(b",")?;
    let after = after.strip_prefix(VERSION).unwrap_or(after);
    let answers = after.starts_with(br#""result":"#) || after.starts_with(br#""error":"#);
    answers.then(|| (id.get(), after))
}

/// The code of an error answer, `None` for a result.
pub(super) fn error_code(message: &[u8]) -> Option<i64> {
    #[derive(Deserialize)]
    struct Answer {
        error: Option<Error>,
    }
    #[derive(Deserialize)]
    struct Error {
        code: Option<i64>,
    }
    // Only an error is read: a result, however large, is not gone through.
    if let Some((_, after)) = answer_parts(message)
        && after.starts_with(br#""result":"#)
    {
        return None;
    }
    let answer = serde_json::from_slice::<Answer>(message).ok()?;
    answer.error?.code
}

#[cfg(test)]
mod tests {
    use super::{answer_id, error_code, refusal};
    use serde_json::json;

    #[test]
    fn an_answers_id_is_read_as_the_routes_key_and_nothing_else_is_an_answer() {
        for id in [
            json!(7),
            json!("a\"b\\u00e9"),
            json!(-1.5e3),
            json!(u64::MAX),
        ] {
            for body in [json!({"x": [1, 2]}), json!(null)] {
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": body});
                let text = serde_json::to_vec(&answer).unwrap();
                assert_eq!(answer_id(&text), Some(id.to_string().as_str()), "{answer}");
                assert_eq!(error_code(&text), None);
            }
            // Written as the machine writes it (this crate's maps sort their keys).
            let text =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":1,"message":"m"}}}}"#);
            let text = text.into_bytes();
            assert_eq!(answer_id(&text), Some(id.to_string().as_str()));
            assert_eq!(error_code(&text), Some(1));
        }
        // The version after the id, as a map sorted by key writes it.
        let sorted = br#"{"id":"s","jsonrpc":"2.0","result":{}}"#;
        assert_eq!(answer_id(sorted), Some(r#""s""#));
        for other in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":1"#,
            br#"{"result":{},"jsonrpc":"2.0","id":1}"#,
            b"",
        ] {
            assert_eq!(answer_id(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn only_requests_of_ours_are_refused() {
        let request = br#"{"jsonrpc":"2.0","id":"g-1","method":"roots/list"}"#;
        let refused: serde_json::Value =
            serde_json::from_slice(&refusal(request, "gone").unwrap()).unwrap();
        assert_eq!(refused["id"], "g-1");
        assert_eq!(refused["error"]["message"], "roots/list: gone");
        let note = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
        assert_eq!(refusal(note, "gone"), None);
        assert_eq!(
            refusal(br#"{"jsonrpc":"2.0","id":4,"result":{}}"#, "gone"),
            None
        );
    }
}
