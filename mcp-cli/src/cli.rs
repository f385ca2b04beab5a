//! The command line, as clap sees it.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "mcp-cli",
    version,
    about = "Call the tools of MCP servers from the shell",
    after_help = "Exit codes: 0 success, 1 the tool reported an error (or its task failed), 2 usage \
                  or config error, 3 server failure, 4 timeout, 5 the call is parked on a question (`mcp-cli \
                  answer`), 130 the task was cancelled."
)]
#[command(group = clap::ArgGroup::new("adhoc").args(["stdio", "http"]))]
pub(crate) struct Cli {
    /// Config file to read (repeatable; later files override earlier ones by server name).
    /// Without it: $MCP_CLI_CONFIG, else the user file then .mcp-cli.toml and .mcp.json here.
    #[arg(long = "config", value_name = "FILE", global = true)]
    pub(crate) configs: Vec<PathBuf>,

    /// Print machine-readable JSON: results on stdout, errors as one object on stderr.
    #[arg(long, global = true)]
    pub(crate) json: bool,

    /// Per-call timeout in seconds (overrides the config's call_timeout_sec).
    #[arg(long, value_name = "SECS", global = true, value_parser = parse_seconds)]
    pub(crate) timeout: Option<std::time::Duration>,

    /// Allow calls that an `ask` rule covers without asking, and answer servers' forms with
    /// their defaults (needed when there is no terminal).
    #[arg(long, global = true)]
    pub(crate) yes: bool,

    /// An ad hoc server with no config: COMMAND ARGS in one word, split as a shell would.
    /// It is the only server; it is named after the program's file name (`npx`,
    /// `server.py`), and `call TOOL ...`, `tools`, `read URI`, `prompt NAME ...`, `trust`
    /// and `auth` then take no SERVER word.
    #[arg(long, value_name = "COMMAND ARGS", conflicts_with = "http")]
    pub(crate) stdio: Option<String>,

    /// An ad hoc remote server with no config: its MCP endpoint (http:// or https://). It
    /// is the only server, named after the URL's host; `call TOOL ...`, `tools`, `read URI`,
    /// `prompt NAME ...`, `trust` and `auth` then take no SERVER word.
    #[arg(long, value_name = "URL")]
    pub(crate) http: Option<String>,

    /// A header for the --http server, `Name: value` or `Name=value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "http")]
    pub(crate) headers: Vec<String>,

    /// The protocol revision the --stdio or --http server speaks: `auto` (the default) finds
    /// out (a `server/discover` probe over stdio, the first request over HTTP) and remembers
    /// it; a revision (2026-07-28, 2025-11-25, ...) is spoken as given, with no probe.
    #[arg(long, value_name = "REV", value_parser = parse_protocol, requires = "adhoc")]
    pub(crate) protocol: Option<mcp_proto::Protocol>,

    /// Log in to remote servers unattended when they ask: fetch the authorization URL
    /// ourselves and take the code from its redirect, with no browser. Only for servers that
    /// approve at once (test servers, the conformance suite). Same as MCP_CLI_AUTH_FOLLOW=1.
    #[arg(long, global = true)]
    pub(crate) auth_follow: bool,

