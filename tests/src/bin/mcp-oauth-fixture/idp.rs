//! The identity provider of mode `enterprise` at `/idp`: its metadata, its ID tokens, a
//! person's login, the token exchange (RFC 8693) for an ID-JAG; and the ID-JAG grant at the
//! authorization server.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use mcp_tests::http::{Request, Response};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::codec::{base64, base64url, encode, form, now_secs, sign_hs256, split, verify_hs256};
use super::{Grant, State, oauth_error, refuse, reply};

/// The key the identity provider signs ID tokens and ID-JAGs with.
pub(super) const IDP_KEY: &[u8] = b"mcp-oauth-fixture identity provider key";

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

pub(super) fn metadata(state: &State) -> Response {
    let issuer = state.idp_issuer();
    state.log("idp metadata".into());
    reply(
        "200 OK",
        &json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["HS256"],
            "scopes_supported": ["openid", "offline_access"],
            "grant_types_supported": ["authorization_code", "refresh_token", TOKEN_EXCHANGE],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        }),
    )
}

/// An ID token for the person `sub`, good for `ttl` seconds (negative: already expired); its
/// `exchange` claim, when not empty, tells the token exchange to misbehave.
pub(super) fn id_token(state: &State, sub: &str, ttl: i64, exchange: &str) -> String {
    let now = now_secs();
    let mut claims = json!({
        "iss": state.idp_issuer(),
        "sub": sub,
        "aud": "idp-client",
        "iat": now,
        "exp": now + ttl,
    });
    if !exchange.is_empty() {
        claims["exchange"] = json!(exchange);
    }
    sign_hs256(IDP_KEY, "JWT", &claims)
}

/// The person's login at the identity provider: OpenID Connect, approved at once.
pub(super) fn authorize(state: &State, request: &Request) -> Response {
    let query = form(request.query());
    let get = |key: &str| query.get(key).cloned().unwrap_or_default();
    let scope = get("scope");
    state.log(format!(
        "idp authorize client={} scope={scope} resource={}",
        get("client_id"),
        get("resource")
    ));
    let redirect = get("redirect_uri");
    if get("client_id") != "idp-client" || !redirect.starts_with("http://127.0.0.1:") {
        return oauth_error("400 Bad Request", "invalid_client", "unknown client");
    }
    let mut params = format!("state={}", encode(&get("state")));
    let scopes: Vec<String> = split(Some(&scope));
    if get("code_challenge_method") != "S256" || get("code_challenge").is_empty() {
        params.push_str("&error=invalid_request&error_description=PKCE%20S256%20required");
    } else if !scopes.iter().any(|s| s == "openid") {
        params.push_str("&error=invalid_scope");
    } else {
        let code = state.fresh("idp-code");
        let grant = Grant {
            challenge: get("code_challenge"),
            redirect_uri: redirect.clone(),
            scopes,
        };
        state.idp_codes.lock().unwrap().insert(code.clone(), grant);
        params.push_str(&format!("&code={code}"));
    }
    let location = format!("{redirect}?{params}");
    Response::empty("302 Found", vec![("Location".into(), location)])
}

/// The identity provider's token endpoint: its client `idp-client` only, by HTTP Basic.
pub(super) fn token(state: &State, request: &Request) -> Response {
    state.idp_token_requests.fetch_add(1, Ordering::SeqCst);
    let body = form(std::str::from_utf8(&request.body).unwrap_or_default());
    let get = |key: &str| body.get(key).cloned().unwrap_or_default();
    let grant = get("grant_type");
    let bad = "400 Bad Request";
    let client_ok = request.header("authorization")
        == Some(format!("Basic {}", base64(b"idp-client:idp-secret")).as_str());
    if !client_ok {
        state.log(format!("idp token grant={grant} client=bad"));
        let unauthorized = "401 Unauthorized";
        return refuse(
            state,
            "idp ",
            unauthorized,
            "invalid_client",
            "bad client credentials",
        );
    }
    let person = |sub: &str| {
        let refresh = state.fresh("idp-refresh");
        state
            .idp_refresh
            .lock()
            .unwrap()
            .insert(refresh.clone(), sub.to_owned());
        json!({
            "access_token": state.fresh("idp-access"),
            "token_type": "Bearer",
            "expires_in": 3600,
            "id_token": id_token(state, sub, 3600, ""),
            "refresh_token": refresh,
            "scope": "openid offline_access",
        })
    };
    match grant.as_str() {
        "authorization_code" => {
            state.log("idp token grant=authorization_code".into());
            let Some(grant) = state.idp_codes.lock().unwrap().remove(&get("code")) else {
                return refuse(state, "idp ", bad, "invalid_grant", "unknown code");
            };
            let computed = base64url(&Sha256::digest(get("code_verifier").as_bytes()));
            if computed != grant.challenge || get("redirect_uri") != grant.redirect_uri {
                return refuse(
                    state,
                    "idp ",
                    bad,
                    "invalid_grant",
                    "PKCE or redirect mismatch",
                );
            }
            reply("200 OK", &person("alice"))
        }
        "refresh_token" => {
            state.log("idp token grant=refresh_token".into());
            let Some(sub) = state
                .idp_refresh
                .lock()
                .unwrap()
                .remove(&get("refresh_token"))
            else {
                return refuse(state, "idp ", bad, "invalid_grant", "unknown refresh token");
            };
            reply("200 OK", &person(&sub))
        }
        TOKEN_EXCHANGE => token_exchange(state, &body),
        _ => refuse(state, "idp ", bad, "unsupported_grant_type", &grant),
    }
}

