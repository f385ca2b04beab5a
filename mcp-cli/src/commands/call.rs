//! `call SERVER TOOL [KEY=VALUE]...`: one tool call, its result on stdout.

use std::io::Read;

use mcp_smol::proto::{CallToolResult, Progress};
use serde_json::{Value, json};

use crate::cli::CallOutput;
use crate::commands::{Context, with_raw};
use crate::exit::{Exit, Failure};
use crate::hub::{HubError, OutputMismatch};
use crate::spill::{self, Spill};
use crate::spinner::Spinner;
use crate::{arguments, names, output};

pub(crate) async fn run(
    ctx: &mut Context,
    target: &str,
    rest: &[String],
    args_json: Option<&str>,
    options: &CallOutput,
) -> Result<Exit, Failure> {
    let (server, tool, pairs) = split_target(ctx, target, rest)?;
    let base = match args_json {
        Some(text) => Some(read_args_json(text).await?),
        None => None,
    };
    // Mistakes in the pairs are found before any server starts.
    arguments::build(&json!({}), None, pairs).map_err(|e| Failure::usage(e.0))?;
    let server = ctx.hub.resolve(&server)?;
    ctx.hub.check(&server)?;
    let tool = {
        let _spinner = Spinner::start(format!("starting {server}"));
        ctx.hub.find_tool(&server, &tool).await?
    };
    let arguments = arguments::build(&tool.tool.input_schema, base, pairs)
        .map_err(|e| Failure::usage(format!("{}: {}", tool.name, e.0)))?;
    let spinner = Spinner::start(format!("calling {}", tool.name));
    let show_progress = |progress: Progress| {
        spinner.set_label(format!(
            "calling {}: {}",
            tool.name,
            progress_text(progress)
        ));
    };
    let called = (ctx.hub)
        .call(&tool, Value::Object(arguments))
        .timeout(ctx.call_timeout)
        .on_progress(show_progress)
        .validate_output(!options.no_validate)
        .await;
    drop(spinner);
    let (called, mismatch) = split_mismatch(called);
    // Shown before the servers are closed: one that outlives its stdin would otherwise hold
    // the answer back for the grace and SIGTERM periods.
    let decoded = called
        .map_err(|error| Failure::of_call(&tool.name, error))
        .and_then(|raw| decode(ctx.json, &server, raw));
    let limit = ctx
        .hub
        .server_spec(&server)
        .ok()
        .and_then(|spec| spec.max_result_bytes);
    let results = ctx.state.results();
    let spill = Spill {
        limit: spill::limit(options.max_output, limit, ctx.out.is_terminal()),
        dir: &results,
        label: &tool.name,
        ext: if ctx.json { "json" } else { "txt" },
    };
    let exit = match decoded {
        Ok(shown) => show(ctx, &shown, &spill),
        Err(failure) => {
            ctx.report(&failure);
            failure.exit
        }
    };
    if let Some(mismatch) = mismatch {
        let failure = Failure::new(
            Exit::ToolError,
            format!(
                "{}: the result does not match the tool's outputSchema {mismatch} \
                 (--no-validate, or validate_output = false for the server, skips this check)",
                tool.name
            ),
        );
        ctx.report(&failure);
        return Ok(failure.exit);
    }
    Ok(exit)
}

/// A result whose structured content fails its schema, as a result to show and the finding
/// to report after it.
fn split_mismatch(
    called: Result<Value, HubError>,
) -> (Result<Value, HubError>, Option<OutputMismatch>) {
    match called {
        Err(HubError::OutputMismatch {
            result, mismatch, ..
        }) => (Ok(*result), Some(mismatch)),
        other => (other, None),
    }
}

/// A result as this run prints it: decoded for people, or as sent for `--json`. Either way it
/// is held once, however large: a copy kept beside it would double a 200 MiB answer.
enum Shown {
    Text(CallToolResult),
    Json { raw: Value, is_error: bool },
}

