//! `install NAME[@VERSION] [--as NAME] [--package TYPE] [--set NAME=VALUE]... [--sandbox]
//! [--no-check] [--force] [--registry URL]`: a registry entry written as a native one in the
//! user file (or `--config FILE`), its values asked on a terminal (secrets without echo, kept
//! in the keychain), then started once so that its tools are listed, scanned and pinned
//! before anything calls them.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use crate::commands::Context;
use crate::commands::registry::{entry, input_line};
use crate::config::{self, RegistryOrigin};
use crate::exit::{Exit, Failure};
use crate::registry::install::{self, Ask, Bundle, NoOne, Question, Runner, Runtimes, Way};
use crate::registry::mcpb;
use crate::registry::model::{Package, Status};

/// The variables naming the certificate authorities launchers trust: uv and pip's, Node's.
const TRUST_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
];

/// What the command line says.
#[derive(Debug)]
pub(crate) struct Given {
    pub(crate) name: String,
    pub(crate) as_name: Option<String>,
    pub(crate) package: Option<String>,
    pub(crate) set: Vec<String>,
    pub(crate) sandbox: bool,
    pub(crate) no_check: bool,
    pub(crate) force: bool,
    pub(crate) registry: Option<String>,
}

pub(crate) async fn run(ctx: &mut Context, given: Given) -> Result<Exit, Failure> {
    let (url, listed) = entry(ctx, &given.name, given.registry.as_deref()).await?;
    let label = listed.label();
    match listed.official.status {
        Status::Deleted => {
            return Err(Failure::usage(format!(
                "{label} was deleted from the registry at {url}"
            )));
        }
        Status::Active => {}
        status => ctx.notice(&format!(
            "mcp-cli: warning: the registry at {url} marks {label} {}",
            status.word()
        )),
    }
    let name = match &given.as_name {
        Some(name) => name.clone(),
        None => default_name(&listed.server.name),
    };
    let values = pairs(&given.set)?;
    let runtimes = Runtimes::on_path(std::env::var("PATH").ok().as_deref());
    let terminal = crate::elicit::has_terminal();
    let mut asker: Box<dyn Ask> = match terminal {
        true => Box::new(Terminal {
            intro: Some(format!("{label} asks for these values:")),
        }),
        false => Box::new(NoOne),
    };
    let chosen = install::choose(&listed, given.package.as_deref(), &runtimes);
    let chosen = chosen.map_err(Failure::usage)?;
    let bundle = match &chosen.way {
        Way::Package(package, Runner::Bundle) => Some(bundle(ctx, package).await?),
        _ => None,
    };
    let planned = install::plan(
        &listed,
        &name,
        chosen,
        bundle.as_ref(),
        &values,
        &mut *asker,
    );
    let mut planned = planned.map_err(Failure::usage)?;
    let sandbox = install::proposed_sandbox(&planned);
    if given.sandbox {
        confine(&mut planned, sandbox.clone())?;
    }
    planned.server.registry = Some(RegistryOrigin {
        url: url.clone(),
        name: listed.server.name.clone(),
        version: listed.server.version.clone(),
        published_at: listed.official.published_at.clone(),
        server_id: listed.official.server_id.clone(),
        version_id: listed.official.version_id.clone(),
    });
    for line in &planned.passed_over {
        ctx.notice(&format!("mcp-cli: passed over {line}"));
    }
    for warning in &planned.warnings {
        ctx.notice(&format!("mcp-cli: warning: {warning}"));
    }
    ctx.out
        .line(&format!("{label} from {url}, as {name}: {}", planned.how));
    ctx.out
        .line(&format!("  runs: {}", command_line(&planned.server)));
    if terminal && !ctx.yes && !confirm("write it and start it once to check its tools?") {
        return Err(Failure::usage("not installed: you said no"));
    }
    let path = write(ctx, &name, &planned, given.force)?;
    if !planned.notes.is_empty() {
        ctx.out.line("after installing (shown, never run):");
        for note in &planned.notes {
            ctx.out.line(&format!("  - {note}"));
        }
    }
    if let Some(sandbox) = sandbox.filter(|_| !given.sandbox) {
        ctx.out.line(&format!(
            "  to confine it: install again with --sandbox --force (network = {:?}, filesystem = {:?})",
            sandbox.network, sandbox.filesystem
        ));
    }
    if given.no_check {
        ctx.out.line("not started (--no-check): its tools are listed, scanned and pinned when it first starts");
        return Ok(Exit::Success);
    }
    check(ctx, &name, &path).await
}

