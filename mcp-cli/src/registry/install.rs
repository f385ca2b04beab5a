//! From a registry entry to a native config entry: which of its packages (or remotes) to run,
//! the command line that runs it, and the values it needs, asked of the person or given with
//! `--set NAME=VALUE`.
//!
//! What the registry sends is checked before it reaches a command line: package identifiers
//! and versions must look like their registry's (so `--exec=...` can never pose as an npm
//! package), flags must be flags, and no value of the publisher's may hold `${`, which the
//! config would expand from the person's own environment. Secret values are kept with
//! [`crate::secrets`] and the entry names them `${secret:NAME}`.

use std::collections::BTreeMap;

use super::checks::{check_image, check_npm, check_pypi, check_version, no_expansion};
use super::model::{Listed, Package, Transport};
use super::values::Values;
pub(crate) use super::values::{Ask, NoOne, Question};
use crate::config::NewServer;

/// The npm registry `npx` uses unless told otherwise.
const NPM_REGISTRY: &str = "https://registry.npmjs.org";

/// What runs a package, found on this machine (or not).
#[derive(Debug, Clone, Default)]
pub(crate) struct Runtimes {
    pub(crate) npx: bool,
    pub(crate) uvx: bool,
    pub(crate) pipx: bool,
    /// `docker` or `podman`, whichever is found first.
    pub(crate) container: Option<&'static str>,
}

impl Runtimes {
    /// The programs on `path` (`$PATH`).
    pub(crate) fn on_path(path: Option<&str>) -> Self {
        let found = |program: &str| {
            (std::env::split_paths(path.unwrap_or_default())).any(|dir| {
                let file = dir.join(program);
                std::fs::metadata(&file).is_ok_and(|meta| {
                    meta.is_file()
                        && std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0
                })
            })
        };
        Self {
            npx: found("npx"),
            uvx: found("uvx"),
            pipx: found("pipx"),
            container: ["docker", "podman"]
                .into_iter()
                .find(|program| found(program)),
        }
    }
}

/// The entry to write, what to keep in the keychain, and what to tell the person.
#[derive(Debug, Default)]
pub(crate) struct Planned {
    pub(crate) server: NewServer,
    /// `(secret name, value)`, kept before the entry is written.
    pub(crate) secrets: Vec<(String, String)>,
    /// How it runs, in a few words: `npm package @x/y@1.0.0 through npx`.
    pub(crate) how: String,
    /// The packages passed over, and why.
    pub(crate) passed_over: Vec<String>,
    /// What the person should know before it runs (a secret on the command line).
    pub(crate) warnings: Vec<String>,
    pub(crate) notes: Vec<String>,
}

/// How the server will run: one of its packages with the launcher that runs it here, or one
/// of its remotes; and the packages passed over on the way, with why.
#[derive(Debug)]
pub(crate) struct Chosen<'a> {
    pub(crate) way: Way<'a>,
    pub(crate) passed_over: Vec<String>,
}

#[derive(Debug)]
pub(crate) enum Way<'a> {
    Package(&'a Package, Runner),
    Remote(&'a Transport),
}

/// Chooses how `listed` runs. `kind` picks the package type (`npm`, `pypi`, `oci`, `mcpb`) or
/// `remote`; without it, the first the publisher lists that can run here, else a remote.
pub(crate) fn choose<'a>(
    listed: &'a Listed,
    kind: Option<&str>,
    runtimes: &Runtimes,
) -> Result<Chosen<'a>, String> {
    let server = &listed.server;
    let mut passed_over = Vec::new();
    for package in &server.packages {
        if kind.is_some_and(|kind| kind != package.registry_type) {
            continue;
        }
        match runner(package, runtimes) {
            Ok(runner) => {
                let way = Way::Package(package, runner);
                return Ok(Chosen { way, passed_over });
            }
            Err(why) => passed_over.push(format!(
                "{} package {}: {why}",
                package.registry_type, package.identifier
            )),
        }
    }
    let remote = (server.remotes.first()).filter(|_| kind.is_none_or(|kind| kind == "remote"));
    if let Some(remote) = remote {
        let way = Way::Remote(remote);
        return Ok(Chosen { way, passed_over });
    }
    let offered: Vec<&str> = (server.packages.iter().map(|p| p.registry_type.as_str()))
        .chain(server.remotes.iter().map(|_| "remote"))
        .collect();
    let mut why = match (kind, offered.is_empty()) {
        (_, true) => format!("{} offers no package and no remote to run", listed.label()),
        (Some(kind), _) if !offered.contains(&kind) => format!(
            "{} offers no {kind} (it offers {})",
            listed.label(),
            offered.join(", ")
        ),
        _ => format!("nothing {} offers can run here", listed.label()),
    };
    for line in &passed_over {
        why.push_str(&format!("\n  {line}"));
    }
    Err(why)
}