    /// Use stored OAuth tokens (and refresh them) but never start a login, not even with
    /// --auth-follow: a server without a usable token fails as needs-auth, naming the
    /// `mcp-cli auth` command to run. For CI. Same as MCP_CLI_STORED_AUTH_ONLY=1.
    #[arg(long, global = true)]
    pub(crate) stored_auth_only: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How `call` shows and checks a result.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct CallOutput {
    /// Past this many bytes of output (65536, 64K, 1M), the whole result is written to a file
    /// in the state folder and only its first part printed, with the file's path; `none`
    /// prints everything. Default: the server's max_result_bytes, else 64K on a terminal and
    /// no limit into a pipe or a file.
    #[arg(long, value_name = "BYTES", value_parser = crate::spill::parse_max_output)]
    pub(crate) max_output: Option<crate::spill::MaxOutput>,
    /// Do not check the result's structuredContent against the tool's outputSchema (a
    /// mismatch is otherwise reported on stderr, with exit code 1).
    #[arg(long)]
    pub(crate) no_validate: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Print a completion script: `source <(mcp-cli completions bash)`; server names complete
    /// from the config in bash and fish.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), for packagers: `mcp-cli manual > mcp-cli.1`; `manual
    /// COMMAND...` prints that command's own page (`manual tasks wait > mcp-cli-tasks-wait.1`).
    Manual {
        /// A command (and its subcommand), for its own page; none for the main page.
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// The configured server names, one a line, starting nothing (for completion scripts).
    #[command(name = "__servers", hide = true)]
    ServerNames,
    /// Call one tool: `call SERVER TOOL [KEY=VALUE | KEY:=JSON]...` or `call SERVER__TOOL ...`.
    Call {
        /// The server name, or SERVER__TOOL / SERVER.TOOL in one token.
        server: String,
        /// The tool name, then its arguments: KEY=VALUE (typed by the tool's schema) or
        /// KEY:=JSON (raw JSON).
        #[arg(value_name = "TOOL | ARG")]
        rest: Vec<String>,
        /// All arguments as one JSON object, or `-` to read it from stdin; KEY=VALUE pairs
        /// override its keys.
        #[arg(long = "args", value_name = "JSON")]
        args_json: Option<String>,
        /// Run the call in the background where the server can (as a task): print the task id
        /// (--json: the whole task) and exit 0; `tasks wait SERVER ID` gets the result.
        #[arg(long = "async")]
        detach: bool,
        /// Without a terminal, a question the server asks during the call (a form, a link)
        /// parks the call on the daemon: the question is printed (--json: as an object) and
        /// the command exits 5 at once; `mcp-cli answer ID ...` answers it and prints the
        /// result. Needs the daemon (`mcp-cli daemon start`). Same as MCP_CLI_PARK=1.
        #[arg(long)]
        park: bool,
        #[command(flatten)]
        output: CallOutput,
    },
    /// Answer the question a parked call waits on (see `call --park`), then print the call's
    /// result as `call` would, with its exit codes (5 again if it asks again):
    /// `answer ID KEY=VALUE...` fills in its form, a field left out taking its default;
    /// `--decline` or `--cancel` refuses it; a link is answered yes with no pairs, or with
    /// `--open`, which opens it in the browser first.
    Answer {
        /// The question's id, as the parked call printed it (`mcp-cli parked` lists them).
        id: String,
        /// The form's fields, typed by its schema; a value that does not fit is exit 2, and
        /// the question stays parked.
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
        /// Say no to it.
        #[arg(long, conflicts_with_all = ["cancel", "open", "pairs"])]
        decline: bool,
        /// Dismiss it without choosing.
        #[arg(long, conflicts_with_all = ["open", "pairs"])]
        cancel: bool,
        /// A link: open it in the browser, then answer yes.
        #[arg(long, conflicts_with = "pairs")]
        open: bool,
    },
    /// The questions parked calls wait on (see `call --park`): ID SERVER TOOL KIND EXPIRES
    /// MESSAGE.
    Parked,
    /// The tasks servers run in the background for calls, as kept in the state folder:
    /// `tasks [SERVER]` lists them with their last status; `tasks get|wait|cancel SERVER ID`.
    #[command(args_conflicts_with_subcommands = true)]
    Tasks {
        #[command(subcommand)]
        action: Option<TasksAction>,
        /// Only this server's tasks.
        server: Option<String>,
    },
    /// List the tools of the named servers (all enabled ones if none), with parameters: from
    /// the catalogue of listings kept in the state folder for servers not running, the others
    /// (and those never listed) started.
    Tools {
        servers: Vec<String>,
        /// Start the servers and list their tools afresh, keeping the new listings.
        #[arg(long)]
        refresh: bool,
    },
    /// The tools that best match QUERY (plain words: `search read a file`), best first, with
    /// a one-line description and a score; over every enabled server.
    Search {
        #[arg(required = true, value_name = "QUERY")]
        query: Vec<String>,
        /// How many tools to show at most.
        #[arg(long, default_value_t = 10, value_name = "N")]
        limit: usize,
        /// Start the servers and list their tools afresh before searching, keeping the new
        /// listings.
        #[arg(long)]
        refresh: bool,
        /// Say for each result why it ranked there (the words it holds, its places in the
        /// word and meaning rankings) instead of its description.
        #[arg(long)]
        explain: bool,
    },
    /// Start every enabled server in parallel and show NAME STATE TOOLS LISTED PID PROTOCOL
    /// COMMAND (LISTED: the age of the server's listing in the catalogue on disk).
    Servers,
    /// Print the last lines of a server's stderr log.
    Logs {
        server: String,
        /// How many lines.
        #[arg(short = 'n', default_value_t = 50)]
        lines: usize,
    },
    /// List the resources and resource templates of the named servers (all enabled ones if
    /// none): URI, name, MIME type.
    Resources { servers: Vec<String> },
    /// Read one resource: text is printed, binary contents written to FILE (or omitted).
    /// Under --stdio or --http the SERVER word may be left out.
    #[command(allow_missing_positional = true)]
    Read {
        server: Option<String>,
        uri: String,
        /// Write the contents, text or binary, to this file instead.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// List the prompts of the named servers (all enabled ones if none), with arguments.
    Prompts { servers: Vec<String> },
    /// How an agent drives mcp-cli, as instructions: printed; with --skill, as an Agent Skill
    /// (a SKILL.md); with --skill --to, installed where an agent reads its skills.
    AgentHelp {
        /// The SKILL.md itself, with its frontmatter.
        #[arg(long)]
        skill: bool,
        /// Install it as DIR/mcp-cli/SKILL.md (`claude` and `codex` name their folders).
        #[arg(long, requires = "skill", value_name = "DIR|claude|codex")]
        to: Option<String>,
        /// Replace an installed one.
        #[arg(long, requires = "to")]
        force: bool,
    },
    /// List the skills of the named servers (all enabled ones if none): name, description,
    /// files and their size. Only the list is read, never a skill's files.
    Skills { servers: Vec<String> },
    /// Fetch one skill, checking each file against the server's entry (size, digest, and the
    /// SKILL.md's frontmatter): with --to, write it into that folder (`claude` and `codex`
    /// name theirs) only once every file has passed; without, print its SKILL.md. Under
    /// --stdio or --http the SERVER word may be left out.
    #[command(allow_missing_positional = true)]
    Skill {
        server: Option<String>,
        name: String,
        /// Where to write it: a folder, `claude` (~/.claude/skills) or `codex`
        /// (~/.agents/skills); the skill becomes DIR/NAME/.
        #[arg(long, value_name = "DIR|claude|codex")]
        to: Option<String>,
        /// Replace a folder of the skill's name already there.
        #[arg(long, requires = "to")]
        force: bool,
    },
    /// Get one prompt's messages: `prompt SERVER NAME [KEY=VALUE]...`; under --stdio or
    /// --http, `prompt NAME [KEY=VALUE]...`.
    Prompt {
        server: String,
        /// The prompt's name, then its arguments: KEY=VALUE (or KEY:=JSON, sent as its text).
        #[arg(value_name = "NAME | KEY=VALUE")]
        rest: Vec<String>,
    },
    /// Serve the configured servers (or the ones named) as one MCP server on stdin and
    /// stdout (or over HTTP with --listen), for hosts such as Claude Desktop or Cursor: tools
    /// as SERVER__TOOL, policy applied, config edits applied live.
    Serve {
        /// Offer one tool, `mcp` (action search | list | call), instead of every tool.
        #[arg(long, conflicts_with = "search")]
        proxy: bool,
        /// Offer three tools, `search_tools`, `describe_tool` and `call_tool`, instead of
        /// every tool: the model finds the tool it needs rather than reading them all.
        #[arg(long)]
        search: bool,
        /// Serve over Streamable HTTP at ADDR (PORT, IP:PORT or [IPV6]:PORT; default
        /// 127.0.0.1:8931; port 0 picks a free one) instead of stdin and stdout, on the
        /// endpoint /mcp. Hosts must send `Authorization: Bearer TOKEN` (see --print-token).
        #[arg(long, value_name = "ADDR", num_args = 0..=1,
              default_missing_value = crate::gateway::listen::DEFAULT_ADDRESS)]
        listen: Option<String>,
        /// Print the bearer token `serve --listen` requires (made on first use) and exit.
        #[arg(long, conflicts_with = "listen")]
        print_token: bool,
        /// With --listen: at most N connections at once (default 512); one more is answered
        /// 503 Service Unavailable with Retry-After and closed. Idle ones close after 30 s.
        #[arg(long, value_name = "N", requires = "listen",
              value_parser = clap::value_parser!(u32).range(1..),
              default_value_t = crate::gateway::listen::DEFAULT_MAX_CONNECTIONS as u32)]
        max_connections: u32,
        /// With --listen: seal input rounds with the keys in FILE (one a line, the first
        /// seals), which every replica behind a load balancer shares, so that any of them can
        /// answer a round another began (default: $MCP_CLI_REPLICA_KEY_FILE; else a key of
        /// this process's own).
        #[arg(long, value_name = "FILE", requires = "listen")]
        replica_key: Option<std::path::PathBuf>,
        /// With --replica-key: where the other replicas reach this one, to forward its
        /// tasks' requests (http://HOST:PORT/mcp; default: $MCP_CLI_REPLICA_URL, else the
        /// address it listens on).
        #[arg(long, value_name = "URL", requires = "listen")]
        replica_url: Option<String>,
        /// With --listen: also take requests whose Host is NAME (any port) or NAME:PORT, the
        /// name a proxy or load balancer in front is reached by (repeatable; also
        /// $MCP_CLI_ALLOWED_HOSTS, comma-separated).
        #[arg(long = "allowed-host", value_name = "NAME[:PORT]", requires = "listen")]
        allowed_hosts: Vec<String>,
        servers: Vec<String>,
    },
    /// The warm daemon: `start` serves the configured servers in the background, and while
    /// it runs call, tools, servers, resources, read, prompts and prompt use it (servers stay
    /// started); `status` shows it, `stop` ends it. Set MCP_CLI_NO_DAEMON=1 not to use it.
    Daemon {
        #[command(subcommand)]
        action: DaemonAction,
    },
    /// Turn a server on again in the file that defines it (the `disable` key is removed).
    Enable { server: String },
    /// Turn a server off in the file that defines it (`enabled = false`, or the file's own
    /// spelling), keeping the entry.
    Disable { server: String },
    /// Add a server to the user file (or --config FILE): `add NAME -- COMMAND [ARGS]...` or
    /// `add NAME --url URL`.
    Add {
        name: String,
        /// An environment variable for the server (repeatable).
        #[arg(long = "env", value_name = "K=V")]
        env: Vec<String>,
        /// The folder to run the server in.
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
        /// A remote server's URL, instead of a command.
        #[arg(long, value_name = "URL", conflicts_with_all = ["command", "env", "cwd"])]
        url: Option<String>,
        /// An HTTP header for a remote server, `Name=value` or `Name: value` (repeatable).
        #[arg(long = "header", value_name = "NAME=VALUE", requires = "url")]
        headers: Vec<String>,
        /// The protocol revision to speak (2026-07-28, 2025-11-25, ...); `auto`, the default,
        /// is not written.
        #[arg(long, value_name = "REV", value_parser = parse_protocol, default_value = "auto")]
        protocol: mcp_proto::Protocol,
        /// Replace an entry of the same name.
        #[arg(long)]
        force: bool,
        /// The program and its arguments, after `--`.
        #[arg(last = true, value_name = "COMMAND", required_unless_present = "url")]
        command: Vec<String>,
    },
    /// Remove a server's entry from the user file (or --config FILE).
    Remove { name: String },
    /// The MCP Registry (or the registries the user file names): `sync` keeps a snapshot of
    /// their servers, which `search` and `show` read offline.
    Registry {
        #[command(subcommand)]
        action: RegistryAction,
    },
    /// Install a server from the registry: write its entry to the user file (or --config
    /// FILE), asking for the values it needs, then start it once to list, scan and pin its
    /// tools before anything uses them.
    Install {
        /// The server's registry name, `namespace/name`, optionally `@VERSION`.
        #[arg(value_name = "NAME[@VERSION]")]
        name: String,
        /// The entry's name in the config (default: the last part of the registry name).
        #[arg(long = "as", value_name = "NAME")]
        as_name: Option<String>,
        /// Which of its packages to run: npm, pypi, oci, mcpb, or remote (default: the first
        /// the publisher lists that can run here).
        #[arg(long, value_name = "TYPE")]
        package: Option<String>,
        /// A value it asks for, by name: a variable, a header, a flag (`--port`), an
        /// argument's label (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Confine it: a network allowlist seeded with the registry its launcher installs
        /// from, and only the launcher's cache writable.
        #[arg(long)]
        sandbox: bool,
        /// Write the entry without starting it.
        #[arg(long)]
        no_check: bool,
        /// Replace an entry of the same name.
        #[arg(long)]
        force: bool,
        /// The registry to install from, instead of the configured ones.
        #[arg(long, value_name = "URL")]
        registry: Option<String>,
    },
    /// List the servers other hosts on this machine configure, and where; `--write` copies
    /// them (or the NAMEs given) into the user file (or --config FILE).
    Import {
        /// Copy them into the user file rather than only list them.
        #[arg(long)]
        write: bool,
        /// Replace entries of the same name already there (with --write).
        #[arg(long, requires = "write")]
        force: bool,
        /// Only these servers (with --write).
        #[arg(requires = "write")]
        names: Vec<String>,
    },
    /// Log in to a remote server with OAuth (through the browser, or unattended with
    /// --auth-follow) and keep its token; `--reset` forgets the token and registration.
    /// Under --http the SERVER word may be left out.
    Auth {
        server: Option<String>,
        /// Forget the stored token and client registration, in the keychain and the file.
        #[arg(long, conflicts_with_all = ["device", "no_browser"])]
        reset: bool,
        /// Log in with a code typed on any other device (the device authorization grant),
        /// for machines without a browser; the authorization server must offer it.
        #[arg(long, conflicts_with = "no_browser")]
        device: bool,
        /// Print the login URL instead of opening a browser, then read the address the
        /// browser ends on, pasted on stdin.
        #[arg(long)]
        no_browser: bool,
        /// Start the login and return at once, for a caller that cannot wait (an agent): print
        /// the login URL (with --device, the code and where to type it) and the command that
        /// finishes it, within ten minutes.
        #[arg(long, conflicts_with_all = ["reset", "no_browser", "redirect", "resume"])]
        start: bool,
        /// Finish a login --start began in the browser, with the address the browser ended on.
        #[arg(long, value_name = "URL", conflicts_with_all = ["reset", "no_browser", "device", "resume"])]
        redirect: Option<String>,
        /// Finish a login `--device --start` began: wait until the code is approved.
        #[arg(long, requires = "device", conflicts_with_all = ["reset", "no_browser"])]
        resume: bool,
    },
    /// Accept a server's current tool definitions after they changed (tools whose definition
    /// changed since first seen are withheld until then); shows what changed first.
    /// Under --stdio or --http the SERVER word may be left out.
    Trust { server: Option<String> },
    /// Scan the tools, prompts, resources and resource templates of the named servers (all
    /// enabled ones if none) for poisoning: invisible characters, instructions to the model,
    /// secret paths, shadowing, hidden padding. Calls no tool; exits 1 when anything is flagged.
    Scan { servers: Vec<String> },
    /// Let servers of this folder's `.mcp.json` or `.mcp-cli.toml` run (all waiting ones if
    /// none are named). Until approved they never start; each is shown in full first, and
    /// asked about on a terminal. Without one, nothing is approved unless --yes is given: that
    /// is the person's decision, never an agent's.
    Approve { names: Vec<String> },
}

