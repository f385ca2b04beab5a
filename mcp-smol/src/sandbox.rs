//! The sandbox a server can be started in (Linux): a mount and PID namespace of its own (the
//! host's chosen folders covered, a `/proc` of its own processes only, a small init as PID 1
//! whose exit takes the whole namespace down), optionally a network namespace with only
//! loopback, Landlock rules on the filesystem, and Landlock's signal and abstract socket
//! scopes where the kernel has them. All is set up in forked children before `exec`, so it
//! holds for the server and everything it starts: namespaces and Landlock domains are
//! inherited, and cannot be left.
//!
//! The processes: the child we spawn unshares the namespaces and stays outside the new PID
//! namespace, waiting (its exit is the server's, with its status); its child is PID 1 there,
//! raises the walls (mounts), enters Landlock and forks the server, then reaps orphans until
//! the server exits; the server execs. The two waiters are copies of our process that never
//! exec: they close every descriptor and make only system calls.
//!
//! What can fail is found out in the parent first (Landlock rulesets are built there; the
//! namespace switches are read), so the message says what is missing; what is left for the
//! child is a few system calls. A sandbox that cannot be set up never means a server started
//! without it: the spawn fails.
//!
//! `MCP_SMOL_SANDBOX_MISSING` (`landlock`, `userns`, `mountns`, `pidns`, `scope`,
//! comma-separated) makes this code act as on a kernel without them, so that path can be tested; nothing else reads it.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::net::{AddressFamily, SocketFlags, SocketType};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope, path_beneath_rules,
};
use rustix::thread::CapabilitySet;

/// What a server may reach. The default confines nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// Runs the server in a network namespace of its own whose only interface is loopback
    /// (up): it cannot reach any other host, nor ports on this host's loopback. Through an
    /// unprivileged user namespace when we are not root.
    pub isolate_network: bool,
    /// Under [`isolate_network`](Self::isolate_network): a TCP listener on `127.0.0.1:PORT`
    /// inside the server's namespace, made before the server runs and handed to the host
    /// ([`Client::take_proxy_listener`](crate::Client::take_proxy_listener)), which serves
    /// a proxy on it: the one way out of the namespace, the host's to police.
    pub proxy_port: Option<u16>,
    /// With Landlock: the server may read and write only beneath these paths and a private
    /// temporary folder (`TMPDIR`), and read (and run) only beneath them and
    /// [`readable`](Self::readable). An empty list leaves only the temporary folder writable.
    /// `None` does not confine the filesystem.
    pub filesystem: Option<Vec<PathBuf>>,
    /// Under [`filesystem`](Self::filesystem), what the server may also read and run: what
    /// programs need to load (the system's folders), its install folder, its interpreter's,
    /// the launchers' caches. The host decides, knowing the server; applied as given (a path
    /// that cannot be opened grants nothing).
    pub readable: Vec<PathBuf>,
    /// Folders covered by an empty, private temporary filesystem in the server's mount
    /// namespace, so that nothing in them (sockets above all: a daemon's, an SSH agent's, a
    /// session bus) can be reached, even by connecting to a path. What the server may use
    /// beneath them stays as it is: its `filesystem` and [`readable`](Self::readable) paths,
    /// its temporary folder, its working directory and [`kept`](Self::kept). The host
    /// decides (runtime and state folders, `/tmp`, `/run`); paths that do not exist are
    /// skipped.
    pub hidden: Vec<PathBuf>,
    /// Beneath [`hidden`](Self::hidden) folders, what else stays reachable as it is (a
    /// resolver's configuration that `/etc/resolv.conf` links to).
    pub kept: Vec<PathBuf>,
}

/// The highest Landlock ABI whose rights we ask for; older kernels get what they offer, as
/// long as they offer Landlock at all.
/// From ABI 9 this includes connecting to pathname Unix sockets, which Landlock then denies
/// outside the writable paths.
const ABI_WANTED: ABI = ABI::V9;

/// A sandbox made ready in the parent, to be entered by the child.
#[derive(Debug)]
pub(crate) struct Prepared {
    namespaces: Namespaces,
    /// The port of the proxy's listener and the channel it comes back over: the child's end
    /// (sent on) and ours.
    proxy: Option<(u16, OwnedFd, OwnedFd)>,
    /// Filesystem rules and scopes, or scopes alone; `None` when the kernel has neither.
    ruleset: Option<RulesetCreated>,
    /// Under `filesystem`, what the server may do in its own `/proc` (mounted in the child,
    /// so its rule is added there).
    proc_access: Option<BitFlags<AccessFs>>,
    walls: Walls,
    /// The private temporary folder, removed when the server's group is gone.
    pub(crate) temporary: Option<TempDir>,
    /// What the server may read and run, for the message when its start is refused.
    readable: Vec<PathBuf>,
}

