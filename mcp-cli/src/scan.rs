//! A local scan of what a model reads of a server's offer, for what "tool poisoning" uses:
//! invisible or bidirectional Unicode, instructions aimed at the model, paths to secrets, claims
//! on other servers' tools (shadowing) and text hidden after long padding. Plain string checks,
//! nothing sent anywhere.
//!
//! What is read: of a tool, its name, title and description and every string value and every
//! key anywhere in its input and output schemas and its annotations (descriptions at any depth,
//! `enum`, `const`, `default`, `examples`, property names); of a prompt, its name, title and
//! description and those of its arguments; of a resource or resource template, its name, title
//! and description. The reading is bounded ([`MAX_DEPTH`], [`MAX_TEXT`], [`MAX_NODES`]): a
//! definition past a bound is a finding of its own ([`Kind::Unread`]), since what was not read
//! cannot be vouched for. The phrase rules match lowercase text folded with NFKC (so full-width
//! or ligature look-alikes match too), invisible characters dropped, whitespace runs collapsed
//! and `\` read as `/`. Each rule is a short list below; they are kept narrow, so that what the
//! common real servers offer passes clean (`mcp-cli/tests/listings/` holds their listings).

use std::ops::Range;
use std::sync::LazyLock;

use mcp_smol::proto::skills::Skill;
use mcp_smol::proto::{Prompt, Resource, ResourceTemplate, Tool};
use serde::Serialize;
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

/// What kind of poisoning a finding points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Kind {
    /// Characters a person does not see (tags, zero-width, bidirectional controls).
    Invisible,
    /// An instruction aimed at the model rather than a description of the tool, or a path
    /// to where secrets are kept.
    Instruction,
    /// A claim on another server's tools.
    Shadowing,
    /// Text hidden after a long run of padding.
    Padding,
    /// A definition nested too deep or too large to be read whole.
    Unread,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Invisible => "invisible characters",
            Kind::Instruction => "instruction to the model",
            Kind::Shadowing => "shadowing",
            Kind::Padding => "hidden padding",
            Kind::Unread => "too large to scan",
        })
    }
}

/// One thing the scan flagged in a definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind of poisoning.
    pub kind: Kind,
    /// Where: `name`, `title`, `description`, a path into a schema or the annotations
    /// (`inputSchema.properties.path.enum[2]`; a key is the path to it followed by `(key)`,
    /// `inputSchema.properties.note (key)`), or a prompt's argument
    /// (`arguments[0].description`).
    pub field: String,
    /// Why it was flagged.
    pub reason: String,
    /// The offending text, short, with invisible and control characters escaped (`\u{E0041}`).
    pub span: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Finding {
            kind,
            field,
            reason,
            span,
        } = self;
        write!(f, "{kind} in {field}: {reason}: \"{span}\"")
    }
}

/// Phrases that address the model instead of describing the tool: overriding its
/// instructions, keeping things from the user, ordering other calls, tags that mark text as
/// urgent for it, and the secrets a poisoned tool asks to be read and passed along (with the
/// paths in [`SECRET_PATHS`]).
const INSTRUCTIONS: &[&str] = &[
    // Overriding what the model was told.
    "ignore previous instructions",
    "ignore all previous",
    "ignore the previous instructions",
    "ignore any previous",
    "ignore prior instructions",
    "ignore all prior",
    "ignore your instructions",
    "disregard previous",
    "disregard all previous",
    "disregard your instructions",
    "disregard the above",
    "forget your instructions",
    "forget all previous",
    "new instructions:",
    "system prompt",
    // Keeping things from the user.
    "do not tell the user",
    "don't tell the user",
    "do not inform the user",
    "do not notify the user",
    "do not mention",
    "don't mention",
    "do not reveal",
    "don't reveal",
    "without telling the user",
    "without informing the user",
    "without the user knowing",
    "hide this from the user",
    "the user must not know",
    "the user should not know",
    "not visible to the user",
    // Ordering other calls.
    "before using any other tool",
    "before calling any other tool",
    "before any other tool",
    "before using this tool, read",
    "before using this tool, call",
    "always call this tool first",
    "call this tool first",
    "otherwise the tool will not work",
    // Tags that mark text as meant for the model.
    "<important",
    "</important",
    "<system",
    "<instruction",
    "<secret",
    "<hidden",
    "<critical",
    "[system]",
    // Secrets to read and pass along.
    "mcp.json",
    "claude_desktop_config",
    "/etc/shadow",
    "/etc/passwd",
    "private key",
    "pass its content",
    "pass the content",
    "pass the contents",
];

