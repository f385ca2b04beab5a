//! A server that answers `echo` calls with canned text, costing about the same per request in
//! either era: it finds the id and the text by scanning bytes and parses nothing. Against it,
//! what differs between the eras is the client's work and the bytes, not a server's JSON.

use std::io::{BufRead, BufReader, Write};

use crate::eras::STATELESS;

/// How much of stdin one read takes: room for 32 requests of either era at once. With
/// stdin's own 8 KiB, 32 requests of the stateless era (300 bytes each) took two reads where
/// the handshake era's took one, and the server answered each batch in two parts: a cost of
/// this server's that grew with the era's messages, which it is here to leave out.
const READ_BUFFER: usize = 64 * 1024;

/// Serves stdin to stdout until stdin closes; with `stateless`, in the 2026-07-28 era.
pub(crate) fn serve(stateless: bool) {
    let mut input = BufReader::with_capacity(READ_BUFFER, std::io::stdin().lock());
    let mut output = std::io::stdout().lock();
    let (mut line, mut answer) = (Vec::new(), Vec::new());
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        // Notifications (no id) need no answer.
        let Some(id) = member(&line, b"\"id\":", b",}") else {
            continue;
        };
        answer.clear();
        answer.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        answer.extend_from_slice(id);
        answer.extend_from_slice(b",\"result\":");
        if find(&line, b"\"method\":\"tools/call\"").is_some() {
            let text = member(&line, b"\"text\":\"", b"\"").unwrap_or_default();
            answer.extend_from_slice(b"{\"content\":[{\"type\":\"text\",\"text\":\"");
            answer.extend_from_slice(text);
            answer.extend_from_slice(b"\"}]");
        } else if stateless {
            let supported = format!("{{\"supportedVersions\":[\"{STATELESS}\"]");
            answer.extend_from_slice(supported.as_bytes());
            answer.extend_from_slice(b",\"capabilities\":{\"tools\":{}}");
        } else {
            answer.extend_from_slice(b"{\"protocolVersion\":\"2025-11-25\"");
            answer.extend_from_slice(b",\"capabilities\":{\"tools\":{}}");
            answer.extend_from_slice(b",\"serverInfo\":{\"name\":\"canned\",\"version\":\"1\"}");
        }
        if stateless {
            answer.extend_from_slice(b",\"resultType\":\"complete\",\"_meta\":{");
            answer.extend_from_slice(b"\"io.modelcontextprotocol/serverInfo\":");
            answer.extend_from_slice(b"{\"name\":\"canned\",\"version\":\"1\"}}");
        }
        answer.extend_from_slice(b"}}\n");
        // One write per answer, as the fixture writes them.
        if output
            .write_all(&answer)
            .and_then(|()| output.flush())
            .is_err()
        {
            return;
        }
    }
}

/// The bytes after the first `start` in `line`, up to one of `ends`.
fn member<'a>(line: &'a [u8], start: &[u8], ends: &[u8]) -> Option<&'a [u8]> {
    let from = find(line, start)? + start.len();
    let length = line[from..].iter().position(|byte| ends.contains(byte))?;
    Some(&line[from..from + length])
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
