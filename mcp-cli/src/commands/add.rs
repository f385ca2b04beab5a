//! `add NAME [--env K=V]... [--cwd DIR] [--protocol REV] -- COMMAND [ARGS]...` and
//! `add NAME --url URL [--header NAME=VALUE]... [--protocol REV]`: a native entry in the user
//! file (or `--config FILE`).

use std::collections::BTreeMap;

use mcp_proto::Protocol;

use crate::commands::Context;
use crate::config::{self, NewServer};
use crate::exit::{Exit, Failure};

/// What the command line says about the new server.
#[derive(Debug)]
pub(crate) struct Given {
    pub(crate) env: Vec<String>,
    pub(crate) cwd: Option<String>,
    pub(crate) url: Option<String>,
    pub(crate) headers: Vec<String>,
    pub(crate) protocol: Protocol,
    pub(crate) command: Vec<String>,
}

pub(crate) fn run(
    ctx: &mut Context,
    name: &str,
    given: Given,
    force: bool,
) -> Result<Exit, Failure> {
    if name.trim().is_empty() {
        return Err(Failure::usage("a server needs a name"));
    }
    let mut words = given.command.into_iter();
    let server = NewServer {
        command: words.next(),
        args: words.collect(),
        env: pairs(&given.env, "--env")?,
        cwd: given.cwd,
        url: given.url,
        headers: (given.headers.iter())
            .map(|word| crate::adhoc::header(word))
            .collect::<Result<_, _>>()?,
        protocol: given.protocol,
        ..NewServer::default()
    };
    if server.command.is_none() && server.url.is_none() {
        return Err(Failure::usage(format!(
            "what does {name} run? `mcp-cli add {name} -- COMMAND [ARGS]...` or `--url URL`"
        )));
    }
    let env = |key: &str| std::env::var(key).ok();
    let usage = |error: config::ConfigError| Failure::usage(error.to_string());
    let path = config::native_file(&ctx.configs, &env).map_err(usage)?;
    let original = config::read_original(&path).map_err(usage)?;
    let text = original.text.as_deref().unwrap_or_default();
    let edited = config::add_server(&path, text, name, &server, force).map_err(usage)?;
    config::write_back(&original, &edited).map_err(usage)?;
    ctx.out.line(&format!("added {name} to {}", path.display()));
    Ok(Exit::Success)
}

/// `KEY=VALUE` words as a map.
fn pairs(words: &[String], flag: &str) -> Result<BTreeMap<String, String>, Failure> {
    (words.iter())
        .map(|word| match word.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
            _ => Err(Failure::usage(format!(
                "{flag} takes KEY=VALUE, not {word:?}"
            ))),
        })
        .collect()
}
