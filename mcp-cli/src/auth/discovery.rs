//! From a `401` to an authorization server: the `WWW-Authenticate` challenge, protected-resource
//! metadata (RFC 9728) and authorization-server metadata (RFC 8414 / OpenID Connect discovery),
//! probed in the order the MCP authorization spec (2025-11-25) gives.

use serde::Deserialize;

use super::http::{Http, Request, printable};
use super::urls::{self, Url};

/// What a `WWW-Authenticate: Bearer ...` (or `DPoP ...`, RFC 9449 §7.1) header says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bearer {
    pub(crate) resource_metadata: Option<String>,
    pub(crate) scope: Option<String>,
    pub(crate) error: Option<String>,
    /// Whether the server offered the `DPoP` scheme: it takes DPoP-bound tokens.
    pub(crate) dpop: bool,
}

impl Bearer {
    /// Reads the `Bearer` and `DPoP` challenges among possibly several (the first value of
    /// each parameter wins); `None` when there is neither.
    pub(crate) fn parse(header: &str) -> Option<Self> {
        let mut tokens = Tokens { rest: header };
        let mut in_bearer = false;
        let mut found: Option<Bearer> = None;
        while let Some(token) = tokens.next() {
            match token {
                Token::Scheme(name) => {
                    let dpop = name.eq_ignore_ascii_case("dpop");
                    in_bearer = dpop || name.eq_ignore_ascii_case("bearer");
                    if in_bearer {
                        found.get_or_insert_default().dpop |= dpop;
                    }
                }
                Token::Param(key, value) if in_bearer => {
                    let Some(bearer) = found.as_mut() else {
                        continue;
                    };
                    let slot = match key.to_ascii_lowercase().as_str() {
                        "resource_metadata" => &mut bearer.resource_metadata,
                        "scope" => &mut bearer.scope,
                        "error" => &mut bearer.error,
                        _ => continue,
                    };
                    slot.get_or_insert(value);
                }
                Token::Param(..) => {}
            }
        }
        found
    }

    /// The scopes the challenge asks for, split.
    pub(crate) fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or_default())
    }
}

pub(crate) fn split_scopes(text: &str) -> Vec<String> {
    text.split_ascii_whitespace().map(str::to_owned).collect()
}

enum Token<'a> {
    Scheme(&'a str),
    Param(&'a str, String),
}

/// RFC 9110 §11.6.1's challenge list: `scheme param=value, param="quoted", scheme2 ...`.
struct Tokens<'a> {
    rest: &'a str,
}

impl<'a> Tokens<'a> {
    fn next(&mut self) -> Option<Token<'a>> {
        self.rest = self
            .rest
            .trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        if self.rest.is_empty() {
            return None;
        }
        let end = (self.rest)
            .find(|c: char| c == '=' || c == ',' || c.is_whitespace())
            .unwrap_or(self.rest.len());
        let (name, after) = self.rest.split_at(end);
        let after_space = after.trim_start();
        // `name=value` is a parameter, unless it is a token68 (`abc==`), which we skip over.
        if let Some(value) = after_space.strip_prefix('=')
            && !value.starts_with('=')
        {
            let value = value.trim_start();
            let (value, rest) = match value.strip_prefix('"') {
                Some(quoted) => unquote(quoted),
                None => {
                    let end = value.find([',', ' ', '\t']).unwrap_or(value.len());
                    (value[..end].to_owned(), &value[end..])
                }
            };
            self.rest = rest;
            return Some(Token::Param(name, value));
        }
        self.rest = after_space.trim_start_matches('=');
        Some(Token::Scheme(name))
    }
}

/// A quoted-string's value (after the opening quote) and what follows its closing quote.
fn unquote(text: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (value, &text[i + 1..]),
            '\\' => value.extend(chars.next().map(|(_, c)| c)),
            c => value.push(c),
        }
    }
    (value, "")
}

/// RFC 9728 protected-resource metadata, the fields we use.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ResourceMetadata {
    pub(crate) resource: Option<String>,
    #[serde(default)]
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    /// RFC 9728 §2: the resource takes only DPoP-bound tokens.
    #[serde(default)]
    pub(crate) dpop_bound_access_tokens_required: bool,
}

