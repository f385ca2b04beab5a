//! Replays every fuzz corpus file through the fuzz targets' own checks, on stable, so a
//! regression the fuzzer once found fails `cargo test` without nightly.

#![allow(clippy::unwrap_used)]

#[path = "../../fuzz/src/checks.rs"]
#[allow(dead_code, unreachable_pub)]
mod checks;

#[path = "../../fuzz/src/http_check.rs"]
#[allow(dead_code, unreachable_pub)]
mod http_check;

#[path = "../../fuzz/src/http_server_check.rs"]
#[allow(dead_code, unreachable_pub)]
mod http_server_check;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut count = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(
            outcome.is_ok(),
            "corpus file {} fails its check",
            path.display()
        );
        count += 1;
    }
    assert!(count > 0, "corpus {} is empty", dir.display());
}

#[test]
fn line_decoder_corpus() {
    replay("line_decoder", checks::check_line_decoder);
}

#[test]
fn stream_json_corpus() {
    replay("stream_json", checks::check_stream_json);
}

#[test]
fn connection_corpus() {
    replay("connection", checks::check_connection);
}

#[test]
fn handshake_corpus() {
    replay("handshake", checks::check_handshake);
}

#[test]
fn server_corpus() {
    replay("server", checks::check_server);
}

#[test]
fn sse_corpus() {
    replay("sse", checks::check_sse);
}

#[test]
fn http_corpus() {
    replay("http", http_check::check_http);
}

#[test]
fn http_server_corpus() {
    replay("http_server", http_server_check::check_http_server);
}
