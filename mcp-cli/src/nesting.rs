//! Keeping mcp-cli from starting itself without end: a config entry that runs our own gateway
//! (`mcp-cli serve`, or the daemon) over the config that defines it would start that gateway,
//! which reads the same entry and starts another, and so on. Such entries are refused, and a
//! depth marker in every server's environment stops nesting however it was configured.

#[cfg(feature = "cli")]
use std::path::{Path, PathBuf};

use crate::config::Command;
#[cfg(feature = "cli")]
use crate::config::{Config, Entry, Source};

/// Set in every server a hub starts: one more than the starting process's own value.
pub(crate) const DEPTH_VAR: &str = "MCP_CLI_GATEWAY_DEPTH";

/// `serve` and the daemon refuse to run this deep: legitimate setups nest a gateway in a
/// gateway at most once or twice, and a loop reaches this in a few starts.
#[cfg(feature = "cli")]
pub(crate) const MAX_DEPTH: u32 = 3;

/// How many mcp-cli hubs this process runs under, from its environment.
pub(crate) fn depth() -> u32 {
    std::env::var(DEPTH_VAR)
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// The refusal of `serve` and the daemon when nested too deep.
#[cfg(feature = "cli")]
pub(crate) fn check_depth() -> Result<(), String> {
    let depth = depth();
    if depth < MAX_DEPTH {
        return Ok(());
    }
    Err(format!(
        "refusing to serve: this is mcp-cli gateway number {} started by mcp-cli \
         ({DEPTH_VAR}={depth}); a config entry runs mcp-cli's own gateway, which starts \
         itself again (remove that entry)",
        depth + 1
    ))
}

/// `command` with the depth marker its server gets.
pub(crate) fn marked(command: &Command) -> Command {
    let mut command = command.clone();
    command
        .env
        .insert(DEPTH_VAR.to_owned(), (depth() + 1).to_string());
    command
}

/// Whether `program args` runs this program's gateway: the program is this executable or
/// is named `mcp-cli`, and its command is `serve` or `daemon`.
#[cfg(feature = "cli")]
pub(crate) fn runs_our_gateway(program: &str, args: &[String], path: Option<&str>) -> bool {
    let serves = matches!(subcommand(args), Some("serve" | "daemon"));
    serves && is_this_program(program, path)
}

/// The first word that is neither an option nor an option's value.
#[cfg(feature = "cli")]
fn subcommand(args: &[String]) -> Option<&str> {
    const WITH_VALUE: &[&str] = &["--config", "--timeout", "--stdio", "--http", "--header"];
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if WITH_VALUE.contains(&word.as_str()) {
            words.next();
        } else if !word.starts_with('-') {
            return Some(word);
        }
    }
    None
}

#[cfg(feature = "cli")]
fn is_this_program(program: &str, path: Option<&str>) -> bool {
    if Path::new(program)
        .file_name()
        .is_some_and(|name| name == "mcp-cli")
    {
        return true;
    }
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return false;
    };
    let candidates: Vec<PathBuf> = if program.contains('/') {
        vec![PathBuf::from(program)]
    } else {
        let path = path.map(Into::into).or_else(|| std::env::var_os("PATH"));
        std::env::split_paths(&path.unwrap_or_default())
            .map(|dir| dir.join(program))
            .collect()
    };
    // The first one found on PATH is the one that would run.
    (candidates.iter())
        .find_map(|candidate| std::fs::canonicalize(candidate).ok())
        .is_some_and(|found| found == me)
}

/// Makes every enabled entry that [`loops`] over the file defining it `invalid`, with the reason.
#[cfg(feature = "cli")]
pub(crate) fn refuse_loops(config: &mut Config) {
    for server in &mut config.servers {
        if let (Entry::Enabled(spec), Source::File(path)) = (&server.entry, &server.source)
            && let Some(reason) = loops(&spec.command, path)
        {
            let reason = format!("{reason} (in {})", path.display());
            let command = spec.command.display();
            server.entry = Entry::Invalid { reason, command };
        }
    }
}

/// Why the entry in `file` running `command` may not start: it runs our gateway over a
/// config that includes `file` (or over the default config, which it may well be).
#[cfg(feature = "cli")]
pub(crate) fn loops(command: &Command, file: &Path) -> Option<String> {
    let path = command.env.get("PATH").map(String::as_str);
    if !runs_our_gateway(&command.program, &command.args, path) {
        return None;
    }
    let configs = config_args(&command.args);
    let defaults = configs.is_empty() && !command.env.contains_key("MCP_CLI_CONFIG");
    let same = |given: &PathBuf| {
        let given = match &command.cwd {
            Some(cwd) => cwd.join(given),
            None => given.clone(),
        };
        let canonical = |path: &Path| std::fs::canonicalize(path).ok();
        canonical(&given).is_some_and(|given| Some(given) == canonical(file))
    };
    (defaults || configs.iter().any(same)).then(|| {
        "it runs mcp-cli's own gateway over this config, which would start this entry again \
         without end; point it at another config with --config, or remove it"
            .to_owned()
    })
}

/// The files named by `--config FILE` or `--config=FILE` among `args`.
#[cfg(feature = "cli")]
fn config_args(args: &[String]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--config" {
            files.extend(words.next().map(PathBuf::from));
        } else if let Some(file) = word.strip_prefix("--config=") {
            files.push(PathBuf::from(file));
        }
    }
    files
}

#[cfg(all(test, feature = "cli"))]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn our_gateway_is_known_by_name_or_by_executable() {
        assert!(runs_our_gateway("mcp-cli", &words("serve"), None));
        assert!(runs_our_gateway(
            "/opt/bin/mcp-cli",
            &words("--config a.toml serve --proxy"),
            None
        ));
        assert!(!runs_our_gateway("mcp-cli", &words("call fx echo"), None));
        assert!(!runs_our_gateway("mcp-cli", &words("call fx serve"), None));
        assert!(!runs_our_gateway(
            "mcp-cli",
            &words("--config serve call"),
            None
        ));
        assert!(!runs_our_gateway("npx", &words("-y serve"), None));
        let me = std::env::current_exe().unwrap();
        let me = me.to_str().unwrap();
        assert!(runs_our_gateway(me, &words("daemon run"), None));
    }

    #[test]
    fn a_gateway_over_another_config_is_no_loop() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-nesting-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ours, other) = (dir.join("ours.toml"), dir.join("other.toml"));
        std::fs::write(&ours, "").unwrap();
        std::fs::write(&other, "").unwrap();
        let gateway = |args: &str| Command {
            cwd: Some(dir.clone()),
            ..Command::new("mcp-cli").args(words(args))
        };
        assert!(loops(&gateway("serve"), &ours).is_some());
        assert!(loops(&gateway("--config ours.toml serve"), &ours).is_some());
        assert!(loops(&gateway("--config=other.toml serve"), &ours).is_none());
        let mut elsewhere = gateway("serve");
        elsewhere
            .env
            .insert("MCP_CLI_CONFIG".into(), "other.toml".into());
        assert!(loops(&elsewhere, &ours).is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