/// Where secrets are kept, each matched as a whole part of a path: no letter, digit, `_`, `-`
/// or `.` just before it (one that opens with `/` needs that `/`), none of the first three just
/// after. So the home may be spelled any way (`~/.ssh`, `/root/.ssh`, `/home/ann/.ssh`,
/// `$HOME/.ssh`, `${HOME}/.ssh`, `%USERPROFILE%\.ssh`, `C:\Users\ann\.ssh`, as `\` reads as
/// `/`), while `process.env`, `.envrc` or `.aws-sam` are not secrets.
const SECRET_PATHS: &[&str] = &[
    // Keys and credentials.
    ".ssh",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "id_dsa",
    ".aws",
    ".gnupg",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pgpass",
    ".env",
    ".npmrc",
    ".pypirc",
    ".docker/config.json",
    ".kube/config",
    ".config/gh",
    ".config/gcloud",
    ".azure",
    ".password-store",
    "/.cursor",
    // Browser profiles: the folders, and the files that hold passwords, keys and cookies.
    "/.config/google-chrome",
    "/.config/chromium",
    "/.config/bravesoftware",
    "/google/chrome/user data",
    "/application support/google/chrome",
    "/microsoft/edge/user data",
    "/.mozilla/firefox",
    "/mozilla/firefox/profiles",
    "/application support/firefox",
    "/login data",
    "logins.json",
    "key4.db",
    "key3.db",
    "cookies.sqlite",
];

/// Phrases that put this tool in another's place; followed within [`NEAR`] characters by
/// another configured server's name, or by a qualified `server__tool` name, they are
/// shadowing.
const INSTEAD: &[&str] = &["instead of", "rather than", "in place of"];

/// Phrases that are shadowing on their own.
const SHADOWING: &[&str] = &[
    "other mcp server",
    "tools of other servers",
    "other servers' tools",
    "never use any other tool",
    "do not use any other tool",
    "don't use any other tool",
    "instead of any other tool",
];

/// How far after an [`INSTEAD`] phrase a server or tool name still belongs to it.
const NEAR: usize = 60;

/// Padding: this many line breaks in one whitespace run, this many spaces or tabs, or this
/// many of one character in a row, with text after it.
const PADDING_LINES: usize = 8;
const PADDING_SPACES: usize = 40;
const PADDING_REPEAT: usize = 64;

/// Padding mixed of several kinds (whitespace, punctuation, symbols, each run too short alone
/// for the rules above): this many blocks in a row of [`BLOCK`] characters each with fewer
/// letters than [`FEW_LETTERS`] of them, with text after it.
const PADDING_BLOCKS: usize = 8;
const BLOCK: usize = 100;
const FEW_LETTERS: usize = 10;

/// How many characters of context a span shows each side of what it points at.
const CONTEXT: usize = 24;

/// How deep a schema or the annotations are read: JSON Schemas of real tools nest a dozen
/// levels at most (11 in the listings recorded), and the bound keeps a hostile one from taking
/// the stack.
pub const MAX_DEPTH: usize = 64;

/// How many bytes of text (strings and keys) of one definition are read: real definitions
/// hold a few kilobytes, the largest known some tens; the bound keeps the scan of a hostile
/// one to milliseconds.
pub const MAX_TEXT: usize = 1 << 20;

