//! `logs SERVER [-n N]`: the last lines of a server's stderr log.

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::logs;

pub(crate) fn run(ctx: &mut Context, server: &str, count: usize) -> Result<Exit, Failure> {
    if let Ok((name, Some(remote))) = ctx.hub.remote(server) {
        return Err(Failure::usage(format!(
            "{name} is a remote server ({}): there is no process and so no stderr log; \
             `mcp-cli servers` shows why it failed",
            remote.url
        )));
    }
    let path = logs::log_path(&ctx.state.logs(), server);
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
        Err(error) => Err(Failure::new(
            Exit::Server,
            format!("cannot read {}: {error}", path.display()),
        )),
    }
}
