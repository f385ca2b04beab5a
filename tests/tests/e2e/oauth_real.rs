//! OAuth for real use through the `mcp-cli` binary against `mcp-oauth-fixture`: tokens in a
//! real Secret Service (gnome-keyring on a D-Bus session bus of the test's own) and moved
//! between stores, one refresh for twelve concurrent processes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::oauth::{Fixture, configure};
use crate::support::{Run, Scratch};

/// A Secret Service of the test's own: `gnome-keyring-daemon` on a private session bus
/// (`dbus-run-session`), its login keyring unlocked with an empty password, its files under
/// the scratch folder. It stops when the session's shell sees its stdin close.
pub(crate) struct SecretService {
    session: Child,
    pub(crate) address: String,
}

impl Drop for SecretService {
    fn drop(&mut self) {
        // Closing stdin ends the session's shell, and with it the bus and the daemon on it.
        drop(self.session.stdin.take());
        let _ = self.session.wait();
    }
}

impl SecretService {
    /// Starts one; the test that calls it carries the `no_secret_service` ignore attribute,
    /// so a machine without gnome-keyring reports it as not run.
    pub(crate) fn start(scratch: &Scratch) -> Self {
        let home = scratch.0.join("keyring-home");
        std::fs::create_dir_all(&home).unwrap();
        let script = "echo '' | gnome-keyring-daemon --unlock --components=secrets >/dev/null \
                      && echo \"$DBUS_SESSION_BUS_ADDRESS\" && exec cat >/dev/null";
        let mut session = Command::new("dbus-run-session")
            .args(["--", "sh", "-c", script])
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dbus-run-session: needs gnome-keyring, libsecret-tools and dbus");
        let mut address = String::new();
        BufReader::new(session.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        assert!(address.starts_with("unix:"), "no session bus: {address:?}");
        Self {
            session,
            address: address.trim().to_owned(),
        }
    }

    /// What the keychain holds for `url`, looked up by `secret-tool` (libsecret), not by us.
    fn lookup(&self, url: &str) -> Option<Value> {
        let text = self.lookup_text("mcp-cli oauth", url)?;
        serde_json::from_str(&text).ok()
    }

    /// The secret filed under `service` and `username`, as `secret-tool` finds it.
    pub(crate) fn lookup_text(&self, service: &str, username: &str) -> Option<String> {
        let output = Command::new("secret-tool")
            .args(["lookup", "service", service, "username", username])
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .output()
            .expect("run secret-tool: needs libsecret-tools");
        let text = String::from_utf8(output.stdout).ok()?;
        (!text.is_empty()).then_some(text)
    }
}

/// The token file of server `fx` in the scratch folder's state.
fn token_file(scratch: &Scratch) -> PathBuf {
    scratch.0.join("state/mcp-cli/auth/fx.json")
}

/// `mcp-cli args` with `token_store` from the environment and the given session bus.
fn cli(scratch: &Scratch, bus: &str, store: &str, args: &[&str]) -> Run {
    let env = [
        ("DBUS_SESSION_BUS_ADDRESS", bus),
        ("MCP_CLI_TOKEN_STORE", store),
    ];
    scratch.cli_with(args, &env, None)
}

#[test]
#[cfg_attr(
    no_secret_service,
    ignore = "needs gnome-keyring-daemon, secret-tool and dbus-run-session on PATH"
)]
fn tokens_live_in_the_keychain_move_between_stores_and_reset_clears_both() {
    let scratch = Scratch::new("oauth-keychain");
    let service = SecretService::start(&scratch);
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let bus = service.address.as_str();
    let url = fixture.url.as_str();

    let login = cli(&scratch, bus, "auto", &["--auth-follow", "auth", "fx"]);
    assert_eq!(
        (login.code, login.stdout.as_str()),
        (
            0,
            "logged in to fx; the token is kept in the system keychain\n"
        ),
        "{login:?}"
    );
    let kept = service.lookup(url).expect("the keychain holds the login");
    assert_eq!(kept["server_url"], url);
    assert!(kept["tokens"]["access_token"].is_string(), "{kept}");
    assert!(!token_file(&scratch).exists());
    let call = cli(&scratch, bus, "keyring", &["call", "fx", "whoami"]);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );

    // To the file and back: the same login each time, no new one.
    let call = cli(&scratch, bus, "file", &["call", "fx", "whoami"]);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
    assert!(token_file(&scratch).exists());
    assert_eq!(service.lookup(url), None, "moved, not copied");
    let call = cli(&scratch, bus, "keyring", &["call", "fx", "whoami"]);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
    assert!(!token_file(&scratch).exists());
    assert!(service.lookup(url).is_some());
    assert_eq!(fixture.seen("authorize").len(), 1);

    // A copy in both places: reset forgets both.
    let record = service.lookup(url).unwrap();
    std::fs::write(token_file(&scratch), record.to_string()).unwrap();
    let reset = cli(&scratch, bus, "keyring", &["auth", "fx", "--reset"]);
    assert_eq!(
        (reset.code, reset.stdout.as_str()),
        (0, "forgot the login for fx\n"),
        "{reset:?}"
    );
    assert_eq!(service.lookup(url), None);
    assert!(!token_file(&scratch).exists());

    // Where no keychain answers: `auto` keeps the file, `keyring` says why it cannot.
    let nowhere = format!("unix:path={}", scratch.0.join("no-bus").display());
    let refused = cli(
        &scratch,
        &nowhere,
        "keyring",
        &["--auth-follow", "auth", "fx"],
    );
    assert_eq!(refused.code, 3, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("token_store is \"keyring\" but the keychain cannot be used"),
        "{refused:?}"
    );
    let login = cli(&scratch, &nowhere, "auto", &["--auth-follow", "auth", "fx"]);
    assert_eq!(login.code, 0, "{login:?}");
    assert!(login.stdout.contains("state/mcp-cli/auth"), "{login:?}");
    assert!(token_file(&scratch).exists());
}