/// The namespaces the child unshares.
#[derive(Debug)]
struct Namespaces {
    /// What a process that is not root writes to map itself into a new user namespace;
    /// `None` when we are root and need none.
    maps: Option<(CString, CString)>,
    network: bool,
}

/// The mounts that make the server's view, in the order they are made.
#[derive(Debug, Default)]
struct Walls {
    steps: Vec<Wall>,
    /// One slot per [`Wall::Keep`]: its tree, taken in the child before anything is covered.
    trees: Vec<Option<OwnedFd>>,
    /// The working directory, entered again once the walls stand (the one inherited would
    /// still see beneath them).
    cwd: Option<CString>,
    /// Root without a user namespace: the capabilities that would undo the walls (mounts,
    /// file handles, devices, modules) are dropped from the server's bounding set.
    drop_capabilities: bool,
}

#[derive(Debug)]
enum Wall {
    /// An empty temporary filesystem over this folder.
    Cover(CString),
    /// This path, as it was, mounted back beneath a cover: its folders (`ancestors`) made in
    /// the cover first, then a file or folder to mount on.
    Keep {
        tree: usize,
        path: CString,
        ancestors: Vec<CString>,
        file: bool,
    },
}

/// The capabilities a root server loses: with them it could unmount its walls, reach files
/// by handle past them, make device nodes or load kernel modules.
const WALL_BREAKERS: [CapabilitySet; 6] = [
    CapabilitySet::SYS_ADMIN,
    CapabilitySet::DAC_READ_SEARCH,
    CapabilitySet::MKNOD,
    CapabilitySet::SYS_MODULE,
    CapabilitySet::SYS_RAWIO,
    CapabilitySet::BPF,
];

