//! What a sandboxed server may read and run besides its own `filesystem` paths, which folders
//! its walls hide, and what its environment says when it has a network namespace of its own. The host decides it, here,
//! where the server's command, its interpreter, the launchers' caches and the allowlist are
//! known, and passes it down in [`Sandbox::readable`](mcp_smol::Sandbox::readable) and the
//! server's environment; the adapter only applies it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcp_smol::ServerCommand;

use crate::config;

/// Read-only for every confined server: what programs need to load and run.
const SYSTEM_FOLDERS: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/dev", "/sys",
];

/// `command`, and when its filesystem is confined, what it may read and run filled in: the
/// system's folders, its program's install folder and that of the interpreter its `#!` line
/// names (links followed: a venv's `python` reaches the interpreter it links to), and the
/// launchers' caches (`~/.npm`, `~/.cache/uv`, `~/.cache/pip`, or where their variables put
/// them). Only folders that exist: Landlock cannot name the others, nor should a message.
///
/// Confined or not, the program's install folders and the launchers' caches stay reachable
/// beneath the folders its walls hide (a server built in `/tmp`, a venv beneath the runtime
/// folder, a `HOME` in `/tmp`): what it runs is kept. An install folder that is itself a
/// hidden folder (a program directly in `/tmp`) is not kept whole, which would undo the wall;
/// only the program's own files are.
pub(crate) fn with_readable(mut command: ServerCommand) -> ServerCommand {
    let Some(sandbox) = &command.sandbox else {
        return command;
    };
    let hidden: Vec<PathBuf> = (sandbox.hidden.iter())
        .filter_map(|folder| std::fs::canonicalize(folder).ok())
        .collect();
    let own: Vec<PathBuf> = program(&command)
        .map(|program| program_folders(&program, &command.env, &hidden))
        .unwrap_or_default();
    // The launchers write their caches at every start, so those stay too (a `HOME` beneath
    // `/tmp`); but never a cache that is a hidden folder or holds one (`npm_config_cache` set
    // to the runtime folder would bring back the daemon's socket).
    let caches: Vec<PathBuf> = (launcher_caches(&command.env).into_iter())
        .filter_map(|cache| std::fs::canonicalize(cache).ok())
        .filter(|cache| !hidden.iter().any(|folder| folder.starts_with(cache)))
        .collect();
    if let Some(sandbox) = &mut command.sandbox {
        if sandbox.filesystem.is_some() {
            sandbox.readable = (SYSTEM_FOLDERS.iter().map(PathBuf::from))
                .chain(own.iter().cloned())
                .chain(caches.iter().cloned())
                .filter(|path| path.exists())
                .collect();
        }
        sandbox.kept.extend(own.into_iter().chain(caches));
    }
    command
}

