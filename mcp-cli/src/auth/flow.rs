//! The authorization code grant with PKCE (S256): the authorization URL, reading the redirect,
//! the code exchange and refresh at the token endpoint.

use serde::Deserialize;

use super::discovery::ServerMetadata;
use super::http::{Http, Request, printable};
use super::store::{Client, Secret, Tokens, now_secs};
use super::urls::{self, Url};

/// Random bytes from the operating system, base64url: PKCE verifiers and `state`.
pub(crate) fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|error| format!("cannot get random bytes for the login: {error}"))?;
    Ok(urls::base64url(&bytes))
}

/// A PKCE verifier and its S256 challenge (RFC 7636).
#[derive(Clone, Debug)]
pub(crate) struct Pkce {
    pub(crate) verifier: String,
    pub(crate) challenge: String,
}

impl Pkce {
    pub(crate) fn new() -> Result<Self, String> {
        Ok(Self::from_verifier(random_token()?))
    }

    pub(crate) fn from_verifier(verifier: String) -> Self {
        let hash = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
        let challenge = urls::base64url(hash.as_ref());
        Self {
            verifier,
            challenge,
        }
    }
}

/// Refuses a server that says it does PKCE but not S256 (the MCP spec: clients MUST use S256).
/// A server that says nothing is tried: the 2025-03-26 fallback has no metadata to say it.
pub(crate) fn check_pkce(server: &ServerMetadata) -> Result<(), String> {
    match &server.code_challenge_methods_supported {
        Some(methods) if !methods.iter().any(|m| m == "S256") => Err(format!(
            "the authorization server {} does not support PKCE with S256 (it lists {:?}); \
             logging in without it would not be safe",
            printable(&server.issuer),
            methods.iter().map(|m| printable(m)).collect::<Vec<_>>()
        )),
        _ => Ok(()),
    }
}

/// One login attempt's parameters.
#[derive(Clone, Debug)]
pub(crate) struct Attempt {
    pub(crate) pkce: Pkce,
    pub(crate) state: String,
    pub(crate) redirect_uri: String,
    pub(crate) scopes: Vec<String>,
    pub(crate) resource: String,
}

