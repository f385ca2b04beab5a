//! Splits the server's stdout into lines: newline-delimited, bounded, scanned once.

use bytes::{Bytes, BytesMut};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why a line could not be used. Only [`LineDecoder`] produces `TooLong`; the rest come from
/// decoding a complete line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// A line grew past the configured maximum; it is discarded up to its newline.
    TooLong {
        /// [`Config::max_line_len`](crate::Config::max_line_len).
        limit: usize,
    },
    /// The line is not valid UTF-8.
    NotUtf8,
    /// The line is UTF-8 but not JSON (a banner, a log line, a truncated message).
    NotJson {
        /// The parser's complaint and the start of the line.
        detail: String,
    },
    /// The line is JSON but not a JSON-RPC 2.0 message.
    NotJsonRpc {
        /// What is missing or wrong.
        detail: String,
    },
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLong { limit } => write!(f, "line longer than {limit} bytes, discarded"),
            Self::NotUtf8 => f.write_str("line is not valid UTF-8"),
            Self::NotJson { detail } => write!(f, "line is not JSON: {detail}"),
            Self::NotJsonRpc { detail } => write!(f, "line is not a JSON-RPC message: {detail}"),
        }
    }
}

impl std::error::Error for LineError {}

/// Buffers stdout fragments and yields complete lines.
///
/// Every byte is looked at once: `scanned` remembers how far the search for `\n` got, so a long
/// line arriving in small chunks costs linear time. The buffer holds at most `max_line_len` bytes
/// (and one for a `\r`) plus the latest chunk; past that the line is dropped and the rest of it is skipped as it
/// arrives.
#[derive(Debug)]
pub struct LineDecoder {
    buffer: BytesMut,
    scanned: usize,
    max_line_len: usize,
    /// Bytes up to the next `\n` belong to a line already reported as too long.
    discarding: bool,
    /// No line has been yielded or skipped yet, so a BOM may still lead the stream.
    at_stream_start: bool,
}

impl LineDecoder {
    /// A decoder that refuses lines longer than `max_line_len` bytes.
    pub fn new(max_line_len: usize) -> Self {
        Self {
            buffer: BytesMut::new(),
            scanned: 0,
            max_line_len,
            discarding: false,
            at_stream_start: true,
        }
    }

    /// Appends a fragment of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.discarding {
            match memchr::memchr(b'\n', bytes) {
                None => return,
                Some(newline) => {
                    self.discarding = false;
                    bytes = &bytes[newline + 1..];
                }
            }
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete, non-blank line without its terminator, or the error of an
    /// overlong one. `None` means more bytes are needed.
    pub fn next_line(&mut self) -> Option<Result<Bytes, LineError>> {
        loop {
            let Some(offset) = memchr::memchr(b'\n', &self.buffer[self.scanned..]) else {
                return self.check_overflow();
            };
            let mut line = self.buffer.split_to(self.scanned + offset + 1).freeze();
            self.scanned = 0;
            line.truncate(line.len() - 1);
            // The limit is on the content: a `\r` before the newline does not count.
            if line.len() - usize::from(line.ends_with(b"\r")) > self.max_line_len {
                self.at_stream_start = false;
                return Some(Err(self.too_long()));
            }
            if let Some(line) = self.finish_line(line) {
                return Some(Ok(line));
            }
        }
    }

    /// Takes whatever unterminated bytes remain once the stream has ended.
    pub fn finish(&mut self) -> Option<Bytes> {
        let rest = self.buffer.split().freeze();
        self.scanned = 0;
        if self.discarding {
            self.discarding = false;
            return None;
        }
        self.finish_line(rest)
    }

    /// Bytes held for the current partial line.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    fn check_overflow(&mut self) -> Option<Result<Bytes, LineError>> {
        self.scanned = self.buffer.len();
        // One byte over the limit may still be the `\r` of a line just within it.
        if self.buffer.len() <= self.max_line_len + 1 {
            return None;
        }
        self.buffer.clear();
        self.scanned = 0;
        self.discarding = true;
        self.at_stream_start = false;
        Some(Err(self.too_long()))
    }

    fn too_long(&self) -> LineError {
        LineError::TooLong {
            limit: self.max_line_len,
        }
    }

    /// Strips a leading BOM (first line only) and a trailing `\r`; drops blank lines.
    fn finish_line(&mut self, mut line: Bytes) -> Option<Bytes> {
        if std::mem::take(&mut self.at_stream_start) && line.starts_with(BOM) {
            line = line.slice(BOM.len()..);
        }
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            [Ok(b"abcd".to_vec()), Err(LineError::TooLong { limit: 4 })]
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
        assert_eq!(lines(&mut decoder), [Err(LineError::TooLong { limit: 8 })]);
        assert_eq!(decoder.buffered(), 0);
        decoder.push(b"still the same line");
        assert_eq!(decoder.buffered(), 0);
        decoder.push(b" end\nnext\n");
        assert_eq!(lines(&mut decoder), [Ok(b"next".to_vec())]);
    }

    #[test]
    fn overlong_complete_line_is_reported() {
        let mut decoder = LineDecoder::new(4);
        decoder.push(b"12345\n1234\n");
        assert_eq!(
            lines(&mut decoder),
            [Err(LineError::TooLong { limit: 4 }), Ok(b"1234".to_vec())]
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
}
