//! [`HttpConnection`] fed a JSON body or an event's data in pieces ([`Reply::Part`]): the
//! events are those of the same message fed whole, whatever the cuts, for a message held
//! until it ends and for one long enough to be parsed as it arrives.

use std::time::Instant;

use mcp_proto::{
    Config, Event, LineError, Request, RequestError,
    http::{Exchange, HttpConnection, HttpTransport, PIECES_FROM, Post, Reply},
};
use serde_json::{Value, json};

use crate::peer::handshake_config;

/// A connection past its handshake with a `tools/call` POSTed, and that POST.
fn calling(limit: usize) -> (HttpConnection, Post) {
    let now = Instant::now();
    let config = Config {
        max_line_len: limit,
        ..handshake_config()
    };
    let mut http = HttpConnection::new(now, config, "http://h/mcp".into(), HttpTransport::Auto);
    let initialize = post(&mut http);
    let id = body(&initialize)["id"].clone();
    let result = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "serverInfo": {"name": "s", "version": "1"}});
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    http.handle_reply(now, initialize.id, Reply::Head { session: None });
    http.handle_reply(
        now,
        initialize.id,
        Reply::Message(answer.to_string().into()),
    );
    http.handle_reply(now, initialize.id, Reply::Done);
    let initialized = post(&mut http);
    http.handle_reply(now, initialized.id, Reply::Head { session: None });
    http.handle_reply(now, initialized.id, Reply::Done);
    let ready: Vec<Event> = std::iter::from_fn(|| http.poll_event()).collect();
    assert!(matches!(ready.as_slice(), [Event::Ready(_)]), "{ready:?}");
    let call = Request::call_tool("big", json!({}));
    http.request(now, call).unwrap();
    let call = post(&mut http);
    http.handle_reply(now, call.id, Reply::Head { session: None });
    (http, call)
}

fn post(http: &mut HttpConnection) -> Post {
    loop {
        match http.poll_exchange() {
            Some(Exchange::Post(post)) => return post,
            Some(_) => {}
            None => panic!("no POST"),
        }
    }
}

fn body(post: &Post) -> Value {
    serde_json::from_slice(&post.body).unwrap()
}

/// The events after `replies` on the call's exchange, and its end.
fn events_after(limit: usize, replies: impl FnOnce(&Post) -> Vec<Reply>) -> Vec<Event> {
    let (mut http, call) = calling(limit);
    let now = Instant::now();
    for reply in replies(&call) {
        http.handle_reply(now, call.id, reply);
    }
    http.handle_reply(now, call.id, Reply::Done);
    std::iter::from_fn(|| http.poll_event()).collect()
}

/// `messages` cut at `cuts` (offsets into their concatenation; each message also ends a
/// piece), as parts and the messages that end them.
fn in_pieces(messages: &[Vec<u8>], cuts: &[usize]) -> Vec<Reply> {
    let mut replies = Vec::new();
    let mut start = 0;
    for message in messages {
        let end = start + message.len();
        let mut at = 0;
        for &cut in cuts.iter().filter(|&&cut| cut > start && cut < end) {
            replies.push(Reply::Part(message[at..cut - start].to_vec()));
            at = cut - start;
        }
        replies.push(Reply::Message(message[at..].to_vec()));
        start = end;
    }
    replies
}

/// A progress notification, then the call's answer with `text`.
fn progress_and_answer(call: &Post, text: &str) -> Vec<Vec<u8>> {
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": "working"}});
    let answer = json!({"jsonrpc": "2.0", "id": body(call)["id"],
        "result": {"content": [{"type": "text", "text": text}]}});
    vec![progress.to_string().into(), answer.to_string().into()]
}

#[test]
fn a_small_body_in_pieces_cut_at_every_byte_is_the_body_whole() {
    let text = "é € 😀 \"quoted\" \\ \u{7}";
    let whole = events_after(1 << 20, |call| {
        let messages = progress_and_answer(call, text);
        messages.into_iter().map(Reply::Message).collect()
    });
    assert_eq!(whole.len(), 2, "{whole:?}");
    assert!(matches!(&whole[1], Event::Response { result: Ok(_), .. }));
    let total = progress_and_answer(&calling(1 << 20).1, text)
        .concat()
        .len();
    for cut in 0..=total {
        let got = events_after(1 << 20, |call| {
            in_pieces(&progress_and_answer(call, text), &[cut])
        });
        assert_eq!(got, whole, "cut at {cut}");
    }
    let every: Vec<usize> = (0..total).collect();
    let got = events_after(1 << 20, |call| {
        in_pieces(&progress_and_answer(call, text), &every)
    });
    assert_eq!(got, whole, "cut at every byte");
}

#[test]
fn a_large_body_in_pieces_is_parsed_as_it_comes_and_is_the_body_whole() {
    let text = varied_text(3 * PIECES_FROM);
    let whole = events_after(8 << 20, |call| {
        let messages = progress_and_answer(call, &text);
        messages.into_iter().map(Reply::Message).collect()
    });
    let Event::Response {
        result: Ok(result), ..
    } = &whole[1]
    else {
        panic!("{:?}", &whole[1]);
    };
    let result = result.clone().into_value().unwrap();
    assert_eq!(result["content"][0]["text"], text.as_str());
    let total = progress_and_answer(&calling(8 << 20).1, &text)
        .concat()
        .len();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..4 {
        let mut cuts: Vec<usize> = (0..20 + round * 300)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % total as u64) as usize
            })
            .collect();
        cuts.sort_unstable();
        let got = events_after(8 << 20, |call| {
            in_pieces(&progress_and_answer(call, &text), &cuts)
        });
        assert!(got == whole, "round {round}");
    }
}

