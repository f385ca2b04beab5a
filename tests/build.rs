//! Looks for the runtimes the end-to-end suites install their real servers with, and the
//! tools some suites run (haproxy), and sets a cfg flag for each one missing (`no_node`,
//! `no_python`, `no_secret_service`, `no_haproxy`). A test that needs one carries
//! `#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]`, so cargo reports it as
//! ignored, with the reason, instead of counting a test that did not run as a pass. Under
//! `CI=true` nothing is marked missing: there the tests run and fail loudly.

use std::process::{Command, Stdio};

/// A runtime some tests need: the cfg flag set when it is missing, its name as the ignore
/// reasons give it, and the check for it.
struct Runtime {
    flag: &'static str,
    name: &'static str,
    found: fn() -> bool,
}

const RUNTIMES: &[Runtime] = &[
    Runtime {
        flag: "no_node",
        name: "Node.js and npm",
        found: node_and_npm,
    },
    Runtime {
        flag: "no_python",
        name: "Python 3 with venv",
        found: python_with_venv,
    },
    Runtime {
        flag: "no_secret_service",
        name: "gnome-keyring-daemon, secret-tool and dbus-run-session",
        found: secret_service_tools,
    },
    Runtime {
        flag: "no_haproxy",
        name: "haproxy",
        found: haproxy,
    },
];

fn main() {
    // The flags describe the machine the tests run on: look again when PATH or CI changes.
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=CI");
    let under_ci = std::env::var("CI").is_ok_and(|ci| ci == "true");
    for runtime in RUNTIMES {
        println!("cargo::rustc-check-cfg=cfg({})", runtime.flag);
        if !under_ci && !(runtime.found)() {
            println!("cargo::rustc-cfg={}", runtime.flag);
            println!(
                "cargo::warning=no {} on PATH: the tests that need it are ignored",
                runtime.name
            );
        }
    }
}

/// Whether `program ARGS` runs and exits with success.
fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `node` runs the reference servers and test scripts; `npm` installs them (and Node 22).
fn node_and_npm() -> bool {
    runs("node", &["--version"]) && runs("npm", &["--version"])
}

/// `python3 -m venv` makes the servers' virtual environments; it needs `ensurepip`, which
/// Debian ships apart (python3-venv).
fn python_with_venv() -> bool {
    runs("python3", &["-c", "import venv, ensurepip"])
}

/// A Secret Service of the test's own: the daemon on a private session bus, and
/// `secret-tool` to look inside it.
fn secret_service_tools() -> bool {
    on_path("gnome-keyring-daemon") && on_path("secret-tool") && on_path("dbus-run-session")
}

/// haproxy balances `serve --listen` replicas (`gateway_replicas`); `-v` only prints its
/// version.
fn haproxy() -> bool {
    runs("haproxy", &["-v"])
}

/// Whether an executable file `name` is in a folder of PATH (these tools have no cheap
/// `--version` that is sure not to start anything).
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}
