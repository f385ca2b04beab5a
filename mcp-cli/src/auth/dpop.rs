//! DPoP (RFC 9449): tokens bound to a key pair of ours, so a leaked token is no use without
//! the key. One P-256 key per server, kept with its tokens (keychain or the 0600 file); a
//! fresh proof on every token request and every request to the MCP server; the nonces the
//! servers hand out (`DPoP-Nonce`), remembered per endpoint.
//!
//! Proofs to the MCP server also carry `ath` (the token's hash) and `content_digest`, the
//! request body's SHA-256 in RFC 9530's form, as the MCP DPoP profile draft asks; proofs to
//! the token endpoint carry neither (RFC 9449 §5, and the profile says not to add the digest).

use std::collections::HashMap;
use std::sync::Mutex;

use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};

use super::jwt::SigningKey;
use super::urls;

/// The only algorithm we sign proofs with; a server must list it in
/// `dpop_signing_alg_values_supported`.
pub(crate) const ALG: &str = "ES256";

/// Our key for one server, and the nonces its endpoints asked for.
pub(crate) struct Prover {
    key: SigningKey,
    /// The key as kept: its PKCS#8 document, base64url.
    stored: String,
    /// The proof header, with the public key as a JWK (RFC 7517).
    header: String,
    /// The last `DPoP-Nonce` from each endpoint (its URL without query), for the next proof.
    nonces: Mutex<HashMap<String, String>>,
}

/// Never the key: Debug output ends up in logs.
impl std::fmt::Debug for Prover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prover(<dpop key>)")
    }
}

impl PartialEq for Prover {
    fn eq(&self, other: &Self) -> bool {
        self.stored == other.stored
    }
}

impl Eq for Prover {}

impl Prover {
    /// A new key pair from the operating system's randomness.
    pub(crate) fn generate() -> Result<Self, String> {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .map_err(|_| "cannot make a DPoP key pair".to_owned())?;
        Self::from_pkcs8(pkcs8.as_ref())
    }

    /// The key kept by [`stored`](Self::stored).
    pub(crate) fn from_stored(stored: &str) -> Result<Self, String> {
        use base64::Engine as _;
        let pkcs8 = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(stored)
            .map_err(|_| "the kept DPoP key is not base64url".to_owned())?;
        Self::from_pkcs8(&pkcs8)
    }

    fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, String> {
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8,
            &SystemRandom::new(),
        )
        .map_err(|error| format!("the kept DPoP key is not a P-256 key: {error}"))?;
        // The public key is the uncompressed point: 0x04, then x and y, 32 bytes each.
        let point = pair.public_key().as_ref();
        let (x, y) = point[1..].split_at(32);
        let header = serde_json::json!({
            "typ": "dpop+jwt",
            "alg": ALG,
            "jwk": {"kty": "EC", "crv": "P-256", "x": urls::base64url(x), "y": urls::base64url(y)},
        });
        Ok(Self {
            key: SigningKey::Es256(pair),
            stored: urls::base64url(pkcs8),
            header: header.to_string(),
            nonces: Mutex::new(HashMap::new()),
        })
    }

    /// The key as it is kept beside the tokens (a secret: the caller keeps it as one).
    pub(crate) fn stored(&self) -> String {
        self.stored.clone()
    }

    /// A proof for one `method` request to `url`: for the MCP server with the `token` it
    /// presents and the `body` it sends; for a token endpoint with neither.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        token: Option<&str>,
        body: Option<&[u8]>,
    ) -> Result<String, String> {
        let target = target(url)?;
        let mut claims = serde_json::json!({
            "jti": jti()?,
            "htm": method,
            "htu": target,
            "iat": now_secs(),
        });
        let sha256 = |bytes: &[u8]| ring::digest::digest(&ring::digest::SHA256, bytes);
        if let Some(token) = token {
            claims["ath"] = urls::base64url(sha256(token.as_bytes()).as_ref()).into();
        }
        if let Some(body) = body {
            let digest = urls::base64(sha256(body).as_ref());
            claims["content_digest"] = format!("sha-256=:{digest}:").into();
        }
        if let Some(nonce) = self.nonces().get(&target) {
            claims["nonce"] = nonce.clone().into();
        }
        self.key.sign_with_header(&self.header, &claims)
    }

    /// Keeps the nonce the endpoint at `url` sent, for its next proof.
    pub(crate) fn remember_nonce(&self, url: &str, nonce: &str) {
        // A nonce is a token of visible characters (RFC 9449 §8.1); anything else is ignored.
        let visible = |c: char| c.is_ascii_graphic();
        if let Ok(target) = target(url)
            && !nonce.is_empty()
            && nonce.len() <= 1024
            && nonce.chars().all(visible)
        {
            self.nonces().insert(target, nonce.to_owned());
        }
    }

    fn nonces(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.nonces.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A proof's unique id: 16 random bytes, base64url.
fn jti() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes)
        .map_err(|error| format!("cannot get random bytes for a DPoP proof: {error}"))?;
    Ok(urls::base64url(&bytes))
}

