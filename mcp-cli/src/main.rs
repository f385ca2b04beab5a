//! The `mcp-cli` binary: a thin shell over [`mcp_cli`].

fn main() {
    eprintln!("mcp-cli: not built yet");
    std::process::exit(2);
}
