//! `registry sync [--url URL] [--full]`, `registry search QUERY`, `registry show NAME[@VERSION]`:
//! the registries' servers, kept in the state folder by `sync` and read offline by the others
//! (`show` of a version other than the latest asks the registry).

use serde_json::{Value, json};

use crate::auth::http::{Http, Network, Request, printable};
use crate::cli::RegistryAction;
use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::registry::model::{Input, Listed, Status};
use crate::registry::snapshot::Snapshot;
use crate::registry::{self, sync};
use crate::spinner::Spinner;

/// How long one registry request may take.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub(crate) async fn run(ctx: &mut Context, action: RegistryAction) -> Result<Exit, Failure> {
    match action {
        RegistryAction::Sync { url, full } => sync_all(ctx, url.as_deref(), full).await,
        RegistryAction::Search { query, limit } => search(ctx, &query.join(" "), limit),
        RegistryAction::Show { name, url } => show(ctx, &name, url.as_deref()).await,
    }
}

/// The registries to use: `given`, else those of the user's file, else the official one.
pub(crate) fn registries(ctx: &Context, given: Option<&str>) -> Result<Vec<String>, Failure> {
    let env = |key: &str| std::env::var(key).ok();
    let file = registry::user_file(&ctx.configs, &env).map_err(Failure::usage)?;
    registry::configured(given, &file).map_err(Failure::usage)
}

/// The snapshots of `urls` kept in the state folder.
pub(crate) fn kept(ctx: &Context, urls: &[String]) -> Result<Vec<Snapshot>, Failure> {
    registry::snapshots(&ctx.state.registry(), urls).map_err(|why| Failure::new(Exit::Usage, why))
}

async fn sync_all(ctx: &mut Context, given: Option<&str>, full: bool) -> Result<Exit, Failure> {
    let urls = registries(ctx, given)?;
    let dir = ctx.state.registry();
    let http = Network { timeout: TIMEOUT };
    let mut exit = Exit::Success;
    let mut reports = Vec::new();
    for url in &urls {
        let path = Snapshot::path(&dir, url);
        let previous = match Snapshot::load(&path) {
            Ok(previous) => previous,
            // An unreadable snapshot is replaced by a whole sync.
            Err(why) => {
                ctx.notice(&format!("mcp-cli: warning: {why}; syncing it whole"));
                None
            }
        };
        let age = previous.as_ref().map(|kept| kept.age(registry::now()));
        let spinner = Spinner::start(format!("syncing {url}"));
        let mut progress =
            |count: usize| spinner.set_label(format!("syncing {url}: {count} servers"));
        let synced = sync::sync(
            &http,
            url,
            previous.filter(|_| !full),
            sync::Limits::DEFAULT,
            registry::now(),
            &mut progress,
        )
        .await;
        drop(spinner);
        let saved = synced.and_then(|(snapshot, synced)| {
            snapshot.save(&path)?;
            Ok((snapshot, synced))
        });
        match saved {
            Ok((snapshot, synced)) => {
                let offered = sync::offered(&snapshot).count();
                if !ctx.json {
                    let what = match synced.delta {
                        true => format!("{} new or changed", synced.received),
                        false if synced.pages == 1 => "1 page".to_owned(),
                        false => format!("{} pages", synced.pages),
                    };
                    ctx.out.line(&format!("{url}: {offered} servers ({what})"));
                }
                for why in synced.skipped.iter().take(5) {
                    ctx.notice(&format!(
                        "mcp-cli: warning: {url}: skipped an entry: {}",
                        printable(why)
                    ));
                }
                if synced.skipped.len() > 5 {
                    let more = synced.skipped.len() - 5;
                    ctx.notice(&format!(
                        "mcp-cli: warning: {url}: skipped {more} more entries"
                    ));
                }
                reports.push(json!({
                    "url": url, "servers": offered, "received": synced.received,
                    "pages": synced.pages, "delta": synced.delta, "skipped": synced.skipped,
                }));
            }
            Err(why) => {
                let kept = match age {
                    Some(age) => format!("the last good snapshot (synced {age} ago) is kept"),
                    None => "there is no snapshot of it yet".into(),
                };
                ctx.report(&Failure::new(Exit::Server, format!("{why}; {kept}")));
                reports.push(json!({"url": url, "error": why}));
                exit = Exit::Server;
            }
        }
    }
    if ctx.json {
        ctx.out.line(&crate::output::pretty(&Value::Array(reports)));
    }
    Ok(exit)
}

