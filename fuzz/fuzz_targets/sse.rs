//! Fuzz target: see `mcp_fuzz::checks::check_sse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fuzz::checks::check_sse(data));
