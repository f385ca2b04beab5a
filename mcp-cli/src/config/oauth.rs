//! The OAuth choices a config entry makes (`token_store`, `oauth_grant`, the private key for
//! client assertions): plain values read here, acted on by the auth module.

use std::path::PathBuf;

/// `oauth_grant` (`MCP_CLI_OAUTH_GRANT`): how this client gets its tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Grant {
    /// A person logs in (browser, device code, pasted redirect, or `--auth-follow`).
    #[default]
    AuthorizationCode,
    /// The client asks for a token in its own name.
    ClientCredentials,
    /// Workload identity federation: a JWT the platform gave the workload is the grant
    /// (RFC 7523 §2.1, `oauth_assertion_file` or `oauth_assertion_env`).
    JwtBearer,
    /// Enterprise-managed authorization: the person's ID token from the company's identity
    /// provider, exchanged there for an identity assertion grant (RFC 8693), which the
    /// server's authorization server takes as a JWT grant (RFC 7523).
    Enterprise,
}

impl Grant {
    /// Whether tokens come without a person: such a grant runs whenever a token is needed,
    /// even where no login may start.
    pub fn is_machine(self) -> bool {
        matches!(self, Self::ClientCredentials | Self::JwtBearer)
    }
}

impl std::str::FromStr for Grant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "authorization_code" => Ok(Self::AuthorizationCode),
            "client_credentials" => Ok(Self::ClientCredentials),
            "jwt_bearer" => Ok(Self::JwtBearer),
            "enterprise" => Ok(Self::Enterprise),
            other => Err(format!(
                "oauth_grant is \"authorization_code\", \"client_credentials\", \"jwt_bearer\" \
                 or \"enterprise\", not {other:?}"
            )),
        }
    }
}

/// A JWT we present and do not make ourselves: a workload's token, or a person's ID token
/// from the identity provider.
#[derive(Clone, PartialEq, Eq)]
pub enum Jwt {
    /// Read from this file each time it is needed, so a token the platform rotates (a
    /// Kubernetes projected token, a CI job's token file) is picked up.
    File(PathBuf),
    /// The value of the variable the config named, read when the config was.
    Value(String),
}

/// Never the token itself: Debug output ends up in logs.
impl std::fmt::Debug for Jwt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Value(_) => f.write_str("Value(<secret>)"),
        }
    }
}

impl Jwt {
    /// The token, trimmed; an error names the file and never the content.
    pub fn read(&self) -> Result<String, String> {
        let text = match self {
            Self::File(path) => std::fs::read_to_string(path).map_err(|error| {
                format!("cannot read the token file {}: {error}", path.display())
            })?,
            Self::Value(text) => text.clone(),
        };
        let token = text.trim();
        let parts = token.split('.').count();
        if token.is_empty() || parts != 3 || token.contains(char::is_whitespace) {
            let place = match self {
                Self::File(path) => format!("the token file {}", path.display()),
                Self::Value(_) => "the token variable".to_owned(),
            };
            return Err(format!(
                "{place} does not hold a JWT (three dot-separated parts)"
            ));
        }
        Ok(token.to_owned())
    }
}

/// The company's identity provider, for [`Grant::Enterprise`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityProvider {
    /// Its issuer (`oauth_idp_issuer`): its metadata is found from here.
    pub issuer: String,
    /// mcp-cli's client id there (`oauth_idp_client_id`), for a login and the token exchange.
    pub client_id: Option<String>,
    /// Its secret, read from the variable `oauth_idp_client_secret_env` names.
    pub client_secret: Option<Secret>,
    /// An ID token a program hands us (`oauth_id_token_file`, `oauth_id_token_env`); without
    /// one, the person logs in to the identity provider.
    pub id_token: Option<Jwt>,
}

/// A string never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
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
    /// The PEM file (`oauth_private_key_file`), read each time a token is needed, so a
    /// rotated key is picked up.
    pub path: PathBuf,
    /// The algorithm the client assertion is signed with (`oauth_signing_alg`).
    pub alg: SigningAlg,
}

/// `token_store`: where tokens are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TokenStore {
    /// The keychain when one answers, else the file (always the file in a build without
    /// the `keychain` feature).
    #[default]
    Auto,
    /// The keychain only: without one (or in a build without the `keychain` feature),
    /// logins cannot be kept (a clear error).
    Keyring,
    /// The 0600 file in the state folder only.
    File,
}

impl std::str::FromStr for TokenStore {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Self::Auto),
            "keyring" => Ok(Self::Keyring),
            "file" => Ok(Self::File),
            other => Err(format!(
                "token_store is \"auto\", \"keyring\" or \"file\", not {other:?}"
            )),
        }
    }
}
