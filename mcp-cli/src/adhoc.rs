//! The ad hoc servers of `--stdio "COMMAND ARGS"` and `--http URL`: a server with no config.

use std::path::Path;

use crate::config::{Command, Remote, ServerSpec};
use crate::exit::Failure;
use crate::hub::short_digest;

/// The server `--http URL` stands for, with the `--header 'Name: value'`s given, and its name:
/// the URL's host as tool names spell it (`127_0_0_1`, `example_com`): the one name in
/// messages, `servers` and `SERVER__TOOL` alike, where `127.0.0.1` in one and `127_0_0_1__add`
/// in the other read as two servers.
pub(crate) fn remote(url: &str, headers: &[String]) -> Result<(String, Remote), Failure> {
    let rest = (url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://")))
    .ok_or_else(|| Failure::usage(format!("--http {url:?}: not an http:// or https:// URL")))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let bracketed = host_port.strip_prefix('[');
    let host = match bracketed {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    if host.is_empty() {
        return Err(Failure::usage(format!(
            "--http {url:?}: the URL names no host"
        )));
    }
    let mut remote = Remote::new(url);
    for word in headers {
        remote.headers.push(header(word)?);
    }
    let mut name = spelt(host);
    // `::1` is `1` once spelt; an IPv6 address says it is one.
    if bracketed.is_some() {
        name = format!("ipv6_{name}");
    }
    Ok((name, remote))
}

/// A `--header` word, `Name: value` or `Name=value` (split at whichever comes first, so a
/// value may hold the other), as a name and value with the blanks around them trimmed.
pub(crate) fn header(word: &str) -> Result<(String, String), Failure> {
    let (name, value) = word
        .find([':', '='])
        .map(|at| (&word[..at], &word[at + 1..]))
        .ok_or_else(|| {
            Failure::usage(format!(
                "--header {word:?}: write it as 'Name: value' or Name=value"
            ))
        })?;
    let (name, value) = (name.trim(), value.trim());
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) || value.contains(['\r', '\n']) {
        return Err(Failure::usage(format!(
            "--header {word:?}: not a valid HTTP header"
        )));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// The server `--stdio` stands for, split as a POSIX shell would (quotes and backslashes
/// honoured, no expansion), and its name: the program's file name, as tool names spell it
/// (`server_py` for `server.py`), for the reason [`remote`] gives.
pub(crate) fn server(line: &str) -> Result<(String, Command), Failure> {
    let words = shell_words::split(line)
        .map_err(|error| Failure::usage(format!("--stdio {line:?}: {error}")))?;
    let Some((program, args)) = words.split_first() else {
        return Err(Failure::usage("--stdio needs a command to run"));
    };
    let name = Path::new(program)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| !name.is_empty())
        .map(|name| spelt(&name))
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "stdio".to_owned());
    Ok((name, Command::new(program).args(args.iter().cloned())))
}

/// `text` as tool names spell a server: each character they refuse is `_`, and a run of `_`
/// one `_` (`__` separates the server from the tool), none at either end.
fn spelt(text: &str) -> String {
    let safe = crate::names::safe(text);
    let parts: Vec<&str> = safe.split('_').filter(|part| !part.is_empty()).collect();
    parts.join("_")
}

/// The name an ad hoc server's pins are kept under: its display name, which other servers
/// share (every server on `127.0.0.1`, every script `python` runs), and a digest of what
/// identifies it: the URL, or the command line and the folder it runs in.
pub(crate) fn pin_key(spec: &ServerSpec, cwd: &Path) -> String {
    let digest = match &spec.remote {
        Some(remote) => short_digest([remote.url.as_bytes()]),
        None => {
            let words = std::iter::once(&spec.command.program).chain(&spec.command.args);
            let cwd = cwd.as_os_str().as_encoded_bytes();
            short_digest(std::iter::once(cwd).chain(words.map(|word| word.as_bytes())))
        }
    };
    format!("{}-{digest}", spec.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_like_a_shell_and_named_by_the_program() {
        let (name, command) = server(r#"/opt/bin/my-server --root "a b" 'c d' e\ f"#).unwrap();
        assert_eq!(name, "my-server");
        assert_eq!(server("./my..server.py --x").unwrap().0, "my_server_py");
        assert_eq!(command.program, "/opt/bin/my-server");
        assert_eq!(command.args, ["--root", "a b", "c d", "e f"]);
        assert!(server("  ").is_err());
        assert!(server("x \"unclosed").is_err());
    }

    #[test]
    fn http_servers_are_named_by_their_host() {
        let headers = ["X-Api-Key: k1".to_owned(), "Accept-Language:en".to_owned()];
        let (name, remote) = remote("https://api.example.com:8443/mcp?x=1", &headers).unwrap();
        assert_eq!(name, "api_example_com");
        assert_eq!(remote.url, "https://api.example.com:8443/mcp?x=1");
        let pairs =
            [("X-Api-Key", "k1"), ("Accept-Language", "en")].map(|(n, v)| (n.into(), v.into()));
        assert_eq!(remote.headers, pairs);
        assert_eq!(
            super::remote("http://[::1]:3000/mcp", &[]).unwrap().0,
            "ipv6_1"
        );
        assert_eq!(
            super::remote("http://u@127.0.0.1/", &[]).unwrap().0,
            "127_0_0_1"
        );
        // Each is a name a server may have: as tool names spell it, without `__`.
        for url in ["http://[fe80::1]/", "http://127.0.0.1/", "http://a_.b/"] {
            let (name, _) = super::remote(url, &[]).unwrap();
            assert_eq!(
                crate::names::server_name_clash(&name, []),
                None,
                "{url}: {name}"
            );
            assert_eq!(crate::names::safe(&name), name, "{url}");
        }
        assert!(super::remote("ftp://x/", &[]).is_err());
        assert!(super::remote("http:///mcp", &[]).is_err());
        assert!(super::remote("http://x/", &["no colon".to_owned()]).is_err());
        assert!(super::remote("http://x/", &["Bad Name: v".to_owned()]).is_err());
        let pair = |name: &str, value: &str| (name.to_owned(), value.to_owned());
        assert_eq!(header("A=b: c").unwrap(), pair("A", "b: c"));
        assert_eq!(header("A: b=c").unwrap(), pair("A", "b=c"));
        assert!(header("=v").is_err() && header(": v").is_err());
    }
}
