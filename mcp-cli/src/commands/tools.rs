//! `tools [SERVER]... [--refresh]`: the tools of the named servers (or the whole catalogue) with
//! their parameters, policy applied; from the catalogue on disk, or listed live with `--refresh`.

use serde_json::{Value, json};

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::hub::ToolEntry;
use crate::spinner::Spinner;
use crate::{arguments, output};

pub(crate) async fn run(
    ctx: &mut Context,
    given: &[String],
    refresh: bool,
) -> Result<Exit, Failure> {
    let servers = ctx.hub.named_or_default(given)?;
    if let Some(notice) = crate::host::pending_notice(&ctx.hub.pending()) {
        ctx.notice(&notice);
    }
    let mut catalogue = {
        let _spinner = Spinner::start(format!("listing {} server(s)", servers.len()));
        match refresh {
            true => ctx.hub.tools_live(&servers).await,
            false => ctx.hub.tools_of(&servers).await,
        }
    };
    let exit = ctx.report_left_out(&mut catalogue);
    if ctx.json {
        let tools: Vec<Value> = catalogue.tools.iter().map(as_json).collect();
        ctx.out.line(&output::pretty(&Value::Array(tools)));
    } else {
        for entry in &catalogue.tools {
            for line in describe(entry) {
                ctx.out.line(&line);
            }
        }
    }
    Ok(exit)
}

fn as_json(entry: &ToolEntry) -> Value {
    let mut value = serde_json::to_value(&*entry.tool).unwrap_or(Value::Null);
    value["server"] = json!(entry.server);
    value["qualifiedName"] = json!(entry.name);
    value
}

/// The shown name and the first line of the description, then one line per parameter.
fn describe(entry: &ToolEntry) -> Vec<String> {
    let tool = &entry.tool;
    let summary = tool.description.as_deref().and_then(|d| d.lines().next());
    let mut first = match summary {
        Some(summary) if !summary.trim().is_empty() => {
            format!("{}  {}", entry.name, summary.trim())
        }
        _ => entry.name.clone(),
    };
    if tool.requires_tasks() {
        first.push_str("  [runs as a task]");
    }
    let mut lines = vec![first];
    let schema = &tool.input_schema;
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (parameter, property) in properties {
            let kinds = arguments::property_types(property);
            let mut line = match kinds.as_slice() {
                [] => format!("    {parameter}: any"),
                kinds => format!("    {parameter}: {}", kinds.join(" | ")),
            };
            if required.contains(&parameter.as_str()) {
                line.push_str(" (required)");
            }
            if let Some(choices) = property.get("enum").and_then(Value::as_array) {
                let choices: Vec<String> = choices.iter().map(Value::to_string).collect();
                line.push_str(&format!(", one of {}", choices.join(", ")));
            }
            let description = property.get("description").and_then(Value::as_str);
            if let Some(first) = description.and_then(|d| d.lines().next()).map(str::trim)
                && !first.is_empty()
            {
                line.push_str(&format!("  {first}"));
            }
            lines.push(line);
        }
    }
    lines
}
