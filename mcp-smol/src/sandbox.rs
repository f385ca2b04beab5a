//! The sandbox a server can be started in (Linux): a network namespace of its own with only
//! loopback, and Landlock rules on the filesystem. Both are set up in the forked child before
//! `exec`, so they hold for the server and everything it starts: namespaces and Landlock
//! domains are inherited, and cannot be left.
//!
//! What can fail is found out in the parent first (Landlock rulesets are built there; the
//! namespace switches are read), so the message says what is missing; what is left for the
//! child is a few system calls. A sandbox that cannot be set up never means a server started
//! without it: the spawn fails.
//!
//! `MCP_SMOL_SANDBOX_MISSING` (`landlock`, `userns`, comma-separated) makes this code act as
//! on a kernel without them, so that path can be tested; nothing else reads it.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, path_beneath_rules,
};

/// What a server may reach. The default confines nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// Runs the server in a network namespace of its own whose only interface is loopback
    /// (up): it cannot reach any other host, nor ports on this host's loopback. Through an
    /// unprivileged user namespace when we are not root. Launchers are told to stay offline
    /// (`npm_config_offline`, `UV_OFFLINE`, `PIP_NO_INDEX`) unless the command's env says
    /// otherwise.
    pub isolate_network: bool,
    /// With Landlock: the server may read and write only beneath these paths and a private
    /// temporary folder (`TMPDIR`), and read (and run) only beneath them and the system's
    /// folders (`/usr`, `/lib`, `/lib64`, `/bin`, `/sbin`, `/etc`, `/proc`, `/dev`, `/sys`),
    /// its program's install folder and that of the interpreter its `#!` line names (links
    /// followed: a venv's `python` reaches the interpreter it links to), and the launchers'
    /// caches (`~/.npm`, `~/.cache/uv`, `~/.cache/pip`, or where their variables put them).
    /// An empty list leaves only the temporary folder writable. `None` does not confine the
    /// filesystem.
    pub filesystem: Option<Vec<PathBuf>>,
}

/// Set in the environment of a server whose network is cut, for the launchers it may run:
/// without them `npx` and `uvx` spend a minute retrying DNS before they give up, while offline
/// they run what is installed or cached at once (or fail at once). The config's own values win.
pub(crate) const OFFLINE_SWITCHES: &[(&str, &str)] = &[
    ("npm_config_offline", "true"),
    ("UV_OFFLINE", "1"),
    ("PIP_NO_INDEX", "1"),
];

/// Read-only for every confined server: what programs need to load and run.
const SYSTEM_FOLDERS: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/dev", "/sys",
];

/// The highest Landlock ABI whose rights we ask for; older kernels get what they offer, as
/// long as they offer Landlock at all.
const ABI_WANTED: ABI = ABI::V6;

/// A sandbox made ready in the parent, to be entered by the child.
#[derive(Debug)]
pub(crate) struct Prepared {
    network: Option<UserMaps>,
    ruleset: Option<RulesetCreated>,
    /// The private temporary folder, removed when the server's group is gone.
    pub(crate) temporary: Option<TempDir>,
    /// What the server may read and run, for the message when its start is refused.
    readable: Vec<PathBuf>,
}

/// What a process that is not root writes to map itself into a new user namespace.
#[derive(Debug)]
struct UserMaps {
    /// `None` when we are root and need no user namespace.
    maps: Option<(CString, CString)>,
}