/// A bundle unpacked for an entry: its folder and its manifest.
#[derive(Debug)]
pub(crate) struct Bundle {
    pub(crate) dir: std::path::PathBuf,
    pub(crate) manifest: super::mcpb::Manifest,
}

/// Plans entry `name` (`--as`) for `listed`, run as `chosen` says; a bundle (`mcpb`) must be
/// unpacked first and given as `bundle`.
pub(crate) fn plan(
    listed: &Listed,
    name: &str,
    chosen: Chosen<'_>,
    bundle: Option<&Bundle>,
    given: &BTreeMap<String, String>,
    ask: &mut dyn Ask,
) -> Result<Planned, String> {
    let mut values = Values {
        entry: name,
        given,
        ask,
        secrets: Vec::new(),
        missing: Vec::new(),
        used: Vec::new(),
        warnings: Vec::new(),
    };
    let mut planned = match (chosen.way, bundle) {
        (Way::Package(_, Runner::Bundle), Some(bundle)) => from_bundle(bundle, &mut values)?,
        (Way::Package(package, Runner::Bundle), None) => {
            return Err(format!("the bundle {} is not unpacked", package.identifier));
        }
        (Way::Package(package, runner), _) => from_package(package, runner, &mut values)?,
        (Way::Remote(remote), _) => from_remote(remote, &mut values)?,
    };
    let passed_over = chosen.passed_over;
    if !values.missing.is_empty() {
        return Err(format!(
            "{} needs values for: {} (asked on a terminal; else give each with --set NAME=VALUE)",
            listed.label(),
            values.missing.join(", ")
        ));
    }
    if let Some(unknown) = given.keys().find(|key| !values.used.contains(key)) {
        return Err(format!(
            "--set {unknown}: {} asks for no value of that name",
            listed.label()
        ));
    }
    planned.secrets = values.secrets;
    planned.warnings = values.warnings;
    planned.passed_over = passed_over;
    Ok(planned)
}

/// How a package type runs here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Runner {
    Npx,
    Uvx,
    Pipx,
    Container(&'static str),
    /// An MCP bundle, downloaded and unpacked: its manifest says what runs.
    Bundle,
}

fn runner(package: &Package, runtimes: &Runtimes) -> Result<Runner, String> {
    if package.transport.kind != "stdio" {
        return Err(format!(
            "it serves {} itself, which install does not run; use a remote or another package",
            package.transport.kind
        ));
    }
    match package.registry_type.as_str() {
        "npm" if runtimes.npx => Ok(Runner::Npx),
        "npm" => Err("npx is not on PATH (it comes with Node.js)".into()),
        "pypi" if runtimes.uvx => Ok(Runner::Uvx),
        "pypi" if runtimes.pipx && package.runtime_arguments.is_empty() => Ok(Runner::Pipx),
        "pypi" if runtimes.pipx => {
            Err("its runtime arguments are uvx's, and only pipx is on PATH".into())
        }
        "pypi" => Err("neither uvx nor pipx is on PATH".into()),
        "oci" => runtimes
            .container
            .map(Runner::Container)
            .ok_or_else(|| "no container runtime (docker or podman) is on PATH".into()),
        "mcpb" if package.file_sha256.is_none() => {
            Err("it gives no fileSha256 to check the download against".into())
        }
        "mcpb" => match url::Url::parse(&package.identifier) {
            Ok(url) if url.scheme() == "https" || super::checks::is_loopback(&url) => {
                Ok(Runner::Bundle)
            }
            _ => Err("its identifier is not an https URL to download".into()),
        },
        other => Err(format!(
            "{other:?} packages are not installed by this version"
        )),
    }
}

