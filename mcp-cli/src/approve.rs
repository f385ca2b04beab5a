//! What only the person may decide, on the command line: `ask` rules, `trust` and the
//! approval of project servers. Each is a y/N question on the terminal, or `--yes`; without a
//! terminal and without `--yes` the answer is no, so that an agent running the command from
//! a shell tool cannot decide it for the person by running it.

use std::io::{BufRead, IsTerminal, Write};

use crate::hub::{Approval, Ask, AskHandler};
use crate::output;
use crate::spinner;

/// Approves everything with `--yes`; else asks on the terminal, and refuses without one.
pub(crate) fn handler(yes: bool) -> AskHandler {
    AskHandler::new(move |ask: Ask| {
        async move {
            if yes {
                return Ok(());
            }
            if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
                return Err("there is no terminal to ask on; pass --yes to allow it".to_owned());
            }
            // Off the executor's thread, so that Ctrl-C is still noticed while we wait.
            blocking::unblock(move || ask_on_terminal(&ask)).await
        }
    })
}

/// How a decision reserved for the person came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// `--yes`, or yes on the terminal.
    Yes,
    /// No (or no answer) on the terminal.
    No,
    /// No terminal to ask on, and no `--yes`.
    NoTerminal,
}

/// Takes a decision reserved for the person: `--yes` decides it; else `question` is asked on
/// the terminal; without one it is not taken.
pub(crate) fn decide(yes: bool, question: &str) -> Decision {
    if yes {
        return Decision::Yes;
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Decision::NoTerminal;
    }
    let _paused = spinner::pause();
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "{question} [y/N] ").and_then(|()| stderr.flush());
    let mut answer = String::new();
    let read = std::io::stdin().lock().read_line(&mut answer);
    match read.is_ok() && matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
        true => Decision::Yes,
        false => Decision::No,
    }
}

fn ask_on_terminal(ask: &Ask) -> Approval {
    let _paused = spinner::pause();
    let arguments = output::pretty(&ask.arguments);
    let arguments = arguments.replace('\n', "\n    ");
    let question = format!(
        "mcp-cli: {} asks for approval (rule tool = {:?}, {})\n  arguments: {arguments}\nAllow this call? [y/N] ",
        ask.tool,
        ask.rule.tool.as_str(),
        ask.rule.origin,
    );
    let mut stderr = std::io::stderr();
    let _ = stderr
        .write_all(question.as_bytes())
        .and_then(|()| stderr.flush());
    let mut answer = String::new();
    match std::io::stdin().lock().read_line(&mut answer) {
        Ok(_) if matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") => Ok(()),
        Ok(0) => Err("no answer (end of input)".to_owned()),
        Ok(_) => Err("declined".to_owned()),
        Err(error) => Err(format!("cannot read the answer: {error}")),
    }
}