/// How many values and keys of one definition are looked at, whatever their size: the largest
/// real tool known (Notion's `API-update-page-markdown`) has under 500.
pub const MAX_NODES: usize = 20_000;

/// Scans `tool`; `others` are the other configured servers' names, whose tools it must not
/// claim.
pub fn scan(tool: &Tool, others: &[String]) -> Vec<Finding> {
    let mut texts = Texts::default();
    texts.add("name", &tool.name);
    texts.add_some("title", tool.title.as_deref());
    texts.add_some("description", tool.description.as_deref());
    texts.value(&tool.input_schema, &mut "inputSchema".to_owned(), 0);
    if let Some(schema) = &tool.output_schema {
        texts.value(schema, &mut "outputSchema".to_owned(), 0);
    }
    if let Some(annotations) = &tool.annotations {
        texts.value(annotations, &mut "annotations".to_owned(), 0);
    }
    texts.scan(others)
}

/// Scans `prompt`, its name, title and description and those of its arguments, as
/// [`scan`] scans a tool.
pub fn scan_prompt(prompt: &Prompt, others: &[String]) -> Vec<Finding> {
    let mut texts = Texts::default();
    texts.named(
        &prompt.name,
        prompt.title.as_deref(),
        prompt.description.as_deref(),
    );
    for (index, argument) in prompt.arguments.iter().enumerate() {
        let path = format!("arguments[{index}]");
        texts.add(&format!("{path}.name"), &argument.name);
        let title = argument.title.as_deref();
        texts.add_some(&format!("{path}.title"), title);
        let description = argument.description.as_deref();
        texts.add_some(&format!("{path}.description"), description);
    }
    texts.scan(others)
}

/// Scans `resource`'s name, title and description, as [`scan`] scans a tool. Its URI is
/// where it is read from, not text for the model, and is not scanned.
pub fn scan_resource(resource: &Resource, others: &[String]) -> Vec<Finding> {
    let mut texts = Texts::default();
    let (title, description) = (resource.title.as_deref(), resource.description.as_deref());
    texts.named(&resource.name, title, description);
    texts.scan(others)
}

/// Scans `template`'s name, title and description, as [`scan_resource`] does a resource's.
pub fn scan_template(template: &ResourceTemplate, others: &[String]) -> Vec<Finding> {
    let mut texts = Texts::default();
    let (title, description) = (template.title.as_deref(), template.description.as_deref());
    texts.named(&template.name, title, description);
    texts.scan(others)
}

/// Scans `skill`'s frontmatter (its name, description and every other field: what a host
/// shows a model to choose the skill by), as [`scan`] scans a tool. Its files are not read
/// (nothing is, before the skill is installed), and its URI is not text for the model.
pub fn scan_skill(skill: &Skill, others: &[String]) -> Vec<Finding> {
    let mut texts = Texts::default();
    for (field, value) in &skill.frontmatter {
        texts.value(value, &mut field.clone(), 1);
    }
    texts.scan(others)
}

/// The texts of one definition with where each is, read within the bounds, and the first
/// bound reached.
#[derive(Default)]
struct Texts<'a> {
    texts: Vec<(String, &'a str)>,
    bytes: usize,
    nodes: usize,
    unread: Option<Finding>,
}

impl<'a> Texts<'a> {
    fn named(&mut self, name: &'a str, title: Option<&'a str>, description: Option<&'a str>) {
        self.add("name", name);
        self.add_some("title", title);
        self.add_some("description", description);
    }

    fn add_some(&mut self, field: &str, text: Option<&'a str>) {
        if let Some(text) = text {
            self.add(field, text);
        }
    }

    /// Takes in `text`, found at `field`, unless a bound is reached (then notes which).
    fn add(&mut self, field: &str, text: &'a str) {
        if !self.counted(field, 1, text.len()) {
            return;
        }
        self.texts.push((field.to_owned(), text));
    }

