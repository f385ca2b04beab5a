//! Machine clients: the `client_credentials` grant (RFC 6749 §4.4), the client proving who
//! it is with its secret or with a private-key JWT (RFC 7523), and no person involved.

use std::path::PathBuf;

/// `oauth_grant` (`MCP_CLI_OAUTH_GRANT`): how this client gets its tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Grant {
    /// A person logs in (browser, device code, pasted redirect, or `--auth-follow`).
    #[default]
    AuthorizationCode,
    /// The client asks for a token in its own name.
    ClientCredentials,
}

impl std::str::FromStr for Grant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "authorization_code" => Ok(Self::AuthorizationCode),
            "client_credentials" => Ok(Self::ClientCredentials),
            other => Err(format!(
                "oauth_grant is \"authorization_code\" or \"client_credentials\", not {other:?}"
            )),
        }
    }
}

/// `oauth_signing_alg` (`MCP_CLI_OAUTH_SIGNING_ALG`): the private key's algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigningAlg {
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
}

impl std::str::FromStr for SigningAlg {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "ES256" => Ok(Self::Es256),
            "RS256" => Ok(Self::Rs256),
            other => Err(format!(
                "oauth_signing_alg is \"ES256\" or \"RS256\", not {other:?}"
            )),
        }
    }
}

/// A private key in a PEM file (`oauth_private_key_file`), read when a token is needed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateKey {
    pub path: PathBuf,
    pub alg: SigningAlg,
}

/// `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
pub(crate) const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long a signed assertion is good for: it is made for one request.
const ASSERTION_LIFETIME: u64 = 300;

/// A client assertion for `audience` (the endpoint it is sent to), signed with `key`: issuer
/// and subject the client id, a fresh `jti`, five minutes to live (RFC 7523 §3).
pub(crate) fn assertion(
    key: &PrivateKey,
    client_id: &str,
    audience: &str,
) -> Result<String, String> {
    let path = key.path.display();
    let pem = std::fs::read(&key.path)
        .map_err(|error| format!("cannot read the private key {path}: {error}"))?;
    let (algorithm, encoding) = match key.alg {
        SigningAlg::Es256 => (
            jsonwebtoken::Algorithm::ES256,
            jsonwebtoken::EncodingKey::from_ec_pem(&pem),
        ),
        SigningAlg::Rs256 => (
            jsonwebtoken::Algorithm::RS256,
            jsonwebtoken::EncodingKey::from_rsa_pem(&pem),
        ),
    };
    let wanted = match key.alg {
        SigningAlg::Es256 => "a P-256 EC key in PKCS#8 PEM (BEGIN PRIVATE KEY)",
        SigningAlg::Rs256 => "an RSA key in PEM (BEGIN PRIVATE KEY or BEGIN RSA PRIVATE KEY)",
    };
    let encoding =
        encoding.map_err(|error| format!("the private key {path} is not {wanted}: {error}"))?;
    let now = super::store::now_secs();
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME,
        "jti": super::flow::random_token()?,
    });
    let header = jsonwebtoken::Header::new(algorithm);
    jsonwebtoken::encode(&header, &claims, &encoding)
        .map_err(|error| format!("cannot sign with the private key {path} as {wanted}: {error}"))
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
        scopes.to_vec(),
    )
}
