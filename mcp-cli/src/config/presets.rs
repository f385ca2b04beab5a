//! The built-in servers, used for names no file defines.

use std::path::Path;
use std::time::Duration;

use super::{Command, Entry, Env, Server, ServerSpec, Source};

/// Handshake budget of a preset run through `npx`, which may have to download it first.
pub const NPX_HANDSHAKE: Duration = Duration::from_secs(120);

/// The built-in servers, used for names no file defines. With `MCP_CLI_NPM_PREFIX` set they
/// run the binaries installed under that npm prefix instead of going through `npx`.
pub fn presets(env: Env<'_>, cwd: &Path) -> Vec<Server> {
    let prefix = env("MCP_CLI_NPM_PREFIX").filter(|p| !p.is_empty());
    let preset = |name: &str, package: &str, extra: Vec<String>| {
        let command = match &prefix {
            Some(prefix) => {
                let bin = Path::new(prefix)
                    .join("node_modules/.bin")
                    .join(format!("mcp-server-{name}"));
                Command::new(bin.to_string_lossy()).args(extra)
            }
            None => Command::new("npx")
                .args(["-y".to_owned(), package.to_owned()])
                .args(extra),
        };
        // The first `npx -y` of a package downloads it, which can take far longer than a
        // handshake should; an installed binary gets the usual budget.
        let handshake_timeout = prefix.is_none().then_some(NPX_HANDSHAKE);
        let spec = ServerSpec {
            handshake_timeout,
            ..ServerSpec::new(name, command)
        };
        Server {
            name: name.to_owned(),
            entry: Entry::Enabled(spec),
            source: Source::Preset,
        }
    };
    vec![
        preset(
            "filesystem",
            "@modelcontextprotocol/server-filesystem",
            vec![cwd.to_string_lossy().into_owned()],
        ),
        preset(
            "everything",
            "@modelcontextprotocol/server-everything",
            vec![],
        ),
        preset("memory", "@modelcontextprotocol/server-memory", vec![]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_use_an_installed_prefix_when_given() {
        let prefix = |key: &str| (key == "MCP_CLI_NPM_PREFIX").then(|| "/opt/npm".to_owned());
        let presets = presets(&prefix, Path::new("/here"));
        let Entry::Enabled(spec) = &presets[0].entry else {
            panic!()
        };
        assert_eq!(
            spec.command.program,
            "/opt/npm/node_modules/.bin/mcp-server-filesystem"
        );
        assert_eq!(spec.command.args, ["/here"]);
        assert_eq!(spec.handshake_timeout, None);
    }
}
