//! One message of an HTTP exchange arriving in pieces ([`Reply::Part`](super::Reply::Part)):
//! held while short, parsed as it arrives once past the bound stdio parses long lines from, so
//! a large body or event is never held whole beside its value.

use serde_json::Value;

use crate::framing::{Discarded, LineError, PARSE_FROM};
use crate::stream_json::JsonStream;

/// A message read in pieces, as far as it has come.
#[derive(Debug)]
pub(super) struct Pieces {
    limit: usize,
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
}

impl Pieces {
    /// A message bounded by `limit` bytes, as one held whole is.
    pub(super) fn new(limit: usize) -> Self {
        Self {
            limit,
            state: State::Held(Vec::new()),
            edges: Discarded::default(),
        }
    }

    /// The next piece.
    pub(super) fn push(&mut self, bytes: Vec<u8>) {
        self.edges.skip(&bytes);
        if self.edges.size() > self.limit {
            self.state = State::TooLong;
            return;
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
            let mut parser = JsonStream::new();
            parser.push(held);
            self.state = State::Parsing(Box::new(parser));
        }
    }

    /// The whole message, once its last piece has come.
    pub(super) fn finish(self) -> Message {
        match self.state {
            State::Held(bytes) => Message::Bytes(bytes),
            State::Parsing(parser) => Message::Parsed(parser.finish().unwrap_or_else(|| {
                Err(LineError::NotJson {
                    detail: "a message of nothing but white space".to_owned(),
                })
            })),
            State::TooLong => Message::Parsed(Err(self.edges.too_long(self.limit))),
        }
    }
}