/// Checks what `sandbox` needs and builds it for `program`, run with `env` over ours; `Err`
/// says what is missing.
pub(crate) fn prepare(
    sandbox: &Sandbox,
    program: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Prepared, String> {
    let missing = std::env::var("MCP_SMOL_SANDBOX_MISSING").unwrap_or_default();
    let forced = |what: &str| missing.split(',').any(|m| m.trim() == what);
    let network = if sandbox.isolate_network {
        Some(user_maps(forced("userns"))?)
    } else {
        None
    };
    let mut readable = Vec::new();
    let (ruleset, temporary) = match &sandbox.filesystem {
        Some(paths) => {
            let temporary = TempDir::new()?;
            readable = (SYSTEM_FOLDERS.iter().map(PathBuf::from))
                .chain(program_folders(program, env))
                .chain(launcher_caches(env))
                // Landlock cannot name what does not exist (a cache never made, a system
                // folder this distribution lacks), and the message should not either.
                .filter(|path| path.exists())
                .collect();
            let ruleset = ruleset(paths, &readable, &temporary.0, forced("landlock"))?;
            readable.extend(paths.iter().cloned());
            (Some(ruleset), Some(temporary))
        }
        None => (None, None),
    };
    Ok(Prepared {
        network,
        ruleset,
        temporary,
        readable,
    })
}

/// Why the spawn of `program` failed with `error` inside the sandbox: a refused `exec` names
/// what the server may run.
pub(crate) fn refused(
    prepared: Option<&Prepared>,
    program: &Path,
    error: &std::io::Error,
) -> String {
    let readable = prepared.map(|p| p.readable.as_slice()).unwrap_or_default();
    if error.kind() != std::io::ErrorKind::PermissionDenied || readable.is_empty() {
        return format!("{error} (while entering its sandbox)");
    }
    let mut runs = program.display().to_string();
    if let Some(interpreter) = interpreter(program, &BTreeMap::new()) {
        runs.push_str(&format!(" (run by {})", interpreter.display()));
    }
    let allowed: Vec<String> = readable.iter().map(|p| p.display().to_string()).collect();
    format!(
        "the sandbox refused to run {runs}: {error}. Under `filesystem` a server may read and \
         run only beneath {}; add the folder of what it runs to `filesystem`",
        allowed.join(", ")
    )
}

fn user_maps(forced_missing: bool) -> Result<UserMaps, String> {
    let refused = "network = false needs a network namespace of its own, and this kernel refuses unprivileged user namespaces";
    if forced_missing {
        return Err(format!("{refused} (MCP_SMOL_SANDBOX_MISSING)"));
    }
    if !Path::new("/proc/self/ns/net").exists() {
        return Err("network = false needs network namespaces, which this kernel lacks".to_owned());
    }
    let (uid, gid) = (rustix::process::geteuid(), rustix::process::getegid());
    if uid.is_root() {
        return Ok(UserMaps { maps: None });
    }
    let switch = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|text| text.trim() == "0")
    };
    let off = switch("/proc/sys/user/max_user_namespaces") == Some(true)
        || switch("/proc/sys/kernel/unprivileged_userns_clone") == Some(true);
    if off {
        return Err(refused.to_owned());
    }
    // Mapped to itself, so the server keeps its uid and, after `exec`, no capabilities.
    let map = |id: u32| CString::new(format!("{id} {id} 1")).unwrap_or_default();
    Ok(UserMaps {
        maps: Some((map(uid.as_raw()), map(gid.as_raw()))),
    })
}

fn ruleset(
    paths: &[PathBuf],
    readable: &[PathBuf],
    temporary: &Path,
    forced_missing: bool,
) -> Result<RulesetCreated, String> {
    let missing = |why: String| {
        format!("filesystem = [...] needs Landlock, which this kernel does not offer ({why})")
    };
    if forced_missing {
        return Err(missing("MCP_SMOL_SANDBOX_MISSING".to_owned()));
    }
    let read = AccessFs::from_read(ABI_WANTED);
    let all = AccessFs::from_all(ABI_WANTED);
    let writable = paths.iter().cloned().chain([temporary.to_owned()]);
    Ruleset::default()
        // Landlock itself is a must; the rights of later ABIs are taken where offered.
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| {
            ruleset
                .set_compatibility(CompatLevel::BestEffort)
                .handle_access(all)
        })
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(readable.iter(), read)))
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(writable, all)))
        // Programs write to /dev/null freely.
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(["/dev/null"], all)))
        .map_err(|error| missing(error.to_string()))
}

