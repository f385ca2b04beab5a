//! A host's skills (the skills extension): `skills/list` and `skills/get` from the catalogue,
//! and `resources/read` of a skill's files planned to the server whose skill it is.
//!
//! Two servers may offer skills of one name, and even at one URI, so each skill is shown
//! under its server, as tools are: `skill://pdf/SKILL.md` of server `docs` is
//! `skill://docs/pdf/SKILL.md` here. Only the URIs change, never the name: a skill's name is
//! its `SKILL.md`'s frontmatter, which the host checks the file against, and the last segment
//! of its URI, which stays last. A skill whose URI is not `skill://` is shown as its server
//! has it, and found by that URI.

use std::sync::Arc;

use mcp_smol::proto::server::{ClientInfo, HostRequestId};
use mcp_smol::proto::skills::{Skill, SkillResources};
use mcp_smol::proto::{ListResult, RawResult, Request, RpcError};
use serde_json::{Value, json};

use super::call::{Plan, Route, Work};
use super::errors::{invalid_params, withheld};
use super::{Gateway, HostLink};
use crate::hub::{Catalogue, SkillEntry};

const SCHEME: &str = "skill://";

impl Gateway {
    /// `skills/list`, in one page, every served server's skills under their server.
    pub(crate) async fn list_skills(&self, era: Option<&ClientInfo>) -> Result<Value, RpcError> {
        let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
        let page = ListResult {
            items: catalogue.skills.iter().map(shown).collect::<Vec<Skill>>(),
            next_cursor: None,
            skipped: 0,
            cache: self.list_hint(era, true),
        };
        Ok(Value::Object(page.to_json()))
    }

    /// `skills/get` of a skill the catalogue lists, by the URI shown for it.
    pub(crate) async fn get_skill(
        &self,
        params: &Value,
        era: Option<&ClientInfo>,
    ) -> Result<Value, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
        let Some(entry) = catalogue
            .skills
            .iter()
            .find(|entry| shown_uri(entry, &entry.skill.uri) == uri)
        else {
            let asked = served_as(uri, &catalogue).map(|(_, uri)| uri);
            return Err(
                (asked.and_then(|asked| withheld(&catalogue, "skill", &asked)))
                    .unwrap_or_else(|| invalid_params(format!("no skill is served at {uri}"))),
            );
        };
        let mut result = serde_json::Map::new();
        result.insert("skill".to_owned(), json!(shown(entry)));
        if let Some(hint) = self.list_hint(era, true) {
            hint.insert_into(&mut result);
        }
        Ok(Value::Object(result))
    }

    /// A host's `resources/read` of `uri`, a file of a listed skill ([`served_as`]), from
    /// `server` under the URI the server gave it, `original`.
    pub(crate) async fn read_skill_file(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        (params, era): (&Value, Option<&ClientInfo>),
        (server, original): (String, String),
    ) -> Result<RawResult, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let work = Work::Request {
            server,
            origin: format!("resources/read {uri}"),
            request: Request::read_resource(&original).untyped(),
        };
        let route = Route::of(era, "resources/read", params);
        let read = self.run(host, id, Plan { work, route }).await?;
        // The contents name the file as the host asked for it.
        Ok(renamed_contents(read, &original, uri))
    }
}

/// The server and the server's own URI of a file of one of the catalogue's skills, shown
/// to hosts as `uri`.
pub(crate) fn served_as(uri: &str, catalogue: &Catalogue) -> Option<(String, String)> {
    catalogue.skills.iter().find_map(|entry| {
        let skill = &entry.skill;
        let under_server = uri
            .strip_prefix(SCHEME)
            .and_then(|rest| rest.split_once('/'));
        let original = match under_server {
            Some((server, rest)) if server == entry.server && skill.uri.starts_with(SCHEME) => {
                format!("{SCHEME}{rest}")
            }
            _ if !skill.uri.starts_with(SCHEME) => uri.to_owned(),
            _ => return None,
        };
        let listed = match &skill.resources {
            SkillResources::Files(files) => files.iter().any(|file| file.uri == original),
            SkillResources::Dynamic => original == skill.uri || skill.path_of(&original).is_some(),
        };
        listed.then(|| (entry.server.clone(), original))
    })
}