/// Text of `bytes` bytes with every kind of character JSON escapes or spells in UTF-8.
fn varied_text(bytes: usize) -> String {
    let line = "0123 \"quoted\" back\\slash\ttab \u{7}bell é € 😀\n";
    let mut text = line.repeat(bytes / line.len() + 1);
    text.truncate(bytes - bytes % line.len());
    text
}

#[test]
fn a_large_body_that_is_not_json_is_reported_as_the_whole_would_be() {
    let mut broken = b"{\"jsonrpc\":\"2.0\",\"result\":\"".to_vec();
    broken.extend(std::iter::repeat_n(b'a', 2 * PIECES_FROM));
    broken.extend_from_slice(b"\",}");
    let malformed = |events: &[Event]| {
        events
            .iter()
            .any(|event| matches!(event, Event::Malformed(LineError::NotJson { .. })))
    };
    let whole = events_after(8 << 20, |_| vec![Reply::Message(broken.clone())]);
    assert!(malformed(&whole), "{whole:?}");
    let cuts = [100, PIECES_FROM + 7, 2 * PIECES_FROM];
    let got = events_after(8 << 20, |_| in_pieces(&[broken.clone()], &cuts));
    assert!(malformed(&got), "{got:?}");
}

#[test]
fn pieces_over_the_limit_fail_the_request_they_answer() {
    let limit = 2 * PIECES_FROM;
    let events = events_after(limit, |call| {
        let answer = &progress_and_answer(call, &"x".repeat(limit))[1];
        in_pieces(
            std::slice::from_ref(answer),
            &[10, PIECES_FROM + 3, limit - 1, limit + 5],
        )
    });
    let failed = events.iter().any(|event| {
        matches!(event, Event::Response { result: Err(RequestError::ResponseTooLarge { limit: l, .. }), .. } if *l == limit)
    });
    assert!(failed, "{events:?}");
}

#[test]
fn dropped_pieces_are_forgotten_and_the_next_message_stands_alone() {
    let whole = events_after(8 << 20, |call| {
        let messages = progress_and_answer(call, "ok");
        messages.into_iter().map(Reply::Message).collect()
    });
    let got = events_after(8 << 20, |call| {
        let mut replies = vec![
            Reply::Part(b"{\"not\": ".to_vec()),
            Reply::Part(vec![b' '; PIECES_FROM + 1]),
            Reply::PartsDropped,
        ];
        let messages = progress_and_answer(call, "ok");
        replies.extend(messages.into_iter().map(Reply::Message));
        replies
    });
    assert_eq!(got, whole);
}

/// The request of [`calling`]'s POST fails in the very piece that takes its answer over the
/// limit, though the rest never comes; and once only.
#[test]
fn pieces_over_the_limit_fail_their_request_in_the_piece_that_crosses_it() {
    let now = Instant::now();
    let limit = 2 * PIECES_FROM;
    let (mut http, call) = calling(limit);
    let id = body(&call)["id"].clone();
    let start = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"text":""#);
    http.handle_reply(now, call.id, Reply::Part(start.into_bytes()));
    http.handle_reply(now, call.id, Reply::Part(vec![b'x'; limit - 100]));
    assert_eq!(std::iter::from_fn(|| http.poll_event()).count(), 0);
    http.handle_reply(now, call.id, Reply::Part(vec![b'x'; 200]));
    let events: Vec<Event> = std::iter::from_fn(|| http.poll_event()).collect();
    let too_large = |event: &Event| matches!(event, Event::Response { result: Err(RequestError::ResponseTooLarge { limit: l, .. }), .. } if *l == limit);
    assert!(
        matches!(&events[..], [event] if too_large(event)),
        "{events:?}"
    );
    http.handle_reply(now, call.id, Reply::Message(b"\"}]}}".to_vec()));
    http.handle_reply(now, call.id, Reply::Done);
    let events: Vec<Event> = std::iter::from_fn(|| http.poll_event()).collect();
    assert!(!events.iter().any(too_large), "not twice: {events:?}");
}

#[test]
fn a_large_answer_that_is_not_json_fails_its_request_at_once() {
    let now = Instant::now();
    let (mut http, call) = calling(8 << 20);
    let id = body(&call)["id"].clone();
    let mut broken = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"deep":"#).into_bytes();
    broken.extend(std::iter::repeat_n(b'[', 2 * PIECES_FROM));
    http.handle_reply(now, call.id, Reply::Part(broken));
    http.handle_reply(now, call.id, Reply::Message(b"]}}".to_vec()));
    let events: Vec<Event> = std::iter::from_fn(|| http.poll_event()).collect();
    assert!(
        events.iter().any(|event| matches!(event,
            Event::Response { result: Err(RequestError::InvalidResponse(detail)), .. }
                if detail.contains("recursion limit"))),
        "{events:?}"
    );
}
