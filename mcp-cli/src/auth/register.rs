//! Who we are to the authorization server: a configured client id, else a client ID metadata
//! document URL, else a registration of our own (RFC 7591), else an error saying what to
//! configure.

use serde::Deserialize;
use serde_json::json;

use super::discovery::ServerMetadata;
use super::http::{Http, Request, printable};
use super::store::{Client, Secret};

/// The client identity the user configured, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<String>,
    /// An https URL serving our client ID metadata document.
    pub(crate) metadata_url: Option<String>,
    /// A key to sign client assertions with (`private_key_jwt`), instead of a secret.
    pub(crate) private_key: Option<super::PrivateKey>,
}

/// The client registered by hand, when `identity` names one: authenticated by its key, or
/// by its secret as `server` lists, or not at all.
pub(crate) fn configured(server: &ServerMetadata, identity: &Identity) -> Option<Client> {
    let client_id = identity.client_id.as_ref()?;
    let secret = identity.client_secret.clone().map(Secret);
    let method = match &identity.private_key {
        Some(_) => "private_key_jwt".into(),
        None => auth_method(server, secret.is_some(), None),
    };
    Some(Client {
        client_id: client_id.clone(),
        auth_method: method,
        client_secret: secret,
        redirect_uri: None,
        source: "configured".into(),
        signer: (identity.private_key.clone()).map(|key| super::machine::Signer {
            key,
            audience: server.issuer.clone(),
        }),
        grant_types: Vec::new(),
        dpop: None,
    })
}

/// The grant of a device login (RFC 8628 §3.4), which a registration must name.
pub(crate) const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// The client to use with `server`, whose redirect URI will be `redirect_uri`, for the
/// `grants` a registration names. `stored` is a dynamic registration from an earlier login
/// with the same issuer, used again when it has the same redirect URI and those grants.
pub(crate) async fn client(
    http: &dyn Http,
    server: &ServerMetadata,
    identity: &Identity,
    stored: Option<Client>,
    redirect_uri: &str,
    grants: &[&str],
) -> Result<Client, String> {
    if let Some(client) = configured(server, identity) {
        return Ok(client);
    }
    if server.client_id_metadata_document_supported
        && let Some(url) = &identity.metadata_url
    {
        return Ok(Client {
            client_id: url.clone(),
            client_secret: None,
            auth_method: "none".into(),
            redirect_uri: None,
            source: "metadata-document".into(),
            signer: None,
            grant_types: Vec::new(),
            dpop: None,
        });
    }
    let fits = |c: &Client| {
        c.redirect_uri.as_deref() == Some(redirect_uri)
            && grants
                .iter()
                .all(|grant| c.grant_types.iter().any(|g| g == grant))
    };
    if let Some(client) = stored.filter(fits) {
        return Ok(client);
    }
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(format!(
            "the authorization server {} offers no dynamic client registration{}; register \
             mcp-cli with it (redirect URI {redirect_uri}) and set `oauth_client_id` (and \
             `oauth_client_secret_env` if it gave a secret) in the server's config entry",
            printable(&server.issuer),
            if server.client_id_metadata_document_supported {
                " (it accepts client ID metadata documents: `oauth_client_metadata_url` is the other way)"
            } else {
                ""
            }
        ));
    };
    register(http, server, endpoint, redirect_uri, grants).await
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

