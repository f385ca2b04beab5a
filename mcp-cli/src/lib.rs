//! The `mcp-client-cli` library (`mcp_client_cli`): the host layer ([`hub::Hub`], many
//! servers under one config and one policy), the config reader, and the command line on top
//! of them.
//!
//! `run` takes the command line and returns the exit code, so tests can drive the whole
//! program in-process or through the binary. Hosts embed [`hub::Hub`] directly, and depend on
//! this crate with `default-features = false`: the `cli` feature (on by default, for `cargo
//! install`) is the binary, `run` and the modules only they use, with clap and its kin.
//!
//! Everything the hub takes and returns is reachable from here, so an embedder needs no
//! dependency of its own on the crates below: the protocol's types ([`Tool`], [`Request`],
//! [`CallToolResult`], [`RpcError`], ... and all of [`proto`]), the adapter's errors
//! ([`smol::Error`]), [`serde_json`] for arguments and results, and the executor and the
//! receiver of [`hub::Settings::executor`] and [`hub::Hub::events`]. A server's JSON-RPC error is one call away:
//! [`HubError::rpc_code`](hub::HubError::rpc_code); a config error says where it is and what
//! kind it is ([`config::ConfigError`]).

#![warn(missing_docs)]

#[cfg(feature = "cli")]
mod adhoc;
#[cfg(feature = "cli")]
mod approvals;
#[cfg(feature = "cli")]
mod approve;
#[cfg(feature = "cli")]
pub mod arguments;
pub mod auth;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
mod commands;
pub mod config;
#[cfg(feature = "cli")]
mod daemon;
/// What a downstream crate cannot do with the API (the enums it matches are non-exhaustive).
#[cfg(doctest)]
mod downstream;
#[cfg(feature = "cli")]
mod elicit;
#[cfg(feature = "cli")]
pub mod exit;
mod files;
#[cfg(feature = "cli")]
mod gateway;
#[cfg(feature = "cli")]
mod hints;
#[cfg(feature = "cli")]
mod host;
pub mod hub;
pub mod logs;
pub mod names;
mod nesting;
// The command line's own: stdout and stderr, the state folder's layout. The hub uses a
// little of each (a notice, where tokens live by default), which is no API for an embedder,
// so without the `cli` feature they are private and most of them unused.
#[cfg(feature = "cli")]
pub mod output;
#[cfg(not(feature = "cli"))]
#[allow(dead_code, unreachable_pub)]
mod output;
#[cfg(feature = "cli")]
mod registry;
#[cfg(feature = "cli")]
mod run;
pub mod scan;
#[cfg(feature = "cli")]
pub mod search;
mod secrets;
#[cfg(feature = "cli")]
mod skills;
#[cfg(feature = "cli")]
mod spill;
#[cfg(feature = "cli")]
mod spinner;
#[cfg(feature = "cli")]
pub mod state;
#[cfg(not(feature = "cli"))]
#[allow(dead_code, unreachable_pub)]
mod state;

// What the host layer's API takes and returns from the crates under it, reachable from here
// so that an embedder names, decodes and matches it without depending on them itself.
pub use async_channel::Receiver;
pub use async_executor::Executor;
pub use mcp_proto::{
    self as proto, CallToolResult, Content, Progress, Prompt, Request, RequestError, Resource,
    ResourceTemplate, RpcError, Tool,
};
pub use mcp_smol::{self as smol, Disconnect};
pub use serde_json;

#[cfg(feature = "cli")]
pub use run::run;

#[cfg(test)]
mod tests {
    /// The command line's own modules, public only with the `cli` feature.
    const CLI_ONLY: [&str; 4] = ["arguments", "output", "search", "state"];

    /// The attributes right above line `at` of `lines`, nearest first.
    fn attributes<'a>(lines: &[&'a str], at: usize) -> Vec<&'a str> {
        (lines[..at].iter().rev())
            .map(|line| line.trim())
            .take_while(|line| line.starts_with("#["))
            .collect()
    }

    /// The feature is compiled in here, so the build without it cannot be looked at: what
    /// decides it is read from this file instead. Each of [`CLI_ONLY`] is declared, every
    /// public declaration of it (and every re-export from it) is under
    /// `#[cfg(feature = "cli")]`, and any other is private.
    #[test]
    fn the_command_lines_own_modules_are_public_only_with_the_cli_feature() {
        let source = include_str!("lib.rs");
        let lines: Vec<&str> = source
            .lines()
            .take_while(|l| *l != "#[cfg(test)]")
            .collect();
        let cli = "#[cfg(feature = \"cli\")]";
        for module in CLI_ONLY {
            let declared: Vec<usize> = (0..lines.len())
                .filter(|&i| {
                    let line = lines[i].trim();
                    line.ends_with(&format!("mod {module};"))
                        || line.contains(&format!(" {module}::"))
                })
                .collect();
            assert!(
                (declared.iter()).any(|&i| lines[i].contains(&format!("mod {module};"))),
                "{module} is not declared in lib.rs"
            );
            for at in declared {
                let line = lines[at].trim();
                let public = line.starts_with("pub mod") || line.starts_with("pub use");
                let above = attributes(&lines, at);
                if public {
                    assert!(
                        above.contains(&cli),
                        "public without the cli feature: {line}"
                    );
                } else {
                    assert!(
                        line.starts_with("mod "),
                        "neither private nor cli-only: {line}"
                    );
                }
            }
        }
    }
}
