//! The URL rules OAuth adds on top of the `url` crate: only absolute http(s) URLs without user
//! info, the resource identifier of RFC 8707 as the MCP spec spells it, well-known URIs, and
//! which resource covers which server; forms through `form_urlencoded`, HTTP Basic's parts
//! through `percent-encoding`; Base64 (the `base64` crate) for PKCE, JWTs and HTTP Basic.

use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
pub(crate) use url::Url;

/// An absolute `http` or `https` URL without user info, its fragment dropped (it never leaves
/// the client).
pub(crate) fn parse(text: &str) -> Result<Url, String> {
    let text = text.trim();
    let mut url =
        Url::parse(text).map_err(|error| format!("`{text}` is not an absolute URL ({error})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{text}` is not an http or https URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("`{text}` has no usable host"));
    }
    url.set_fragment(None);
    Ok(url)
}

/// `scheme://host[:port]`, the port only when it is not the scheme's default.
pub(crate) fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The path without a trailing `/` (`""` for the root).
pub(crate) fn trimmed_path(url: &Url) -> &str {
    url.path().trim_end_matches('/')
}

/// The resource identifier of RFC 8707 as the MCP spec spells it: no fragment, lower-case
/// scheme and host, no trailing slash.
pub(crate) fn canonical(url: &Url) -> String {
    let mut out = format!("{}{}", origin(url), trimmed_path(url));
    if let Some(query) = url.query() {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// `origin` + `/.well-known/<name>` + the URL's path (RFC 8414 §3.1, RFC 9728 §3.1: the
/// well-known segment goes between host and path).
pub(crate) fn well_known_inserted(url: &Url, name: &str) -> String {
    format!("{}/.well-known/{name}{}", origin(url), trimmed_path(url))
}

/// The URL's path + `/.well-known/<name>` (OIDC discovery's own spelling).
pub(crate) fn well_known_appended(url: &Url, name: &str) -> String {
    format!("{}{}/.well-known/{name}", origin(url), trimmed_path(url))
}

/// A `Location` header resolved against `base`, as an http(s) URL.
pub(crate) fn resolve(base: &Url, location: &str) -> Result<Url, String> {
    let next = (base.join(location))
        .map_err(|error| format!("cannot follow the redirect to `{location}`: {error}"))?;
    parse(next.as_str())
}

/// The first value of query parameter `name`, decoded.
pub(crate) fn param(url: &Url, name: &str) -> Option<String> {
    (url.query_pairs())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// Whether `resource` (from protected-resource metadata) covers `server`: same origin, and
/// the server's path is the resource's path or below it.
pub(crate) fn covers(resource: &Url, server: &Url) -> bool {
    if resource.origin() != server.origin() {
        return false;
    }
    let base = trimmed_path(resource);
    let path = trimmed_path(server);
    path == base || (path.starts_with(base) && path[base.len()..].starts_with('/'))
}

/// `application/x-www-form-urlencoded`: for a query or a request body.
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    (form_urlencoded::Serializer::new(String::new()))
        .extend_pairs(pairs)
        .finish()
}

/// Everything but RFC 3986's unreserved characters.
const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// One value percent-encoded, a space as `%20`: HTTP Basic credentials (RFC 6749 §2.3.1),
/// which servers decode either as a form or as a plain percent-encoding.
pub(crate) fn encode(text: &str) -> String {
    utf8_percent_encode(text, RESERVED).to_string()
}

/// Reads a form body or a query: `+` as a space, percent escapes decoded.
#[cfg(test)]
pub(crate) fn parse_form(text: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(text.as_bytes())
        .into_owned()
        .collect()
}

/// Base64 with padding (RFC 4648 §4), for HTTP Basic credentials.
pub(crate) fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Base64url without padding (RFC 4648 §5), for PKCE and JWTs.
pub(crate) fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        parse(text).expect("test URL")
    }

    #[test]
    fn splits_and_canonicalises() {
        let u = url("HTTPS://Example.COM:8443/MCP/?x=1#frag");
        assert_eq!(origin(&u), "https://example.com:8443");
        assert_eq!(u.path(), "/MCP/");
        assert_eq!(canonical(&u), "https://example.com:8443/MCP?x=1");
        assert_eq!(
            canonical(&url("https://example.com/")),
            "https://example.com"
        );
        assert_eq!(
            canonical(&url("https://example.com:443/a")),
            "https://example.com/a"
        );
        assert!(parse("ftp://x/").is_err());
        assert!(parse("https://user@x/").is_err());
        assert!(parse("/relative").is_err());
    }

    #[test]
    fn well_known_uris_insert_or_append() {
        let u = url("https://as.example/tenant1/");
        assert_eq!(
            well_known_inserted(&u, "oauth-authorization-server"),
            "https://as.example/.well-known/oauth-authorization-server/tenant1"
        );
        assert_eq!(
            well_known_appended(&u, "openid-configuration"),
            "https://as.example/tenant1/.well-known/openid-configuration"
        );
        assert_eq!(
            well_known_inserted(&url("https://as.example"), "oauth-authorization-server"),
            "https://as.example/.well-known/oauth-authorization-server"
        );
    }

    #[test]
    fn resource_covers_its_own_path_and_below_only() {
        let server = url("https://h/mcp/v1");
        assert!(covers(&url("https://h"), &server));
        assert!(covers(&url("https://h/mcp"), &server));
        assert!(covers(&url("https://h/mcp/v1/"), &server));
        assert!(!covers(&url("https://h/mc"), &server));
        assert!(!covers(&url("https://other/mcp"), &server));
        assert!(!covers(&url("http://h/mcp"), &server));
    }

    #[test]
    fn forms_round_trip() {
        let text = form(&[("redirect_uri", "http://127.0.0.1:1/cb"), ("scope", "a b")]);
        assert_eq!(
            text,
            "redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&scope=a+b"
        );
        assert_eq!(
            parse_form(&text),
            [
                (
                    "redirect_uri".to_owned(),
                    "http://127.0.0.1:1/cb".to_owned()
                ),
                ("scope".to_owned(), "a b".to_owned())
            ]
        );
        assert_eq!(parse_form("a=x+y&b=%zz&c")[1].1, "%zz");
        assert_eq!(encode("id:1 +~"), "id%3A1%20%2B~");
    }

    #[test]
    fn resolves_locations() {
        let base = url("http://127.0.0.1:9/authorize?x");
        assert_eq!(
            resolve(&base, "/cb?code=1").expect("path").as_str(),
            "http://127.0.0.1:9/cb?code=1"
        );
        let absolute = resolve(&base, "http://127.0.0.1:5/callback?code=a%20b").expect("absolute");
        assert_eq!(param(&absolute, "code").as_deref(), Some("a b"));
        assert!(resolve(&base, "ftp://elsewhere/").is_err());
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let vectors = [
            "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy",
        ];
        for (n, expected) in vectors.iter().enumerate() {
            assert_eq!(base64(&b"foobar"[..n]), *expected);
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
