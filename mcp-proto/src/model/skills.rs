//! The skills extension (SEP-2640, `io.modelcontextprotocol/skills`): the skills a server
//! offers, as `skills/list` and `skills/get` describe them. A skill is a folder whose root holds
//! a `SKILL.md`; its files are read with `resources/read` and checked against the entry (the
//! host layer does that, with a digest and a YAML reader this crate does not carry).
//!
//! An entry is read strictly, since a host writes files by it: one that breaks a rule the
//! extension states as a MUST (the URI's last segment is the skill's name, every file lies in
//! the skill's folder, each digest is `sha256:` and 64 lowercase hex digits) does not decode,
//! and a listing leaves it out and counts it in `skipped`.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::model::listing::{CacheHint, Listed};
use crate::model::request::{FromResult, Params, Request};

/// The extension's name, in the server's `capabilities.extensions`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// Every skill's manifest, at the root of its folder.
pub const MANIFEST: &str = "SKILL.md";

/// One skill, as a server lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SkillWire")]
pub struct Skill {
    /// The URI of its `SKILL.md` (`skill://pdf-processing/SKILL.md`).
    pub uri: String,
    /// The `SKILL.md`'s YAML frontmatter as a JSON object; `name` and `description` are
    /// strings, always there.
    pub frontmatter: Map<String, Value>,
    /// Its files, or `dynamic`.
    pub resources: SkillResources,
    /// Whatever else the entry carries (`_meta`), passed on as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What a skill entry says of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillResources {
    /// Every file of the skill, its `SKILL.md` among them, each with the size and digest its
    /// content must have.
    Files(Vec<SkillFile>),
    /// `"dynamic"`: the files are not listed (the server makes them as asked), so nothing but
    /// the `SKILL.md`'s frontmatter can be checked.
    Dynamic,
}

/// One file of a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFile {
    /// Its URI, under the skill's folder.
    pub uri: String,
    /// `sha256:` and the hex SHA-256 of its bytes.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
}

impl Skill {
    /// The skill's name: the frontmatter's `name`, which is also the last segment of its
    /// folder's URI.
    pub fn name(&self) -> &str {
        self.frontmatter_text("name").unwrap_or_default()
    }

    /// The frontmatter's `description`.
    pub fn description(&self) -> &str {
        self.frontmatter_text("description").unwrap_or_default()
    }

    /// The URI of the skill's folder: its `SKILL.md`'s without `/SKILL.md`.
    pub fn root(&self) -> &str {
        manifest_root(&self.uri).unwrap_or(&self.uri)
    }

    /// The file's path inside the skill's folder (`references/FORMS.md`), as the URI spells
    /// it (percent-encoding kept); `None` for a URI outside the folder.
    pub fn path_of<'a>(&self, uri: &'a str) -> Option<&'a str> {
        let inside = uri.strip_prefix(self.root())?.strip_prefix('/')?;
        (!inside.is_empty()).then_some(inside)
    }

    fn frontmatter_text(&self, field: &str) -> Option<&str> {
        self.frontmatter.get(field)?.as_str()
    }
}

impl Listed for Skill {
    const METHOD: &'static str = "skills/list";
    const MEMBER: &'static str = "skills";
}

/// The answer to `skills/get`: one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetSkillResult {
    /// The skill.
    pub skill: Skill,
    /// How long it may be kept (`ttlMs`, `cacheScope`); `None` when not said.
    pub cache: Option<CacheHint>,
}

impl FromResult for GetSkillResult {
    fn from_result(result: Value) -> Result<Self, String> {
        let Value::Object(mut result) = result else {
            return Err("not an object".to_owned());
        };
        let cache = CacheHint::read(&result);
        let skill = result.remove("skill").ok_or("`skill` is missing")?;
        let skill = serde_json::from_value(skill).map_err(|error| error.to_string())?;
        Ok(Self { skill, cache })
    }
}

impl Request<GetSkillResult> {
    /// `skills/get` of the skill whose `SKILL.md` is at `uri`, listed or not.
    pub fn get_skill(uri: &str) -> Self {
        Self::with(
            "skills/get".to_owned(),
            Params::Value(json!({ "uri": uri })),
        )
    }
}

/// The folder of a `SKILL.md` URI; `None` if it names none.
fn manifest_root(uri: &str) -> Option<&str> {
    uri.strip_suffix(MANIFEST)?.strip_suffix('/')
}

/// A skill's name as the Agent Skills rules have it: 1 to 64 lowercase letters, digits and
/// hyphens, with no hyphen at either end or next to another.
fn is_skill_name(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    (1..=64).contains(&name.len())
        && name.chars().all(allowed)
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

fn is_digest(digest: &str) -> bool {
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex_digits| hex_digits.len() == 64 && hex_digits.chars().all(hex))
}

