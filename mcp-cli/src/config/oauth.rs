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