fn decode(json: bool, server: &str, raw: Value) -> Result<Shown, Failure> {
    let is_object = |raw: &Value| {
        let object = raw.as_object()?;
        let content = object.get("content").unwrap_or(&Value::Null);
        let is_error = object.get("isError").unwrap_or(&Value::Null);
        let usual = (content.is_null() || content.is_array())
            && (is_error.is_null() || is_error.is_boolean());
        usual.then(|| is_error == &Value::Bool(true))
    };
    match (json, is_object(&raw)) {
        (true, Some(is_error)) => Ok(Shown::Json { raw, is_error }),
        (false, Some(_)) => CallToolResult::from_value(raw)
            .map(Shown::Text)
            .map_err(|error| invalid_result(server, &error.to_string())),
        // Not a result at all: the decoder words what is wrong with it.
        _ => with_raw::<CallToolResult>(server, "tools/call", raw).map(|(result, raw)| {
            let is_error = result.is_error;
            match json {
                true => Shown::Json { raw, is_error },
                false => Shown::Text(result),
            }
        }),
    }
}

fn invalid_result(server: &str, error: &str) -> Failure {
    Failure::new(
        Exit::Server,
        format!("server {server}: invalid tools/call result: {error}"),
    )
}

fn show(ctx: &mut Context, shown: &Shown, spill: &Spill<'_>) -> Exit {
    let is_error = match shown {
        Shown::Json { raw, is_error } => {
            let write_all = |out: &mut dyn std::io::Write| {
                serde_json::to_writer(&mut *out, raw)?;
                out.write_all(b"\n")
            };
            if !spill.spilled(&mut ctx.out, false, &write_all) {
                ctx.out.line(&raw.to_string());
            }
            *is_error
        }
        Shown::Text(result) => {
            let write_all = |out: &mut dyn std::io::Write| {
                output::call_pieces(result).try_for_each(|piece| piece.write_line(out))
            };
            if !spill.spilled(&mut ctx.out, result.is_error, &write_all) {
                for piece in output::call_pieces(result) {
                    match result.is_error {
                        true => ctx.out.diagnostic(&piece.text()),
                        false => ctx.out.line(&piece.text()),
                    }
                }
            }
            result.is_error
        }
    };
    if is_error {
        Exit::ToolError
    } else {
        Exit::Success
    }
}

/// `SERVER TOOL args...`, or `SERVER__TOOL args...` / `SERVER.TOOL args...`.
fn split_target<'a>(
    ctx: &Context,
    target: &str,
    rest: &'a [String],
) -> Result<(String, String, &'a [String]), Failure> {
    let known = |name: &str| ctx.hub.resolve(name).is_ok();
    // With --stdio there is one server, so the first word is the tool (SERVER__TOOL works too).
    if let Some(server) = &ctx.adhoc {
        let qualified = names::split_qualified(target, known).filter(|(s, _)| known(s));
        let tool = qualified.map_or_else(|| target.to_owned(), |(_, tool)| tool);
        return Ok((server.clone(), tool, rest));
    }
    if !known(target)
        && let Some((server, tool)) = names::split_qualified(target, known)
    {
        return Ok((server, tool, rest));
    }
    match rest.split_first() {
        Some((tool, pairs)) if !tool.contains('=') => Ok((target.to_owned(), tool.clone(), pairs)),
        _ => Err(Failure::usage(format!(
            "which tool? use `mcp-cli call {target} TOOL [KEY=VALUE]...` or `{target}__TOOL`"
        ))),
    }
}

async fn read_args_json(text: &str) -> Result<Value, Failure> {
    let text = if text == "-" {
        // Off the executor's thread, so that Ctrl-C is still noticed while stdin is awaited.
        let read = blocking::unblock(|| {
            let mut input = String::new();
            std::io::stdin().read_to_string(&mut input).map(|_| input)
        });
        read.await
            .map_err(|e| Failure::usage(format!("--args -: cannot read stdin: {e}")))?
    } else {
        text.to_owned()
    };
    if text.trim().is_empty() {
        let source = if text.is_empty() {
            "stdin was empty"
        } else {
            "stdin held only blanks"
        };
        return Err(Failure::usage(format!(
            "--args -: {source}; pipe a JSON object in, such as {{\"key\": \"value\"}}"
        )));
    }
    serde_json::from_str(&text)
        .map_err(|e| Failure::usage(format!("--args is not valid JSON: {e}")))
}

fn progress_text(progress: Progress) -> String {
    let mut text = match progress.total {
        Some(total) => format!("{}/{total}", progress.progress),
        None => format!("{}", progress.progress),
    };
    if let Some(message) = progress.message {
        text = format!("{text} {message}");
    }
    text
}