/// What every sandboxed server's mount namespace covers: where sockets live (`/tmp`, `/run`
/// with every `/run/user/UID`, `/var/run`, and the session's runtime folder wherever it is;
/// the daemons' socket folder is beneath the runtime folder or `/tmp`), and the state folders
/// of mcp-cli, ours and every user's (pins, tokens, logs). What the server may use beneath
/// them stays reachable (mcp-smol keeps its paths).
pub(crate) fn hidden_folders() -> Vec<PathBuf> {
    let env = |key: &str| std::env::var(key).ok();
    let runtime = env("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty());
    let own_state = crate::state::Folder::of_env(&env).logs();
    let homes = std::fs::read_dir("/home")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .chain([PathBuf::from("/root")]);
    let states = homes.map(|home| home.join(".local/state/mcp-cli"));
    ["/tmp", "/run", "/var/run"]
        .into_iter()
        .map(PathBuf::from)
        .chain(runtime.map(PathBuf::from))
        .chain(own_state.parent().map(Path::to_owned))
        .chain(states)
        .collect()
}

/// What stays reachable beneath [`hidden_folders`]: the folders `/etc/resolv.conf` links
/// into (systemd-resolved keeps it in `/run`), so that a server with the network can resolve.
pub(crate) fn kept_folders() -> Vec<PathBuf> {
    (link_chain(Path::new("/etc/resolv.conf"))
        .into_iter()
        .skip(1))
    .filter_map(|step| step.parent().map(Path::to_owned))
    .collect()
}

/// The environment a server in a network namespace of its own gets: each launcher whose
/// registry the allowlist does not admit told to stay offline (without that `npx` and `uvx`
/// spend a minute retrying before they give up, while offline they run what is installed or
/// cached at once, or fail at once), and with an allowlist the proxy, in both spellings
/// clients read. `NO_PROXY` keeps the namespace's own loopback names out of the proxy, except
/// those the allowlist names (they mean this machine's loopback, reached through it).
pub(crate) fn environment(sandbox: &config::Sandbox) -> BTreeMap<String, String> {
    let admitted = |hosts: &[&str]| {
        hosts.iter().all(|host| {
            let (name, port) = host.split_once(':').unwrap_or((host, "443"));
            let port = port.parse().unwrap_or(443);
            sandbox
                .allow
                .iter()
                .any(|pattern| pattern.admits(name, port))
        })
    };
    let mut env = BTreeMap::new();
    if !admitted(&config::REGISTRIES[..1]) {
        env.insert("npm_config_offline".to_owned(), "true".to_owned());
    }
    if !admitted(&config::REGISTRIES[1..]) {
        env.insert("UV_OFFLINE".to_owned(), "1".to_owned());
        env.insert("PIP_NO_INDEX".to_owned(), "1".to_owned());
    }
    if sandbox.allow.is_empty() {
        return env;
    }
    let proxy = format!("http://127.0.0.1:{}", super::proxy::PROXY_PORT);
    let local: Vec<&str> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .filter(|name| !sandbox.allow.iter().any(|p| p.is_loopback_name(name)))
        .collect();
    let no_proxy = local.join(",");
    for (key, value) in [
        ("HTTP_PROXY", &proxy),
        ("HTTPS_PROXY", &proxy),
        ("ALL_PROXY", &proxy),
        ("NO_PROXY", &no_proxy),
    ] {
        env.insert(key.to_ascii_lowercase(), value.clone());
        env.insert(key.to_owned(), value.clone());
    }
    env
}

/// The file `command` runs: a path as given (beneath its `cwd` when relative), a bare name
/// found on the server's `PATH`. `None` when there is none; the spawn then says so.
fn program(command: &ServerCommand) -> Option<PathBuf> {
    if !command.program.contains('/') {
        return on_path(&command.program, &command.env);
    }
    let path = PathBuf::from(&command.program);
    Some(match &command.cwd {
        Some(cwd) if path.is_relative() => cwd.join(path),
        _ => path,
    })
}

/// The install folders of the program and of the interpreter its `#!` line names, at every
/// step of their links (a venv's `bin/python` links into pyenv's or uv's interpreters); where
/// a folder is one of `hidden` (canonical paths), the step's file instead.
fn program_folders(
    program: &Path,
    env: &BTreeMap<String, String>,
    hidden: &[PathBuf],
) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = Vec::new();
    let programs = std::iter::once(program.to_owned()).chain(interpreter(program, env));
    for step in programs.flat_map(|program| link_chain(&program)) {
        // Where this step is, its folder's links resolved but not its own.
        let located = step
            .parent()
            .and_then(|dir| std::fs::canonicalize(dir).ok());
        let Some(located) = located
            .zip(step.file_name())
            .map(|(dir, name)| dir.join(name))
        else {
            continue;
        };
        let folder = match prefix(&located) {
            Some(folder) if hidden.contains(&folder) => located,
            Some(folder) => folder,
            None => continue,
        };
        if !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    folders
}

/// `path`, then each file its links lead to, in order.
fn link_chain(path: &Path) -> Vec<PathBuf> {
    let mut chain = vec![path.to_owned()];
    // As the kernel, give up on a loop after 40 links.
    while chain.len() < 40 {
        let last = &chain[chain.len() - 1];
        let Ok(target) = std::fs::read_link(last) else {
            break;
        };
        let next = last.parent().unwrap_or(Path::new("/")).join(target);
        chain.push(next);
    }
    chain
}

/// The interpreter a script's `#!` line names; through `env NAME`, NAME found on `PATH`.
fn interpreter(program: &Path, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let interpreter = PathBuf::from(words.next()?);
    if interpreter.file_name().is_none_or(|name| name != "env") {
        return Some(interpreter);
    }
    let name = words.find(|word| !word.starts_with('-'))?;
    on_path(name, env)
}

/// The file `name` in the first folder of the server's `PATH` that has one.
fn on_path(name: &str, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let path = variable(env, "PATH");
    std::env::split_paths(&path.unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Variable `key` as the server will see it: the command's `env` over ours.
fn variable(env: &BTreeMap<String, String>, key: &str) -> Option<String> {
    (env.get(key).cloned()).or_else(|| std::env::var(key).ok())
}

/// The folder a launcher confined by `filesystem` needed and was refused, when its stderr
/// says so: npm's `ENOTCACHED` (run offline, it could not write its cache to find the package
/// there), or a refused write naming its cache. `npx` writes its cache at every start, which
/// only readable is not enough for; the person reads npm's own words, not why.
pub(crate) fn refused_cache(command: &config::Command, stderr: &[String]) -> Option<PathBuf> {
    let confined = command.sandbox.as_ref()?.filesystem.as_ref()?;
    let launcher = Path::new(&command.program).file_name()?;
    if launcher != "npx" && launcher != "npm" {
        return None;
    }
    let cache = launcher_caches(&command.env).into_iter().next()?;
    if confined.iter().any(|allowed| cache.starts_with(allowed)) {
        return None;
    }
    let shown = cache.display().to_string();
    let refused = |line: &&String| {
        line.contains("ENOTCACHED")
            || (["EACCES", "EROFS", "EPERM"]
                .iter()
                .any(|code| line.contains(code))
                && line.contains(&shown))
    };
    stderr.iter().any(|line| refused(&line)).then_some(cache)
}

/// Where npm, uv and pip keep what they download: launchers run from there.
fn launcher_caches(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let var = |key: &str| {
        variable(env, key)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    let home = var("HOME");
    let cache = var("XDG_CACHE_HOME").or_else(|| home.as_ref().map(|home| home.join(".cache")));
    let under = |base: &Option<PathBuf>, name: &str| base.as_ref().map(|base| base.join(name));
    [
        var("npm_config_cache").or_else(|| under(&home, ".npm")),
        var("UV_CACHE_DIR").or_else(|| under(&cache, "uv")),
        var("PIP_CACHE_DIR").or_else(|| under(&cache, "pip")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The folder a file at `real` (a path without links) is installed in: its own, or the
/// prefix above a `bin` folder or a `node_modules` tree, where its libraries are.
fn prefix(real: &Path) -> Option<PathBuf> {
    let topmost_modules = real
        .ancestors()
        .filter(|dir| dir.file_name().is_some_and(|name| name == "node_modules"))
        .last();
    if let Some(modules) = topmost_modules {
        return modules.parent().map(Path::to_owned);
    }
    let folder = real.parent()?;
    match folder.file_name() {
        Some(name) if name == "bin" => folder.parent().map(Path::to_owned),
        _ => Some(folder.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_folders_are_the_prefix_of_bin_and_node_modules() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-install-{}", std::process::id()));
        let script = dir.join("lib/node_modules/pkg/dist/index.js");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "").unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/tool"), "").unwrap();
        let real = std::fs::canonicalize(&dir).unwrap();
        let none = BTreeMap::new();
        assert_eq!(program_folders(&script, &none, &[]), [real.join("lib")]);
        assert_eq!(
            program_folders(&dir.join("bin/tool"), &none, &[]),
            std::slice::from_ref(&real)
        );
        // An install folder the walls hide is not given whole: the program's file is.
        let hidden = std::slice::from_ref(&real);
        let tool = real.join("tool");
        std::fs::write(&tool, "").unwrap();
        assert_eq!(program_folders(&tool, &none, hidden), [tool]);
        assert_eq!(program_folders(&script, &none, hidden), [real.join("lib")]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_scripts_interpreter_is_followed_through_its_links() {
        use std::os::unix::fs::symlink;
        let dir = std::env::temp_dir().join(format!("mcp-cli-venv-{}", std::process::id()));
        let python = dir.join("pyenv/versions/3.12/bin/python3.12");
        std::fs::create_dir_all(python.parent().unwrap()).unwrap();
        std::fs::write(&python, "").unwrap();
        std::fs::create_dir_all(dir.join("venv/bin")).unwrap();
        symlink(&python, dir.join("venv/bin/python")).unwrap();
        let real = std::fs::canonicalize(&dir).unwrap();
        let venv = real.join("venv");
        let pyenv = real.join("pyenv/versions/3.12");
        let script = dir.join("venv/bin/server");
        let shebangs = [
            format!("#!{}/bin/python\n", venv.display()),
            // `env NAME`, NAME looked up on the server's PATH.
            "#!/usr/bin/env -S python -u\n".to_owned(),
        ];
        let env = BTreeMap::from([("PATH".to_owned(), venv.join("bin").display().to_string())]);
        for shebang in shebangs {
            std::fs::write(&script, format!("{shebang}print()\n")).unwrap();
            let folders = program_folders(&script, &env, &[]);
            assert!(folders.contains(&venv), "{shebang}: {folders:?}");
            assert!(folders.contains(&pyenv), "{shebang}: {folders:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_confined_npx_refused_its_cache_is_told_which_folder() {
        let mut command = config::Command::new("/usr/bin/npx");
        command.env.insert("HOME".to_owned(), "/home/u".to_owned());
        command.sandbox = Some(config::Sandbox {
            isolate_network: true,
            allow: Vec::new(),
            filesystem: Some(vec![PathBuf::from("/work")]),
        });
        let said = |lines: &[&str]| {
            lines
                .iter()
                .map(|line| (*line).to_owned())
                .collect::<Vec<_>>()
        };
        let enotcached = said(&[
            "npm error code ENOTCACHED",
            "npm error request to ... failed",
        ]);
        assert_eq!(
            refused_cache(&command, &enotcached),
            Some(PathBuf::from("/home/u/.npm"))
        );
        let eacces = said(&["npm error EACCES: permission denied, mkdir '/home/u/.npm/_cacache'"]);
        assert_eq!(
            refused_cache(&command, &eacces),
            Some(PathBuf::from("/home/u/.npm"))
        );
        assert_eq!(
            refused_cache(&command, &said(&["Error: no such tool"])),
            None
        );
        // Listed, it was not the cache.
        let mut listed = command.clone();
        listed.sandbox.as_mut().unwrap().filesystem = Some(vec![PathBuf::from("/home/u")]);
        assert_eq!(refused_cache(&listed, &enotcached), None);
        // Not confined, or not a launcher: npm's words are the whole story.
        let mut open = command.clone();
        open.sandbox = None;
        assert_eq!(refused_cache(&open, &enotcached), None);
        let mut node = command;
        node.program = "node".to_owned();
        assert_eq!(refused_cache(&node, &enotcached), None);
    }

    #[test]
    fn launcher_caches_follow_their_variables() {
        let env = BTreeMap::from([
            ("HOME".to_owned(), "/home/u".to_owned()),
            ("XDG_CACHE_HOME".to_owned(), "/c".to_owned()),
            ("UV_CACHE_DIR".to_owned(), "/uv".to_owned()),
            ("npm_config_cache".to_owned(), String::new()),
            ("PIP_CACHE_DIR".to_owned(), String::new()),
        ]);
        let caches = launcher_caches(&env);
        let expected = ["/home/u/.npm", "/uv", "/c/pip"].map(PathBuf::from);
        assert_eq!(caches, expected);
    }

    #[test]
    fn launchers_stay_offline_unless_their_registry_is_admitted() {
        let sandbox = |hosts: &[&str]| config::Sandbox {
            isolate_network: true,
            allow: (hosts.iter())
                .map(|host| config::HostPattern::parse(host).unwrap())
                .collect(),
            filesystem: None,
        };
        let keys = |hosts: &[&str]| environment(&sandbox(hosts)).into_keys().collect::<Vec<_>>();
        let offline = ["PIP_NO_INDEX", "UV_OFFLINE", "npm_config_offline"];
        assert_eq!(keys(&[]), offline);
        let proxied = keys(&["example.com"]);
        assert!(offline.iter().all(|key| proxied.contains(&key.to_string())));
        assert!(proxied.contains(&"HTTPS_PROXY".to_owned()));
        let npm = keys(&["*.npmjs.org:443"]);
        assert!(!npm.contains(&"npm_config_offline".to_owned()), "{npm:?}");
        assert!(npm.contains(&"UV_OFFLINE".to_owned()), "{npm:?}");
        let all = keys(config::REGISTRIES);
        assert!(
            offline.iter().all(|key| !all.contains(&key.to_string())),
            "{all:?}"
        );
    }

    #[test]
    fn no_proxy_keeps_loopback_names_the_list_does_not_claim() {
        let allow = vec![config::HostPattern::parse("localhost:8080").unwrap()];
        let sandbox = config::Sandbox {
            isolate_network: true,
            allow,
            filesystem: None,
        };
        let env = environment(&sandbox);
        assert_eq!(env["NO_PROXY"], "127.0.0.1,::1");
        assert_eq!(env["no_proxy"], "127.0.0.1,::1");
        assert_eq!(env["all_proxy"], "http://127.0.0.1:3128");
    }
}
