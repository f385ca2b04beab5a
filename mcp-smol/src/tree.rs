//! A server's whole process tree, so that it stops with the server: what leaves the server's
//! process group (`setsid`, a daemon's double fork) is found by a mark in its environment and
//! by its parent links, and killed with the rest.
//!
//! Each server is started with [`VARIABLE`] naming it (after the marks of whoever started
//! us, so that a tree holds through nested hosts); every process it starts inherits the
//! variable, and `/proc/PID/environ` keeps it even when a program changes its own
//! environment later. Once the server is gone, each process that holds its mark, and each
//! process below the server or below one of those, is killed; a killed one whose parent we
//! are (with [`adopt_orphans`], every orphan of the tree) is reaped here. Only a process
//! that both left the server's process tree and started with a cleaned environment escapes
//! this; a sandboxed server's tree is held by its PID namespace besides.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

/// The environment variable that marks a server's tree: the marks, comma-separated.
pub(crate) const VARIABLE: &str = "MCP_SMOL_TREE";

/// How many times the tree is searched again for what was started while it was killed.
const ROUNDS: usize = 8;

/// How long the processes killed are waited for, to be reaped.
const REAP_WAIT: Duration = Duration::from_secs(1);

/// Makes this process the reaper of the orphans in its servers' trees (Linux's
/// `PR_SET_CHILD_SUBREAPER`): a process whose parent dies is handed to us rather than to
/// init, so that a server's tree is killed and reaped before we exit, leaving no zombie to
/// anyone else. It changes the whole process, for good: every orphan of every child it
/// starts comes to it; those not of a server's tree are left as they are, and reaped by
/// init once this process exits. Opt-in for that reason; `mcp-cli` calls it.
pub fn adopt_orphans() -> std::io::Result<()> {
    Ok(rustix::process::set_child_subreaper(Some(
        rustix::process::getpid(),
    ))?)
}

/// One server's mark.
#[derive(Debug)]
pub(crate) struct Mark {
    name: String,
    /// When the server started (in clock ticks since boot, as `/proc` says): nothing of its
    /// tree started before, so the environments of older processes need not be read.
    since: Option<u64>,
}

impl Mark {
    /// A mark no other server of this process has.
    pub(crate) fn new() -> Mark {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Mark {
            name: format!("{}.{n}", std::process::id()),
            since: None,
        }
    }

    /// The mark of the server just started as `leader`.
    pub(crate) fn led_by(self, leader: u32) -> Mark {
        let since = stat(leader).map(|leader| leader.started);
        Mark { since, ..self }
    }

    /// The variable's value for the server: the marks we were started with, then its own.
    pub(crate) fn value(&self) -> String {
        match std::env::var(VARIABLE) {
            Ok(ours) if !ours.is_empty() => format!("{ours},{}", self.name),
            _ => self.name.clone(),
        }
    }

    /// Kills what is left of the tree of the server `leader` (not the leader itself, which
    /// its owner reaps), and reaps what of it is our child.
    pub(crate) fn kill_tree(&self, leader: u32) {
        let ours = std::process::id();
        let mut killed = Vec::new();
        for _ in 0..ROUNDS {
            let members = self.members(leader, ours);
            if members.is_empty() {
                break;
            }
            for (pid, parent) in members {
                if let Some(pid) = to_pid(pid)
                    && rustix::process::kill_process(pid, Signal::KILL).is_ok()
                    && parent == ours
                {
                    killed.push(pid);
                }
            }
        }
        reap(&killed);
    }

    /// The living processes of the tree, with their parents: those with the mark, and those
    /// below them or below `leader`.
    fn members(&self, leader: u32, ours: u32) -> BTreeMap<u32, u32> {
        let mut processes = processes();
        processes.retain(|_, process| self.since.is_none_or(|since| process.started >= since));
        let mut roots: BTreeSet<u32> = (processes.iter())
            .filter(|(pid, _)| **pid != ours && self.marks(**pid))
            .map(|(pid, _)| *pid)
            .collect();
        roots.insert(leader);
        let mut members = BTreeMap::new();
        let mut frontier: Vec<u32> = roots.iter().copied().collect();
        while let Some(parent) = frontier.pop() {
            for (pid, process) in &processes {
                if process.parent == parent && *pid != ours && !members.contains_key(pid) {
                    frontier.push(*pid);
                    members.insert(*pid, parent);
                }
            }
        }
        for root in roots.into_iter().filter(|root| *root != leader) {
            if let Some(process) = processes.get(&root) {
                members.insert(root, process.parent);
            }
        }
        members.retain(|pid, _| *pid != leader && processes.get(pid).is_some_and(|p| p.alive));
        members
    }