/// RFC 7591 dynamic registration as a public client (a CLI cannot keep a secret; the server
/// may hand us one anyway, and then we use it), for `grants` (`authorization_code` and
/// `refresh_token`, with the device grant for a device login: a server holds a client to
/// the grants it registered, RFC 7591 §2).
async fn register(
    http: &dyn Http,
    server: &ServerMetadata,
    endpoint: &str,
    redirect_uri: &str,
    grants: &[&str],
) -> Result<Client, String> {
    let body = json!({
        "client_name": "mcp-cli",
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": grants,
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    let request = Request::post(endpoint, "application/json", body.to_string());
    let response = http.send(request).await?;
    if !response.is_success() {
        return Err(format!(
            "dynamic client registration at {endpoint} failed: {}",
            response.describe()
        ));
    }
    let registered: Registered = response.json("client registration response", endpoint)?;
    let secret = registered
        .client_secret
        .filter(|s| !s.is_empty())
        .map(Secret);
    Ok(Client {
        client_id: registered.client_id,
        auth_method: auth_method(
            server,
            secret.is_some(),
            registered.token_endpoint_auth_method.as_deref(),
        ),
        client_secret: secret,
        redirect_uri: Some(redirect_uri.to_owned()),
        source: "dynamic".into(),
        signer: None,
        grant_types: grants.iter().map(|grant| (*grant).to_owned()).collect(),
        dpop: None,
    })
}

/// How to authenticate at the token endpoint: what the registration said, else the first
/// secret-based method the server lists when we have a secret, else `none`.
fn auth_method(server: &ServerMetadata, has_secret: bool, registered: Option<&str>) -> String {
    if let Some(method) = registered {
        return method.to_owned();
    }
    if !has_secret {
        return "none".into();
    }
    // RFC 8414 §2: an absent list means client_secret_basic.
    let supported = (server.token_endpoint_auth_methods_supported.clone())
        .unwrap_or_else(|| vec!["client_secret_basic".into()]);
    ["client_secret_basic", "client_secret_post", "none"]
        .into_iter()
        .find(|method| supported.iter().any(|s| s == method))
        .unwrap_or("client_secret_basic")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::http::canned::{Canned, json as answer};
    use super::*;

    const BROWSER: &[&str] = &["authorization_code", "refresh_token"];

    fn server(extra: serde_json::Value) -> ServerMetadata {
        let mut base = json!({
            "issuer": "http://as",
            "authorization_endpoint": "http://as/authorize",
            "token_endpoint": "http://as/token",
        });
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            base.extend(extra.clone());
        }
        serde_json::from_value(base).expect("metadata")
    }

    const REDIRECT: &str = "http://127.0.0.1:5000/callback";

    #[test]
    fn configured_id_wins_and_picks_a_secret_method() {
        let identity = Identity {
            client_id: Some("mine".into()),
            client_secret: Some("s".into()),
            metadata_url: Some("https://me/client.json".into()),
            private_key: None,
        };
        let server = server(json!({
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "client_id_metadata_document_supported": true,
        }));
        let client = async_io::block_on(client(
            &Canned::default(),
            &server,
            &identity,
            None,
            REDIRECT,
            BROWSER,
        ))
        .expect("client");
        assert_eq!(client.client_id, "mine");
        assert_eq!(client.auth_method, "client_secret_post");
    }

    #[test]
    fn metadata_document_when_advertised_and_configured() {
        let identity = Identity {
            metadata_url: Some("https://me/client.json".into()),
            ..Identity::default()
        };
        let with = server(
            json!({"client_id_metadata_document_supported": true, "registration_endpoint": "http://as/register"}),
        );
        let client = async_io::block_on(client(
            &Canned::default(),
            &with,
            &identity,
            None,
            REDIRECT,
            BROWSER,
        ))
        .expect("client");
        assert_eq!(
            (client.client_id.as_str(), client.auth_method.as_str()),
            ("https://me/client.json", "none")
        );
    }

    #[test]
    fn registers_dynamically_and_reuses_a_stored_registration() {
        let http = Canned::default().on("POST", "http://as/register", |request| {
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
            assert_eq!(body["redirect_uris"][0], REDIRECT);
            answer(201, json!({"client_id": "new", "client_secret": "sec", "token_endpoint_auth_method": "client_secret_basic"}))
        });
        let server = server(json!({"registration_endpoint": "http://as/register"}));
        let fresh = async_io::block_on(client(
            &http,
            &server,
            &Identity::default(),
            None,
            REDIRECT,
            BROWSER,
        ))
        .expect("registered");
        assert_eq!(fresh.client_id, "new");
        assert_eq!(fresh.auth_method, "client_secret_basic");
        assert_eq!(fresh.client_secret, Some(Secret("sec".into())));
        let again = async_io::block_on(client(
            &http,
            &server,
            &Identity::default(),
            Some(fresh.clone()),
            REDIRECT,
            BROWSER,
        ))
        .expect("reused");
        assert_eq!(again, fresh);
        assert_eq!(http.urls().len(), 1);
        // A device login needs a registration that names the device grant: a new one.
        let device = [BROWSER[0], BROWSER[1], DEVICE_GRANT];
        let for_device = async_io::block_on(client(
            &http,
            &server,
            &Identity::default(),
            Some(fresh.clone()),
            REDIRECT,
            &device,
        ))
        .expect("registered again");
        assert_eq!(for_device.grant_types, device);
        assert_eq!(http.urls().len(), 2);
        let log = http.log.lock().expect("log");
        let body: serde_json::Value = serde_json::from_slice(&log[1].body).expect("json");
        assert_eq!(body["grant_types"], json!(device));
    }

    #[test]
    fn no_way_to_register_says_what_to_configure() {
        let error = async_io::block_on(client(
            &Canned::default(),
            &server(json!({})),
            &Identity::default(),
            None,
            REDIRECT,
            BROWSER,
        ))
        .expect_err("no registration");
        assert!(error.contains("set `oauth_client_id`"), "{error}");
        let http = Canned::default().on("POST", "http://as/register", |_| {
            answer(
                400,
                json!({"error": "invalid_redirect_uri", "error_description": "no"}),
            )
        });
        let error = async_io::block_on(client(
            &http,
            &server(json!({"registration_endpoint": "http://as/register"})),
            &Identity::default(),
            None,
            REDIRECT,
            BROWSER,
        ))
        .expect_err("refused");
        assert_eq!(
            error,
            "dynamic client registration at http://as/register failed: HTTP 400: invalid_redirect_uri (no)"
        );
    }

    #[test]
    fn secret_methods_follow_the_server_list() {
        let s = |list: serde_json::Value| {
            server(json!({"token_endpoint_auth_methods_supported": list}))
        };
        assert_eq!(auth_method(&s(json!(["none"])), true, None), "none");
        assert_eq!(
            auth_method(
                &s(json!(["client_secret_basic", "client_secret_post"])),
                true,
                None
            ),
            "client_secret_basic"
        );
        assert_eq!(
            auth_method(&server(json!({})), true, None),
            "client_secret_basic"
        );
        assert_eq!(auth_method(&server(json!({})), false, None), "none");
    }
}
