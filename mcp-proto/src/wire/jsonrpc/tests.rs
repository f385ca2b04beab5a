//! Unit tests of the JSON-RPC codec: what each kind of line decodes to, what is refused,
//! and that what it encodes stays one line.

use serde_json::Map;

use super::*;

fn one(line: &str) -> Result<Message, LineError> {
    let mut messages: Vec<_> = decode::<Value>(line.as_bytes()).collect();
    assert_eq!(messages.len(), 1);
    assert_same_parsed_as_it_arrives(line.as_bytes());
    messages.remove(0)
}

/// Checks that the line, parsed as it arrives and classified from its value, gives the
/// messages it gives parsed whole (a parse error's wording aside).
fn assert_same_parsed_as_it_arrives(line: &[u8]) {
    let plain = |error| match error {
        LineError::NotJson { .. } => LineError::NotJson {
            detail: String::new(),
        },
        error => error,
    };
    let whole: Vec<_> = decode::<Value>(line)
        .map(|message| message.map_err(plain))
        .collect();
    let mut parser = crate::wire::stream_json::JsonStream::new();
    parser.push(line);
    let streamed: Vec<_> = match parser.finish() {
        Some(Ok(value)) => decode_value::<Value>(value)
            .map(|m| m.map_err(plain))
            .collect(),
        Some(Err(error)) => vec![Err(plain(error))],
        None => Vec::new(),
    };
    assert_eq!(streamed, whole, "{}", String::from_utf8_lossy(line));
}

#[test]
fn a_line_parsed_as_it_arrives_reads_as_the_line_parsed_whole() {
    let lines: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}"#,
        br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","task":{"taskId":"t"}}}"#,
        br#"{"id":1,"result":{"_meta":7}}"#,
        br#"{"id":1,"result":"text"}"#,
        br#"{"id":1,"result":[1,{"a":"\u00e9"}]}"#,
        br#"{"id":"r","error":{"code":-1,"message":"m","data":{"x":[1]}}}"#,
        br#"{"id":"r","error":{"code":"x"}}"#,
        br#"[{"id":1,"result":1},{"method":"n"},7,[]]"#,
        br#"[[{"id":1,"result":1}]]"#,
        br#"[]"#,
        br#"{"method":"notifications/progress","params":{"progress":0.5}}"#,
        br#"{"method":"roots/list","id":9}"#,
        b"\xff{}",
        b"{\"id\":1,\"result\":\"\xc3\"}",
    ];
    for line in lines {
        assert_same_parsed_as_it_arrives(line);
    }
}

#[test]
fn classifies_each_kind() {
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
        Ok(Message::Request {
            id: json!("a"),
            method: "ping".into(),
            params: None
        })
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","method":"x","params":{"k":1}}"#),
        Ok(Message::Notification {
            method: "x".into(),
            params: Some(json!({"k": 1}))
        })
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
        Ok(Message::Response {
            id: json!(3),
            result: Ok(json!({}))
        })
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#),
        Ok(Message::Response {
            id: json!(3),
            result: Err(ResponseError::Remote(RpcError {
                code: -32601,
                message: "no".into(),
                data: None
            }))
        })
    );
}

