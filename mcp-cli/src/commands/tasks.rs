//! `tasks [SERVER]` and `tasks get|wait|cancel SERVER ID`: the tasks servers run in the
//! background, as kept in the state folder; and how `call` shows a task it made.

use std::time::{SystemTime, UNIX_EPOCH};

use mcp_smol::proto::tasks::Task;
use serde_json::Value;

use crate::cli::CallOutput;
use crate::cli::TasksAction;
use crate::commands::{Context, call_result};
use crate::exit::{Exit, Failure};
use crate::hub::{TaskHandle, TaskRecord};
use crate::output;
use crate::spill::MaxOutput;
use crate::spinner::Spinner;

pub(crate) async fn run(
    ctx: &mut Context,
    action: Option<TasksAction>,
    server: Option<&str>,
) -> Result<Exit, Failure> {
    match action {
        None => list(ctx, server),
        Some(TasksAction::Get { server, id }) => get(ctx, &server, &id).await,
        Some(TasksAction::Wait {
            server,
            id,
            max_output,
        }) => wait(ctx, &server, &id, max_output).await,
        Some(TasksAction::Cancel { server, id }) => cancel(ctx, &server, &id).await,
    }
}

/// SERVER ID TOOL STATUS STARTED MESSAGE, oldest first; `--json`: the records.
fn list(ctx: &mut Context, server: Option<&str>) -> Result<Exit, Failure> {
    let server = server.map(|given| ctx.hub.resolve(given)).transpose()?;
    let records = ctx.hub.task_records(server.as_deref());
    if ctx.json {
        let records: Vec<Value> = records.iter().map(TaskRecord::to_json).collect();
        ctx.out.line(&output::pretty(&Value::Array(records)));
        return Ok(Exit::Success);
    }
    let header = ["SERVER", "ID", "TOOL", "STATUS", "STARTED", "MESSAGE"];
    let mut rows = vec![header.map(str::to_owned)];
    for record in &records {
        let tool = if record.tool.is_empty() {
            "-"
        } else {
            &record.tool
        };
        rows.push([
            record.server.clone(),
            record.task_id.clone(),
            tool.to_owned(),
            record.status.clone(),
            age(record.started),
            record.status_message.clone().unwrap_or_default(),
        ]);
    }
    for line in table(&rows) {
        ctx.out
            .line(output::escape_controls(line.trim_end()).as_ref());
    }
    Ok(Exit::Success)
}

async fn get(ctx: &mut Context, server: &str, id: &str) -> Result<Exit, Failure> {
    let server = ctx.hub.resolve(server)?;
    let task = {
        let _spinner = Spinner::start(format!("asking {server} about task {id}"));
        ctx.hub.get_task(&server, id).await?
    };
    if ctx.json {
        ctx.out.line(&task.to_json().to_string());
    } else {
        ctx.out.line(&status_text(id, &task));
    }
    Ok(Exit::Success)
}

async fn wait(
    ctx: &mut Context,
    server: &str,
    id: &str,
    max_output: Option<MaxOutput>,
) -> Result<Exit, Failure> {
    let server = ctx.hub.resolve(server)?;
    let spinner = Spinner::start(format!("waiting for task {id} of {server}"));
    let waited = (ctx.hub)
        .wait_task(&server, id, ctx.call_timeout, |task| {
            spinner.set_label(status_text(&format!("task {id} of {server}"), task));
        })
        .await;
    drop(spinner);
    // Shown as a call's result is, past the output limit in a file.
    let options = CallOutput {
        max_output,
        ..CallOutput::default()
    };
    Ok(call_result::show(ctx, &server, id, waited, &options))
}

async fn cancel(ctx: &mut Context, server: &str, id: &str) -> Result<Exit, Failure> {
    let server = ctx.hub.resolve(server)?;
    ctx.hub.cancel_task(&server, id).await?;
    ctx.out
        .diagnostic(&format!("mcp-cli: asked {server} to cancel task {id}"));
    Ok(Exit::Success)
}

/// How `call --async` shows the task it made: its id (`--json`: the whole handle).
pub(crate) fn show_handle(ctx: &mut Context, handle: &TaskHandle) -> Exit {
    if ctx.json {
        ctx.out.line(&handle.to_json().to_string());
    } else {
        ctx.out
            .line(output::escape_controls(&handle.record.task_id).as_ref());
        let record = &handle.record;
        ctx.out.diagnostic(&format!(
            "mcp-cli: {} runs as task {} ({}); `mcp-cli tasks wait {} {}` gets its result",
            record.tool, record.task_id, record.status, record.server, record.task_id
        ));
    }
    Exit::Success
}

/// `WHAT: STATUS MESSAGE`, for the spinner and `tasks get`.
pub(crate) fn status_text(what: &str, task: &Task) -> String {
    let mut text = format!("{what}: {}", task.status);
    if let Some(message) = &task.message {
        text.push(' ');
        text.push_str(message);
    }
    output::escape_controls(&text).into_owned()
}

/// How long ago `millis` (since the Unix epoch) was: `42s`, `5m`, `3h`, `2d`.
fn age(millis: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = (now.as_millis() as u64).saturating_sub(millis) / 1000;
    match seconds {
        0..60 => format!("{seconds}s ago"),
        60..3600 => format!("{}m ago", seconds / 60),
        3600..86400 => format!("{}h ago", seconds / 3600),
        _ => format!("{}d ago", seconds / 86400),
    }
}

/// Rows aligned in columns two spaces apart.
fn table(rows: &[[String; 6]]) -> Vec<String> {
    let mut widths = [0; 6];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    (rows.iter())
        .map(|row| {
            let cells = row.iter().zip(widths);
            cells
                .map(|(cell, width)| format!("{cell:width$}  "))
                .collect()
        })
        .collect()
}
