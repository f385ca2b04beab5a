//! Parses one JSON text as its bytes arrive, building a `serde_json::Value` without ever
//! holding the text: a 200 MiB result costs its value, not its value and its line.
//!
//! The result is the value `serde_json::from_str` gives for the same text, and a text it
//! refuses is refused here: numbers are handed to serde_json itself, nesting is bounded as it
//! bounds it, a lone surrogate in a `\u` escape is an error as there. Invalid UTF-8 anywhere
//! in the text is reported as such even past a JSON error, as a line is checked whole first.

// Public for the fuzz targets only (the `fuzzing` feature); the crate itself reaches it all.
#![cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub, dead_code))]

use serde_json::{Map, Value};

use crate::wire::line_error::{LineError, preview};

/// serde_json's bound: the 128th open bracket of a nest fails.
const MAX_DEPTH: usize = 127;

/// How much of the text's start is kept for error messages.
const HEAD: usize = 256;

/// The `result` members that hold a listing's entries (`tools/list`, `resources/list`,
/// `resources/templates/list`, `prompts/list`): the arrays [`JsonStream::keeping_listed`]
/// bounds.
pub(crate) const LISTED_MEMBERS: [&str; 4] = ["tools", "resources", "resourceTemplates", "prompts"];

/// A JSON text parsed as it arrives: [`push`](Self::push) its bytes in any fragments, then
/// [`finish`](Self::finish) it. Memory is the value built so far plus the string or number
/// being read, whatever the fragments.
#[derive(Debug, Default)]
pub struct JsonStream {
    expect: Expect,
    /// The open arrays and objects, innermost last.
    stack: Vec<Frame>,
    /// The string being read, as UTF-8 bytes checked once it ends.
    text: Vec<u8>,
    /// The number being read, handed to serde_json once it ends.
    number: Vec<u8>,
    /// The top-level value, once complete.
    root: Option<Value>,
    /// A form feed before any value: blank to the line decoder, not JSON whitespace.
    form_feed: bool,
    /// Bytes pushed so far.
    offset: usize,
    /// The text's first bytes, for error messages.
    head: Vec<u8>,
    failure: Option<Failure>,
    /// At most this many entries of a listing's array are kept ([`keeping_listed`]).
    ///
    /// [`keeping_listed`]: Self::keeping_listed
    keep_listed: Option<usize>,
    /// The depth in `stack` of the listing array being read, if one is open.
    listing_at: Option<usize>,
}

#[derive(Debug, Default, Clone, Copy)]
enum Expect {
    /// A value: at the top, after `:`, or after `,` in an array.
    #[default]
    Value,
    /// A value or `]`, just after `[`.
    FirstElement,
    /// A key or `}`, just after `{`.
    FirstKey,
    /// A key, after `,` in an object.
    Key,
    /// The `:` after a key.
    Colon,
    /// `,` or the innermost container's closing bracket.
    Comma,
    /// Inside a string: an object's key or a value.
    Str {
        key: bool,
    },
    /// Just after a `\` in a string.
    Escape {
        key: bool,
    },
    /// The hex digits of a `\u` escape; `high` is a leading surrogate awaiting its pair.
    Hex {
        key: bool,
        digits: u8,
        code: u32,
        high: Option<u32>,
    },
    /// After a leading surrogate: its pair's `\` (`backslash` false), then its `u`.
    Trail {
        key: bool,
        high: u32,
        backslash: bool,
    },
    Number,
    /// `true`, `false` or `null`, `matched` bytes in.
    Literal {
        word: &'static [u8],
        matched: usize,
    },
    /// The top-level value is complete: only whitespace may follow.
    End,
}

#[derive(Debug)]
enum Frame {
    Array(Vec<Value>),
    /// An object and the key whose value is being read.
    Object(Map<String, Value>, String),
}

