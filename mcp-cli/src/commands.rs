//! The four commands: `call`, `tools`, `servers`, `logs`.

use std::io::Read;
use std::time::Duration;

use mcp_proto::Tool;
use mcp_smol::{Client, Options};
use serde_json::{Value, json};

use crate::config::{Entry, Server, ServerSpec, Source};
use crate::exit::{Exit, Failure};
use crate::output::{self, Stdout};
use crate::running::Running;
use crate::spinner::Spinner;
use crate::{arguments, logs, names};

/// What the commands need from the world around them.
pub(crate) struct Context {
    pub(crate) servers: Vec<Server>,
    pub(crate) json: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) log_dir: std::path::PathBuf,
    pub(crate) out: Stdout,
    /// Every server started so far, for a stop signal to take down.
    pub(crate) running: Running,
}

impl Context {
    /// The servers `name` can stand for: the one named exactly so, else those whose
    /// provider-safe form (as `tools` prints it: `weird.srv` as `weird_srv`) is `name`.
    fn named(&self, name: &str) -> Vec<&Server> {
        if let Some(exact) = self.servers.iter().find(|server| server.name == name) {
            return vec![exact];
        }
        (self.servers.iter())
            .filter(|server| names::safe(&server.name) == name)
            .collect()
    }

    fn enabled(&self, given: &str) -> Result<&ServerSpec, Failure> {
        let server = match self.named(given).as_slice() {
            [server] => *server,
            [] => {
                return Err(Failure::usage(format!(
                    "unknown server {given}; known servers: {}",
                    list(self.servers.iter().map(|server| server.name.as_str()))
                )));
            }
            several => {
                return Err(Failure::usage(format!(
                    "server name {given} is ambiguous: it stands for {}; use the exact name",
                    list(several.iter().map(|server| server.name.as_str()))
                )));
            }
        };
        let name = &server.name;
        match &server.entry {
            Entry::Enabled(spec) => Ok(spec),
            Entry::Disabled(_) => Err(Failure::usage(format!(
                "server {name} is disabled in the config"
            ))),
            Entry::Remote { url } => Err(Failure::usage(format!(
                "server {name} is remote ({url}); only stdio servers are supported so far"
            ))),
            Entry::Invalid { reason } => Err(Failure::usage(format!(
                "server {name} has an invalid config: {reason}"
            ))),
        }
    }

    fn options(&self, spec: &ServerSpec) -> Options {
        let defaults = Options::default();
        let sink = logs::LogFile::open(
            logs::log_path(&self.log_dir, &spec.name),
            logs::ROTATE_BYTES,
        );
        Options {
            core: mcp_smol::proto::Config {
                handshake_timeout: (spec.handshake_timeout)
                    .unwrap_or(defaults.core.handshake_timeout),
                request_timeout: (self.timeout.or(spec.call_timeout))
                    .unwrap_or(defaults.core.request_timeout),
                client_name: "mcp-cli".to_owned(),
                client_version: env!("CARGO_PKG_VERSION").to_owned(),
                ..defaults.core
            },
            // Long enough to flush a file, short enough that Ctrl-C still feels immediate.
            term_period: Duration::from_millis(500),
            // A log that cannot be opened must not stop the call; the tail still reaches errors.
            stderr_sink: sink.ok().map(|log| Box::new(log) as mcp_smol::StderrSink),
            ..defaults
        }
    }
}

async fn start(ctx: &Context, spec: &ServerSpec) -> Result<Client, Failure> {
    let _spinner = Spinner::start(format!("starting {}", spec.name));
    (ctx.running)
        .connect(&spec.name, &spec.command, ctx.options(spec))
        .await
}

// ----- call -----