/// The URL the user (or, unattended, we) open.
pub(crate) fn authorize_url(server: &ServerMetadata, client: &Client, attempt: &Attempt) -> String {
    let scope = attempt.scopes.join(" ");
    let mut params = vec![
        ("response_type", "code"),
        ("client_id", client.client_id.as_str()),
        ("redirect_uri", attempt.redirect_uri.as_str()),
        ("code_challenge", attempt.pkce.challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", attempt.state.as_str()),
    ];
    // An identity provider's login is for no resource of ours.
    if !attempt.resource.is_empty() {
        params.push(("resource", attempt.resource.as_str()));
    }
    if !scope.is_empty() {
        params.push(("scope", &scope));
    }
    let endpoint = &server.authorization_endpoint;
    let joiner = if endpoint.contains('?') { '&' } else { '?' };
    format!("{endpoint}{joiner}{}", urls::form(&params))
}

/// Whether `url` is our redirect URI (same origin and path), whatever its query.
pub(crate) fn is_redirect(url: &Url, redirect_uri: &str) -> bool {
    urls::parse(redirect_uri).is_ok_and(|r| r.origin() == url.origin() && r.path() == url.path())
}

/// The code from the redirect's query, after checking `state`, `error` and `iss` (RFC 9207).
pub(crate) fn read_redirect(
    url: &Url,
    attempt: &Attempt,
    server: &ServerMetadata,
) -> Result<String, String> {
    if let Some(error) = urls::param(url, "error") {
        let description = urls::param(url, "error_description").unwrap_or_default();
        return Err(format!(
            "the authorization server refused the login: {}{}",
            printable(&error),
            if description.is_empty() {
                String::new()
            } else {
                format!(" ({})", printable(&description))
            }
        ));
    }
    if urls::param(url, "state").as_deref() != Some(attempt.state.as_str()) {
        return Err(
            "the login redirect carried the wrong `state`; it did not come from the login we \
             started, so it was ignored"
                .into(),
        );
    }
    match urls::param(url, "iss") {
        Some(iss) if iss != server.issuer => {
            return Err(format!(
                "the login redirect names issuer {}, not {}: a mix-up, refused",
                printable(&iss),
                printable(&server.issuer)
            ));
        }
        None if server.authorization_response_iss_parameter_supported => {
            return Err(format!(
                "the authorization server {} promises an `iss` in its redirect but sent none; refused",
                printable(&server.issuer)
            ));
        }
        _ => {}
    }
    urls::param(url, "code")
        .filter(|code| !code.is_empty())
        .ok_or_else(|| "the login redirect carried no authorization code".into())
}

/// Unattended: GETs the authorization URL ourselves and takes the code from the redirect to
/// our loopback URI, following at most a few redirects on the way. A page that wants a
/// person (a login form) is an error.
pub(crate) async fn follow(
    http: &dyn Http,
    authorize_url: &str,
    attempt: &Attempt,
    server: &ServerMetadata,
) -> Result<String, String> {
    let mut url = urls::parse(authorize_url)?;
    for _ in 0..10 {
        let response = http.send(Request::get(url.as_str())).await?;
        let location = match response.header("location") {
            Some(location) if (300..400).contains(&response.status) => location,
            _ => {
                return Err(format!(
                    "following the authorization URL unattended, {} answered {} instead of \
                     redirecting back; this server needs a person to log in (run `mcp-cli auth` \
                     on a terminal)",
                    urls::origin(&url),
                    response.describe()
                ));
            }
        };
        let next = urls::resolve(&url, location)?;
        if is_redirect(&next, &attempt.redirect_uri) {
            return read_redirect(&next, attempt, server);
        }
        url = next;
    }
    Err(format!(
        "the authorization server at {} redirected too many times",
        urls::origin(&url)
    ))
}

#[derive(Deserialize)]
pub(crate) struct TokenResponse {
    pub(crate) access_token: String,
    token_type: Option<String>,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
    scope: Option<String>,
    /// OpenID Connect: the person's ID token, from an identity provider.
    id_token: Option<String>,
    /// RFC 8693: what a token exchange issued.
    pub(crate) issued_token_type: Option<String>,
    /// Whether the token is bound to the DPoP key its request proved (`token_type: DPoP`).
    #[serde(skip)]
    dpop_bound: bool,
}

/// Trades the code for tokens.
pub(crate) async fn exchange(
    http: &dyn Http,
    token_endpoint: &str,
    client: &Client,
    attempt: &Attempt,
    code: &str,
) -> Result<Tokens, String> {
    let params = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", attempt.redirect_uri.as_str()),
        ("code_verifier", attempt.pkce.verifier.as_str()),
        ("resource", attempt.resource.as_str()),
    ];
    let tokens = token_request(http, token_endpoint, client, &params, "the code exchange")
        .await
        .map_err(String::from)?;
    to_tokens(tokens, attempt.scopes.clone(), None)
}

/// The JWT authorization grant (RFC 7523 §2.1): `assertion` (a workload's JWT, or an
/// identity assertion grant from the company's identity provider) traded for tokens.
pub(crate) async fn jwt_bearer(
    http: &dyn Http,
    token_endpoint: &str,
    client: &Client,
    assertion: &str,
    scopes: &[String],
    resource: &str,
    what: &str,
) -> Result<Tokens, TokenError> {
    let scope = scopes.join(" ");
    let params = [
        ("grant_type", JWT_BEARER),
        ("assertion", assertion),
        ("scope", scope.as_str()),
        ("resource", resource),
    ];
    let tokens = token_request(http, token_endpoint, client, &params, what).await?;
    to_tokens(tokens, scopes.to_vec(), None).map_err(TokenError::Refused)
}