    /// Counts `nodes` and `bytes` more read at `field`: `false`, once a bound is reached
    /// (noted the first time), and then nothing more is read.
    fn counted(&mut self, field: &str, nodes: usize, bytes: usize) -> bool {
        if self.unread.is_some() {
            return false;
        }
        self.nodes += nodes;
        self.bytes += bytes;
        let reason = if self.nodes > MAX_NODES {
            format!("more than {MAX_NODES} values and keys; the rest is not read")
        } else if self.bytes > MAX_TEXT {
            format!("more than {MAX_TEXT} bytes of text; the rest is not read")
        } else {
            return true;
        };
        self.unread(field, reason);
        false
    }

    fn unread(&mut self, field: &str, reason: String) {
        self.unread.get_or_insert_with(|| Finding {
            kind: Kind::Unread,
            field: field.to_owned(),
            reason,
            span: String::new(),
        });
    }

    /// Every string and every key in `value`, found at `path` (extended and restored on the
    /// way down), `depth` levels down.
    fn value(&mut self, value: &'a Value, path: &mut String, depth: usize) {
        if depth > MAX_DEPTH {
            let reason = format!("nested deeper than {MAX_DEPTH} levels; the rest is not read");
            return self.unread(path, reason);
        }
        let len = path.len();
        match value {
            Value::String(text) => self.add(path, text),
            Value::Object(map) => {
                for (key, inner) in map {
                    push_key(path, key);
                    if self.counted(path, 1, key.len()) {
                        self.texts.push((format!("{path} (key)"), key));
                    }
                    self.value(inner, path, depth + 1);
                    path.truncate(len);
                    if self.unread.is_some() {
                        return;
                    }
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    path.push_str(&format!("[{index}]"));
                    self.value(item, path, depth + 1);
                    path.truncate(len);
                    if self.unread.is_some() {
                        return;
                    }
                }
            }
            _ => {
                self.counted(path, 1, 0);
            }
        }
    }

    /// What the scan finds in the texts, then the bound reached, if any.
    fn scan(self, others: &[String]) -> Vec<Finding> {
        let others: Vec<String> = (others.iter())
            .map(|name| crate::names::safe(name).to_lowercase())
            .filter(|name| !name.is_empty())
            .collect();
        let mut findings = Vec::new();
        for (field, text) in &self.texts {
            scan_text(field, text, &others, &mut findings);
        }
        findings.extend(self.unread);
        findings
    }
}

/// `path` followed by `.key`, or by `["key"]` (escaped, shortened) when the key is not a plain
/// name.
fn push_key(path: &mut String, key: &str) {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$');
    if !key.is_empty() && key.len() <= 64 && key.chars().all(plain) {
        path.push('.');
        path.push_str(key);
    } else {
        let shown = escape(&short(key)).replace('"', "\\\"");
        path.push_str(&format!("[\"{shown}\"]"));
    }
}

fn scan_text(field: &str, text: &str, others: &[String], findings: &mut Vec<Finding>) {
    let mut found = |kind, reason: String, span: String| {
        findings.push(Finding {
            kind,
            field: field.to_owned(),
            reason,
            span,
        });
    };
    if let Some((reason, span)) = invisible(text) {
        found(Kind::Invisible, reason, span);
    }
    if let Some(span) = padding(text) {
        found(Kind::Padding, "text after long padding".to_owned(), span);
    }
    // The phrase rules read the folded text; spans show the original, hidden characters and
    // all.
    let folded = Folded::of(text);
    let span = |range: Range<usize>| {
        let (start, end) = (folded.origin[range.start], folded.origin[range.end]);
        excerpt(text, start, end)
    };
    let said = first_phrase(&folded.text, &INSTRUCTION_PHRASES)
        .map(|(phrase, range)| (format!("says {phrase:?}"), range));
    let secret = || {
        let (path, range) = secret_path(&folded.text)?;
        Some((format!("names a secret's path {path:?}"), range))
    };
    // One finding of the kind: the first in the text of either.
    let first = match (said, secret()) {
        (Some(said), Some(secret)) if secret.1.start < said.1.start => Some(secret),
        (said, secret) => said.or(secret),
    };
    if let Some((reason, range)) = first {
        found(Kind::Instruction, reason, span(range));
    }
    if let Some((reason, range)) = shadowing(&folded.text, others) {
        found(Kind::Shadowing, reason, span(range));
    }
}

