//! The warm daemon as its callers see it: where it lives, how to reach it, and running a
//! command line through it. The daemon process itself is the `daemon run` command
//! (`commands/daemon/process.rs`).
//!
//! The socket lives in `$XDG_RUNTIME_DIR/mcp-cli/` (else `/tmp/mcp-cli-<uid>/`), a folder that
//! must be ours and mode 0700; its name is a hash of the config files' paths, so each project
//! gets its own daemon. Besides plain MCP, a connection there may use three private methods:
//! `mcp-cli/run` runs a command line against the daemon's hub and returns what it printed and
//! its exit code, so a warm run prints exactly what a cold one would; `mcp-cli/status`;
//! `mcp-cli/stop`.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use mcp_smol::proto::Request;
use serde_json::{Value, json};

use crate::cli::{Cli, Command};
use crate::config;
use crate::exit::{Exit, Failure};
use crate::host::ConfigFiles;
use crate::output::{Line, Stdout};

/// Turns the automatic use of a running daemon off when set to anything but `0` or empty.
pub(crate) const NO_DAEMON: &str = "MCP_CLI_NO_DAEMON";

/// Where the daemon for one set of config files lives.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub(crate) dir: PathBuf,
    pub(crate) socket: PathBuf,
    /// Held locked for the daemon's life: a second one for the same files finds it taken.
    pub(crate) lock: PathBuf,
    /// The short hash of the config files' paths that names the socket.
    pub(crate) key: String,
    pub(crate) files: Vec<PathBuf>,
}

impl Place {
    /// The place of the daemon for these config files.
    pub(crate) fn of(files: &ConfigFiles, env: config::Env<'_>) -> Self {
        let files = files.paths();
        let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
        for file in &files {
            hash.update(file.as_os_str().as_encoded_bytes());
            hash.update(&[0]);
        }
        let key: String = (hash.finish().as_ref().iter().take(6))
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let dir = crate::state::sockets(env);
        Self {
            socket: dir.join(format!("{key}.sock")),
            lock: dir.join(format!("{key}.lock")),
            dir,
            key,
            files,
        }
    }

    /// Checks that the folder is ours and closed to others (creating it first if asked):
    /// anyone who could write there could stand a socket of theirs in for ours.
    pub(crate) fn check_dir(&self, create: bool) -> Result<(), String> {
        // Not followed if it is a link (checked below), and tightened if it is ours but open
        // (an older version made it with the umask's mode).
        let is_link = std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.is_symlink());
        if create && !is_link {
            crate::files::private_dir(&self.dir).map_err(|e| e.to_string())?;
        } else if !is_link && self.dir.exists() {
            crate::files::tighten_dir(&self.dir).map_err(|e| e.to_string())?;
        }
        let meta = std::fs::symlink_metadata(&self.dir)
            .map_err(|e| format!("cannot use {}: {e}", self.dir.display()))?;
        let uid = rustix::process::getuid().as_raw();
        if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o777 != 0o700 {
            return Err(format!(
                "refusing to use {}: it must be a folder of user {uid} with mode 0700",
                self.dir.display()
            ));
        }
        Ok(())
    }
}

/// Whether the other end of a Unix socket runs as our own user.
pub(crate) fn same_user(socket: impl AsFd) -> bool {
    let ours = rustix::process::getuid();
    rustix::net::sockopt::socket_peercred(socket).is_ok_and(|cred| cred.uid == ours)
}

/// Why the daemon refuses the process at the other end of `socket`, if it does: another user,
/// or a process that a hub confined, which must not reach our unconfined servers through us
/// whatever path it found the socket by. Confined is told by what our sandbox does and cannot
/// be undone: a user, network, mount or PID namespace other than ours, or `no_new_privs`
/// (which Landlock sets) where we run without it. A process whose pid our PID namespace does
/// not show (0) is refused too: it can only be in a namespace we cannot see.
pub(crate) fn refusal(socket: impl AsFd) -> Option<String> {
    let cred = match rustix::net::sockopt::socket_peercred(socket) {
        Ok(cred) => cred,
        Err(error) => return Some(format!("its credentials cannot be read: {error}")),
    };
    let ours = rustix::process::getuid();
    if cred.uid != ours {
        return Some(format!("it is another user's (uid {})", cred.uid.as_raw()));
    }
    let pid = cred.pid.as_raw_nonzero().get();
    if pid <= 0 {
        return Some("its process is not visible from our PID namespace".to_owned());
    }
    let pid = pid.to_string();
    for namespace in ["user", "net", "mnt", "pid"] {
        let link = |process: &str| std::fs::read_link(format!("/proc/{process}/ns/{namespace}"));
        match (link("self"), link(&pid)) {
            (Ok(mine), Ok(theirs)) if mine == theirs => {}
            (Ok(_), Ok(_)) => {
                return Some(format!(
                    "process {pid} runs in another {namespace} namespace (a sandboxed server)"
                ));
            }
            (_, Err(error)) | (Err(error), _) => {
                return Some(format!(
                    "the {namespace} namespace of process {pid} cannot be read: {error}"
                ));
            }
        }
    }
    let no_new_privs = |process: &str| {
        let status = std::fs::read_to_string(format!("/proc/{process}/status")).ok()?;
        let line = status
            .lines()
            .find(|line| line.starts_with("NoNewPrivs:"))?;
        Some(line.ends_with('1'))
    };
    match (no_new_privs("self"), no_new_privs(&pid)) {
        (Some(true), _) | (_, Some(false)) => None,
        (_, Some(true)) => Some(format!(
            "process {pid} runs under no_new_privs where the daemon does not (a sandboxed \
             server: Landlock sets it)"
        )),
        (_, None) => Some(format!("the status of process {pid} cannot be read")),
    }
}

