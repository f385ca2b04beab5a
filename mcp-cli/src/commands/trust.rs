//! `trust SERVER`: accepts the server's current tool definitions as its pins, after showing
//! what changed since they were pinned and what the poisoning scan flagged. Accepting them is
//! the person's decision: asked on a terminal, taken by `--yes`, and refused without either,
//! so that an agent cannot clear a rug pull by running the command.

use std::cell::Cell;

use serde_json::json;

use crate::approve::{Decision, decide};
use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::hub::{FeatureScan, PinChange, ToolScan};
use crate::output;

pub(crate) async fn run(ctx: &mut Context, given: &str) -> Result<Exit, Failure> {
    let server = ctx.hub.resolve(given)?;
    ctx.hub.check(&server)?;
    let (json, yes) = (ctx.json, ctx.yes);
    let decision = Cell::new(Decision::Yes);
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
        if changes.is_empty() && flagged.is_empty() && features.is_empty() {
            return true;
        }
        decision.set(decide(yes, "Accept these definitions?"));
        decision.get() == Decision::Yes
    };
    let changes = match ctx.hub.trust(&server, &approve).await {
        Ok(changes) => changes,
        Err(error) => {
            return Err(match decision.get() {
                Decision::Yes => error.into(),
                Decision::No => Failure::usage(format!(
                    "{server}: not accepted; its pins are left as they were"
                )),
                Decision::NoTerminal => Failure::usage(format!(
                    "{server}: not accepted: there is no terminal to ask on, and accepting \
                     changed or flagged definitions is the person's decision (a person who \
                     has read the above may pass --yes); its pins are left as they were"
                )),
            });
        }
    };
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
