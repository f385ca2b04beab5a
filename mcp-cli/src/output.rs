//! Rendering results for people: text as it is, placeholders for everything else.

use std::borrow::Cow;
use std::io::{self, IsTerminal, Write};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use mcp_proto::{CallToolResult, Content};
use serde_json::Value;

/// Lines that show a tool result: each text item on its own; other items as placeholders; the
/// structured content as JSON when there is no text at all. Each is printed with a newline
/// after it, so a text that already ends in one comes back without it: text prints as it is.
pub fn render_call(result: &CallToolResult) -> Vec<String> {
    call_pieces(result).map(Piece::into_string).collect()
}

/// One line of a tool result as [`render_call`] shows it, borrowed from the result where it
/// can be: a large result is measured, printed and written out without a second copy.
#[derive(Debug)]
pub enum Piece<'a> {
    /// Text, without its final newline.
    Text(Cow<'a, str>),
    /// Structured content, printed pretty.
    Json(&'a Value),
}

impl Piece<'_> {
    /// The line as text, borrowed where it can be.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Piece::Text(text) => Cow::Borrowed(text),
            Piece::Json(value) => Cow::Owned(pretty(value)),
        }
    }

    /// The line as owned text.
    pub fn into_string(self) -> String {
        match self {
            Piece::Text(text) => text.into_owned(),
            Piece::Json(value) => pretty(value),
        }
    }

    /// Writes the line and its newline to `out`, as it is made.
    pub fn write_line(&self, out: &mut dyn Write) -> io::Result<()> {
        match self {
            Piece::Text(text) => out.write_all(text.as_bytes())?,
            Piece::Json(value) => serde_json::to_writer_pretty(&mut *out, value)?,
        }
        out.write_all(b"\n")
    }
}

/// The lines of [`render_call`], as [`Piece`]s.
pub fn call_pieces(result: &CallToolResult) -> impl Iterator<Item = Piece<'_>> {
    let items = result.content.iter().map(|item| match item {
        Content::Text { text }
        | Content::Resource {
            text: Some(text), ..
        } => Piece::Text(Cow::Borrowed(text.strip_suffix('\n').unwrap_or(text))),
        other => Piece::Text(Cow::Owned(render_content(other))),
    });
    let has_text = (result.content.iter()).any(|item| matches!(item, Content::Text { .. }));
    let structured = result.structured_content.as_ref().filter(|_| !has_text);
    items.chain(structured.map(Piece::Json))
}

/// One content item as a line: its text, or a placeholder.
pub fn render_content(item: &Content) -> String {
    match item {
        Content::Text { text } => as_line(text),
        Content::Image { data, mime_type } => omitted("image", mime_type, base64_len(data)),
        Content::Audio { data, mime_type } => omitted("audio", mime_type, base64_len(data)),
        Content::ResourceLink { uri, name, .. } if name.is_empty() => {
            format!("[resource link: {uri}]")
        }
        Content::ResourceLink { uri, name, .. } => format!("[resource link: {name} <{uri}>]"),
        Content::Resource {
            text: Some(text), ..
        } => as_line(text),
        Content::Resource {
            uri,
            mime_type,
            blob,
            ..
        } => {
            let mime = mime_type.as_deref().unwrap_or("unknown type");
            let size = blob.as_deref().map_or(0, base64_len);
            format!("[resource {uri} omitted: {mime}, {size} bytes]")
        }
        Content::Unknown(value) => match value.get("type").and_then(Value::as_str) {
            Some(kind) => format!("[{kind} content omitted: unknown type]"),
            None => "[content omitted: no type]".to_owned(),
        },
    }
}

/// `text` without its final newline, which printing it as a line adds back.
fn as_line(text: &str) -> String {
    text.strip_suffix('\n').unwrap_or(text).to_owned()
}

fn omitted(kind: &str, mime_type: &str, size: usize) -> String {
    format!("[{kind} content omitted: {mime_type}, {size} bytes]")
}

/// The decoded size of base64 text, without decoding it.
fn base64_len(data: &str) -> usize {
    let significant = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=');
    significant.count() * 3 / 4
}

/// `value` as indented JSON, the way commands print JSON to a person.
pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Set once a run is under `--json`, whose every line on stderr is one JSON object.
static JSON_STDERR: AtomicBool = AtomicBool::new(false);

/// From now on, [`diagnostic`] writes each line that is not already a JSON object as a
/// warning object, `{"warning": {"message"}}` (without the `mcp-cli: ` prefix): a notice
/// printed deep in the host layer, which knows nothing of `--json`, then reads as the rest.
pub(crate) fn json_diagnostics() {
    JSON_STDERR.store(true, Ordering::Relaxed);
}

/// Writes one line of diagnostics to stderr. A closed stderr is ignored rather than a panic:
/// nobody is left to tell, and the exit code still says what happened.
pub fn diagnostic(text: &str) {
    static TERMINAL: OnceLock<bool> = OnceLock::new();
    let terminal = *TERMINAL.get_or_init(|| io::stderr().is_terminal());
    let text = if JSON_STDERR.load(Ordering::Relaxed) && !text.starts_with('{') {
        let message = text.strip_prefix("mcp-cli: ").unwrap_or(text);
        let message = message.strip_prefix("warning: ").unwrap_or(message);
        Cow::Owned(serde_json::json!({ "warning": { "message": message } }).to_string())
    } else if terminal {
        escape_controls(text)
    } else {
        Cow::Borrowed(text)
    };
    // One write per line, so lines from threads do not interleave mid-line.
    let _ = io::stderr().write_all(format!("{text}\n").as_bytes());
}