#[test]
fn rejects_what_is_not_a_message() {
    assert!(matches!(
        one("Starting server..."),
        Err(LineError::NotJson { .. })
    ));
    assert_eq!(
        decode::<Value>(b"\xff\xfe{").collect::<Vec<_>>(),
        [Err(LineError::NotUtf8)]
    );
    // JSON text is UTF-8 throughout, in a member we would skip as much as anywhere.
    assert_eq!(
        decode::<Value>(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"x\":\"\xff\"}")
            .collect::<Vec<_>>(),
        [Err(LineError::NotUtf8)]
    );
    assert!(matches!(one("42"), Err(LineError::NotJsonRpc { .. })));
    assert!(matches!(one("[]"), Err(LineError::NotJsonRpc { .. })));
    assert!(matches!(
        one(r#"{"jsonrpc":"1.0","id":1,"result":1}"#),
        Err(LineError::NotJsonRpc { .. })
    ));
    assert!(matches!(
        one(r#"{"id":null,"method":"ping"}"#),
        Err(LineError::NotJsonRpc { .. })
    ));
    assert!(matches!(
        one(r#"{"id":{},"method":"ping"}"#),
        Err(LineError::NotJsonRpc { .. })
    ));
    assert!(matches!(
        one(r#"{"id":1}"#),
        Err(LineError::NotJsonRpc { .. })
    ));
}

/// What a line that is not a message is reported as.
fn rejection(line: &str) -> String {
    match one(line) {
        Err(LineError::NotJsonRpc { detail }) => detail,
        Err(LineError::NotJson { .. }) => "not JSON".to_owned(),
        other => panic!("{line} was accepted: {other:?}"),
    }
}

#[test]
fn members_mean_what_they_would_mean_in_a_map() {
    let response = |id, result| Ok(Message::Response { id, result });
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":1,"result":null}"#),
        response(json!(1), Ok(Value::Null))
    );
    // A member given twice counts with its last value.
    assert_eq!(
        one(r#"{"id":1,"id":2,"result":1}"#),
        response(json!(2), Ok(json!(1)))
    );
    assert_eq!(
        one(r#"{"id":1,"extra":[1,{"x":null}],"result":{"a":"b"}}"#),
        response(json!(1), Ok(json!({"a": "b"})))
    );
    assert_eq!(
        one(r#"{"id":1,"result":1,"error":null}"#),
        response(
            json!(1),
            Err(ResponseError::Invalid(
                "response has both `result` and `error`".into()
            ))
        )
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.\u0030","method":"n","params":null}"#),
        Ok(Message::Notification {
            method: "n".into(),
            params: Some(Value::Null)
        })
    );
    assert_eq!(
        one(r#" {"method":"ping","id":"p"} "#),
        Ok(Message::Request {
            id: json!("p"),
            method: "ping".into(),
            params: None
        })
    );
    let not_version = "`jsonrpc` is not \"2.0\"";
    let not_string = "`method` is not a string";
    let rejected = [
        (r#"{"jsonrpc":null,"id":1,"result":1}"#, not_version),
        (r#"{"jsonrpc":2.0,"id":1,"result":1}"#, not_version),
        (r#"{"jsonrpc":["2.0"],"method":7}"#, not_version),
        (r#"{"id":1,"method":null}"#, not_string),
        (r#"{"id":1,"method":7}"#, not_string),
        (r#"{"id":1,"method":{"name":"x"}}"#, not_string),
        (r#"{"method":"n","id":null}"#, "request with a null `id`"),
        (
            r#"{"method":"n","id":[1]}"#,
            "`id` is neither a string nor a number",
        ),
        (r#"{"result":1}"#, "neither `method` nor `id`"),
        (r#"[[{"id":1,"result":1}]]"#, "not an object"),
        (r#"{"id":2,"result":1} trailing"#, "not JSON"),
        (r#"{"id":2,"result":1,"x":[}"#, "not JSON"),
    ];
    for (line, reason) in rejected {
        assert_eq!(rejection(line), reason, "{line}");
    }
    // A top-level array is a batch, never a message read by position.
    let messages: Vec<_> = decode::<Value>(br#"["2.0", 1, "ping"]"#).collect();
    assert!(messages.iter().all(Result::is_err), "{messages:?}");
}

#[test]
fn batch_yields_each_element() {
    let messages: Vec<_> = decode::<Value>(br#"[{"id":1,"result":1},{"method":"n"},7]"#).collect();
    assert_eq!(messages.len(), 3);
    assert!(matches!(messages[0], Ok(Message::Response { .. })));
    assert!(matches!(messages[1], Ok(Message::Notification { .. })));
    assert!(matches!(messages[2], Err(LineError::NotJsonRpc { .. })));
}

#[test]
fn malformed_error_object_is_kept_as_invalid() {
    assert!(matches!(
        one(r#"{"id":1,"error":"boom"}"#),
        Ok(Message::Response {
            result: Err(ResponseError::Invalid(_)),
            ..
        })
    ));
}

/// Params that end with an object and want members added to it, as the floor above writes
/// the stateless era's `_meta`.
#[derive(Serialize)]
struct EndsWithObject {
    name: &'static str,
    last: Map<String, Value>,
}

impl RequestParams for EndsWithObject {
    fn spliced(&self) -> Option<&str> {
        Some(r#""added":1,"also":"a\nb""#)
    }
}

#[test]
fn spliced_members_end_the_params_last_object() {
    let own: Map<String, Value> = [("own".to_owned(), json!(true))].into_iter().collect();
    // The object empty, and with members of its own, which stay.
    for last in [Map::new(), own] {
        let params = EndsWithObject {
            name: "n",
            last: last.clone(),
        };
        let line = request(7, "m", Some(&params));
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        let sent: Value = serde_json::from_slice(&line).unwrap();
        let mut expected = last;
        expected.insert("added".to_owned(), json!(1));
        expected.insert("also".to_owned(), json!("a\nb"));
        assert_eq!(sent["params"], json!({"name": "n", "last": expected}));
    }
}

#[test]
fn encoded_messages_are_single_lines() {
    let bytes = request(1, "tools/call", Some(&json!({"text": "a\nb"})));
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
    assert!(bytes.ends_with(b"\n"));
}

/// The request's members as written by hand are the bytes serde writes of the same struct.
#[test]
fn requests_are_written_as_serde_writes_them() {
    #[derive(serde::Serialize)]
    struct Request<'a> {
        jsonrpc: &'static str,
        id: u64,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a Value>,
    }
    let params = serde_json::json!({"a": [1, {"b": "c\"d"}], "e": "\u{7}"});
    for (id, method) in [
        (0, "ping"),
        (7, "tools/call"),
        (u64::MAX, "we\"ird\n/method"),
    ] {
        for params in [None, Some(&params)] {
            let jsonrpc = "2.0";
            let serialised = serde_json::to_string(&Request {
                jsonrpc,
                id,
                method,
                params,
            })
            .unwrap();
            let written = request(id, method, params);
            assert_eq!(String::from_utf8(written).unwrap(), serialised + "\n");
        }
    }
}