/// Writes the entry into the user file (or `--config FILE`), and its secrets where they are
/// kept: the edit is made first, so an entry that cannot be written (one of that name there
/// already) leaves every secret as it was; the file is replaced once the secrets are kept.
fn write(
    ctx: &mut Context,
    name: &str,
    planned: &install::Planned,
    force: bool,
) -> Result<std::path::PathBuf, Failure> {
    let env = |key: &str| std::env::var(key).ok();
    let usage = |error: config::ConfigError| Failure::usage(error.to_string());
    let path = config::native_file(&ctx.configs, &env).map_err(usage)?;
    let original = config::read_original(&path).map_err(usage)?;
    let text = original.text.as_deref().unwrap_or_default();
    let edited = config::add_server(&path, text, name, &planned.server, force).map_err(usage)?;
    for (secret, value) in &planned.secrets {
        let kept = crate::secrets::set(secret, value, &env).map_err(Failure::usage)?;
        ctx.out.line(&format!("  kept secret {secret} in {kept}"));
    }
    config::write_back(&original, &edited).map_err(usage)?;
    ctx.out.line(&format!("added {name} to {}", path.display()));
    Ok(path)
}

/// `--sandbox`: the proposed permissions written into the entry, the launcher's cache made.
fn confine(
    planned: &mut install::Planned,
    sandbox: Option<config::NewPermissions>,
) -> Result<(), Failure> {
    let Some(sandbox) = sandbox else {
        return Err(Failure::usage(format!(
            "--sandbox: there is no sandbox to propose for {} (only for npx, uvx and pipx)",
            planned.how
        )));
    };
    // The sandbox admits only folders that exist, and a launcher's first run would make its
    // cache inside the walls: made here, before the first start.
    let env = |key: &str| std::env::var(key).ok();
    for folder in &sandbox.filesystem {
        let folder = config::expand(folder, &env).map_err(Failure::usage)?;
        std::fs::create_dir_all(&folder)
            .map_err(|error| Failure::usage(format!("--sandbox: cannot make {folder}: {error}")))?;
    }
    planned.server.permissions = Some(sandbox);
    // A sandboxed server inherits none of our variables; these say which certificate
    // authorities to trust (a company's TLS-inspecting proxy), which a launcher needs to reach
    // its registry, and name files, never secrets.
    planned.server.env_pass = (TRUST_VARIABLES.iter())
        .filter(|name| std::env::var_os(name).is_some())
        .map(|name| (*name).to_owned())
        .collect();
    Ok(())
}

/// The first start: the written entry added to the hub, started, scanned as `scan` does and
/// listed, which pins its tools; exit 1 when the scan flags anything.
async fn check(ctx: &mut Context, name: &str, path: &std::path::Path) -> Result<Exit, Failure> {
    let usage = |error: config::ConfigError| Failure::usage(error.to_string());
    let name = name.to_owned();
    let loaded =
        config::load(&[(path.to_owned(), true)], &crate::secrets::lookup).map_err(usage)?;
    let server = (loaded.servers.into_iter())
        .find(|server| server.name == name)
        .ok_or_else(|| {
            Failure::usage(format!(
                "{name} is not in {} after writing it",
                path.display()
            ))
        })?;
    ctx.hub.add(server);
    let exit = super::scan::run(ctx, std::slice::from_ref(&name)).await?;
    // Listing it pins what it offers now (a flagged tool stays withheld all the same), so
    // that a definition changed before its first call is a change, not a first sight.
    let listed = ctx.hub.tools_live(std::slice::from_ref(&name)).await;
    if listed.failures.is_empty() && ctx.hub.server_spec(&name).is_ok_and(|spec| spec.pin_tools) {
        ctx.out
            .line(&format!("{name}: its tool definitions are pinned"));
    }
    Ok(exit)
}