/// The text is not JSON: why, where, and whether what followed is still valid UTF-8.
#[derive(Debug)]
struct Failure {
    /// `None` once invalid UTF-8 was seen.
    message: Option<String>,
    utf8: Utf8Check,
}

impl JsonStream {
    /// A parser at the start of a text.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that keeps at most `keep` entries of a listing: of an array that is a
    /// member named in [`LISTED_MEMBERS`] of the `result` of a JSON-RPC message (or of a
    /// message in a batch). Entries past them are parsed (the text must still be JSON) and
    /// dropped one by one, so a listing of a million entries costs `keep` of them. A caller
    /// that must tell a listing cut here from one that fits passes one more than it keeps.
    pub(crate) fn keeping_listed(keep: usize) -> Self {
        Self {
            keep_listed: Some(keep),
            ..Self::default()
        }
    }

    /// Parses the next fragment of the text.
    pub fn push(&mut self, bytes: &[u8]) {
        let room = HEAD.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if let Some(failure) = &mut self.failure {
            failure.utf8.push(bytes);
        } else {
            let mut at = 0;
            while at < bytes.len() {
                match self.step(bytes, at) {
                    Ok(_) if self.failure.is_some() => break,
                    Ok(next) => at = next,
                    Err(message) => {
                        let offset = self.offset + at;
                        self.fail(message, offset, &bytes[at..]);
                        break;
                    }
                }
            }
        }
        self.offset += bytes.len();
    }

    /// Ends the text: its value, `None` if it held nothing but whitespace, or why it is not
    /// one JSON value.
    pub fn finish(mut self) -> Option<Result<Value, LineError>> {
        if self.failure.is_none()
            && matches!(self.expect, Expect::Number)
            && let Err(message) = self.end_number()
        {
            self.fail(message, self.offset, &[]);
        }
        if self.failure.is_none() {
            match (self.expect, self.root.take()) {
                (Expect::End, Some(value)) => return Some(Ok(value)),
                (Expect::Value, None) if self.stack.is_empty() => return None,
                _ => self.fail("EOF while parsing a value".to_owned(), self.offset, &[]),
            }
        }
        let failure = self.failure.take()?;
        Some(Err(self.error(failure)))
    }

    /// Reads from `bytes[at]` on; returns where to go on.
    fn step(&mut self, bytes: &[u8], at: usize) -> Result<usize, String> {
        let byte = bytes[at];
        match self.expect {
            Expect::Str { key } => return self.string(bytes, at, key),
            Expect::Number if is_number_byte(byte) => self.number.push(byte),
            Expect::Number => {
                self.end_number()?;
                // The byte that ended the number is read in the state after it.
                return Ok(at);
            }
            Expect::Escape { key } => self.escape(byte, key)?,
            Expect::Hex {
                key,
                digits,
                code,
                high,
            } => {
                let digit = char::from(byte).to_digit(16).ok_or("invalid escape")?;
                let code = code * 16 + digit;
                if digits < 3 {
                    self.expect = Expect::Hex {
                        key,
                        digits: digits + 1,
                        code,
                        high,
                    };
                } else {
                    self.unicode(key, code, high)?;
                }
            }
            Expect::Trail {
                key,
                high,
                backslash,
            } => {
                self.expect = match (backslash, byte) {
                    (false, b'\\') => Expect::Trail {
                        key,
                        high,
                        backslash: true,
                    },
                    (true, b'u') => Expect::Hex {
                        key,
                        digits: 0,
                        code: 0,
                        high: Some(high),
                    },
                    _ => return Err("unexpected end of hex escape".into()),
                };
            }
            Expect::Literal { word, matched } => {
                if word[matched] != byte {
                    return Err("expected ident".into());
                }
                if matched + 1 < word.len() {
                    self.expect = Expect::Literal {
                        word,
                        matched: matched + 1,
                    };
                } else {
                    self.complete(match word[0] {
                        b't' => Value::Bool(true),
                        b'f' => Value::Bool(false),
                        _ => Value::Null,
                    });
                }
            }
            _ if matches!(byte, b' ' | b'\n' | b'\t' | b'\r') => {}
            Expect::Value | Expect::FirstElement => self.value(byte)?,
            Expect::FirstKey | Expect::Key => match byte {
                b'"' => self.expect = Expect::Str { key: true },
                b'}' if matches!(self.expect, Expect::FirstKey) => self.close()?,
                b'}' => return Err("trailing comma".into()),
                _ => return Err("key must be a string".into()),
            },
            Expect::Colon if byte == b':' => self.expect = Expect::Value,
            Expect::Colon => return Err("expected `:`".into()),
            Expect::Comma => match (self.stack.last(), byte) {
                (Some(Frame::Array(_)), b',') => self.expect = Expect::Value,
                (Some(Frame::Object(..)), b',') => self.expect = Expect::Key,
                (Some(Frame::Array(_)), b']') | (Some(Frame::Object(..)), b'}') => self.close()?,
                (Some(Frame::Array(_)), _) => return Err("expected `,` or `]`".into()),
                _ => return Err("expected `,` or `}`".into()),
            },
            Expect::End => return Err("trailing characters".into()),
        }
        Ok(at + 1)
    }

