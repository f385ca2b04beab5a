//! Server-Sent Events, as the Streamable HTTP transport sends them: bytes in, events out,
//! bounded like the line decoder.
//!
//! The parsing follows the HTML standard's event stream rules: lines end with CRLF, LF or a
//! lone CR; a BOM may start the stream; `:` starts a comment; `event`, `data`, `id` and `retry`
//! are the fields, anything else is ignored; a blank line dispatches the event, and an event
//! with no data is no event. An unterminated event at the end of the stream is dropped.

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
    ready: std::collections::VecDeque<Result<SseEvent, SseTooLong>>,
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
            ready: std::collections::VecDeque::new(),
        }
    }

    /// Feeds a fragment of the stream; then take the events with
    /// [`next_event`](Self::next_event).
    pub fn push(&mut self, mut bytes: &[u8]) {
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

    /// The next dispatched event, or the report of a dropped one.
    pub fn next_event(&mut self) -> Option<Result<SseEvent, SseTooLong>> {
        self.ready.pop_front()
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
        if self.line.len() + bytes.len() > self.limit {
            self.skipping_line = true;
            self.line.clear();
            if !self.dropping {
                self.drop_event();
            }
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn drop_event(&mut self) {
        self.dropping = true;
        self.line.clear();
        self.reset_event();
        self.ready.push_back(Err(SseTooLong { limit: self.limit }));
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.skipping_line) {
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
        let event = match std::mem::take(&mut self.event) {
            event if event.is_empty() => "message".to_owned(),
            event => event,
        };
        self.has_data = false;
        let id = self.last_id.clone();
        self.ready.push_back(Ok(SseEvent { event, data, id }));
    }

    fn reset_event(&mut self) {
        self.event.clear();
        self.data.clear();
        self.has_data = false;
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
}
