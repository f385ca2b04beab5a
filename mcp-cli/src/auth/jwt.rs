//! Signed JSON Web Tokens (RFC 7519) for private-key JWT client assertions and DPoP proofs:
//! ES256 and RS256 (RFC 7518 §3.3 and §3.4) signed with ring, keys read from PEM files.
//!
//! Only what a client assertion needs: a fixed header, the claims as given, one signature.
//! The token is what the `jsonwebtoken` crate wrote before: header `{"typ":"JWT","alg":...}`,
//! then the claims as JSON, each part base64url without padding, joined by dots.

use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};

use super::urls::base64url;
use crate::config::oauth::SigningAlg;

/// A private key ready to sign with.
#[derive(Debug)]
pub(crate) enum SigningKey {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

impl SigningKey {
    /// Reads `pem` as a key for `alg`: ES256 takes a P-256 key in PKCS#8 (`BEGIN PRIVATE
    /// KEY`), RS256 an RSA key in PKCS#8 or PKCS#1 (`BEGIN RSA PRIVATE KEY`).
    pub(crate) fn from_pem(alg: SigningAlg, pem: &[u8]) -> Result<Self, String> {
        let (label, der) = pem_block(pem)?;
        let rejected = |error: ring::error::KeyRejected| format!("ring rejects it: {error}");
        match (alg, label.as_str()) {
            (SigningAlg::Es256, "PRIVATE KEY") => {
                let ecdsa = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
                let key = EcdsaKeyPair::from_pkcs8(ecdsa, &der, &SystemRandom::new());
                key.map(Self::Es256).map_err(rejected)
            }
            (SigningAlg::Rs256, "PRIVATE KEY") => RsaKeyPair::from_pkcs8(&der)
                .map(Self::Rs256)
                .map_err(rejected),
            (SigningAlg::Rs256, "RSA PRIVATE KEY") => RsaKeyPair::from_der(&der)
                .map(Self::Rs256)
                .map_err(rejected),
            (_, label) => Err(format!("its PEM block is a {label}")),
        }
    }

    /// The JWT of `claims`, signed with this key.
    pub(crate) fn sign(&self, claims: &serde_json::Value) -> Result<String, String> {
        let header = match self {
            Self::Es256(_) => r#"{"typ":"JWT","alg":"ES256"}"#,
            Self::Rs256(_) => r#"{"typ":"JWT","alg":"RS256"}"#,
        };
        self.sign_with_header(header, claims)
    }