/// Connects to the daemon at `place` as an MCP client, if one runs there and is ours.
pub(crate) async fn connect(place: &Place) -> Option<mcp_smol::Client> {
    connect_taking_forms(place, true).await
}

/// [`connect`], saying whether we answer the forms of the command lines we run there; a
/// caller that parks them (`call --park`), or answers parked ones, does not: a form the
/// daemon passed on to it would be lost.
pub(crate) async fn connect_taking_forms(place: &Place, forms: bool) -> Option<mcp_smol::Client> {
    place.check_dir(false).ok()?;
    let stream = async_net::unix::UnixStream::connect(&place.socket)
        .await
        .ok()?;
    if !same_user(&stream) {
        return None;
    }
    let mut options = mcp_smol::Options::default();
    // The daemon passes its servers' forms to us, for our terminal, as a cold run asks them:
    // requests of its own in the middle of `mcp-cli/run`, which only the handshake era has
    // (and the socket needs no probe to find that out).
    options.core.capabilities.elicitation = forms;
    options.core.protocol =
        mcp_smol::proto::Protocol::Revision(mcp_smol::proto::LATEST_PROTOCOL_VERSION);
    mcp_smol::connect((stream.clone(), stream), options)
        .await
        .ok()
}

/// The commands a daemon runs for us: those that only talk to servers.
fn runs_warm(cli: &Cli) -> bool {
    let warm_command = match &cli.command {
        // Arguments from our stdin are ours to read.
        Command::Call { args_json, .. } => args_json.as_deref() != Some("-"),
        // The daemon keeps the servers, and so the tasks they run, alive.
        Command::Tasks { .. }
        | Command::Tools { .. }
        | Command::Search { .. }
        | Command::Servers
        | Command::Resources { .. }
        | Command::Read { .. }
        | Command::Prompts { .. }
        | Command::Prompt { .. } => true,
        _ => false,
    };
    // `--auth-follow` may log in, which the daemon's servers never do.
    warm_command && cli.stdio.is_none() && cli.http.is_none() && !cli.auth_follow
}

/// Runs the command through the daemon for these config files, when one runs and may: the
/// same lines printed and the exit code returned. `None`: run it here.
pub(crate) async fn run_warm(
    cli: &Cli,
    args: &[OsString],
    files: &ConfigFiles,
    env: config::Env<'_>,
) -> Option<i32> {
    let off = env(NO_DAEMON).is_some_and(|value| !value.is_empty() && value != "0");
    // Questions are parked only where nobody could answer them here.
    let park = parks(cli, env) && !crate::elicit::has_terminal();
    let refuse = |why: &str| {
        let failure = Failure::usage(format!(
            "--park: {why}, and a call parks its questions on the daemon"
        ));
        failure.report(cli.json, &crate::hints::Naming::Configured);
        Some(failure.exit.code())
    };
    let no_daemon = || {
        refuse(
            "no daemon runs for these config files (`mcp-cli daemon start` starts one; then \
             call again)",
        )
    };
    if off {
        return None;
    }
    if !runs_warm(cli) {
        let why = "this call runs here, not on the daemon (an ad hoc server, `--args -` or \
                   --auth-follow)";
        return park.then(|| refuse(why)).flatten();
    }
    let args: Vec<&str> = (args.iter().map(|arg| arg.to_str())).collect::<Option<_>>()?;
    let cwd = std::env::current_dir().ok()?;
    let place = Place::of(files, env);
    if !place.socket.exists() {
        return park.then(no_daemon).flatten();
    }
    let Some(client) = connect_taking_forms(&place, !park).await else {
        return park.then(no_daemon).flatten();
    };
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    // Whether a person is here to be asked (a login, for one): the daemon has no terminal.
    let person = crate::elicit::has_terminal();
    let params = json!({
        "args": args, "cwd": cwd, "terminal": terminal, "park": park, "person": person,
    });
    // No deadline of ours: the daemon's hub times every step of the run as a cold run's
    // would (handshake budgets, each call's timeout, `--timeout` among the args), and a
    // daemon that dies closes the socket, which fails the request at once.
    let run = client
        .request(Request::new("mcp-cli/run", Some(params)))
        .no_timeout();
    // Listening before the command is sent: a form asked before anyone listens is refused.
    let requests = client.server_requests().await;
    let forms = answer_forms(&client, requests, cli.yes);
    let answer = futures_lite::future::or(run.into_future(), forms).await;
    client.close().await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            let failure = Failure::new(
                Exit::Server,
                format!("the daemon at {} failed: {error}", place.socket.display()),
            );
            failure.report(cli.json, &crate::hints::Naming::Configured);
            return Some(failure.exit.code());
        }
    };
    // The daemon cannot answer this one as a cold run would: run it here.
    if let Some(why) = answer.get("cold") {
        if park {
            let why = why.as_str().unwrap_or_default();
            let notice = format!(
                "--park: the daemon cannot run this call ({why}): it runs here, where no question can be parked"
            );
            crate::output::diagnostic(&notice_text(cli.json, &notice));
        }
        return None;
    }
    Some(replay(&mut Stdout::default(), &answer, cli.json).code())
}

