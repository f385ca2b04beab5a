//! `scan [SERVER]...`: the poisoning scan's findings on the tools, prompts, resources and
//! resource templates of the named servers (or every enabled one), without calling any tool;
//! exit 1 when anything is flagged.

use serde_json::{Value, json};

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::hub::{FeatureScan, ToolScan};
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
                let features = match ctx.hub.scan_features(&server).await {
                    Ok(features) => features,
                    Err(error) => {
                        let failure = Failure::from(error);
                        ctx.report(&failure);
                        exit = failure.exit;
                        Vec::new()
                    }
                };
                flagged |= tools.iter().any(|tool| !tool.findings.is_empty());
                flagged |= features.iter().any(|entry| !entry.findings.is_empty());
                listed.push((server, tools, features));
            }
            Err(error) => {
                let failure = Failure::from(error);
                ctx.report(&failure);
                exit = failure.exit;
            }
        }
    }
    if ctx.json {
        let mut entries = Vec::new();
        for (server, tools, features) in &listed {
            entries.extend(shown(server, tools).into_iter().map(|(name, tool)| {
                let mut value = json!(tool);
                value["qualifiedName"] = json!(name);
                value
            }));
            entries.extend(features.iter().map(|entry| {
                let mut value = json!(entry);
                if entry.feature == "prompt" {
                    value["qualifiedName"] = json!(names::qualified(server, &entry.name));
                }
                value
            }));
        }
        ctx.out.line(&output::pretty(&Value::Array(entries)));
    } else {
        for (server, tools, features) in &listed {
            for line in describe(server, tools, features) {
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

/// A line for the server (its tools, then each kind of feature it has), then each flagged
/// tool, prompt, resource and template with its findings.
fn describe(server: &str, tools: &[ToolScan], features: &[FeatureScan]) -> Vec<String> {
    let count = |what: &str, flagged: usize, total: usize| {
        let verdict = match flagged {
            0 => "clean".to_owned(),
            n => format!("{n} flagged"),
        };
        format!("{total} {what}(s), {verdict}")
    };
    let flagged = tools.iter().filter(|tool| !tool.findings.is_empty());
    let mut counts = vec![count("tool", flagged.count(), tools.len())];
    for feature in ["prompt", "resource", "resource template"] {
        let of_kind: Vec<&FeatureScan> =
            (features.iter()).filter(|e| e.feature == feature).collect();
        let flagged = of_kind.iter().filter(|entry| !entry.findings.is_empty());
        if !of_kind.is_empty() {
            counts.push(count(feature, flagged.count(), of_kind.len()));
        }
    }
    let mut lines = vec![format!("{server}: {}", counts.join("; "))];
    let accepted = |trusted: bool, withheld: bool| match (trusted, withheld) {
        (true, _) => "  (accepted with `trust`)",
        (false, true) => "  (withheld until `trust`)",
        (false, false) => "  (not withheld: scan_tools = false)",
    };
    for (name, tool) in shown(server, tools) {
        if tool.findings.is_empty() {
            continue;
        }
        lines.push(format!("  {name}{}", accepted(tool.trusted, tool.withheld)));
        lines.extend(tool.findings.iter().map(|finding| format!("    {finding}")));
    }
    for entry in features.iter().filter(|entry| !entry.findings.is_empty()) {
        let name = match entry.feature {
            "prompt" => names::qualified(server, &entry.name),
            _ => entry.name.clone(),
        };
        let (feature, state) = (entry.feature, accepted(entry.trusted, entry.withheld));
        lines.push(format!("  {feature} {name}{state}"));
        lines.extend(
            entry
                .findings
                .iter()
                .map(|finding| format!("    {finding}")),
        );
    }
    lines
}