/// Whether a person would not see `c`: Unicode tags, zero-width characters, bidirectional
/// controls, other format characters used to hide text, and control characters other than
/// line breaks and tabs.
fn is_hidden(c: char) -> bool {
    matches!(c,
        '\u{E0000}'..='\u{E007F}' // tags: an invisible copy of ASCII
        | '\u{E0100}'..='\u{E01EF}' // variation selectors supplement, used to smuggle bytes
        | '\u{200B}'..='\u{200F}' // zero-width space, non-joiner, joiner; LRM, RLM
        | '\u{202A}'..='\u{202E}' // bidirectional embeddings and overrides
        | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
        | '\u{2066}'..='\u{2069}' // bidirectional isolates
        | '\u{206A}'..='\u{206F}' // deprecated format characters
        | '\u{061C}' // Arabic letter mark
        | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' // Hangul fillers
        | '\u{180E}' // Mongolian vowel separator
        | '\u{00AD}' // soft hyphen
        | '\u{034F}' // combining grapheme joiner
        | '\u{FEFF}' // zero-width no-break space
        | '\u{FFF9}'..='\u{FFFB}' // interlinear annotations
        | '\u{1D173}'..='\u{1D17A}' // musical formatting
    ) || (c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
}

/// The first run of hidden characters, why it was flagged, and the run escaped in context.
fn invisible(text: &str) -> Option<(String, String)> {
    let start = text.find(is_hidden)?;
    let run_len: usize = (text[start..].chars())
        .take_while(|&c| is_hidden(c) || c == ' ')
        .map(char::len_utf8)
        .sum();
    let count = text.chars().filter(|&c| is_hidden(c)).count();
    let mut reason = format!("{count} invisible or bidirectional control character(s)");
    // Tag characters mirror ASCII: what they spell is the hidden message.
    let spelled: String = (text.chars())
        .filter_map(|c| match c {
            '\u{E0020}'..='\u{E007E}' => char::from_u32(c as u32 - 0xE0000),
            _ => None,
        })
        .collect();
    if !spelled.is_empty() {
        reason.push_str(&format!(" (tag characters spelling {:?})", short(&spelled)));
    }
    Some((reason, excerpt(text, start, start + run_len)))
}

/// A long run of padding with text after it, shown escaped in short.
fn padding(text: &str) -> Option<String> {
    if !could_pad(text) {
        return None;
    }
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut index = 0;
    while index < chars.len() {
        let (start, first) = chars[index];
        let mut end = index;
        let long = if first.is_whitespace() {
            let (mut lines, mut spaces, mut widest) = (0, 0, 0);
            while end < chars.len() && chars[end].1.is_whitespace() {
                match chars[end].1 {
                    '\n' => (lines, spaces) = (lines + 1, 0),
                    _ => spaces += 1,
                }
                widest = spaces.max(widest);
                end += 1;
            }
            lines >= PADDING_LINES || widest >= PADDING_SPACES
        } else {
            while end < chars.len() && chars[end].1 == first {
                end += 1;
            }
            end - index >= PADDING_REPEAT
        };
        let rest = chars.get(end..).unwrap_or_default();
        if long && rest.iter().any(|(_, c)| !c.is_whitespace()) {
            let run = &text[start..rest.first().map_or(text.len(), |(at, _)| *at)];
            let after: String = rest.iter().map(|(_, c)| *c).take(2 * CONTEXT).collect();
            return Some(format!(
                "{} ({} characters) then {}",
                escape(&run.chars().take(8).collect::<String>()) + "…",
                run.chars().count(),
                escape(after.trim_start())
            ));
        }
        index = end.max(index + 1);
    }
    tail_differs(&chars)
}

/// Whether `text` could hold padding as [`padding`] finds it: a run of one character or of
/// whitespace long enough, or enough characters for sparse blocks. One pass that allocates
/// nothing, where `padding` lists the characters of every text: most texts of a schema are
/// short and plain, and a catalogue of thousands of tools holds tens of thousands of them.
fn could_pad(text: &str) -> bool {
    if text.len() > BLOCK * PADDING_BLOCKS {
        return true;
    }
    let (mut lines, mut spaces, mut same, mut before) = (0, 0, 0, None);
    for c in text.chars() {
        match c {
            '\n' => (lines, spaces) = (lines + 1, 0),
            c if c.is_whitespace() => spaces += 1,
            _ => (lines, spaces) = (0, 0),
        }
        same = if before == Some(c) { same + 1 } else { 1 };
        before = Some(c);
        if lines >= PADDING_LINES || spaces >= PADDING_SPACES || same >= PADDING_REPEAT {
            return true;
        }
    }
    false
}

/// A long stretch of text with hardly a letter in it, then letters: the tail differs in kind
/// from what comes before, shown as the stretch's length and the tail's beginning.
fn tail_differs(chars: &[(usize, char)]) -> Option<String> {
    let blocks: Vec<&[(usize, char)]> = chars.chunks(BLOCK).collect();
    let sparse = |block: &&[(usize, char)]| {
        block.len() == BLOCK
            && block.iter().filter(|(_, c)| c.is_alphabetic()).count() < FEW_LETTERS
    };
    let mut run = 0;
    for (index, block) in blocks.iter().enumerate() {
        if sparse(block) {
            run += 1;
            continue;
        }
        if run >= PADDING_BLOCKS {
            let rest = blocks[index..]
                .iter()
                .flat_map(|block| block.iter().map(|(_, c)| *c));
            let start: String = (rest.skip_while(|c| !c.is_alphabetic()))
                .take(2 * CONTEXT)
                .collect();
            if !start.is_empty() {
                return Some(format!(
                    "{} characters with hardly a letter, then {}…",
                    run * BLOCK,
                    escape(&start)
                ));
            }
        }
        run = 0;
    }
    None
}

/// A text as the phrase rules read it: each character NFKC-folded and lowercase, typographic
/// quotes as plain ones, `\` as `/`, hidden characters dropped and whitespace runs made one
/// space.
struct Folded {
    text: String,
    /// For each byte of `text`, and one past its end, where it came from in the original.
    origin: Vec<usize>,
    /// Whitespace was passed over since the last character added.
    space: bool,
}

impl Folded {
    fn of(original: &str) -> Folded {
        let mut folded = Folded {
            text: String::with_capacity(original.len()),
            origin: Vec::with_capacity(original.len() + 1),
            space: false,
        };
        for (at, whole) in original.char_indices() {
            // ASCII needs no folding but to lowercase: most text, and the quick way through.
            if whole.is_ascii() {
                // Paths read alike whichever way they are separated.
                let c = match whole {
                    '\\' => '/',
                    c => c.to_ascii_lowercase(),
                };
                folded.add(c, at);
                continue;
            }
            // Folded one character at a time, so that each output character has its origin.
            for c in whole.nfkc().flat_map(char::to_lowercase) {
                let c = match c {
                    '\u{2018}' | '\u{2019}' | '\u{02BC}' => '\'',
                    '\u{201C}' | '\u{201D}' => '"',
                    c => c,
                };
                folded.add(c, at);
            }
        }
        folded.origin.push(original.len());
        folded
    }

    /// Adds `c`, which came from byte `origin` of the original: hidden characters dropped,
    /// whitespace held back to become one space before the next character.
    fn add(&mut self, c: char, origin: usize) {
        if is_hidden(c) {
            return;
        }
        if c.is_whitespace() {
            self.space = true;
            return;
        }
        if std::mem::take(&mut self.space) && !self.text.is_empty() {
            self.push(' ', origin);
        }
        self.push(c, origin);
    }

    fn push(&mut self, c: char, origin: usize) {
        self.text.push(c);
        self.origin
            .extend(std::iter::repeat_n(origin, c.len_utf8()));
    }
}

/// The first of [`SECRET_PATHS`] in `folded` as a whole part of a path, and where.
fn secret_path(folded: &str) -> Option<(&'static str, Range<usize>)> {
    let joins = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-');
    let whole = |at: usize, path: &str| {
        let before = folded[..at].chars().next_back();
        let after = folded[at + path.len()..].chars().next();
        (path.starts_with('/') || before.is_none_or(|c| !joins(c) && c != '.'))
            && after.is_none_or(|c| !joins(c))
    };
    SECRET_PATH_PHRASES
        .earliest(folded, whole)
        .map(|(at, path)| (path, at..at + path.len()))
}

/// The first of `phrases` in `folded`, and where.
fn first_phrase(folded: &str, phrases: &Phrases) -> Option<(&'static str, Range<usize>)> {
    let (at, phrase) = phrases.earliest(folded, |_, _| true)?;
    Some((phrase, at..at + phrase.len()))
}

/// A list of phrases to look for, with which byte pairs begin one, so that a text is read
/// once, trying a place only when its first two bytes begin some phrase. One search per
/// phrase set up a searcher each time, for every string of every schema, which was most of
/// what listing a catalogue of thousands of tools cost.
struct Phrases {
    list: &'static [&'static str],
    /// A bit per byte pair that begins a phrase.
    pairs: [u64; 1024],
    /// The bytes that are a phrase of one byte.
    single: [bool; 256],
}