fn search(ctx: &mut Context, query: &str, limit: usize) -> Result<Exit, Failure> {
    let urls = registries(ctx, None)?;
    let snapshots = kept(ctx, &urls)?;
    if snapshots.is_empty() {
        return Err(Failure::usage(format!(
            "no registry is synced yet ({}); run `mcp-cli registry sync` first",
            urls.join(", ")
        )));
    }
    for snapshot in &snapshots {
        ctx.notice(&format!(
            "mcp-cli: {} synced {} ago",
            snapshot.url,
            snapshot.age(registry::now())
        ));
    }
    let (index, unreadable) = crate::search::with_installed_model(registry::documents(&snapshots));
    if let Some(why) = unreadable {
        ctx.notice(&format!("mcp-cli: warning: {why}"));
    }
    let hits = index.search(query, limit);
    let listed = |name: &str| registry::find(&snapshots, name).map(|(_, listed)| listed);
    if ctx.json {
        let hits: Vec<Value> = (hits.iter())
            .filter_map(|hit| {
                let listed = listed(&hit.entry.name)?;
                Some(json!({
                    "name": listed.server.name,
                    "version": listed.server.version,
                    "title": listed.server.title,
                    "description": listed.server.description,
                    "status": listed.official.status.word(),
                    "score": (f64::from(hit.score) * 100.0).round() / 100.0,
                }))
            })
            .collect();
        ctx.out.line(&crate::output::pretty(&Value::Array(hits)));
        return Ok(Exit::Success);
    }
    if hits.is_empty() {
        ctx.out.diagnostic(&format!("no server matches {query:?}"));
        return Ok(Exit::Success);
    }
    let width = hits
        .iter()
        .map(|hit| hit.entry.name.len())
        .max()
        .unwrap_or(0);
    for hit in &hits {
        let Some(listed) = listed(&hit.entry.name) else {
            continue;
        };
        let mut line = format!(
            "{:width$}  {}",
            listed.server.name,
            printable(&listed.server.description)
        );
        if listed.official.status != Status::Active {
            line.push_str(&format!(" [{}]", listed.official.status.word()));
        }
        ctx.out.line(&line);
    }
    Ok(Exit::Success)
}

/// The entry named `given` (`NAME[@VERSION]`): from the snapshots when they hold that
/// version, else asked of the registries (`/v0.1/servers/NAME/versions/VERSION`, `latest`
/// when no version is given and no snapshot holds it). With its registry's URL.
pub(crate) async fn entry(
    ctx: &mut Context,
    given: &str,
    url: Option<&str>,
) -> Result<(String, Listed), Failure> {
    let (name, version) = registry::split_version(given);
    registry::model::check_name(name).map_err(Failure::usage)?;
    let urls = registries(ctx, url)?;
    let snapshots = kept(ctx, &urls)?;
    if let Some((url, listed)) = registry::find(&snapshots, name)
        && version.is_none_or(|version| version == listed.server.version)
    {
        if let Some(snapshot) = snapshots.iter().find(|snapshot| snapshot.url == url) {
            let age = snapshot.age(registry::now());
            ctx.notice(&format!(
                "mcp-cli: from the snapshot of {url}, synced {age} ago"
            ));
        }
        return Ok((url.to_owned(), listed.clone()));
    }
    let http = Network { timeout: TIMEOUT };
    let mut why = Vec::new();
    for url in &urls {
        match fetch(&http, url, name, version.unwrap_or("latest")).await {
            Ok(Some(listed)) => return Ok((url.clone(), listed)),
            Ok(None) => why.push(format!("{url} has no {given}")),
            Err(error) => why.push(error),
        }
    }
    Err(Failure::usage(format!(
        "{given} is not found: {}",
        why.join("; ")
    )))
}