/// RFC 8414 authorization-server metadata, the fields we use.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: String,
    pub(crate) token_endpoint: String,
    pub(crate) registration_endpoint: Option<String>,
    /// RFC 8628: where device codes are asked for, when the server offers the grant.
    #[serde(default)]
    pub(crate) device_authorization_endpoint: Option<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    pub(crate) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub(crate) code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) client_id_metadata_document_supported: bool,
    #[serde(default)]
    pub(crate) authorization_response_iss_parameter_supported: bool,
    /// RFC 9449 §5.1: the algorithms of the DPoP proofs it takes, when it takes any.
    #[serde(default)]
    pub(crate) dpop_signing_alg_values_supported: Option<Vec<String>>,
    /// RFC 8414: the grants it offers.
    #[serde(default)]
    pub(crate) grant_types_supported: Option<Vec<String>>,
}

/// Where to log in for one MCP server, and for what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Discovered {
    /// The `resource` parameter (RFC 8707): the metadata's `resource`, else the server's URL.
    pub(crate) resource: String,
    /// The resource metadata's `scopes_supported`, the fallback scope choice.
    pub(crate) scopes_supported: Option<Vec<String>>,
    /// Whether the resource takes DPoP-bound tokens: its challenge offered the `DPoP`
    /// scheme, or its metadata requires them.
    pub(crate) dpop: bool,
    pub(crate) server: ServerMetadata,
}

/// Runs discovery for the MCP server at `server_url`, given what its challenge said.
pub(crate) async fn discover(
    http: &dyn Http,
    server_url: &str,
    challenge: Option<&Bearer>,
) -> Result<Discovered, String> {
    let server = urls::parse(server_url)?;
    let header_url = challenge.and_then(|c| c.resource_metadata.as_deref());
    let metadata = resource_metadata(http, &server, header_url).await?;
    let Some((metadata_url, metadata)) = metadata else {
        // A server of the 2025-03-26 spec: no resource metadata, its origin is the
        // authorization server, with default endpoints if it has no metadata either.
        // Nobody named this issuer: we guessed it from the server's URL, so the document's
        // own `issuer` is not checked against the guess.
        let issuer = urls::parse(&urls::origin(&server))?;
        let server_metadata = match server_metadata(http, &issuer, false).await? {
            Some(found) => found,
            None => default_endpoints(&issuer),
        };
        return Ok(Discovered {
            resource: urls::canonical(&server),
            scopes_supported: None,
            dpop: challenge.is_some_and(|c| c.dpop),
            server: server_metadata,
        });
    };
    let resource = match &metadata.resource {
        Some(resource) => {
            let parsed = urls::parse(resource).map_err(|error| {
                format!("the protected-resource metadata at {metadata_url} names a bad resource: {error}")
            })?;
            if !urls::covers(&parsed, &server) {
                return Err(format!(
                    "the protected-resource metadata at {metadata_url} is for {}, not for {}; \
                     refusing to send a token for one to the other",
                    printable(resource),
                    urls::canonical(&server)
                ));
            }
            resource.clone()
        }
        None => urls::canonical(&server),
    };
    let Some(issuer) = metadata.authorization_servers.first() else {
        return Err(format!(
            "the protected-resource metadata at {metadata_url} names no authorization server"
        ));
    };
    let issuer_url = urls::parse(issuer).map_err(|error| {
        format!("the protected-resource metadata at {metadata_url} names a bad authorization server: {error}")
    })?;
    let server_metadata = server_metadata(http, &issuer_url, true)
        .await?
        .ok_or_else(|| {
            format!(
                "the authorization server {} publishes no metadata (tried {})",
                printable(issuer),
                server_metadata_urls(&issuer_url).join(", ")
            )
        })?;
    Ok(Discovered {
        resource,
        scopes_supported: metadata.scopes_supported,
        dpop: challenge.is_some_and(|c| c.dpop) || metadata.dpop_bound_access_tokens_required,
        server: server_metadata,
    })
}

/// The protected-resource metadata and where it was found: the challenge's URL if it gave
/// one, else the path-suffixed well-known URI, then the root one. `None` when none answers.
pub(crate) async fn resource_metadata(
    http: &dyn Http,
    server: &Url,
    header_url: Option<&str>,
) -> Result<Option<(String, ResourceMetadata)>, String> {
    let mut candidates = Vec::new();
    if let Some(url) = header_url {
        candidates.push(url.to_owned());
    }
    let suffixed = urls::well_known_inserted(server, "oauth-protected-resource");
    let root = format!(
        "{}/.well-known/oauth-protected-resource",
        urls::origin(server)
    );
    for url in [suffixed, root] {
        if !candidates.contains(&url) {
            candidates.push(url);
        }
    }
    for url in candidates {
        urls::parse(&url)?;
        let response = http.send(Request::get(&url)).await?;
        if response.is_success() {
            return Ok(Some((
                url.clone(),
                response.json("protected-resource metadata", &url)?,
            )));
        }
    }
    Ok(None)
}