/// The bundle `package` names, unpacked in the state folder's `mcpb/` under its digest:
/// downloaded and checked against its `fileSha256` before a byte of it is read, unless an
/// earlier install left it there.
async fn bundle(ctx: &Context, package: &Package) -> Result<Bundle, Failure> {
    let digest = package
        .file_sha256
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if digest.len() != 64 || !digest.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Failure::usage(format!(
            "the bundle's fileSha256 {digest:?} is not a SHA-256 in hex"
        )));
    }
    let dir = ctx.state.root().join("mcpb").join(&digest[..32]);
    if !dir.join("manifest.json").is_file() {
        let spinner = crate::spinner::Spinner::start(format!("downloading {}", package.identifier));
        let bytes = download(&package.identifier).await;
        drop(spinner);
        let bytes = bytes.map_err(|why| Failure::new(Exit::Server, why))?;
        mcpb::verify(&bytes, &digest).map_err(Failure::usage)?;
        mcpb::unpack(&bytes, &dir).map_err(Failure::usage)?;
    }
    let manifest = mcpb::manifest(&dir).map_err(Failure::usage)?;
    Ok(Bundle { dir, manifest })
}

/// The body at `url`, following up to five redirects, never from https to plain http.
async fn download(url: &str) -> Result<Vec<u8>, String> {
    let mut url = url::Url::parse(url).map_err(|error| format!("{url:?} is not a URL: {error}"))?;
    for _ in 0..=5 {
        let request = mcp_smol::authorize::Request {
            method: "GET".into(),
            url: url.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: std::time::Duration::from_secs(300),
        };
        let response = mcp_smol::authorize::send_up_to(request, mcpb::MAX_DOWNLOAD).await;
        let response = response.map_err(|error| format!("cannot download {url}: {error}"))?;
        match response.status {
            200..=299 => return Ok(response.body),
            301 | 302 | 303 | 307 | 308 => {
                let location = (response.header("location"))
                    .ok_or_else(|| format!("{url} redirects nowhere"))?;
                let next = url
                    .join(location)
                    .map_err(|error| format!("{url} redirects to {location:?}: {error}"))?;
                let safe = next.scheme() == "https"
                    || (crate::registry::checks::is_loopback(&next)
                        && crate::registry::checks::is_loopback(&url));
                if !safe {
                    return Err(format!("{url} redirects to {next}, which is not https"));
                }
                url = next;
            }
            status => return Err(format!("downloading {url} answered HTTP {status}")),
        }
    }
    Err(format!(
        "downloading the bundle took more than five redirects (the last to {url})"
    ))
}

/// The last part of a registry name without the words every server's name holds (`server-`,
/// `mcp-`, `-mcp`), in the characters a config name keeps well: `server-memory` is `memory`.
fn default_name(registry_name: &str) -> String {
    let last = registry_name.rsplit('/').next().unwrap_or(registry_name);
    let name: String = (last.chars())
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c.to_ascii_lowercase(),
                false => '-',
            },
        )
        .collect();
    let mut name = name.trim_matches('-').replace("__", "_");
    for prefix in ["mcp-server-", "server-", "mcp-"] {
        if let Some(rest) = name.strip_prefix(prefix).filter(|rest| !rest.is_empty()) {
            name = rest.to_owned();
        }
    }
    for suffix in ["-mcp-server", "-server", "-mcp"] {
        if let Some(rest) = name.strip_suffix(suffix).filter(|rest| !rest.is_empty()) {
            name = rest.to_owned();
        }
    }
    name
}