/// An entry as sent, before its rules are checked.
#[derive(Deserialize)]
struct SkillWire {
    uri: String,
    frontmatter: Map<String, Value>,
    resources: SkillResources,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl TryFrom<SkillWire> for Skill {
    type Error = String;

    fn try_from(wire: SkillWire) -> Result<Self, String> {
        let skill = Skill {
            uri: wire.uri,
            frontmatter: wire.frontmatter,
            resources: wire.resources,
            extra: wire.extra,
        };
        let uri = &skill.uri;
        let root = manifest_root(uri).ok_or_else(|| format!("{uri} is not a SKILL.md"))?;
        let name = skill
            .frontmatter_text("name")
            .ok_or("no frontmatter name")?;
        if skill.frontmatter_text("description").is_none() {
            return Err(format!("{uri}: no frontmatter description"));
        }
        if !is_skill_name(name) {
            return Err(format!("{uri}: {name:?} is not a skill name"));
        }
        if root.rsplit('/').next() != Some(name) {
            return Err(format!("{uri} does not end in the skill's name, {name}"));
        }
        if let SkillResources::Files(files) = &skill.resources {
            if !files.iter().any(|file| file.uri == *uri) {
                return Err(format!("{uri}: its files leave out the SKILL.md"));
            }
            let mut seen = std::collections::BTreeSet::new();
            for file in files {
                if !seen.insert(&file.uri) {
                    return Err(format!("{uri}: {} is listed twice", file.uri));
                }
                let path = skill.path_of(&file.uri);
                let odd_segment =
                    |path: &str| path.split('/').any(|s| matches!(s, "" | "." | ".."));
                if file.uri != *uri && path.is_none_or(odd_segment) {
                    return Err(format!("{uri}: {} is outside the skill", file.uri));
                }
                if !is_digest(&file.digest) {
                    return Err(format!(
                        "{}: digest {:?} is not sha256",
                        file.uri, file.digest
                    ));
                }
            }
        }
        Ok(skill)
    }
}

impl Serialize for SkillResources {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Files(files) => files.serialize(serializer),
            Self::Dynamic => serializer.serialize_str("dynamic"),
        }
    }
}

impl<'de> Deserialize<'de> for SkillResources {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(text) if text == "dynamic" => Ok(Self::Dynamic),
            files @ Value::Array(_) => serde_json::from_value(files)
                .map(Self::Files)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "resources is neither a list of files nor \"dynamic\": {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::listing::ListResult;

    fn digest(fill: char) -> String {
        format!("sha256:{}", fill.to_string().repeat(64))
    }

    fn entry() -> Value {
        json!({
            "uri": "skill://acme/pdf-processing/SKILL.md",
            "frontmatter": {"name": "pdf-processing", "description": "PDFs", "metadata": {"a": 1}},
            "resources": [
                {"uri": "skill://acme/pdf-processing/SKILL.md", "digest": digest('a'), "size": 10},
                {"uri": "skill://acme/pdf-processing/references/FORMS.md", "digest": digest('b'), "size": 3},
            ],
            "_meta": {"x": true},
        })
    }

    #[test]
    fn an_entry_reads_and_writes_back_the_same() {
        let skill: Skill = serde_json::from_value(entry()).unwrap();
        assert_eq!(skill.name(), "pdf-processing");
        assert_eq!(skill.root(), "skill://acme/pdf-processing");
        assert_eq!(
            skill.path_of("skill://acme/pdf-processing/references/FORMS.md"),
            Some("references/FORMS.md")
        );
        assert_eq!(skill.path_of("skill://acme/pdf-processing-2/x"), None);
        assert_eq!(serde_json::to_value(&skill).unwrap(), entry());
        let dynamic = json!({"uri": "skill://d/SKILL.md", "frontmatter": {"name": "d", "description": "x"}, "resources": "dynamic"});
        let skill: Skill = serde_json::from_value(dynamic.clone()).unwrap();
        assert_eq!(skill.resources, SkillResources::Dynamic);
        assert_eq!(serde_json::to_value(&skill).unwrap(), dynamic);
    }

    #[test]
    fn an_entry_that_breaks_a_rule_is_left_out_of_its_page() {
        let broken = |edit: fn(&mut Value)| {
            let mut entry = entry();
            edit(&mut entry);
            entry
        };
        let page = json!({"skills": [
            entry(),
            broken(|e| e["frontmatter"]["name"] = json!("other")),
            broken(|e| e["frontmatter"]["name"] = json!("Bad--Name")),
            broken(|e| _ = e["frontmatter"].as_object_mut().unwrap().remove("description")),
            broken(|e| e["resources"][1]["uri"] = json!("skill://acme/elsewhere/x")),
            broken(|e| e["resources"][0]["uri"] = json!("skill://acme/pdf-processing/X.md")),
            broken(|e| e["resources"][1]["digest"] = json!("sha256:ABC")),
            broken(|e| e["resources"][1]["size"] = json!(-1)),
            broken(|e| e["resources"] = json!("all of them")),
            broken(|e| e["uri"] = json!("skill://acme/pdf-processing/README.md")),
            broken(|e| e["resources"][1]["uri"] = json!("skill://acme/pdf-processing/../x")),
            broken(|e| e["resources"][1]["uri"] = json!("skill://acme/pdf-processing//x")),
            broken(|e| e["resources"][1] = e["resources"][0].clone()),
        ], "ttlMs": 0, "cacheScope": "private"});
        let page = ListResult::<Skill>::from_result(page).unwrap();
        assert_eq!((page.items.len(), page.skipped), (1, 12));
        assert!(page.cache.is_some());
    }

    #[test]
    fn skill_names_follow_the_agent_skills_rules() {
        for good in ["a", "pdf-processing", "v2", &"x".repeat(64)] {
            assert!(is_skill_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a.b", &"x".repeat(65)] {
            assert!(!is_skill_name(bad), "{bad}");
        }
    }

    #[test]
    fn get_reads_the_entry_and_its_cache_hint() {
        let result = json!({"skill": entry(), "ttlMs": 5, "cacheScope": "public"});
        let got = GetSkillResult::from_result(result).unwrap();
        assert_eq!(got.skill.name(), "pdf-processing");
        assert!(got.cache.is_some());
        assert!(GetSkillResult::from_result(json!({})).is_err());
        let request = Request::get_skill("skill://a/SKILL.md");
        assert_eq!(request.method(), "skills/get");
    }
}
