//! An agent host embedding the hub under tokio, as the book's Embedding chapter
//! (`docs/embedding.md`) shows it: a hub built from one named config file and nothing else,
//! its catalogue, a call by the name a model would give, the file's `deny` and `ask` rules at
//! work, the hub's events, and a clean shutdown.
//!
//! `cargo run -p mcp-client-cli --example host -- CONFIG [TOOL [JSON_ARGUMENTS]]`
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
use std::process::ExitCode;
use std::time::Duration;

use mcp_client_cli::config::Config;
use mcp_client_cli::hub::{Approval, Ask, Hub, HubError, HubEvent, Settings};
use mcp_client_cli::serde_json::{self, Value, json};

// The hub runs its servers on a thread of its own, so any runtime (or none) will do.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((config_path, args)) = args.split_first() else {
        eprintln!("usage: host CONFIG [TOOL [JSON_ARGUMENTS]]");
        return ExitCode::from(2);
    };
    // Exactly this file: no presets, no discovery.
    let config = match Config::from_files(&[config_path]) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("host: {error}");
            return ExitCode::from(2);
        }
    };
    let settings = Settings::builder()
        .client("example-host", "0.1.0") // what servers hear in `initialize`
        .ask(ask_on_the_terminal)
        .build();
    let hub = Hub::new(config, settings); // nothing starts yet
    // List changes, crashes and the like, from now on, on a task of their own.
    let events = hub.events();
    let listener = tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            match event {
                HubEvent::Failed { server, reason } => eprintln!("host: {server} ended: {reason}"),
                HubEvent::Lagged { missed } => eprintln!("host: missed {missed} events"),
                other => eprintln!("host: {other:?}"),
            }
        }
    });
    let code = host(&hub, args).await;
    hub.shutdown().await; // every server stopped, in parallel
    drop(hub); // and with the last clone of the hub, the event stream ends
    let _ = listener.await;
    ExitCode::from(code)
}

/// Asks on the terminal before a call an `ask` rule covers; anything but "y" refuses it. The
/// question waits on a blocking thread, so the runtime and the hub keep going meanwhile.
async fn ask_on_the_terminal(ask: Ask) -> Approval {
    let question = format!("host: call {} with {}? [y/N] ", ask.tool, ask.arguments);
    let answered = tokio::task::spawn_blocking(move || {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        matches!(line.trim(), "y" | "yes")
    });
    match answered.await {
        Ok(true) => Ok(()),
        _ => Err("declined at the terminal".to_owned()),
    }
}

async fn host(hub: &Hub, args: &[String]) -> u8 {
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
            Ok(arguments) => (name, arguments),
            Err(error) => {
                eprintln!("host: the arguments are not JSON: {error}");
                return 2;
            }
        },
        [name] => (name, json!({})),
        [] => return 0,
    };
    // The name as a model gives it. One the config does not define, or a denied tool, is an
    // error here, never a start; one an `ask` rule covers is called once the handler allows.
    let called = hub
        .call(name, arguments)
        .timeout(Duration::from_secs(60))
        .on_progress(|p| eprintln!("host: progress {}", p.progress))
        .await;
    match called {
        Ok(result) => {
            println!("--- {name}:\n{result:#}");
            u8::from(result["isError"] == true)
        }
        // Chosen by variant and code, never by the message's text.
        Err(error @ (HubError::UnknownServer { .. } | HubError::UnknownTool { .. })) => {
            eprintln!("host: no such tool: {error}");
            2
        }
        Err(error @ (HubError::ToolDenied { .. } | HubError::NotApproved { .. })) => {
            eprintln!("host: refused: {error}");
            4
        }
        Err(error) => {
            match error.rpc_code() {
                Some(code) => eprintln!("host: the server answered error {code}: {error}"),
                None => eprintln!("host: {error}"),
            }
            3
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run from a folder whose `.mcp.json` and `.mcp-cli.toml` define servers, the agent
    /// reaches neither them nor a built-in preset's name: only the file it is given. (The only
    /// test in this binary, so changing the working directory disturbs no other.)
    #[tokio::test(flavor = "current_thread")]
    async fn names_outside_the_named_file_reach_nothing() {
        let dir = std::env::temp_dir().join(format!("mcp-example-host-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Either project server, started, would leave this file behind.
        let reached = dir.join("reached");
        let touch = json!({"command": "touch", "args": [reached]});
        let project = json!({"mcpServers": {"proj": touch}}).to_string();
        std::fs::write(dir.join(".mcp.json"), project).unwrap();
        let local = format!("[mcp.local]\ncommand = \"touch\"\nargs = [{reached:?}]\n");
        std::fs::write(dir.join(".mcp-cli.toml"), local).unwrap();
        std::fs::write(dir.join("agent.toml"), "[mcp.named]\ncommand = \"true\"\n").unwrap();
        std::env::set_current_dir(&dir).unwrap();

        let config = Config::from_files(&["agent.toml"]).unwrap();
        let hub = Hub::new(config, Settings::builder().client("test", "0").build());
        let guesses = [
            "filesystem__read_text_file",
            "everything__echo",
            "memory__read_graph",
            "proj__anything",
            "local__anything",
        ];
        for guess in guesses {
            assert_eq!(host(&hub, &[guess.to_owned()]).await, 2, "{guess}");
            let error = hub.call(guess, json!({})).await.unwrap_err();
            assert!(
                matches!(&error, HubError::UnknownServer { known, .. } if known == &["named"]),
                "{guess}: {error:?}"
            );
        }
        let servers: Vec<String> = hub.status().into_iter().map(|s| s.name).collect();
        assert_eq!(servers, ["named"]);
        hub.shutdown().await;
        assert!(
            !reached.exists(),
            "a server of the working directory was started"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
