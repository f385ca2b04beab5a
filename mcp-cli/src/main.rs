//! The `mcp-cli` binary: a thin shell over [`mcp_client_cli::run`].

fn main() {
    std::process::exit(mcp_client_cli::run(std::env::args_os()));
}
