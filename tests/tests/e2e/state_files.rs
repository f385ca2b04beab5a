//! What we keep is ours (issue 47 §6, §7): the state folder and its folders end 0700 and its
//! files 0600, a log behind a symbolic link is not followed, a `listen-token` others could
//! have read or swapped is not used, `serve --listen` takes the Bearer scheme in any case, and
//! a crash is reported with what the server wrote since, not with an old unrelated line.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use mcp_smol::serde_json::json;

use crate::gateway_listen::{STATELESS, exchange, listen_to, stateless_call};
use crate::support::{
    FIXTURE, Run, Scratch, bounded, close_and_check, echo_args, fixture, fixture_block, quick,
    start, text,
};

/// A token `serve --print-token` must never hand out again once it was exposed.
const PLANTED: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `$XDG_STATE_HOME/mcp-cli` of a scratch folder's runs.
fn state(scratch: &Scratch) -> PathBuf {
    scratch.0.join("state/mcp-cli")
}

/// A scratch folder whose config names the fixture as `fx`.
fn with_fixture(name: &str) -> Scratch {
    let scratch = Scratch::new(&format!("state-files-{name}"));
    scratch.project_file(".mcp-cli.toml", &fixture_block("fx", "good"));
    scratch
}

#[test]
fn a_log_behind_a_symbolic_link_is_not_followed() {
    let scratch = with_fixture("log-link");
    let logs = state(&scratch).join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let target = scratch.write("not-a-log", "untouched\n");
    std::os::unix::fs::symlink(&target, logs.join("fx.log")).unwrap();
    let run = scratch.cli(&["call", "fx", "echo", "text=hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), "hi");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched\n");
    let shown = scratch.cli(&["logs", "fx"]);
    assert_ne!(shown.code, 0, "{shown:?}");
    assert!(shown.stderr.contains("symbolic link"), "{shown:?}");
}

#[test]
fn state_folders_made_open_end_private_and_so_do_their_files() {
    let scratch = with_fixture("modes");
    let root = state(&scratch);
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for dir in [&root, &logs] {
        set_mode(dir, 0o755);
    }
    let log = logs.join("fx.log");
    std::fs::write(&log, "an older run\n").unwrap();
    set_mode(&log, 0o644);
    let run = scratch.cli(&["call", "fx", "echo", "text=hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(mode(&root), 0o700, "the state folder");
    assert_eq!(mode(&logs), 0o700, "its logs folder");
    assert_eq!(mode(&log), 0o600, "a log made 0644");
    // Every folder and file the run made or used.
    let mut found = 0;
    let mut folders = vec![root];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            found += 1;
            if path.is_dir() {
                assert_eq!(mode(&path), 0o700, "{}", path.display());
                folders.push(path);
            } else {
                assert_eq!(mode(&path), 0o600, "{}", path.display());
            }
        }
    }
    assert!(found >= 3, "logs, the log, pins at least: {found}");
}

/// `serve --print-token` in `scratch`.
fn print_token(scratch: &Scratch) -> Run {
    scratch.cli(&["serve", "--print-token"])
}

#[test]
fn a_listen_token_open_to_others_is_replaced() {
    let scratch = with_fixture("token-open");
    let root = state(&scratch);
    std::fs::create_dir_all(&root).unwrap();
    let path = root.join("listen-token");
    std::fs::write(&path, format!("{PLANTED}\n")).unwrap();
    set_mode(&path, 0o644);
    let run = print_token(&scratch);
    assert_eq!(run.code, 0, "{run:?}");
    let token = run.stdout.trim();
    assert_eq!(token.len(), 64, "{run:?}");
    assert_ne!(token, PLANTED, "the exposed token was handed out again");
    assert!(run.stderr.contains("replaced by a new token"), "{run:?}");
    assert!(
        run.stderr.contains("readable or writable by others"),
        "{run:?}"
    );
    assert_eq!(mode(&path), 0o600);
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), token);
    // Kept from now on.
    let again = print_token(&scratch);
    assert_eq!(again.stdout.trim(), token);
    assert_eq!(again.stderr, "", "{again:?}");
}

