//! `servers`: every server with its state, starting those the catalogue stands for in parallel.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::hints::{Hint, Naming};
use crate::hub::{ServerStatus, State};
use crate::output;
use crate::registry::model::Status;
use crate::registry::snapshot::Snapshot;
use crate::spinner::Spinner;

pub(crate) async fn run(ctx: &mut Context) -> Result<Exit, Failure> {
    let wanted = ctx.hub.default_servers();
    {
        let _spinner = Spinner::start(format!("starting {} server(s)", wanted.len()));
        ctx.hub.start(&wanted).await;
    }
    let rows = ctx.hub.status();
    // A health check for scripts: a server that should run and does not makes it fail.
    let failed = (rows.iter()).any(|row| matches!(row.state, State::Failed | State::NeedsAuth));
    let origins = registry_origins(ctx, &rows);
    if ctx.json {
        let mut rows = serde_json::to_value(&rows).unwrap_or(Value::Null);
        for row in rows.as_array_mut().into_iter().flatten() {
            let name = row.get("name").and_then(Value::as_str).unwrap_or_default();
            if let Some((origin, _)) = origins.get(name) {
                row["registry"] = origin.clone();
            }
        }
        ctx.out.line(&output::pretty(&rows));
    } else {
        for line in rows_table(&rows) {
            ctx.out.line(&line);
        }
        // Diagnostics, as failures are: stdout keeps the table alone.
        for line in reasons(&rows, &ctx.naming) {
            ctx.out.diagnostic(&line);
        }
        for (name, (_, said)) in &origins {
            if let Some(said) = said {
                ctx.out.diagnostic(&format!("{name}: {said}"));
            }
        }
    }
    Ok(if failed { Exit::Server } else { Exit::Success })
}

/// For each installed server (one whose entry has `registry = {...}`): where it came from and
/// what its registry's snapshot now says of it, as JSON, and as a line when that is news (the
/// version is deprecated or deleted, or a newer one is offered).
fn registry_origins(
    ctx: &Context,
    rows: &[ServerStatus],
) -> BTreeMap<String, (Value, Option<String>)> {
    let mut snapshots: BTreeMap<String, Option<Snapshot>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for row in rows {
        let Some(origin) = ctx
            .hub
            .server_spec(&row.name)
            .ok()
            .and_then(|spec| spec.registry)
        else {
            continue;
        };
        let snapshot = snapshots.entry(origin.url.clone()).or_insert_with(|| {
            let path = Snapshot::path(&ctx.state.registry(), &origin.url);
            Snapshot::load(&path).ok().flatten()
        });
        let listed = snapshot
            .as_ref()
            .and_then(|snapshot| snapshot.servers.get(&origin.name));
        let label = format!("{}@{}", origin.name, origin.version);
        let (status, said) = match listed {
            None if snapshot.is_none() => ("unknown", None),
            None => (
                "unknown",
                Some(format!(
                    "{label} is no longer in the registry at {}",
                    origin.url
                )),
            ),
            Some(listed) if listed.official.status != Status::Active => {
                let word = listed.official.status.word();
                (
                    word,
                    Some(format!(
                        "the registry at {} marks {label} {word}",
                        origin.url
                    )),
                )
            }
            Some(listed) if listed.server.version != origin.version => (
                "active",
                Some(format!(
                    "{label} is installed; the registry at {} offers {}",
                    origin.url, listed.server.version
                )),
            ),
            Some(_) => ("active", None),
        };
        let json = json!({
            "url": origin.url,
            "name": origin.name,
            "version": origin.version,
            "latest": listed.map(|listed| listed.server.version.clone()),
            "status": status,
        });
        out.insert(row.name.clone(), (json, said));
    }
    out
}

/// NAME STATE TOOLS LISTED PID PROTOCOL COMMAND, aligned, then a line per server that has a reason (the
/// daemon's, whose servers are all configured).
pub(crate) fn table(rows: &[ServerStatus]) -> Vec<String> {
    let mut lines = rows_table(rows);
    lines.extend(reasons(rows, &Naming::Configured));
    lines
}

/// NAME STATE TOOLS LISTED PID PROTOCOL COMMAND, aligned; LISTED is the age of the server's
/// listing in the catalogue on disk.
fn rows_table(rows: &[ServerStatus]) -> Vec<String> {
    let count = |value: Option<usize>| value.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let header = [
        "NAME", "STATE", "TOOLS", "LISTED", "PID", "PROTOCOL", "COMMAND",
    ];
    let mut cells = vec![header.map(str::to_owned)];
    for row in rows {
        // Marked after the command, so that every column before it stays one word.
        let mut command = row.command.clone();
        if row.preset {
            command.push_str("  (preset)");
        }
        cells.push([
            row.name.clone(),
            row.state.to_string(),
            count(row.tools),
            row.catalogue_age.map_or_else(|| "-".to_owned(), age),
            count(row.pid.map(|pid| pid as usize)),
            row.protocol.clone().unwrap_or_else(|| "-".to_owned()),
            command,
        ]);
    }
    let width = |column: usize| {
        let widths = cells.iter().map(|cells| cells[column].chars().count());
        widths.max().unwrap_or(0)
    };
    let last = header.len() - 1;
    let widths: Vec<usize> = (0..last).map(width).collect();
    (cells.iter())
        .map(|row| {
            let padded: Vec<String> = (0..last)
                .map(|c| format!("{:w$}", row[c], w = widths[c]))
                .collect();
            format!("{}  {}", padded.join("  "), row[last])
        })
        .collect()
}

/// `NAME: reason` for each server that failed, is denied, is invalid or waits for approval;
/// one that needs a login says how to log in, one that waits how to approve it.
fn reasons(rows: &[ServerStatus], naming: &Naming) -> Vec<String> {
    (rows.iter())
        .filter_map(|row| {
            let reason = row.reason.as_ref()?;
            let hint = match row.state {
                State::NeedsAuth => {
                    let server = row.name.clone();
                    Some(Hint::Auth { server }.text(naming))
                }
                // The one place that names the command, for the person reading the table:
                // `approve` shows the entry in full and asks.
                State::Pending => Some(format!(
                    "; `mcp-cli approve {}` shows it in full and asks",
                    row.name
                )),
                _ => None,
            };
            Some(format!(
                "{}: {reason}{}",
                row.name,
                hint.unwrap_or_default()
            ))
        })
        .collect()
}

/// An age in seconds as the table shows it: `42s`, `5m`, `3h`, `2d` (whole units, rounded
/// down).
fn age(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86_400 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_in_whole_units() {
        let shown: Vec<String> = [0, 59, 60, 3599, 3600, 86_399, 86_400, 900_000]
            .into_iter()
            .map(age)
            .collect();
        assert_eq!(shown, ["0s", "59s", "1m", "59m", "1h", "23h", "1d", "10d"]);
    }
}
