//! A login started by one command and finished by a later one, for a caller with no person
//! to wait on (an agent's shell): `auth --start` hands out where the person goes (the
//! authorization URL, or a device code), and `auth --redirect URL` (the address the browser
//! ended on) or `auth --device --resume` finishes it. What the second command needs (the PKCE
//! verifier, `state`, the registration, the authorization server) waits in a private file
//! beside the tokens, for ten minutes at most, and is gone once used.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::discovery::{Discovered, ServerMetadata};
use super::flow::{self, Attempt, Pkce};
use super::http::printable;
use super::store::{self, Secret, now_secs};
use super::{OAuth, Settings, device, urls};
use crate::files;

/// How long a started login waits for its second half.
const PENDING_FOR: u64 = 600;

/// What a started login asks of the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// Open `url` and sign in; the browser then ends on an address of `127.0.0.1` that does
    /// not load: that address goes to `mcp-cli auth SERVER --redirect URL`.
    Browser {
        /// The authorization URL.
        url: String,
    },
    /// Open `verification_uri` on any device and type `user_code` there (or open
    /// `verification_uri_complete`); then `mcp-cli auth SERVER --device --resume`.
    Device {
        /// The code to type.
        user_code: String,
        /// Where to type it.
        verification_uri: String,
        /// The same page with the code filled in, when the server offers one.
        verification_uri_complete: Option<String>,
        /// How long the code stays good.
        expires_in: Duration,
    },
}

/// Starts a login to server `name` at `url` and returns at once with what the person must do;
/// [`finish_login`] ends it. With `device`, the device authorization grant.
pub async fn start_login(
    name: &str,
    url: &str,
    settings: Settings,
    device: bool,
) -> Result<Started, String> {
    OAuth::new(name, url, settings).start(device).await
}

/// Finishes the login [`start_login`] began: with the address the browser ended on
/// (`redirect`), or, for a device code, by polling until the person approved it.
pub async fn finish_login(
    name: &str,
    url: &str,
    settings: Settings,
    redirect: Option<&str>,
) -> Result<(), String> {
    OAuth::new(name, url, settings).finish(redirect).await
}

/// The file a started login waits in.
#[derive(Serialize, Deserialize)]
struct Pending {
    server_url: String,
    /// Seconds since the epoch.
    expires_at: u64,
    server: ServerMetadata,
    resource: String,
    scopes_supported: Option<Vec<String>>,
    scopes: Vec<String>,
    /// A configured client's secret is not kept here: it comes from the config again.
    client: store::Client,
    /// The DPoP key the token request is to prove, when the tokens are to be bound.
    #[serde(default)]
    dpop_key: Option<Secret>,
    how: How,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum How {
    Browser {
        verifier: Secret,
        state: Secret,
        redirect_uri: String,
    },
    Device {
        grant: device::Grant,
    },
}

impl OAuth {
    /// [`start_login`] for this server.
    async fn start(&self, device: bool) -> Result<Started, String> {
        let name = &self.name;
        match self.settings.grant {
            super::Grant::AuthorizationCode => {}
            super::Grant::Enterprise => {
                return Err(format!(
                    "{name} logs in at its identity provider, in one command: run `mcp-cli auth \
                     {name}` (with --device or --no-browser where no browser opens)"
                ));
            }
            super::Grant::ClientCredentials | super::Grant::JwtBearer => {
                return Err(format!(
                    "{name} gets its tokens without a login (oauth_grant is not \
                     authorization_code): nothing to start"
                ));
            }
        }
        let bearer = self.ask_unauthorized().await?;
        let state = self.state.lock().await;
        let wanted = bearer
            .as_ref()
            .map(super::Bearer::scopes)
            .unwrap_or_default();
        let found = super::discovery::discover(&*self.http, &self.url, bearer.as_ref()).await?;
        // The loopback is bound only to settle the redirect address: nobody listens there,
        // and the person brings the address the browser ends on.
        let (loopback, attempt, client) = self.begin(&state, &found, wanted, device).await?;
        drop(loopback);
        let (how, started) = match device {
            false => {
                let url = flow::authorize_url(&found.server, &client, &attempt);
                let how = How::Browser {
                    verifier: Secret(attempt.pkce.verifier.clone()),
                    state: Secret(attempt.state.clone()),
                    redirect_uri: attempt.redirect_uri.clone(),
                };
                (how, Started::Browser { url })
            }
            true => {
                let (scopes, resource) = (&attempt.scopes, &attempt.resource);
                let (code, grant) =
                    device::authorize(&*self.http, &found.server, &client, scopes, resource)
                        .await?;
                let started = Started::Device {
                    user_code: code.user_code,
                    verification_uri: code.verification_uri,
                    verification_uri_complete: code.verification_uri_complete,
                    expires_in: code.expires_in,
                };
                (How::Device { grant }, started)
            }
        };
        let mut kept = client;
        if kept.source == "configured" {
            kept.client_secret = None;
        }
        let pending = Pending {
            server_url: self.url.clone(),
            expires_at: now_secs() + PENDING_FOR,
            server: found.server,
            resource: found.resource,
            scopes_supported: found.scopes_supported,
            scopes: attempt.scopes,
            dpop_key: kept.dpop.as_ref().map(|prover| Secret(prover.stored())),
            client: kept,
            how,
        };
        self.keep_pending(&pending)?;
        Ok(started)
    }