/// `grant_type` of the JWT authorization grant (RFC 7523 §2.1).
pub(crate) const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// A new access token from the refresh token; `previous` keeps what the answer leaves out.
pub(crate) async fn refresh(
    http: &dyn Http,
    token_endpoint: &str,
    client: &Client,
    resource: &str,
    previous: &Tokens,
) -> Result<Tokens, TokenError> {
    let Some(Secret(refresh_token)) = &previous.refresh_token else {
        return Err(TokenError::Refused("there is no refresh token".into()));
    };
    let params = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.as_str()),
        ("resource", resource),
    ];
    let tokens = token_request(http, token_endpoint, client, &params, "the token refresh").await?;
    to_tokens(
        tokens,
        previous.scopes.clone(),
        previous.refresh_token.clone(),
    )
    .map_err(TokenError::Refused)
}

/// Why the token endpoint gave no token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenError {
    /// No answer at all (network, TLS, timeout): the grant may still be good.
    Unreachable(String),
    /// The server answered, and not with a token: the grant is no good.
    Refused(String),
}

impl From<TokenError> for String {
    fn from(error: TokenError) -> String {
        match error {
            TokenError::Unreachable(text) | TokenError::Refused(text) => text,
        }
    }
}

/// One request to a token endpoint and its tokens; the error says `what` was refused.
pub(crate) async fn token_request(
    http: &dyn Http,
    endpoint: &str,
    client: &Client,
    params: &[(&str, &str)],
    what: &str,
) -> Result<TokenResponse, TokenError> {
    let response = post_as_client(http, endpoint, client, params)
        .await
        .map_err(TokenError::Unreachable)?;
    read_tokens(&response, endpoint, what, client)
}

/// POSTs the form `params` to `endpoint` (the token or device authorization endpoint) with
/// the client authenticated as it registered: HTTP Basic, the secret in the form, a signed
/// assertion (RFC 7523), or only its id (none at all for a client without one, as a
/// workload is). Parameters with empty values are left out. A client with a DPoP key sends
/// a proof, and once more with the server's nonce when it answers `use_dpop_nonce` (RFC 9449
/// §8). Fails only when no answer came.
pub(crate) async fn post_as_client(
    http: &dyn Http,
    endpoint: &str,
    client: &Client,
    params: &[(&str, &str)],
) -> Result<super::http::Response, String> {
    let response = post_once(http, endpoint, client, params).await?;
    if let Some(prover) = &client.dpop
        && response.status == 400
        && error_code(&response).as_deref() == Some("use_dpop_nonce")
        && let Some(nonce) = response.header("dpop-nonce")
    {
        prover.remember_nonce(endpoint, nonce);
        return post_once(http, endpoint, client, params).await;
    }
    Ok(response)
}

async fn post_once(
    http: &dyn Http,
    endpoint: &str,
    client: &Client,
    params: &[(&str, &str)],
) -> Result<super::http::Response, String> {
    let mut params: Vec<(&str, &str)> = (params.iter().copied())
        .filter(|(_, value)| !value.is_empty())
        .collect();
    let secret = client.client_secret.as_ref().map(|s| s.0.as_str());
    let mut basic = None;
    let assertion;
    match (client.auth_method.as_str(), secret, &client.signer) {
        ("private_key_jwt", _, Some(signer)) => {
            assertion = super::machine::assertion(signer, &client.client_id)?;
            params.push(("client_id", &client.client_id));
            params.push(("client_assertion_type", super::machine::ASSERTION_TYPE));
            params.push(("client_assertion", &assertion));
        }
        ("client_secret_basic", Some(secret), _) => {
            // RFC 6749 §2.3.1: each part form-encoded before the Basic encoding.
            let pair = format!(
                "{}:{}",
                urls::encode(&client.client_id),
                urls::encode(secret)
            );
            basic = Some(format!("Basic {}", urls::base64(pair.as_bytes())));
        }
        ("client_secret_post", Some(secret), _) => {
            params.push(("client_id", &client.client_id));
            params.push(("client_secret", secret));
        }
        _ if client.client_id.is_empty() => {}
        _ => params.push(("client_id", &client.client_id)),
    }
    let mut request = Request::post(
        endpoint,
        "application/x-www-form-urlencoded",
        urls::form(&params),
    );
    if let Some(basic) = basic {
        request = request.header("Authorization", basic);
    }
    if let Some(prover) = &client.dpop {
        request = request.header("DPoP", prover.proof("POST", endpoint, None, None)?);
    }
    http.send(request).await
}

