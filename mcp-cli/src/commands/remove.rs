//! `remove NAME`: a server's entry taken out of the user file (or `--config FILE`), with the
//! secrets `install` kept for it (`${secret:NAME/...}`).

use crate::commands::Context;
use crate::config;
use crate::exit::{Exit, Failure};

pub(crate) fn run(ctx: &mut Context, name: &str) -> Result<Exit, Failure> {
    let env = |key: &str| std::env::var(key).ok();
    let usage = |error: config::ConfigError| Failure::usage(error.to_string());
    let path = config::native_file(&ctx.configs, &env).map_err(usage)?;
    let original = config::read_original(&path).map_err(usage)?;
    let Some(text) = &original.text else {
        return Err(Failure::usage(format!(
            "no server named {name} in {}: the file does not exist",
            path.display()
        )));
    };
    let edited = config::remove_server(&path, text, name).map_err(usage)?;
    config::write_back(&original, &edited).map_err(usage)?;
    ctx.out
        .line(&format!("removed {name} from {}", path.display()));
    for secret in crate::secrets::named_by_entry(text, name) {
        match crate::secrets::remove(&secret, &env) {
            Ok(true) => ctx.out.line(&format!("forgot secret {secret}")),
            Ok(false) => {}
            Err(why) => ctx.notice(&format!("mcp-cli: warning: {why}")),
        }
    }
    Ok(Exit::Success)
}