/// Whether a call is to park its questions: `call --park`, or `MCP_CLI_PARK=1`.
fn parks(cli: &Cli, env: config::Env<'_>) -> bool {
    let set = env(PARK).is_some_and(|value| !value.is_empty() && value != "0");
    matches!(cli.command, Command::Call { park, .. } if park || set)
}

/// Parks every call's questions when set to anything but `0` or empty, as `call --park`.
pub(crate) const PARK: &str = "MCP_CLI_PARK";

/// Prints what the daemon answered a command line with (its lines, the question it parked
/// on, or why it refused), and returns the exit code the command line exits with.
pub(crate) fn replay(out: &mut Stdout, answer: &Value, json: bool) -> Exit {
    let lines: Vec<Line> = serde_json::from_value(answer["lines"].clone()).unwrap_or_default();
    out.replay(&lines);
    if let Some(question) = answer.get("parked") {
        show_parked(out, question, json);
    }
    let exit = Exit::of_code(answer["exit"].as_i64());
    if let Some(message) = answer["error"].as_str() {
        let text = Failure::new(exit, message).text(json, &crate::hints::Naming::Configured);
        out.diagnostic(&text);
    }
    exit
}

/// Prints a question a call parked on: under `--json`, `{"parked": QUESTION}`; otherwise
/// who asks what, the form's fields or the link, and the command that answers it.
fn show_parked(out: &mut Stdout, question: &Value, json: bool) {
    if json {
        return out.line(&json!({ "parked": question }).to_string());
    }
    let text = |key: &str| question[key].as_str().unwrap_or_default().to_owned();
    let id = text("id");
    out.line(&format!(
        "{} asks, for its tool {}: {}",
        text("server"),
        text("tool"),
        one_line(&text("message"))
    ));
    match question.get("url").and_then(Value::as_str) {
        Some(url) => out.line(&format!("  open: {url}")),
        None => {
            let schema = &question["requestedSchema"];
            let required: Vec<&str> = (schema["required"].as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .collect();
            let empty = serde_json::Map::new();
            let fields = schema["properties"].as_object().unwrap_or(&empty);
            for (key, field) in fields {
                let line = crate::elicit::field_line(key, field, required.contains(&key.as_str()));
                out.line(&format!("  {key}=  {line}"));
            }
        }
    }
    out.line(&format!(
        "parked as {id} for {} s: `{}` answers it (or --decline, --cancel); `mcp-cli parked` \
         lists what waits",
        question["expiresInSeconds"],
        text("answerWith")
    ));
}

/// A server's words on one line: a message could otherwise pass for lines of our own.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A notice as [`Context::notice`](crate::commands::Context::notice) words it.
fn notice_text(json: bool, text: &str) -> String {
    match json {
        true => json!({ "warning": { "message": text } }).to_string(),
        false => format!("mcp-cli: {text}"),
    }
}

/// Answers the forms the daemon passes on from its servers while it runs our command: on our
/// terminal, as a cold run would. Never returns.
async fn answer_forms(
    client: &mcp_smol::Client,
    requests: async_channel::Receiver<mcp_smol::proto::ServerRequest>,
    yes: bool,
) -> Result<Value, mcp_smol::Error> {
    let handler = crate::elicit::handler(yes);
    while let Ok(request) = requests.recv().await {
        let result = match request.method.as_str() {
            "elicitation/create" => {
                let params = request.params.as_ref();
                let form = crate::hub::Elicitation::of_relayed("the daemon", params);
                Ok(handler.fill(form).await.to_result())
            }
            method => Err(mcp_smol::proto::RpcError::method_not_found(method)),
        };
        client.respond(request.id, result).await;
    }
    std::future::pending().await
}

/// Asks the daemon at `place` something of its own (`mcp-cli/status`, `mcp-cli/stop`).
pub(crate) async fn ask(client: &mcp_smol::Client, method: &str) -> Result<Value, Failure> {
    (client.request(Request::new(method, None)).await)
        .map_err(|error| Failure::new(Exit::Server, format!("the daemon failed: {error}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_of_our_own_user_and_namespaces_is_not_refused() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(super::refusal(&ours), None);
    }
}