/// One version of one server, asked of the registry at `url`; `Ok(None)` when it has none.
async fn fetch(
    http: &dyn Http,
    url: &str,
    name: &str,
    version: &str,
) -> Result<Option<Listed>, String> {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let address = format!(
        "{url}/v0.1/servers/{}/versions/{}",
        utf8_percent_encode(name, NON_ALPHANUMERIC),
        utf8_percent_encode(version, NON_ALPHANUMERIC)
    );
    let response = http.send(Request::get(&address)).await?;
    if response.status == 404 {
        return Ok(None);
    }
    if !response.is_success() {
        return Err(format!(
            "the registry at {url} answered {} to GET {address}",
            response.describe()
        ));
    }
    let raw: Value = response.json("server entry", &address)?;
    let listed = Listed::read(raw)
        .map_err(|why| format!("the registry at {url} sent an unusable entry: {why}"))?;
    match listed.server.name == name {
        true => Ok(Some(listed)),
        false => Err(format!(
            "the registry at {url} answered for {name} with {}",
            listed.server.name
        )),
    }
}

async fn show(ctx: &mut Context, given: &str, url: Option<&str>) -> Result<Exit, Failure> {
    let (url, listed) = entry(ctx, given, url).await?;
    if ctx.json {
        let mut raw = listed.raw.clone();
        raw["registry"] = url.into();
        ctx.out.line(&crate::output::pretty(&raw));
        return Ok(Exit::Success);
    }
    for line in describe(&url, &listed) {
        ctx.out.line(&line);
    }
    Ok(Exit::Success)
}

/// A server's entry as a person reads it.
fn describe(url: &str, listed: &Listed) -> Vec<String> {
    let server = &listed.server;
    let text = |text: &str| printable(text);
    let mut lines = vec![format!("{} {}", server.name, server.version)];
    if let Some(title) = &server.title {
        lines.push(format!("  {}", text(title)));
    }
    lines.push(format!("  {}", text(&server.description)));
    lines.push(format!("  status: {}", listed.official.status.word()));
    if let Some(published) = &listed.official.published_at {
        lines.push(format!("  published: {}", text(published)));
    }
    lines.push(format!("  registry: {url}"));
    if let Some(repository) = server.repository.as_ref().filter(|r| !r.url.is_empty()) {
        lines.push(format!("  repository: {}", text(&repository.url)));
    }
    if let Some(website) = &server.website_url {
        lines.push(format!("  website: {}", text(website)));
    }
    for package in &server.packages {
        let version = package
            .version
            .as_deref()
            .map(|v| format!("@{v}"))
            .unwrap_or_default();
        lines.push(format!(
            "  package: {} {}{version} ({})",
            text(&package.registry_type),
            text(&package.identifier),
            text(&package.transport.kind)
        ));
        let arguments = package
            .runtime_arguments
            .iter()
            .chain(&package.package_arguments);
        for argument in arguments {
            let key = argument
                .name
                .as_deref()
                .or(argument.value_hint.as_deref())
                .unwrap_or("argument");
            lines.push(format!("    argument {}", input_line(key, &argument.input)));
        }
        for variable in &package.environment_variables {
            lines.push(format!(
                "    variable {}",
                input_line(&variable.name, &variable.input)
            ));
        }
    }
    for remote in &server.remotes {
        lines.push(format!(
            "  remote: {} {}",
            text(&remote.kind),
            text(remote.url.as_deref().unwrap_or_default())
        ));
        for (key, input) in &remote.variables {
            lines.push(format!("    URL variable {}", input_line(key, input)));
        }
        for header in &remote.headers {
            lines.push(format!(
                "    header {}",
                input_line(&header.name, &header.input)
            ));
        }
    }
    lines
}

/// `NAME (required, secret) [default]: description`.
pub(crate) fn input_line(key: &str, input: &Input) -> String {
    let mut notes = Vec::new();
    if input.value.is_some() {
        notes.push("fixed".to_owned());
    }
    if input.is_required {
        notes.push("required".into());
    }
    if input.is_secret {
        notes.push("secret".into());
    }
    if !input.choices.is_empty() {
        notes.push(format!("one of {}", input.choices.join("|")));
    }
    let mut line = printable(key);
    if !notes.is_empty() {
        line.push_str(&format!(" ({})", notes.join(", ")));
    }
    if let Some(default) = &input.default {
        line.push_str(&format!(" [{}]", printable(default)));
    }
    if let Some(description) = &input.description {
        line.push_str(&format!(": {}", printable(description)));
    }
    line
}
