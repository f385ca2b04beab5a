//! Whom a message answers, read from its edges without parsing it: the top-level `id` of a
//! line too long to keep, or of one that is not JSON, so that the request it answers fails at
//! once rather than at its deadline.

use serde_json::Value;

/// The `id` of the response a message is, read from its first bytes, or from its last if it
/// is the last member (`...,"id":7}`). `None` unless the first bytes show a response: a
/// top-level `result` or `error` member and no `method`, for the `id` of a request or a
/// notification is the peer's own and must match nothing of ours.
pub(crate) fn response_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    let members = top_level_members(head);
    if members.method || !members.answer {
        return None;
    }
    members.id.or_else(|| id_at_end(tail))
}

/// The top-level `id` of a message, request or response, read from its first bytes or, if
/// it is the last member, from its last: what a report of a discarded line names.
pub(crate) fn message_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    top_level_members(head).id.or_else(|| id_at_end(tail))
}

/// What the first bytes of a message show of its top-level members.
#[derive(Default)]
struct TopLevel {
    id: Option<Value>,
    /// A `result` or an `error` member.
    answer: bool,
    method: bool,
}

/// A walk over the first bytes that follows strings and nesting, noting the top-level
/// object's members by name as they come (a name is a string followed by a colon).
fn top_level_members(head: &[u8]) -> TopLevel {
    let mut members = TopLevel::default();
    let mut depth = 0usize;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => match depth.checked_sub(1) {
                Some(outer) => depth = outer,
                None => break,
            },
            b'"' => {
                let Some(end) = string_end(head, i) else {
                    break;
                };
                let name = &head[i + 1..end];
                let value = trim_start(&head[end + 1..]).strip_prefix(b":");
                i = end;
                if let (1, Some(value)) = (depth, value) {
                    match name {
                        b"id" if members.id.is_none() => members.id = scalar(trim_start(value)),
                        b"result" | b"error" => members.answer = true,
                        b"method" => members.method = true,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    members
}

/// The `id` member if it is the top-level object's last, as in `...,"id":7}`.
fn id_at_end(tail: &[u8]) -> Option<Value> {
    let rest = trim_end(tail).strip_suffix(b"}")?;
    let rest = trim_end(rest);
    // The value: a number, or a string without escapes.
    let start = if rest.last() == Some(&b'"') {
        rest[..rest.len() - 1].iter().rposition(|&b| b == b'"')?
    } else {
        let digits = rest
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_digit() || **b == b'-' || **b == b'.');
        rest.len() - digits.count()
    };
    let value = scalar(&rest[start..])?;
    let key = trim_end(trim_end(&rest[..start]).strip_suffix(b":")?);
    key.ends_with(b"\"id\"").then_some(value)
}

/// Where the string starting at `bytes[start]` (a quote) ends, its closing quote's index.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A number or a string at the start of `bytes`, as JSON.
fn scalar(bytes: &[u8]) -> Option<Value> {
    let end = match bytes.first()? {
        b'"' => string_end(bytes, 0)? + 1,
        _ => bytes
            .iter()
            .position(|b| !(b.is_ascii_digit() || b"-+.eE".contains(b)))
            .unwrap_or(bytes.len()),
    };
    match serde_json::from_slice(&bytes[..end]).ok()? {
        value @ (Value::Number(_) | Value::String(_)) => Some(value),
        _ => None,
    }
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[skip..]
}

fn trim_end(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_whitespace())
        .count();
    &bytes[..bytes.len() - skip]
}
