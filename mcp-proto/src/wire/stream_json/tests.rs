//! Unit tests of `stream_json`.

use super::*;
use proptest::prelude::*;
use serde_json::json;

/// What a line decoder makes of `bytes` read whole: checked as UTF-8, blank if nothing
/// but ASCII whitespace, else `serde_json::from_str`. Errors are compared by kind.
fn whole(bytes: &[u8]) -> Option<Result<Value, &'static str>> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some(Err("NotUtf8"));
    };
    if text.bytes().all(|b| b.is_ascii_whitespace()) {
        return None;
    }
    Some(serde_json::from_str(text).map_err(|_| "NotJson"))
}

fn streamed<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Option<Result<Value, &'static str>> {
    let mut parser = JsonStream::new();
    for piece in pieces {
        parser.push(piece);
    }
    parser.finish().map(|parsed| {
        parsed.map_err(|error| match error {
            LineError::NotUtf8 => "NotUtf8",
            LineError::NotJson { .. } => "NotJson",
            _ => "other",
        })
    })
}

/// Parsed in one piece, byte by byte, and cut in two at every byte, `text` gives what
/// serde_json gives.
fn check(text: &[u8]) {
    let expected = whole(text);
    assert_eq!(
        streamed([text]),
        expected,
        "whole: {:?}",
        String::from_utf8_lossy(text)
    );
    assert_eq!(
        streamed(text.chunks(1)),
        expected,
        "bytes: {:?}",
        String::from_utf8_lossy(text)
    );
    for cut in 0..=text.len() {
        let (a, b) = text.split_at(cut);
        assert_eq!(
            streamed([a, b]),
            expected,
            "cut at {cut}: {:?}",
            String::from_utf8_lossy(text)
        );
    }
}

#[test]
fn strings_and_escapes_read_as_serde_json_reads_them() {
    let cases: &[&[u8]] = &[
        br#""""#,
        br#""plain""#,
        br#""\" \\ \/ \b \f \n \r \t""#,
        br#""\u0041\u00e9\u20AC\uFFFF\u0000""#,
        "\"é€😀 raw\"".as_bytes(),
        // Surrogate pairs, and every way a surrogate can be alone.
        br#""\ud83d\ude00 \uD83D\uDE00""#,
        br#""\ud83d""#,
        br#""\ude00""#,
        br#""\ud83dx""#,
        br#""\ud83d\n""#,
        br#""\ud83d\u0041""#,
        br#""\ud83d\ud83d\ude00""#,
        br#""\ud83d\"#,
        br#""\u12""#,
        br#""\u12g4""#,
        br#""\x""#,
        b"\"tab\there\"",
        b"\"nul\x00\"",
        b"\"del\x7f\"",
        br#""unterminated"#,
        br#"{"k\u0065y":"v","\ud83d\ude00":1}"#,
    ];
    for case in cases {
        check(case);
    }
}

#[test]
fn numbers_read_as_serde_json_reads_them() {
    for case in [
        "0",
        "-0",
        "7",
        "-7",
        "1.5",
        "-1.5e10",
        "1E+2",
        "1e-2",
        "0.1e1",
        "123456789.123456789",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "1e308",
        "1e400",
        "-1e400",
        "2.2250738585072014e-308",
        "4.9e-324",
        "01",
        "1.",
        ".5",
        "-",
        "+1",
        "1e",
        "1e+",
        "--1",
        "1.2.3",
        "[1,-2.5e-3,0]",
        "[1-2]",
        "{\"n\":1e5}",
        " 42 ",
        "42x",
        "[0 1]",
    ] {
        check(case.as_bytes());
    }
}

#[test]
fn structure_reads_as_serde_json_reads_it() {
    for case in [
        "{}",
        "[]",
        " { } ",
        "[[],{}]",
        r#"{"a":[1,{"b":null}],"c":true,"d":false}"#,
        r#"{"a":1,"a":2}"#,
        "[1,]",
        r#"{"a":1,}"#,
        "[,1]",
        r#"{,}"#,
        r#"{"a" 1}"#,
        r#"{"a":}"#,
        r#"{1:2}"#,
        "[1 2]",
        "]",
        "}",
        "[}",
        "{]",
        "[1]]",
        "{} {}",
        "true",
        "tru",
        "truex",
        "nul",
        "null",
        "false",
        "fals",
        "[true,false,null]",
        "",
        "   ",
        "\t\r\n",
        "\x0C",
        " \x0C ",
        "\x0C{}",
        "{}\x0C",
        "[\x0C]",
        "[",
        "{",
        r#"{"a""#,
        r#"{"a":"#,
        "[1,",
    ] {
        check(case.as_bytes());
    }
}

#[test]
fn nesting_is_bounded_where_serde_json_bounds_it() {
    for depth in [126, 127, 128, 200] {
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let objects = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        for text in [arrays, objects] {
            let expected = whole(text.as_bytes());
            assert_eq!(streamed([text.as_bytes()]), expected, "depth {depth}");
        }
    }
}

#[test]
fn invalid_utf8_is_reported_as_such_wherever_it_is() {
    let cases: &[&[u8]] = &[
        b"\"\xff\"",
        b"\"\xc3\"",
        b"\"\xc3\\n\"",
        b"\"\\\x80\"",
        b"\"\\\xc3\xa9\"",
        b"\"ok\" \xff",
        b"\xc3\xa9",
        b"[1, 2 x \xe2\x82",
        b"[1, 2 x \xe2\x82\xac]",
        b"{\"a\":\"\x01\xf0\x9f\x98\"}",
        b"{\"a\":\"\x01\xf0\x9f\x98\x80\"}",
        b"\xef\xbb\xbf{}",
        b"\"\xed\xa0\x80\"",
    ];
    for case in cases {
        check(case);
    }
}