/// Moves the stored token's expiry to `secs` from now (negative: already expired).
fn age_token(scratch: &Scratch, secs: i64) {
    let file = token_file(scratch);
    let mut record: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    record["tokens"]["expires_at"] = json!(now + secs);
    record["tokens"]["issued_at"] = json!(now + secs - 3600);
    std::fs::write(&file, record.to_string()).unwrap();
}

/// GETs `url` (http only, no redirect followed): the whole answer, head and body.
fn get(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = TcpStream::connect(authority).unwrap();
    let request =
        format!("GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The fixture's `/stats`: refreshes granted and rotated refresh tokens replayed.
fn stats(fixture: &Fixture) -> Value {
    let answer = get(&fixture.url.replace("/mcp", "/stats"));
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap()
}

#[test]
fn twelve_concurrent_calls_with_an_expired_token_refresh_once() {
    let scratch = Scratch::new("oauth-twelve");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let login = scratch.cli(&["--auth-follow", "auth", "fx"]);
    assert_eq!(login.code, 0, "{login:?}");
    // A first call pins the tool: twelve first calls would race to write the pins file.
    let first = scratch.cli(&["call", "fx", "whoami"]);
    assert_eq!(first.code, 0, "{first:?}");
    age_token(&scratch, -5);
    let calls: Vec<Child> = (0..12)
        .map(|_| scratch.command(&["call", "fx", "whoami"]).spawn().unwrap())
        .collect();
    for call in calls {
        let output = call.wait_with_output().unwrap();
        assert_eq!(
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).as_ref()
            ),
            (Some(0), "scopes: read\n"),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stats = stats(&fixture);
    eprintln!("twelve concurrent calls with an expired token: {stats}");
    assert_eq!(stats, json!({"refreshes": 1, "replays": 0}));
}

#[test]
fn stored_auth_only_never_logs_in_but_uses_and_refreshes_a_stored_token() {
    let scratch = Scratch::new("oauth-stored-only");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let hint = "run `mcp-cli auth fx`";
    let flagged = scratch.cli(&[
        "--stored-auth-only",
        "--auth-follow",
        "call",
        "fx",
        "whoami",
    ]);
    assert_eq!(flagged.code, 3, "{flagged:?}");
    assert!(flagged.stderr.contains(hint), "{flagged:?}");
    let env = [
        ("MCP_CLI_STORED_AUTH_ONLY", "1"),
        ("MCP_CLI_AUTH_FOLLOW", "1"),
    ];
    let from_env = scratch.cli_with(&["call", "fx", "whoami"], &env, None);
    assert_eq!(from_env.code, 3, "{from_env:?}");
    assert!(from_env.stderr.contains(hint), "{from_env:?}");
    let auth = scratch.cli(&["--stored-auth-only", "auth", "fx"]);
    assert_eq!(auth.code, 2, "{auth:?}");
    assert!(auth.stderr.contains("forbids logging in"), "{auth:?}");
    // An ad hoc server on no terminal does not wait for a person either.
    let adhoc = scratch.cli(&[
        "--stored-auth-only",
        "--http",
        &fixture.url,
        "call",
        "whoami",
    ]);
    assert_eq!(adhoc.code, 3, "{adhoc:?}");
    assert!(fixture.seen("authorize").is_empty());

    let login = scratch.cli(&["--auth-follow", "auth", "fx"]);
    assert_eq!(login.code, 0, "{login:?}");
    age_token(&scratch, -5);
    let call = scratch.cli_with(&["call", "fx", "whoami"], &env, None);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
    assert_eq!(fixture.seen("token grant=refresh_token").len(), 1);
    assert_eq!(fixture.seen("authorize").len(), 1);
}

/// A login running in the background: its stderr read line by line as it comes.
struct Login {
    child: Child,
    stderr: BufReader<std::process::ChildStderr>,
    transcript: String,
}

impl Login {
    fn start(scratch: &Scratch, args: &[&str]) -> Self {
        let mut child = scratch.command(args).stdin(Stdio::piped()).spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        Self {
            child,
            stderr,
            transcript: format!("$ mcp-cli {}\n", args.join(" ")),
        }
    }

    /// Reads stderr up to the first line containing `marker`; that line.
    fn wait_for(&mut self, marker: &str) -> String {
        loop {
            let mut line = String::new();
            let read = self.stderr.read_line(&mut line).unwrap();
            assert!(
                read > 0,
                "stderr ended before {marker:?}:\n{}",
                self.transcript
            );
            self.transcript.push_str(&line);
            if line.contains(marker) {
                return line;
            }
        }
    }

    fn type_line(&mut self, text: &str) {
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(format!("{text}\n").as_bytes()).unwrap();
        self.transcript.push_str(&format!("(pasted) {text}\n"));
    }

    /// Waits for the end: the exit code, and the transcript with the rest of the output.
    fn finish(mut self) -> (i32, String) {
        drop(self.child.stdin.take());
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        let output = self.child.wait_with_output().unwrap();
        self.transcript.push_str(&rest);
        self.transcript
            .push_str(&String::from_utf8_lossy(&output.stdout));
        (output.status.code().unwrap_or(-1), self.transcript)
    }
}

/// The user code in the device login's prompt.
fn user_code(line: &str) -> String {
    line.split_whitespace().last().unwrap().to_owned()
}

#[test]
fn a_device_login_shows_the_code_polls_and_honours_slow_down() {
    let scratch = Scratch::new("oauth-device");
    let fixture = Fixture::start("slow-down", &scratch);
    configure(&scratch, &fixture);
    let mut login = Login::start(&scratch, &["auth", "fx", "--device"]);
    let line = login.wait_for("enter the code");
    let code = user_code(&line);
    assert!(line.contains(&format!("{}/device", fixture.url.trim_end_matches("/mcp"))));
    let approve = fixture
        .url
        .replace("/mcp", &format!("/device?user_code={code}&action=approve"));
    assert!(get(&approve).starts_with("HTTP/1.1 200"));
    let (code, transcript) = login.finish();
    eprintln!("{transcript}");
    assert_eq!(code, 0, "{transcript}");
    assert!(transcript.contains("logged in to fx"), "{transcript}");
    // The first poll was told to slow down; none came sooner than asked.
    assert_eq!(fixture.seen("device slow_down").len(), 1);
    assert!(fixture.seen("device poll too early").is_empty());
    assert_eq!(fixture.seen("token grant=device_code").len(), 1);
    let call = scratch.cli(&["--stored-auth-only", "call", "fx", "whoami"]);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
}

#[test]
fn a_device_login_refused_expired_or_not_offered_says_so() {
    let scratch = Scratch::new("oauth-device-no");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    for (action, expected) in [
        (
            "deny",
            "the login was refused on the authorization server's page (access_denied)",
        ),
        (
            "expire",
            "the device code expired before the login was approved",
        ),
    ] {
        let mut login = Login::start(&scratch, &["auth", "fx", "--device"]);
        let code = user_code(&login.wait_for("enter the code"));
        let url = fixture
            .url
            .replace("/mcp", &format!("/device?user_code={code}&action={action}"));
        assert!(get(&url).starts_with("HTTP/1.1 200"));
        let (status, transcript) = login.finish();
        assert_eq!(status, 3, "{transcript}");
        assert!(transcript.contains(expected), "{action}: {transcript}");
    }
    let other = Fixture::start("no-device", &scratch);
    let run = scratch.cli(&["--http", &other.url, "auth", "--device"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains("does not offer the device authorization grant"),
        "{run:?}"
    );
    assert!(run.stderr.contains("--no-browser"), "{run:?}");
}

#[test]
fn a_no_browser_login_takes_the_pasted_redirect_and_checks_its_state() {
    let scratch = Scratch::new("oauth-paste");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    // The person's browser, elsewhere: it ends on our redirect URI, which it cannot load.
    let redirect_of = |line: &str| {
        let url = line.trim();
        let answer = get(url);
        (answer.lines())
            .find_map(|l| l.strip_prefix("Location: "))
            .unwrap()
            .trim()
            .to_owned()
    };
    let mut tampered = Login::start(&scratch, &["auth", "fx", "--no-browser"]);
    let redirect = redirect_of(&tampered.wait_for("/authorize?"));
    tampered.type_line(&redirect.replace("state=", "state=x"));
    let (status, transcript) = tampered.finish();
    assert_eq!(status, 3, "{transcript}");
    assert!(transcript.contains("wrong `state`"), "{transcript}");

    let mut login = Login::start(&scratch, &["auth", "fx", "--no-browser"]);
    let line = login.wait_for("/authorize?");
    login.type_line(&redirect_of(&line));
    let (status, transcript) = login.finish();
    eprintln!("{transcript}");
    assert_eq!(status, 0, "{transcript}");
    assert!(transcript.contains("logged in to fx"), "{transcript}");
    let call = scratch.cli(&["--stored-auth-only", "call", "fx", "whoami"]);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
}

/// A login in two commands, for an agent that cannot wait on the person: `--start` returns
/// at once with the login URL and the command that finishes it; the person's browser ends on
/// the redirect address, which `--redirect` takes. A started login is used once: a replay,
/// or a redirect with another `state`, is refused.
#[test]
fn a_login_started_by_one_command_is_finished_by_another() {
    let scratch = Scratch::new("oauth-two-commands");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let start = || -> Value {
        let started = scratch.cli(&["--json", "auth", "fx", "--start"]);
        assert_eq!(started.code, 0, "{started:?}");
        serde_json::from_str(&started.stdout).unwrap()
    };
    // The person's browser, elsewhere: it ends on our redirect address, which nobody serves.
    let redirect_of = |started: &Value| {
        let url = started["login"]["url"].as_str().unwrap();
        assert!(url.contains("/authorize?response_type=code"), "{started}");
        let answer = get(url);
        let location = answer.lines().find_map(|l| l.strip_prefix("Location: "));
        location.unwrap().trim().to_owned()
    };
    let started = start();
    assert_eq!(started["server"], "fx");
    let complete = started["login"]["complete"].as_str().unwrap();
    assert_eq!(complete, "mcp-cli auth fx --redirect REDIRECT_URL");
    let redirect = redirect_of(&started);
    assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
    let finished = scratch.cli(&["--json", "auth", "fx", "--redirect", &redirect]);
    assert_eq!(finished.code, 0, "{finished:?}");
    let finished_json: Value = serde_json::from_str(&finished.stdout).unwrap();
    assert_eq!(finished_json, json!({"server": "fx", "logged_in": true}));
    let call = scratch.cli(&["--stored-auth-only", "call", "fx", "whoami"]);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
    assert!(!finished.stdout.contains("access-") && !finished.stderr.contains("access-"));

    let replayed = scratch.cli(&["auth", "fx", "--redirect", &redirect]);
    assert_eq!(replayed.code, 3, "{replayed:?}");
    assert!(
        replayed.stderr.contains("no login to fx was started"),
        "{replayed:?}"
    );
    let redirect = redirect_of(&start());
    let tampered = scratch.cli(&[
        "auth",
        "fx",
        "--redirect",
        &redirect.replace("state=", "state=x"),
    ]);
    assert_eq!(tampered.code, 3, "{tampered:?}");
    assert!(tampered.stderr.contains("wrong `state`"), "{tampered:?}");
    let again = scratch.cli(&["auth", "fx", "--redirect", &redirect]);
    assert!(
        again.stderr.contains("no login to fx was started"),
        "{again:?}"
    );
}

/// Under `--json` and without a terminal, a call to a server that needs a login starts one:
/// its error object carries the login URL and the command that finishes it, and the exit code
/// is needs-auth's (3), as before. Finished, the call goes through.
#[test]
fn a_call_that_needs_a_login_hands_out_the_login_under_json() {
    let scratch = Scratch::new("oauth-call-starts-login");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let call = scratch.cli(&["--json", "call", "fx", "whoami"]);
    assert_eq!(call.code, 3, "{call:?}");
    let error: Value = serde_json::from_str(call.stderr.trim()).unwrap();
    let login = &error["error"]["login"];
    assert_eq!(
        login["complete"], "mcp-cli auth fx --redirect REDIRECT_URL",
        "{error}"
    );
    let url = login["url"].as_str().unwrap();
    let answer = get(url);
    let redirect = answer
        .lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .unwrap();
    let finished = scratch.cli(&["auth", "fx", "--redirect", redirect.trim()]);
    assert_eq!(finished.code, 0, "{finished:?}");
    let call = scratch.cli(&["--json", "call", "fx", "whoami"]);
    assert_eq!(call.code, 0, "{call:?}");
    // Without --json the call only says what to run, and starts nothing.
    let other = Scratch::new("oauth-call-starts-login-text");
    configure(&other, &fixture);
    let before = fixture.seen("register").len();
    let call = other.cli(&["call", "fx", "whoami"]);
    assert_eq!(call.code, 3, "{call:?}");
    assert!(call.stderr.contains("run `mcp-cli auth fx`"), "{call:?}");
    assert_eq!(
        fixture.seen("register").len(),
        before,
        "nothing was started"
    );
    // An ad hoc server's finishing command names it by its flag.
    let adhoc = Scratch::new("oauth-call-starts-login-adhoc");
    let call = adhoc.cli(&["--json", "--http", &fixture.url, "call", "whoami"]);
    let error: Value = serde_json::from_str(call.stderr.trim()).unwrap();
    let complete = format!(
        "mcp-cli --http {} auth --redirect REDIRECT_URL",
        fixture.url
    );
    assert_eq!(error["error"]["login"]["complete"], complete, "{error}");
}

/// Through the daemon, as cold: the daemon has no terminal, but the caller says whether it
/// has one, and without one the login is started and handed out in the error object.
#[test]
fn a_warm_call_that_needs_a_login_hands_out_the_login_too() {
    let scratch = Scratch::new("oauth-warm-call-starts-login");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let runtime = scratch.0.join("run");
    let warm = |args: &[&str]| {
        let env = [("XDG_RUNTIME_DIR", runtime.to_str().unwrap())];
        scratch.cli_with(args, &env, None)
    };
    let started = warm(&["daemon", "start"]);
    assert_eq!(started.code, 0, "{started:?}");
    let call = warm(&["--json", "call", "fx", "whoami"]);
    assert_eq!(call.code, 3, "{call:?}");
    let error: Value = serde_json::from_str(call.stderr.trim()).unwrap();
    let login = &error["error"]["login"];
    assert_eq!(
        login["complete"], "mcp-cli auth fx --redirect REDIRECT_URL",
        "{error}"
    );
    let answer = get(login["url"].as_str().unwrap());
    let redirect = answer
        .lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .unwrap();
    let finished = warm(&["auth", "fx", "--redirect", redirect.trim()]);
    assert_eq!(finished.code, 0, "{finished:?}");
    let call = warm(&["--json", "call", "fx", "whoami"]);
    assert_eq!(call.code, 0, "{call:?}");
    // Run by the daemon, whose server is the one logged in.
    let status = warm(&["--json", "daemon", "status"]);
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let servers = status["servers"].as_array().unwrap();
    let fx = servers
        .iter()
        .find(|server| server["name"] == "fx")
        .unwrap();
    assert_eq!(fx["state"], "running", "{status}");
    let _ = warm(&["daemon", "stop"]);
}

/// The same with a device code: `--device --start` hands out the code, the person approves it
/// elsewhere, `--device --resume` gets the token.
#[test]
fn a_device_login_started_by_one_command_is_finished_by_another() {
    let scratch = Scratch::new("oauth-two-commands-device");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let started = scratch.cli(&["--json", "auth", "fx", "--device", "--start"]);
    assert_eq!(started.code, 0, "{started:?}");
    let started: Value = serde_json::from_str(&started.stdout).unwrap();
    let login = &started["login"];
    assert_eq!(
        login["complete"], "mcp-cli auth fx --device --resume",
        "{started}"
    );
    let code = login["userCode"].as_str().unwrap();
    let page = login["verificationUri"].as_str().unwrap();
    assert!(
        page.starts_with(&fixture.url.replace("/mcp", "/device")),
        "{started}"
    );
    let approve = fixture
        .url
        .replace("/mcp", &format!("/device?user_code={code}&action=approve"));
    assert!(get(&approve).starts_with("HTTP/1.1 200"));
    let finished = scratch.cli(&["auth", "fx", "--device", "--resume"]);
    assert_eq!(finished.code, 0, "{finished:?}");
    assert!(
        finished.stdout.starts_with("logged in to fx"),
        "{finished:?}"
    );
    let call = scratch.cli(&["--stored-auth-only", "call", "fx", "whoami"]);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
    let browser = scratch.cli(&["auth", "fx", "--redirect", "http://127.0.0.1:1/x"]);
    assert!(
        browser.stderr.contains("no login to fx was started"),
        "{browser:?}"
    );
}

#[test]
fn a_machine_client_gets_its_token_with_a_secret_by_basic_or_post() {
    let scratch = Scratch::new("oauth-machine");
    let fixture = Fixture::start("good", &scratch);
    // Approved without the secret in the environment: what is approved is the entry as written.
    scratch.project_file(
        ".mcp-cli.toml",
        &format!(
            "[mcp.fx]\nurl = \"{}\"\noauth_grant = \"client_credentials\"\n\
             oauth_client_id = \"machine\"\noauth_client_secret_env = \"FX_SECRET\"\n",
            fixture.url
        ),
    );
    // No terminal, no --auth-follow: a machine client needs no person.
    let call = scratch.cli_with(
        &["call", "fx", "whoami"],
        &[("FX_SECRET", "machine-secret")],
        None,
    );
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
    assert_eq!(
        fixture
            .seen("token grant=client_credentials auth=basic")
            .len(),
        1
    );
    assert!(fixture.seen("authorize").is_empty());
    let kept = std::fs::read_to_string(token_file(&scratch)).unwrap();
    assert!(
        !kept.contains("machine-secret"),
        "the secret is never written down: {kept}"
    );
    let wrong = scratch.cli_with(&["call", "fx", "whoami"], &[("FX_SECRET", "guess")], None);
    // The stored token still serves; only a new grant would show the wrong secret.
    assert_eq!(wrong.code, 0, "{wrong:?}");
    std::fs::remove_file(token_file(&scratch)).unwrap();
    let wrong = scratch.cli_with(&["call", "fx", "whoami"], &[("FX_SECRET", "guess")], None);
    assert_eq!(wrong.code, 3, "{wrong:?}");
    assert!(wrong.stderr.contains("invalid_client"), "{wrong:?}");

    // A server with no config entry, through the environment; this one takes the secret in
    // the form only.
    let post = Fixture::start("post-only", &scratch);
    let env = [
        ("MCP_CLI_OAUTH_GRANT", "client_credentials"),
        ("MCP_CLI_OAUTH_CLIENT_ID", "machine"),
        ("MCP_CLI_OAUTH_CLIENT_SECRET", "machine-secret"),
    ];
    let call = scratch.cli_with(&["--http", &post.url, "call", "whoami"], &env, None);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
    assert_eq!(
        post.seen("token grant=client_credentials auth=post").len(),
        1
    );
    let fresh = Scratch::new("oauth-machine-secretless");
    let typo = [("MCP_CLI_OAUTH_GRANT", "client_credential")];
    let refused = fresh.cli_with(&["--http", &post.url, "call", "whoami"], &typo, None);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("MCP_CLI_OAUTH_GRANT: oauth_grant is"),
        "{refused:?}"
    );
    let secretless = fresh.cli_with(&["--http", &post.url, "call", "whoami"], &env[..2], None);
    assert_eq!(secretless.code, 3, "{secretless:?}");
    assert!(
        secretless
            .stderr
            .contains("the client_credentials grant needs a client secret"),
        "{secretless:?}"
    );
}