    /// Whether process `pid` started with this mark.
    fn marks(&self, pid: u32) -> bool {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let prefix = format!("{VARIABLE}=");
        (environ.split(|&b| b == 0))
            .filter_map(|entry| entry.strip_prefix(prefix.as_bytes()))
            .any(|value| {
                value
                    .split(|&b| b == b',')
                    .any(|m| m == self.name.as_bytes())
            })
    }
}

struct Process {
    parent: u32,
    /// Not a zombie: a zombie is dead already, and waits for its parent.
    alive: bool,
    /// When it started, in clock ticks since boot.
    started: u64,
}

/// Every process this one can see, by pid.
fn processes() -> BTreeMap<u32, Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    let pids = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    pids.filter_map(|pid| Some((pid, stat(pid)?))).collect()
}

/// The parent, state and start of `pid`, from `/proc/PID/stat`: after the name in parentheses
/// (which may hold anything), the state, the parent's pid, and the start 19 fields later.
fn stat(pid: u32) -> Option<Process> {
    let bytes = read_proc(&format!("/proc/{pid}/stat"))?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let fields: Vec<&str> = text
        .get(text.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    Some(Process {
        parent: fields.get(1)?.parse().ok()?,
        alive: !matches!(*fields.first()?, "Z" | "X"),
        started: fields.get(19)?.parse().ok()?,
    })
}

/// A small `/proc` file, read into room it fits in: procfs gives its files' length as 0, so
/// `read_to_string` sized nothing and read the line 32 bytes at a time, growing (six reads and
/// a `statx` for each of the hundreds of processes a tree search reads).
fn read_proc(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    let mut room = [0; 4096];
    loop {
        match file.read(&mut room) {
            Ok(0) => return Some(bytes),
            Ok(n) => bytes.extend_from_slice(&room[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

fn to_pid(pid: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(pid).ok()?)
}

/// Reaps the killed children of ours, waiting up to [`REAP_WAIT`] for them (SIGKILL cannot be
/// ignored, but one stuck in the kernel takes it only when it wakes; that one is left).
fn reap(children: &[Pid]) {
    let deadline = Instant::now() + REAP_WAIT;
    let mut left: Vec<Pid> = children.to_vec();
    while !left.is_empty() {
        left.retain(|pid| {
            matches!(
                rustix::process::waitpid(Some(*pid), WaitOptions::NOHANG),
                Ok(None)
            )
        });
        if left.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{ServerCommand, spawn};
    use std::sync::{Arc, Mutex};

    /// Whether `pid` is still there, a zombie counting as there.
    fn there(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_setsid_grandchild_is_killed_and_reaped_with_the_server() {
        adopt_orphans().unwrap();
        // The server starts a process in a session of its own, which says its own pid (`$!`
        // may be `setsid`'s, which forks when it leads its group and exits at once).
        let script = "setsid sh -c 'echo $$; exec sleep 600' </dev/null 2>/dev/null & read line";
        let tail = Arc::new(Mutex::new(Default::default()));
        let command = ServerCommand::new("sh").args(["-c", script]);
        let (mut process, stdin) = spawn(&command, tail, None).unwrap();
        let mut buffer = [0; 64];
        let n = async_io::block_on(process.read(&mut buffer)).unwrap();
        let grandchild: u32 = std::str::from_utf8(&buffer[..n])
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(there(grandchild));
        drop(stdin);
        let (_, never) = async_channel::bounded(1);
        let short = Duration::from_millis(500);
        async_io::block_on(process.stop(short, short, &never));
        // Killed and reaped before stop returns: not even a zombie is left.
        assert!(!there(grandchild), "{grandchild} survived its server");
    }
}
