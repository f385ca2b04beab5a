//! The device authorization grant (RFC 8628), for logins from a machine without a browser:
//! the person opens a URL on any other device and types a short code there while we poll the
//! token endpoint at the interval the server asks for.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::discovery::ServerMetadata;
use super::flow;
use super::http::{Http, printable};
use super::store::{Client, Tokens};

/// `grant_type` of the polls (RFC 8628 §3.4).
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// The poll interval when the server names none (RFC 8628 §3.2), and what `slow_down` adds.
const DEFAULT_INTERVAL: u64 = 5;
const SLOW_DOWN_STEP: u64 = 5;

#[derive(Deserialize)]
struct DeviceAuthorization {
    device_code: String,
    user_code: String,
    verification_uri: String,
    verification_uri_complete: Option<String>,
    expires_in: u64,
    interval: Option<u64>,
}

/// What the person is shown: the code, and where to type it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Code {
    pub(crate) user_code: String,
    pub(crate) verification_uri: String,
    pub(crate) verification_uri_complete: Option<String>,
    pub(crate) expires_in: Duration,
}

/// A device code the authorization server handed out, as the polls need it: kept across
/// commands when a login is started and finished later (`auth --device --start`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, Deserialize)]
pub(crate) struct Grant {
    pub(crate) device_code: super::store::Secret,
    pub(crate) interval: u64,
    /// Until when the code is good, in seconds since the epoch.
    pub(crate) expires_at: u64,
    /// How long it was good for, for the message when it runs out.
    pub(crate) expires_in: u64,
}

/// Runs the grant for `client` at `server`: asks for a code, shows it through `show`, polls
/// until the person approved or refused or the code expired.
pub(crate) async fn login(
    http: &dyn Http,
    server: &ServerMetadata,
    client: &Client,
    scopes: &[String],
    resource: &str,
    show: impl FnOnce(Code),
) -> Result<Tokens, String> {
    let (code, grant) = authorize(http, server, client, scopes, resource).await?;
    show(code);
    poll(http, server, client, scopes, resource, &grant).await
}

/// Asks `server` for a device code: what the person is shown, and what the polls need.
pub(crate) async fn authorize(
    http: &dyn Http,
    server: &ServerMetadata,
    client: &Client,
    scopes: &[String],
    resource: &str,
) -> Result<(Code, Grant), String> {
    let Some(endpoint) = &server.device_authorization_endpoint else {
        return Err(format!(
            "the authorization server {} does not offer the device authorization grant (no \
             device_authorization_endpoint in its metadata); log in with --no-browser instead",
            printable(&server.issuer)
        ));
    };
    let scope = scopes.join(" ");
    let mut params = vec![("resource", resource)];
    if !scope.is_empty() {
        params.push(("scope", &scope));
    }
    // Proofs are for the token endpoint (RFC 9449 §5), not for this one.
    let unproved = Client {
        dpop: None,
        ..client.clone()
    };
    let response = flow::post_as_client(http, endpoint, &unproved, &params).await?;
    if !response.is_success() {
        return Err(format!(
            "the device authorization request at {endpoint} failed: {}",
            response.describe()
        ));
    }
    let device: DeviceAuthorization = response.json("device authorization response", endpoint)?;
    let code = Code {
        user_code: device.user_code.clone(),
        verification_uri: device.verification_uri.clone(),
        verification_uri_complete: device.verification_uri_complete.clone(),
        expires_in: Duration::from_secs(device.expires_in),
    };
    let grant = Grant {
        device_code: super::store::Secret(device.device_code),
        interval: device.interval.unwrap_or(DEFAULT_INTERVAL),
        expires_at: super::store::now_secs().saturating_add(device.expires_in),
        expires_in: device.expires_in,
    };
    Ok((code, grant))
}

/// Polls the token endpoint at the interval the server asks for, until the person approved
/// or refused or the code expired.
pub(crate) async fn poll(
    http: &dyn Http,
    server: &ServerMetadata,
    client: &Client,
    scopes: &[String],
    resource: &str,
    grant: &Grant,
) -> Result<Tokens, String> {
    let left = grant.expires_at.saturating_sub(super::store::now_secs());
    let deadline = Instant::now() + Duration::from_secs(left);
    let mut interval = grant.interval;
    let token_endpoint = &server.token_endpoint;
    let params = [
        ("grant_type", DEVICE_GRANT),
        ("device_code", grant.device_code.0.as_str()),
        ("resource", resource),
    ];
    loop {
        async_io::Timer::after(Duration::from_secs(interval)).await;
        if Instant::now() >= deadline {
            return Err(expired(grant.expires_in));
        }
        let response = flow::post_as_client(http, token_endpoint, client, &params).await?;
        if response.is_success() {
            let what = "the device code grant";
            return flow::tokens_from(&response, token_endpoint, what, client, scopes.to_vec());
        }
        match flow::error_code(&response).as_deref() {
            Some("authorization_pending") => {}
            Some("slow_down") => interval += SLOW_DOWN_STEP,
            Some("access_denied") => {
                return Err("the login was refused on the authorization server's page \
                            (access_denied)"
                    .into());
            }
            Some("expired_token") => return Err(expired(grant.expires_in)),
            _ => {
                return Err(format!(
                    "waiting for the device login at {token_endpoint} failed: {}",
                    response.describe()
                ));
            }
        }
    }
}

fn expired(secs: u64) -> String {
    let minutes = secs.div_ceil(60);
    format!(
        "the device code expired before the login was approved (it was good for {minutes} \
         minutes); run the login again (expired_token)"
    )
}
