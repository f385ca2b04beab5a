//! Server-Sent Events, as the Streamable HTTP transport sends them: bytes in, events out,
//! bounded like the line decoder.
//!
//! The parsing follows the HTML standard's event stream rules: lines end with CRLF, LF or a
//! lone CR; a BOM may start the stream; `:` starts a comment; `event`, `data`, `id` and `retry`
//! are the fields, anything else is ignored; a blank line dispatches the event, and an event
//! with no data is no event. An unterminated event at the end of the stream is dropped.
//!
//! An event whose data passes [`SseDecoder::stream_from`] is handed out in pieces as its bytes
//! arrive ([`SsePiece::Data`]), never held whole: a 200 MiB answer costs its parsed value,
//! not its value and its text. Such pieces are the data's raw bytes, where a held event's data
//! has invalid UTF-8 replaced; the JSON parser they go to refuses invalid UTF-8 instead.

use std::time::Duration;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field; `message` when none was given.
    pub event: String,
    /// The `data` lines, joined by `\n`.
    pub data: String,
    /// The last event id at the time of dispatch (ids carry over between events), to send
    /// back as `Last-Event-ID` when resuming.
    pub id: Option<String>,
}

/// What [`SseDecoder::next_piece`] hands out, in the stream's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SsePiece {
    /// More of the data of the event being read, once it has passed
    /// [`stream_from`](SseDecoder::stream_from): its data lines joined by `\n`, as far as they
    /// have come. The [`Event`](Self::Event) that ends it has empty `data`.
    Data(Vec<u8>),
    /// An event dispatched.
    Event(SseEvent),
    /// An event over the limit, dropped (pieces of it may have been handed out already).
    TooLong(SseTooLong),
}

/// An event that was too large to keep: it is dropped, the stream goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseTooLong {
    /// The limit given to [`SseDecoder::new`].
    pub limit: usize,
}

impl std::fmt::Display for SseTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "event stream line or event over {} bytes, dropped",
            self.limit
        )
    }
}

impl std::error::Error for SseTooLong {}

