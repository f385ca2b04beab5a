//! The sandbox's walls, through the `mcp-cli` binary and the adapter, with real namespaces and
//! Landlock: no Unix socket outside (a daemon's under the runtime folder, one in `/tmp`, an
//! abstract one), no signal to and no `/proc` of a process outside, `/proc` listing only the
//! server's own, no `setsid` grandchild left once the server stops, and a kernel lacking a
//! namespace meaning a refused start.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use serde_json::json;

use crate::support::{FIXTURE, Run, Scratch, bounded, quick, start, text};

/// The ways a server is sandboxed: its network cut, its filesystem confined.
const SANDBOXES: [&str; 2] = ["{ network = false }", "{ filesystem = [\"inside\"] }"];

/// A config running the fixture in its `walls` mode as `fx`, under `permissions` (or none).
fn config(scratch: &Scratch, permissions: &str) -> String {
    let permissions = match permissions {
        "" => String::new(),
        given => format!("permissions = {given}\n"),
    };
    let config = format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"walls\"]\n{permissions}");
    std::fs::create_dir_all(scratch.0.join("inside")).unwrap();
    scratch.write("config.toml", &config).display().to_string()
}

/// `mcp-cli call fx TOOL ARGS...` under `permissions`, with the runtime folder in the scratch
/// folder.
fn call(scratch: &Scratch, permissions: &str, tool: &str, args: &[&str]) -> Run {
    let config = config(scratch, permissions);
    let mut all = vec!["--config", config.as_str(), "call", "fx", tool];
    all.extend(args);
    let runtime = scratch.0.join("runtime").display().to_string();
    scratch.cli_with(&all, &[("XDG_RUNTIME_DIR", &runtime)], None)
}

/// A folder of our own in `/tmp`, outside the scratch folder (which is the server's working
/// directory, and so stays reachable), as an SSH agent's is.
struct Outside(PathBuf);