#[test]
fn an_error_names_the_fault_its_place_and_the_text() {
    let mut parser = JsonStream::new();
    parser.push(br#"{"jsonrpc":"2.0","id":7,"result":[1,]"#);
    let Some(Err(LineError::NotJson { detail })) = parser.finish() else {
        panic!("not NotJson");
    };
    assert_eq!(
        detail,
        r#"trailing comma at byte 36 in "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":[1,]""#
    );
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[\"\\\\\u{0}-\u{1f}é😀a]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    /// A value written by serde_json (compact or pretty) reads back the same, however its
    /// text is cut.
    #[test]
    fn any_value_cut_anywhere_reads_back(
        value in json(),
        pretty in any::<bool>(),
        cuts in proptest::collection::vec(0usize..64, 0..12),
    ) {
        let text = if pretty {
            serde_json::to_vec_pretty(&value).unwrap()
        } else {
            serde_json::to_vec(&value).unwrap()
        };
        prop_assert_eq!(streamed(pieces(&text, &cuts)), whole(&text));
    }

    /// A text with a byte changed, dropped or added is read as serde_json reads it, valid
    /// or not, however it is cut.
    #[test]
    fn a_damaged_text_cut_anywhere_reads_as_serde_json_reads_it(
        value in json(),
        at in any::<proptest::sample::Index>(),
        byte in proptest::sample::select(
            b"\"\\u{}[],:0-+.eE \x0C\n\x01\x7f\x80\xc3\xa9\xed\xf0dD8t".to_vec()
        ),
        damage in 0..3u8,
        cuts in proptest::collection::vec(0usize..64, 0..12),
    ) {
        let mut text = serde_json::to_vec(&value).unwrap();
        let at = at.index(text.len() + 1);
        match damage {
            0 if at < text.len() => text[at] = byte,
            1 if at < text.len() => {
                text.remove(at);
            }
            _ => text.insert(at, byte),
        }
        prop_assert_eq!(streamed(pieces(&text, &cuts)), whole(&text));
    }
}

proptest! {
    /// The eight-at-a-time scan finds the byte a plain one finds.
    #[test]
    fn the_end_of_a_run_is_found_as_byte_by_byte(
        bytes in proptest::collection::vec(
            prop_oneof![Just(b'"'), Just(b'\\'), 0u8..0x20, 0x20u8..=0xff],
            0..40,
        ),
        plain in 0usize..40,
    ) {
        let mut bytes = bytes;
        bytes.splice(0..0, std::iter::repeat_n(b'a', plain));
        let expected = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
        prop_assert_eq!(string_end(&bytes), expected);
    }
}

/// `text` parsed byte by byte by a parser keeping `keep` entries of a listing.
fn keeping(keep: usize, text: &str) -> Value {
    let mut parser = JsonStream::keeping_listed(keep);
    for byte in text.as_bytes().chunks(1) {
        parser.push(byte);
    }
    parser.finish().unwrap().unwrap()
}

#[test]
fn a_listing_keeps_its_first_entries_and_drops_the_rest_as_read() {
    let listing = |member: &str, entries: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"{member}":[{entries}],"nextCursor":"c"}}}}"#
        )
    };
    for member in LISTED_MEMBERS {
        let text = listing(
            member,
            r#"{"name":"a"},{"name":"b"},{"name":"c"},[1,{"x":2}]"#,
        );
        let kept = keeping(2, &text);
        assert_eq!(
            kept["result"][member],
            json!([{"name": "a"}, {"name": "b"}])
        );
        assert_eq!(kept["result"]["nextCursor"], "c");
        assert_eq!(kept["id"], 1);
    }
    // In a batch too.
    let batch = format!("[{}]", listing("tools", "1,2,3"));
    assert_eq!(keeping(1, &batch)[0]["result"]["tools"], json!([1]));
}

#[test]
fn arrays_that_are_no_listing_are_kept_whole() {
    let cases = [
        // Other members of a result, and a listed name deeper in one.
        r#"{"id":1,"result":{"content":[1,2,3],"structuredContent":{"tools":[1,2,3]}}}"#,
        // A listed name outside a result: params, an error's data.
        r#"{"id":1,"method":"x","params":{"tools":[1,2,3]}}"#,
        r#"{"id":1,"error":{"code":1,"message":"m","data":{"tools":[1,2,3]}}}"#,
        // A result that is itself the array, and an array at the top.
        r#"{"id":1,"result":[1,2,3]}"#,
        r#"[1,2,3]"#,
    ];
    for text in cases {
        assert_eq!(
            keeping(1, text),
            serde_json::from_str::<Value>(text).unwrap(),
            "{text}"
        );
    }
}

#[test]
fn entries_past_those_kept_must_still_be_json() {
    let text = r#"{"id":1,"result":{"tools":[1,2,{"bad"}]}}"#;
    let mut parser = JsonStream::keeping_listed(1);
    parser.push(text.as_bytes());
    assert!(matches!(
        parser.finish(),
        Some(Err(LineError::NotJson { .. }))
    ));
}

/// `text` cut after each of `cuts` bytes in turn, the rest in one piece.
fn pieces<'a>(mut text: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    for cut in cuts {
        let (piece, rest) = text.split_at((*cut).min(text.len()));
        pieces.push(piece);
        text = rest;
    }
    pieces.push(text);
    pieces
}
