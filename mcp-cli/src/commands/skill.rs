//! `skill SERVER NAME [--to DIR|claude|codex] [--force]`: one skill fetched and checked file
//! by file against the server's entry (`skills/`), then written into the folder, or, without
//! `--to`, its `SKILL.md` printed (only that file is read).

use serde_json::json;

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::output;
use crate::skills::{self, folder};
use crate::spinner::Spinner;

pub(crate) async fn run(
    ctx: &mut Context,
    server: &str,
    name: &str,
    to: Option<&str>,
    force: bool,
) -> Result<Exit, Failure> {
    let server = ctx.hub.resolve(server)?;
    ctx.hub.check(&server)?;
    // Where it goes is settled before anything is read.
    let dir = to.map(folder::destination).transpose()?;
    let fetched = {
        let _spinner = Spinner::start(format!("fetching skill {name}"));
        let entry = ctx.hub.find_skill(&server, name).await?;
        skills::fetch(&ctx.hub, &server, &entry.skill, dir.is_some()).await?
    };
    let Some(dir) = dir else {
        if ctx.json {
            let shown = json!({"name": fetched.name, "server": server, "text": fetched.manifest()});
            ctx.out.line(&output::pretty(&shown));
        } else {
            ctx.out.line(fetched.manifest().trim_end_matches('\n'));
        }
        return Ok(Exit::Success);
    };
    let target = folder::write(&dir, &fetched, force)?;
    if fetched.unlisted {
        ctx.notice(&format!(
            "mcp-cli: skill {name} of server {server} is dynamic: its entry lists no files, so \
             only its SKILL.md was fetched"
        ));
    }
    if ctx.json {
        let files: Vec<&str> = fetched
            .files
            .iter()
            .map(|(path, _)| path.as_str())
            .collect();
        let written = json!({
            "name": fetched.name,
            "server": server,
            "path": target.display().to_string(),
            "files": files,
        });
        ctx.out.line(&output::pretty(&written));
    } else {
        let count = fetched.files.len();
        let plural = if count == 1 { "" } else { "s" };
        ctx.out.line(&format!(
            "{}  ({count} file{plural}, checked)",
            target.display()
        ));
    }
    Ok(Exit::Success)
}