/// A bundle's entry: its `mcp_config` with its variables filled in, run in its folder.
fn from_bundle(bundle: &Bundle, values: &mut Values<'_>) -> Result<Planned, String> {
    use super::mcpb;
    let home = std::env::var("HOME").unwrap_or_default();
    let config = mcpb::linux_config(&bundle.manifest)?;
    let mut settings = BTreeMap::new();
    let mut lists = BTreeMap::new();
    for (key, setting) in &bundle.manifest.user_config {
        let input = setting.input(&home);
        if let Some(value) = values.value(key, &input, "bundle setting")? {
            if setting.multiple {
                let items: Vec<String> = value
                    .split(',')
                    .map(|item| super::checks::absolute(item.trim().to_owned()))
                    .collect();
                lists.insert(key.clone(), items);
            }
            settings.insert(key.clone(), value);
        }
    }
    let fill = |text: &str| mcpb::substitute(text, &bundle.dir, &home, &settings);
    let mut command = fill(&config.command)?;
    if command.contains('/') && !command.starts_with('/') {
        command = bundle.dir.join(&command).to_string_lossy().into_owned();
    }
    let mut args = Vec::new();
    for arg in &config.args {
        // A list setting standing alone is one argument per item.
        let alone = (arg.strip_prefix("${user_config."))
            .and_then(|rest| rest.strip_suffix('}'))
            .and_then(|key| lists.get(key));
        match alone {
            Some(items) => args.extend(items.iter().cloned()),
            None => args.push(fill(arg)?),
        }
    }
    let mut env = BTreeMap::new();
    for (key, value) in &config.env {
        env.insert(key.clone(), fill(value)?);
    }
    let manifest = &bundle.manifest;
    let server = NewServer {
        command: Some(command),
        args,
        env,
        cwd: Some(bundle.dir.to_string_lossy().into_owned()),
        ..NewServer::default()
    };
    Ok(Planned {
        server,
        how: format!(
            "MCP bundle {} {} ({} server) unpacked into {}",
            crate::auth::http::printable(&manifest.name),
            crate::auth::http::printable(&manifest.version),
            crate::auth::http::printable(&manifest.server.kind),
            bundle.dir.display()
        ),
        ..Planned::default()
    })
}

fn from_package(
    package: &Package,
    runner: Runner,
    values: &mut Values<'_>,
) -> Result<Planned, String> {
    let identifier = &package.identifier;
    let version = package.version.as_deref();
    let mut server = NewServer::default();
    let mut args = Vec::new();
    let runtime_args = values.arguments(&package.runtime_arguments)?;
    let package_args = values.arguments(&package.package_arguments)?;
    let env = values.named(&package.environment_variables, "variable")?;
    let how;
    match runner {
        Runner::Npx => {
            check_npm(identifier)?;
            let version = version.map(check_version).transpose()?;
            server.command = Some("npx".into());
            args.push("-y".to_owned());
            args.extend(runtime_args);
            args.push(match version {
                Some(version) => format!("{identifier}@{version}"),
                None => identifier.clone(),
            });
            if let Some(base) = package
                .registry_base_url
                .as_deref()
                .filter(|base| base.trim_end_matches('/') != NPM_REGISTRY)
            {
                no_expansion("registryBaseUrl", base)?;
                server
                    .env
                    .insert("npm_config_registry".into(), base.to_owned());
            }
            how = format!(
                "npm package {} through npx",
                args.last().cloned().unwrap_or_default()
            );
        }
        Runner::Uvx | Runner::Pipx => {
            check_pypi(identifier)?;
            let version = version.map(check_version).transpose()?;
            let spec = match version {
                Some(version) => format!("{identifier}=={version}"),
                None => identifier.clone(),
            };
            if runner == Runner::Uvx {
                server.command = Some("uvx".into());
                args.extend(runtime_args);
                args.push(spec.clone());
            } else {
                server.command = Some("pipx".into());
                args.extend([
                    "run".to_owned(),
                    "--spec".to_owned(),
                    spec.clone(),
                    identifier.clone(),
                ]);
            }
            let through = if runner == Runner::Uvx {
                "uvx"
            } else {
                "pipx run (uvx is not on PATH)"
            };
            how = format!("PyPI package {spec} through {through}");
        }
        Runner::Bundle => return Err("a bundle is planned from its manifest".into()),
        Runner::Container(program) => {
            check_image(identifier)?;
            server.command = Some(program.to_owned());
            args.extend(["run", "-i", "--rm"].map(str::to_owned));
            args.extend(runtime_args);
            // The variables reach the container by name; their values are the entry's `env`.
            for name in env.keys() {
                args.extend(["-e".to_owned(), name.clone()]);
            }
            args.push(identifier.clone());
            how = format!("container image {identifier} through {program}");
        }
    }
    args.extend(package_args);
    // No `timeout_sec`: a launcher's entry gets the budget a first download needs already.
    server.args = args;
    server.env.extend(env);
    let notes = (package.post_install_instructions.iter())
        .map(|step| {
            let mut line = crate::auth::http::printable(&step.description);
            if step.optional {
                line.push_str(" (optional)");
            }
            if let Some(command) = &step.command {
                line.push_str(&format!(
                    "\n      {}",
                    crate::auth::http::printable(command)
                ));
            }
            if let Some(link) = &step.documentation {
                line.push_str(&format!(
                    "\n      see {}",
                    crate::auth::http::printable(link)
                ));
            }
            line
        })
        .collect();
    Ok(Planned {
        server,
        how,
        notes,
        ..Planned::default()
    })
}

