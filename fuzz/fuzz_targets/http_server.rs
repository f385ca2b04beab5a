//! Fuzz target: see `mcp_fuzz::http_server_check::check_http_server`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fuzz::http_server_check::check_http_server(data));
