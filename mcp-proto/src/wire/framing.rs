//! Splits the server's stdout into lines: newline-delimited, bounded, scanned once.

// Public for the fuzz targets only (the `fuzzing` feature); the crate itself reaches it all.
#![cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub, dead_code))]

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use serde_json::Value;

use crate::wire::answered::{message_id, response_id};
use crate::wire::line_error::LineError;
use crate::wire::stream_json::JsonStream;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// How much of the start and of the end of a discarded line is kept to find its `id`: servers
/// put it near the start (`{"jsonrpc":"2.0","id":7,"result":...`) or last (`...,"id":7}`).
const EDGE: usize = 256;

/// Lines longer than this are parsed as their bytes arrive (see
/// [`LineDecoder::parse_from`]) where the connection reads them: below it, holding the line and
/// parsing it whole is faster; above it, the line's bytes would double a large result's memory.
pub(crate) const PARSE_FROM: usize = 1 << 20;

/// What [`LineDecoder::next_line_in_place`] hands out besides reports: a complete line (its
/// bytes, or the value of one long enough to have been parsed as it arrived), or what is known
/// early of a line that answers a request but will never be read.
#[derive(Debug)]
pub(crate) enum Line<B> {
    Bytes(B),
    Parsed(Value),
    /// A line parsed as it arrived that turned out not to be JSON; its first or last bytes
    /// name it the response to `id` (see [`response_id`]). Its bytes are gone, so the
    /// decoder, which saw them, says whom it answered.
    Unreadable {
        error: LineError,
        id: Value,
    },
    /// Not a whole line: the one arriving has just grown past `limit` after `size` bytes,
    /// and its first bytes name it the response to `id`. Handed out at once, so that its
    /// request need not wait for the rest; the line is discarded up to its newline, and its
    /// report, a [`LineError::TooLong`], comes with that newline.
    Overflowing {
        limit: usize,
        size: usize,
        id: Value,
    },
}

/// Buffers stdout fragments and yields complete lines.
///
/// Every byte is looked at once: `scanned` remembers how far the search for `\n` got, so a long
/// line arriving in small chunks costs linear time. The buffer holds at most `max_line_len` bytes
/// (and one for a `\r`) plus the latest chunk; past that the line is dropped, the rest of it is
/// skipped as it arrives (only its length and its last bytes are kept), and it is reported with
/// its `id` once its newline comes.
#[derive(Debug)]
pub struct LineDecoder {
    buffer: BytesMut,
    /// Bytes of `buffer` before this have been handed out, or skipped as blank lines; they
    /// are dropped once no line borrowed from the buffer can be alive.
    start: usize,
    /// How far past `start` the search for `\n` has got.
    scanned: usize,
    /// The buffer no longer starts at the front of its allocation.
    moved: bool,
    max_line_len: usize,
    /// Bytes up to the next `\n` belong to a line too long to keep.
    discarding: Option<Discarded>,
    /// Lines longer than this are parsed as they arrive rather than held.
    parse_from: usize,
    /// A line parsed as it arrives keeps at most this many entries of a listing
    /// ([`JsonStream::keeping_listed`]).
    keep_listed: Option<usize>,
    /// Bytes up to the next `\n` belong to a line being parsed as it arrives. Boxed: the
    /// decoder is moved in and out of the connection for every read, so it stays small.
    streaming: Option<Box<Streamed>>,
    /// A discarded or parsed line whose newline has come, to be handed out next.
    finished: Option<Result<Line<Range<usize>>, LineError>>,
    /// The line being discarded crossed the limit just now, and its first bytes name the
    /// response it is: its size then and that id, to be handed out before anything else.
    crossed: Option<(usize, Value)>,
    /// No line has been yielded or skipped yet, so a BOM may still lead the stream.
    at_stream_start: bool,
}

/// A line being parsed as it arrives: its parser, and what a discarded line keeps, should it
/// grow too long after all.
#[derive(Debug)]
struct Streamed {
    parser: JsonStream,
    edges: Discarded,
}

/// What is kept of a line too long to keep (or of a message read in pieces, should it be):
/// its length and edges, where its `id` is.
#[derive(Debug, Default)]
pub(crate) struct Discarded {
    size: usize,
    /// The first [`EDGE`] bytes.
    head: Vec<u8>,
    /// The last [`EDGE`] bytes seen so far.
    tail: Vec<u8>,
}

