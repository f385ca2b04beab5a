//! `prompt SERVER NAME [KEY=VALUE]...`: one prompt's messages, its arguments checked against
//! what the prompt declares before anything is sent.

use mcp_smol::proto::{GetPromptResult, Prompt, Request};
use serde_json::{Value, json};

use crate::commands::{Context, with_raw};
use crate::exit::{Exit, Failure};
use crate::spinner::Spinner;
use crate::{arguments, output};

/// The server, the prompt's name and its arguments, from `SERVER NAME [KEY=VALUE]...`. Under
/// `--stdio` or `--http` (`adhoc`, the server's name) the SERVER word may be left out: the
/// first word is then the prompt, unless it is the server's name and a name follows it.
pub(crate) fn words(
    adhoc: Option<&str>,
    first: String,
    rest: Vec<String>,
) -> Result<(String, String, Vec<String>), Failure> {
    let named = rest.first().is_some_and(|word| !word.contains('='));
    let mut words = match adhoc {
        Some(adhoc) if !(adhoc == first && named) => vec![adhoc.to_owned(), first],
        _ => vec![first],
    };
    words.extend(rest);
    let mut words = words.into_iter();
    match (words.next(), words.next()) {
        (Some(server), Some(name)) => Ok((server, name, words.collect())),
        (server, _) => Err(Failure::usage(format!(
            "which prompt? use `mcp-cli prompt {} NAME [KEY=VALUE]...`",
            server.unwrap_or_default()
        ))),
    }
}

pub(crate) async fn run(
    ctx: &mut Context,
    server: &str,
    name: &str,
    pairs: &[String],
) -> Result<Exit, Failure> {
    // Mistakes in the pairs are found before any server starts.
    arguments::build(&json!({}), None, pairs).map_err(|e| Failure::usage(e.0))?;
    let server = ctx.hub.resolve(server)?;
    ctx.hub.check(&server)?;
    let prompt = {
        let _spinner = Spinner::start(format!("starting {server}"));
        ctx.hub.find_prompt(&server, name).await?
    };
    let arguments = arguments::build(&schema(&prompt.prompt), None, pairs)
        .map_err(|e| Failure::usage(format!("{}: {}", prompt.name, e.0)))?;
    // Prompt arguments are strings: a `KEY:=JSON` value that is not one goes as its JSON text.
    let arguments = (arguments.into_iter())
        .map(|(key, value)| match value {
            Value::String(_) => (key, value),
            other => (key, Value::String(other.to_string())),
        })
        .collect();
    let got = {
        let _spinner = Spinner::start(format!("getting {}", prompt.name));
        let request = Request::get_prompt(&prompt.prompt.name, arguments).untyped();
        ctx.hub.request(&server, request).await
    };
    let decoded = got
        .map_err(Failure::from)
        .and_then(|raw| with_raw::<GetPromptResult>(&server, "prompts/get", raw));
    let (result, raw) = match decoded {
        Ok(decoded) => decoded,
        Err(failure) => {
            ctx.report(&failure);
            return Ok(failure.exit);
        }
    };
    if result.skipped > 0 {
        ctx.notice(&format!(
            "mcp-cli: server {server}: left out {} unreadable message(s)",
            result.skipped
        ));
    }
    if ctx.json {
        ctx.out.line(&raw.to_string());
    } else {
        for message in &result.messages {
            let content = output::render_content(&message.content);
            ctx.out.line(&format!("{}: {content}", message.role));
        }
    }
    Ok(Exit::Success)
}

/// The prompt's arguments as the object schema `arguments::build` checks: every one a string,
/// the required ones required.
fn schema(prompt: &Prompt) -> Value {
    let properties: serde_json::Map<String, Value> = (prompt.arguments.iter())
        .map(|argument| (argument.name.clone(), json!({"type": "string"})))
        .collect();
    let required: Vec<&str> = (prompt.arguments.iter())
        .filter(|argument| argument.required)
        .map(|argument| argument.name.as_str())
        .collect();
    json!({"type": "object", "properties": properties, "required": required,
           "additionalProperties": false})
}