/// The OAuth error code of a refused request (`invalid_grant`, `authorization_pending`...).
pub(crate) fn error_code(response: &super::http::Response) -> Option<String> {
    let body: serde_json::Value = serde_json::from_slice(&response.body).ok()?;
    body.get("error")?.as_str().map(str::to_owned)
}

/// A token endpoint's answer, when it is a Bearer token, or a DPoP token for a request that
/// proved `client`'s key. (A token exchange's `N_A` is for its caller to judge.)
fn read_tokens(
    response: &super::http::Response,
    endpoint: &str,
    what: &str,
    client: &Client,
) -> Result<TokenResponse, TokenError> {
    if !response.is_success() {
        return Err(TokenError::Refused(format!(
            "{what} at {endpoint} failed: {}",
            response.describe()
        )));
    }
    let mut tokens: TokenResponse =
        (response.json("token response", endpoint)).map_err(TokenError::Refused)?;
    match tokens.token_type.as_deref() {
        None => {}
        Some(kind) if kind.eq_ignore_ascii_case("bearer") => {}
        Some(kind) if kind.eq_ignore_ascii_case("n_a") && tokens.issued_token_type.is_some() => {}
        Some(kind) if kind.eq_ignore_ascii_case("dpop") && client.dpop.is_some() => {
            tokens.dpop_bound = true;
        }
        Some(kind) => {
            return Err(TokenError::Refused(format!(
                "{what} at {endpoint} gave a `{}` token; only Bearer tokens, and DPoP tokens \
                 for a request with a proof, are supported",
                printable(kind)
            )));
        }
    }
    Ok(tokens)
}

/// A successful token answer as [`Tokens`], `asked` the scopes when it names none.
pub(crate) fn tokens_from(
    response: &super::http::Response,
    endpoint: &str,
    what: &str,
    client: &Client,
    asked: Vec<String>,
) -> Result<Tokens, String> {
    let tokens = read_tokens(response, endpoint, what, client).map_err(String::from)?;
    to_tokens(tokens, asked, None)
}