impl Discarded {
    pub(crate) fn skip(&mut self, bytes: &[u8]) {
        self.size += bytes.len();
        let room = EDGE - self.head.len();
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        let keep = bytes.len().min(EDGE);
        let old = (EDGE - keep).min(self.tail.len());
        self.tail.drain(..self.tail.len() - old);
        self.tail.extend_from_slice(&bytes[bytes.len() - keep..]);
    }
}

impl LineDecoder {
    /// A decoder that refuses lines longer than `max_line_len` bytes.
    pub fn new(max_line_len: usize) -> Self {
        Self {
            buffer: BytesMut::new(),
            start: 0,
            scanned: 0,
            moved: false,
            max_line_len,
            discarding: None,
            parse_from: usize::MAX,
            keep_listed: None,
            streaming: None,
            finished: None,
            crossed: None,
            at_stream_start: true,
        }
    }

    /// Parses lines longer than `len` bytes as their bytes arrive, and hands out their
    /// values (through `next_line_in_place`) instead of their bytes: the line is never held
    /// beside its value. Such a line that is not JSON is reported as
    /// [`LineError::NotJson`] or [`LineError::NotUtf8`], as decoding it whole would.
    pub(crate) fn parse_from(mut self, len: usize) -> Self {
        self.parse_from = len;
        self
    }

    /// A line parsed as it arrives (see [`parse_from`](Self::parse_from)) keeps at most
    /// `keep` entries of a listing; a shorter line is held whole anyway, and bounded by its
    /// length.
    pub(crate) fn keep_listed(mut self, keep: usize) -> Self {
        self.keep_listed = Some(keep);
        self
    }

