//! `trust SERVER`: accepts the server's current tool definitions as its pins, after showing
//! what changed since they were pinned and what the poisoning scan flagged (and, on a
//! terminal, asking first).

use std::io::{BufRead, IsTerminal, Write};

use serde_json::json;

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::hub::{FeatureScan, PinChange, ToolScan};
use crate::output;

pub(crate) async fn run(ctx: &mut Context, given: &str) -> Result<Exit, Failure> {
    let server = ctx.hub.resolve(given)?;
    ctx.hub.check(&server)?;
    let json = ctx.json;
    let flagged: Vec<ToolScan> = match ctx.hub.scan_of(std::slice::from_ref(&server)).await.pop() {
        Some((_, Ok(tools))) => tools.into_iter().filter(|tool| tool.withheld).collect(),
        _ => Vec::new(),
    };
    let features = ctx.hub.scan_features(&server).await.unwrap_or_default();
    let features: Vec<FeatureScan> = features.into_iter().filter(|e| e.withheld).collect();
    let approve = |changes: &[(String, PinChange)]| {
        if !json {
            for (tool, change) in changes {
                output::diagnostic(&format!("{server}: tool {tool} {change}"));
            }
            for tool in &flagged {
                let name = &tool.tool;
                output::diagnostic(&format!("{server}: tool {name} flagged by the scan:"));
                for finding in &tool.findings {
                    output::diagnostic(&format!("    {finding}"));
                }
            }
            for entry in &features {
                let (feature, name) = (entry.feature, &entry.name);
                output::diagnostic(&format!("{server}: {feature} {name} flagged by the scan:"));
                for finding in &entry.findings {
                    output::diagnostic(&format!("    {finding}"));
                }
            }
        }
        // Running the command is the decision; a person at a terminal gets to read first.
        let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        (changes.is_empty() && flagged.is_empty() && features.is_empty())
            || !terminal
            || ask("Accept these definitions?")
    };
    let changes = ctx.hub.trust(&server, &approve).await?;
    if json {
        let changed: Vec<_> = (changes.iter())
            .map(|(tool, change)| json!({"tool": tool, "fields": change.fields, "diff": change.diff}))
            .collect();
        let flagged: Vec<_> = (flagged.iter())
            .map(|tool| json!({"tool": tool.tool, "findings": tool.findings}))
            .collect();
        let features: Vec<_> = (features.iter())
            .map(|e| json!({"feature": e.feature, "name": e.name, "findings": e.findings}))
            .collect();
        let value = json!({"server": server, "changed": changed, "flagged": flagged,
            "flaggedFeatures": features});
        ctx.out.line(&output::pretty(&value));
    } else {
        output::diagnostic(&format!(
            "{server}: {} changed tool definition(s) accepted, {} flagged by the scan; its \
             current tools are pinned",
            changes.len(),
            flagged.len()
        ));
        if !features.is_empty() {
            let accepted = features.len();
            output::diagnostic(&format!(
                "{server}: {accepted} flagged prompt(s), resource(s) or template(s) accepted"
            ));
        }
    }
    Ok(Exit::Success)
}

fn ask(question: &str) -> bool {
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "{question} [y/N] ").and_then(|()| stderr.flush());
    let mut answer = String::new();
    let read = std::io::stdin().lock().read_line(&mut answer);
    read.is_ok() && matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
}
