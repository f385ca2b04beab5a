//! OAuth through the real HTTP transport: `mcp_client_cli::auth::OAuth` as the authorizer of
//! `mcp_smol::connect` with an `HttpServer`, against `mcp-oauth-fixture` (an authorization server and the MCP
//! server it protects). Logins unattended (`Login::Follow`) and through a stand-in browser.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use mcp_client_cli::auth::{self, Login, OAuth, Settings};
use mcp_smol::{Authorizer, Client, Error, HttpServer, Options};
use serde_json::json;

use crate::support::{Scratch, bounded, text};

const OAUTH_FIXTURE: &str = env!("CARGO_BIN_EXE_mcp-oauth-fixture");

/// The fixture, killed when the test ends however it ends.
pub(crate) struct Fixture {
    child: Child,
    pub(crate) url: String,
    log: std::path::PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Fixture {
    pub(crate) fn start(mode: &str, scratch: &Scratch) -> Self {
        let log = scratch.0.join("fixture.log");
        let mut child = Command::new(OAUTH_FIXTURE)
            .arg(mode)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            log,
        }
    }

    /// The fixture's log lines that start with `prefix`.
    pub(crate) fn seen(&self, prefix: &str) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        (text.lines())
            .filter(|line| line.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }
}

fn settings(dir: &Path, login: Login) -> Settings {
    Settings {
        login,
        dir: dir.join("auth"),
        // Never a developer's own keychain.
        token_store: auth::TokenStore::File,
        timeout: Duration::from_secs(10),
        login_timeout: Duration::from_secs(30),
        browser: None,
        ..Settings::from_env(&|_| None)
    }
}

fn options() -> Options {
    let defaults = Options::default();
    Options {
        core: mcp_smol::proto::Config {
            handshake_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            ..defaults.core
        },
        ..defaults
    }
}

async fn connect(fixture: &Fixture, oauth: Arc<OAuth>) -> Result<Client, Error> {
    let mut server = HttpServer::new(fixture.url.clone());
    server.authorizer = Some(oauth as Arc<dyn Authorizer>);
    mcp_smol::connect(server, options()).await
}

async fn whoami(client: &Client) -> String {
    let result = client.call_tool("whoami", json!({})).await.unwrap();
    text(&result)
}

#[test]
fn an_unattended_login_is_used_and_kept_for_the_next_run() {
    let scratch = Scratch::new("oauth-follow");
    let fixture = Fixture::start("good", &scratch);
    bounded(async {
        let oauth = OAuth::new("fx", &fixture.url, settings(&scratch.0, Login::Follow));
        let client = connect(&fixture, oauth).await.unwrap();
        let tools = client.list_tools().await.unwrap();
        assert_eq!(tools[0].name, "whoami");
        // The challenge asked for `read`: that is what was asked for and granted.
        assert_eq!(whoami(&client).await, "scopes: read");
        client.close().await;
    });
    let authorize = fixture.seen("authorize");
    assert_eq!(authorize.len(), 1, "{authorize:?}");
    assert!(
        authorize[0].contains(&format!("resource={}", fixture.url)),
        "{authorize:?}"
    );
    assert_eq!(fixture.seen("register").len(), 1);
    let kept = settings(&scratch.0, Login::Never);
    assert!(auth::has_token(&kept, "fx", &fixture.url));
    let file = scratch.0.join("auth/fx.json");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // The next run logs in with nobody's help: the stored token is enough.
    bounded(async {
        let oauth = OAuth::new("fx", &fixture.url, settings(&scratch.0, Login::Never));
        let client = connect(&fixture, oauth).await.unwrap();
        assert_eq!(whoami(&client).await, "scopes: read");
        client.close().await;
    });
    assert_eq!(fixture.seen("authorize").len(), 1);
}

#[test]
fn without_a_token_and_without_a_login_the_server_is_unauthorized() {
    let scratch = Scratch::new("oauth-never");
    let fixture = Fixture::start("good", &scratch);
    let error = bounded(async {
        let oauth = OAuth::new("fx", &fixture.url, settings(&scratch.0, Login::Never));
        connect(&fixture, oauth).await.map(|_| ()).unwrap_err()
    });
    assert!(
        matches!(error, Error::Unauthorized { status: 401, .. }),
        "{error:?}"
    );
    assert!(fixture.seen("authorize").is_empty());
}

