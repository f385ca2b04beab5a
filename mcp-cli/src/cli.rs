//! The command line, as clap sees it (DESIGN §5.1).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "mcp-cli",
    version,
    about = "Call the tools of MCP servers from the shell",
    after_help = "Exit codes: 0 success, 1 the tool reported an error, 2 usage or config error, \
                  3 server failure, 4 timeout."
)]
pub(crate) struct Cli {
    /// Config file to read (repeatable; later files override earlier ones by server name).
    /// Without it: $MCP_CLI_CONFIG, else the user file then .mcp-cli.toml and .mcp.json here.
    #[arg(long = "config", value_name = "FILE", global = true)]
    pub(crate) configs: Vec<PathBuf>,

    /// Print machine-readable JSON: results on stdout, errors as one object on stderr.
    #[arg(long, global = true)]
    pub(crate) json: bool,

    /// Per-call timeout in seconds (overrides the config's call_timeout_sec).
    #[arg(long, value_name = "SECS", global = true, value_parser = parse_seconds)]
    pub(crate) timeout: Option<std::time::Duration>,

    /// Allow calls that an `ask` rule covers without asking (needed when there is no terminal).
    #[arg(long, global = true)]
    pub(crate) yes: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Call one tool: `call SERVER TOOL [KEY=VALUE | KEY:=JSON]...` or `call SERVER__TOOL ...`.
    Call {
        /// The server name, or SERVER__TOOL / SERVER.TOOL in one token.
        server: String,
        /// The tool name, then its arguments: KEY=VALUE (typed by the tool's schema) or
        /// KEY:=JSON (raw JSON).
        #[arg(value_name = "TOOL | ARG")]
        rest: Vec<String>,
        /// All arguments as one JSON object, or `-` to read it from stdin; KEY=VALUE pairs
        /// override its keys.
        #[arg(long = "args", value_name = "JSON")]
        args_json: Option<String>,
    },
    /// List the tools of the named servers (all enabled ones if none), with parameters.
    Tools { servers: Vec<String> },
    /// Start every enabled server in parallel and show NAME STATE TOOLS PID COMMAND.
    Servers,
    /// Print the last lines of a server's stderr log.
    Logs {
        server: String,
        /// How many lines.
        #[arg(short = 'n', default_value_t = 50)]
        lines: usize,
    },
}

fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|duration| !duration.is_zero())
        .ok_or_else(|| format!("{text:?} is not a positive number of seconds"))
}
