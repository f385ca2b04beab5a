//! `agent-help [--skill [--to DIR|claude|codex [--force]]]`: the Agent Skill that teaches an
//! agent to drive mcp-cli (`mcp-cli/skill/SKILL.md`, built in): its instructions, the whole
//! SKILL.md, or the skill installed where an agent reads skills.

use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::skills::{Fetched, folder};

/// The skill, as the repository holds it.
const SKILL: &str = include_str!("../../skill/SKILL.md");

pub(crate) fn run(
    ctx: &mut Context,
    skill: bool,
    to: Option<&str>,
    force: bool,
) -> Result<Exit, Failure> {
    let Some(to) = to else {
        let text = if skill { SKILL } else { instructions() };
        ctx.out.line(text.trim_end_matches('\n'));
        return Ok(Exit::Success);
    };
    let installed = Fetched {
        name: "mcp-cli".to_owned(),
        files: vec![("SKILL.md".to_owned(), SKILL.as_bytes().to_vec())],
        unlisted: false,
    };
    let target = folder::write(&folder::destination(to)?, &installed, force)?;
    ctx.out.line(&target.display().to_string());
    Ok(Exit::Success)
}

/// The skill without its frontmatter: the text to paste into an `AGENTS.md` or `CLAUDE.md`.
fn instructions() -> &'static str {
    let body = SKILL
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"));
    body.map_or(SKILL, |(_, body)| body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_is_a_valid_skill_named_mcp_cli() {
        let frontmatter = crate::skills::frontmatter::read(SKILL).unwrap();
        assert_eq!(frontmatter["name"], "mcp-cli");
        let description = frontmatter["description"].as_str().unwrap();
        assert!(
            (1..=1024).contains(&description.chars().count()),
            "{description}"
        );
        assert!(instructions().starts_with("# Calling MCP tools with mcp-cli\n"));
    }
}