    /// The first byte of a value.
    fn value(&mut self, byte: u8) -> Result<(), String> {
        let top = self.stack.is_empty();
        if byte == b'\x0C' && top {
            // Not JSON whitespace, but a line of nothing else is blank.
            self.form_feed = true;
            return Ok(());
        }
        if self.form_feed {
            return Err("expected value".into());
        }
        match byte {
            b'"' => self.expect = Expect::Str { key: false },
            b'{' => self.open(Frame::Object(Map::new(), String::new()))?,
            b'[' => self.open(Frame::Array(Vec::new()))?,
            b't' | b'f' | b'n' => {
                let word: &'static [u8] = match byte {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                self.expect = Expect::Literal { word, matched: 1 };
            }
            b'-' | b'0'..=b'9' => {
                self.number.clear();
                self.number.push(byte);
                self.expect = Expect::Number;
            }
            b']' if matches!(self.expect, Expect::FirstElement) => self.close()?,
            b']' if matches!(self.stack.last(), Some(Frame::Array(_))) => {
                return Err("trailing comma".into());
            }
            _ => return Err("expected value".into()),
        }
        Ok(())
    }

    fn open(&mut self, frame: Frame) -> Result<(), String> {
        if self.stack.len() >= MAX_DEPTH {
            return Err("recursion limit exceeded".into());
        }
        if matches!(frame, Frame::Array(_)) && self.keep_listed.is_some() && self.at_listing() {
            self.listing_at = Some(self.stack.len());
        }
        self.expect = match frame {
            Frame::Array(_) => Expect::FirstElement,
            Frame::Object(..) => Expect::FirstKey,
        };
        self.stack.push(frame);
        Ok(())
    }

    /// Whether an array opened now is a listing's: the value of a listed member of a
    /// message's `result`, the message at the top or in a batch.
    fn at_listing(&self) -> bool {
        let message_at = match self.stack.as_slice() {
            [_, _] => 0,
            [Frame::Array(_), _, _] => 1,
            _ => return false,
        };
        let key_is = |at: usize, names: &[&str]| match &self.stack[at] {
            Frame::Object(_, key) => names.contains(&key.as_str()),
            Frame::Array(_) => false,
        };
        key_is(message_at, &["result"]) && key_is(message_at + 1, &LISTED_MEMBERS)
    }

    fn close(&mut self) -> Result<(), String> {
        if self.listing_at.is_some_and(|at| at + 1 == self.stack.len()) {
            self.listing_at = None;
        }
        match self.stack.pop() {
            Some(Frame::Array(items)) => self.complete(Value::Array(items)),
            Some(Frame::Object(members, _)) => self.complete(Value::Object(members)),
            None => return Err("unbalanced brackets".into()),
        }
        Ok(())
    }

