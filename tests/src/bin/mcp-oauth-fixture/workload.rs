//! Workload identity (mode `workload`): the JWT the platform hands a workload, and the JWT
//! bearer grant (RFC 7523) that trades it for an access token.

use std::collections::HashMap;

use mcp_tests::http::{Request, Response};
use serde_json::json;

use super::codec::{base64url_decode, form, now_secs, sign_hs256, split, verify_hs256};
use super::{State, refuse, reply};

/// The key the fixture signs workload JWTs with, as a platform would.
pub(super) const PLATFORM_KEY: &[u8] = b"mcp-oauth-fixture platform key";

/// Who the token request says it comes from: the id of its HTTP Basic credentials or its
/// form's `client_id`, `none` without either.
fn client_named(request: &Request, body: &HashMap<String, String>) -> String {
    let basic = (request.header("authorization"))
        .and_then(|value| value.strip_prefix("Basic "))
        .and_then(base64url_decode)
        .and_then(|pair| String::from_utf8(pair).ok())
        .and_then(|pair| pair.split_once(':').map(|(id, _)| id.to_owned()));
    (basic.or_else(|| body.get("client_id").cloned())).unwrap_or_else(|| "none".into())
}

/// `GET /workload-jwt`: a JWT as the platform hands one to a workload.
pub(super) fn jwt(state: &State, request: &Request) -> Response {
    let query = form(request.query());
    let get = |key: &str| query.get(key).cloned().unwrap_or_default();
    let now = now_secs();
    let mut claims = json!({
        "iss": format!("{}/platform", state.base),
        "sub": get("sub"),
        "aud": state.base,
        "iat": now,
        "exp": now + get("ttl").parse::<i64>().unwrap_or(3600),
        "jti": state.fresh("workload-jti"),
    });
    if let Some(code) = query.get("refuse") {
        claims["refuse"] = json!(code);
    }
    Response::new(
        "200 OK",
        "text/plain",
        sign_hs256(PLATFORM_KEY, "JWT", &claims),
    )
}

/// The workload identity grant: the platform's JWT, with no client authentication needed.
pub(super) fn grant(
    state: &State,
    request: &Request,
    body: &HashMap<String, String>,
    binding: Option<String>,
) -> Response {
    let bad = "400 Bad Request";
    let assertion = body.get("assertion").cloned().unwrap_or_default();
    let Some((_, claims)) = verify_hs256(PLATFORM_KEY, &assertion) else {
        return refuse(
            state,
            "",
            bad,
            "invalid_grant",
            "not a JWT of this platform",
        );
    };
    let sub = claims["sub"].as_str().unwrap_or_default();
    let scope = body.get("scope").cloned().unwrap_or_default();
    state.log(format!(
        "jwt-bearer workload sub={sub} client={} scope={scope}",
        client_named(request, body)
    ));
    if claims["aud"] != state.base.as_str() {
        return refuse(
            state,
            "",
            bad,
            "invalid_grant",
            "the JWT is for another audience",
        );
    }
    if claims["exp"].as_i64().is_none_or(|exp| exp <= now_secs()) {
        return refuse(state, "", bad, "invalid_grant", "the JWT expired");
    }
    if let Some(code) = claims["refuse"].as_str() {
        return refuse(
            state,
            "",
            bad,
            code,
            "refused, as the JWT's refuse claim asks",
        );
    }
    if body.get("resource") != Some(&format!("{}/mcp", state.base)) {
        return refuse(state, "", bad, "invalid_target", "unknown resource");
    }
    reply("200 OK", &state.issue(split(Some(&scope)), binding, false))
}