fn to_tokens(
    response: TokenResponse,
    asked: Vec<String>,
    old_refresh: Option<Secret>,
) -> Result<Tokens, String> {
    if response.access_token.is_empty() {
        return Err("the token endpoint returned an empty access token".into());
    }
    // The scopes granted, when the server says; else the ones asked for.
    let scopes = match response.scope {
        Some(scope) if !scope.trim().is_empty() => super::discovery::split_scopes(&scope),
        _ => asked,
    };
    Ok(Tokens {
        access_token: Secret(response.access_token),
        refresh_token: response.refresh_token.map(Secret).or(old_refresh),
        expires_at: response
            .expires_in
            .map(|secs| now_secs().saturating_add(secs)),
        issued_at: Some(now_secs()),
        scopes,
        dpop_bound: response.dpop_bound,
        id_token: response.id_token.map(Secret),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::http::Response;
    use super::super::http::canned::{Canned, json as answer};
    use super::*;

    fn server() -> ServerMetadata {
        serde_json::from_value(json!({
            "issuer": "http://as",
            "authorization_endpoint": "http://as/authorize?tenant=1",
            "token_endpoint": "http://as/token",
        }))
        .expect("metadata")
    }

    fn attempt() -> Attempt {
        Attempt {
            pkce: Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into()),
            state: "st".into(),
            redirect_uri: "http://127.0.0.1:7/callback".into(),
            scopes: vec!["a".into(), "b".into()],
            resource: "http://rs/mcp".into(),
        }
    }

    fn client(method: &str, secret: Option<&str>) -> Client {
        Client {
            client_id: "id:1".into(),
            client_secret: secret.map(|s| Secret(s.into())),
            auth_method: method.into(),
            redirect_uri: None,
            source: "configured".into(),
            signer: None,
            grant_types: Vec::new(),
            dpop: None,
        }
    }

    #[test]
    fn pkce_matches_rfc_7636_appendix_b() {
        assert_eq!(
            attempt().pkce.challenge,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let fresh = Pkce::new().expect("random");
        assert_eq!(fresh.verifier.len(), 43);
        assert_ne!(fresh.verifier, Pkce::new().expect("random").verifier);
    }

    #[test]
    fn refuses_servers_without_s256() {
        let mut s = server();
        assert!(check_pkce(&s).is_ok());
        s.code_challenge_methods_supported = Some(vec!["plain".into()]);
        assert!(
            check_pkce(&s)
                .expect_err("plain only")
                .contains("does not support PKCE with S256")
        );
        s.code_challenge_methods_supported = Some(vec![]);
        assert!(check_pkce(&s).is_err());
    }

    #[test]
    fn authorize_url_carries_everything() {
        let url =
            urls::parse(&authorize_url(&server(), &client("none", None), &attempt())).expect("url");
        assert_eq!(urls::param(&url, "tenant").as_deref(), Some("1"));
        assert_eq!(urls::param(&url, "client_id").as_deref(), Some("id:1"));
        assert_eq!(
            urls::param(&url, "code_challenge_method").as_deref(),
            Some("S256")
        );
        assert_eq!(urls::param(&url, "scope").as_deref(), Some("a b"));
        assert_eq!(
            urls::param(&url, "resource").as_deref(),
            Some("http://rs/mcp")
        );
        assert_eq!(
            urls::param(&url, "redirect_uri").as_deref(),
            Some("http://127.0.0.1:7/callback")
        );
        let mut none = attempt();
        none.scopes.clear();
        let url =
            urls::parse(&authorize_url(&server(), &client("none", None), &none)).expect("url");
        assert_eq!(urls::param(&url, "scope"), None);
    }

    #[test]
    fn redirect_checks() {
        let check = |query: &str| {
            let url = urls::parse(&format!("http://127.0.0.1:7/callback?{query}")).expect("url");
            read_redirect(&url, &attempt(), &server())
        };
        assert_eq!(check("code=c&state=st"), Ok("c".into()));
        assert!(
            check("code=c&state=other")
                .expect_err("state")
                .contains("wrong `state`")
        );
        assert_eq!(
            check("error=access_denied&error_description=nope%1B[2J&state=st"),
            Err("the authorization server refused the login: access_denied (nope[2J)".into())
        );
        assert!(
            check("code=c&state=st&iss=http://evil")
                .expect_err("iss")
                .contains("mix-up")
        );
        assert_eq!(check("code=c&state=st&iss=http://as"), Ok("c".into()));
        let mut strict = server();
        strict.authorization_response_iss_parameter_supported = true;
        let url = urls::parse("http://127.0.0.1:7/callback?code=c&state=st").expect("url");
        assert!(read_redirect(&url, &attempt(), &strict).is_err());
    }

    #[test]
    fn follows_redirects_to_the_loopback() {
        let http = Canned::default()
            .on("GET", "http://as/authorize", |_| Response {
                status: 302,
                headers: vec![("Location".into(), "/login/next".into())],
                body: vec![],
            })
            .on("GET", "http://as/login/next", |_| Response {
                status: 303,
                headers: vec![(
                    "location".into(),
                    "http://127.0.0.1:7/callback?code=xyz&state=st".into(),
                )],
                body: vec![],
            });
        let url = authorize_url(&server(), &client("none", None), &attempt());
        assert_eq!(
            async_io::block_on(follow(&http, &url, &attempt(), &server())),
            Ok("xyz".into())
        );

        let form = Canned::default().on("GET", "http://as/authorize", |_| Response {
            status: 200,
            headers: vec![],
            body: b"<html>log in".to_vec(),
        });
        let error =
            async_io::block_on(follow(&form, &url, &attempt(), &server())).expect_err("page");
        assert!(
            error.contains("answered HTTP 200 instead of redirecting"),
            "{error}"
        );
    }

    fn token_endpoint(check: impl Fn(&Request) + Send + Sync + 'static) -> Canned {
        Canned::default().on("POST", "http://as/token", move |request| {
            check(request);
            answer(200, json!({"access_token": "at", "token_type": "bearer", "expires_in": 100, "refresh_token": "rt", "scope": "a"}))
        })
    }

    fn form_of(request: &Request) -> Vec<(String, String)> {
        urls::parse_form(std::str::from_utf8(&request.body).unwrap_or_default())
    }

    #[test]
    fn exchanges_with_each_client_auth_method() {
        let http = token_endpoint(|request| {
            let form = form_of(request);
            assert!(form.contains(&("code_verifier".into(), attempt().pkce.verifier)));
            assert!(form.contains(&("client_id".into(), "id:1".into())));
            assert!(form.contains(&("resource".into(), "http://rs/mcp".into())));
            assert!(!request.headers.iter().any(|(k, _)| k == "Authorization"));
        });
        let tokens = async_io::block_on(exchange(
            &http,
            "http://as/token",
            &client("none", None),
            &attempt(),
            "c",
        ))
        .expect("tokens");
        assert_eq!(tokens.access_token, Secret("at".into()));
        assert_eq!(tokens.scopes, ["a"]);
        assert!(tokens.expires_at.is_some_and(|at| at >= now_secs() + 99));

        let http = token_endpoint(|request| {
            let auth = request
                .headers
                .iter()
                .find(|(k, _)| k == "Authorization")
                .map(|(_, v)| v.clone());
            // base64("id%3A1:s%20x")
            assert_eq!(auth.as_deref(), Some("Basic aWQlM0ExOnMlMjB4"));
            assert!(!form_of(request).iter().any(|(k, _)| k == "client_secret"));
        });
        async_io::block_on(exchange(
            &http,
            "http://as/token",
            &client("client_secret_basic", Some("s x")),
            &attempt(),
            "c",
        ))
        .expect("basic");

        let http = token_endpoint(|request| {
            assert!(form_of(request).contains(&("client_secret".into(), "s x".into())));
        });
        async_io::block_on(exchange(
            &http,
            "http://as/token",
            &client("client_secret_post", Some("s x")),
            &attempt(),
            "c",
        ))
        .expect("post");
    }

    #[test]
    fn refresh_keeps_the_old_refresh_token_when_none_comes_back() {
        let http = Canned::default().on("POST", "http://as/token", |request| {
            assert!(form_of(request).contains(&("grant_type".into(), "refresh_token".into())));
            answer(200, json!({"access_token": "new", "token_type": "Bearer"}))
        });
        let old = Tokens {
            access_token: Secret("old".into()),
            refresh_token: Some(Secret("rt".into())),
            expires_at: Some(0),
            issued_at: None,
            scopes: vec!["s".into()],
            dpop_bound: false,
            id_token: None,
        };
        let new = async_io::block_on(refresh(
            &http,
            "http://as/token",
            &client("none", None),
            "http://rs",
            &old,
        ))
        .expect("refreshed");
        assert_eq!(new.access_token, Secret("new".into()));
        assert_eq!(new.refresh_token, Some(Secret("rt".into())));
        assert_eq!(new.scopes, ["s"]);

        let refused = Canned::default().on("POST", "http://as/token", |_| {
            answer(400, json!({"error": "invalid_grant"}))
        });
        let error = async_io::block_on(refresh(
            &refused,
            "http://as/token",
            &client("none", None),
            "http://rs",
            &old,
        ))
        .expect_err("refused");
        assert_eq!(
            error,
            TokenError::Refused(
                "the token refresh at http://as/token failed: HTTP 400: invalid_grant".into()
            )
        );
    }
}