pub(crate) async fn call(
    ctx: &mut Context,
    target: &str,
    rest: &[String],
    args_json: Option<&str>,
) -> Result<Exit, Failure> {
    let (server, tool, pairs) = split_target(ctx, target, rest)?;
    let base = match args_json {
        Some(text) => Some(read_args_json(text).await?),
        None => None,
    };
    // Syntax errors in the pairs are found before any server starts.
    arguments::build(&json!({}), None, pairs).map_err(|e| Failure::usage(e.0))?;
    let spec = ctx.enabled(&server)?.clone();
    let client = start(ctx, &spec).await?;
    // Shown before the server is closed: one that outlives its stdin would otherwise hold the
    // answer back for the grace and SIGTERM periods.
    let exit = match call_on(&client, &spec.name, &tool, base, pairs).await {
        Ok((result, raw)) => show_result(ctx, &result, &raw),
        Err(failure) => {
            report(ctx.json, &failure);
            failure.exit
        }
    };
    ctx.running.close(&client).await;
    Ok(exit)
}

fn show_result(ctx: &mut Context, result: &mcp_proto::CallToolResult, raw: &Value) -> Exit {
    if ctx.json {
        ctx.out.line(&raw.to_string());
    } else if result.is_error {
        for line in output::render_call(result) {
            output::diagnostic(&line);
        }
    } else {
        for line in output::render_call(result) {
            ctx.out.line(&line);
        }
    }
    if result.is_error {
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
    let known = |name: &str| !ctx.named(name).is_empty();
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
        let read = smol::unblock(|| {
            let mut input = String::new();
            std::io::stdin().read_to_string(&mut input).map(|_| input)
        });
        read.await
            .map_err(|e| Failure::usage(format!("--args -: cannot read stdin: {e}")))?
    } else {
        text.to_owned()
    };
    serde_json::from_str(&text)
        .map_err(|e| Failure::usage(format!("--args is not valid JSON: {e}")))
}

async fn call_on(
    client: &Client,
    server: &str,
    tool_name: &str,
    base: Option<Value>,
    pairs: &[String],
) -> Result<(mcp_proto::CallToolResult, Value), Failure> {
    let tools = client
        .list_tools()
        .await
        .map_err(|e| Failure::server(server, &e))?;
    let tool = find_tool(server, &tools, tool_name)?;
    let arguments = arguments::build(&tool.input_schema, base, pairs)
        .map_err(|e| Failure::usage(format!("{server}__{tool_name}: {}", e.0)))?;
    let spinner = Spinner::start(format!("calling {server}__{tool_name}"));
    let notifications = client.notifications().await;
    let request = mcp_proto::Request::call_tool(&tool.name, Value::Object(arguments));
    let call = client.request(request.untyped());
    let progress = async {
        while let Ok(notification) = notifications.recv().await {
            if let Some(text) = notification.progress().map(progress_text) {
                spinner.set_label(format!("calling {server}__{tool_name}: {text}"));
            }
        }
        // The driver has gone; the call is about to fail and say why.
        std::future::pending().await
    };
    let raw = smol::future::or(call, progress).await;
    drop(spinner);
    let raw = raw.map_err(|e| Failure::server(server, &e))?;
    let result = mcp_proto::CallToolResult::from_value(raw.clone()).map_err(|e| Failure {
        exit: Exit::Server,
        message: format!("server {server}: invalid tools/call result: {e}"),
    })?;
    Ok((result, raw))
}

/// The tool `given` names: the one named exactly so, else the one whose short or printed
/// name it is.
fn find_tool<'a>(server: &str, tools: &'a [Tool], given: &str) -> Result<&'a Tool, Failure> {
    if let Some(exact) = tools.iter().find(|tool| tool.name == given) {
        return Ok(exact);
    }
    let matching: Vec<&Tool> = (tools.iter())
        .filter(|tool| names::tool_matches(server, &tool.name, given))
        .collect();
    match matching.as_slice() {
        [tool] => Ok(tool),
        [] => Err(Failure::usage(format!(
            "server {server} has no tool {given}; it has: {}",
            list(tools.iter().map(|tool| tool.name.as_str()))
        ))),
        // Distinct names can look alike once made safe (`a.b` and `a/b`).
        several => Err(Failure::usage(format!(
            "tool name {given} is ambiguous on server {server}: it stands for {}; \
             use the exact name",
            list(several.iter().map(|tool| tool.name.as_str()))
        ))),
    }
}

