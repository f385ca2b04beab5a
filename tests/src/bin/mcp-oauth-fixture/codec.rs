//! Encodings: base64 and base64url, HS256 JWTs, URL and form encoding, scope lists, and the
//! clock JWTs count in.

use std::collections::HashMap;

use mcp_tests::http;
use serde_json::{Value, json};

/// A JWT of `claims` with header type `typ`, signed HS256 with `key`.
pub(super) fn sign_hs256(key: &[u8], typ: &str, claims: &Value) -> String {
    let header = json!({"typ": typ, "alg": "HS256"});
    let signed = format!(
        "{}.{}",
        base64url(header.to_string().as_bytes()),
        base64url(claims.to_string().as_bytes())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let tag = ring::hmac::sign(&key, signed.as_bytes());
    format!("{signed}.{}", base64url(tag.as_ref()))
}

/// The header and claims of `jwt`, when it is signed HS256 with `key`.
pub(super) fn verify_hs256(key: &[u8], jwt: &str) -> Option<(Value, Value)> {
    let parts: Vec<&str> = jwt.split('.').collect();
    let [head, body, signature] = parts[..] else {
        return None;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let signed = format!("{head}.{body}");
    ring::hmac::verify(&key, signed.as_bytes(), &base64url_decode(signature)?).ok()?;
    let header: Value = serde_json::from_slice(&base64url_decode(head)?).ok()?;
    (header["alg"] == "HS256").then_some(())?;
    Some((
        header,
        serde_json::from_slice(&base64url_decode(body)?).ok()?,
    ))
}

pub(super) fn form(text: &str) -> HashMap<String, String> {
    http::form_pairs(text).into_iter().collect()
}

/// A space-separated scope list, split.
pub(super) fn split(scope: Option<&String>) -> Vec<String> {
    (scope.map(String::as_str).unwrap_or_default())
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

pub(super) fn now_secs() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |since| since.as_secs() as i64)
}

pub(super) fn encode(text: &str) -> String {
    (text.bytes())
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 in `alphabet`, padded with `=` when `padded`.
fn base64_in(alphabet: &[u8; 64], bytes: &[u8], padded: bool) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..=chunk.len() {
            out.push(char::from(alphabet[((n >> (18 - 6 * i)) & 63) as usize]));
        }
        if padded {
            out.push_str(&"=".repeat(3 - chunk.len()));
        }
    }
    out
}

/// Base64url without padding (JWTs, PKCE, thumbprints).
pub(super) fn base64url(bytes: &[u8]) -> String {
    base64_in(BASE64URL, bytes, false)
}

/// Standard base64 with padding (HTTP Basic, `content_digest`).
pub(super) fn base64(bytes: &[u8]) -> String {
    base64_in(BASE64, bytes, true)
}

/// Base64url (or standard base64: both alphabets read), padding optional; `None` for
/// anything else.
pub(super) fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' | b'+' => Some(62),
        b'_' | b'/' => Some(63),
        _ => None,
    };
    let mut bytes = Vec::new();
    let (mut bits, mut count) = (0u32, 0);
    for c in text.trim_end_matches('=').bytes() {
        bits = (bits << 6) | u32::from(digit(c)?);
        count += 6;
        if count >= 8 {
            count -= 8;
            bytes.push((bits >> count) as u8);
        }
    }
    Some(bytes)
}

/// The JWTs the fixture signs verify under their key only, and base64 reads what it writes.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::idp::IDP_KEY;
    use crate::workload::PLATFORM_KEY;

    #[test]
    fn hs256_jwts_verify_only_under_their_key_and_base64_round_trips() {
        let jwt = sign_hs256(PLATFORM_KEY, "JWT", &json!({"sub": "w"}));
        let (_, claims) = verify_hs256(PLATFORM_KEY, &jwt).unwrap();
        assert_eq!(claims["sub"], "w");
        assert!(verify_hs256(IDP_KEY, &jwt).is_none());
        assert_eq!(
            base64(b"machine:machine-secret"),
            "bWFjaGluZTptYWNoaW5lLXNlY3JldA=="
        );
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"\xff\xfe\x00"] {
            assert_eq!(base64url_decode(&base64url(bytes)).unwrap(), bytes);
            assert_eq!(base64url_decode(&base64(bytes)).unwrap(), bytes);
        }
    }
}