/// Seconds since the Unix epoch, for `iat`.
fn now_secs() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |elapsed| elapsed.as_secs())
}

/// `htu`: the URL without its query and fragment (RFC 9449 §4.2).
fn target(url: &str) -> Result<String, String> {
    let mut url = urls::parse(url)?;
    url.set_query(None);
    url.set_fragment(None);
    Ok(url.to_string())
}

/// Whether an authorization server offers DPoP proofs we can make.
pub(crate) fn offered(algorithms: Option<&[String]>) -> bool {
    algorithms.is_some_and(|list| list.iter().any(|alg| alg == ALG))
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    use super::*;

    fn decode(part: &str) -> Vec<u8> {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .expect("base64url")
    }

    /// The header and claims of `proof`, once its signature checks out against the JWK in
    /// its own header (as a server checks it).
    fn verified(proof: &str) -> (serde_json::Value, serde_json::Value) {
        let parts: Vec<&str> = proof.split('.').collect();
        let header: serde_json::Value = serde_json::from_slice(&decode(parts[0])).expect("json");
        let jwk = &header["jwk"];
        let mut point = vec![4u8];
        point.extend(decode(jwk["x"].as_str().expect("x")));
        point.extend(decode(jwk["y"].as_str().expect("y")));
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point);
        let message = format!("{}.{}", parts[0], parts[1]);
        public
            .verify(message.as_bytes(), &decode(parts[2]))
            .expect("the proof verifies against its own jwk");
        let claims = serde_json::from_slice(&decode(parts[1])).expect("json");
        (header, claims)
    }

    #[test]
    fn a_proof_signs_the_request_and_shows_only_the_public_key() {
        let prover = Prover::generate().expect("key");
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let proof = prover
            .proof(
                "POST",
                "https://mcp.example/mcp?x=1#f",
                Some("tok"),
                Some(body),
            )
            .expect("proof");
        let (header, claims) = verified(&proof);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert!(header["jwk"].get("d").is_none(), "no private part");
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example/mcp");
        // RFC 9449 §4.2 / §7: ath is base64url(SHA-256(token)).
        let ath = urls::base64url(ring::digest::digest(&ring::digest::SHA256, b"tok").as_ref());
        assert_eq!(claims["ath"], ath.as_str());
        let digest = urls::base64(ring::digest::digest(&ring::digest::SHA256, body).as_ref());
        assert_eq!(
            claims["content_digest"],
            format!("sha-256=:{digest}:").as_str()
        );
        assert!(
            claims["iat"]
                .as_u64()
                .is_some_and(|iat| iat.abs_diff(now_secs()) < 5)
        );
        assert!(claims.get("nonce").is_none());
        // Each proof is fresh.
        let again = prover.proof("POST", "https://mcp.example/mcp", Some("tok"), Some(body));
        assert_ne!(verified(&again.expect("proof")).1["jti"], claims["jti"]);
    }

    #[test]
    fn a_token_request_proof_has_no_token_hash_nor_digest() {
        let prover = Prover::generate().expect("key");
        let proof = prover.proof("POST", "https://as.example/token", None, None);
        let (_, claims) = verified(&proof.expect("proof"));
        assert!(claims.get("ath").is_none() && claims.get("content_digest").is_none());
    }

    #[test]
    fn nonces_are_kept_per_endpoint_and_strange_ones_ignored() {
        let prover = Prover::generate().expect("key");
        prover.remember_nonce("https://as.example/token?q", "n-1");
        prover.remember_nonce("https://mcp.example/mcp", "bad nonce\r\n");
        let nonce = |url| {
            let proof = prover.proof("POST", url, None, None).expect("proof");
            verified(&proof).1.get("nonce").cloned()
        };
        assert_eq!(nonce("https://as.example/token"), Some("n-1".into()));
        assert_eq!(nonce("https://mcp.example/mcp"), None);
    }

    #[test]
    fn a_kept_key_is_the_same_key() {
        let prover = Prover::generate().expect("key");
        let again = Prover::from_stored(&prover.stored()).expect("read back");
        assert_eq!(prover, again);
        assert_eq!(prover.header, again.header);
        assert_ne!(prover, Prover::generate().expect("another"));
        let error = Prover::from_stored("!!").expect_err("garbage");
        assert!(error.contains("not base64url"), "{error}");
        assert!(!format!("{prover:?}").contains(&prover.stored()));
    }
}