/// Splits an event stream into events. Every byte is looked at once; memory is bounded by the
/// limit plus the latest chunk.
#[derive(Debug)]
pub struct SseDecoder {
    limit: usize,
    /// The current line, without its end.
    line: Vec<u8>,
    /// The last byte was a CR, so an LF right after it ends nothing more.
    after_cr: bool,
    at_stream_start: bool,
    /// The current event is over the limit: its lines are skipped up to its end.
    dropping: bool,
    /// The current line is over the limit: its bytes are skipped up to its end.
    skipping_line: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    retry: Option<Duration>,
    /// Data longer than this is handed out in pieces.
    stream_from: usize,
    /// The current event's data is being handed out in pieces: how much of it has gone.
    streamed: Option<usize>,
    /// The current line is a data line of such an event: its bytes go out as they come.
    in_data_line: bool,
    /// The length of that line so far.
    line_len: usize,
    /// Data of the current event, not handed out yet: one piece per [`push`](Self::push).
    pending: Vec<u8>,
    ready: std::collections::VecDeque<SsePiece>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseDecoder {
    /// A decoder that drops any line, or any event's data, longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            line: Vec::new(),
            after_cr: false,
            at_stream_start: true,
            dropping: false,
            skipping_line: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            last_id: None,
            retry: None,
            stream_from: usize::MAX,
            streamed: None,
            in_data_line: false,
            line_len: 0,
            pending: Vec::new(),
            ready: std::collections::VecDeque::new(),
        }
    }

    /// Hands out an event's data in pieces ([`SsePiece::Data`], through
    /// [`next_piece`](Self::next_piece)) once it is longer than `len` bytes, instead of
    /// holding it whole.
    pub fn stream_from(mut self, len: usize) -> Self {
        self.stream_from = len;
        self
    }

    /// Feeds a fragment of the stream; then take the events with
    /// [`next_event`](Self::next_event) (or [`next_piece`](Self::next_piece)).
    pub fn push(&mut self, bytes: &[u8]) {
        self.push_lines(bytes);
        self.flush();
    }

    fn push_lines(&mut self, mut bytes: &[u8]) {
        if self.at_stream_start {
            // The BOM may itself arrive in pieces: wait for enough bytes to tell.
            let held = self.line.len();
            let seen: Vec<u8> = self
                .line
                .iter()
                .chain(bytes)
                .take(BOM.len())
                .copied()
                .collect();
            if seen.len() < BOM.len() && BOM.starts_with(&seen) {
                self.line.extend_from_slice(bytes);
                return;
            }
            self.at_stream_start = false;
            if seen == BOM {
                bytes = &bytes[BOM.len() - held..];
                self.line.clear();
            }
        }
        while !bytes.is_empty() {
            if std::mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
                bytes = &bytes[1..];
                continue;
            }
            let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) else {
                self.take(bytes);
                return;
            };
            self.take(&bytes[..end]);
            self.after_cr = bytes[end] == b'\r';
            self.end_line();
            bytes = &bytes[end + 1..];
        }
    }

    /// The next dispatched event, or the report of a dropped one. Pieces of data handed out
    /// under [`stream_from`](Self::stream_from) are skipped: read those with
    /// [`next_piece`](Self::next_piece).
    pub fn next_event(&mut self) -> Option<Result<SseEvent, SseTooLong>> {
        loop {
            match self.ready.pop_front()? {
                SsePiece::Data(_) => {}
                SsePiece::Event(event) => return Some(Ok(event)),
                SsePiece::TooLong(too_long) => return Some(Err(too_long)),
            }
        }
    }

    /// The next piece of an event's data, dispatched event, or report of a dropped one.
    pub fn next_piece(&mut self) -> Option<SsePiece> {
        self.ready.pop_front()
    }

    /// Hands out the data gathered so far, as one piece.
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let data = std::mem::take(&mut self.pending);
            self.ready.push_back(SsePiece::Data(data));
        }
    }

    /// The last event id seen, for `Last-Event-ID` when resuming.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection time the server asked for with `retry`, if it did.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Adds bytes to the current line, unless that makes it too long.
    fn take(&mut self, bytes: &[u8]) {
        if self.skipping_line {
            return;
        }
        if self.in_data_line {
            // The line is bounded as a held one is, its field name included.
            self.line_len += bytes.len();
            self.skipping_line = self.line_len > self.limit || !self.stream_data(bytes);
            if self.line_len > self.limit && !self.dropping {
                self.drop_event();
            }
            return;
        }
        if self.line.len() + bytes.len() > self.limit {
            self.skipping_line = true;
            self.line.clear();
            if !self.dropping {
                self.drop_event();
            }
            return;
        }
        self.line.extend_from_slice(bytes);
        self.start_data_line();
    }

    /// Starts handing out the current line's value as it comes, if it is a data line (its
    /// optional space seen) and the event's data is, or now becomes, too long to hold.
    fn start_data_line(&mut self) {
        let held = self.data.len() + self.line.len();
        if self.dropping
            || self.line.len() < b"data: ".len()
            || !self.line.starts_with(b"data:")
            || (self.streamed.is_none() && held <= self.stream_from)
        {
            return;
        }
        let line = std::mem::take(&mut self.line);
        self.line_len = line.len();
        let value = line[5..].strip_prefix(b" ").unwrap_or(&line[5..]);
        let streamed = match self.streamed {
            // Each line held so far ends in the `\n` that joins it to this one.
            None => {
                self.pending = std::mem::take(&mut self.data).into_bytes();
                self.pending.len()
            }
            Some(streamed) => {
                self.pending.push(b'\n');
                streamed + 1
            }
        };
        self.streamed = Some(streamed);
        self.has_data = true;
        self.in_data_line = true;
        self.skipping_line = !self.stream_data(value);
    }

    /// More data of an event being handed out in pieces; false if that took it over the
    /// limit, and it was dropped.
    fn stream_data(&mut self, bytes: &[u8]) -> bool {
        let streamed = self.streamed.unwrap_or(0) + bytes.len();
        // Counted as held data is: the joined lines and one `\n`.
        if streamed + 1 > self.limit {
            self.drop_event();
            return false;
        }
        self.streamed = Some(streamed);
        self.pending.extend_from_slice(bytes);
        true
    }

    /// A whole short data line of an event being handed out in pieces.
    fn stream_line(&mut self, value: &[u8]) {
        if self.stream_data(b"\n") {
            self.stream_data(value);
        }
    }

    fn drop_event(&mut self) {
        self.dropping = true;
        self.line.clear();
        self.reset_event();
        self.ready
            .push_back(SsePiece::TooLong(SseTooLong { limit: self.limit }));
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.skipping_line) || std::mem::take(&mut self.in_data_line) {
            return;
        }
        if line.is_empty() {
            // The blank line ends the event, dropped or not.
            if !std::mem::take(&mut self.dropping) {
                self.dispatch();
            }
            return;
        }
        if self.dropping || line[0] == b':' {
            return;
        }
        let line = String::from_utf8_lossy(&line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" if self.streamed.is_some() => self.stream_line(value.as_bytes()),
            "data" => {
                if self.data.len() + value.len() + 1 > self.limit {
                    return self.drop_event();
                }
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            // An id with a NUL is ignored, as the standard says.
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok().map(Duration::from_millis);
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) {
        if !self.has_data {
            return self.reset_event();
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        if self.streamed.take().is_some() {
            self.flush();
        }
        let event = match std::mem::take(&mut self.event) {
            event if event.is_empty() => "message".to_owned(),
            event => event,
        };
        self.has_data = false;
        let id = self.last_id.clone();
        self.ready
            .push_back(SsePiece::Event(SseEvent { event, data, id }));
    }

    /// Forgets the current event, and what of its data was not handed out.
    fn reset_event(&mut self) {
        self.event.clear();
        self.data.clear();
        self.has_data = false;
        self.streamed = None;
        self.in_data_line = false;
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(decoder: &mut SseDecoder) -> Vec<Result<SseEvent, SseTooLong>> {
        std::iter::from_fn(|| decoder.next_event()).collect()
    }

    fn event(name: &str, data: &str, id: Option<&str>) -> Result<SseEvent, SseTooLong> {
        Ok(SseEvent {
            event: name.to_owned(),
            data: data.to_owned(),
            id: id.map(str::to_owned),
        })
    }

    #[test]
    fn fields_comments_and_multi_line_data() {
        let mut decoder = SseDecoder::new(1000);
        decoder.push(
            b": a comment\nevent: message\ndata: {\"a\":1}\nid: 7\n\n\
              data:first\ndata: second\nunknown: x\n\n\
              id: 8\nretry: 2500\n\n\
              data\n\n",
        );
        assert_eq!(
            events(&mut decoder),
            [
                event("message", "{\"a\":1}", Some("7")),
                event("message", "first\nsecond", Some("7")),
                event("message", "", Some("8")),
            ]
        );
        assert_eq!(decoder.last_event_id(), Some("8"));
        assert_eq!(decoder.retry(), Some(Duration::from_millis(2500)));
    }

    #[test]
    fn every_line_end_and_a_bom() {
        let stream = b"\xEF\xBB\xBFdata: a\r\n\r\ndata: b\r\rdata: c\n\nevent: e\rdata: d\r\n\n";
        let expected = [
            event("message", "a", None),
            event("message", "b", None),
            event("message", "c", None),
            event("e", "d", None),
        ];
        for size in 1..=stream.len() {
            let mut decoder = SseDecoder::new(1000);
            for chunk in stream.chunks(size) {
                decoder.push(chunk);
            }
            assert_eq!(events(&mut decoder), expected, "chunks of {size}");
        }
    }

    #[test]
    fn odd_ids_and_retries_are_ignored() {
        let mut decoder = SseDecoder::new(1000);
        decoder.push(b"id: 1\nretry: 10\n\nid: a\0b\nretry: 1.5\nretry: x\ndata: z\n\n");
        assert_eq!(events(&mut decoder), [event("message", "z", Some("1"))]);
        assert_eq!(decoder.retry(), Some(Duration::from_millis(10)));
    }

    #[test]
    fn an_event_over_the_limit_is_dropped_and_the_stream_goes_on() {
        let mut decoder = SseDecoder::new(16);
        decoder.push(b"data: 0123456789abcdefghij\ndata: more\n\ndata: ok\n\n");
        assert_eq!(
            events(&mut decoder),
            [Err(SseTooLong { limit: 16 }), event("message", "ok", None)]
        );
        // Many short data lines add up past the limit too.
        decoder.push(b"data: 12345\ndata: 12345\ndata: 12345\n\ndata: fine\n\n");
        assert_eq!(
            events(&mut decoder),
            [
                Err(SseTooLong { limit: 16 }),
                event("message", "fine", None)
            ]
        );
    }

    #[test]
    fn an_unfinished_event_is_not_dispatched() {
        let mut decoder = SseDecoder::new(100);
        decoder.push(b"data: half");
        assert_eq!(events(&mut decoder), []);
        decoder.push(b"\n");
        assert_eq!(events(&mut decoder), []);
    }

    /// What a decoder handing out pieces gives, with each event's pieces joined back into
    /// its data.
    fn joined(
        decoder: &mut SseDecoder,
        streamed: &mut Vec<u8>,
    ) -> Vec<Result<SseEvent, SseTooLong>> {
        let mut out = Vec::new();
        while let Some(piece) = decoder.next_piece() {
            match piece {
                SsePiece::Data(data) => streamed.extend_from_slice(&data),
                SsePiece::Event(mut event) => {
                    if !streamed.is_empty() {
                        assert!(
                            event.data.is_empty(),
                            "a streamed event's data comes in pieces"
                        );
                        event.data = String::from_utf8(std::mem::take(streamed)).unwrap();
                    }
                    out.push(Ok(event));
                }
                SsePiece::TooLong(too_long) => {
                    streamed.clear();
                    out.push(Err(too_long));
                }
            }
        }
        out
    }

    /// Decodes `stream` cut at `cuts`, handing out data past `stream_from` in pieces.
    fn in_pieces(
        stream: &[u8],
        cuts: &[usize],
        stream_from: usize,
        limit: usize,
    ) -> Vec<Result<SseEvent, SseTooLong>> {
        let mut decoder = SseDecoder::new(limit).stream_from(stream_from);
        let (mut events, mut streamed, mut at) = (Vec::new(), Vec::new(), 0);
        for &cut in cuts.iter().chain([&stream.len()]) {
            decoder.push(&stream[at..cut]);
            events.extend(joined(&mut decoder, &mut streamed));
            at = cut;
        }
        events
    }

    #[test]
    fn data_handed_out_in_pieces_is_the_data_held_whole_cut_at_every_byte() {
        let stream = "event: message\ndata: {\"a\":\"0123456789\",\ndata:  \"b\": [1, 2]}\nid: 4\n\n\
                      data: short\n\n\
                      data:\r\ndata\r\ndata: é€😀 over the line\r\nevent: other\r\n\r\n\
                      : comment\rdata: 0123456789abcdef\r\r";
        let stream = stream.as_bytes();
        let mut whole = SseDecoder::new(1000);
        whole.push(stream);
        let expected = events(&mut whole);
        assert_eq!(expected.len(), 4);
        for stream_from in [0, 5, 12] {
            assert_eq!(in_pieces(stream, &[], stream_from, 1000), expected);
            for cut in 0..=stream.len() {
                let got = in_pieces(stream, &[cut], stream_from, 1000);
                assert_eq!(got, expected, "from {stream_from}, cut at {cut}");
            }
            let every: Vec<usize> = (1..stream.len()).collect();
            assert_eq!(in_pieces(stream, &every, stream_from, 1000), expected);
        }
        // Pieces count against the limit as held data does, whatever the cuts.
        for limit in [10, 20, 26, 27, 28, 40] {
            let mut whole = SseDecoder::new(limit);
            whole.push(stream);
            let expected = events(&mut whole);
            for cut in 0..=stream.len() {
                assert_eq!(
                    in_pieces(stream, &[cut], 0, limit),
                    expected,
                    "limit {limit}, cut {cut}"
                );
            }
        }
    }

    #[test]
    fn a_large_event_over_many_chunks_and_lines_comes_in_pieces() {
        // Three megabytes of data on lines of every length, between two small events.
        let mut data = String::new();
        let mut line = 0usize;
        while data.len() < 3 << 20 {
            let width = (line * 7919) % 70_000;
            data.push_str(&format!("{line}:{}\n", "é".repeat(width / 2)));
            line += 1;
        }
        data.pop();
        let mut stream = b"data: first\n\n".to_vec();
        for line in data.split('\n') {
            stream.extend_from_slice(format!("data: {line}\n").as_bytes());
        }
        stream.extend_from_slice(b"id: big\n\ndata: last\n\n");
        let expected = vec![
            event("message", "first", None),
            event("message", &data, Some("big")),
            event("message", "last", Some("big")),
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for round in 0..8 {
            let mut cuts: Vec<usize> = (0..40 + round * 200)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % stream.len() as u64) as usize
                })
                .collect();
            cuts.sort_unstable();
            let got = in_pieces(&stream, &cuts, 1 << 20, 8 << 20);
            assert!(got == expected, "round {round}: cuts {:?}", &cuts[..5]);
        }
        // Pieces are handed out as the bytes come, not held to the end.
        let mut decoder = SseDecoder::new(8 << 20).stream_from(1 << 20);
        let half = stream.len() / 2;
        decoder.push(&stream[..half]);
        let mut streamed = Vec::new();
        assert_eq!(
            joined(&mut decoder, &mut streamed),
            [event("message", "first", None)]
        );
        assert!(
            streamed.len() > half - (1 << 20) - 100,
            "{} of {half}",
            streamed.len()
        );
        assert!(decoder.data.capacity() < 2 << 20 && decoder.line.capacity() < 2 << 20);
    }
}