/// Logs in unattended and makes one call, as a first run would.
fn first_run(fixture: &Fixture, scratch: &Scratch) {
    bounded(async {
        let oauth = OAuth::new("fx", &fixture.url, settings(&scratch.0, Login::Follow));
        let client = connect(fixture, oauth).await.unwrap();
        assert_eq!(whoami(&client).await, "scopes: read");
        client.close().await;
    });
}

/// Moves the stored hour-long token's life on until it expires in `secs`, as time would.
fn age_token(scratch: &Scratch, secs: u64) {
    let file = scratch.0.join("auth/fx.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    record["tokens"]["expires_at"] = json!(now + secs);
    record["tokens"]["issued_at"] = json!(now + secs - 3600);
    std::fs::write(&file, record.to_string()).unwrap();
}

#[test]
fn a_token_near_expiry_is_refreshed_before_use() {
    let scratch = Scratch::new("oauth-refresh");
    let fixture = Fixture::start("good", &scratch);
    first_run(&fixture, &scratch);
    age_token(&scratch, 30);
    bounded(async {
        let oauth = OAuth::new("fx", &fixture.url, settings(&scratch.0, Login::Never));
        let client = connect(&fixture, oauth).await.unwrap();
        assert_eq!(whoami(&client).await, "scopes: read");
        client.close().await;
    });
    assert_eq!(fixture.seen("token grant=refresh_token").len(), 1);
    assert_eq!(fixture.seen("authorize").len(), 1);
    // The old token was never sent once it was near expiry.
    assert!(
        fixture
            .seen("mcp rpc=")
            .iter()
            .all(|l| !l.ends_with("auth=invalid"))
    );
}

#[test]
fn a_refused_refresh_means_a_new_login() {
    let scratch = Scratch::new("oauth-revoked");
    let fixture = Fixture::start("no-refresh", &scratch);
    first_run(&fixture, &scratch);
    // Without a login allowed, the spent login leaves the server unauthorized.
    age_token(&scratch, 30);
    let error = bounded(async {
        let oauth = OAuth::new("fx", &fixture.url, settings(&scratch.0, Login::Never));
        connect(&fixture, oauth).await.map(|_| ()).unwrap_err()
    });
    assert!(matches!(error, Error::Unauthorized { .. }), "{error:?}");
    assert!(!auth::has_token(
        &settings(&scratch.0, Login::Never),
        "fx",
        &fixture.url
    ));
    // With one allowed, it logs in again.
    first_run(&fixture, &scratch);
    assert_eq!(fixture.seen("authorize").len(), 2);
    assert_eq!(fixture.seen("token grant=refresh_token").len(), 1);
}

#[test]
fn insufficient_scope_steps_up_to_the_union() {
    let scratch = Scratch::new("oauth-step-up");
    let fixture = Fixture::start("step-up", &scratch);
    bounded(async {
        let oauth = OAuth::new("fx", &fixture.url, settings(&scratch.0, Login::Follow));
        let client = connect(&fixture, oauth).await.unwrap();
        assert_eq!(whoami(&client).await, "scopes: read write");
        client.close().await;
    });
    let scopes: Vec<String> = (fixture.seen("authorize").iter())
        .map(|line| {
            line.split(" scope=")
                .nth(1)
                .unwrap()
                .split(" resource=")
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(scopes, ["read", "read write"]);
    // The same registration served both logins.
    assert_eq!(fixture.seen("register").len(), 1);
}

#[test]
fn failures_say_which_step_and_what_to_do() {
    let scratch = Scratch::new("oauth-failures");
    for (mode, expected) in [
        ("no-registration", "offers no dynamic client registration"),
        ("plain-pkce", "does not support PKCE with S256"),
    ] {
        let fixture = Fixture::start(mode, &scratch);
        let error = bounded(async {
            let oauth = OAuth::new("fx", &fixture.url, settings(&scratch.0, Login::Follow));
            connect(&fixture, oauth).await.map(|_| ()).unwrap_err()
        });
        let message = error.to_string();
        assert!(message.contains(expected), "{mode}: {message}");
        assert!(message.contains("authorizing fx"), "{mode}: {message}");
        assert!(fixture.seen("authorize").is_empty(), "{mode}");
    }
}

#[test]
fn auth_login_goes_through_the_browser_and_reset_forgets() {
    let scratch = Scratch::new("oauth-browser");
    let fixture = Fixture::start("good", &scratch);
    let mut settings = settings(&scratch.0, Login::Browser);
    // The stand-in browser follows the authorization server's redirect to our loopback.
    settings.browser = Some(format!("{OAUTH_FIXTURE} browse"));
    let kept = settings.clone();
    bounded(auth::login("fx", &fixture.url, settings)).unwrap();
    assert!(auth::has_token(&kept, "fx", &fixture.url));
    assert_eq!(fixture.seen("authorize").len(), 1);
    assert!(auth::reset(&kept, "fx", &fixture.url).unwrap());
    assert!(!auth::has_token(&kept, "fx", &fixture.url));
    assert!(!auth::reset(&kept, "fx", &fixture.url).unwrap());
}

/// A project config naming the fixture as server `fx`.
pub(crate) fn configure(scratch: &Scratch, fixture: &Fixture) {
    scratch.project_file(
        ".mcp-cli.toml",
        &format!("[mcp.fx]\nurl = \"{}\"\n", fixture.url),
    );
}

#[test]
fn the_cli_lists_needs_auth_until_auth_logs_in_and_after_reset() {
    let scratch = Scratch::new("oauth-cli");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let servers = scratch.cli(&["servers"]);
    assert!(servers.stdout.contains("needs-auth"), "{servers:?}");
    let call = scratch.cli(&["call", "fx", "whoami"]);
    assert_eq!(call.code, 3, "{call:?}");
    assert!(call.stderr.contains("run `mcp-cli auth fx`"), "{call:?}");
    assert!(
        fixture.seen("authorize").is_empty(),
        "a configured server never logs in by itself"
    );

    let login = scratch.cli(&["--auth-follow", "auth", "fx"]);
    assert_eq!(login.code, 0, "{login:?}");
    assert!(login.stdout.starts_with("logged in to fx"), "{login:?}");
    let call = scratch.cli(&["call", "fx", "whoami"]);
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "scopes: read\n"),
        "{call:?}"
    );
    // Tokens never reach the output.
    for run in [&login, &call] {
        assert!(
            !run.stdout.contains("access-") && !run.stderr.contains("access-"),
            "{run:?}"
        );
    }

    let reset = scratch.cli(&["auth", "fx", "--reset"]);
    assert_eq!(
        (reset.code, reset.stdout.as_str()),
        (0, "forgot the login for fx\n")
    );
    let call = scratch.cli(&["call", "fx", "whoami"]);
    assert_eq!(call.code, 3, "{call:?}");
}

#[test]
fn the_cli_logs_in_through_the_browser_it_is_given() {
    let scratch = Scratch::new("oauth-cli-browser");
    let fixture = Fixture::start("good", &scratch);
    configure(&scratch, &fixture);
    let browser = format!("{OAUTH_FIXTURE} browse");
    let login = scratch.cli_with(&["auth", "fx"], &[("BROWSER", &browser)], None);
    assert_eq!(login.code, 0, "{login:?}");
    // The URL is printed whether or not a browser opens.
    assert!(
        login.stderr.contains("/authorize?response_type=code"),
        "{login:?}"
    );
    assert_eq!(fixture.seen("authorize").len(), 1);
    assert_eq!(
        scratch.cli(&["call", "fx", "whoami"]).stdout,
        "scopes: read\n"
    );
}

#[test]
fn the_cli_logs_in_unattended_to_an_ad_hoc_server() {
    let scratch = Scratch::new("oauth-cli-adhoc");
    let fixture = Fixture::start("step-up", &scratch);
    let run = scratch.cli(&["--auth-follow", "--http", &fixture.url, "call", "whoami"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "scopes: read write\n"),
        "{run:?}"
    );
    // Without the switch and without a terminal, nothing logs in.
    let fresh = Scratch::new("oauth-cli-adhoc-fresh");
    let run = fresh.cli(&["--http", &fixture.url, "call", "whoami"]);
    assert_eq!(run.code, 3, "{run:?}");
    let hint = format!("run `mcp-cli --http {} auth`", fixture.url);
    assert!(run.stderr.contains(&hint), "{run:?}");
    assert_eq!(fixture.seen("authorize").len(), 2);
}
