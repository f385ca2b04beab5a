//! `ask` rules on the command line: a y/N question on the terminal, or `--yes`.

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
