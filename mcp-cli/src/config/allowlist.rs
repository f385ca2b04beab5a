//! `permissions.network = ["api.github.com", "*.npmjs.org:443", "127.0.0.1:8080"]`: the host
//! patterns a sandboxed server's proxy admits, parsed and matched.

use std::fmt;
use std::net::Ipv6Addr;

/// The package registries `install = true` admits: npm's, and PyPI's index and files.
pub const REGISTRIES: &[&str] = &[
    "registry.npmjs.org:443",
    "pypi.org:443",
    "files.pythonhosted.org:443",
];

/// One entry of an allowlist: a host name, `*.` and a domain (any name beneath it, not the
/// domain itself), or an IP address (IPv6 in brackets), with an optional port (any when
/// absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: Host,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// A name or IPv4 address, lower case.
    Exact(String),
    /// `*.domain`: the domain, lower case, without the `*.`.
    Beneath(String),
    Ipv6(Ipv6Addr),
}

impl HostPattern {
    /// Reads one pattern; `Err` says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("an empty host".to_owned());
        }
        if text.contains("://") || text.contains('/') {
            return Err("a host with an optional port, not a URL".to_owned());
        }
        let (host, port) = split_port(text)?;
        let host = match host.strip_prefix('[') {
            Some(inner) => {
                let inner = inner.strip_suffix(']').ok_or("an unclosed `[`")?;
                Host::Ipv6(inner.parse().map_err(|_| "not an IPv6 address")?)
            }
            None if host == "*" => {
                return Err("`*` admits every host: leave `network` out instead".to_owned());
            }
            None => match host.strip_prefix("*.") {
                Some(domain) => Host::Beneath(name(domain)?),
                None => Host::Exact(name(host)?),
            },
        };
        Ok(Self { host, port })
    }

    /// Whether a connection to `host` (a name or an IP address, IPv6 with or without
    /// brackets) on `port` is admitted.
    pub fn admits(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|own| own != port) {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match &self.host {
            Host::Exact(name) => *name == host,
            Host::Beneath(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            Host::Ipv6(address) => {
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                bare.parse::<Ipv6Addr>().is_ok_and(|ip| ip == *address)
            }
        }
    }

    /// Whether this pattern names this machine's loopback (`localhost`, `127.0.0.1`, `[::1]`),
    /// which inside the sandbox would otherwise mean the server's own.
    pub fn is_loopback_name(&self, name: &str) -> bool {
        match (&self.host, name) {
            (Host::Ipv6(address), "::1") => address.is_loopback(),
            (Host::Exact(host), _) => host == name,
            _ => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Exact(name) => write!(f, "{name}")?,
            Host::Beneath(domain) => write!(f, "*.{domain}")?,
            Host::Ipv6(address) => write!(f, "[{address}]")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// The host and the port after its last `:`, outside an IPv6 address's brackets.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let after_brackets = text.rfind(']').map_or(0, |end| end + 1);
    let Some(colon) = text[after_brackets..]
        .rfind(':')
        .map(|at| at + after_brackets)
    else {
        return Ok((text, None));
    };
    let (host, port) = (&text[..colon], &text[colon + 1..]);
    if !text.starts_with('[') && host.contains(':') {
        return Err("an IPv6 address goes in brackets: [::1]:8080".to_owned());
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok((host, Some(port))),
        _ => Err(format!("port {port:?} is not a number from 1 to 65535")),
    }
}

/// A host name (or IPv4 address) in lower case, checked: dot-separated labels of letters,
/// digits, `-` and `_`.
fn name(text: &str) -> Result<String, String> {
    let name = text.trim_end_matches('.').to_ascii_lowercase();
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        let why = match name.contains('*') {
            true => "`*` only as a whole first label (`*.example.com`)",
            false => "not a host name: letters, digits, `-` and `.` only",
        };
        return Err(why.to_owned());
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_admit_their_hosts_and_ports_only() {
        let cases = [
            ("api.github.com", "API.github.com.", 443, true),
            ("api.github.com", "github.com", 443, false),
            ("*.npmjs.org:443", "registry.npmjs.org", 443, true),
            ("*.npmjs.org:443", "registry.npmjs.org", 80, false),
            ("*.npmjs.org", "npmjs.org", 443, false),
            ("*.npmjs.org", "evilnpmjs.org", 443, false),
            ("127.0.0.1:8080", "127.0.0.1", 8080, true),
            ("127.0.0.1:8080", "127.0.0.1", 8081, false),
            ("[::1]:8080", "[::1]", 8080, true),
            ("[::1]", "0:0:0:0:0:0:0:1", 9, true),
        ];
        for (pattern, host, port, admitted) in cases {
            let parsed = HostPattern::parse(pattern).unwrap();
            assert_eq!(
                parsed.admits(host, port),
                admitted,
                "{pattern} {host}:{port}"
            );
        }
    }

    #[test]
    fn bad_patterns_say_what_is_wrong() {
        let cases = [
            ("", "empty"),
            ("https://api.github.com", "not a URL"),
            ("api.github.com:0", "port \"0\""),
            ("api.github.com:https", "port \"https\""),
            ("::1", "in brackets"),
            ("[::1", "unclosed"),
            ("*", "every host"),
            ("a.*.com", "whole first label"),
            ("exa mple.com", "not a host name"),
        ];
        for (pattern, wanted) in cases {
            let error = HostPattern::parse(pattern).unwrap_err();
            assert!(error.contains(wanted), "{pattern}: {error}");
        }
    }

    #[test]
    fn patterns_print_as_written() {
        for pattern in [
            "api.github.com",
            "*.npmjs.org:443",
            "[::1]:8080",
            "10.0.0.1",
        ] {
            assert_eq!(HostPattern::parse(pattern).unwrap().to_string(), pattern);
        }
    }
}