/// The URI `uri` of `entry`'s skill is shown under.
fn shown_uri(entry: &SkillEntry, uri: &str) -> String {
    match uri.strip_prefix(SCHEME) {
        Some(rest) if entry.skill.uri.starts_with(SCHEME) => {
            format!("{SCHEME}{}/{rest}", entry.server)
        }
        _ => uri.to_owned(),
    }
}

/// The entry as hosts see it: its URIs under its server.
fn shown(entry: &SkillEntry) -> Skill {
    let mut skill = entry.skill.clone();
    skill.uri = shown_uri(entry, &skill.uri);
    if let SkillResources::Files(files) = &mut skill.resources {
        for file in files {
            file.uri = shown_uri(entry, &file.uri);
        }
    }
    skill
}

/// A read's contents, the item that names `original` renamed `shown`.
fn renamed_contents(read: RawResult, original: &str, shown: &str) -> RawResult {
    let Ok(Value::Object(mut result)) = read.into_value() else {
        return RawResult::from(json!({"contents": []}));
    };
    if let Some(Value::Array(items)) = result.get_mut("contents") {
        for item in items {
            if item.get("uri").and_then(Value::as_str) == Some(original) {
                item["uri"] = json!(shown);
            }
        }
    }
    RawResult::from(Value::Object(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(server: &str, uri: &str, files: Value) -> SkillEntry {
        let name = uri
            .trim_end_matches("/SKILL.md")
            .rsplit('/')
            .next()
            .unwrap();
        let skill = serde_json::from_value(json!({
            "uri": uri,
            "frontmatter": {"name": name, "description": "d"},
            "resources": files,
        }))
        .unwrap();
        SkillEntry {
            server: server.to_owned(),
            name: crate::names::qualified(server, name),
            skill,
        }
    }

    fn file(uri: &str) -> Value {
        json!({"uri": uri, "digest": format!("sha256:{}", "a".repeat(64)), "size": 1})
    }

    #[test]
    fn each_skill_is_shown_under_its_server_and_read_from_it() {
        let docs = entry(
            "docs",
            "skill://pdf/SKILL.md",
            json!([file("skill://pdf/SKILL.md"), file("skill://pdf/refs/a.md")]),
        );
        let other = entry(
            "other",
            "skill://pdf/SKILL.md",
            json!([file("skill://pdf/SKILL.md")]),
        );
        let plain = entry("files", "file:///s/x/SKILL.md", json!("dynamic"));
        let shown_docs = shown(&docs);
        assert_eq!(shown_docs.uri, "skill://docs/pdf/SKILL.md");
        assert_eq!(shown_docs.name(), "pdf");
        assert_eq!(shown(&plain).uri, "file:///s/x/SKILL.md");
        let catalogue = Catalogue {
            skills: vec![docs, other, plain],
            ..Catalogue::default()
        };
        let route = |uri: &str| served_as(uri, &catalogue);
        assert_eq!(
            route("skill://docs/pdf/refs/a.md"),
            Some(("docs".into(), "skill://pdf/refs/a.md".into()))
        );
        assert_eq!(
            route("skill://other/pdf/SKILL.md"),
            Some(("other".into(), "skill://pdf/SKILL.md".into()))
        );
        assert_eq!(
            route("skill://other/pdf/refs/a.md"),
            None,
            "not a file of its skill"
        );
        assert_eq!(route("skill://pdf/SKILL.md"), None, "not under a server");
        assert_eq!(
            route("file:///s/x/made/now.md"),
            Some(("files".into(), "file:///s/x/made/now.md".into())),
            "a dynamic skill's files are all under its folder"
        );
    }

    #[test]
    fn a_read_names_the_file_as_the_host_asked() {
        let read =
            RawResult::from(json!({"contents": [{"uri": "skill://pdf/SKILL.md", "text": "x"}]}));
        let renamed = renamed_contents(read, "skill://pdf/SKILL.md", "skill://docs/pdf/SKILL.md");
        let renamed = renamed.into_value().unwrap();
        assert_eq!(renamed["contents"][0]["uri"], "skill://docs/pdf/SKILL.md");
    }
}