    /// A value is complete: it joins its container, or is the text's value.
    fn complete(&mut self, value: Value) {
        self.expect = Expect::Comma;
        let in_listing = self.listing_at.is_some_and(|at| at + 1 == self.stack.len());
        let keep = self.keep_listed.filter(|_| in_listing);
        match self.stack.last_mut() {
            None => {
                self.root = Some(value);
                self.expect = Expect::End;
            }
            Some(Frame::Array(items)) => {
                // An entry past those kept is dropped once read.
                if keep.is_none_or(|keep| items.len() < keep) {
                    items.push(value);
                }
            }
            Some(Frame::Object(members, key)) => {
                members.insert(std::mem::take(key), value);
            }
        }
    }

    /// Reads string content from `bytes[at]` on: a run of plain bytes at once, then the byte
    /// that ended it.
    fn string(&mut self, bytes: &[u8], at: usize, key: bool) -> Result<usize, String> {
        let rest = &bytes[at..];
        let Some(run) = string_end(rest) else {
            self.text.extend_from_slice(rest);
            return Ok(bytes.len());
        };
        self.text.extend_from_slice(&rest[..run]);
        match rest[run] {
            b'"' => self.end_string(key)?,
            b'\\' => self.expect = Expect::Escape { key },
            _ => {
                let message = "control character (\\u0000-\\u001F) found while parsing a string";
                self.fail(message.to_owned(), self.offset + at + run, &rest[run..]);
            }
        }
        Ok(at + run + 1)
    }

    fn end_string(&mut self, key: bool) -> Result<(), String> {
        let Ok(text) = String::from_utf8(std::mem::take(&mut self.text)) else {
            self.failure = Some(Failure {
                message: None,
                utf8: Utf8Check::default(),
            });
            return Ok(());
        };
        if !key {
            self.complete(Value::String(text));
        } else if let Some(Frame::Object(_, slot)) = self.stack.last_mut() {
            *slot = text;
            self.expect = Expect::Colon;
        }
        Ok(())
    }

    fn escape(&mut self, byte: u8, key: bool) -> Result<(), String> {
        let plain = match byte {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => b'\x08',
            b'f' => b'\x0C',
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                self.expect = Expect::Hex {
                    key,
                    digits: 0,
                    code: 0,
                    high: None,
                };
                return Ok(());
            }
            _ => return Err("invalid escape".into()),
        };
        self.text.push(plain);
        self.expect = Expect::Str { key };
        Ok(())
    }

    /// A `\u` escape's four digits are in: a character, or half of a surrogate pair.
    fn unicode(&mut self, key: bool, code: u32, high: Option<u32>) -> Result<(), String> {
        let code = match (high, code) {
            (None, 0xD800..=0xDBFF) => {
                self.expect = Expect::Trail {
                    key,
                    high: code,
                    backslash: false,
                };
                return Ok(());
            }
            (Some(high), 0xDC00..=0xDFFF) => 0x1_0000 + ((high - 0xD800) << 10) + (code - 0xDC00),
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => {
                return Err("lone leading surrogate in hex escape".into());
            }
            (None, code) => code,
        };
        let char = char::from_u32(code).ok_or("invalid unicode code point")?;
        let mut utf8 = [0; 4];
        self.text
            .extend_from_slice(char.encode_utf8(&mut utf8).as_bytes());
        self.expect = Expect::Str { key };
        Ok(())
    }

    /// The number's bytes are all in: serde_json reads it, so it reads as there.
    fn end_number(&mut self) -> Result<(), String> {
        match serde_json::from_slice::<Value>(&self.number) {
            Ok(number @ Value::Number(_)) => {
                self.complete(number);
                Ok(())
            }
            Ok(_) => Err("invalid number".into()),
            Err(error) => {
                let message = error.to_string();
                // Its position is in the number, not in the text.
                Err(match message.split_once(" at line ") {
                    Some((message, _)) => message.to_owned(),
                    None => message,
                })
            }
        }
    }

    /// Stops parsing; what is left of the text is only checked to be UTF-8.
    fn fail(&mut self, message: String, offset: usize, rest: &[u8]) {
        // The string being read ends at an ASCII byte in the text (the `\` of an escape, or
        // the control character), so it must be whole UTF-8 on its own.
        let in_string = matches!(
            self.expect,
            Expect::Str { .. } | Expect::Escape { .. } | Expect::Hex { .. } | Expect::Trail { .. }
        );
        let mut utf8 = Utf8Check::default();
        if in_string && std::str::from_utf8(&self.text).is_err() {
            utf8.valid = false;
        }
        utf8.push(rest);
        self.text = Vec::new();
        self.stack = Vec::new();
        self.listing_at = None;
        self.root = None;
        self.failure = Some(Failure {
            message: Some(format!("{message} at byte {offset}")),
            utf8,
        });
    }

    fn error(&self, failure: Failure) -> LineError {
        match failure.message {
            Some(message) if failure.utf8.is_valid() => {
                let head = String::from_utf8_lossy(&self.head);
                LineError::NotJson {
                    detail: format!("{message} in {:?}", preview(&head)),
                }
            }
            _ => LineError::NotUtf8,
        }
    }
}