fn from_remote(remote: &Transport, values: &mut Values<'_>) -> Result<Planned, String> {
    let template = remote.url.as_deref().ok_or("its remote has no url")?;
    no_expansion("url", template)?;
    let mut url = template.to_owned();
    for (key, input) in &remote.variables {
        let value = values.value(key, input, "URL variable")?;
        if let Some(value) = value {
            if value.contains("${") {
                return Err(format!("URL variable {key} cannot hold `${{`"));
            }
            url = url.replace(&format!("{{{key}}}"), &value);
        }
    }
    let parsed =
        url::Url::parse(&url).map_err(|error| format!("its URL {url:?} is not a URL: {error}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("its URL {url:?} is not http or https"));
    }
    let headers = values.named(&remote.headers, "header")?;
    let server = NewServer {
        url: Some(url.clone()),
        headers,
        sse: remote.kind == "sse",
        ..NewServer::default()
    };
    let transport = if remote.kind == "sse" {
        "HTTP+SSE"
    } else {
        "Streamable HTTP"
    };
    Ok(Planned {
        server,
        how: format!("remote server {url} over {transport}"),
        ..Planned::default()
    })
}

/// The permissions `--sandbox` writes for a planned entry: the network allowlist seeded with
/// the registry its launcher installs from, and the launcher's cache writable.
pub(crate) fn proposed_sandbox(planned: &Planned) -> Option<crate::config::NewPermissions> {
    let command = planned.server.command.as_deref()?;
    let (network, filesystem): (Vec<String>, Vec<String>) = match command {
        "npx" => {
            let host = (planned.server.env.get("npm_config_registry"))
                .and_then(|base| url::Url::parse(base).ok())
                .and_then(|url| {
                    Some(format!(
                        "{}:{}",
                        url.host_str()?,
                        url.port_or_known_default()?
                    ))
                })
                .unwrap_or_else(|| "registry.npmjs.org:443".into());
            (vec![host], vec!["${HOME}/.npm".into()])
        }
        "uvx" => (
            vec!["pypi.org:443".into(), "files.pythonhosted.org:443".into()],
            vec!["${HOME}/.cache/uv".into(), "${HOME}/.local/share/uv".into()],
        ),
        "pipx" => (
            vec!["pypi.org:443".into(), "files.pythonhosted.org:443".into()],
            vec!["${HOME}/.local/pipx".into(), "${HOME}/.cache/pip".into()],
        ),
        _ => return None,
    };
    Some(crate::config::NewPermissions {
        network,
        filesystem,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plan_for(
        listed: &Listed,
        name: &str,
        kind: Option<&str>,
        runtimes: &Runtimes,
        given: &BTreeMap<String, String>,
        ask: &mut dyn Ask,
    ) -> Result<Planned, String> {
        let chosen = choose(listed, kind, runtimes)?;
        plan(listed, name, chosen, None, given, ask)
    }

    fn listed(server: serde_json::Value) -> Listed {
        Listed::read(json!({ "server": server })).unwrap()
    }

    fn all() -> Runtimes {
        Runtimes {
            npx: true,
            uvx: true,
            pipx: true,
            container: Some("docker"),
        }
    }

    /// Answers from a table, recording what was asked.
    #[derive(Default)]
    struct Answers(BTreeMap<String, String>, Vec<String>);

    impl Ask for Answers {
        fn ask(&mut self, question: &Question) -> Result<Option<String>, String> {
            self.1.push(question.key.clone());
            Ok(self.0.get(&question.key).cloned())
        }
    }

    fn weather() -> Listed {
        listed(json!({
            "name": "io.github.example/weather", "version": "1.2.0", "description": "Forecasts",
            "packages": [
                {"registryType": "mcpb", "identifier": "http://example.com/w.mcpb", "fileSha256": "ab", "transport": {"type": "stdio"}},
                {"registryType": "npm", "identifier": "@example/weather", "version": "1.2.0", "transport": {"type": "stdio"},
                 "packageArguments": [
                     {"type": "named", "name": "--units", "choices": ["metric", "imperial"], "default": "metric"},
                     {"type": "positional", "valueHint": "city", "isRequired": true},
                     {"type": "named", "name": "--verbose", "format": "boolean"}
                 ],
                 "environmentVariables": [
                     {"name": "API_KEY", "isSecret": true, "isRequired": true, "description": "Your key"},
                     {"name": "REGION", "value": "{region}-1", "variables": {"region": {"default": "eu"}}}
                 ],
                 "postInstallInstructions": [{"description": "Restart your editor", "optional": true}]}
            ]
        }))
    }

    #[test]
    fn an_npm_package_becomes_an_npx_entry_with_its_values() {
        let mut answers = Answers::default();
        answers.0.insert("API_KEY".into(), "k-123".into());
        answers.0.insert("city".into(), "Berlin".into());
        let given = BTreeMap::from([("--verbose".to_owned(), "true".to_owned())]);
        let planned = plan_for(&weather(), "weather", None, &all(), &given, &mut answers).unwrap();
        assert_eq!(planned.server.command.as_deref(), Some("npx"));
        assert_eq!(
            planned.server.args,
            [
                "-y",
                "@example/weather@1.2.0",
                "--units=metric",
                "Berlin",
                "--verbose"
            ]
        );
        assert_eq!(planned.server.env["API_KEY"], "${secret:weather/API_KEY}");
        assert_eq!(planned.server.env["REGION"], "eu-1");
        assert_eq!(
            planned.secrets,
            [("weather/API_KEY".to_owned(), "k-123".to_owned())]
        );
        assert_eq!(planned.passed_over.len(), 1);
        assert!(
            planned.passed_over[0].contains("mcpb"),
            "{:?}",
            planned.passed_over
        );
        assert_eq!(planned.notes, ["Restart your editor (optional)"]);
        assert_eq!(
            answers.1,
            ["--units", "city", "API_KEY", "region"],
            "--set values are not asked again"
        );
        let sandbox = proposed_sandbox(&planned).unwrap();
        assert_eq!(sandbox.network, ["registry.npmjs.org:443"]);
    }

    #[test]
    fn without_anyone_to_ask_missing_values_are_named() {
        let error = plan_for(
            &weather(),
            "weather",
            None,
            &all(),
            &BTreeMap::new(),
            &mut NoOne,
        )
        .unwrap_err();
        assert!(error.contains("needs values for: city, API_KEY"), "{error}");
        let given = BTreeMap::from([
            ("city".to_owned(), "Oslo".to_owned()),
            ("API_KEY".to_owned(), "k".to_owned()),
            ("--units".to_owned(), "kelvin".to_owned()),
        ]);
        let error = plan_for(&weather(), "weather", None, &all(), &given, &mut NoOne).unwrap_err();
        assert!(
            error.contains("one of metric, imperial, not \"kelvin\""),
            "{error}"
        );
        let given = BTreeMap::from([("CITY".to_owned(), "Oslo".to_owned())]);
        let error = plan_for(
            &weather(),
            "weather",
            None,
            &all(),
            &given,
            &mut Answers::default(),
        )
        .unwrap_err();
        assert!(
            error.contains("needs values") || error.contains("--set CITY"),
            "{error}"
        );
    }

    #[test]
    fn packages_that_cannot_run_here_are_passed_over_or_refused_clearly() {
        let none = Runtimes::default();
        let error =
            plan_for(&weather(), "w", None, &none, &BTreeMap::new(), &mut NoOne).unwrap_err();
        assert!(
            error.contains("npx is not on PATH") && error.contains("mcpb"),
            "{error}"
        );
        let error = plan_for(
            &weather(),
            "w",
            Some("pypi"),
            &all(),
            &BTreeMap::new(),
            &mut NoOne,
        )
        .unwrap_err();
        assert!(
            error.contains("offers no pypi (it offers mcpb, npm)"),
            "{error}"
        );
        let image = listed(json!({"name": "a.b/c", "version": "1", "packages": [
            {"registryType": "oci", "identifier": "ghcr.io/a/c:1", "transport": {"type": "stdio"},
             "environmentVariables": [{"name": "TOKEN", "value": "fixed"}]}]}));
        let error = plan_for(&image, "c", None, &none, &BTreeMap::new(), &mut NoOne).unwrap_err();
        assert!(error.contains("no container runtime"), "{error}");
        let planned = plan_for(&image, "c", None, &all(), &BTreeMap::new(), &mut NoOne).unwrap();
        assert_eq!(
            planned.server.args,
            ["run", "-i", "--rm", "-e", "TOKEN", "ghcr.io/a/c:1"]
        );
        let python = listed(json!({"name": "a.b/t", "version": "1", "packages": [
            {"registryType": "pypi", "identifier": "mcp-server-time", "version": "2026.1.26", "transport": {"type": "stdio"}}]}));
        let pipx_only = Runtimes {
            pipx: true,
            ..Runtimes::default()
        };
        let planned =
            plan_for(&python, "t", None, &pipx_only, &BTreeMap::new(), &mut NoOne).unwrap();
        assert_eq!(
            planned.server.args,
            [
                "run",
                "--spec",
                "mcp-server-time==2026.1.26",
                "mcp-server-time"
            ]
        );
        assert!(
            planned.how.contains("uvx is not on PATH"),
            "{}",
            planned.how
        );
    }

    #[test]
    fn what_the_registry_sends_cannot_reach_a_command_line_as_something_else() {
        for (identifier, version) in [
            ("--call=sh", "1"),
            ("@x/y", "^1.0"),
            ("ok", "-rf"),
            ("a b", "1"),
        ] {
            let bad = listed(json!({"name": "a.b/c", "version": "1", "packages": [
                {"registryType": "npm", "identifier": identifier, "version": version, "transport": {"type": "stdio"}}]}));
            assert!(
                plan_for(&bad, "c", None, &all(), &BTreeMap::new(), &mut NoOne).is_err(),
                "{identifier} {version}"
            );
        }
        let reads_env = listed(json!({"name": "a.b/c", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "c", "version": "1", "transport": {"type": "stdio"},
             "packageArguments": [{"type": "positional", "value": "${GITHUB_TOKEN}"}]}]}));
        let error =
            plan_for(&reads_env, "c", None, &all(), &BTreeMap::new(), &mut NoOne).unwrap_err();
        assert!(error.contains("expand from your environment"), "{error}");
        let not_a_flag = listed(json!({"name": "a.b/c", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "c", "version": "1", "transport": {"type": "stdio"},
             "packageArguments": [{"type": "named", "name": "rm -rf", "value": "x"}]}]}));
        let error =
            plan_for(&not_a_flag, "c", None, &all(), &BTreeMap::new(), &mut NoOne).unwrap_err();
        assert!(error.contains("not a command-line flag"), "{error}");
    }

    #[test]
    fn a_remote_gets_its_url_variables_and_secret_headers() {
        let remote = listed(
            json!({"name": "com.example/tenant", "version": "1", "remotes": [{
                "type": "streamable-http", "url": "https://{tenant}.example.com/mcp",
                "variables": {"tenant": {"isRequired": true}},
                "headers": [{"name": "Authorization", "value": "Bearer {token}",
                             "variables": {"token": {"isSecret": true, "isRequired": true}}}]
            }]}),
        );
        let given = BTreeMap::from([
            ("tenant".to_owned(), "acme".to_owned()),
            ("token".to_owned(), "t0k".to_owned()),
        ]);
        let planned = plan_for(
            &remote,
            "tenant",
            None,
            &Runtimes::default(),
            &given,
            &mut NoOne,
        )
        .unwrap();
        assert_eq!(
            planned.server.url.as_deref(),
            Some("https://acme.example.com/mcp")
        );
        assert_eq!(
            planned.server.headers["Authorization"],
            "Bearer ${secret:tenant/token}"
        );
        assert_eq!(
            planned.secrets,
            [("tenant/token".to_owned(), "t0k".to_owned())]
        );
        let given = BTreeMap::from([
            ("tenant".to_owned(), "evil.com/x?".to_owned()),
            ("token".to_owned(), "t".to_owned()),
        ]);
        // The URL still parses, but the host is the person's own choice; only `${` is refused.
        assert!(
            plan_for(
                &remote,
                "tenant",
                None,
                &Runtimes::default(),
                &given,
                &mut NoOne
            )
            .is_ok()
        );
    }
}
