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

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::net::{AddressFamily, SocketFlags, SocketType};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, path_beneath_rules,
};

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
}

/// The highest Landlock ABI whose rights we ask for; older kernels get what they offer, as
/// long as they offer Landlock at all.
const ABI_WANTED: ABI = ABI::V6;

/// A sandbox made ready in the parent, to be entered by the child.
#[derive(Debug)]
pub(crate) struct Prepared {
    network: Option<UserMaps>,
    /// The port of the proxy's listener and the channel it comes back over: the child's end
    /// (sent on) and ours.
    proxy: Option<(u16, OwnedFd, OwnedFd)>,
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

/// Checks what `sandbox` needs and builds it; `Err` says what is missing.
pub(crate) fn prepare(sandbox: &Sandbox) -> Result<Prepared, String> {
    let missing = std::env::var("MCP_SMOL_SANDBOX_MISSING").unwrap_or_default();
    let forced = |what: &str| missing.split(',').any(|m| m.trim() == what);
    let network = if sandbox.isolate_network {
        Some(user_maps(forced("userns"))?)
    } else {
        None
    };
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
    let (ruleset, temporary) = match &sandbox.filesystem {
        Some(paths) => {
            let temporary = TempDir::new()?;
            readable.clone_from(&sandbox.readable);
            let ruleset = ruleset(paths, &readable, &temporary.0, forced("landlock"))?;
            readable.extend(paths.iter().cloned());
            (Some(ruleset), Some(temporary))
        }
        None => (None, None),
    };
    Ok(Prepared {
        network,
        proxy,
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
    let allowed: Vec<String> = readable.iter().map(|p| p.display().to_string()).collect();
    format!(
        "the sandbox refused to run {}: {error}. Under `filesystem` a server may read and run \
         only beneath {}; add the folder of what it runs to `filesystem`",
        program.display(),
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
    let proxy = (prepared.proxy.as_ref())
        .and_then(|(port, theirs, _)| Some((*port, theirs.try_clone().ok()?)));
    let mut ruleset = prepared.ruleset.take();
    let closure = move || -> std::io::Result<()> {
        if let Some(network) = &network {
            enter_network(network)?;
        }
        if let Some((port, channel)) = &proxy {
            hand_over_listener(*port, channel)?;
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
    // a fixed-size message on the stack, a TCP socket bound and sent over a socket pair made
    // before (its control message built in a buffer on the stack), and Landlock's prctl and restrict_self on a ruleset
    // built in the parent (that call allocates nothing, and its error carries only errno).
    // Nothing allocates or takes a lock.
    unsafe { command.pre_exec(closure) };
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
