//! `answer ID ...` and `parked`: the questions calls parked on the daemon (`call --park`),
//! answered and listed; and how a parked question is printed.

use mcp_smol::proto::Request;
use serde_json::{Value, json};

use crate::commands::Context;
use crate::daemon::{self, Place, one_line};
use crate::exit::{Exit, Failure};

/// `answer ID [KEY=VALUE]... [--decline | --cancel | --open]`: the call's result as `call`
/// prints it, or its next question.
pub(crate) async fn answer(
    ctx: &mut Context,
    id: &str,
    pairs: &[String],
    action: &str,
    open: bool,
) -> Result<Exit, Failure> {
    let Some(client) = reach(ctx).await else {
        return Err(Failure::usage(format!(
            "no question is parked as {id}: no daemon runs for these config files"
        )));
    };
    if open {
        let listed = daemon::ask(&client, "mcp-cli/parked").await?;
        open_link(&listed, id).await?;
    }
    let params = json!({ "id": id, "action": action, "pairs": pairs });
    // No deadline of ours, as for a command line run there: the call's own time applies.
    let answered = (client.request(Request::new("mcp-cli/answer", Some(params))))
        .no_timeout()
        .await;
    client.close().await;
    let answered = answered
        .map_err(|error| Failure::new(Exit::Server, format!("the daemon failed: {error}")))?;
    Ok(daemon::replay(&mut ctx.out, &answered, ctx.json))
}

/// `parked`: ID SERVER TOOL KIND EXPIRES MESSAGE, oldest first (`--json`: the questions as
/// a parked call prints them).
pub(crate) async fn list(ctx: &mut Context) -> Result<Exit, Failure> {
    let listed = match reach(ctx).await {
        Some(client) => {
            let listed = daemon::ask(&client, "mcp-cli/parked").await;
            client.close().await;
            listed?
        }
        None => json!({ "parked": [] }),
    };
    let questions = listed["parked"].as_array().cloned().unwrap_or_default();
    if ctx.json {
        ctx.out.line(&Value::Array(questions).to_string());
        return Ok(Exit::Success);
    }
    if questions.is_empty() {
        ctx.out.line("no call waits on a question");
        return Ok(Exit::Success);
    }
    let text = |question: &Value, key: &str| match &question[key] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut rows = vec![["ID", "SERVER", "TOOL", "KIND", "EXPIRES", "MESSAGE"].map(String::from)];
    for question in &questions {
        rows.push([
            text(question, "id"),
            text(question, "server"),
            text(question, "tool"),
            text(question, "kind"),
            format!("{}s", text(question, "expiresInSeconds")),
            one_line(&text(question, "message")),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let cells = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"));
        ctx.out
            .line(cells.collect::<Vec<_>>().join("  ").trim_end());
    }
    Ok(Exit::Success)
}

/// The daemon for these config files, if one runs.
async fn reach(ctx: &Context) -> Option<mcp_smol::Client> {
    let env = |key: &str| std::env::var(key).ok();
    daemon::connect_taking_forms(&Place::of(&ctx.files, &env), false).await
}

/// `answer ID --open`: the link of question `id` opened in the browser here, where the person
/// is, before the server hears yes. Only `https` and `http` links are handed to a browser.
async fn open_link(listed: &Value, id: &str) -> Result<(), Failure> {
    let questions = listed["parked"].as_array().into_iter().flatten();
    let mut found = questions.filter(|question| question["id"] == id);
    let Some(question) = found.next() else {
        return Err(Failure::usage(format!(
            "no question is parked as {id} (`mcp-cli parked` lists those that wait)"
        )));
    };
    let Some(link) = question["url"].as_str() else {
        return Err(Failure::usage(format!(
            "{id} is a form, not a link: answer it with KEY=VALUE"
        )));
    };
    let web = url::Url::parse(link).is_ok_and(|url| matches!(url.scheme(), "https" | "http"));
    if !web {
        return Err(Failure::usage(format!(
            "{id}: {link:?} is not a web link, and is not opened; --decline it"
        )));
    }
    let browser = std::env::var("BROWSER").ok();
    if !crate::auth::browser::open(link.to_owned(), browser).await {
        crate::output::diagnostic(&format!("mcp-cli: open {link} yourself"));
    }
    Ok(())
}
