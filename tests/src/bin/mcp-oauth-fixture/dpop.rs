//! DPoP (RFC 9449): proofs checked, the thumbprints of their keys, tokens bound to a key,
//! and the nonces the token endpoint and the MCP endpoint hand out and demand.

use mcp_tests::http::{Request, Response};
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::codec::{base64, base64url, base64url_decode, now_secs};
use super::{State, oauth_error, unauthorized};

impl State {
    /// A new DPoP nonce from `endpoint` (`as` or `rs`).
    pub(super) fn new_nonce(&self, endpoint: &str) -> String {
        let nonce = self.fresh(&format!("{endpoint}-nonce"));
        self.nonces.lock().unwrap().push(nonce.clone());
        nonce
    }

    /// Whether `nonce` is one `endpoint` handed out.
    fn nonce_ok(&self, endpoint: &str, nonce: Option<&str>) -> bool {
        nonce.is_some_and(|nonce| {
            nonce.starts_with(&format!("{endpoint}-nonce-"))
                && self.nonces.lock().unwrap().iter().any(|n| n == nonce)
        })
    }
}

/// A DPoP proof that checked out: the thumbprint of its key (RFC 7638) and its nonce.
pub(super) struct Proof {
    pub(super) jkt: String,
    nonce: Option<String>,
}

/// The token request's DPoP proof, when it has one that checks out; else the refusal, with
/// how the proof fared for the log (`rejected`, `missing`, `no-nonce`).
pub(super) fn token_proof(
    state: &State,
    request: &Request,
) -> Result<Option<Proof>, (String, Response)> {
    let bad = "400 Bad Request";
    if request.header("dpop").is_none() {
        if state.nonce_mode() {
            let refusal = oauth_error(bad, "invalid_dpop_proof", "only DPoP-bound tokens here");
            return Err(("missing".into(), refusal));
        }
        return Ok(None);
    }
    let htu = format!("{}/token", state.base);
    let proof = check_proof(state, request, &htu, None).map_err(|why| {
        let shown = format!("rejected ({why})");
        (shown, oauth_error(bad, "invalid_dpop_proof", &why))
    })?;
    if state.nonce_mode() && !state.nonce_ok("as", proof.nonce.as_deref()) {
        let mut refusal = oauth_error(bad, "use_dpop_nonce", "a nonce is required");
        let nonce = state.new_nonce("as");
        refusal.headers.push(("DPoP-Nonce".into(), nonce));
        return Err(("no-nonce".into(), refusal));
    }
    Ok(Some(proof))
}

/// The proof that must come with a token bound to the DPoP key `bound` at the MCP endpoint:
/// how the token was presented for the log (`dpop`, with the nonce its proof carried in
/// `dpop-nonce`); or how it failed (`dpop-rejected (why)`, `dpop-no-nonce`) and the 401.
pub(super) fn bound_proof(
    state: &State,
    request: &Request,
    token: &str,
    bound: &str,
) -> Result<String, (String, Response)> {
    let htu = format!("{}/mcp", state.base);
    let rejected = |why: String| {
        let header = format!(r#"DPoP error="invalid_dpop_proof", error_description="{why}""#);
        (
            format!("dpop-rejected ({why})"),
            unauthorized(header, vec![]),
        )
    };
    let proof = check_proof(state, request, &htu, Some(token)).map_err(rejected)?;
    if proof.jkt != bound {
        return Err(rejected(
            "the proof is of another key than the token's".into(),
        ));
    }
    if !state.nonce_mode() {
        return Ok("dpop".into());
    }
    let nonce = proof.nonce.unwrap_or_default();
    if !state.nonce_ok("rs", Some(&nonce)) {
        let header = r#"DPoP error="use_dpop_nonce", error_description="a nonce is required""#;
        let nonce = ("DPoP-Nonce".into(), state.new_nonce("rs"));
        return Err((
            "dpop-no-nonce".into(),
            unauthorized(header.into(), vec![nonce]),
        ));
    }
    Ok(format!("dpop nonce={nonce}"))
}

/// Checks the request's `DPoP` proof (RFC 9449 §4.3) for a request to `htu`; with the
/// `token` it presents (at the MCP endpoint), also `ath` and the body's `content_digest`.
fn check_proof(
    state: &State,
    request: &Request,
    htu: &str,
    token: Option<&str>,
) -> Result<Proof, String> {
    let mut proofs = (request.headers.iter()).filter(|(name, _)| name.eq_ignore_ascii_case("dpop"));
    let (Some((_, proof)), None) = (proofs.next(), proofs.next()) else {
        return Err("not exactly one DPoP header".into());
    };
    let parts: Vec<&str> = proof.split('.').collect();
    let [head, body, signature] = parts[..] else {
        return Err("not a signed JWT".into());
    };
    let json_of = |part: &str| {
        base64url_decode(part).and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
    };
    let (Some(header), Some(claims)) = (json_of(head), json_of(body)) else {
        return Err("header or claims not base64url JSON".into());
    };
    if header["typ"] != "dpop+jwt" || header["alg"] != "ES256" {
        return Err("typ is not dpop+jwt or alg not ES256".into());
    }
    let jwk = &header["jwk"];
    let (Some(x), Some(y)) = (jwk["x"].as_str(), jwk["y"].as_str()) else {
        return Err("no EC public key in jwk".into());
    };
    if jwk["kty"] != "EC" || jwk["crv"] != "P-256" || jwk.get("d").is_some() {
        return Err("jwk is not a public P-256 key".into());
    }
    let mut point = vec![4u8];
    point.extend(base64url_decode(x).unwrap_or_default());
    point.extend(base64url_decode(y).unwrap_or_default());
    let signature = base64url_decode(signature).unwrap_or_default();
    let signed = format!("{head}.{body}");
    (UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point))
        .verify(signed.as_bytes(), &signature)
        .map_err(|_| "the signature does not verify against its jwk".to_owned())?;
    if claims["htm"] != request.method.as_str() || claims["htu"] != htu {
        return Err(format!("htm/htu are not {} {htu}", request.method));
    }
    if claims["iat"]
        .as_i64()
        .is_none_or(|iat| (iat - now_secs()).abs() > 60)
    {
        return Err("iat is not within a minute of now".into());
    }
    let jti = claims["jti"].as_str().unwrap_or_default();
    if jti.is_empty() || !state.jtis.lock().unwrap().insert(jti.to_owned()) {
        return Err("no jti, or one used before".into());
    }
    match token {
        Some(token) => {
            if claims["ath"] != base64url(&Sha256::digest(token.as_bytes())).as_str() {
                return Err("ath is not the token's hash".into());
            }
            let digest = format!("sha-256=:{}:", base64(&Sha256::digest(&request.body)));
            if request.method == "POST" && claims["content_digest"] != digest.as_str() {
                return Err("content_digest is not the body's".into());
            }
        }
        None if claims.get("ath").is_some() => return Err("ath in a token request".into()),
        None => {}
    }
    let thumbprint_input = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    Ok(Proof {
        jkt: base64url(&Sha256::digest(thumbprint_input.as_bytes())),
        nonce: claims["nonce"].as_str().map(str::to_owned),
    })
}

