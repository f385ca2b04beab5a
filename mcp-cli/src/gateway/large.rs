//! A host's size limit on tool results (`_meta["anthropic/maxResultSizeChars"]` on its
//! `tools/call`, as Claude Code sends it): a longer result is cut to its first part and a
//! `resource_link` to the whole, which the host reads back with `resources/read`.
//!
//! The whole result is kept as text (each text item on its line, other items as `call`
//! prints them, structured content as JSON when there is no text) in the state folder's
//! `results/`, the same folder and bounds as `call`'s spilled results, under a name with 16
//! random bytes in it. Its URI is `mcp-cli://results/<file name>`. Such results are not
//! listed by `resources/list`; a URI under that prefix names nothing else.

use std::path::Path;

use mcp_smol::proto::CallToolResult;
use serde_json::{Value, json};

use crate::output;
use crate::spill;

/// The `_meta` member a host limits results with.
pub(crate) const MAX_RESULT_SIZE_CHARS: &str = "anthropic/maxResultSizeChars";

/// The URI prefix of the results kept for hosts.
pub(crate) const RESULT_URI_PREFIX: &str = "mcp-cli://results/";

/// The limit a host's `tools/call` params ask for, if any.
pub(crate) fn requested(params: &Value) -> Option<u64> {
    params
        .get("_meta")?
        .get(MAX_RESULT_SIZE_CHARS)?
        .as_u64()
        .filter(|&max| max > 0)
}

/// `result` (a `tools/call` result as a backend sent it) for a host that takes at most
/// `max_chars` characters: as it is when its text fits, else its first part, a note and a
/// `resource_link` to the whole, kept in `dir` under `label` (the tool's shown name). When
/// the whole cannot be kept, the result goes back uncut (nothing lost) with a warning item.
pub(crate) fn cut(result: Value, max_chars: u64, dir: &Path, label: &str) -> Value {
    // A result still asking for input, or one of a kind this does not know, goes as it is.
    if (result.get("resultType")).is_some_and(|kind| kind != "complete") {
        return result;
    }
    let Ok(decoded) = CallToolResult::from_value(result.clone()) else {
        return result;
    };
    let write_all = |out: &mut dyn std::io::Write| {
        output::call_pieces(&decoded).try_for_each(|piece| piece.write_line(out))
    };
    let chars = (output::call_pieces(&decoded))
        .map(|piece| piece.text().chars().count() as u64 + 1)
        .sum::<u64>();
    if chars <= max_chars {
        return result;
    }
    let path = match spill::write(dir, label, "txt", write_all) {
        Ok(path) => path,
        Err(error) => return with_warning(result, &error),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let uri = format!("{RESULT_URI_PREFIX}{name}");
    let bytes = std::fs::metadata(&path).map_or(0, |meta| meta.len());
    let note = |shown: u64| {
        format!(
            "\n[result cut at {shown} of {chars} characters; the whole result is the resource {uri}]"
        )
    };
    // The note for the most that could be shown is the longest it gets.
    let room = max_chars.saturating_sub(note(max_chars).chars().count() as u64);
    let first = first_chars(&decoded, room);
    let text = format!("{first}{}", note(first.chars().count() as u64));
    let mut cut = json!({
        "content": [
            {"type": "text", "text": text},
            {"type": "resource_link", "uri": uri, "name": name, "mimeType": "text/plain",
             "size": bytes, "description": format!("The whole result of {label}")}
        ]
    });
    if decoded.is_error {
        cut["isError"] = json!(true);
    }
    cut
}

/// The first `count` characters of the result's text, lines ended by newlines.
fn first_chars(result: &CallToolResult, count: u64) -> String {
    let mut first = String::new();
    let mut left = count;
    for piece in output::call_pieces(result) {
        for c in piece.text().chars().chain(std::iter::once('\n')) {
            if left == 0 {
                return first;
            }
            first.push(c);
            left -= 1;
        }
    }
    first
}

/// `result` with a text item first saying why it could not be cut.
fn with_warning(mut result: Value, error: &str) -> Value {
    let warning = json!({"type": "text", "text": format!(
        "[mcp-cli: this result is over the host's size limit but could not be kept for \
         reading back ({error}), so it is sent whole]"
    )});
    if let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) {
        content.insert(0, warning);
    }
    result
}

/// The `resources/read` answer for `uri` when it names a kept result: `None` when the URI is
/// not under [`RESULT_URI_PREFIX`]; an error when it names nothing kept.
pub(crate) fn read(uri: &str, dir: &Path) -> Option<Result<Value, String>> {
    let name = uri.strip_prefix(RESULT_URI_PREFIX)?;
    if !spill::is_result_name(name) {
        return Some(Err(format!("resource not found: {uri}")));
    }
    Some(match crate::files::read_private_text(&dir.join(name)) {
        Ok(text) => Ok(json!({
            "contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]
        })),
        Err(_) => Err(format!(
            "resource not found: {uri} (results are kept for a while, then removed)"
        )),
    })
}