static INSTRUCTION_PHRASES: LazyLock<Phrases> = LazyLock::new(|| Phrases::of(INSTRUCTIONS));
static SHADOWING_PHRASES: LazyLock<Phrases> = LazyLock::new(|| Phrases::of(SHADOWING));
static SECRET_PATH_PHRASES: LazyLock<Phrases> = LazyLock::new(|| Phrases::of(SECRET_PATHS));

impl Phrases {
    fn of(list: &'static [&'static str]) -> Self {
        let mut phrases = Phrases {
            list,
            pairs: [0; 1024],
            single: [false; 256],
        };
        for phrase in list {
            match phrase.as_bytes() {
                [] => {}
                [only] => phrases.single[usize::from(*only)] = true,
                [first, second, ..] => {
                    let pair = (usize::from(*first) << 8) | usize::from(*second);
                    phrases.pairs[pair / 64] |= 1 << (pair % 64);
                }
            }
        }
        phrases
    }

    /// Where the first phrase that `accept` takes starts in `text`, and which it is (the
    /// first listed, of those starting at one place).
    fn earliest(
        &self,
        text: &str,
        accept: impl Fn(usize, &str) -> bool,
    ) -> Option<(usize, &'static str)> {
        let bytes = text.as_bytes();
        let could_start = |at: usize| {
            let first = usize::from(bytes[at]);
            let pair = (first << 8) | usize::from(bytes.get(at + 1).copied().unwrap_or(0));
            self.single[first] || self.pairs[pair / 64] & (1 << (pair % 64)) != 0
        };
        (0..bytes.len())
            .filter(|at| could_start(*at))
            .find_map(|at| {
                (self.list.iter())
                    .find(|phrase| bytes[at..].starts_with(phrase.as_bytes()) && accept(at, phrase))
                    .map(|phrase| (at, *phrase))
            })
    }
}