/// The install folders of the program and of the interpreter its `#!` line names, at every
/// step of their links (a venv's `bin/python` links into pyenv's or uv's interpreters).
fn program_folders(program: &Path, env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = Vec::new();
    let programs = std::iter::once(program.to_owned()).chain(interpreter(program, env));
    for step in programs.flat_map(|program| link_chain(&program)) {
        // Where this step is, its folder's links resolved but not its own.
        let located = step
            .parent()
            .and_then(|dir| std::fs::canonicalize(dir).ok());
        let located = located
            .zip(step.file_name())
            .map(|(dir, name)| dir.join(name));
        if let Some(folder) = located.as_deref().and_then(prefix)
            && !folders.contains(&folder)
        {
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
    let path = variable(env, "PATH");
    std::env::split_paths(&path.unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Variable `key` as the server will see it: the command's `env` over ours.
fn variable(env: &BTreeMap<String, String>, key: &str) -> Option<String> {
    (env.get(key).cloned()).or_else(|| std::env::var(key).ok())
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

/// A private folder of our own in the system's temporary folder, removed on drop.
#[derive(Debug)]
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "mcp-smol-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|error| format!("cannot make {}: {error}", path.display()))?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Enters the sandbox in the child, between `fork` and `exec`.
///
/// The one place with unsafe code in this crate: `pre_exec` is unsafe because the closure
/// runs in a forked copy of a possibly multi-threaded process, where only async-signal-safe
/// work is sound (no allocation, no locks another thread may have held).
#[allow(unsafe_code)]
pub(crate) fn enter_in_child(command: &mut std::process::Command, prepared: &mut Prepared) {
    use std::os::unix::process::CommandExt;
    let network = prepared.network.take();
    let mut ruleset = prepared.ruleset.take();
    let closure = move || -> std::io::Result<()> {
        if let Some(network) = &network {
            enter_network(network)?;
        }
        if let Some(ruleset) = ruleset.take() {
            ruleset.restrict_self().map_err(|_| {
                std::io::Error::from_raw_os_error(rustix::io::Errno::PERM.raw_os_error())
            })?;
        }
        Ok(())
    };
    // SAFETY: the closure only makes system calls on data prepared before the fork: unshare,
    // open/write/close of /proc files named by C strings already built, a netlink socket fed
    // a fixed-size message on the stack, and Landlock's prctl and restrict_self on a ruleset
    // built in the parent (that call allocates nothing, and its error carries only errno).
    // Nothing allocates or takes a lock.
    unsafe { command.pre_exec(closure) };
}

/// A new network namespace (and user namespace, when not root) with loopback up.
#[allow(unsafe_code)]
fn enter_network(network: &UserMaps) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use rustix::thread::UnshareFlags;
    let flags = match network.maps {
        Some(_) => UnshareFlags::NEWUSER | UnshareFlags::NEWNET,
        None => UnshareFlags::NEWNET,
    };
    // SAFETY: only new namespaces are asked for; no file table or filesystem state that
    // Rust code holds references into is unshared.
    unsafe { rustix::thread::unshare_unsafe(flags)? };
    if let Some((uid_map, gid_map)) = &network.maps {
        let write = |path: &std::ffi::CStr, text: &[u8]| -> std::io::Result<()> {
            let file = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
            rustix::io::write(&file, text)?;
            Ok(())
        };
        write(c"/proc/self/setgroups", b"deny")?;
        write(c"/proc/self/uid_map", uid_map.as_bytes())?;
        write(c"/proc/self/gid_map", gid_map.as_bytes())?;
    }
    loopback_up()
}

/// Sets `lo` (index 1 in a new namespace) up with one rtnetlink `RTM_NEWLINK` request, and
/// reads the kernel's acknowledgement.
fn loopback_up() -> std::io::Result<()> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST_ACK: u16 = 1 | 4;
    const IFF_UP: u32 = 1;
    let socket = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        // NETLINK_ROUTE is protocol 0, which rustix spells `None`.
        None,
    )?;
    // struct nlmsghdr { len, type, flags, seq, pid } then struct ifinfomsg { family, pad,
    // type, index, flags, change }, in native byte order.
    let mut message = [0u8; 32];
    message[0..4].copy_from_slice(&32u32.to_ne_bytes());
    message[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
    message[6..8].copy_from_slice(&NLM_F_REQUEST_ACK.to_ne_bytes());
    message[8..12].copy_from_slice(&1u32.to_ne_bytes());
    message[20..24].copy_from_slice(&1i32.to_ne_bytes());
    message[24..28].copy_from_slice(&IFF_UP.to_ne_bytes());
    message[28..32].copy_from_slice(&IFF_UP.to_ne_bytes());
    rustix::io::write(&socket, &message)?;
    // The answer is an NLMSG_ERROR whose `error` (after its own header) is 0 or -errno.
    let mut answer = [0u8; 128];
    let read = rustix::io::read(&socket, &mut answer)?;
    let mut code = [0u8; 4];
    code.copy_from_slice(answer.get(16..20).filter(|_| read >= 20).unwrap_or(&[0; 4]));
    match i32::from_ne_bytes(code) {
        0 => Ok(()),
        negative => Err(std::io::Error::from_raw_os_error(-negative)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_folders_are_the_prefix_of_bin_and_node_modules() {
        let dir = std::env::temp_dir().join(format!("mcp-smol-install-{}", std::process::id()));
        let script = dir.join("lib/node_modules/pkg/dist/index.js");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "").unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/tool"), "").unwrap();
        let real = std::fs::canonicalize(&dir).unwrap();
        let none = BTreeMap::new();
        assert_eq!(program_folders(&script, &none), [real.join("lib")]);
        assert_eq!(program_folders(&dir.join("bin/tool"), &none), [real]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_scripts_interpreter_is_followed_through_its_links() {
        use std::os::unix::fs::symlink;
        let dir = std::env::temp_dir().join(format!("mcp-smol-venv-{}", std::process::id()));
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
            let folders = program_folders(&script, &env);
            assert!(folders.contains(&venv), "{shebang}: {folders:?}");
            assert!(folders.contains(&pyenv), "{shebang}: {folders:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
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
}
