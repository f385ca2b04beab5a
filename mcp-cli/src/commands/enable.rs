//! `enable SERVER` and `disable SERVER`: the switch written into the one file that defines the
//! server, in that file's own format.

use std::path::PathBuf;

use serde_json::json;

use crate::commands::Context;
use crate::config::{self, Original};
use crate::exit::{Exit, Failure};

pub(crate) fn run(ctx: &mut Context, given: &str, on: bool) -> Result<Exit, Failure> {
    let env = |key: &str| std::env::var(key).ok();
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let usage = |error: config::ConfigError| Failure::usage(error.to_string());
    // The name as tool names show it (`my_git` for `my.git`) is accepted too.
    let name = ctx.hub.resolve(given).unwrap_or_else(|_| given.to_owned());
    let mut read = Vec::new();
    let mut defining: Vec<(PathBuf, Original)> = Vec::new();
    for path in ctx.files.paths() {
        let original = config::read_original(&path).map_err(usage)?;
        let Some(text) = &original.text else {
            continue;
        };
        let file = config::parse_file(&path, text, &env).map_err(usage)?;
        if file.servers.iter().any(|server| server.name == name) {
            defining.push((path.clone(), original));
        }
        read.push(path.display().to_string());
    }
    let (path, original) = match <[_; 1]>::try_from(defining) {
        Ok([one]) => one,
        Err(none) if none.is_empty() => return Err(defined_nowhere(&name, &read, &env, &cwd)),
        Err(many) => {
            let files: Vec<String> = (many.iter())
                .map(|(path, _)| path.display().to_string())
                .collect();
            return Err(Failure::usage(format!(
                "server {name} is defined in {}; name the file to edit with --config FILE",
                files.join(" and ")
            )));
        }
    };
    let text = original.text.as_deref().unwrap_or_default();
    let edited = config::set_enabled(&path, text, &name, on).map_err(usage)?;
    let changed = edited.is_some();
    if let Some(edited) = edited {
        config::write_back(&original, &edited).map_err(usage)?;
    }
    let state = if on { "enabled" } else { "disabled" };
    if ctx.json {
        let result = json!({"server": name, "file": path, "enabled": on, "changed": changed});
        ctx.out.line(&result.to_string());
    } else if changed {
        ctx.out
            .line(&format!("{state} {name} in {}", path.display()));
    } else {
        ctx.out
            .line(&format!("{name} is already {state} in {}", path.display()));
    }
    Ok(Exit::Success)
}

fn defined_nowhere(
    name: &str,
    read: &[String],
    env: config::Env<'_>,
    cwd: &std::path::Path,
) -> Failure {
    if config::presets(env, cwd)
        .iter()
        .any(|preset| preset.name == name)
    {
        return Failure::usage(format!(
            "{name} is a built-in preset that no file defines, so there is nothing to edit; \
             `mcp-cli add {name} -- COMMAND [ARGS]...` defines it in the user file"
        ));
    }
    let read = if read.is_empty() {
        "no config file exists".to_owned()
    } else {
        format!("files read: {}", read.join(", "))
    };
    Failure::usage(format!(
        "no config file defines a server named {name} ({read})"
    ))
}
