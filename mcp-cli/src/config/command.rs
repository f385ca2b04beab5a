//! How to reach a server, as plain data: the program to run (and its sandbox) or the HTTP
//! transport to speak. The hub turns these into mcp-smol's values when it starts a server, so
//! reading config needs no HTTP, TLS or sandbox code (the config fuzz target builds without).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::HostPattern;

/// A server's program: what mcp-smol's `ServerCommand` is made from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Command {
    /// A path, or a bare name looked up on `PATH` (the configured one if `env` sets it).
    pub program: String,
    /// Its arguments, passed as they are (no shell).
    pub args: Vec<String>,
    /// Merged over the inherited environment; these values win.
    pub env: BTreeMap<String, String>,
    /// `env_inherit`: whether the server gets our whole environment; `None` (the default):
    /// it does unless it is sandboxed, then only the minimal set.
    pub env_inherit: Option<bool>,
    /// `env_pass`: more of our variables, by name, for a server without our whole environment.
    pub env_pass: Vec<String>,
    /// The working directory; ours when `None`.
    pub cwd: Option<PathBuf>,
    /// What the server may reach (`permissions`); `None` confines nothing.
    pub sandbox: Option<Sandbox>,
}

impl Command {
    /// Runs `program` with no arguments.
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// What decides what it runs, one part a line: the program, each argument, each variable
    /// of its environment, its working folder. What identifies a server (its pins) and what a
    /// person approves are digests of these.
    pub(crate) fn identity_parts(&self) -> Vec<String> {
        let mut parts = vec![format!("program {}", self.program)];
        parts.extend(self.args.iter().map(|arg| format!("arg {arg}")));
        parts.extend(self.env.iter().map(|(k, v)| format!("env {k}={v}")));
        if let Some(cwd) = &self.cwd {
            parts.push(format!("cwd {}", cwd.display()));
        }
        parts
    }

    /// The command line as a person would type it in a shell, for tables and messages: words
    /// that need it are single-quoted. (mcp-smol's `ServerCommand::display`, for its own
    /// errors, quotes the same way; config cannot reach it.)
    pub fn display(&self) -> String {
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
        let quoted = |word: &String| match !word.is_empty() && word.chars().all(plain) {
            true => word.clone(),
            false => format!("'{}'", word.replace('\'', r"'\''")),
        };
        let words: Vec<String> = std::iter::once(&self.program)
            .chain(&self.args)
            .map(quoted)
            .collect();
        words.join(" ")
    }
}

/// `permissions = { network = false | [hosts], install, filesystem = [paths] }`, resolved:
/// mcp-smol's `Sandbox` says what each field confines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// `network = false` (or `[]`, or a list): the server in a network namespace of its own,
    /// with only loopback.
    pub isolate_network: bool,
    /// `network = [hosts]`: what the hub's proxy admits for it (with `install = true`, the
    /// package registries too); empty when the network is cut or open.
    pub allow: Vec<HostPattern>,
    /// Absolute paths it may read and write; `None` does not confine the filesystem.
    pub filesystem: Option<Vec<PathBuf>>,
}

/// `transport`: how a remote server is spoken to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// Streamable HTTP, falling back to HTTP+SSE as the specification says (`http`, the
    /// default).
    #[default]
    Auto,
    /// HTTP+SSE only (`sse`, VS Code's `"type": "sse"`).
    Sse,
}

/// A command given as a string, an array (program first), or Zed's `{path, args, env}`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum CommandLine {
    Program(String),
    Words(Vec<String>),
    Zed {
        path: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
}

type Split = (Option<String>, Vec<String>, BTreeMap<String, String>);

/// The program, its arguments and its environment.
pub(super) fn split_command(command: Option<CommandLine>) -> Split {
    match command {
        None => (None, Vec::new(), BTreeMap::new()),
        Some(CommandLine::Program(program)) => (Some(program), Vec::new(), BTreeMap::new()),
        Some(CommandLine::Words(words)) => {
            let mut words = words.into_iter();
            (words.next(), words.collect(), BTreeMap::new())
        }
        Some(CommandLine::Zed { path, args, env }) => (Some(path), args, env),
    }
}