/// The metadata URLs of an issuer, in the spec's order.
fn server_metadata_urls(issuer: &Url) -> Vec<String> {
    if urls::trimmed_path(issuer).is_empty() {
        vec![
            urls::well_known_inserted(issuer, "oauth-authorization-server"),
            urls::well_known_inserted(issuer, "openid-configuration"),
        ]
    } else {
        vec![
            urls::well_known_inserted(issuer, "oauth-authorization-server"),
            urls::well_known_inserted(issuer, "openid-configuration"),
            urls::well_known_appended(issuer, "openid-configuration"),
        ]
    }
}

/// The first metadata document that answers; with `check`, checked to be the issuer's own
/// (RFC 8414 §3.3: a document naming another issuer is a mix-up attack, never used).
pub(crate) async fn server_metadata(
    http: &dyn Http,
    issuer: &Url,
    check: bool,
) -> Result<Option<ServerMetadata>, String> {
    for url in server_metadata_urls(issuer) {
        let response = http.send(Request::get(&url)).await?;
        if !response.is_success() {
            continue;
        }
        let metadata: ServerMetadata = response.json("authorization server metadata", &url)?;
        let expected = issuer.to_string();
        if check && metadata.issuer.trim_end_matches('/') != expected.trim_end_matches('/') {
            return Err(format!(
                "the authorization server metadata at {url} names issuer {}, not {expected}; \
                 refusing to use it",
                printable(&metadata.issuer)
            ));
        }
        return Ok(Some(metadata));
    }
    Ok(None)
}