/// Checks what `sandbox` needs and builds it; `Err` says what is missing. `cwd` is the
/// server's working directory (ours when `None`).
pub(crate) fn prepare(sandbox: &Sandbox, cwd: Option<&Path>) -> Result<Prepared, String> {
    let missing = std::env::var("MCP_SMOL_SANDBOX_MISSING").unwrap_or_default();
    let forced = |what: &str| missing.split(',').any(|m| m.trim() == what);
    let namespaces = namespaces(sandbox.isolate_network, &forced)?;
    let proxy = match sandbox.proxy_port {
        Some(_) if !sandbox.isolate_network => {
            return Err("a proxy port needs a network namespace of its own".to_owned());
        }
        Some(port) => {
            let (ours, theirs) = rustix::net::socketpair(
                AddressFamily::UNIX,
                SocketType::DGRAM,
                SocketFlags::CLOEXEC,
                None,
            )
            .map_err(|error| format!("no channel for the proxy's listener: {error}"))?;
            Some((port, theirs, ours))
        }
        None => None,
    };
    let mut readable = Vec::new();
    let scoped = !forced("scope") && !forced("landlock");
    let (ruleset, temporary) = match &sandbox.filesystem {
        Some(paths) => {
            let temporary = TempDir::new()?;
            readable.clone_from(&sandbox.readable);
            let ruleset = ruleset(paths, &readable, &temporary.0, scoped, forced("landlock"))?;
            readable.extend(paths.iter().cloned());
            (Some(ruleset), Some(temporary))
        }
        None => (scoped.then(scopes_only).flatten(), None),
    };
    let proc_access = sandbox
        .filesystem
        .is_some()
        .then(|| AccessFs::from_read(ABI_WANTED));
    let cwd = cwd
        .map(Path::to_owned)
        .or_else(|| std::env::current_dir().ok());
    let temporary_path = temporary.as_ref().map(|t| t.0.as_path());
    let mut walls = walls(sandbox, temporary_path, cwd.as_deref());
    walls.drop_capabilities = namespaces.maps.is_none();
    Ok(Prepared {
        namespaces,
        proxy,
        ruleset,
        proc_access,
        walls,
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
    let allowed: Vec<String> = readable.iter().map(|p| p.display().to_string()).collect();
    format!(
        "the sandbox refused to run {}: {error}. Under `filesystem` a server may read and run \
         only beneath {}; add the folder of what it runs to `filesystem`",
        program.display(),
        allowed.join(", ")
    )
}

/// The namespaces every sandbox gets (mount, PID, and network when asked), through a user
/// namespace when we are not root; `Err` names what the kernel lacks or refuses.
fn namespaces(network: bool, forced: &dyn Fn(&str) -> bool) -> Result<Namespaces, String> {
    let kinds = [
        ("mountns", "mnt", "a mount namespace"),
        ("pidns", "pid", "a PID namespace"),
    ];
    for (switch, file, what) in kinds {
        let lacks = |why: &str| {
            format!(
                "the sandbox needs {what} of its own (for its walls: no socket, process or \
                 /proc entry outside), which this kernel does not offer{why}"
            )
        };
        if forced(switch) {
            return Err(lacks(" (MCP_SMOL_SANDBOX_MISSING)"));
        }
        if !Path::new("/proc/self/ns").join(file).exists() {
            return Err(lacks(""));
        }
    }
    if network && !Path::new("/proc/self/ns/net").exists() {
        return Err("network = false needs network namespaces, which this kernel lacks".to_owned());
    }
    let refused = "the sandbox needs namespaces of its own (mount, PID, and network under \
                   `network`), and this kernel refuses unprivileged user namespaces";
    if forced("userns") {
        return Err(format!("{refused} (MCP_SMOL_SANDBOX_MISSING)"));
    }
    let (uid, gid) = (rustix::process::geteuid(), rustix::process::getegid());
    if uid.is_root() {
        return Ok(Namespaces {
            maps: None,
            network,
        });
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
    Ok(Namespaces {
        maps: Some((map(uid.as_raw()), map(gid.as_raw()))),
        network,
    })
}

/// Landlock's scopes: no signal to a process outside the server's domain, no connection to
/// an abstract Unix socket made outside it.
fn scopes() -> BitFlags<Scope> {
    Scope::Signal | Scope::AbstractUnixSocket
}

fn ruleset(
    paths: &[PathBuf],
    readable: &[PathBuf],
    temporary: &Path,
    scoped: bool,
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
        // Landlock itself is a must; the rights of later ABIs, and the scopes, are taken
        // where offered.
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| {
            ruleset
                .set_compatibility(CompatLevel::BestEffort)
                .handle_access(all)
        })
        .and_then(|ruleset| match scoped {
            true => ruleset.scope(scopes()),
            false => Ok(ruleset),
        })
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(readable.iter(), read)))
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(writable, all)))
        // Programs write to /dev/null freely.
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(["/dev/null"], all)))
        .map_err(|error| missing(error.to_string()))
}

/// A ruleset of scopes alone, for a server whose filesystem is not confined; `None` where
/// the kernel has no scopes (ABI 6), which the PID and network namespaces make up for.
fn scopes_only() -> Option<RulesetCreated> {
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .scope(scopes())
        .and_then(|ruleset| ruleset.create())
        .ok()
}

