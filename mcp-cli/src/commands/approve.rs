//! `approve [NAME]...`: lets servers of this folder's project files (`.mcp.json`,
//! `.mcp-cli.toml`) run, after showing each in full: what it runs, where it comes from, and
//! what it would replace. The person decides, on a terminal or with `--yes`.

use crate::approve::{Decision, decide};
use crate::commands::Context;
use crate::config::{Entry, Pending};
use crate::exit::{Exit, Failure};
use crate::hub::source_name;

pub(crate) fn run(ctx: &mut Context, names: &[String]) -> Result<Exit, Failure> {
    let pending = ctx.hub.pending();
    let waiting = || {
        let names: Vec<&str> = pending.iter().map(|p| p.server.name.as_str()).collect();
        names.join(", ")
    };
    let mut chosen: Vec<&Pending> = Vec::new();
    for name in names {
        let found: Vec<&Pending> = (pending.iter())
            .filter(|p| &p.server.name == name)
            .collect();
        if found.is_empty() {
            return Err(Failure::usage(match pending.is_empty() {
                true => format!("{name} does not wait for approval: no project server here does"),
                false => format!("{name} does not wait for approval (waiting: {})", waiting()),
            }));
        }
        chosen.extend(found);
    }
    if names.is_empty() {
        chosen = pending.iter().collect();
    }
    if chosen.is_empty() {
        ctx.out
            .diagnostic("mcp-cli: no project server waits for approval in this folder");
        return Ok(Exit::Success);
    }
    for pending in &chosen {
        for line in described(pending) {
            ctx.out.diagnostic(&line);
        }
    }
    let question = format!(
        "Let {} run from this folder's project files?",
        plural(chosen.len(), "this server", "these servers")
    );
    match decide(ctx.yes, &question) {
        Decision::Yes => {}
        Decision::No => return Err(Failure::usage("not approved: nothing was changed")),
        Decision::NoTerminal => {
            return Err(Failure::usage(
                "not approved: there is no terminal to ask on, and approving is the person's \
                 decision (a person who has read the above may pass --yes)",
            ));
        }
    }
    (ctx.files.approvals().approve(&chosen))
        .map_err(|error| Failure::usage(format!("not approved: {error}")))?;
    for pending in &chosen {
        let server = &pending.server;
        let mut line = format!(
            "approved {} from {}",
            server.name,
            source_name(&server.source)
        );
        if let Some(replaced) = &pending.replaces {
            let from = source_name(&replaced.source);
            line.push_str(&format!(
                "; it now replaces the entry of that name from {from}"
            ));
        }
        ctx.out.diagnostic(&line);
    }
    Ok(Exit::Success)
}

/// `1 server` or `2 servers`, in words the question reads well with.
fn plural(count: usize, one: &str, many: &str) -> String {
    match count {
        1 => one.to_owned(),
        _ => format!("{many} ({count})"),
    }
}

/// A pending entry in full, as the person must see it before deciding.
fn described(pending: &Pending) -> Vec<String> {
    let server = &pending.server;
    let mut lines = vec![format!(
        "{}: from {}",
        server.name,
        source_name(&server.source)
    )];
    match &server.entry {
        Entry::Enabled(spec) | Entry::Disabled(spec) => {
            let command = &spec.command;
            match &spec.remote {
                Some(remote) => {
                    lines.push(format!("  url:      {}", remote.url));
                    // Their values may hold the user's own secrets, expanded from variables.
                    let headers: Vec<&str> = (remote.headers.iter())
                        .map(|(name, _)| name.as_str())
                        .collect();
                    if !headers.is_empty() {
                        lines.push(format!("  headers:  {}", headers.join(", ")));
                    }
                }
                None => lines.push(format!("  runs:     {}", command.display())),
            }
            for (key, value) in &command.env {
                lines.push(format!("  env:      {key}={value}"));
            }
            if let Some(cwd) = &command.cwd {
                lines.push(format!("  in:       {}", cwd.display()));
            }
            lines.push(format!("  sandbox:  {}", sandbox(command.sandbox.as_ref())));
            if matches!(server.entry, Entry::Disabled(_)) {
                lines.push("  (disabled in its file)".to_owned());
            }
        }
        Entry::Invalid { reason, command } => {
            lines.push(format!("  runs:     {command}"));
            lines.push(format!("  invalid:  {reason}"));
        }
    }
    if let Some(replaced) = &pending.replaces {
        lines.push(format!(
            "  replaces: {} (from {})",
            replaced.entry.command_line(),
            source_name(&replaced.source)
        ));
    }
    lines
}

/// The `permissions` of an entry in words.
fn sandbox(sandbox: Option<&crate::config::Sandbox>) -> String {
    let Some(sandbox) = sandbox else {
        return "none: it runs with your rights, files and network".to_owned();
    };
    let network = match (sandbox.isolate_network, sandbox.allow.is_empty()) {
        (false, _) => "network open".to_owned(),
        (true, true) => "no network".to_owned(),
        (true, false) => {
            let hosts: Vec<String> = sandbox.allow.iter().map(ToString::to_string).collect();
            format!("network only to {}", hosts.join(", "))
        }
    };
    let files = match &sandbox.filesystem {
        None => "files open".to_owned(),
        Some(paths) if paths.is_empty() => "no writable folder".to_owned(),
        Some(paths) => {
            let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            format!("writes only {}", paths.join(", "))
        }
    };
    format!("{network}; {files}")
}