fn progress_text(progress: mcp_proto::Progress) -> String {
    let mut text = match progress.total {
        Some(total) => format!("{}/{total}", progress.progress),
        None => format!("{}", progress.progress),
    };
    if let Some(message) = progress.message {
        text = format!("{text} {message}");
    }
    text
}

// ----- tools -----

pub(crate) async fn tools(ctx: &mut Context, servers: &[String]) -> Result<Exit, Failure> {
    let names: Vec<String> = if servers.is_empty() {
        default_servers(ctx)
    } else {
        servers.to_vec()
    };
    let specs = (names.iter())
        .map(|name| ctx.enabled(name).cloned())
        .collect::<Result<Vec<_>, _>>()?;
    let listings = list_in_parallel(ctx, &specs).await;
    let mut exit = Exit::Success;
    let mut all = Vec::new();
    for (spec, listing) in specs.iter().zip(listings) {
        match listing {
            Ok((tools, _)) => all.extend(tools.into_iter().map(|tool| (spec.name.clone(), tool))),
            Err(failure) => {
                report(ctx.json, &failure);
                exit = failure.exit;
            }
        }
    }
    if ctx.json {
        let tools: Vec<Value> = (all.iter())
            .map(|(server, tool)| {
                let mut value = serde_json::to_value(tool).unwrap_or(Value::Null);
                value["server"] = json!(server);
                value["qualifiedName"] = json!(names::qualified(server, &tool.name));
                value
            })
            .collect();
        ctx.out.line(&output::pretty(&Value::Array(tools)));
    } else {
        for (server, tool) in &all {
            for line in describe_tool(server, tool) {
                ctx.out.line(&line);
            }
        }
    }
    Ok(exit)
}

/// The enabled servers from config files; the presets only when the files name none, so that
/// `tools` does not start three npx servers beside a configured set.
fn default_servers(ctx: &Context) -> Vec<String> {
    let enabled = |include_presets: bool| -> Vec<String> {
        (ctx.servers.iter())
            .filter(|server| matches!(server.entry, Entry::Enabled(_)))
            .filter(|server| include_presets || server.source != Source::Preset)
            .map(|server| server.name.clone())
            .collect()
    };
    let configured = enabled(false);
    if configured.is_empty() {
        enabled(true)
    } else {
        configured
    }
}

fn describe_tool(server: &str, tool: &Tool) -> Vec<String> {
    let name = names::qualified(server, &tool.name);
    let summary = tool.description.as_deref().and_then(|d| d.lines().next());
    let mut lines = vec![match summary {
        Some(summary) if !summary.trim().is_empty() => format!("{name}  {}", summary.trim()),
        _ => name,
    }];
    let schema = &tool.input_schema;
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (parameter, property) in properties {
            let kind = match property.get("type") {
                Some(Value::String(kind)) => kind.clone(),
                Some(Value::Array(kinds)) => {
                    let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
                    kinds.join(" | ")
                }
                _ => "any".to_owned(),
            };
            let flag = if required.contains(&parameter.as_str()) {
                " (required)"
            } else {
                ""
            };
            lines.push(format!("    {parameter}: {kind}{flag}"));
        }
    }
    lines
}

/// Starts each server, lists its tools and closes it, all at once; results in input order.
async fn list_in_parallel(
    ctx: &Context,
    specs: &[ServerSpec],
) -> Vec<Result<(Vec<Tool>, u32), Failure>> {
    let tasks: Vec<_> = (specs.iter())
        .map(|spec| {
            let options = ctx.options(spec);
            let spec = spec.clone();
            let running = ctx.running.clone();
            ctx.running.spawn(async move {
                let client = running.connect(&spec.name, &spec.command, options).await?;
                let tools = client.list_tools().await;
                let pid = client.pid();
                running.close(&client).await;
                let tools = tools.map_err(|e| Failure::server(&spec.name, &e))?;
                Ok((tools, pid))
            })
        })
        .collect();
    let _spinner = Spinner::start(format!("starting {} server(s)", specs.len()));
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await);
    }
    results
}

// ----- servers -----

