//! The `mcp-cli` binary: a thin shell over [`mcp_cli::run`].

fn main() {
    std::process::exit(mcp_cli::run(std::env::args_os()));
}