#[test]
fn a_listen_token_behind_a_symbolic_link_is_replaced_and_its_target_untouched() {
    let scratch = with_fixture("token-link");
    let root = state(&scratch);
    std::fs::create_dir_all(&root).unwrap();
    let target = scratch.write("their-token", &format!("{PLANTED}\n"));
    set_mode(&target, 0o600);
    let path = root.join("listen-token");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let run = print_token(&scratch);
    assert_eq!(run.code, 0, "{run:?}");
    assert_ne!(run.stdout.trim(), PLANTED);
    assert!(run.stderr.contains("is a symbolic link"), "{run:?}");
    assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        format!("{PLANTED}\n")
    );
}

#[test]
fn listen_takes_the_bearer_scheme_in_any_case() {
    let scratch = Scratch::new("state-files-bearer");
    let listening = listen_to(&scratch, &["good"], &[]);
    let call = stateless_call(1, "echo", json!({"text": "any case"}));
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let authorization = format!("{scheme} {}", listening.token);
        let headers = [
            ("Authorization", authorization.as_str()),
            ("Accept", "application/json, text/event-stream"),
            STATELESS[0],
            STATELESS[1],
        ];
        let answer = exchange(&listening.address, "POST", &headers, &call);
        assert_eq!(
            answer.status, 200,
            "{scheme}: {} {}",
            answer.head, answer.body
        );
        assert!(
            answer.body.contains("any case"),
            "{scheme}: {}",
            answer.body
        );
    }
    let wrong = format!("bearer {}", "0".repeat(64));
    let headers = [
        ("Authorization", wrong.as_str()),
        STATELESS[0],
        STATELESS[1],
    ];
    assert_eq!(
        exchange(&listening.address, "POST", &headers, &call).status,
        401
    );
}

#[test]
fn a_crash_is_reported_without_the_stderr_of_work_that_went_well() {
    bounded(async {
        let client = start(&fixture("crash-second-call", &[]), quick());
        client.wait_ready().await.unwrap();
        let first = client.call_tool("echo", echo_args("fine")).await.unwrap();
        assert_eq!(text(&first), "fine");
        let crash = client
            .call_tool("echo", echo_args("boom"))
            .await
            .unwrap_err();
        let message = crash.to_string();
        assert!(message.contains("crashing now"), "{message}");
        assert!(!message.contains("early, unrelated"), "{message}");
        // The whole tail is still there for whoever asks for it.
        assert!(
            (client.stderr_tail().iter()).any(|line| line.contains("early, unrelated")),
            "{:?}",
            client.stderr_tail()
        );
        close_and_check(&client).await;
    });
}

#[test]
fn a_crash_through_the_daemon_shows_only_its_own_stderr() {
    let scratch = Scratch::new("state-files-crash");
    scratch.project_file(
        ".mcp-cli.toml",
        &format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"crash-second-call\"]\n"),
    );
    let runtime = scratch.0.join("run");
    let env = [("XDG_RUNTIME_DIR", runtime.to_str().unwrap())];
    let cli = |args: &[&str]| scratch.cli_with(args, &env, None);
    /// Stops the daemon when the test ends, failed or not.
    struct Stop<'a>(&'a dyn Fn(&[&str]) -> Run);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = (self.0)(&["daemon", "stop"]);
        }
    }
    let started = cli(&["daemon", "start"]);
    assert_eq!(started.code, 0, "{started:?}");
    let _stop = Stop(&cli);
    let first = cli(&["call", "fx", "echo", "text=fine"]);
    assert_eq!((first.code, first.stdout.trim()), (0, "fine"), "{first:?}");
    let crash = cli(&["call", "fx", "echo", "text=boom"]);
    assert_eq!(crash.code, 3, "{crash:?}");
    assert!(crash.stderr.contains("crashing now"), "{crash:?}");
    assert!(!crash.stderr.contains("early, unrelated"), "{crash:?}");
}