/// Text from a server as a terminal may show it: control characters other than newline and
/// tab (escape sequences that could set the window title, clear the screen or hide text)
/// are written out as `\x1b`, `\u{9b}`, ... Output to a pipe or a file is left exact.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !unsafe_char(c) => escaped.push(c),
            c if (c as u32) < 0x80 => escaped.push_str(&format!("\\x{:02x}", c as u32)),
            c => escaped.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(escaped)
}

/// What a command prints: standard output that treats a closed pipe (`mcp-cli ... | head -1`)
/// as the reader being done, not as a failure (later writes are dropped silently), and its
/// diagnostics on stderr.
///
/// On a terminal, control characters are escaped (see [`escape_controls`]). A capturing one
/// (in the daemon) keeps both, in order, for the command line that asked to replay.
#[derive(Debug)]
pub struct Stdout {
    closed: bool,
    terminal: bool,
    captured: Option<Vec<Line>>,
}

/// One line a command printed, as the daemon sends it back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Line {
    /// A diagnostic rather than output.
    pub stderr: bool,
    /// The line, without its newline.
    pub text: String,
}

impl Default for Stdout {
    fn default() -> Self {
        Self {
            closed: false,
            terminal: io::stdout().is_terminal(),
            captured: None,
        }
    }
}

impl Stdout {
    /// Keeps what is printed instead; see [`take_captured`](Self::take_captured).
    pub fn capturing() -> Self {
        Self {
            closed: false,
            terminal: false,
            captured: Some(Vec::new()),
        }
    }

    /// What was printed since the last take, in order; empty unless capturing.
    pub fn take_captured(&mut self) -> Vec<Line> {
        self.captured
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Prints captured lines as the command would have printed them here.
    pub fn replay(&mut self, lines: &[Line]) {
        for line in lines {
            if line.stderr {
                self.diagnostic(&line.text);
            } else {
                self.line(&line.text);
            }
        }
    }

    /// Whether what is printed reaches a terminal (for a capturing one in the daemon, the
    /// terminal of the command line it prints for).
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// A capturing one ([`capturing`](Self::capturing)) for a command line whose output is
    /// a terminal or not: what it prints is kept as it is either way.
    pub fn capturing_for(terminal: bool) -> Self {
        Self {
            terminal,
            ..Self::capturing()
        }
    }

    /// One line of diagnostics; see [`diagnostic`].
    pub fn diagnostic(&mut self, text: &str) {
        match &mut self.captured {
            Some(captured) => captured.push(Line {
                stderr: true,
                text: text.to_owned(),
            }),
            None => diagnostic(text),
        }
    }

    /// One line of output on stdout (or kept, when capturing); dropped once the reader has
    /// closed the pipe.
    pub fn line(&mut self, text: &str) {
        if let Some(captured) = &mut self.captured {
            captured.push(Line {
                stderr: false,
                text: text.to_owned(),
            });
            return;
        }
        if self.closed {
            return;
        }
        let text = if self.terminal {
            escape_controls(text)
        } else {
            Cow::Borrowed(text)
        };
        let mut out = io::stdout().lock();
        let written = out
            .write_all(text.as_bytes())
            .and_then(|()| out.write_all(b"\n"));
        if written.and_then(|()| out.flush()).is_err() {
            self.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_every_kind() {
        let result = CallToolResult::from_value(json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///x", "name": "x"},
                {"type": "resource", "resource": {"uri": "file:///y", "text": "inline"}},
                {"type": "resource", "resource": {"uri": "file:///z", "blob": "AAAA", "mimeType": "application/zip"}},
                {"type": "hologram"}
            ],
            "structuredContent": {"ignored": "because there is text"}
        }))
        .unwrap();
        assert_eq!(
            render_call(&result),
            [
                "hello",
                "[image content omitted: image/png, 8 bytes]",
                "[audio content omitted: audio/wav, 3 bytes]",
                "[resource link: x <file:///x>]",
                "inline",
                "[resource file:///z omitted: application/zip, 3 bytes]",
                "[hologram content omitted: unknown type]",
            ]
        );
    }

    #[test]
    fn text_keeps_its_own_final_newline_and_gets_no_second_one() {
        let result = CallToolResult::from_value(json!({"content": [
            {"type": "text", "text": "ends in one\n"},
            {"type": "text", "text": "none"},
            {"type": "text", "text": "two\n\n"},
            {"type": "resource", "resource": {"uri": "file:///y", "text": "inline\n"}},
        ]}))
        .unwrap();
        let printed: String = (render_call(&result).iter())
            .map(|line| format!("{line}\n"))
            .collect();
        assert_eq!(printed, "ends in one\nnone\ntwo\n\ninline\n");
    }

    #[test]
    fn control_characters_are_escaped_for_terminals_only() {
        assert_eq!(escape_controls("plain\ttext\nline"), "plain\ttext\nline");
        assert_eq!(
            escape_controls("\x1b]0;pwned\x07\x1b[2Jhi\u{9b}31m\r"),
            "\\x1b]0;pwned\\x07\\x1b[2Jhi\\u{9b}31m\\x0d"
        );
    }

    #[test]
    fn structured_content_shows_when_there_is_no_text() {
        let result = CallToolResult::from_value(json!({
            "content": [], "structuredContent": {"answer": 42}
        }))
        .unwrap();
        assert_eq!(render_call(&result), ["{\n  \"answer\": 42\n}"]);
    }
}
