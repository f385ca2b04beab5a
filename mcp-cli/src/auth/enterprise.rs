//! Enterprise-managed authorization (the MCP extension
//! `io.modelcontextprotocol/enterprise-managed-authorization`, SEP-990): the company's
//! identity provider vouches for the person, so no server asks them to log in.
//!
//! Three parties, three steps: the person's ID token from the identity provider (a token a
//! program hands us, or one login there, kept and refreshed for every server behind it);
//! the token exchange at the identity provider (RFC 8693) for an identity assertion grant
//! (an ID-JAG) naming the MCP server's authorization server and resource; and that grant
//! traded for an access token at the authorization server (RFC 7523). Each refusal says
//! which party refused.

use super::discovery::{self, Discovered, ServerMetadata};
use super::flow::{self, Attempt};
use super::http::printable;
use super::store::{self, Place, Record, Secret, Tokens, now_secs};
use super::{IdentityProvider, Login, OAuth, State, register, urls};

/// RFC 8693's grant, and the token types of this profile.
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// An ID token this close to its expiry (in seconds) is not exchanged any more.
const ID_TOKEN_MARGIN: u64 = 60;

impl OAuth {
    /// The whole grant for this server, the access token saved.
    pub(super) async fn enterprise_login(
        &self,
        state: &mut State,
        found: &Discovered,
        wanted: Vec<String>,
    ) -> Result<(), String> {
        let idp = self.identity_provider()?;
        let identity = self.settings.identity();
        let as_issuer = printable(&found.server.issuer);
        let usable_metadata_url =
            identity.metadata_url.is_some() && found.server.client_id_metadata_document_supported;
        if identity.client_id.is_none() && !usable_metadata_url {
            return Err(format!(
                "enterprise-managed authorization needs mcp-cli's client at the authorization \
                 server {as_issuer}: set `oauth_client_id` (with `oauth_client_secret_env` or \
                 `oauth_private_key_file`) or `oauth_client_metadata_url`"
            ));
        }
        let mut client =
            register::client(&*self.http, &found.server, &identity, None, "", &[]).await?;
        client.dpop = self.choose_dpop(found)?;
        let scopes = self.choose_scopes(found, wanted, Vec::new());
        let (metadata, id_token) = self.id_token(idp).await?;
        let grant = self
            .exchange(idp, &metadata, &id_token, found, &scopes)
            .await?;
        let what = format!("the identity assertion grant (authorization server {as_issuer})");
        let endpoint = &found.server.token_endpoint;
        let tokens = self
            .jwt_grant(state, endpoint, &client, &grant, &scopes, found, &what)
            .await?;
        self.keep(state, found, client, tokens)
    }

    fn identity_provider(&self) -> Result<&IdentityProvider, String> {
        self.settings.idp.as_ref().ok_or_else(|| {
            "oauth_grant = \"enterprise\" needs the identity provider: set `oauth_idp_issuer` \
             (or MCP_CLI_OAUTH_IDP_ISSUER)"
                .to_owned()
        })
    }

    /// Whether an ID token can be had without the person: one handed to us, or a login at
    /// the identity provider kept with an ID token still good or a refresh token.
    pub(super) fn id_token_at_hand(&self) -> bool {
        let Some(idp) = &self.settings.idp else {
            return false;
        };
        if idp.id_token.is_some() {
            return true;
        }
        let kept = self.idp_place(idp).load().and_then(|record| record.tokens);
        kept.is_some_and(|tokens| tokens.refresh_token.is_some() || id_token_fresh(&tokens))
    }

    /// Where the login at the identity provider is kept: one for every server behind it.
    fn idp_place(&self, idp: &IdentityProvider) -> Place {
        Place {
            dir: self.settings.dir.clone(),
            name: format!("identity provider {}", idp.issuer),
            url: idp.issuer.clone(),
            choice: self.settings.token_store,
        }
    }

    /// The identity provider's metadata and the person's ID token: the one handed to us, else
    /// the kept one while it is good, else a refreshed one, else a login there (when logins
    /// may start).
    async fn id_token(&self, idp: &IdentityProvider) -> Result<(ServerMetadata, String), String> {
        let issuer = printable(&idp.issuer);
        let issuer_url = urls::parse(&idp.issuer)
            .map_err(|error| format!("oauth_idp_issuer is not a URL: {error}"))?;
        let metadata = discovery::server_metadata(&*self.http, &issuer_url, true)
            .await?
            .ok_or_else(|| format!("the identity provider {issuer} publishes no metadata"))?;
        if let Some(jwt) = &idp.id_token {
            return Ok((metadata, jwt.read()?));
        }
        let place = self.idp_place(idp);
        let client = idp_client(idp, &metadata);
        let kept = place.load().and_then(|record| record.tokens);
        if let Some(tokens) = kept {
            if id_token_fresh(&tokens)
                && let Some(Secret(id_token)) = tokens.id_token
            {
                return Ok((metadata, id_token));
            }
            let refreshed =
                flow::refresh(&*self.http, &metadata.token_endpoint, &client, "", &tokens).await;
            if let Ok(fresh) = refreshed
                && let Some(Secret(id_token)) = fresh.id_token.clone()
            {
                save_idp(&place, &metadata, &client, fresh)?;
                return Ok((metadata, id_token));
            }
        }
        if self.settings.login == Login::Never {
            return Err(format!(
                "{} needs a login at the identity provider {issuer}: run `mcp-cli auth {}`",
                self.name, self.name
            ));
        }
        let tokens = self.idp_login(idp, &metadata, client.clone()).await?;
        let Some(Secret(id_token)) = tokens.id_token.clone() else {
            return Err(format!(
                "the login at the identity provider {issuer} gave no ID token (asked for scope \
                 `openid`)"
            ));
        };
        save_idp(&place, &metadata, &client, tokens)?;
        Ok((metadata, id_token))
    }

