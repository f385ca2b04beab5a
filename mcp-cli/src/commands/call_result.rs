//! How `call` shows a result: decoded once (never copied whole, however large), past the
//! output limit written to a file with its first part printed ([`crate::spill`]), and a
//! mismatch with the tool's `outputSchema` reported after it, as exit 1.

use mcp_smol::proto::CallToolResult;
use serde_json::Value;

use crate::cli::CallOutput;
use crate::commands::{Context, with_raw};
use crate::exit::{Exit, Failure};
use crate::hub::{HubError, OutputMismatch};
use crate::output;
use crate::spill::{self, Spill};

/// Prints what the call of `tool` (its shown name) on `server` came to, and says how it ended.
pub(crate) fn show(
    ctx: &mut Context,
    server: &str,
    tool: &str,
    called: Result<Value, HubError>,
    options: &CallOutput,
) -> Exit {
    let (called, mismatch) = split_mismatch(called);
    let decoded = called
        .map_err(|error| Failure::of_call(tool, error))
        .and_then(|raw| decode(ctx.json, server, raw));
    let limit = ctx
        .hub
        .server_spec(server)
        .ok()
        .and_then(|spec| spec.max_result_bytes);
    let results = ctx.state.results();
    let spill = Spill {
        limit: spill::limit(options.max_output, limit, ctx.out.is_terminal()),
        dir: &results,
        label: tool,
        ext: if ctx.json { "json" } else { "txt" },
    };
    let exit = match decoded {
        Ok(shown) => print(ctx, &shown, &spill),
        Err(failure) => {
            ctx.report(&failure);
            failure.exit
        }
    };
    if let Some(mismatch) = mismatch {
        let failure = Failure::new(
            Exit::ToolError,
            format!(
                "{tool}: the result does not match the tool's outputSchema {mismatch} \
                 (--no-validate, or validate_output = false for the server, skips this check)"
            ),
        );
        ctx.report(&failure);
        return failure.exit;
    }
    exit
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

fn print(ctx: &mut Context, shown: &Shown, spill: &Spill<'_>) -> Exit {
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