/// RFC 8693 at the identity provider: a good ID token for an ID-JAG naming the audience and
/// resource asked for.
fn token_exchange(state: &State, body: &HashMap<String, String>) -> Response {
    let get = |key: &str| body.get(key).cloned().unwrap_or_default();
    let bad = "400 Bad Request";
    state.log(format!(
        "idp token grant=token-exchange audience={} resource={} scope={} \
         requested_token_type={} subject_token_type={}",
        get("audience"),
        get("resource"),
        get("scope"),
        get("requested_token_type"),
        get("subject_token_type"),
    ));
    if get("requested_token_type") != ID_JAG_TYPE || get("subject_token_type") != ID_TOKEN_TYPE {
        return refuse(
            state,
            "idp ",
            bad,
            "invalid_request",
            "unexpected token types",
        );
    }
    let Some((_, claims)) = verify_hs256(IDP_KEY, &get("subject_token")) else {
        return refuse(
            state,
            "idp ",
            bad,
            "invalid_grant",
            "not an ID token of ours",
        );
    };
    if claims["exp"].as_i64().is_none_or(|exp| exp <= now_secs()) {
        return refuse(state, "idp ", bad, "invalid_grant", "the ID token expired");
    }
    if claims["exchange"] == "refuse" {
        return refuse(
            state,
            "idp ",
            bad,
            "invalid_grant",
            "policy forbids this person",
        );
    }
    if get("audience") != state.base || get("resource") != format!("{}/mcp", state.base) {
        return refuse(
            state,
            "idp ",
            bad,
            "invalid_target",
            "unknown audience or resource",
        );
    }
    let now = now_secs();
    let grant = json!({
        "iss": state.idp_issuer(),
        "sub": claims["sub"],
        "aud": get("audience"),
        "client_id": "ent-client",
        "resource": get("resource"),
        "scope": get("scope"),
        "iat": now,
        "exp": now + 300,
        "jti": state.fresh("id-jag"),
    });
    let issued = if claims["exchange"] == "access_token" {
        ACCESS_TOKEN_TYPE
    } else {
        ID_JAG_TYPE
    };
    reply(
        "200 OK",
        &json!({
            "access_token": sign_hs256(IDP_KEY, "oauth-id-jag+jwt", &grant),
            "issued_token_type": issued,
            "token_type": "N_A",
            "expires_in": 300,
        }),
    )
}

/// The identity assertion grant: an ID-JAG from the identity provider, for this server and
/// the client `ent-client`.
pub(super) fn id_jag_grant(
    state: &State,
    request: &Request,
    body: &HashMap<String, String>,
    binding: Option<String>,
) -> Response {
    let bad = "400 Bad Request";
    let client_ok = request.header("authorization")
        == Some(format!("Basic {}", base64(b"ent-client:ent-secret")).as_str());
    let assertion = body.get("assertion").cloned().unwrap_or_default();
    let Some((header, claims)) = verify_hs256(IDP_KEY, &assertion) else {
        return refuse(
            state,
            "",
            bad,
            "invalid_grant",
            "not signed by the identity provider",
        );
    };
    let sub = claims["sub"].as_str().unwrap_or_default();
    let client = if client_ok { "ent-client" } else { "bad" };
    state.log(format!("jwt-bearer id-jag sub={sub} client={client}"));
    if !client_ok {
        let unauthorized = "401 Unauthorized";
        return refuse(
            state,
            "",
            unauthorized,
            "invalid_client",
            "bad client credentials",
        );
    }
    let resource = format!("{}/mcp", state.base);
    let why = if header["typ"] != "oauth-id-jag+jwt" {
        Some("not an ID-JAG (typ)")
    } else if claims["iss"] != state.idp_issuer().as_str() || claims["aud"] != state.base.as_str() {
        Some("the ID-JAG is from another issuer or for another audience")
    } else if claims["client_id"] != "ent-client" {
        Some("the ID-JAG is for another client")
    } else if claims["resource"] != resource.as_str() || body.get("resource") != Some(&resource) {
        Some("the ID-JAG is for another resource")
    } else if claims["exp"].as_i64().is_none_or(|exp| exp <= now_secs()) {
        Some("the ID-JAG expired")
    } else {
        None
    };
    if let Some(why) = why {
        return refuse(state, "", bad, "invalid_grant", why);
    }
    let scopes = split(claims["scope"].as_str().map(str::to_owned).as_ref());
    reply("200 OK", &state.issue(scopes, binding, false))
}
