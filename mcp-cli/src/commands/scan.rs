//! `scan [SERVER]...`: the poisoning scan's findings on the tools of the named servers (or
//! every enabled one), without calling any tool; exit 1 when anything is flagged.

use serde_json::{Value, json};

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::hub::ToolScan;
use crate::names;
use crate::output;
use crate::spinner::Spinner;

pub(crate) async fn run(ctx: &mut Context, given: &[String]) -> Result<Exit, Failure> {
    let servers = ctx.hub.named_or_default(given)?;
    let scans = {
        let _spinner = Spinner::start(format!("starting {} server(s)", servers.len()));
        ctx.hub.scan_of(&servers).await
    };
    let (mut exit, mut flagged, mut listed) = (Exit::Success, false, Vec::new());
    for (server, scanned) in scans {
        match scanned {
            Ok(tools) => {
                flagged |= tools.iter().any(|tool| !tool.findings.is_empty());
                listed.push((server, tools));
            }
            Err(error) => {
                let failure = Failure::from(error);
                ctx.report(&failure);
                exit = failure.exit;
            }
        }
    }
    if ctx.json {
        let tools: Vec<Value> = (listed.iter())
            .flat_map(|(server, tools)| shown(server, tools))
            .map(|(name, tool)| {
                let mut value = json!(tool);
                value["qualifiedName"] = json!(name);
                value
            })
            .collect();
        ctx.out.line(&output::pretty(&Value::Array(tools)));
    } else {
        for (server, tools) in &listed {
            for line in describe(server, tools) {
                ctx.out.line(&line);
            }
        }
    }
    Ok(match exit {
        Exit::Success if flagged => Exit::ToolError,
        exit => exit,
    })
}

/// Each tool beside its shown name, `<server>__<tool>`, as `tools` shows it.
fn shown<'a>(server: &str, tools: &'a [ToolScan]) -> Vec<(String, &'a ToolScan)> {
    let own: Vec<&str> = tools.iter().map(|tool| tool.tool.as_str()).collect();
    names::shown_names(server, &own)
        .into_iter()
        .zip(tools)
        .collect()
}

/// A line for the server, then each flagged tool with its findings.
fn describe(server: &str, tools: &[ToolScan]) -> Vec<String> {
    let count = tools
        .iter()
        .filter(|tool| !tool.findings.is_empty())
        .count();
    let verdict = match count {
        0 => "clean".to_owned(),
        n => format!("{n} flagged"),
    };
    let mut lines = vec![format!("{server}: {} tool(s), {verdict}", tools.len())];
    for (name, tool) in shown(server, tools) {
        if tool.findings.is_empty() {
            continue;
        }
        let accepted = match (tool.trusted, tool.withheld) {
            (true, _) => "  (accepted with `trust`)",
            (false, true) => "  (withheld until `trust`)",
            (false, false) => "  (not withheld: scan_tools = false)",
        };
        lines.push(format!("  {name}{accepted}"));
        lines.extend(tool.findings.iter().map(|finding| format!("    {finding}")));
    }
    lines
}