    /// The person logs in at the identity provider (OpenID Connect, with PKCE), in whichever
    /// way this login may go: browser, pasted redirect, device code or unattended.
    async fn idp_login(
        &self,
        idp: &IdentityProvider,
        metadata: &ServerMetadata,
        client: store::Client,
    ) -> Result<Tokens, String> {
        if idp.client_id.is_none() {
            return Err(format!(
                "a login at the identity provider {} needs mcp-cli's client there: set \
                 `oauth_idp_client_id` (or hand over an ID token with `oauth_id_token_file`)",
                printable(&idp.issuer)
            ));
        }
        flow::check_pkce(metadata)?;
        let mut scopes = vec!["openid".to_owned()];
        let offered = metadata.scopes_supported.as_deref().unwrap_or_default();
        if offered.iter().any(|scope| scope == "offline_access") {
            scopes.push("offline_access".into());
        }
        let loopback = self.bind_loopback(None).await?;
        let attempt = Attempt {
            pkce: flow::Pkce::new()?,
            state: flow::random_token()?,
            redirect_uri: loopback.redirect_uri(),
            scopes,
            resource: String::new(),
        };
        let found = Discovered {
            resource: String::new(),
            scopes_supported: None,
            dpop: false,
            server: metadata.clone(),
        };
        self.person_tokens(&found, &client, &attempt, &loopback)
            .await
    }

    /// The token exchange at the identity provider: the ID token for an identity assertion
    /// grant naming `found`'s authorization server (`audience`) and resource.
    async fn exchange(
        &self,
        idp: &IdentityProvider,
        metadata: &ServerMetadata,
        id_token: &str,
        found: &Discovered,
        scopes: &[String],
    ) -> Result<String, String> {
        let scope = scopes.join(" ");
        let params = [
            ("grant_type", TOKEN_EXCHANGE),
            ("requested_token_type", ID_JAG),
            ("audience", found.server.issuer.as_str()),
            ("resource", found.resource.as_str()),
            ("scope", scope.as_str()),
            ("subject_token", id_token),
            ("subject_token_type", ID_TOKEN),
        ];
        let client = idp_client(idp, metadata);
        let endpoint = &metadata.token_endpoint;
        let what = format!(
            "the token exchange (identity provider {})",
            printable(&idp.issuer)
        );
        let answer = flow::token_request(&*self.http, endpoint, &client, &params, &what)
            .await
            .map_err(String::from)?;
        if answer.issued_token_type.as_deref() != Some(ID_JAG) {
            return Err(format!(
                "{what} at {endpoint} issued a {} token, not an identity assertion grant ({ID_JAG})",
                printable(answer.issued_token_type.as_deref().unwrap_or("untyped"))
            ));
        }
        Ok(answer.access_token)
    }
}

/// mcp-cli's client at the identity provider, as configured (none at all without an id),
/// authenticated as the identity provider's metadata lists.
fn idp_client(idp: &IdentityProvider, metadata: &ServerMetadata) -> store::Client {
    let identity = register::Identity {
        client_id: idp.client_id.clone(),
        client_secret: idp.client_secret.as_ref().map(|secret| secret.0.clone()),
        ..register::Identity::default()
    };
    register::configured(metadata, &identity).unwrap_or_else(store::Client::anonymous)
}

/// Keeps the login at the identity provider (without the configured secret).
fn save_idp(
    place: &Place,
    metadata: &ServerMetadata,
    client: &store::Client,
    tokens: Tokens,
) -> Result<(), String> {
    let mut kept = client.clone();
    kept.client_secret = None;
    place.save(&Record {
        server_url: place.url.clone(),
        issuer: metadata.issuer.clone(),
        token_endpoint: metadata.token_endpoint.clone(),
        resource: String::new(),
        client: Some(kept),
        tokens: Some(tokens),
        dpop_key: None,
    })
}

/// Whether the kept ID token is good for a while yet (its own `exp`, read without checking
/// the signature: the identity provider checks that when it is exchanged).
fn id_token_fresh(tokens: &Tokens) -> bool {
    let Some(Secret(id_token)) = &tokens.id_token else {
        return false;
    };
    expiry(id_token).is_some_and(|exp| exp > now_secs() + ID_TOKEN_MARGIN)
}

/// A JWT's `exp` claim.
fn expiry(jwt: &str) -> Option<u64> {
    use base64::Engine as _;
    let payload = jwt.split('.').nth(1)?;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&claims).ok()?;
    claims.get("exp")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: serde_json::Value) -> String {
        let part = |value: &serde_json::Value| urls::base64url(value.to_string().as_bytes());
        format!(
            "{}.{}.sig",
            part(&serde_json::json!({"alg": "ES256"})),
            part(&claims)
        )
    }

    #[test]
    fn an_id_token_is_fresh_until_a_minute_before_its_exp() {
        let tokens = |exp: u64| Tokens {
            access_token: Secret(String::new()),
            refresh_token: None,
            expires_at: None,
            issued_at: None,
            scopes: Vec::new(),
            dpop_bound: false,
            id_token: Some(Secret(jwt(serde_json::json!({"exp": exp})))),
        };
        assert!(id_token_fresh(&tokens(now_secs() + 600)));
        assert!(!id_token_fresh(&tokens(now_secs() + 30)));
        assert_eq!(expiry("not a jwt"), None);
        assert_eq!(expiry(&jwt(serde_json::json!({"sub": "x"}))), None);
    }
}
