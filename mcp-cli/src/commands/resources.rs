//! `resources [SERVER]...`: the resources and resource templates of the named servers (or the
//! whole catalogue): URI, name and MIME type.

use serde_json::{Value, json};

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::hub::{Catalogue, HubError, Skipped};
use crate::output;
use crate::spinner::Spinner;

pub(crate) async fn run(ctx: &mut Context, given: &[String]) -> Result<Exit, Failure> {
    let (catalogue, exit) = listed(ctx, given).await?;
    if ctx.json {
        let resources =
            (catalogue.resources.iter()).map(|entry| with_server(&entry.resource, &entry.server));
        let templates =
            (catalogue.templates.iter()).map(|entry| with_server(&entry.template, &entry.server));
        let listing = json!({
            "resources": resources.collect::<Vec<_>>(),
            "resourceTemplates": templates.collect::<Vec<_>>(),
        });
        ctx.out.line(&output::pretty(&listing));
        return Ok(exit);
    }
    let mut rows: Vec<[String; 4]> = Vec::new();
    for entry in &catalogue.resources {
        let resource = &entry.resource;
        let mime = resource.mime_type.clone().unwrap_or_default();
        rows.push([
            entry.server.clone(),
            resource.uri.clone(),
            resource.name.clone(),
            mime,
        ]);
    }
    for entry in &catalogue.templates {
        let template = &entry.template;
        let mime = template.mime_type.clone().unwrap_or_default();
        let name = format!("{} (template)", template.name);
        rows.push([
            entry.server.clone(),
            template.uri_template.clone(),
            name,
            mime,
        ]);
    }
    for line in columns(&rows) {
        ctx.out.line(&line);
    }
    Ok(exit)
}

/// Starts the named servers (every default one if none) and lists them; failures, entries
/// withheld by the poisoning scan and skipped entries are reported on stderr, and the exit
/// code says the worst failure.
pub(crate) async fn listed(
    ctx: &mut Context,
    given: &[String],
) -> Result<(Catalogue, Exit), Failure> {
    let servers = ctx.hub.named_or_default(given)?;
    let mut catalogue = {
        let _spinner = Spinner::start(format!("starting {} server(s)", servers.len()));
        ctx.hub.catalogue_of(&servers).await
    };
    let mut exit = Exit::Success;
    // Prompts, resources and templates the poisoning scan withholds, as warnings (the tools
    // withheld are for `tools` to say).
    for error in std::mem::take(&mut catalogue.withheld) {
        if matches!(error, HubError::FeatureFlagged { .. }) {
            ctx.warn(&Failure::from(error));
        }
    }
    for (_, error) in std::mem::take(&mut catalogue.failures) {
        let failure = Failure::from(error);
        ctx.report(&failure);
        exit = failure.exit;
    }
    // Withheld tools are the tools listing's to report; a cut listing is every listing's.
    let capped = (catalogue.withheld.iter())
        .filter(|error| matches!(error, HubError::ListingCapped { list, .. } if list != "tool"));
    for error in capped {
        ctx.warn(&Failure::from(error.clone()));
    }
    for Skipped {
        server,
        list,
        count,
    } in &catalogue.skipped
    {
        ctx.notice(&format!(
            "mcp-cli: server {server}: left out {count} unreadable {list} entr{}",
            if *count == 1 { "y" } else { "ies" }
        ));
    }
    Ok((catalogue, exit))
}

fn with_server(entry: &impl serde::Serialize, server: &str) -> Value {
    let mut value = serde_json::to_value(entry).unwrap_or(Value::Null);
    value["server"] = json!(server);
    value
}

/// Rows as aligned columns, two spaces apart; the last column is not padded.
fn columns(rows: &[[String; 4]]) -> Vec<String> {
    let mut widths = [0; 4];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |row: &[String; 4]| {
        let cells = row.iter().zip(widths).map(|(cell, w)| format!("{cell:w$}"));
        cells.collect::<Vec<_>>().join("  ").trim_end().to_owned()
    };
    rows.iter().map(line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let row = |cells: [&str; 4]| cells.map(str::to_owned);
        let rows = [
            row(["fx", "fx://a", "a", "text/plain"]),
            row(["other", "x://bb", "", ""]),
        ];
        assert_eq!(
            columns(&rows),
            ["fx     fx://a  a  text/plain", "other  x://bb"]
        );
    }
}