/// The command line of a new entry, as it will run (secrets as their references).
fn command_line(server: &config::NewServer) -> String {
    let mut words: Vec<String> = server
        .env
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    match (&server.command, &server.url) {
        (Some(program), _) => {
            words.push(program.clone());
            words.extend(server.args.iter().cloned());
        }
        (None, Some(url)) => {
            words.push(url.clone());
            words.extend(
                server
                    .headers
                    .iter()
                    .map(|(name, value)| format!("({name}: {value})")),
            );
        }
        (None, None) => {}
    }
    let quoted: Vec<String> = words
        .iter()
        .map(|word| shell_words::quote(word).into_owned())
        .collect();
    crate::auth::http::printable(&quoted.join(" "))
}

/// `NAME=VALUE` words as a map.
fn pairs(words: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    (words.iter())
        .map(|word| match word.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
            _ => Err(Failure::usage(format!(
                "--set takes NAME=VALUE, not {word:?}"
            ))),
        })
        .collect()
}

/// Asks on the terminal (stderr and stdin), a secret without echo.
struct Terminal {
    /// Said once, before the first question.
    intro: Option<String>,
}

impl Ask for Terminal {
    fn ask(&mut self, question: &Question) -> Result<Option<String>, String> {
        let _paused = crate::spinner::pause();
        let mut err = std::io::stderr();
        if let Some(intro) = self.intro.take() {
            let _ = writeln!(err, "{intro}");
        }
        // Off before the question shows, so that nothing typed once it shows is echoed.
        let hidden = question.input.is_secret.then(EchoOff::new);
        let _ = write!(
            err,
            "  {}\n  > ",
            input_line(&question.key, &question.input)
        );
        let _ = err.flush();
        let mut line = String::new();
        let read = std::io::stdin().lock().read_line(&mut line);
        if hidden.is_some() {
            let _ = writeln!(err);
        }
        drop(hidden);
        match read {
            Ok(0) => Err(format!(
                "no answer for {}: the terminal closed",
                question.key
            )),
            Ok(_) => Ok(Some(line.trim_end_matches(['\n', '\r']).to_owned())),
            Err(error) => Err(format!(
                "cannot read the answer for {}: {error}",
                question.key
            )),
        }
    }
}

/// The terminal's echo, off while a secret is typed; back on when dropped.
struct EchoOff(Option<rustix::termios::Termios>);

impl EchoOff {
    fn new() -> Self {
        let stdin = std::io::stdin();
        let Ok(before) = rustix::termios::tcgetattr(&stdin) else {
            return Self(None);
        };
        let mut quiet = before.clone();
        quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
        let set = rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet);
        Self(set.ok().map(|()| before))
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        if let Some(before) = self.0.take() {
            let stdin = std::io::stdin();
            let _ =
                rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &before);
        }
    }
}

/// A yes-or-no question on the terminal; only `y` or `yes` is yes.
fn confirm(question: &str) -> bool {
    let _paused = crate::spinner::pause();
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let read = std::io::stdin().lock().read_line(&mut answer);
    read.is_ok() && matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_are_the_last_part_made_plain() {
        assert_eq!(default_name("io.github.example/weather"), "weather");
        assert_eq!(default_name("com.example/my.server_v2"), "my-server_v2");
        assert_eq!(default_name("a/b__c"), "b_c");
        assert_eq!(
            default_name("io.github.modelcontextprotocol/server-memory"),
            "memory"
        );
        assert_eq!(default_name("io.github.x/mcp-server-time"), "time");
        assert_eq!(default_name("io.github.x/GitHub-MCP-Server"), "github");
        assert_eq!(default_name("io.github.x/server"), "server");
        assert_eq!(default_name("io.github.x/mcp"), "mcp");
    }
}