/// The mounts for `sandbox`: each hidden folder covered, and what the server may use beneath
/// one kept as it is (its paths, its temporary folder, its working directory), shallower
/// paths first so that a cover inside a kept folder comes after it.
fn walls(sandbox: &Sandbox, temporary: Option<&Path>, cwd: Option<&Path>) -> Walls {
    let real = |path: &PathBuf| std::fs::canonicalize(path).ok();
    let mut hidden: Vec<PathBuf> = sandbox.hidden.iter().filter_map(real).collect();
    hidden.retain(|path| path.parent().is_some());
    hidden.sort();
    hidden.dedup();
    let beneath_hidden = |path: &Path| hidden.iter().any(|folder| path.starts_with(folder));
    // Entered by its real path: the folders a `..` or a link passes through may be covered.
    let cwd = cwd.map(|cwd| std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned()));
    // The working directory is kept only beneath a hidden folder, not as one.
    let cwd_kept = cwd.clone().filter(|cwd| !hidden.contains(cwd));
    let wanted = (sandbox.filesystem.iter().flatten())
        .chain(&sandbox.readable)
        .chain(&sandbox.kept)
        .filter_map(real)
        .chain(temporary.map(Path::to_owned))
        .chain(cwd_kept);
    let mut kept: Vec<PathBuf> = wanted.filter(|path| beneath_hidden(path)).collect();
    kept.sort();
    kept.dedup();
    // One beneath another comes with it (its tree is taken whole).
    let mut outer: Vec<PathBuf> = Vec::new();
    for path in kept {
        if !outer.iter().any(|folder| path.starts_with(folder)) {
            outer.push(path);
        }
    }
    let c_string = |path: &Path| CString::new(path.as_os_str().as_encoded_bytes()).ok();
    let mut steps: Vec<(usize, Wall)> = Vec::new();
    for path in &hidden {
        if let Some(path_c) = c_string(path) {
            steps.push((path.components().count(), Wall::Cover(path_c)));
        }
    }
    for (tree, path) in outer.iter().enumerate() {
        let ancestors = (path.ancestors().skip(1))
            .filter(|folder| folder.parent().is_some())
            .filter_map(c_string)
            .collect::<Vec<_>>();
        let Some(path_c) = c_string(path) else {
            continue;
        };
        let keep = Wall::Keep {
            tree,
            path: path_c,
            ancestors: ancestors.into_iter().rev().collect(),
            file: !path.is_dir(),
        };
        // After a cover of the same depth: a kept hidden folder stays as it is.
        steps.push((path.components().count(), keep));
    }
    // Stable: at equal depth, covers stay before keeps.
    steps.sort_by_key(|(depth, _)| *depth);
    Walls {
        trees: outer.iter().map(|_| None).collect(),
        steps: steps.into_iter().map(|(_, wall)| wall).collect(),
        cwd: cwd.as_deref().and_then(c_string),
        drop_capabilities: false,
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
    let namespaces = std::mem::replace(
        &mut prepared.namespaces,
        Namespaces {
            maps: None,
            network: false,
        },
    );
    let proxy = (prepared.proxy.as_ref())
        .and_then(|(port, theirs, _)| Some((*port, theirs.try_clone().ok()?)));
    let mut ruleset = prepared.ruleset.take();
    let proc_access = prepared.proc_access;
    let mut walls = std::mem::take(&mut prepared.walls);
    let closure = move || -> std::io::Result<()> {
        enter_namespaces(&namespaces)?;
        if let Some((port, channel)) = &proxy {
            hand_over_listener(*port, channel)?;
        }
        // Our PID namespace's first process is its init; we stay outside and wait for it.
        if let Some(init) = fork()? {
            wait_for_init(init);
        }
        raise_walls(&mut walls)?;
        if let Some(mut ruleset) = ruleset.take() {
            let refused = |_| std::io::Error::from(rustix::io::Errno::PERM);
            if let Some(access) = proc_access {
                let proc = rustix::fs::open(
                    c"/proc",
                    rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )?;
                ruleset = ruleset
                    .add_rule(PathBeneath::new(proc, access))
                    .map_err(refused)?;
            }
            ruleset.restrict_self().map_err(refused)?;
        }
        if walls.drop_capabilities {
            for capability in WALL_BREAKERS {
                rustix::thread::remove_capability_from_bounding_set(capability)?;
            }
        }
        // Should our waiter be killed alone, its namespace goes with it.
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if let Some(server) = fork()? {
            reap_until(server);
        }
        // The server: on to `exec`.
        Ok(())
    };
    // SAFETY: the closure and the two waiters it leaves behind only make system calls on
    // data prepared before the fork: unshare, open/write/close of /proc files named by C
    // strings already built, a netlink socket fed a fixed-size message on the stack, a TCP
    // socket bound and sent over a socket pair made before (its control message built in a
    // buffer on the stack), fork, mount, open_tree and move_mount on C strings built before
    // into descriptor slots allocated before, chdir, prctl, wait and _exit, and Landlock's
    // add_rule and restrict_self on a ruleset built in the parent (they allocate nothing, and
    // their errors carry only errno). Nothing allocates or takes a lock.
    unsafe { command.pre_exec(closure) };
}

/// `fork(2)`: `Some(child)` in the parent, `None` in the child.
#[allow(unsafe_code)]
fn fork() -> std::io::Result<Option<rustix::process::Pid>> {
    // SAFETY: called only in the single-threaded child of a fork, where the new child runs
    // the same system-calls-only code.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => Ok(None),
        child => Ok(rustix::process::Pid::from_raw(child)),
    }
}