    /// Appends a fragment of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.release();
        if self.discarding.is_some() || self.streaming.is_some() {
            let newline = find_newline(bytes);
            self.take_long(&bytes[..newline.unwrap_or(bytes.len())]);
            let Some(newline) = newline else {
                return;
            };
            bytes = &bytes[newline + 1..];
            self.finished = self.end_long();
        }
        if self.buffer.is_empty() && std::mem::take(&mut self.moved) {
            // Start the next line at the front of the allocation once the last line handed out
            // has been dropped; otherwise a long line lands after the old one and is moved
            // back to the front when it outgrows what is left, a second copy of every byte.
            let _ = self.buffer.try_reclaim(self.buffer.capacity() + 1);
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// Takes more of a line not held: parsed if it is being parsed (until it grows too
    /// long), else only measured.
    fn take_long(&mut self, bytes: &[u8]) {
        if let Some(streamed) = &mut self.streaming {
            streamed.edges.skip(bytes);
            if streamed.edges.size <= self.max_line_len + 1 {
                return streamed.parser.push(bytes);
            }
            // Its value so far is dropped here: only its edges are kept, for its `id`.
            let edges = self.streaming.take().map(|streamed| streamed.edges);
            self.start_discarding(edges.unwrap_or_default());
        } else if let Some(discarded) = &mut self.discarding {
            discarded.skip(bytes);
        }
    }

    /// The line not held has ended: its report, its value, or nothing for a blank one.
    fn end_long(&mut self) -> Option<Result<Line<Range<usize>>, LineError>> {
        if let Some(discarded) = self.discarding.take() {
            return Some(Err(self.too_long(
                &discarded.head,
                &discarded.tail,
                discarded.size,
            )));
        }
        let Streamed { parser, edges } = *self.streaming.take()?;
        // One byte over the limit is allowed while it may be the `\r` of a line within it.
        if edges.size - usize::from(edges.tail.ends_with(b"\r")) > self.max_line_len {
            return Some(Err(self.too_long(&edges.head, &edges.tail, edges.size)));
        }
        match parser.finish()? {
            Ok(value) => Some(Ok(Line::Parsed(value))),
            Err(error) => Some(match response_id(&edges.head, &edges.tail) {
                Some(id) => Ok(Line::Unreadable { error, id }),
                None => Err(error),
            }),
        }
    }

    /// From now on the line is only measured. If its first bytes name the response it is,
    /// that is handed out next: its request fails now, not when the line ends.
    fn start_discarding(&mut self, discarded: Discarded) {
        if let Some(id) = response_id(&discarded.head, &[]) {
            self.crossed = Some((discarded.size, id));
        }
        self.discarding = Some(discarded);
    }

    /// The next complete, non-blank line without its terminator, or the error of an
    /// overlong one. `None` means more bytes are needed. A line parsed as it arrived (only
    /// when the connection asked for that) is handed out as its value's JSON text.
    pub fn next_line(&mut self) -> Option<Result<Bytes, LineError>> {
        let range = loop {
            match self.next_range()? {
                Ok(Line::Bytes(range)) => break range,
                Ok(Line::Parsed(value)) => return Some(Ok(Bytes::from(value.to_string()))),
                Ok(Line::Unreadable { error, .. }) | Err(error) => return Some(Err(error)),
                // Its report comes with its newline, as ever here.
                Ok(Line::Overflowing { .. }) => {}
            }
        };
        let mut line = self
            .buffer
            .split_to(std::mem::take(&mut self.start))
            .freeze();
        self.moved = true;
        line.truncate(range.end);
        line.advance(range.start);
        Some(Ok(line))
    }

    /// [`next_line`](Self::next_line), borrowed from the buffer until the next call: no
    /// reference count is taken and dropped for each line. Unlike `next_line`, it also says
    /// what is known early of a response that cannot be read: the moment a line that names
    /// its `id` grows past the limit ([`Line::Overflowing`]), and whom a line parsed as it
    /// arrived answered when it is not JSON ([`Line::Unreadable`]).
    pub(crate) fn next_line_in_place(&mut self) -> Option<Result<Line<&[u8]>, LineError>> {
        Some(self.next_range()?.map(|line| match line {
            Line::Bytes(range) => Line::Bytes(&self.buffer[range]),
            Line::Parsed(value) => Line::Parsed(value),
            Line::Unreadable { error, id } => Line::Unreadable { error, id },
            Line::Overflowing { limit, size, id } => Line::Overflowing { limit, size, id },
        }))
    }

    /// The line that crossed the limit, if one just did.
    fn take_crossed(&mut self) -> Option<Result<Line<Range<usize>>, LineError>> {
        let (size, id) = self.crossed.take()?;
        let limit = self.max_line_len;
        Some(Ok(Line::Overflowing { limit, size, id }))
    }

    /// Finds the next line: where its content lies in the buffer. The whole line, with its
    /// terminator, ends at the new `start`.
    fn next_range(&mut self) -> Option<Result<Line<Range<usize>>, LineError>> {
        // A line that crossed the limit in `push` comes before its own end.
        if let Some(crossed) = self.take_crossed() {
            return Some(crossed);
        }
        if let Some(finished) = self.finished.take() {
            return Some(finished);
        }
        loop {
            let from = self.start + self.scanned;
            let Some(offset) = find_newline(&self.buffer[from..]) else {
                self.check_overflow();
                return self.take_crossed();
            };
            let (begin, end) = (self.start, from + offset);
            self.scanned = 0;
            self.start = end + 1;
            // The limit is on the content: a `\r` before the newline does not count.
            let line = &self.buffer[begin..end];
            if line.len() - usize::from(line.ends_with(b"\r")) > self.max_line_len {
                let edge = line.len().min(EDGE);
                let error = self.too_long(&line[..edge], &line[line.len() - edge..], line.len());
                self.at_stream_start = false;
                return Some(Err(error));
            }
            if let Some(range) = content(line, &mut self.at_stream_start) {
                return Some(Ok(Line::Bytes(begin + range.start..begin + range.end)));
            }
        }
    }

    /// Drops the bytes before `start`. When every byte has been handed out the buffer is just
    /// emptied, which keeps it at the front of its allocation.
    fn release(&mut self) {
        let start = std::mem::take(&mut self.start);
        if start == self.buffer.len() {
            self.buffer.clear();
        } else if start > 0 {
            self.buffer.advance(start);
            self.moved = true;
        }
    }

    /// [`finish`](Self::finish), or the value of a line being parsed as it arrived.
    pub(crate) fn finish_line(&mut self) -> Option<Result<Line<Bytes>, LineError>> {
        if let Some(streamed) = self.streaming.take() {
            // Not measured against the limit: neither is an unterminated line held whole.
            return streamed.parser.finish().map(|line| line.map(Line::Parsed));
        }
        self.finish().map(|line| Ok(Line::Bytes(line)))
    }

    /// Takes whatever unterminated bytes remain once the stream has ended.
    pub fn finish(&mut self) -> Option<Bytes> {
        self.release();
        let mut rest = self.buffer.split().freeze();
        self.moved = true;
        self.scanned = 0;
        self.crossed = None;
        if self.discarding.take().is_some() {
            return None;
        }
        if let Some(streamed) = self.streaming.take() {
            let value = streamed.parser.finish()?.ok()?;
            return Some(Bytes::from(value.to_string()));
        }
        let range = content(&rest, &mut self.at_stream_start)?;
        rest.truncate(range.end);
        rest.advance(range.start);
        Some(rest)
    }

    /// Bytes held for the current partial line.
    pub fn buffered(&self) -> usize {
        self.buffer.len() - self.start
    }

    /// With no newline in sight: starts discarding the line if it is already too long, or
    /// parsing it as it arrives if it is long.
    fn check_overflow(&mut self) {
        self.release();
        self.scanned = self.buffer.len();
        // One byte over the limit may still be the `\r` of a line just within it.
        if self.buffer.len() <= self.max_line_len + 1 && self.buffer.len() <= self.parse_from {
            return;
        }
        // The start of a BOM that may still lead the stream is not yet the line's: parsed now,
        // it would read as a fault that the BOM's last byte takes back.
        if self.at_stream_start && self.buffer.len() < BOM.len() && BOM.starts_with(&self.buffer) {
            return;
        }
        let mut discarded = Discarded::default();
        discarded.skip(&self.buffer);
        if self.buffer.len() <= self.max_line_len + 1 {
            // Long, not too long: parsed from here on, held no more.
            let mut parser = self
                .keep_listed
                .map_or_else(JsonStream::new, JsonStream::keeping_listed);
            let bom = std::mem::take(&mut self.at_stream_start) && self.buffer.starts_with(BOM);
            parser.push(&self.buffer[if bom { BOM.len() } else { 0 }..]);
            self.streaming = Some(Box::new(Streamed {
                parser,
                edges: discarded,
            }));
        } else {
            self.start_discarding(discarded);
        }
        self.buffer.clear();
        self.scanned = 0;
        self.at_stream_start = false;
    }

    /// The report of a discarded line, given its first and last bytes and its length.
    fn too_long(&self, head: &[u8], tail: &[u8], size: usize) -> LineError {
        // The limit is on the content: a `\r` before the newline does not count.
        let (tail, size) = match tail.strip_suffix(b"\r") {
            Some(tail) => (tail, size - 1),
            None => (tail, size),
        };
        LineError::TooLong {
            limit: self.max_line_len,
            size,
            id: message_id(head, tail),
        }
    }
}

/// Where a line's content lies once a leading BOM (first line only) and a trailing `\r` are
/// stripped; `None` for a blank line.
fn content(line: &[u8], at_stream_start: &mut bool) -> Option<Range<usize>> {
    let mut start = 0;
    if std::mem::take(at_stream_start) && line.starts_with(BOM) {
        start = BOM.len();
    }
    let mut end = line.len();
    if end > start && line[end - 1] == b'\r' {
        end -= 1;
    }
    if line[start..end].iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(start..end)
}

/// The report of a whole message (not a line) over `limit`, with its `id` if it shows.
pub(crate) fn too_long(limit: usize, message: &[u8]) -> LineError {
    let head = &message[..message.len().min(EDGE)];
    let tail = &message[message.len().saturating_sub(EDGE)..];
    LineError::TooLong {
        limit,
        size: message.len(),
        id: message_id(head, tail),
    }
}

impl Discarded {
    /// Bytes seen.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The `id` of the response the message is ([`response_id`]): from its first bytes, or,
    /// once it has `ended`, from its last.
    pub(crate) fn response_id(&self, ended: bool) -> Option<Value> {
        response_id(&self.head, if ended { &self.tail } else { &[] })
    }

