//! `call SERVER TOOL [KEY=VALUE]...`: one tool call, its result on stdout.

use std::io::Read;

use mcp_smol::proto::{Progress, tasks::Task};
use serde_json::{Value, json};

use crate::cli::CallOutput;
use crate::commands::{Context, call_result, tasks};
use crate::exit::{Exit, Failure};
use crate::hub::Started;
use crate::spinner::Spinner;
use crate::{arguments, names};

pub(crate) async fn run(
    ctx: &mut Context,
    target: &str,
    rest: &[String],
    args_json: Option<&str>,
    detach: bool,
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
    if detach {
        refuse_lost_task(ctx, &server)?;
    }
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
    let show_task = |task: &Task| spinner.set_label(tasks::status_text(&tool.name, task));
    let mut call = (ctx.hub)
        .call(&tool, Value::Object(arguments))
        .timeout(ctx.call_timeout)
        .on_progress(show_progress)
        .on_task(show_task)
        .validate_output(!options.no_validate);
    if detach {
        call = call.detach();
    }
    let called = call.start().await;
    drop(spinner);
    let called = match called {
        Ok(Started::Task(handle)) => return Ok(tasks::show_handle(ctx, &handle)),
        Ok(Started::Done(raw)) => {
            if detach {
                ctx.notice(&format!(
                    "mcp-cli: {} ran to its end: the server made no task of it",
                    tool.name
                ));
            }
            Ok(raw)
        }
        Err(error) => Err(error),
    };
    // Shown before the servers are closed: one that outlives its stdin would otherwise hold
    // the answer back for the grace and SIGTERM periods.
    Ok(call_result::show(ctx, &server, &tool.name, called, options))
}

/// Refuses `--async` on a local `server` this command starts: it stops when the command
/// ends, and the task with it, so the id printed could never be waited on. The daemon keeps
/// its servers running.
fn refuse_lost_task(ctx: &Context, server: &str) -> Result<(), Failure> {
    let local = ctx
        .hub
        .server_spec(server)
        .is_ok_and(|spec| spec.remote.is_none());
    if !local || ctx.servers_outlive_command {
        return Ok(());
    }
    let how = match ctx.adhoc {
        Some(_) => "configure it (`mcp-cli add`) and run `mcp-cli daemon start`",
        None => "run `mcp-cli daemon start` first",
    };
    Err(Failure::usage(format!(
        "--async: {server} is a local server that this command starts and stops when it ends, \
         and its task with it; {how}, which keeps its servers, and their tasks, running"
    )))
}

/// The server (resolved) and tool a `call` command line calls, when it names them well.
pub(crate) fn target_of(ctx: &Context, command: &crate::cli::Command) -> Option<(String, String)> {
    let crate::cli::Command::Call { server, rest, .. } = command else {
        return None;
    };
    let (server, tool, _) = split_target(ctx, server, rest).ok()?;
    Some((ctx.hub.resolve(&server).ok()?, tool))
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