#[derive(Debug, Subcommand)]
pub(crate) enum TasksAction {
    /// Ask the server where a task stands now.
    Get { server: String, id: String },
    /// Wait for a task to end and print its result as `call` would; --timeout bounds the
    /// wait (exit 4), and the task runs on past it.
    Wait {
        server: String,
        id: String,
        /// As for `call`: past this many bytes the result goes to a file.
        #[arg(long, value_name = "BYTES", value_parser = crate::spill::parse_max_output)]
        max_output: Option<crate::spill::MaxOutput>,
    },
    /// Ask the server to cancel a task.
    Cancel { server: String, id: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum DaemonAction {
    /// Start the daemon for the config files read here (nothing if it already runs).
    Start {
        /// Exit after this many seconds without connections or calls, stopping the servers.
        #[arg(long, value_name = "SECS", default_value_t = 900)]
        idle: u64,
    },
    /// Stop it, with its servers, and wait until it is gone.
    Stop,
    /// Its socket, pid, config files, idle time and servers.
    Status,
    /// Be the daemon, in the foreground (what `start` runs).
    #[command(hide = true)]
    Run {
        #[arg(long, value_name = "SECS", default_value_t = 900)]
        idle: u64,
    },
}

/// `registry sync|search|show`.
#[derive(Subcommand, Debug)]
pub(crate) enum RegistryAction {
    /// Pull the registries' latest server versions into the state folder: the whole list the
    /// first time, then what changed since.
    Sync {
        /// This registry only, instead of the configured ones.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Pull everything again rather than what changed.
        #[arg(long)]
        full: bool,
    },
    /// Search the synced servers by name, title and description.
    Search {
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// How many to show.
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// One server's entry: its packages, remotes, the values it asks for, its status.
    Show {
        #[arg(value_name = "NAME[@VERSION]")]
        name: String,
        /// The registry to ask, instead of the configured ones.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
    },
}

impl Command {
    /// The commands that edit or read config files rather than talk to servers.
    pub(crate) fn edits_config(&self) -> bool {
        matches!(
            self,
            Self::Enable { .. }
                | Self::Disable { .. }
                | Self::Add { .. }
                | Self::Remove { .. }
                | Self::Import { .. }
                | Self::Install { .. }
                | Self::Registry { .. }
        )
    }

    /// The commands that write native entries, creating the file when it does not exist yet.
    pub(crate) fn creates_config(&self) -> bool {
        matches!(
            self,
            Self::Add { .. } | Self::Import { write: true, .. } | Self::Install { .. }
        )
    }
}

/// `auto` or a revision we speak, worded as the config's error is.
fn parse_protocol(text: &str) -> Result<mcp_proto::Protocol, String> {
    mcp_proto::Protocol::parse(text).map_err(|error| error.to_string())
}

fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|duration| !duration.is_zero())
        .ok_or_else(|| format!("{text:?} is not a positive number of seconds"))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    fn argv(line: &str) -> Vec<OsString> {
        std::iter::once("mcp-cli")
            .chain(line.split(' ').filter(|w| !w.is_empty()))
            .map(OsString::from)
            .collect()
    }

    /// The global flags go before or after the subcommand, and `call` takes SERVER TOOL or
    /// SERVER__TOOL with its arguments.
    #[test]
    fn global_flags_go_anywhere() {
        for line in [
            "--config a.toml --json --yes call fx echo text=a=b n:=5",
            "call --config a.toml fx echo --json text=a=b n:=5 --yes",
        ] {
            let cli = Cli::try_parse_from(argv(line)).unwrap();
            assert_eq!(cli.configs, [PathBuf::from("a.toml")], "{line}");
            assert!(cli.json && cli.yes, "{line}");
            let Command::Call { server, rest, .. } = cli.command else {
                panic!("{line}");
            };
            assert_eq!(
                (server.as_str(), rest),
                (
                    "fx",
                    vec!["echo".to_owned(), "text=a=b".into(), "n:=5".into()]
                )
            );
        }
    }

    #[test]
    fn the_server_word_may_be_left_out() {
        // `read` takes its SERVER word or leaves it out (for --stdio and --http).
        let read = |line: &str| match Cli::try_parse_from(argv(line)).map(|cli| cli.command) {
            Ok(Command::Read { server, uri, .. }) => (server, uri),
            other => panic!("{line}: {other:?}"),
        };
        assert_eq!(
            read("read fx res://a"),
            (Some("fx".into()), "res://a".into())
        );
        assert_eq!(read("read res://a -o f"), (None, "res://a".into()));
    }
}
