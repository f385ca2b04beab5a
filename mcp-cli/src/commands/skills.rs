//! `skills [SERVER]...`: the skills of the named servers (or the whole catalogue): name,
//! files and their size, description. Only `skills/list` is asked; no file of a skill is
//! read before it is fetched (the skills extension's rule).

use mcp_smol::proto::skills::SkillResources;
use serde_json::{Value, json};

use crate::commands::Context;
use crate::commands::resources::listed;
use crate::exit::{Exit, Failure};
use crate::hub::SkillEntry;
use crate::output;

pub(crate) async fn run(ctx: &mut Context, given: &[String]) -> Result<Exit, Failure> {
    let (catalogue, exit) = listed(ctx, given).await?;
    if ctx.json {
        let skills: Vec<Value> = catalogue.skills.iter().map(as_json).collect();
        ctx.out.line(&output::pretty(&Value::Array(skills)));
        return Ok(exit);
    }
    let rows: Vec<[String; 3]> = (catalogue.skills.iter()).map(row).collect();
    let widths = [0, 1].map(|column| {
        let width = rows.iter().map(|row| row[column].chars().count()).max();
        width.unwrap_or(0)
    });
    for [name, files, description] in rows {
        let line = format!(
            "{name:w0$}  {files:w1$}  {description}",
            w0 = widths[0],
            w1 = widths[1]
        );
        ctx.out.line(line.trim_end());
    }
    Ok(exit)
}

fn as_json(entry: &SkillEntry) -> Value {
    let mut value = serde_json::to_value(&entry.skill).unwrap_or(Value::Null);
    value["server"] = json!(entry.server);
    value["qualifiedName"] = json!(entry.name);
    value
}

/// The shown name, how many files of how many bytes (or `dynamic`), and the description's
/// first line.
fn row(entry: &SkillEntry) -> [String; 3] {
    let skill = &entry.skill;
    let files = match &skill.resources {
        SkillResources::Files(files) => {
            let bytes: u64 = files.iter().map(|file| file.size).sum();
            let plural = if files.len() == 1 { "" } else { "s" };
            format!("{} file{plural}, {}", files.len(), size(bytes))
        }
        SkillResources::Dynamic => "dynamic".to_owned(),
    };
    let description = skill.description().lines().next().unwrap_or_default();
    [entry.name.clone(), files, description.trim().to_owned()]
}

/// `512 B`, `12.5 KiB`, `3.2 MiB`.
fn size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_says_files_and_size() {
        let skill = serde_json::from_value(json!({
            "uri": "skill://pdf/SKILL.md",
            "frontmatter": {"name": "pdf", "description": "Fill PDFs.\nMore."},
            "resources": [
                {"uri": "skill://pdf/SKILL.md", "digest": format!("sha256:{}", "a".repeat(64)), "size": 2000},
                {"uri": "skill://pdf/x", "digest": format!("sha256:{}", "b".repeat(64)), "size": 48},
            ],
        }))
        .unwrap();
        let entry = SkillEntry {
            server: "docs".to_owned(),
            name: "docs__pdf".to_owned(),
            skill,
        };
        assert_eq!(row(&entry), ["docs__pdf", "2 files, 2.0 KiB", "Fill PDFs."]);
        assert_eq!(as_json(&entry)["server"], "docs");
        assert_eq!([size(5), size(3 << 20)], ["5 B", "3.0 MiB"]);
    }
}
