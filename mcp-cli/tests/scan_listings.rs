//! The poisoning scan over recorded listings: the real servers' (`listings/real/`, recorded
//! from the reference servers and the SDK peers the suites install) pass clean, and each
//! poisoned one (`listings/poisoned/`) is flagged where its `expected` member says.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcp_client_cli::scan::{self, Finding};
use mcp_client_cli::{Prompt, Resource, ResourceTemplate, Tool};
use serde_json::Value;

/// A recorded listing: what `tools/list`, `prompts/list`, `resources/list` and
/// `resources/templates/list` answered, each list whole.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    #[serde(default)]
    tools: Vec<Tool>,
    #[serde(default)]
    prompts: Vec<Prompt>,
    #[serde(default)]
    resources: Vec<Resource>,
    #[serde(default)]
    resource_templates: Vec<ResourceTemplate>,
    /// For a poisoned listing: by `tool NAME`, `prompt NAME`, `resource NAME` or `template
    /// NAME`, the findings expected, each as `KIND at FIELD`.
    #[serde(default)]
    expected: BTreeMap<String, Vec<String>>,
}

fn listings(folder: &str) -> Vec<(PathBuf, Listing)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/listings")
        .join(folder);
    let mut listings: Vec<(PathBuf, Listing)> = (std::fs::read_dir(&dir).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let listing =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, listing)
        })
        .collect();
    listings.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!listings.is_empty(), "no listings in {}", dir.display());
    listings
}

/// Every entry of `listing` with the findings on it, by `tool NAME` and the like.
fn scanned(listing: &Listing, others: &[String]) -> BTreeMap<String, Vec<Finding>> {
    let tools = (listing.tools.iter()).map(|t| (format!("tool {}", t.name), scan::scan(t, others)));
    let prompts = (listing.prompts.iter())
        .map(|p| (format!("prompt {}", p.name), scan::scan_prompt(p, others)));
    let resources = (listing.resources.iter()).map(|r| {
        (
            format!("resource {}", r.name),
            scan::scan_resource(r, others),
        )
    });
    let templates = (listing.resource_templates.iter()).map(|t| {
        (
            format!("template {}", t.name),
            scan::scan_template(t, others),
        )
    });
    tools
        .chain(prompts)
        .chain(resources)
        .chain(templates)
        .collect()
}

fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// The real servers' listings, each scanned with the others' names as the other configured
/// servers (as the suites configure them together): no finding at all.
#[test]
fn the_real_servers_listings_pass_clean() {
    let listings = listings("real");
    let names: Vec<String> = listings.iter().map(|(path, _)| stem(path)).collect();
    let mut entries = 0;
    for (path, listing) in &listings {
        let me = stem(path);
        let others: Vec<String> = names.iter().filter(|n| **n != me).cloned().collect();
        let flagged: Vec<(String, Vec<Finding>)> = (scanned(listing, &others).into_iter())
            .inspect(|_| entries += 1)
            .filter(|(_, findings)| !findings.is_empty())
            .collect();
        assert!(flagged.is_empty(), "{me}: false alarms: {flagged:#?}");
    }
    assert!(entries > 100, "only {entries} entries read");
}

/// Each poisoned entry is flagged, with the kind and the place its listing expects, and
/// nothing else is.
#[test]
fn each_poisoned_listing_is_flagged_in_the_right_place() {
    let others = ["mail".to_owned()];
    for (path, listing) in listings("poisoned") {
        let file = stem(&path);
        let found = scanned(&listing, &others);
        assert_eq!(
            found.keys().collect::<Vec<_>>(),
            listing.expected.keys().collect::<Vec<_>>(),
            "{file}: every entry is poisoned and expected"
        );
        for (entry, findings) in found {
            let got: Vec<String> = (findings.iter())
                .map(|f| format!("{} at {}", json_kind(f), f.field))
                .collect();
            assert_eq!(
                got, listing.expected[&entry],
                "{file}: {entry}: {findings:#?}"
            );
        }
    }
}

fn json_kind(finding: &Finding) -> String {
    match serde_json::to_value(finding.kind).unwrap() {
        Value::String(kind) => kind,
        other => other.to_string(),
    }
}