/// The 2025-03-26 spec's fallback when a server publishes no metadata at all.
fn default_endpoints(origin: &Url) -> ServerMetadata {
    let base = urls::origin(origin);
    ServerMetadata {
        issuer: base.clone(),
        authorization_endpoint: format!("{base}/authorize"),
        token_endpoint: format!("{base}/token"),
        registration_endpoint: Some(format!("{base}/register")),
        device_authorization_endpoint: None,
        scopes_supported: None,
        token_endpoint_auth_methods_supported: None,
        code_challenge_methods_supported: None,
        client_id_metadata_document_supported: false,
        authorization_response_iss_parameter_supported: false,
        dpop_signing_alg_values_supported: None,
        grant_types_supported: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::http::canned::Canned;
    use super::*;

    #[test]
    fn reads_bearer_challenges() {
        let bearer = Bearer::parse(
            r#"Basic realm="x", Bearer error="insufficient_scope", scope="a b", resource_metadata="https://h/.well-known/oauth-protected-resource/mcp""#,
        )
        .expect("bearer");
        assert_eq!(bearer.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(bearer.scopes(), ["a", "b"]);
        assert_eq!(
            bearer.resource_metadata.as_deref(),
            Some("https://h/.well-known/oauth-protected-resource/mcp")
        );
        let plain = Bearer::parse("bearer scope=read , error=invalid_token").expect("bearer");
        assert_eq!(plain.scope.as_deref(), Some("read"));
        assert_eq!(plain.error.as_deref(), Some("invalid_token"));
        let escaped = Bearer::parse(r#"Bearer scope="a\"b""#).expect("bearer");
        assert_eq!(escaped.scope.as_deref(), Some("a\"b"));
        assert_eq!(Bearer::parse("Bearer"), Some(Bearer::default()));
        assert_eq!(Bearer::parse("Basic realm=\"x\""), None);
        assert_eq!(
            Bearer::parse("Negotiate abc==, Bearer scope=x").and_then(|b| b.scope),
            Some("x".into())
        );
        // RFC 9449 §7.1: a DPoP challenge says the same things, and that DPoP is taken.
        let dpop = Bearer::parse(r#"DPoP error="use_dpop_nonce", resource_metadata="https://h/m""#)
            .expect("dpop");
        assert!(dpop.dpop);
        assert_eq!(dpop.error.as_deref(), Some("use_dpop_nonce"));
        assert_eq!(dpop.resource_metadata.as_deref(), Some("https://h/m"));
        let both = Bearer::parse(r#"Bearer scope="a", DPoP algs="ES256""#).expect("both");
        assert!(both.dpop && both.scope.as_deref() == Some("a"));
        assert!(!plain.dpop);
        // Unterminated quotes and stray separators are not fatal.
        assert!(Bearer::parse("Bearer scope=\"open, error=").is_some());
        assert!(Bearer::parse("=,=,\"").is_none());
    }

    fn as_metadata(issuer: &str) -> serde_json::Value {
        json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "code_challenge_methods_supported": ["S256"],
        })
    }

    #[test]
    fn probes_path_then_root_and_checks_the_resource() {
        let http = Canned::default()
            .json(
                "http://rs/.well-known/oauth-protected-resource",
                json!({"resource": "http://rs", "authorization_servers": ["http://as/tenant"]}),
            )
            .json(
                "http://as/tenant/.well-known/openid-configuration",
                as_metadata("http://as/tenant"),
            );
        let found = async_io::block_on(discover(&http, "http://rs/mcp", None)).expect("discovered");
        assert_eq!(found.resource, "http://rs");
        assert_eq!(found.server.token_endpoint, "http://as/tenant/token");
        assert_eq!(
            http.urls(),
            [
                "GET http://rs/.well-known/oauth-protected-resource/mcp",
                "GET http://rs/.well-known/oauth-protected-resource",
                "GET http://as/.well-known/oauth-authorization-server/tenant",
                "GET http://as/.well-known/openid-configuration/tenant",
                "GET http://as/tenant/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn the_challenge_url_comes_first() {
        let http = Canned::default()
            .json(
                "http://rs/custom",
                json!({"resource": "http://rs/mcp", "authorization_servers": ["http://as"], "scopes_supported": ["x"]}),
            )
            .json("http://as/.well-known/oauth-authorization-server", as_metadata("http://as"));
        let bearer = Bearer {
            resource_metadata: Some("http://rs/custom".into()),
            ..Bearer::default()
        };
        let found =
            async_io::block_on(discover(&http, "http://rs/mcp", Some(&bearer))).expect("ok");
        assert_eq!(found.resource, "http://rs/mcp");
        assert_eq!(found.scopes_supported, Some(vec!["x".to_owned()]));
        assert_eq!(http.urls()[0], "GET http://rs/custom");
    }

    #[test]
    fn refuses_a_foreign_resource_or_issuer() {
        let http = Canned::default().json(
            "http://rs/.well-known/oauth-protected-resource/mcp",
            json!({"resource": "http://elsewhere/mcp", "authorization_servers": ["http://as"]}),
        );
        let error =
            async_io::block_on(discover(&http, "http://rs/mcp", None)).expect_err("mismatch");
        assert!(
            error.contains("is for http://elsewhere/mcp, not for http://rs/mcp"),
            "{error}"
        );

        let http = Canned::default()
            .json(
                "http://rs/.well-known/oauth-protected-resource/mcp",
                json!({"resource": "http://rs/mcp", "authorization_servers": ["http://as"]}),
            )
            .json(
                "http://as/.well-known/oauth-authorization-server",
                as_metadata("https://evil"),
            );
        let error = async_io::block_on(discover(&http, "http://rs/mcp", None)).expect_err("mix-up");
        assert!(
            error.contains("names issuer https://evil, not http://as"),
            "{error}"
        );
    }

    #[test]
    fn falls_back_to_the_origin_as_2025_03_26_servers_need() {
        let http = Canned::default();
        let found = async_io::block_on(discover(&http, "http://rs/mcp", None)).expect("defaults");
        assert_eq!(found.server.authorization_endpoint, "http://rs/authorize");
        assert_eq!(
            found.server.registration_endpoint.as_deref(),
            Some("http://rs/register")
        );
        assert_eq!(found.resource, "http://rs/mcp");

        let http = Canned::default().json(
            "http://rs/.well-known/oauth-authorization-server",
            as_metadata("http://rs/oauth"),
        );
        let found = async_io::block_on(discover(&http, "http://rs/mcp", None)).expect("metadata");
        assert_eq!(found.server.issuer, "http://rs/oauth");
    }

    #[test]
    fn bad_documents_are_named() {
        let http = Canned::default().on(
            "GET",
            "http://rs/.well-known/oauth-protected-resource/mcp",
            |_| super::super::http::Response {
                status: 200,
                headers: vec![],
                body: b"<html>".to_vec(),
            },
        );
        let error = async_io::block_on(discover(&http, "http://rs/mcp", None)).expect_err("html");
        assert!(
            error.starts_with("the protected-resource metadata at http://rs/.well-known/oauth-protected-resource/mcp is not valid"),
            "{error}"
        );
    }
}
