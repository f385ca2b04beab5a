//! `import [--write [NAME]...]`: the servers other hosts on this machine configure, with the
//! file each is in; `--write` copies them into the user file (or `--config FILE`): with no
//! names, only those configured for the whole machine, never one project's (Claude Code's
//! per-project servers, a file in this folder), which become the user's own only when named.
//! Other hosts' files are only read.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::commands::Context;
use crate::config::{self, Found};
use crate::exit::{Exit, Failure};
use crate::output;

pub(crate) fn run(
    ctx: &mut Context,
    write: Option<&[String]>,
    force: bool,
) -> Result<Exit, Failure> {
    let env = |key: &str| std::env::var(key).ok();
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let (found, errors) = config::import(&env, &cwd);
    // A host's broken file is that host's business: said, and the others still listed.
    for error in &errors {
        output::diagnostic(&format!("mcp-cli: skipped: {error}"));
    }
    match write {
        None => list(ctx, &found, &env),
        Some(names) => copy(ctx, found, names, force)?,
    }
    Ok(Exit::Success)
}

fn command_line(found: &Found) -> String {
    let server = &found.server;
    match (&server.url, &server.command) {
        (Some(url), _) => url.clone(),
        (None, command) => {
            let words = command.iter().chain(&server.args);
            words.cloned().collect::<Vec<_>>().join(" ")
        }
    }
}

/// The names the native file (the one `--write` writes) has, and where it is; none when it
/// cannot be read.
fn native_names(
    ctx: &Context,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(std::path::PathBuf, BTreeSet<String>)> {
    let path = config::native_file(&ctx.configs, env).ok()?;
    let original = config::read_original(&path).ok()?;
    let text = original.text.unwrap_or_default();
    let parsed = config::parse_file(&path, &text, env).ok()?;
    let names = parsed
        .servers
        .into_iter()
        .map(|server| server.name)
        .collect();
    Some((path, names))
}

/// Why `--write` (naming the servers in `named`, or none) skips `f`, if it does: the one rule
/// for the listing, which says so before anything is written, and for the write itself.
/// `taken` holds the names copied before it; `existing` the native file and its names.
fn skipped(
    f: &Found,
    named: &[String],
    taken: &BTreeSet<String>,
    existing: Option<(&std::path::Path, &BTreeSet<String>)>,
    force: bool,
) -> Option<String> {
    let program = f.server.command.as_deref().unwrap_or_default();
    let search = f.server.env.get("PATH").map(String::as_str);
    if named.is_empty() && f.per_project {
        Some("it is configured for one project only; name it to copy it".to_owned())
    } else if let Some(reason) = &f.unusable {
        Some(format!("it cannot be used here: {reason}"))
    } else if crate::nesting::runs_our_gateway(program, &f.server.args, search) {
        Some("it runs mcp-cli's own gateway, which would then start itself without end".to_owned())
    } else if taken.contains(&f.name) {
        Some("a server of that name was imported from another host first".to_owned())
    } else if let Some((path, _)) = existing.filter(|(_, names)| names.contains(&f.name))
        && !force
    {
        Some(format!(
            "{} already has it (--force replaces it)",
            path.display()
        ))
    } else {
        None
    }
}

/// Each server found with why `import --write` would skip it, in the order it would copy.
fn would_skip(
    found: &[Found],
    existing: Option<(&std::path::Path, &BTreeSet<String>)>,
) -> Vec<Option<String>> {
    let mut taken = BTreeSet::new();
    (found.iter())
        .map(|f| {
            let why = skipped(f, &[], &taken, existing, false);
            if why.is_none() {
                taken.insert(f.name.clone());
            }
            why
        })
        .collect()
}

fn list(ctx: &mut Context, found: &[Found], env: &dyn Fn(&str) -> Option<String>) {
    let native = native_names(ctx, env);
    let existing = native.as_ref().map(|(path, names)| (path.as_path(), names));
    let skips = would_skip(found, existing);
    if ctx.json {
        let rows: Vec<Value> = (found.iter().zip(&skips))
            .map(|(f, skip)| {
                json!({
                    "name": f.name, "host": f.host, "file": f.file,
                    "command": f.server.command, "args": f.server.args, "url": f.server.url,
                    "enabled": !f.server.disabled, "unusable": f.unusable,
                    "writeSkips": skip,
                })
            })
            .collect();
        ctx.out.line(&output::pretty(&Value::Array(rows)));
        return;
    }
    let mut cells = vec![["NAME", "HOST", "FILE"].map(str::to_owned)];
    let mut commands = vec!["COMMAND".to_owned()];
    for (f, skip) in found.iter().zip(&skips) {
        cells.push([f.name.clone(), f.host.clone(), f.file.display().to_string()]);
        let mut command = command_line(f);
        if f.server.disabled {
            command.push_str("  (disabled)");
        }
        if let Some(reason) = &f.unusable {
            command.push_str(&format!("  (unusable: {reason})"));
        } else if let Some(why) = skip {
            command.push_str(&format!("  (--write skips it: {why})"));
        }
        commands.push(command);
    }
    let width = |c: usize| cells.iter().map(|row| row[c].chars().count()).max();
    let widths: Vec<usize> = (0..3).map(|c| width(c).unwrap_or(0)).collect();
    for (row, command) in cells.iter().zip(&commands) {
        let padded: Vec<String> = (0..3)
            .map(|c| format!("{:w$}", row[c], w = widths[c]))
            .collect();
        ctx.out.line(&format!("{}  {command}", padded.join("  ")));
    }
}

/// Copies the servers found (those named, if any) into the native file, in one write.
fn copy(
    ctx: &mut Context,
    found: Vec<Found>,
    names: &[String],
    force: bool,
) -> Result<(), Failure> {
    let unknown: Vec<&str> = (names.iter())
        .filter(|name| !found.iter().any(|f| &f.name == *name))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(Failure::usage(format!(
            "no other host configures {}; `mcp-cli import` lists what there is",
            unknown.join(", ")
        )));
    }
    let env = |key: &str| std::env::var(key).ok();
    let usage = |error: config::ConfigError| Failure::usage(error.to_string());
    let path = config::native_file(&ctx.configs, &env).map_err(usage)?;
    let original = config::read_original(&path).map_err(usage)?;
    let mut text = original.text.clone().unwrap_or_default();
    let existing: BTreeSet<String> = (config::parse_file(&path, &text, &env).map_err(usage)?)
        .servers
        .into_iter()
        .map(|server| server.name)
        .collect();
    let mut taken = BTreeSet::new();
    let mut copied = Vec::new();
    for f in found {
        if !names.is_empty() && !names.contains(&f.name) {
            continue;
        }
        let from = f.file.display();
        let skip = skipped(&f, names, &taken, Some((&path, &existing)), force);
        if let Some(why) = skip {
            // A project's entry is told by its host, which names the project.
            let place = match names.is_empty() && f.per_project {
                true => format!("({})", f.host),
                false => format!("from {from}"),
            };
            output::diagnostic(&format!("mcp-cli: skipped {} {place}: {why}", f.name));
            continue;
        }
        text = config::add_server(&path, &text, &f.name, &f.server, force).map_err(usage)?;
        copied.push(format!("imported {} from {from}", f.name));
        taken.insert(f.name);
    }
    if copied.is_empty() {
        ctx.out.line("nothing to import");
        return Ok(());
    }
    config::write_back(&original, &text).map_err(usage)?;
    for line in copied {
        ctx.out.line(&line);
    }
    ctx.out.line(&format!("wrote {}", path.display()));
    Ok(())
}
