//! The little URL work OAuth needs: split an http(s) URL, build well-known URIs, encode forms
//! and queries, read a redirect's query. Not a general URL parser: OAuth only ever hands us
//! absolute http(s) URLs or an absolute-path `Location`.

use std::fmt;

/// An absolute `http` or `https` URL, split where OAuth needs it split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Url {
    /// `http` or `https`, lower case.
    pub(crate) scheme: String,
    /// `host[:port]`, host lower case (user info is refused).
    pub(crate) authority: String,
    /// Starts with `/`, or is empty for `https://host`.
    pub(crate) path: String,
    /// Without the `?`.
    pub(crate) query: Option<String>,
}

impl Url {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("`{text}` is not an absolute URL"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!("`{text}` is not an http or https URL"));
        }
        // The fragment never leaves the client.
        let rest = rest.split('#').next().unwrap_or_default();
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(end);
        if authority.is_empty()
            || authority.contains('@')
            || authority.contains(char::is_whitespace)
        {
            return Err(format!("`{text}` has no usable host"));
        }
        let (path, query) = match rest.split_once('?') {
            Some((path, query)) => (path, Some(query.to_owned())),
            None => (rest, None),
        };
        Ok(Self {
            scheme,
            authority: authority.to_ascii_lowercase(),
            path: path.to_owned(),
            query,
        })
    }

    /// `scheme://authority`.
    pub(crate) fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// The path without a trailing `/` (`""` for the root).
    pub(crate) fn trimmed_path(&self) -> &str {
        self.path.trim_end_matches('/')
    }

    /// The resource identifier of RFC 8707 as the MCP spec spells it: no fragment, lower-case
    /// scheme and host, no trailing slash.
    pub(crate) fn canonical(&self) -> String {
        let mut out = format!("{}{}", self.origin(), self.trimmed_path());
        if let Some(query) = &self.query {
            out.push('?');
            out.push_str(query);
        }
        out
    }

    /// `origin` + `/.well-known/<name>` + this URL's path (RFC 8414 §3.1, RFC 9728 §3.1:
    /// the well-known segment goes between host and path).
    pub(crate) fn well_known_inserted(&self, name: &str) -> String {
        format!(
            "{}/.well-known/{name}{}",
            self.origin(),
            self.trimmed_path()
        )
    }

    /// This URL's path + `/.well-known/<name>` (OIDC discovery's own spelling).
    pub(crate) fn well_known_appended(&self, name: &str) -> String {
        format!(
            "{}{}/.well-known/{name}",
            self.origin(),
            self.trimmed_path()
        )
    }

    /// A `Location` header resolved against this URL: absolute, or an absolute path.
    pub(crate) fn resolve(&self, location: &str) -> Result<Url, String> {
        if location.contains("://") {
            return Url::parse(location);
        }
        if location.starts_with('/') && !location.starts_with("//") {
            return Url::parse(&format!("{}{location}", self.origin()));
        }
        Err(format!("cannot follow the redirect to `{location}`"))
    }

    /// The query's parameters, decoded.
    pub(crate) fn params(&self) -> Vec<(String, String)> {
        self.query.as_deref().map(parse_form).unwrap_or_default()
    }

    /// The first value of query parameter `name`.
    pub(crate) fn param(&self, name: &str) -> Option<String> {
        self.params()
            .into_iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin(), self.path)?;
        if let Some(query) = &self.query {
            write!(f, "?{query}")?;
        }
        Ok(())
    }
}

/// Whether `resource` (from protected-resource metadata) covers `server`: same origin, and
/// the server's path is the resource's path or below it.
pub(crate) fn covers(resource: &Url, server: &Url) -> bool {
    if resource.origin() != server.origin() {
        return false;
    }
    let base = resource.trimmed_path();
    let path = server.trimmed_path();
    path == base || (path.starts_with(base) && path[base.len()..].starts_with('/'))
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `key=value&...`, each side encoded; for a query or an
/// `application/x-www-form-urlencoded` body.
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    let encoded: Vec<String> = (pairs.iter())
        .map(|(key, value)| format!("{}={}", encode(key), encode(value)))
        .collect();
    encoded.join("&")
}

/// Reads `key=value&...`, with `+` as a space and percent escapes decoded (bad escapes are
/// kept as they are).
pub(crate) fn parse_form(text: &str) -> Vec<(String, String)> {
    (text.split('&'))
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() && hex_pair(bytes[i + 1], bytes[i + 2]).is_some() => {
                out.extend(hex_pair(bytes[i + 1], bytes[i + 2]));
                i += 2;
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_pair(high: u8, low: u8) -> Option<u8> {
    let digit = |b: u8| char::from(b).to_digit(16);
    Some((digit(high)? * 16 + digit(low)?) as u8)
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 with padding (RFC 4648 §4), for HTTP Basic credentials.
pub(crate) fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(STANDARD[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Base64url without padding (RFC 4648 §5), for PKCE.
pub(crate) fn base64url(bytes: &[u8]) -> String {
    (base64(bytes).chars())
        .filter(|c| *c != '=')
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).expect("test URL")
    }

    #[test]
    fn splits_and_canonicalises() {
        let u = url("HTTPS://Example.COM:8443/MCP/?x=1#frag");
        assert_eq!(u.origin(), "https://example.com:8443");
        assert_eq!(u.path, "/MCP/");
        assert_eq!(u.canonical(), "https://example.com:8443/MCP?x=1");
        assert_eq!(
            url("https://example.com/").canonical(),
            "https://example.com"
        );
        assert!(Url::parse("ftp://x/").is_err());
        assert!(Url::parse("https://user@x/").is_err());
        assert!(Url::parse("/relative").is_err());
    }

    #[test]
    fn well_known_uris_insert_or_append() {
        let u = url("https://as.example/tenant1/");
        assert_eq!(
            u.well_known_inserted("oauth-authorization-server"),
            "https://as.example/.well-known/oauth-authorization-server/tenant1"
        );
        assert_eq!(
            u.well_known_appended("openid-configuration"),
            "https://as.example/tenant1/.well-known/openid-configuration"
        );
        assert_eq!(
            url("https://as.example").well_known_inserted("oauth-authorization-server"),
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
            "redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&scope=a%20b"
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
        assert_eq!(parse_form("a=%4")[0].1, "%4");
    }

    #[test]
    fn resolves_locations() {
        let base = url("http://127.0.0.1:9/authorize?x");
        assert_eq!(
            base.resolve("/cb?code=1").expect("path").to_string(),
            "http://127.0.0.1:9/cb?code=1"
        );
        assert_eq!(
            base.resolve("http://127.0.0.1:5/callback?code=a%20b")
                .expect("absolute")
                .param("code")
                .as_deref(),
            Some("a b")
        );
        assert!(base.resolve("relative").is_err());
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
