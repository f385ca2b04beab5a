//! Fuzz target: see `mcp_fuzz::checks::check_stream_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fuzz::checks::check_stream_json(data));
