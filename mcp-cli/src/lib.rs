//! The `mcp-cli` library: config, argument typing and commands, driven by `main.rs`.
