//! An agent host embedding the hub, as the README's "Embedding" section shows it: a hub built
//! from one named config file and nothing else, its catalogue, a call, the file's `deny` and
//! `ask` rules at work, the hub's events, and a clean shutdown.
//!
//! `cargo run -p mcp-cli --example host -- CONFIG [TOOL [JSON_ARGUMENTS]]`
//!
//! CONFIG is all the hub knows: no built-in presets, no user file, no `.mcp.json` or
//! `.mcp-cli.toml` from the working directory. A tool name from a model that names no server
//! in it reaches nothing. For example:
//!
//! ```toml
//! [mcp.everything]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-everything"]
//!
//! [[permissions.rules]]
//! tool = "everything__get-env"
//! action = "deny"
//!
//! [[permissions.rules]]
//! tool = "everything__echo"
//! action = "ask"
//! ```

use std::io::{BufRead, Write};
use std::sync::Arc;

use mcp_cli::config::Config;
use mcp_cli::hub::{Ask, AskHandler, Hub, HubEvent, Settings};
use serde_json::{Value, json};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((config_path, args)) = args.split_first() else {
        eprintln!("usage: host CONFIG [TOOL [JSON_ARGUMENTS]]");
        std::process::exit(2);
    };
    // Exactly this file: `config::load` takes the files it is given and adds nothing.
    let config = match Config::from_files(&[config_path]) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("host: {error}");
            std::process::exit(2);
        }
    };
    let settings = Settings {
        // The host's own name and version, sent to servers in `initialize`.
        client_name: "example-host".to_owned(),
        client_version: "0.1.0".to_owned(),
        ask: Some(ask_on_the_terminal()),
        ..Settings::default()
    };
    let hub = Hub::new(config, settings); // nothing starts yet
    let code = async_io::block_on(async {
        let code = host(&hub, args).await;
        hub.shutdown().await; // every server stopped, in parallel
        code
    });
    std::process::exit(code);
}

/// Asks on the terminal before a call an `ask` rule covers; anything but "y" refuses it. The
/// question waits on a thread of its own, so the hub's other servers keep going meanwhile.
fn ask_on_the_terminal() -> AskHandler {
    Arc::new(|ask: Ask| {
        let (answer, answered) = async_channel::bounded(1);
        std::thread::spawn(move || {
            eprint!("host: call {} with {}? [y/N] ", ask.tool, ask.arguments);
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
            let _ = answer.send_blocking(matches!(line.trim(), "y" | "yes"));
        });
        Box::pin(async move {
            match answered.recv().await {
                Ok(true) => Ok(()),
                _ => Err("declined at the terminal".to_owned()),
            }
        })
    })
}

async fn host(hub: &Hub, args: &[String]) -> i32 {
    // Listened to from now on: list changes and crashes arrive here.
    let events = hub.events();
    // Every server starts in parallel; the ones that cannot are reported, not fatal.
    let catalogue = hub.catalogue().await;
    for (server, error) in &catalogue.failures {
        eprintln!("host: {server} is not available: {error}");
    }
    // A denied tool is not listed at all.
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
        [] => return 0,
    };
    // A name the config does not define, or a denied tool, is an error here, never a start.
    let code = match hub.find(&name).await {
        Ok(tool) => {
            let progress =
                |p: mcp_smol::proto::Progress| eprintln!("host: progress {}", p.progress);
            // A tool an `ask` rule covers is called only once the handler allows it.
            match hub.call(&tool, arguments, &progress).await {
                Ok(raw) => show(&name, raw),
                Err(error) => {
                    eprintln!("host: {error}");
                    3
                }
            }
        }
        Err(error) => {
            eprintln!("host: {error}");
            2
        }
    };
    while let Ok(event) = events.try_recv() {
        match event {
            HubEvent::Failed { server, reason } => eprintln!("host: {server} ended: {reason}"),
            other => eprintln!("host: {other:?}"),
        }
    }
    code
}

/// A call's result as the server sent it; the exit code says whether the tool reported an
/// error.
fn show(name: &str, result: Value) -> i32 {
    println!("--- {name}:\n{result:#}");
    i32::from(result["isError"] == true)
}
