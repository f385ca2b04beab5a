//! `auth SERVER [--reset | --device | --no-browser]`: log in to a remote server now (browser,
//! device code, pasted redirect, or unattended with `--auth-follow` / `MCP_CLI_AUTH_FOLLOW=1`),
//! or forget its tokens and registration; `--start`, then `--redirect URL` or `--device
//! --resume`: a login in two commands, for a caller that cannot wait on the person.

use serde_json::json;

use crate::auth::{self, Login, Settings};
use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::output;

/// What `auth` was asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum How {
    /// `--start [--device]`.
    Start { device: bool },
    /// `--redirect URL`, or `--device --resume` (no URL).
    Finish { redirect: Option<String> },
    /// Log in through the browser (or unattended, under `--auth-follow`).
    Browser,
    /// `--device`.
    Device,
    /// `--no-browser`.
    Paste,
    /// `--reset`.
    Reset,
}

/// Runs `auth` for server `name` at `url`. `settings` come from the server's config entry and
/// the environment; unless they ask for [`Login::Follow`], the login goes the way `how` says.
pub(crate) async fn run(
    ctx: &mut Context,
    name: &str,
    url: &str,
    mut settings: Settings,
    how: How,
) -> Result<Exit, Failure> {
    if how == How::Reset {
        let removed = auth::reset(&settings, name, url).map_err(|error| {
            Failure::new(
                Exit::Server,
                format!("cannot delete the stored login for {name}: {error}"),
            )
        })?;
        if ctx.json {
            ctx.out
                .line(&json!({"server": name, "reset": true, "had_login": removed}).to_string());
        } else if removed {
            ctx.out.line(&format!("forgot the login for {name}"));
        } else {
            ctx.out.line(&format!("{name} had no stored login"));
        }
        return Ok(Exit::Success);
    }
    if settings.stored_only {
        return Err(Failure::usage(format!(
            "--stored-auth-only (or MCP_CLI_STORED_AUTH_ONLY) forbids logging in; run `mcp-cli \
             auth {name}` without it"
        )));
    }
    let kept = settings.clone();
    match &how {
        How::Start { device } => {
            let started = auth::start_login(name, url, settings, *device).await;
            let started = started.map_err(|error| cannot_log_in(name, &error))?;
            let command = ctx.naming.auth_command(name);
            show_started(ctx, name, &command, &started);
            return Ok(Exit::Success);
        }
        How::Finish { redirect } => {
            let finished = auth::finish_login(name, url, settings, redirect.as_deref()).await;
            finished.map_err(|error| cannot_log_in(name, &error))?;
            logged_in(ctx, name, &auth::kept_in(&kept, name, url));
            return Ok(Exit::Success);
        }
        _ => {}
    }
    settings.login = match how {
        How::Device => Login::Device,
        How::Paste => Login::Pasted,
        _ if settings.login == Login::Follow => Login::Follow,
        _ => Login::Browser,
    };
    auth::login(name, url, settings)
        .await
        .map_err(|error| cannot_log_in(name, &error))?;
    logged_in(ctx, name, &auth::kept_in(&kept, name, url));
    Ok(Exit::Success)
}

fn cannot_log_in(name: &str, error: &str) -> Failure {
    Failure::new(
        Exit::Server,
        format!(
            "cannot log in to {name}: {}",
            output::escape_controls(error)
        ),
    )
}

/// Under `--json` and with no terminal, a command that failed because `failure`'s server needs
/// a login starts one (`auth --start`) and says in its error object where the person goes and
/// what finishes it (`"login"`), so that an agent can hand both on. Nothing starts under
/// `--stored-auth-only`, for a machine client, or when the failure is another.
pub(crate) async fn start_for(ctx: &Context, mut failure: Failure) -> Failure {
    use std::io::IsTerminal;
    let Some(crate::hints::Hint::Auth { server }) = &failure.hint else {
        return failure;
    };
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let Ok((name, Some(remote))) = ctx.hub.remote(server) else {
        return failure;
    };
    let settings = ctx.hub.auth_settings(&remote);
    if !ctx.json || terminal || settings.stored_only || settings.grant != auth::Grant::default() {
        return failure;
    }
    let command = ctx.naming.auth_command(&name);
    match auth::start_login(&name, &remote.url, settings, false).await {
        Ok(started) => failure.login = Some(started_json(&command, &started)),
        Err(error) => {
            let error = output::escape_controls(&error);
            failure
                .message
                .push_str(&format!(" (a login could not be started: {error})"));
        }
    }
    failure
}

fn logged_in(ctx: &mut Context, name: &str, place: &str) {
    if ctx.json {
        ctx.out
            .line(&json!({"server": name, "logged_in": true}).to_string());
    } else {
        ctx.out.line(&format!(
            "logged in to {name}; the token is kept in {place}"
        ));
    }
}

/// What a started login asks of the person, and the command that finishes it (`command` is
/// `mcp-cli auth SERVER` as this run names the server): under `--json`,
/// `{"server", "login": {...}}` ([`started_json`]).
fn show_started(ctx: &mut Context, name: &str, command: &str, started: &auth::Started) {
    if ctx.json {
        let login = started_json(command, started);
        ctx.out
            .line(&json!({"server": name, "login": login}).to_string());
        return;
    }
    match started {
        auth::Started::Browser { url } => {
            ctx.out
                .line(&format!("open this address and sign in to {name}:"));
            ctx.out.line(&format!("  {url}"));
            ctx.out.line(
                "the browser then ends on a 127.0.0.1 address that does not load; finish with:",
            );
            ctx.out
                .line(&format!("  {command} --redirect 'THAT ADDRESS'"));
        }
        auth::Started::Device {
            user_code,
            verification_uri,
            ..
        } => {
            ctx.out.line(&format!(
                "open {verification_uri} on any device and enter the code {user_code}; then:"
            ));
            ctx.out.line(&format!("  {command} --device --resume"));
        }
    }
}

/// A started login as JSON: where the person goes, and `complete`, the command that finishes
/// it (the browser's address goes in place of `REDIRECT_URL`).
pub(crate) fn started_json(command: &str, started: &auth::Started) -> serde_json::Value {
    match started {
        auth::Started::Browser { url } => json!({
            "url": url,
            "complete": format!("{command} --redirect REDIRECT_URL"),
            "expiresIn": 600,
        }),
        auth::Started::Device {
            user_code,
            verification_uri,
            verification_uri_complete,
            expires_in,
        } => json!({
            "userCode": user_code,
            "verificationUri": verification_uri,
            "verificationUriComplete": verification_uri_complete,
            "complete": format!("{command} --device --resume"),
            "expiresIn": expires_in.as_secs(),
        }),
    }
}