/// A claim on another server's tools in `folded`: its qualified tool names, or this tool
/// put in the place of one of them.
fn shadowing(folded: &str, others: &[String]) -> Option<(String, Range<usize>)> {
    // A qualified name holds `__`; most texts hold none, and so name no other server's tool.
    let qualified_names = if folded.contains("__") { others } else { &[] };
    for other in qualified_names {
        let qualified = format!("{other}__");
        if let Some(at) = find_word(folded, &qualified) {
            let reason = format!("names a tool of server {other}");
            return Some((reason, at..at + qualified.len()));
        }
    }
    if let Some((phrase, span)) = first_phrase(folded, &SHADOWING_PHRASES) {
        return Some((format!("says {phrase:?}"), span));
    }
    for &phrase in INSTEAD {
        for (at, _) in folded.match_indices(phrase) {
            let after = at + phrase.len();
            let near = &folded[after..floor(folded, after + NEAR)];
            let server = others.iter().find(|other| names_server(near, other));
            let reason = match server {
                Some(server) => format!("{phrase:?} names server {server}"),
                None if qualified_name(near) => format!("{phrase:?} a qualified tool name"),
                None => continue,
            };
            return Some((reason, at..after + near.len()));
        }
    }
    None
}

/// Whether `text` names server `other` as a server: `other server`, `other's`, `other tool`,
/// `other mcp`. A bare name is not enough, since servers are often named after common words
/// (`time`, `fetch`, `notes`).
fn names_server(text: &str, other: &str) -> bool {
    const AS_SERVER: &[&str] = &[" server", "'s", " tool", " mcp"];
    (text.match_indices(other)).any(|(at, _)| {
        let rest = &text[at + other.len()..];
        let before = text[..at].chars().next_back();
        before.is_none_or(|c| !c.is_alphanumeric() && c != '_')
            && AS_SERVER.iter().any(|kind| rest.starts_with(kind))
    })
}

