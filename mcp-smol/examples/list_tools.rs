//! Starts the server given on the command line and prints its tools:
//! `cargo run -p mcp-smol --example list_tools -- npx -y @modelcontextprotocol/server-everything`.

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: list_tools PROGRAM [ARGS]...");
        std::process::exit(2);
    };
    let command = mcp_smol::ServerCommand::new(program).args(args);
    let outcome = async_io::block_on(async {
        let client = mcp_smol::connect(&command, mcp_smol::Options::default()).await?;
        let info = client.wait_ready().await?;
        println!(
            "{} {} (protocol {})",
            info.server.name, info.server.version, info.protocol_version
        );
        let tools = client.list_tools().await;
        client.close().await;
        for tool in tools? {
            println!(
                "  {}: {}",
                tool.name,
                tool.description
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or("")
            );
        }
        Ok::<_, mcp_smol::Error>(())
    });
    if let Err(error) = outcome {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}
