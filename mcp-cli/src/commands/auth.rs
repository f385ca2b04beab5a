//! `auth SERVER [--reset | --device | --no-browser]`: log in to a remote server now (browser,
//! device code, pasted redirect, or unattended with `--auth-follow` / `MCP_CLI_AUTH_FOLLOW=1`),
//! or forget its tokens and registration.

use serde_json::json;

use crate::auth::{self, Login, Settings};
use crate::commands::Context;
use crate::exit::{Exit, Failure};
use crate::output;

/// What `auth` was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum How {
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
    settings.login = match how {
        How::Device => Login::Device,
        How::Paste => Login::Pasted,
        _ if settings.login == Login::Follow => Login::Follow,
        _ => Login::Browser,
    };
    let kept = settings.clone();
    auth::login(name, url, settings).await.map_err(|error| {
        Failure::new(
            Exit::Server,
            format!(
                "cannot log in to {name}: {}",
                output::escape_controls(&error)
            ),
        )
    })?;
    if ctx.json {
        ctx.out
            .line(&json!({"server": name, "logged_in": true}).to_string());
    } else {
        let place = auth::kept_in(&kept, name, url);
        ctx.out.line(&format!(
            "logged in to {name}; the token is kept in {place}"
        ));
    }
    Ok(Exit::Success)
}
