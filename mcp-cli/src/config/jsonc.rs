//! JSON with comments and trailing commas (VS Code, Zed), made plain JSON in place.

/// Blanks out `//` and `/* */` comments and trailing commas (VS Code and Zed allow them),
/// keeping every newline so error line numbers still match the file. Two linear passes.
pub fn strip_json_comments(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    let mut strings = StringTracker::default();
    let mut i = 0;
    while i < out.len() {
        if strings.inside(&out, i) {
            i += 1;
            continue;
        }
        let end = match &out[i..] {
            [b'/', b'/', ..] => out[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(out.len(), |e| i + e),
            [b'/', b'*', ..] => (i + 2..out.len().saturating_sub(1))
                .find(|&e| &out[e..e + 2] == b"*/")
                .map_or(out.len(), |e| e + 2),
            _ => {
                i += 1;
                continue;
            }
        };
        for slot in &mut out[i..end] {
            if *slot != b'\n' {
                *slot = b' ';
            }
        }
        i = end;
    }
    let mut strings = StringTracker::default();
    for i in 0..out.len() {
        if !strings.inside(&out, i) && out[i] == b',' {
            let next = out[i + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                out[i] = b' ';
            }
        }
    }
    // Only ASCII bytes outside strings were replaced, so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// Follows JSON string boundaries as bytes are visited in order.
#[derive(Default)]
struct StringTracker {
    in_string: bool,
    escaped: bool,
}

impl StringTracker {
    /// Whether byte `i` belongs to a string (its quotes included). Call once per byte, in order.
    fn inside(&mut self, bytes: &[u8], i: usize) -> bool {
        let byte = bytes[i];
        if self.in_string {
            match (self.escaped, byte) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return true;
        }
        if byte == b'"' {
            self.in_string = true;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comment_stripping_keeps_strings_and_lines() {
        let text =
            "{\"a\": \"x // y /* z */\", // c\n\"b\": [1,2,],\n/* multi\nline */ \"c\": \"\\\",\"}";
        let stripped = strip_json_comments(text);
        assert_eq!(stripped.matches('\n').count(), 3);
        let value: serde_json::Value = serde_json::from_str(&stripped).unwrap();
        assert_eq!(value["a"], "x // y /* z */");
        assert_eq!(value["b"], serde_json::json!([1, 2]));
        assert_eq!(value["c"], "\",");
    }
}
