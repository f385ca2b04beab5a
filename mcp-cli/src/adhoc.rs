//! The ad hoc server of `--stdio "COMMAND ARGS"`: a server with no config.

use std::path::Path;

use mcp_smol::ServerCommand;

use crate::exit::Failure;

/// The server `--stdio` stands for, split as a POSIX shell would (quotes and backslashes
/// honoured, no expansion), and its name: the program's file name.
pub(crate) fn server(line: &str) -> Result<(String, ServerCommand), Failure> {
    let words = shell_words::split(line)
        .map_err(|error| Failure::usage(format!("--stdio {line:?}: {error}")))?;
    let Some((program, args)) = words.split_first() else {
        return Err(Failure::usage("--stdio needs a command to run"));
    };
    let name = Path::new(program)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "stdio".to_owned());
    Ok((name, ServerCommand::new(program).args(args.iter().cloned())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_like_a_shell_and_named_by_the_program() {
        let (name, command) = server(r#"/opt/bin/my-server --root "a b" 'c d' e\ f"#).unwrap();
        assert_eq!(name, "my-server");
        assert_eq!(command.program, "/opt/bin/my-server");
        assert_eq!(command.args, ["--root", "a b", "c d", "e f"]);
        assert!(server("  ").is_err());
        assert!(server("x \"unclosed").is_err());
    }
}
