//! One message of an HTTP exchange arriving in pieces ([`Reply::Part`](super::Reply::Part)):
//! held while short, parsed as it arrives once past the bound stdio parses long lines from, so
//! a large body or event is never held whole beside its value.

use serde_json::Value;

use crate::wire::framing::{Discarded, PARSE_FROM};
use crate::wire::line_error::LineError;
use crate::wire::stream_json::JsonStream;

/// A message read in pieces, as far as it has come.
#[derive(Debug)]
pub(super) struct Pieces {
    limit: usize,
    /// How many entries of a listing a message parsed as it arrives keeps.
    keep_listed: usize,
    state: State,
    /// Its length and edges, for the report should it grow over the limit.
    edges: Discarded,
}

#[derive(Debug)]
enum State {
    Held(Vec<u8>),
    /// Boxed: the parser's state is large beside a held message's.
    Parsing(Box<JsonStream>),
    /// Over the limit: only its length and edges are kept.
    TooLong,
}

/// A whole message from an exchange: its bytes, or its value parsed as it came.
#[derive(Debug)]
pub(super) enum Message {
    Bytes(Vec<u8>),
    Parsed(Result<Value, LineError>),
    /// Parsed as it came, not JSON, and by its first or last bytes the response to `id`.
    Unreadable {
        error: LineError,
        id: Value,
    },
}

impl Pieces {
    /// A message bounded by `limit` bytes, as one held whole is, that keeps at most
    /// `keep_listed` entries of a listing once it is parsed as it arrives
    /// ([`JsonStream::keeping_listed`]).
    pub(super) fn new(limit: usize, keep_listed: usize) -> Self {
        Self {
            limit,
            keep_listed,
            state: State::Held(Vec::new()),
            edges: Discarded::default(),
        }
    }

    /// The next piece. If it takes the message over the limit, and the message's first bytes
    /// name the response it is, returns how much had come and that `id`: its request need not
    /// wait for the rest.
    pub(super) fn push(&mut self, bytes: Vec<u8>) -> Option<(usize, Value)> {
        self.edges.skip(&bytes);
        if self.edges.size() > self.limit {
            let crossed = !matches!(self.state, State::TooLong);
            self.state = State::TooLong;
            let id = crossed.then(|| self.edges.response_id(false)).flatten()?;
            return Some((self.edges.size(), id));
        }
        match &mut self.state {
            // The first piece is kept as it came: no copy.
            State::Held(held) if held.is_empty() => *held = bytes,
            State::Held(held) => held.extend_from_slice(&bytes),
            State::Parsing(parser) => parser.push(&bytes),
            State::TooLong => {}
        }
        if let State::Held(held) = &self.state
            && held.len() > PARSE_FROM
        {
            let mut parser = JsonStream::keeping_listed(self.keep_listed);
            parser.push(held);
            self.state = State::Parsing(Box::new(parser));
        }
        None
    }

    /// The whole message, once its last piece has come.
    pub(super) fn finish(self) -> Message {
        match self.state {
            State::Held(bytes) => Message::Bytes(bytes),
            State::Parsing(parser) => match parser.finish() {
                Some(Ok(value)) => Message::Parsed(Ok(value)),
                Some(Err(error)) => match self.edges.response_id(true) {
                    Some(id) => Message::Unreadable { error, id },
                    None => Message::Parsed(Err(error)),
                },
                None => Message::Parsed(Err(LineError::NotJson {
                    detail: "a message of nothing but white space".to_owned(),
                })),
            },
            State::TooLong => Message::Parsed(Err(self.edges.too_long(self.limit))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_parsed_as_it_comes_and_a_short_one_held_as_it_came() {
        let text = "é\"\\".repeat(PARSE_FROM);
        let message = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"text": text}});
        let bytes = message.to_string().into_bytes();
        let mut pieces = Pieces::new(usize::MAX, usize::MAX);
        for piece in bytes.chunks(1000) {
            pieces.push(piece.to_vec());
            // Nothing past the bound is ever held.
            if let State::Held(held) = &pieces.state {
                assert!(held.len() <= PARSE_FROM);
            }
        }
        assert!(matches!(pieces.state, State::Parsing(_)));
        let Message::Parsed(Ok(value)) = pieces.finish() else {
            panic!("not parsed");
        };
        assert_eq!(value, message);

        let mut short = Pieces::new(usize::MAX, usize::MAX);
        short.push(b"{\"a\":".to_vec());
        short.push(b"1}".to_vec());
        assert!(matches!(short.finish(), Message::Bytes(bytes) if bytes == b"{\"a\":1}"));
    }

    #[test]
    fn over_the_limit_only_its_length_and_id_are_kept() {
        let mut pieces = Pieces::new(PARSE_FROM + 10, usize::MAX);
        pieces.push(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"".to_vec());
        pieces.push(vec![b'a'; PARSE_FROM]);
        pieces.push(b"\"}".to_vec());
        assert!(matches!(pieces.state, State::TooLong));
        let Message::Parsed(Err(LineError::TooLong { size, id, .. })) = pieces.finish() else {
            panic!("not refused");
        };
        assert_eq!((size, id), (PARSE_FROM + 36, Some(serde_json::json!(7))));
    }
}
