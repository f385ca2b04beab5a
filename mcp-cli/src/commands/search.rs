//! `search QUERY [--limit N] [--refresh] [--explain]`: the tools that best match a
//! plain-language query, best first, each with a one-line description (or why it ranked
//! there) and its score.

use serde_json::Value;

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::search;
use crate::spinner::Spinner;

pub(crate) async fn run(
    ctx: &mut Context,
    query: &str,
    limit: usize,
    refresh: bool,
    explain: bool,
) -> Result<Exit, Failure> {
    if query.trim().is_empty() {
        return Err(Failure::usage(
            "search needs a query, such as `search read a file`",
        ));
    }
    let servers = ctx.hub.default_servers();
    if let Some(notice) = crate::host::pending_notice(&ctx.hub.pending()) {
        ctx.notice(&notice);
    }
    let mut catalogue = {
        let _spinner = Spinner::start(format!("listing {} server(s)", servers.len()));
        match refresh {
            true => ctx.hub.tools_live(&servers).await,
            false => search::catalogue(&ctx.hub, &servers).await,
        }
    };
    let exit = ctx.report_left_out(&mut catalogue);
    let (index, unreadable) = search::with_installed_model(catalogue.tools);
    if let Some(why) = unreadable {
        ctx.notice(&format!("mcp-cli: warning: {why}"));
    }
    let hits = index.search(query, limit);
    if ctx.json {
        let hit = |hit: &search::Hit<'_>| {
            let mut json = hit.to_json_scored();
            if explain {
                json["why"] = hit.explain().into();
            }
            json
        };
        let hits: Vec<Value> = hits.iter().map(hit).collect();
        ctx.out.line(&crate::output::pretty(&Value::Array(hits)));
    } else if hits.is_empty() {
        ctx.out.diagnostic(&format!("no tool matches {query:?}"));
    } else {
        let width = hits
            .iter()
            .map(|hit| hit.entry.name.len())
            .max()
            .unwrap_or(0);
        for hit in &hits {
            let name = &hit.entry.name;
            let said = match explain {
                true => hit.explain(),
                false => search::summary(hit.entry),
            };
            let line = format!("{name:width$}  {:4.2}  {said}", hit.score);
            ctx.out.line(line.trim_end());
        }
    }
    Ok(exit)
}
