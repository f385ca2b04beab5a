//! An agent host embedding the hub: it loads the config the way `mcp-cli` finds it, prints the
//! catalogue, and calls one tool by its namespaced name.
//!
//! `cargo run -p mcp-cli --example host -- [TOOL [JSON_ARGUMENTS]]`; without a tool it calls
//! `everything__echo` when the catalogue has it (the preset, with no config of your own).

use mcp_cli::hub::{Hub, Settings};
use mcp_cli::{config, output, state};
use mcp_smol::proto::CallToolResult;
use serde_json::{Value, json};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env = |key: &str| std::env::var(key).ok();
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let files = config::discover(&[], &env, &cwd);
    let config = match config::load(&files, &env, &cwd) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("host: {error}");
            std::process::exit(2);
        }
    };
    let settings = Settings {
        log_dir: Some(state::Folder::of_env(&env).logs()),
        ..Settings::default()
    };
    let hub = Hub::new(config, settings);
    let code = async_io::block_on(async {
        let code = host(&hub, &args).await;
        hub.shutdown().await;
        code
    });
    std::process::exit(code);
}

async fn host(hub: &Hub, args: &[String]) -> i32 {
    // Every server starts in parallel; the ones that cannot are reported, not fatal.
    let catalogue = hub.catalogue().await;
    for (server, error) in &catalogue.failures {
        eprintln!("host: {server} is not available: {error}");
    }
    for tool in &catalogue.tools {
        let summary = tool.tool.description.as_deref().unwrap_or("");
        println!("{}  {}", tool.name, summary.lines().next().unwrap_or(""));
    }
    let (name, arguments) = match args {
        [name, arguments, ..] => match serde_json::from_str::<Value>(arguments) {
            Ok(arguments) => (name.clone(), arguments),
            Err(error) => {
                eprintln!("host: the arguments are not JSON: {error}");
                return 2;
            }
        },
        [name] => (name.clone(), json!({})),
        [] if catalogue.get("everything__echo").is_some() => (
            "everything__echo".to_owned(),
            json!({"message": "hello from an embedded hub"}),
        ),
        [] => return 0,
    };
    let tool = match hub.find(&name).await {
        Ok(tool) => tool,
        Err(error) => {
            eprintln!("host: {error}");
            return 2;
        }
    };
    let progress = |p: mcp_smol::proto::Progress| eprintln!("host: progress {}", p.progress);
    match hub.call(&tool, arguments, &progress).await {
        Ok(raw) => match CallToolResult::from_value(raw) {
            Ok(result) => {
                println!("--- {name}:");
                for line in output::render_call(&result) {
                    println!("{line}");
                }
                i32::from(result.is_error)
            }
            Err(error) => {
                eprintln!("host: {name} answered something unreadable: {error}");
                3
            }
        },
        Err(error) => {
            eprintln!("host: {error}");
            3
        }
    }
}
