//! `manual [COMMAND]...`: the man page, in roff, made from the same clap definitions as
//! `--help`, for packagers (`mcp-cli manual > mcp-cli.1`). With a COMMAND, that command's own
//! page (`mcp-cli manual tasks wait > mcp-cli-tasks-wait.1`), which the main page refers to.

use clap::CommandFactory;

use crate::cli::Cli;
use crate::commands::Context;
use crate::exit::{Exit, Failure};

pub(crate) fn run(ctx: &mut Context, path: &[String]) -> Result<Exit, Failure> {
    for line in page(path)?.lines() {
        ctx.out.line(line);
    }
    Ok(Exit::Success)
}

/// The page of the command `path` names under `mcp-cli` (the main page when it is empty).
fn page(path: &[String]) -> Result<String, Failure> {
    // Built, so that each subcommand carries its full name (`mcp-cli-tasks-wait`); clap's
    // `help` subcommand is left out, as every page lists `--help` already.
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let mut spelled = vec!["mcp-cli"];
    for name in path {
        let found = (command.get_subcommands())
            .find(|sub| sub.get_name() == name && !sub.is_hide_set())
            .cloned();
        let Some(sub) = found else {
            let parent = spelled.join(" ");
            return Err(Failure::usage(format!(
                "`{parent}` has no command `{name}`; `{parent} --help` lists them"
            )));
        };
        spelled.push(name);
        command = sub;
    }
    // Every page, not only the main one, says which program and version it documents.
    let source = format!("mcp-cli {}", env!("CARGO_PKG_VERSION"));
    let mut roff = Vec::new();
    (clap_mangen::Man::new(command).source(source))
        .render(&mut roff)
        .map_err(|error| Failure::new(Exit::Usage, format!("cannot render the manual: {error}")))?;
    Ok(String::from_utf8_lossy(&roff).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines before the first `.TH` are requests only (roff's string definitions), and the
    /// title names the page.
    fn title(page: &str) -> &str {
        let mut lines = page.lines();
        let title = (lines.by_ref())
            .find(|line| !line.starts_with(".ie ") && !line.starts_with(".el "))
            .unwrap_or_default();
        assert!(
            title.starts_with(".TH "),
            "no .TH where the page starts:\n{page}"
        );
        title
    }

    #[test]
    fn the_main_page_names_every_command() {
        let page = page(&[]).unwrap();
        assert!(title(&page).starts_with(".TH mcp-cli 1 "), "{page}");
        assert!(page.contains("\n.SH SYNOPSIS\n") && page.contains("\n.SH OPTIONS\n"));
        let visible = (Cli::command().get_subcommands())
            .filter(|sub| !sub.is_hide_set())
            .map(|sub| sub.get_name().to_owned())
            .collect::<Vec<_>>();
        assert!(visible.len() > 20, "{visible:?}");
        for name in visible {
            // roff spells a hyphen `\-`.
            let entry = format!("\nmcp\\-cli\\-{}(1)\n", name.replace('-', "\\-"));
            assert!(page.contains(&entry), "{name} is not on the page:\n{page}");
        }
        assert!(!page.contains("__servers") && !page.contains("cli\\-help(1)"));
    }

    #[test]
    fn a_command_has_a_page_of_its_own() {
        let page = page(&["tasks".into(), "wait".into()]).unwrap();
        let version = env!("CARGO_PKG_VERSION");
        let title = title(&page);
        assert!(title.starts_with(".TH mcp-cli-tasks-wait 1 "), "{title}");
        assert!(title.contains(&format!("\"mcp-cli {version}\"")), "{title}");
        assert!(page.contains("\\fB\\-\\-max\\-output\\fR"), "{page}");
    }

    #[test]
    fn an_unknown_command_is_a_usage_error() {
        let failure = page(&["tasks".into(), "nope".into()]).unwrap_err();
        assert_eq!(failure.exit, Exit::Usage);
        assert_eq!(
            failure.message,
            "`mcp-cli tasks` has no command `nope`; `mcp-cli tasks --help` lists them"
        );
        // Hidden commands have no page either.
        assert!(page(&["__servers".into()]).is_err());
    }
}
