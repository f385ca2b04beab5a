//! The core alone: a recorded stream of responses decoded by the connection, beside
//! `serde_json` parsing the same lines.

use std::io::Write;
use std::time::Instant;

use mcp_smol::proto::{self, Connection, Event};
use serde_json::{Value, json};

/// A recorded stream of `tools/call` responses, as batches of 32 lines, and how many it holds.
/// Each batch is fed after its 32 calls are issued: as many requests pending as a busy client
/// has, not tens of thousands. Ids count up from 2 in the order the calls are issued, each in a
/// field of [`ID_WIDTH`] bytes (padded with spaces) so that [`renumber`] can rewrite them.
pub(crate) fn recorded_stream(large: bool) -> (Vec<Vec<u8>>, usize) {
    let (count, text) = if large {
        (1, "x".repeat(16 * 1024 * 1024))
    } else {
        (20_000, "hello world, a short tool result".to_owned())
    };
    const BATCH: usize = 32;
    let result = json!({"content": [{"type": "text", "text": text}]}).to_string();
    let mut batches: Vec<Vec<u8>> = Vec::new();
    for first in (0..count).step_by(BATCH) {
        let mut batch = Vec::new();
        for offset in 0..BATCH.min(count - first) {
            let id = 2 + first + offset;
            writeln!(batch, "{ID_FIELD}{id:<ID_WIDTH$},\"result\":{result}}}").unwrap();
        }
        batches.push(batch);
    }
    (batches, count)
}

/// How each recorded line starts, up to its id.
const ID_FIELD: &str = r#"{"jsonrpc":"2.0","id":"#;
const ID_WIDTH: usize = 12;

/// Rewrites the ids of a recorded stream in place to count up from `first`: a connection that
/// decodes pass after pass expects new ids each time, and recording the stream again would
/// churn the allocator right before a timed pass.
fn renumber(batches: &mut [Vec<u8>], first: usize) {
    let mut id = first;
    for batch in batches {
        let mut start = 0;
        while start < batch.len() {
            let field = start + ID_FIELD.len();
            let digits = format!("{id:<ID_WIDTH$}");
            batch[field..field + ID_WIDTH].copy_from_slice(digits.as_bytes());
            id += 1;
            start += batch[start..].iter().position(|&b| b == b'\n').unwrap() + 1;
        }
    }
}

pub(crate) fn megabytes(batches: &[Vec<u8>]) -> f64 {
    batches.iter().map(Vec::len).sum::<usize>() as f64 / 1e6
}

/// One ready connection that decodes pass after pass, as a long-lived client does: the
/// warm-up pass warms its buffers as it warms the allocator for `serde_json`.
pub(crate) struct CoreDecoder {
    connection: Connection,
    /// The id the connection gives its next request.
    next_id: usize,
}

impl CoreDecoder {
    pub(crate) fn new() -> Self {
        let start = Instant::now();
        let mut connection = Connection::new(
            start,
            proto::Config {
                max_line_len: 32 * 1024 * 1024,
                // The recorded stream answers `initialize`: no `server/discover` probe first.
                protocol: proto::Protocol::Revision("2025-11-25"),
                ..Default::default()
            },
        );
        let _ = connection.poll_transmit();
        let init = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}"#;
        connection.handle_bytes(start, format!("{init}\n").as_bytes());
        while connection.poll_event().is_some() {}
        Self {
            connection,
            next_id: 2,
        }
    }

    /// The time spent in `handle_bytes` and `poll_event` on `batches`, renumbered first for
    /// the requests this pass issues.
    fn pass(&mut self, batches: &mut [Vec<u8>], feed: Feed) -> std::time::Duration {
        renumber(batches, self.next_id);
        let now = Instant::now();
        let connection = &mut self.connection;
        let mut decoding = std::time::Duration::ZERO;
        for batch in batches.iter() {
            let lines = batch.iter().filter(|&&b| b == b'\n').count();
            self.next_id += lines;
            for _ in 0..lines {
                connection
                    .request(now, proto::Request::call_tool("echo", json!({})))
                    .unwrap();
            }
            while connection.poll_transmit().is_some() {}
            let started = Instant::now();
            feed.for_each_read(batch, |read| {
                connection.handle_bytes(now, read);
                while let Some(event) = connection.poll_event() {
                    assert!(matches!(event, Event::Response { result: Ok(_), .. }));
                }
            });
            decoding += started.elapsed();
        }
        assert_eq!(connection.pending_requests(), 0);
        decoding
    }
}

/// How a recorded stream reaches the decoder. Both sides get the same reads, and keep the
/// values of a read alive alike: the connection decodes a whole read before its events are
/// drained, so `serde_json` parses a whole read before dropping its values. (With 32 alive at
/// once, glibc's allocator leaves its per-thread cache and costs both sides about a fifth more
/// than dropping each value before parsing the next would.)
#[derive(Clone, Copy)]
pub(crate) enum Feed {
    /// A batch of 32 responses per read, as pipelined calls arrive (or 64 KiB of a large one,
    /// a pipe's worth).
    Reads,
    /// One response per read, as sequential calls arrive.
    Lines,
}

impl Feed {
    fn for_each_read(self, batch: &[u8], read: impl FnMut(&[u8])) {
        match self {
            Self::Reads => batch.chunks(64 * 1024).for_each(read),
            Self::Lines => batch.split_inclusive(|&b| b == b'\n').for_each(read),
        }
    }
}

/// (mcp-proto MB/s, serde_json MB/s) over one recorded stream of responses.
pub(crate) fn core_decoding(
    core: &mut CoreDecoder,
    batches: &mut [Vec<u8>],
    feed: Feed,
) -> (f64, f64) {
    let megabytes = megabytes(batches);
    let serde_pass = |batches: &[Vec<u8>]| {
        let mut values = Vec::with_capacity(32);
        let started = Instant::now();
        for batch in batches {
            for line in batch.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let value: Value = serde_json::from_slice(line).unwrap();
                values.push(value);
                if matches!(feed, Feed::Lines) {
                    values.clear();
                }
            }
            std::hint::black_box(&mut values).clear();
        }
        megabytes / started.elapsed().as_secs_f64()
    };
    // Each once as a warm-up (code, allocator, the connection's buffer), then each timed.
    serde_pass(batches);
    core.pass(batches, feed);
    let core_rate = megabytes / core.pass(batches, feed).as_secs_f64();
    (core_rate, serde_pass(batches))
}