/// The fixture's own checks, so that what the end-to-end suites conclude from its log holds:
/// a proof it accepts is a good one, and the bad ones it is there to catch are refused.
#[cfg(test)]
mod tests {
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
    use serde_json::json;

    use super::*;

    /// A client's key pair and its proofs, made the way RFC 9449 §4.2 says.
    struct Client {
        pair: EcdsaKeyPair,
    }

    impl Client {
        fn new() -> Self {
            let alg = &ECDSA_P256_SHA256_FIXED_SIGNING;
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &SystemRandom::new()).unwrap();
            let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &SystemRandom::new());
            Self {
                pair: pair.unwrap(),
            }
        }

        fn proof(&self, claims: &Value) -> String {
            let (x, y) = self.pair.public_key().as_ref()[1..].split_at(32);
            let jwk = json!({"kty": "EC", "crv": "P-256", "x": base64url(x), "y": base64url(y)});
            let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk});
            let signed = format!(
                "{}.{}",
                base64url(header.to_string().as_bytes()),
                base64url(claims.to_string().as_bytes())
            );
            let signature = self.pair.sign(&SystemRandom::new(), signed.as_bytes());
            format!("{signed}.{}", base64url(signature.unwrap().as_ref()))
        }
    }

    fn request(body: &str, proof: &str) -> Request {
        Request {
            method: "POST".into(),
            target: "/mcp".into(),
            headers: vec![("DPoP".into(), proof.into())],
            body: body.as_bytes().to_vec(),
        }
    }

    fn claims(jti: &str, token: &str, body: &str) -> Value {
        json!({
            "jti": jti,
            "htm": "POST",
            "htu": "http://fx/mcp",
            "iat": now_secs(),
            "ath": base64url(&Sha256::digest(token.as_bytes())),
            "content_digest": format!("sha-256=:{}:", base64(&Sha256::digest(body.as_bytes()))),
        })
    }

    #[test]
    fn a_good_proof_passes_and_each_flaw_is_caught() {
        let state = State::new("dpop".into(), "http://fx".into(), None);
        let client = Client::new();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let check = |proof: &str, body: &str| {
            check_proof(&state, &request(body, proof), "http://fx/mcp", Some("tok"))
        };
        let good = client.proof(&claims("j1", "tok", body));
        let accepted = check(&good, body).unwrap();
        assert_eq!(accepted.jkt.len(), 43, "a SHA-256 thumbprint, base64url");
        assert_eq!(
            check(&good, body).err().unwrap(),
            "no jti, or one used before"
        );
        let flawed = |jti: &str, key: &str, value: Value| {
            let mut claims = claims(jti, "tok", body);
            claims[key] = value;
            client.proof(&claims)
        };
        for (proof, sent, why) in [
            (
                client.proof(&claims("j2", "tok", body)),
                "{}",
                "content_digest is not the body's",
            ),
            (
                client.proof(&claims("j3", "other", body)),
                body,
                "ath is not the token's hash",
            ),
            (
                flawed("j4", "htu", json!("http://fx/token")),
                body,
                "htm/htu are not POST",
            ),
            (
                flawed("j5", "iat", json!(now_secs() - 600)),
                body,
                "iat is not within a minute",
            ),
        ] {
            let error = check(&proof, sent).err().unwrap_or_default();
            assert!(error.starts_with(why), "{why}: {error:?}");
        }
        // Another key's signature, or a header another key's proof came with.
        let other = Client::new().proof(&claims("j6", "tok", body));
        let head = good.split('.').next().unwrap();
        let rest = other.split_once('.').unwrap().1;
        let spliced = format!("{head}.{rest}");
        let error = check(&spliced, body).err().unwrap_or_default();
        assert_eq!(error, "the signature does not verify against its jwk");
        let again = check(&other, body).unwrap();
        assert_ne!(again.jkt, accepted.jkt, "each key has its own thumbprint");
    }
}
