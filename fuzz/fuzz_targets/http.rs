//! Fuzz target: see `mcp_fuzz::http_check::check_http`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fuzz::http_check::check_http(data));
