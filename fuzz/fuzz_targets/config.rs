//! Fuzz target: see `mcp_fuzz::config_check::check_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_fuzz::config_check::check_config(data));
