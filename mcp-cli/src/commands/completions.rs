//! `completions SHELL`: a completion script, with server names taken from the config where
//! the shell lets a script ask for them (bash, fish).

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::commands::Context;
use crate::exit::{Exit, Failure};

/// The commands whose first operand is a server name.
const TAKE_A_SERVER: &str =
    "call tools logs resources read prompts prompt enable disable remove trust";

/// `tasks ACTION SERVER ID`: the actions, each followed by a server name.
const TASK_ACTIONS: &str = "get wait cancel";

pub(crate) fn run(ctx: &mut Context, shell: Shell) -> Result<Exit, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "mcp-cli", &mut script);
    let mut script = String::from_utf8_lossy(&script).into_owned();
    match shell {
        Shell::Bash => script.push_str(&bash_servers()),
        Shell::Fish => script.push_str(&fish_servers()),
        _ => {}
    }
    for line in script.lines() {
        ctx.out.line(line);
    }
    Ok(Exit::Success)
}

/// `__servers`: what the completion scripts ask for.
pub(crate) fn server_names(ctx: &mut Context) -> Result<Exit, Failure> {
    for status in ctx.hub.status() {
        ctx.out.line(&status.name);
    }
    Ok(Exit::Success)
}

/// Wraps clap's bash completion: the word after a command that takes a server completes from
/// `mcp-cli __servers`; everything else is clap's.
fn bash_servers() -> String {
    format!(
        r#"
_mcp_cli_servers() {{
    local i word command="" position=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        case "$word" in
            --config|--timeout|--stdio|--http|--header) ((i++)) ;;
            -*) ;;
            *) if [[ -z $command ]]; then command=$word; else ((position++)); fi ;;
        esac
    done
    local current=${{COMP_WORDS[COMP_CWORD]}} previous=${{COMP_WORDS[COMP_CWORD-1]}}
    if [[ $current != -* ]]; then
        if [[ " {TAKE_A_SERVER} " == *" $command "* && $position -eq 0 ]]; then
            COMPREPLY=($(compgen -W "$(mcp-cli __servers 2>/dev/null)" -- "$current"))
            return 0
        fi
        # `tasks [SERVER]` and `tasks get|wait|cancel SERVER ID`.
        if [[ $command == tasks && $position -eq 0 ]]; then
            COMPREPLY=($(compgen -W "{TASK_ACTIONS} $(mcp-cli __servers 2>/dev/null)" -- "$current"))
            return 0
        fi
        if [[ $command == tasks && $position -eq 1 && " {TASK_ACTIONS} " == *" $previous "* ]]; then
            COMPREPLY=($(compgen -W "$(mcp-cli __servers 2>/dev/null)" -- "$current"))
            return 0
        fi
    fi
    _mcp__cli "$@"
}}
complete -F _mcp_cli_servers -o bashdefault -o default mcp-cli
"#
    )
}

fn fish_servers() -> String {
    format!(
        "complete -c mcp-cli -n '__fish_seen_subcommand_from {TAKE_A_SERVER} tasks' -f -a '(mcp-cli __servers 2>/dev/null)'\n"
    )
}