    /// The report of a message read in pieces that grew over `limit`.
    pub(crate) fn too_long(&self, limit: usize) -> LineError {
        LineError::TooLong {
            limit,
            size: self.size,
            id: message_id(&self.head, &self.tail),
        }
    }
}

/// The `id` of the response a whole line is, if it shows at its start or end (see
/// [`response_id`]): for a line that cannot be read, whom it answered.
pub(crate) fn line_response_id(line: &[u8]) -> Option<Value> {
    let head = &line[..line.len().min(EDGE)];
    let tail = &line[line.len().saturating_sub(EDGE)..];
    response_id(head, tail)
}

/// Where the first newline in `bytes` is. On x86-64 this is the SSE2 search, which every such
/// CPU has, rather than `memchr::memchr`: that one picks AVX2 at its first call by asking the
/// CPU what it supports, and those CPUID instructions, trapped by the hypervisor on a virtual
/// machine, cost a one-shot process tens of microseconds before its first line.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(finder) = memchr::arch::x86_64::sse2::memchr::One::new(b'\n') {
        return finder.find(bytes);
    }
    memchr::memchr(b'\n', bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_long(limit: usize, size: usize, id: Option<Value>) -> LineError {
        LineError::TooLong { limit, size, id }
    }

    #[test]
    fn a_discarded_line_names_its_id_from_its_start_or_its_end() {
        let big = "x".repeat(5000);
        let cases = [
            (
                format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"text":"{big}"}}}}"#),
                Some(serde_json::json!(7)),
            ),
            (
                format!(r#"{{"result":{{"text":"{big}","id":99}},"jsonrpc":"2.0","id":"abc"}}"#),
                Some(serde_json::json!("abc")),
            ),
            (
                format!(r#"{{ "result" : {{"id": 3, "text":"{big}"}}, "id" : 12 }}"#),
                Some(serde_json::json!(12)),
            ),
            // A nested `id` is not the message's.
            (
                format!(r#"{{"result":{{"text":"{big}","x":{{"id":5}}}}}}"#),
                None,
            ),
            (
                format!(r#"{{"method":"notifications/message","params":{{"data":"{big}"}}}}"#),
                None,
            ),
            (big.clone(), None),
        ];
        for (line, id) in cases {
            for chunk in [7, 4096, line.len() + 1] {
                let mut decoder = LineDecoder::new(1000);
                let stream = format!("{line}\nok\n");
                for piece in stream.as_bytes().chunks(chunk) {
                    decoder.push(piece);
                }
                assert_eq!(
                    lines(&mut decoder),
                    [
                        Err(too_long(1000, line.len(), id.clone())),
                        Ok(b"ok".to_vec())
                    ],
                    "chunks of {chunk}: {}",
                    &line[..40]
                );
            }
        }
    }

    fn lines(decoder: &mut LineDecoder) -> Vec<Result<Vec<u8>, LineError>> {
        std::iter::from_fn(|| decoder.next_line())
            .map(|line| line.map(|bytes| bytes.to_vec()))
            .collect()
    }

    #[test]
    fn splits_lines_and_strips_terminators() {
        let mut decoder = LineDecoder::new(100);
        decoder.push(b"\xEF\xBB\xBFone\r\n\n  \r\ntwo\nthr");
        assert_eq!(
            lines(&mut decoder),
            [Ok(b"one".to_vec()), Ok(b"two".to_vec())]
        );
        decoder.push(b"ee\n");
        assert_eq!(lines(&mut decoder), [Ok(b"three".to_vec())]);
    }

    #[test]
    fn the_limit_is_on_content_not_on_a_crlf_ending() {
        let mut decoder = LineDecoder::new(4);
        decoder.push(b"abcd\r");
        decoder.push(b"\nabcde\r\n");
        assert_eq!(
            lines(&mut decoder),
            [Ok(b"abcd".to_vec()), Err(too_long(4, 5, None))]
        );
    }

    #[test]
    fn bom_is_stripped_only_at_stream_start() {
        let mut decoder = LineDecoder::new(100);
        decoder.push(b"\xEF\xBB");
        decoder.push(b"\xBFa\n\xEF\xBB\xBFb\n");
        assert_eq!(
            lines(&mut decoder),
            [Ok(b"a".to_vec()), Ok(b"\xEF\xBB\xBFb".to_vec())]
        );
    }

    #[test]
    fn overlong_line_is_reported_once_and_skipped_to_its_newline() {
        let mut decoder = LineDecoder::new(8);
        decoder.push(b"0123456");
        assert_eq!(lines(&mut decoder), []);
        decoder.push(b"789abc");
        assert_eq!(lines(&mut decoder), []);
        assert_eq!(decoder.buffered(), 0);
        decoder.push(b"still the same line");
        assert_eq!(decoder.buffered(), 0);
        decoder.push(b" end\r\nnext\n");
        // Reported once its newline has come, with its whole length.
        assert_eq!(
            lines(&mut decoder),
            [Err(too_long(8, 36, None)), Ok(b"next".to_vec())]
        );
    }

    #[test]
    fn overlong_complete_line_is_reported() {
        let mut decoder = LineDecoder::new(4);
        decoder.push(b"12345\n1234\n");
        assert_eq!(
            lines(&mut decoder),
            [Err(too_long(4, 5, None)), Ok(b"1234".to_vec())]
        );
    }

    #[test]
    fn finish_returns_the_unterminated_tail() {
        let mut decoder = LineDecoder::new(100);
        decoder.push(b"a\npartial");
        assert_eq!(lines(&mut decoder), [Ok(b"a".to_vec())]);
        assert_eq!(decoder.finish().as_deref(), Some(&b"partial"[..]));
        assert_eq!(decoder.finish(), None);
    }

    #[test]
    fn long_line_in_small_chunks_is_scanned_once() {
        let mut decoder = LineDecoder::new(1 << 20);
        let chunk = [b'x'; 4096];
        for _ in 0..200 {
            decoder.push(&chunk);
            assert!(decoder.next_line().is_none());
            assert_eq!(decoder.scanned, decoder.buffered());
        }
        decoder.push(b"\n");
        assert_eq!(
            decoder.next_line().map(|l| l.map(|l| l.len())),
            Some(Ok(819_200))
        );
    }

    proptest::proptest! {
        /// Lines read in place are the lines `next_line` hands out, however the stream is cut.
        #[test]
        fn lines_in_place_match_shared_lines(
            stream in proptest::collection::vec(
                proptest::sample::select(b"ab \r\n{}\xEF\xBB\xBF".to_vec()),
                0..200,
            ),
            cuts in proptest::collection::vec(1usize..40, 1..20),
            limit in 0usize..12,
        ) {
            let mut shared = LineDecoder::new(limit);
            let mut in_place = LineDecoder::new(limit);
            let (mut from_shared, mut from_in_place) = (Vec::new(), Vec::new());
            let mut rest = stream.as_slice();
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (chunk, after) = rest.split_at((*cut).min(rest.len()));
                rest = after;
                shared.push(chunk);
                in_place.push(chunk);
                from_shared.extend(lines(&mut shared));
                while let Some(line) = in_place.next_line_in_place() {
                    from_in_place.extend(match line {
                        Ok(Line::Bytes(line)) => Some(Ok(line.to_vec())),
                        Ok(Line::Parsed(value)) => Some(Ok(value.to_string().into_bytes())),
                        Ok(Line::Unreadable { error, .. }) | Err(error) => Some(Err(error)),
                        // Not a line: what `next_line` never says.
                        Ok(Line::Overflowing { .. }) => None,
                    });
                }
                proptest::prop_assert_eq!(shared.buffered(), in_place.buffered());
            }
            proptest::prop_assert_eq!(from_shared, from_in_place);
            let tail = |line: Option<Bytes>| line.map(|line| line.to_vec());
            proptest::prop_assert_eq!(tail(shared.finish()), tail(in_place.finish()));
        }

        /// A decoder that parses long lines as they arrive finds what one holding every line
        /// whole finds, however the stream is cut: the same values, the same faults.
        #[test]
        fn long_lines_parsed_as_they_arrive_read_as_whole_lines(
            fragments in proptest::collection::vec(
                proptest::sample::select(vec![
                    &b"{\"id\":7,\"result\":{\"text\":\""[..], b"abc", b"\\n", b"\\ud83d\\ude00",
                    b"\"}}", b"\"", b"[", b"]", b",", b":", b"1", b"-2.5e3", b"null", b" ",
                    b"\r", b"\n", b"\xEF\xBB\xBF", b"\x0C", b"\xc3\xa9", b"\xc3", b"\xff",
                ]),
                0..60,
            ),
            cuts in proptest::collection::vec(1usize..24, 1..20),
            parse_from in 0usize..16,
            limit in 8usize..64,
        ) {
            let stream = fragments.concat();
            let mut whole = LineDecoder::new(limit);
            let mut parsing = LineDecoder::new(limit).parse_from(parse_from);
            let (mut from_whole, mut from_parsing) = (Vec::new(), Vec::new());
            let mut rest = stream.as_slice();
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (chunk, after) = rest.split_at((*cut).min(rest.len()));
                rest = after;
                whole.push(chunk);
                parsing.push(chunk);
                while let Some(line) = whole.next_line_in_place() {
                    from_whole.extend(outcome(line));
                }
                while let Some(line) = parsing.next_line_in_place() {
                    from_parsing.extend(outcome(line));
                }
            }
            from_whole.extend(last(&mut whole));
            from_parsing.extend(last(&mut parsing));
            proptest::prop_assert_eq!(from_whole, from_parsing);
        }
    }

    /// What a line comes to: its value, or the kind of its fault; `None` for what is not a
    /// line's end ([`Line::Overflowing`]).
    fn outcome<B: AsRef<[u8]>>(
        line: Result<Line<B>, LineError>,
    ) -> Option<Result<Value, LineError>> {
        let outcome = match line {
            Ok(Line::Parsed(value)) => Ok(value),
            Ok(Line::Bytes(bytes)) => match std::str::from_utf8(bytes.as_ref()) {
                Ok(text) => serde_json::from_str(text).map_err(|_| not_json()),
                Err(_) => Err(LineError::NotUtf8),
            },
            Ok(Line::Unreadable { error, .. }) | Err(error) => Err(error),
            Ok(Line::Overflowing { .. }) => return None,
        };
        Some(outcome.map_err(|error| match error {
            LineError::NotJson { .. } => not_json(),
            error => error,
        }))
    }

    fn not_json() -> LineError {
        LineError::NotJson {
            detail: String::new(),
        }
    }

    /// The outcome of the unterminated last line.
    fn last(decoder: &mut LineDecoder) -> Option<Result<Value, LineError>> {
        outcome(decoder.finish_line()?)
    }

    fn parsed(decoder: &mut LineDecoder) -> Vec<Result<Value, LineError>> {
        let mut outcomes = Vec::new();
        while let Some(line) = decoder.next_line_in_place() {
            outcomes.extend(outcome(line));
        }
        outcomes
    }

    #[test]
    fn a_long_line_is_parsed_as_it_arrives_and_never_held() {
        let text = "y".repeat(3000);
        let line = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"text":"{text}\u00e9"}}}}"#);
        let value: Value = serde_json::from_str(&line).unwrap();
        for chunk in [1, 7, 100, 4096] {
            let mut decoder = LineDecoder::new(10_000).parse_from(64);
            let stream = format!("\u{FEFF}{line}\r\n{}\n{{}}\n", " ".repeat(500));
            let mut lines = Vec::new();
            for piece in stream.as_bytes().chunks(chunk) {
                decoder.push(piece);
                assert!(decoder.buffered() <= 64 + chunk, "chunks of {chunk}");
                lines.extend(parsed(&mut decoder));
            }
            // The BOM and the `\r` are not the line's; the blank line is skipped.
            assert_eq!(
                lines,
                [Ok(value.clone()), Ok(serde_json::json!({}))],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn a_long_line_that_is_not_json_is_reported_as_a_whole_line_would_be() {
        let long = "z".repeat(200);
        let cases = [
            (format!(r#"{{"a":"{long}",}}"#), not_json()),
            (format!(r#"{{"a":"{long}\u00"}}"#), not_json()),
            (format!(r#"{{"a":"{long}"}} x"#), not_json()),
            (format!(r#"{{"a":"{long}"#), not_json()),
        ];
        for (line, error) in cases {
            let mut decoder = LineDecoder::new(1000).parse_from(16);
            decoder.push(format!("{line}\n[1]\n").as_bytes());
            assert_eq!(
                parsed(&mut decoder),
                [Err(error), Ok(serde_json::json!([1]))],
                "{line}"
            );
        }
        // Invalid UTF-8 wins over a JSON fault before it, as a whole line is checked first.
        let mut decoder = LineDecoder::new(1000).parse_from(16);
        decoder.push(format!(r#"{{"a":"{long}",}} "#).as_bytes());
        decoder.push(b"\xff\n");
        assert_eq!(parsed(&mut decoder), [Err(LineError::NotUtf8)]);
    }

    #[test]
    fn a_parsed_line_that_grows_too_long_is_discarded_and_names_its_id() {
        let long = "q".repeat(900);
        for (line, id) in [
            (
                format!(r#"{{"id":7,"result":"{long}{long}"}}"#),
                Some(serde_json::json!(7)),
            ),
            (
                format!(r#"{{"result":"{long}{long}","id":"x"}}"#),
                Some(serde_json::json!("x")),
            ),
            (format!(r#"{{"result":"{long}{long}"}}"#), None),
        ] {
            let mut decoder = LineDecoder::new(1000).parse_from(16);
            for piece in format!("{line}\n{{}}\n").as_bytes().chunks(100) {
                decoder.push(piece);
                assert!(decoder.streaming.is_none() || decoder.discarding.is_none());
            }
            assert_eq!(
                parsed(&mut decoder),
                [
                    Err(too_long(1000, line.len(), id)),
                    Ok(serde_json::json!({}))
                ]
            );
        }
    }

    #[test]
    fn a_response_crossing_the_limit_is_told_at_once_and_reported_at_its_newline() {
        let start = br#"{"jsonrpc":"2.0","id":7,"result":""#;
        // Held whole until too long, and parsed as it arrives until too long.
        for parse_from in [usize::MAX, 16] {
            let mut decoder = LineDecoder::new(100).parse_from(parse_from);
            decoder.push(start);
            decoder.push(&[b'a'; 60]);
            assert!(decoder.next_line_in_place().is_none());
            decoder.push(&[b'a'; 60]);
            let Some(Ok(Line::Overflowing { limit, size, id })) = decoder.next_line_in_place()
            else {
                panic!("not told");
            };
            assert_eq!(
                (limit, size, id),
                (100, start.len() + 120, serde_json::json!(7))
            );
            assert!(decoder.next_line_in_place().is_none());
            decoder.push(b"aa\"}\n{}\n");
            let size = start.len() + 124;
            assert_eq!(
                parsed(&mut decoder),
                [
                    Err(too_long(100, size, Some(serde_json::json!(7)))),
                    Ok(serde_json::json!({}))
                ]
            );
        }
        // Nor is a request's id told: it is the peer's own, not ours.
        let mut decoder = LineDecoder::new(10);
        decoder.push(br#"{"id":7,"method":"x","params":"long enough"#);
        assert!(decoder.next_line_in_place().is_none());
    }

    #[test]
    fn a_long_line_that_is_not_json_names_the_response_it_is() {
        let line = format!(r#"{{"id":3,"result":"{}",}}"#, "b".repeat(100));
        let mut decoder = LineDecoder::new(1000).parse_from(16);
        // Cut, so that the first piece is long enough to be parsed as it arrives.
        let (first, rest) = line.split_at(20);
        decoder.push(first.as_bytes());
        assert!(decoder.next_line_in_place().is_none());
        decoder.push(format!("{rest}\n").as_bytes());
        assert!(matches!(
            decoder.next_line_in_place(),
            Some(Ok(Line::Unreadable { error: LineError::NotJson { .. }, id })) if id == 3
        ));
        assert_eq!(
            line_response_id(line.as_bytes()),
            Some(serde_json::json!(3))
        );
        assert_eq!(
            line_response_id(br#"{"id":3,"method":"x","result":1}"#),
            None
        );
        assert_eq!(line_response_id(br#"{"id":3,"params":{}}"#), None);
    }

    #[test]
    fn an_unterminated_long_line_is_parsed_at_the_end() {
        let line = format!(r#"["{}"]"#, "w".repeat(100));
        let mut decoder = LineDecoder::new(1000).parse_from(16);
        decoder.push(line.as_bytes());
        assert_eq!(parsed(&mut decoder), []);
        let last = last(&mut decoder);
        assert_eq!(last, Some(Ok(serde_json::from_str(&line).unwrap())));
    }
}
