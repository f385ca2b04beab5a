//! Machine clients: the `client_credentials` grant (RFC 6749 §4.4), the client proving who
//! it is with its secret or with a private-key JWT (RFC 7523), and no person involved.

use crate::config::oauth::{PrivateKey, SigningAlg};

/// A client's private key with the authorization server its assertions are for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Signer {
    pub(crate) key: PrivateKey,
    /// The assertions' `aud`: the authorization server's issuer identifier (RFC 7523 §3).
    pub(crate) audience: String,
}

/// `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
pub(crate) const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long a signed assertion is good for: it is made for one request.
const ASSERTION_LIFETIME: u64 = 300;

/// A client assertion signed by `signer`: issuer and subject the client id, audience the
/// authorization server, a fresh `jti`, five minutes to live (RFC 7523 §3).
pub(crate) fn assertion(signer: &Signer, client_id: &str) -> Result<String, String> {
    let (key, audience) = (&signer.key, &signer.audience);
    let path = key.path.display();
    let pem = std::fs::read(&key.path)
        .map_err(|error| format!("cannot read the private key {path}: {error}"))?;
    let wanted = match key.alg {
        SigningAlg::Es256 => {
            "a P-256 EC key in PKCS#8 PEM (BEGIN PRIVATE KEY; `openssl pkcs8 -topk8 -nocrypt` \
             converts a BEGIN EC PRIVATE KEY file)"
        }
        SigningAlg::Rs256 => "an RSA key in PEM (BEGIN PRIVATE KEY or BEGIN RSA PRIVATE KEY)",
    };
    let signing = super::jwt::SigningKey::from_pem(key.alg, &pem)
        .map_err(|error| format!("the private key {path} is not {wanted}: {error}"))?;
    let now = super::store::now_secs();
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME,
        "jti": super::flow::random_token()?,
    });
    signing
        .sign(&claims)
        .map_err(|error| format!("cannot sign with the private key {path}: {error}"))
}

/// A token in the client's own name from `token_endpoint` (the client authenticated as
/// [`flow::post_as_client`](super::flow::post_as_client) does).
pub(crate) async fn client_credentials(
    http: &dyn super::http::Http,
    token_endpoint: &str,
    client: &super::store::Client,
    scopes: &[String],
    resource: &str,
) -> Result<super::store::Tokens, String> {
    let scope = scopes.join(" ");
    let mut params = vec![("grant_type", "client_credentials"), ("resource", resource)];
    if !scope.is_empty() {
        params.push(("scope", &scope));
    }
    let response = super::flow::post_as_client(http, token_endpoint, client, &params).await?;
    super::flow::tokens_from(
        &response,
        token_endpoint,
        "the client credentials grant",
        client,
        scopes.to_vec(),
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::oauth::Grant;

    /// Test keys made for these tests with openssl (`testdata/`), each with its public half.
    fn key_file(name: &str, pem: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-cli-machine-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(name);
        std::fs::write(&path, pem).expect("key");
        path
    }

    /// The claims, once the token checks out against `public` (and names us and the server).
    fn verify(token: &str, alg: SigningAlg, public: &[u8]) -> serde_json::Value {
        let claims =
            super::super::jwt::verified_claims(token, alg, public).expect("a valid signature");
        assert_eq!(claims["iss"], "me");
        assert_eq!(claims["aud"], "https://as.example");
        let exp = claims["exp"].as_u64().expect("exp");
        assert!(exp > super::super::store::now_secs(), "not expired");
        claims
    }

    #[test]
    fn assertions_are_signed_with_es256_and_rs256_keys() {
        for (alg, name, private, public) in [
            (
                SigningAlg::Es256,
                "ec.pem",
                &include_bytes!("testdata/ec.pem")[..],
                &include_bytes!("testdata/ec.pub")[..],
            ),
            (
                SigningAlg::Rs256,
                "rsa.pem",
                &include_bytes!("testdata/rsa.pem")[..],
                &include_bytes!("testdata/rsa.pub")[..],
            ),
        ] {
            let signer = Signer {
                key: PrivateKey {
                    path: key_file(name, private),
                    alg,
                },
                audience: "https://as.example".into(),
            };
            let token = assertion(&signer, "me").expect("signed");
            let claims = verify(&token, alg, public);
            assert_eq!(claims["sub"], "me");
            let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
            assert_eq!(exp.zip(iat).map(|(e, i)| e - i), Some(ASSERTION_LIFETIME));
            // A fresh `jti` each time: an assertion is never reused.
            let again = verify(&assertion(&signer, "me").expect("signed"), alg, public);
            assert_ne!(claims["jti"], again["jti"]);
        }
    }

    #[test]
    fn a_wrong_or_missing_key_says_what_is_wanted() {
        let signer = |name: &str, pem: &[u8], alg| Signer {
            key: PrivateKey {
                path: key_file(name, pem),
                alg,
            },
            audience: "https://as.example".into(),
        };
        let sec1 = signer(
            "sec1.pem",
            include_bytes!("testdata/ec-sec1.pem"),
            SigningAlg::Es256,
        );
        let error = assertion(&sec1, "me").expect_err("SEC1 is not PKCS#8");
        assert!(error.contains("openssl pkcs8 -topk8"), "{error}");
        let swapped = signer(
            "swapped.pem",
            include_bytes!("testdata/ec.pem"),
            SigningAlg::Rs256,
        );
        let error = assertion(&swapped, "me").expect_err("an EC key for RS256");
        assert!(error.contains("is not an RSA key"), "{error}");
        let mut missing = swapped;
        missing.key.path = PathBuf::from("/nonexistent/key.pem");
        let error = assertion(&missing, "me").expect_err("no file");
        assert!(
            error.starts_with("cannot read the private key /nonexistent/key.pem"),
            "{error}"
        );
    }

    #[test]
    fn grant_and_algorithm_names_are_checked() {
        assert_eq!("client_credentials".parse(), Ok(Grant::ClientCredentials));
        assert!("password".parse::<Grant>().is_err());
        assert_eq!("RS256".parse(), Ok(SigningAlg::Rs256));
        assert!(
            "HS256"
                .parse::<SigningAlg>()
                .expect_err("no shared-secret JWTs")
                .contains("ES256")
        );
    }
}