impl Outside {
    fn new(name: &str) -> Self {
        let dir = PathBuf::from(format!("/tmp/mcp-walls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Outside(dir)
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Accepts connections on `listener` until the test ends, so a connect that gets through
/// is answered (and reported as "connected").
fn serve(listener: UnixListener) {
    std::thread::spawn(move || for _ in listener.incoming() {});
}

#[test]
fn unix_sockets_outside_are_out_of_reach() {
    let scratch = Scratch::new("walls-sockets");
    let outside = Outside::new("sockets");
    // A daemon's socket where mcp-cli keeps them, and an agent's in /tmp.
    let daemon = scratch.0.join("runtime/mcp-cli/daemon.sock");
    std::fs::create_dir_all(daemon.parent().unwrap()).unwrap();
    let agent = outside.0.join("agent.sock");
    for path in [&daemon, &agent] {
        serve(UnixListener::bind(path).unwrap());
    }
    let paths = [daemon, agent].map(|path| format!("path={}", path.display()));
    for path in &paths {
        let run = call(&scratch, "", "connect_unix", &[path]);
        assert_eq!((run.code, run.stdout.trim()), (0, "connected"), "{run:?}");
        for permissions in SANDBOXES {
            let run = call(&scratch, permissions, "connect_unix", &[path]);
            assert_eq!(run.code, 1, "{permissions} {path}: {run:?}");
            assert!(!run.stdout.contains("connected"), "{permissions}: {run:?}");
            assert!(
                run.stderr.contains("No such file or directory"),
                "{permissions} {path}: {run:?}"
            );
        }
    }
}

/// A launcher's cache is kept beneath the covers (a `HOME` in `/tmp`), but a cache variable
/// naming a covered folder, or a folder above one, brings none of it back.
#[test]
fn a_cache_variable_naming_a_covered_folder_does_not_uncover_it() {
    let scratch = Scratch::new("walls-caches");
    let outside = Outside::new("caches");
    let runtime = scratch.0.join("runtime");
    let daemon = runtime.join("mcp-cli/daemon.sock");
    std::fs::create_dir_all(daemon.parent().unwrap()).unwrap();
    let agent = outside.0.join("agent.sock");
    for path in [&daemon, &agent] {
        serve(UnixListener::bind(path).unwrap());
    }
    let env = format!(
        "env = {{ npm_config_cache = {:?}, UV_CACHE_DIR = \"/tmp\", PIP_CACHE_DIR = \"/\" }}\n",
        runtime.display().to_string()
    );
    std::fs::create_dir_all(scratch.0.join("inside")).unwrap();
    for permissions in SANDBOXES {
        let config = format!(
            "[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"walls\"]\n{env}permissions = {permissions}\n"
        );
        let config = scratch.write("config.toml", &config).display().to_string();
        for socket in [&daemon, &agent] {
            let path = format!("path={}", socket.display());
            let args = ["--config", &config, "call", "fx", "connect_unix", &path];
            let runtime = runtime.display().to_string();
            let run = scratch.cli_with(&args, &[("XDG_RUNTIME_DIR", &runtime)], None);
            assert_eq!(run.code, 1, "{permissions} {path}: {run:?}");
            assert!(
                run.stderr.contains("No such file or directory"),
                "{permissions} {path}: {run:?}"
            );
        }
    }
}

#[test]
fn abstract_sockets_outside_are_out_of_reach() {
    use std::os::linux::net::SocketAddrExt;
    let scratch = Scratch::new("walls-abstract");
    let name = format!("mcp-walls-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    serve(UnixListener::bind_addr(&address).unwrap());
    let path = format!("path={name}");
    let args = [path.as_str(), "abstract=true"];
    let run = call(&scratch, "", "connect_unix", &args);
    assert_eq!((run.code, run.stdout.trim()), (0, "connected"), "{run:?}");
    // With the network cut the name is another namespace's; with only the filesystem
    // confined it is in ours, and Landlock's scope refuses it.
    for (permissions, error) in SANDBOXES
        .into_iter()
        .zip(["Connection refused", "not permitted"])
    {
        let run = call(&scratch, permissions, "connect_unix", &args);
        assert_eq!(run.code, 1, "{permissions}: {run:?}");
        assert!(run.stderr.contains(error), "{permissions}: {run:?}");
    }
}

/// A `sleep` of the test's with a secret in its environment: a process outside any sandbox.
fn victim() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("600")
        .env("WALLS_SECRET", "hunter2")
        .spawn()
        .unwrap()
}

#[test]
fn processes_outside_are_neither_signalled_nor_read() {
    let scratch = Scratch::new("walls-processes");
    let mut victim = victim();
    let pid = format!("pid={}", victim.id());
    let environ = format!("path=/proc/{}/environ", victim.id());
    let read = call(&scratch, "", "read_path", &[&environ]);
    assert!(read.stdout.contains("WALLS_SECRET=hunter2"), "{read:?}");
    for permissions in SANDBOXES {
        let signal = call(&scratch, permissions, "signal", &[&pid]);
        assert_eq!(signal.code, 1, "{permissions}: {signal:?}");
        assert!(signal.stderr.contains("No such process"), "{signal:?}");
        assert!(
            victim.try_wait().unwrap().is_none(),
            "{permissions}: killed"
        );
        let read = call(&scratch, permissions, "read_path", &[&environ]);
        assert_eq!(read.code, 1, "{permissions}: {read:?}");
        assert!(!read.stdout.contains("hunter2"), "{permissions}: {read:?}");
    }
    // Unsandboxed, the same call reaches it: the test's victim could be signalled.
    let signal = call(&scratch, "", "signal", &[&pid]);
    assert_eq!(
        (signal.code, signal.stdout.trim()),
        (0, "sent"),
        "{signal:?}"
    );
    assert!(!victim.wait().unwrap().success());
}

#[test]
fn proc_lists_only_the_servers_own_processes() {
    let scratch = Scratch::new("walls-proc");
    for permissions in SANDBOXES {
        let run = call(&scratch, permissions, "processes", &[]);
        assert_eq!(run.code, 0, "{permissions}: {run:?}");
        let listed: Vec<&str> = run.stdout.lines().collect();
        // Its init (PID 1) and itself, nothing of ours.
        assert_eq!(listed.len(), 2, "{permissions}: {listed:?}");
        assert!(
            listed.contains(&"2 mcp-fixture"),
            "{permissions}: {listed:?}"
        );
        let ours = format!("{} ", std::process::id());
        assert!(!listed.iter().any(|line| line.starts_with(&ours)));
    }
    let run = call(&scratch, "", "processes", &[]);
    let ours = format!("{} ", std::process::id());
    assert!(
        run.stdout.lines().any(|line| line.starts_with(&ours)),
        "{run:?}"
    );
}

/// The processes whose command line holds `token`, by pid.
fn holding(token: &str) -> Vec<i32> {
    let entries = std::fs::read_dir("/proc").unwrap().flatten();
    let pids = entries.filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok());
    pids.filter(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(token)
    })
    .collect()
}

/// Whether `pid` names a process (a zombie too), as `kill(pid, 0)` says.
fn exists(pid: i32) -> bool {
    let status = std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    status.success()
}

#[test]
fn a_setsid_grandchild_is_gone_once_the_server_stops() {
    let scratch = Scratch::new("walls-grandchild");
    for (index, permissions) in SANDBOXES.into_iter().enumerate() {
        let token = format!("walls-token-{}-{index}", std::process::id());
        let run = call(
            &scratch,
            permissions,
            "detach",
            &[&format!("token={token}")],
        );
        assert_eq!(run.code, 0, "{permissions}: {run:?}");
        assert!(run.stdout.starts_with("started "), "{run:?}");
        let left = holding(&token);
        for pid in &left {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        assert_eq!(left, Vec::<i32>::new(), "{permissions}: left running");
    }
}

#[test]
fn through_the_adapter_the_grandchild_lives_while_the_server_does_and_no_longer() {
    let sandbox = mcp_smol::Sandbox {
        isolate_network: true,
        ..mcp_smol::Sandbox::default()
    };
    let mut command = mcp_smol::ServerCommand::new(FIXTURE).arg("walls");
    command.sandbox = Some(sandbox);
    let token = format!("walls-adapter-{}", std::process::id());
    bounded(async {
        let client = start(&command, quick());
        let started = client
            .call_tool("detach", json!({"token": token}))
            .await
            .unwrap();
        assert!(text(&started).starts_with("started "), "{started:?}");
        // The fixture answers once `setsid` has started, which then becomes `sh`: while it
        // execs its command line reads empty, and while a `setsid` that had to fork has not
        // exited yet there are two. So the grandchild is looked for until it alone shows (a
        // call answered in microseconds often looked while it was on its way).
        let mut found = holding(&token);
        for _ in 0..200 {
            if found.len() == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            found = holding(&token);
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(exists(found[0]));
        client.close().await;
        let left = found[0];
        if exists(left) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &left.to_string()])
                .status();
            panic!("the grandchild {left} outlived its server");
        }
    });
}

#[test]
fn a_kernel_without_the_namespaces_is_a_refused_start() {
    let scratch = Scratch::new("walls-missing");
    let config = config(&scratch, "{ filesystem = [\"inside\"] }");
    let cases = [
        ("mountns", "needs a mount namespace of its own"),
        ("pidns", "needs a PID namespace of its own"),
    ];
    for (missing, message) in cases {
        let args = ["--config", config.as_str(), "call", "fx", "processes"];
        let run = scratch.cli_with(&args, &[("MCP_SMOL_SANDBOX_MISSING", missing)], None);
        assert_eq!(run.code, 3, "{missing}: {run:?}");
        assert!(run.stderr.contains(message), "{missing}: {run:?}");
        assert!(!run.stdout.contains("mcp-fixture"), "{missing}: {run:?}");
    }
    // Scopes are taken where offered: without them the server starts, and an abstract socket
    // in its network namespace is open to it.
    use std::os::linux::net::SocketAddrExt;
    let name = format!("mcp-walls-missing-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    serve(UnixListener::bind_addr(&address).unwrap());
    let path = format!("path={name}");
    let args = [
        "--config",
        config.as_str(),
        "call",
        "fx",
        "connect_unix",
        &path,
        "abstract=true",
    ];
    let run = scratch.cli_with(&args, &[("MCP_SMOL_SANDBOX_MISSING", "scope")], None);
    assert_eq!((run.code, run.stdout.trim()), (0, "connected"), "{run:?}");
}

/// An npx server under `filesystem` fails, offline, with npm's `ENOTCACHED`: the message names
/// the folder it needed (its cache), not only npm's words.
#[test]
fn a_confined_npx_refused_its_cache_is_told_which_folder() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("walls-npx-cache");
    // npm's words when it may not write its cache and so finds nothing in it.
    std::fs::create_dir_all(scratch.0.join("bin")).unwrap();
    let npx = scratch.write(
        "bin/npx",
        "#!/bin/sh\necho 'npm error code ENOTCACHED' >&2\necho 'npm error request to https://registry.npmjs.org/x failed' >&2\nexit 1\n",
    );
    std::fs::set_permissions(&npx, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = "/nonexistent-mcp-walls-home";
    let config = scratch.write(
        "config.toml",
        &format!(
            "[mcp.npx-server]\ncommand = {npx:?}\nargs = [\"-y\", \"x\"]\nenv = {{ HOME = {home:?} }}\npermissions = {{ filesystem = [\".\"] }}\n"
        ),
    );
    let runtime = scratch.0.join("runtime").display().to_string();
    let config = config.display().to_string();
    let args = [
        "--config",
        config.as_str(),
        "tools",
        "npx-server",
        "--refresh",
    ];
    let run = scratch.cli_with(&args, &[("XDG_RUNTIME_DIR", &runtime)], None);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "the sandbox keeps npx from writing its cache, {home}/.npm: add \"{home}/.npm\" to \
             the entry's permissions.filesystem"
        )),
        "{run:?}"
    );
}

