//! The checks behind the fuzz targets, shared with the stable corpus-replay tests.

pub mod checks;
pub mod config_check;
pub mod http_check;
pub mod http_server_check;

// mcp-cli's config reader, compiled here from its own sources with the two small modules it
// uses, so the config target builds without the rest of mcp-cli and mcp-smol (hyper, rustls,
// landlock). It also guards the layering: config/ must not reach into the host layer.
#[allow(dead_code, unreachable_pub)]
#[path = "../../mcp-cli/src/config/mod.rs"]
pub mod config;
#[allow(dead_code, unreachable_pub)]
#[path = "../../mcp-cli/src/files.rs"]
mod files;
#[allow(dead_code, unreachable_pub)]
#[path = "../../mcp-cli/src/names.rs"]
mod names;