/// Where the first byte that ends a run of plain string content is: a quote, a backslash or
/// a control character. Eight bytes are looked at at once, as serde_json does, so a long
/// string is scanned at the speed of a whole-line parse.
fn string_end(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // Whether any byte of `word` is below `n` (for `n` up to 128): exact as a whole.
    let any_below = |word: u64, n: u8| word.wrapping_sub(ONES * u64::from(n)) & !word & HIGH != 0;
    let is_end = |b: &u8| matches!(b, b'"' | b'\\' | 0..0x20);
    let mut words = bytes.chunks_exact(8);
    for (index, chunk) in words.by_ref().enumerate() {
        let word = u64::from_ne_bytes(chunk.try_into().unwrap_or_default());
        if any_below(word ^ (ONES * u64::from(b'"')), 1)
            || any_below(word ^ (ONES * u64::from(b'\\')), 1)
            || any_below(word, 0x20)
        {
            return chunk.iter().position(is_end).map(|at| index * 8 + at);
        }
    }
    let tail = words.remainder();
    let start = bytes.len() - tail.len();
    tail.iter().position(is_end).map(|at| start + at)
}

fn is_number_byte(byte: u8) -> bool {
    matches!(byte, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
}

/// Checks bytes arriving in fragments to be UTF-8, a character split between two fragments
/// included.
#[derive(Debug)]
struct Utf8Check {
    valid: bool,
    /// The start of a character whose other bytes have not come yet.
    partial: Vec<u8>,
}

impl Default for Utf8Check {
    fn default() -> Self {
        Self {
            valid: true,
            partial: Vec::new(),
        }
    }
}

impl Utf8Check {
    fn push(&mut self, mut bytes: &[u8]) {
        if !self.valid {
            return;
        }
        if let Some(&lead) = self.partial.first() {
            let width = match lead {
                0xF0.. => 4,
                0xE0.. => 3,
                _ => 2,
            };
            let take = (width - self.partial.len()).min(bytes.len());
            self.partial.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            match std::str::from_utf8(&self.partial) {
                Ok(_) => self.partial.clear(),
                Err(error) if error.error_len().is_none() => return,
                Err(_) => {
                    self.valid = false;
                    return;
                }
            }
        }
        if let Err(error) = std::str::from_utf8(bytes) {
            match error.error_len() {
                Some(_) => self.valid = false,
                None => self.partial = bytes[error.valid_up_to()..].to_vec(),
            }
        }
    }

    fn is_valid(&self) -> bool {
        self.valid && self.partial.is_empty()
    }
}

#[cfg(test)]
mod tests;