    /// The JWT of `claims` under `header` (JSON naming this key's `alg`), signed.
    pub(crate) fn sign_with_header(
        &self,
        header: &str,
        claims: &serde_json::Value,
    ) -> Result<String, String> {
        let claims = serde_json::to_vec(claims).map_err(|error| error.to_string())?;
        let message = format!("{}.{}", base64url(header.as_bytes()), base64url(&claims));
        let rng = SystemRandom::new();
        let failed = |_| "ring could not sign".to_owned();
        let signature = match self {
            // The fixed-size form JWS wants: R then S, 32 bytes each (RFC 7518 §3.4).
            Self::Es256(key) => key
                .sign(&rng, message.as_bytes())
                .map_err(failed)?
                .as_ref()
                .to_vec(),
            Self::Rs256(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                let pkcs1 = &signature::RSA_PKCS1_SHA256;
                (key.sign(pkcs1, &rng, message.as_bytes(), &mut signature)).map_err(failed)?;
                signature
            }
        };
        Ok(format!("{message}.{}", base64url(&signature)))
    }
}

/// The first PEM block in `text` (RFC 7468): its label and its decoded body.
fn pem_block(text: &[u8]) -> Result<(String, Vec<u8>), String> {
    use base64::Engine as _;
    let text = std::str::from_utf8(text).map_err(|_| "it is not a PEM text file".to_owned())?;
    let mut lines = text.lines().map(str::trim);
    let label = (lines.by_ref())
        .find_map(|line| line.strip_prefix("-----BEGIN ")?.strip_suffix("-----"))
        .ok_or("it holds no PEM block (no -----BEGIN line)")?;
    let end = format!("-----END {label}-----");
    let body: String = (lines.take_while(|line| *line != end))
        .flat_map(|line| line.split_whitespace())
        .collect();
    if !text.contains(&end) {
        return Err(format!("its {label} block has no {end} line"));
    }
    let der = base64::engine::general_purpose::STANDARD.decode(body);
    let der = der.map_err(|_| format!("its {label} block is not plain base64 (encrypted?)"))?;
    Ok((label.to_owned(), der))
}

/// The claims of `token` once its header is the one for `alg` and its signature checks out
/// against the public key in `public_pem` (an SPKI `BEGIN PUBLIC KEY` file); for tests, which
/// check tokens against keys openssl made rather than against our own reading of them.
#[cfg(test)]
pub(crate) fn verified_claims(
    token: &str,
    alg: SigningAlg,
    public_pem: &[u8],
) -> Result<serde_json::Value, String> {
    use base64::Engine as _;
    let decode = |part: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part);
    let parts: Vec<&str> = token.split('.').collect();
    let [header, claims, sig] = parts[..] else {
        return Err(format!("not three parts: {token}"));
    };
    let (expected, algorithm): (_, &dyn signature::VerificationAlgorithm) = match alg {
        SigningAlg::Es256 => (
            r#"{"typ":"JWT","alg":"ES256"}"#,
            &signature::ECDSA_P256_SHA256_FIXED,
        ),
        SigningAlg::Rs256 => (
            r#"{"typ":"JWT","alg":"RS256"}"#,
            &signature::RSA_PKCS1_2048_8192_SHA256,
        ),
    };
    let header = decode(header).map_err(|e| e.to_string())?;
    if header != expected.as_bytes() {
        return Err(format!("header {}", String::from_utf8_lossy(&header)));
    }
    let (label, spki) = pem_block(public_pem)?;
    assert_eq!(label, "PUBLIC KEY");
    let public = signature::UnparsedPublicKey::new(algorithm, spki_key(&spki));
    let sig = decode(sig).map_err(|e| e.to_string())?;
    (public.verify(format!("{}.{claims}", parts[0]).as_bytes(), &sig))
        .map_err(|_| "bad signature".to_owned())?;
    serde_json::from_slice(&decode(claims).map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

/// The key bits of a DER SubjectPublicKeyInfo: `SEQUENCE { AlgorithmIdentifier, BIT STRING }`,
/// the BIT STRING's content past its unused-bits byte (the EC point, or the RSAPublicKey).
#[cfg(test)]
fn spki_key(der: &[u8]) -> &[u8] {
    /// The header length and the content length of the DER element at the start of `der`.
    fn element(der: &[u8]) -> (usize, usize) {
        match der[1] {
            short @ 0..0x80 => (2, usize::from(short)),
            long => {
                let count = usize::from(long & 0x7f);
                let length = (der[2..2 + count].iter()).fold(0, |n, b| n << 8 | usize::from(*b));
                (2 + count, length)
            }
        }
    }
    let (outer, _) = element(der);
    let inner = &der[outer..];
    let (header, length) = element(inner);
    let bits = &inner[header + length..];
    let (header, length) = element(bits);
    &bits[header + 1..header + length]
}

#[cfg(test)]
mod tests {
    use super::*;

    const EC: &[u8] = include_bytes!("testdata/ec.pem");
    const EC_PUBLIC: &[u8] = include_bytes!("testdata/ec.pub");
    const RSA: &[u8] = include_bytes!("testdata/rsa.pem");
    const RSA_PUBLIC: &[u8] = include_bytes!("testdata/rsa.pub");

    #[test]
    fn tokens_verify_against_the_public_halves_openssl_wrote() {
        let claims = serde_json::json!({"iss": "me", "aud": "https://as.example", "n": 1});
        for (alg, private, public) in [
            (SigningAlg::Es256, EC, EC_PUBLIC),
            (SigningAlg::Rs256, RSA, RSA_PUBLIC),
        ] {
            let token = (SigningKey::from_pem(alg, private).expect("key"))
                .sign(&claims)
                .expect("signed");
            assert_eq!(verified_claims(&token, alg, public), Ok(claims.clone()));
            // Another key's public half does not verify it.
            let other = if public == EC_PUBLIC {
                RSA_PUBLIC
            } else {
                EC_PUBLIC
            };
            assert!(verified_claims(&token, alg, other).is_err());
        }
    }

    #[test]
    fn an_rsa_token_is_deterministic_and_has_the_jsonwebtoken_layout() {
        let key = SigningKey::from_pem(SigningAlg::Rs256, RSA).expect("key");
        let claims = serde_json::json!({"iss": "me", "sub": "me"});
        let token = key.sign(&claims).expect("signed");
        // PKCS#1 v1.5 signatures are deterministic: the same token each time.
        assert_eq!(key.sign(&claims), Ok(token.clone()));
        assert!(
            token.starts_with(
                "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJtZSIsInN1YiI6Im1lIn0."
            ),
            "{token}"
        );
    }

    #[test]
    fn pkcs1_rsa_keys_are_read_too_and_other_files_are_named() {
        // The same RSA key as `openssl rsa -traditional` writes it.
        let pkcs1 = include_bytes!("testdata/rsa-pkcs1.pem");
        let key = SigningKey::from_pem(SigningAlg::Rs256, pkcs1).expect("PKCS#1");
        let token = key.sign(&serde_json::json!({})).expect("signed");
        assert!(verified_claims(&token, SigningAlg::Rs256, RSA_PUBLIC).is_ok());
        let sec1 = include_bytes!("testdata/ec-sec1.pem");
        let error = SigningKey::from_pem(SigningAlg::Es256, sec1).expect_err("SEC1");
        assert_eq!(error, "its PEM block is a EC PRIVATE KEY");
        let error = SigningKey::from_pem(SigningAlg::Rs256, EC).expect_err("EC for RS256");
        assert!(error.starts_with("ring rejects it"), "{error}");
        let error = SigningKey::from_pem(SigningAlg::Es256, b"hello").expect_err("not PEM");
        assert!(error.contains("no -----BEGIN line"), "{error}");
        let cut = &EC[..EC.len() / 2];
        let error = SigningKey::from_pem(SigningAlg::Es256, cut).expect_err("cut");
        assert!(
            error.contains("no -----END PRIVATE KEY----- line"),
            "{error}"
        );
    }
}
