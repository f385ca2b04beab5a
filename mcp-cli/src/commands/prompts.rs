//! `prompts [SERVER]...`: the prompts of the named servers (or the whole catalogue) with their
//! arguments.

use serde_json::{Value, json};

use crate::commands::Context;
use crate::commands::resources::listed;
use crate::exit::{Exit, Failure};
use crate::hub::PromptEntry;
use crate::output;

pub(crate) async fn run(ctx: &mut Context, given: &[String]) -> Result<Exit, Failure> {
    let (catalogue, exit) = listed(ctx, given).await?;
    if ctx.json {
        let prompts: Vec<Value> = catalogue.prompts.iter().map(as_json).collect();
        ctx.out.line(&output::pretty(&Value::Array(prompts)));
    } else {
        for entry in &catalogue.prompts {
            for line in describe(entry) {
                ctx.out.line(&line);
            }
        }
    }
    Ok(exit)
}

fn as_json(entry: &PromptEntry) -> Value {
    let mut value = serde_json::to_value(&entry.prompt).unwrap_or(Value::Null);
    value["server"] = json!(entry.server);
    value["qualifiedName"] = json!(entry.name);
    value
}

/// The shown name and the first line of the description, then one line per argument.
fn describe(entry: &PromptEntry) -> Vec<String> {
    let first_line = |text: Option<&str>| {
        let line = text.and_then(|text| text.lines().next()).map(str::trim);
        line.filter(|line| !line.is_empty()).map(str::to_owned)
    };
    let prompt = &entry.prompt;
    let mut lines = vec![match first_line(prompt.description.as_deref()) {
        Some(summary) => format!("{}  {summary}", entry.name),
        None => entry.name.clone(),
    }];
    for argument in &prompt.arguments {
        let mut line = format!("    {}", argument.name);
        if argument.required {
            line.push_str(" (required)");
        }
        if let Some(description) = first_line(argument.description.as_deref()) {
            line.push_str(&format!("  {description}"));
        }
        lines.push(line);
    }
    lines
}