/// Closes every descriptor, so that a waiter holds open no pipe of the server's (its stdout
/// must end when it does) and none of the spawn's.
#[allow(unsafe_code)]
fn close_everything() {
    // SAFETY: this process uses no descriptor after this point but those it opens anew.
    if unsafe { libc::close_range(0, u32::MAX, 0) } == 0 {
        return;
    }
    // Before Linux 5.9: one by one, up to the limit we were started with.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    for fd in 0..limit.unwrap_or(1024).min(1 << 20) {
        // SAFETY: as above.
        unsafe { libc::close(fd as i32) };
    }
}

#[allow(unsafe_code)]
fn exit(code: i32) -> ! {
    // SAFETY: `_exit` runs no handlers of the process we are a copy of.
    unsafe { libc::_exit(code) }
}

/// The exit code that tells `status`: its own, or 128 and the signal, as shells say it.
fn code_of(status: rustix::process::WaitStatus) -> i32 {
    (status.exit_status())
        .or_else(|| status.terminating_signal().map(|signal| 128 + signal))
        .unwrap_or(1)
}

/// Outside the PID namespace: waits for its init and exits as it did. SIGTERM, SIGINT and
/// SIGHUP sent to the group are for the server: ignored here, so that our exit is the
/// server's, after its own shutdown.
#[allow(unsafe_code)]
fn wait_for_init(init: rustix::process::Pid) -> ! {
    close_everything();
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: ignoring a signal installs no handler.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
    loop {
        match rustix::process::waitpid(Some(init), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, status))) => exit(code_of(status)),
            Err(rustix::io::Errno::INTR) => {}
            _ => exit(1),
        }
    }
}

/// PID 1 of the namespace: reaps whatever is orphaned there, and exits as the server does,
/// which ends every process left in the namespace.
fn reap_until(server: rustix::process::Pid) -> ! {
    close_everything();
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid == server => exit(code_of(status)),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => exit(1),
        }
    }
}

/// In the new mount namespace: nothing we mount reaches the parent's; each kept tree taken
/// before anything is covered; the covers and keeps in order; a `/proc` of the new PID
/// namespace; the working directory entered again.
fn raise_walls(walls: &mut Walls) -> std::io::Result<()> {
    use rustix::fs::{CWD, Mode, OFlags};
    use rustix::io::Errno;
    use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};
    let Walls {
        steps, trees, cwd, ..
    } = walls;
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    for step in steps.iter() {
        if let Wall::Keep { tree, path, .. } = step {
            let flags = OpenTreeFlags::OPEN_TREE_CLONE
                | OpenTreeFlags::OPEN_TREE_CLOEXEC
                | OpenTreeFlags::AT_RECURSIVE;
            trees[*tree] = Some(rustix::mount::open_tree(CWD, path.as_c_str(), flags)?);
        }
    }
    let private = MountFlags::NOSUID | MountFlags::NODEV;
    for step in steps.iter() {
        match step {
            Wall::Cover(path) => {
                match rustix::mount::mount(
                    c"tmpfs",
                    path.as_c_str(),
                    c"tmpfs",
                    private,
                    c"mode=1777",
                ) {
                    // Beneath another cover already.
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(error) => return Err(error.into()),
                }
            }
            Wall::Keep {
                tree,
                path,
                ancestors,
                file,
            } => {
                // Each folder on the way exists already or is made in a cover.
                for folder in ancestors {
                    let _ = rustix::fs::mkdir(folder.as_c_str(), Mode::from_raw_mode(0o755));
                }
                let _ = match file {
                    true => rustix::fs::open(
                        path.as_c_str(),
                        OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
                        Mode::from_raw_mode(0o644),
                    )
                    .map(drop),
                    false => rustix::fs::mkdir(path.as_c_str(), Mode::from_raw_mode(0o755)),
                };
                if let Some(tree) = trees[*tree].take() {
                    rustix::mount::move_mount(
                        tree,
                        c"",
                        CWD,
                        path.as_c_str(),
                        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
                    )?;
                }
            }
        }
    }
    let proc = private | MountFlags::NOEXEC;
    rustix::mount::mount(c"proc", c"/proc", c"proc", proc, None)?;
    if let Some(cwd) = cwd {
        rustix::process::chdir(cwd.as_c_str())?;
    }
    Ok(())
}