/// A server whose program lives beneath a folder the walls hide (built in `/tmp`, or copied
/// straight into it) still starts sandboxed, and `/tmp` stays hidden from it: its install
/// folder is kept, or only its own file when that folder is `/tmp` itself. A program or a
/// working directory named through `..` (a folder the walls do not keep) is reached by its
/// real path.
#[test]
fn a_program_beneath_tmp_starts_sandboxed_and_tmp_stays_hidden() {
    let scratch = Scratch::new("walls-program");
    let outside = Outside::new("program");
    let agent = outside.0.join("agent.sock");
    serve(UnixListener::bind(&agent).unwrap());
    let installed = Outside::new("installed");
    let in_its_folder = installed.0.join("bin/mcp-fixture");
    let straight_in_tmp = PathBuf::from(format!("/tmp/mcp-walls-fixture-{}", std::process::id()));
    std::fs::create_dir_all(in_its_folder.parent().unwrap()).unwrap();
    for program in [&in_its_folder, &straight_in_tmp] {
        std::fs::copy(FIXTURE, program).unwrap();
    }
    // Through the folder of the socket, which is not kept.
    let dots = outside.0.join("..").join(installed.0.file_name().unwrap());
    let through_dots = dots.join("bin/mcp-fixture");
    let dots_cwd = format!("cwd = {:?}\n", dots.display().to_string());
    let starts = [
        (&in_its_folder, String::new()),
        (&straight_in_tmp, String::new()),
        (&through_dots, String::new()),
        (&in_its_folder, dots_cwd),
    ];
    let path = format!("path={}", agent.display());
    let runtime = scratch.0.join("runtime").display().to_string();
    for (program, cwd) in &starts {
        for permissions in SANDBOXES {
            let config = format!(
                "[mcp.fx]\ncommand = {:?}\nargs = [\"walls\"]\n{cwd}permissions = {permissions}\n",
                program.display().to_string()
            );
            std::fs::create_dir_all(scratch.0.join("inside")).unwrap();
            let config = scratch.write("config.toml", &config).display().to_string();
            let args = ["--config", &config, "call", "fx", "connect_unix", &path];
            let run = scratch.cli_with(&args, &[("XDG_RUNTIME_DIR", &runtime)], None);
            let shown = (program.display(), cwd, permissions);
            assert_eq!(run.code, 1, "{shown:?}: {run:?}");
            assert!(!run.stderr.contains("cannot start"), "{shown:?}: {run:?}");
            assert!(
                run.stderr.contains("No such file or directory"),
                "{shown:?}: {run:?}"
            );
        }
    }
    let _ = std::fs::remove_file(&straight_in_tmp);
}