/// Where `word` starts in `text` with no letter, digit or `_` before it (nor after, unless
/// it ends in `_`).
fn find_word(text: &str, word: &str) -> Option<usize> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        let before = text[..at].chars().next_back().is_none_or(|c| !is_word(c));
        let after = text[at + word.len()..].chars().next();
        before && (word.ends_with('_') || after.is_none_or(|c| !is_word(c)))
    })
}

/// Whether `text` holds a `server__tool` name.
fn qualified_name(text: &str) -> bool {
    text.match_indices("__").any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + 2..].chars().next();
        before.is_some_and(char::is_alphanumeric) && after.is_some_and(char::is_alphanumeric)
    })
}

/// The largest char boundary of `text` at or before `at`.
fn floor(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `text[start..end]` with a little context each side, escaped and shortened.
fn excerpt(text: &str, start: usize, end: usize) -> String {
    let before: String = text[..start].chars().rev().take(CONTEXT).collect();
    let before: String = before.chars().rev().collect();
    let inner: String = text[start..end].chars().take(4 * CONTEXT).collect();
    let after: String = text[end..].chars().take(CONTEXT).collect();
    let lead = if before.len() < start { "…" } else { "" };
    let tail = if end + after.len() < text.len() {
        "…"
    } else {
        ""
    };
    format!(
        "{lead}{}{}{}{tail}",
        escape(&before),
        escape(&inner),
        escape(&after)
    )
}

/// At most a few dozen characters of `text`.
fn short(text: &str) -> String {
    let cut: String = text.chars().take(4 * CONTEXT).collect();
    if cut.len() < text.len() {
        cut + "…"
    } else {
        cut
    }
}

/// `text` with hidden and control characters written as escapes (`\n`, `\u{E0041}`).
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            '\\' => escaped.push_str("\\\\"),
            c if is_hidden(c) => escaped.push_str(&format!("\\u{{{:X}}}", c as u32)),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests;