/// In the child's new namespace: listens on `127.0.0.1:port` and sends the listener to the
/// parent over `channel`. The child's own copy is closed at `exec`.
fn hand_over_listener(port: u16, channel: &OwnedFd) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let listener = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::bind(&listener, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))?;
    rustix::net::listen(&listener, 128)?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [listener.as_fd()];
    control.push(SendAncillaryMessage::ScmRights(&fds));
    let byte = [0u8];
    rustix::net::sendmsg(
        channel,
        &[std::io::IoSlice::new(&byte)],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// The listener the child sent (see [`hand_over_listener`]), once it has been spawned: the
/// child sent it before `exec`, so it is waiting. `None` without a proxy port.
pub(crate) fn proxy_listener(
    prepared: Option<&Prepared>,
) -> Result<Option<std::net::TcpListener>, String> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let Some((_, _, ours)) = prepared.and_then(|prepared| prepared.proxy.as_ref()) else {
        return Ok(None);
    };
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8];
    let flags = RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC;
    rustix::net::recvmsg(
        ours,
        &mut [std::io::IoSliceMut::new(&mut byte)],
        &mut control,
        flags,
    )
    .map_err(|error| format!("the proxy's listener did not arrive: {error}"))?;
    let listener = control.drain().find_map(|message| match message {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    });
    let listener = listener.ok_or("the proxy's listener did not arrive")?;
    Ok(Some(std::net::TcpListener::from(listener)))
}

/// New mount and PID namespaces, a network namespace with loopback up when asked, and a
/// user namespace when not root.
#[allow(unsafe_code)]
fn enter_namespaces(namespaces: &Namespaces) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use rustix::thread::UnshareFlags;
    let mut flags = UnshareFlags::NEWNS | UnshareFlags::NEWPID;
    if namespaces.maps.is_some() {
        flags |= UnshareFlags::NEWUSER;
    }
    if namespaces.network {
        flags |= UnshareFlags::NEWNET;
    }
    // SAFETY: only new namespaces are asked for; no file table or filesystem state that
    // Rust code holds references into is unshared.
    unsafe { rustix::thread::unshare_unsafe(flags)? };
    if let Some((uid_map, gid_map)) = &namespaces.maps {
        let write = |path: &std::ffi::CStr, text: &[u8]| -> std::io::Result<()> {
            let file = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
            rustix::io::write(&file, text)?;
            Ok(())
        };
        write(c"/proc/self/setgroups", b"deny")?;
        write(c"/proc/self/uid_map", uid_map.as_bytes())?;
        write(c"/proc/self/gid_map", gid_map.as_bytes())?;
    }
    match namespaces.network {
        true => loopback_up(),
        false => Ok(()),
    }
}

/// Sets `lo` (index 1 in a new namespace) up with one rtnetlink `RTM_NEWLINK` request, and
/// reads the kernel's acknowledgement.
fn loopback_up() -> std::io::Result<()> {
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

    /// The steps as `cover PATH` and `keep PATH`, for comparing.
    fn described(walls: &Walls) -> Vec<String> {
        let text = |path: &CString| path.to_string_lossy().into_owned();
        (walls.steps.iter())
            .map(|step| match step {
                Wall::Cover(path) => format!("cover {}", text(path)),
                Wall::Keep { path, .. } => format!("keep {}", text(path)),
            })
            .collect()
    }

    #[test]
    fn kept_paths_come_back_beneath_covers_and_inner_covers_come_after() {
        let base = std::env::temp_dir().join(format!("mcp-smol-walls-{}", std::process::id()));
        for dir in ["work/state/mcp-cli", "work/inside/deeper", "elsewhere"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        let base = std::fs::canonicalize(&base).unwrap();
        let sandbox = Sandbox {
            filesystem: Some(vec![base.join("work/inside"), base.join("elsewhere")]),
            readable: vec![base.join("work/inside/deeper"), base.join("missing")],
            hidden: vec![
                base.join("work/state/mcp-cli"),
                base.clone(),
                base.join("gone"),
            ],
            ..Sandbox::default()
        };
        let walls = walls(&sandbox, None, Some(&base.join("work")));
        let at = |path: &str| base.join(path).display().to_string();
        assert_eq!(
            described(&walls),
            [
                format!("cover {}", base.display()),
                format!("keep {}", at("elsewhere")),
                // The working directory, which holds the inner paths.
                format!("keep {}", at("work")),
                format!("cover {}", at("work/state/mcp-cli")),
            ]
        );
        assert_eq!(walls.trees.len(), 2);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