pub(crate) async fn servers(ctx: &mut Context) -> Result<Exit, Failure> {
    let enabled: Vec<ServerSpec> = (ctx.servers.iter())
        .filter_map(|server| match &server.entry {
            Entry::Enabled(spec) => Some(spec.clone()),
            _ => None,
        })
        .collect();
    let mut listings = list_in_parallel(ctx, &enabled).await.into_iter();
    let mut rows = Vec::new();
    for server in &ctx.servers {
        let preset = server.source == Source::Preset;
        let mut row = json!({ "name": server.name, "preset": preset, "tools": null, "pid": null });
        match &server.entry {
            Entry::Enabled(spec) => {
                row["command"] = json!(spec.command.display());
                match listings.next() {
                    Some(Ok((tools, pid))) => {
                        row["state"] = json!("running");
                        row["tools"] = json!(tools.len());
                        row["pid"] = json!(pid);
                    }
                    Some(Err(failure)) => {
                        let prefix = format!("server {}: ", server.name);
                        let reason = failure
                            .message
                            .strip_prefix(&prefix)
                            .unwrap_or(&failure.message);
                        row["state"] = json!("failed");
                        row["reason"] = json!(reason);
                    }
                    None => row["state"] = json!("failed"),
                }
            }
            Entry::Disabled(spec) => {
                row["state"] = json!("disabled");
                row["command"] = json!(spec.command.display());
            }
            Entry::Remote { url } => {
                row["state"] = json!("remote-skipped");
                row["command"] = json!(url);
            }
            Entry::Invalid { reason } => {
                row["state"] = json!("invalid");
                row["command"] = json!("");
                row["reason"] = json!(reason);
            }
        }
        rows.push(row);
    }
    if ctx.json {
        ctx.out.line(&output::pretty(&Value::Array(rows)));
    } else {
        for line in servers_table(&rows) {
            ctx.out.line(&line);
        }
    }
    Ok(Exit::Success)
}

fn servers_table(rows: &[Value]) -> Vec<String> {
    let cell = |row: &Value, key: &str| match &row[key] {
        Value::Null => "-".to_owned(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut table = vec![["NAME", "STATE", "TOOLS", "PID", "COMMAND"].map(str::to_owned)];
    for row in rows {
        // Marked after the command, so that every column before it stays one word.
        let mut command = cell(row, "command");
        if row["preset"] == json!(true) {
            command.push_str("  (preset)");
        }
        table.push([
            cell(row, "name"),
            cell(row, "state"),
            cell(row, "tools"),
            cell(row, "pid"),
            command,
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|column| {
            table
                .iter()
                .map(|r| r[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut lines: Vec<String> = (table.iter())
        .map(|r| {
            let padded: Vec<String> = (0..4)
                .map(|c| format!("{:w$}", r[c], w = widths[c]))
                .collect();
            format!("{}  {}", padded.join("  "), r[4])
        })
        .collect();
    for row in rows.iter().filter(|row| row.get("reason").is_some()) {
        lines.push(format!("{}: {}", cell(row, "name"), cell(row, "reason")));
    }
    lines
}

// ----- logs -----

pub(crate) fn show_logs(ctx: &mut Context, server: &str, count: usize) -> Result<Exit, Failure> {
    let path = logs::log_path(&ctx.log_dir, server);
    match logs::last_lines(&path, count) {
        Ok(lines) => {
            for line in lines {
                ctx.out.line(&line);
            }
            Ok(Exit::Success)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Err(Failure::usage(format!(
            "no log for server {server} yet (looked for {})",
            path.display()
        ))),
        Err(error) => Err(Failure {
            exit: Exit::Server,
            message: format!("cannot read {}: {error}", path.display()),
        }),
    }
}

fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// Prints a failure on stderr, as one JSON object under `--json`.
pub(crate) fn report(json: bool, failure: &Failure) {
    if json {
        let error = json!({ "error": {
            "kind": failure.exit.kind(),
            "exitCode": failure.exit.code(),
            "message": failure.message,
        }});
        output::diagnostic(&error.to_string());
    } else {
        output::diagnostic(&format!("mcp-cli: {}", failure.message));
    }
}
