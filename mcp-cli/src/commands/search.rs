//! `search QUERY [--limit N] [--refresh]`: the tools that best match a plain-language query,
//! best first, each with a one-line description and its score.

use serde_json::Value;

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::search::{self, Index};
use crate::spinner::Spinner;

pub(crate) async fn run(
    ctx: &mut Context,
    query: &str,
    limit: usize,
    refresh: bool,
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
    let index = Index::new(catalogue.tools);
    let hits = index.search(query, limit);
    if ctx.json {
        let hits: Vec<Value> = hits.iter().map(search::Hit::to_json).collect();
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
            let line = format!(
                "{name:width$}  {:5.2}  {}",
                hit.score,
                search::summary(hit.entry)
            );
            ctx.out.line(line.trim_end());
        }
    }
    Ok(exit)
}