    /// [`finish_login`] for this server.
    async fn finish(&self, redirect: Option<&str>) -> Result<(), String> {
        let name = &self.name;
        let pending = self.take_pending()?;
        let mut client = pending.client;
        if client.source == "configured" {
            client.client_secret = self.settings.client_secret.clone().map(Secret);
        }
        client.dpop = (pending.dpop_key.as_ref())
            .map(|key| super::dpop::Prover::from_stored(&key.0))
            .transpose()?
            .map(std::sync::Arc::new);
        let found = Discovered {
            resource: pending.resource,
            scopes_supported: pending.scopes_supported,
            dpop: client.dpop.is_some(),
            server: pending.server,
        };
        let mut state = self.state.lock().await;
        let tokens = match (pending.how, redirect) {
            (How::Browser { .. }, None) => {
                return Err(format!(
                    "the login to {name} was started in the browser: finish it with `mcp-cli \
                     auth {name} --redirect URL`, URL being the address the browser ended on"
                ));
            }
            (How::Device { .. }, Some(_)) => {
                return Err(format!(
                    "the login to {name} was started with a device code: finish it with \
                     `mcp-cli auth {name} --device --resume`"
                ));
            }
            (
                How::Browser {
                    verifier,
                    state: expected,
                    redirect_uri,
                },
                Some(redirect),
            ) => {
                let attempt = Attempt {
                    pkce: Pkce::from_verifier(verifier.0),
                    state: expected.0,
                    redirect_uri,
                    scopes: pending.scopes,
                    resource: found.resource.clone(),
                };
                let address = urls::parse(redirect.trim()).map_err(|_| {
                    format!("--redirect is not a URL: {}", printable(redirect.trim()))
                })?;
                if !flow::is_redirect(&address, &attempt.redirect_uri) {
                    return Err(format!(
                        "--redirect is not this login's redirect (it starts with {})",
                        attempt.redirect_uri
                    ));
                }
                let code = flow::read_redirect(&address, &attempt, &found.server)?;
                let token_endpoint = &found.server.token_endpoint;
                flow::exchange(&*self.http, token_endpoint, &client, &attempt, &code).await?
            }
            (How::Device { grant }, None) => {
                let (scopes, resource) = (&pending.scopes, &found.resource);
                device::poll(
                    &*self.http,
                    &found.server,
                    &client,
                    scopes,
                    resource,
                    &grant,
                )
                .await?
            }
        };
        self.keep(&mut state, &found, client, tokens)
    }

    fn pending_path(&self) -> PathBuf {
        store::path(&self.settings.dir, &self.name).with_extension("pending.json")
    }

    fn keep_pending(&self, pending: &Pending) -> Result<(), String> {
        let path = self.pending_path();
        let failed = |error: std::io::Error| {
            format!(
                "cannot keep the started login in {}: {error}",
                path.display()
            )
        };
        files::private_dir(&self.settings.dir).map_err(failed)?;
        let text = serde_json::to_vec(pending).map_err(|error| error.to_string())?;
        let replaced = files::replace(&path, &text, 0o600, || Ok::<(), std::io::Error>(()));
        replaced.map_err(|error| format!("cannot keep the started login: {error:?}"))
    }

    /// The started login, removed from its file (a second finish cannot replay it); an error
    /// when there is none for this server's URL, or it has expired.
    fn take_pending(&self) -> Result<Pending, String> {
        let (name, path) = (&self.name, self.pending_path());
        let none =
            || format!("no login to {name} was started: run `mcp-cli auth {name} --start` first");
        let text = files::read_private(&path).map_err(|_| none())?;
        let _ = std::fs::remove_file(&path);
        let pending: Pending = serde_json::from_slice(&text).map_err(|_| none())?;
        if pending.server_url != self.url {
            return Err(none());
        }
        if now_secs() > pending.expires_at {
            return Err(format!(
                "the login to {name} was started over {} minutes ago and has expired: run \
                 `mcp-cli auth {name} --start` again",
                PENDING_FOR / 60
            ));
        }
        Ok(pending)
    }
}
