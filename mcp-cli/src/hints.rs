//! The commands the command line suggests to get past a failure (`mcp-cli trust NAME`,
//! `mcp-cli auth NAME`), made from the facts the hub's errors carry: the hub itself, which
//! hosts embed, names no command of ours.

use crate::hub::HubError;

/// How this run names its servers on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Naming {
    /// By their config entries' names.
    #[default]
    Configured,
    /// The ad hoc server of `--stdio LINE` or `--http URL`, which has no entry to name: the
    /// flag (`--stdio 'LINE'`, `--http URL`) stands for it.
    Adhoc { flag: String },
}

impl Naming {
    /// `mcp-cli auth SERVER`, as this run names `server`.
    pub(crate) fn auth_command(&self, server: &str) -> String {
        match self {
            Naming::Configured => format!("mcp-cli auth {server}"),
            Naming::Adhoc { flag } => format!("mcp-cli {flag} auth"),
        }
    }
}

/// A way past a failure, by its facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hint {
    /// A pinned tool of `server` changed: review, then `trust`.
    Trust { server: String },
    /// Remote `server` refused us for want of a login: `auth`.
    Auth { server: String },
}

impl Hint {
    /// The hint a hub error calls for, if any.
    pub(crate) fn of(error: &HubError) -> Option<Self> {
        match error {
            HubError::ToolWithheld { server, .. }
            | HubError::ToolFlagged { server, .. }
            | HubError::FeatureFlagged { server, .. } => Some(Self::Trust {
                server: server.clone(),
            }),
            HubError::Server {
                server,
                error: mcp_smol::Error::Unauthorized { .. },
            } => Some(Self::Auth {
                server: server.clone(),
            }),
            _ => None,
        }
    }

    /// The hint as it follows the failure's message, with the command spelled as this run
    /// names the server.
    pub(crate) fn text(&self, naming: &Naming) -> String {
        match (self, naming) {
            (Self::Trust { server }, Naming::Configured) => {
                format!("\n  review it, then accept it with `mcp-cli trust {server}`")
            }
            (Self::Trust { server }, Naming::Adhoc { flag }) => {
                format!("\n  review it, then accept it with `mcp-cli {flag} trust {server}`")
            }
            (Self::Auth { server }, Naming::Configured) => {
                format!("; run `mcp-cli auth {server}` to log in")
            }
            (Self::Auth { .. }, Naming::Adhoc { flag }) => {
                format!("; run `mcp-cli {flag} auth` to log in")
            }
        }
    }
}

/// A hub error as the program's own gateway shows it to its host: the error and its hint,
/// for configured servers (the gateway serves no other). A withheld or flagged tool is only
/// said to be withheld: the text it was withheld for is what a poisoned server wants a model
/// to read, and clearing it is the person's decision, so neither that text nor the command
/// that clears it reaches a host (the command line shows both to the person).
pub(crate) fn explained(error: &HubError) -> String {
    match error {
        HubError::ToolWithheld { server, tool, .. }
        | HubError::ToolFlagged { server, tool, .. } => {
            format!(
                "tool {tool} of server {server} is withheld until a person reviews it on the \
                 command line"
            )
        }
        HubError::FeatureFlagged {
            server,
            feature,
            name,
            ..
        } => format!(
            "{feature} {name} of server {server} is withheld until a person reviews it on the \
             command line"
        ),
        _ => {
            let hint = Hint::of(error).map(|hint| hint.text(&Naming::Configured));
            format!("{error}{}", hint.unwrap_or_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_the_server_as_the_run_does() {
        let trust = Hint::Trust {
            server: "fx".to_owned(),
        };
        let auth = Hint::Auth {
            server: "fx".to_owned(),
        };
        assert!(
            trust
                .text(&Naming::Configured)
                .ends_with("`mcp-cli trust fx`")
        );
        assert_eq!(
            auth.text(&Naming::Configured),
            "; run `mcp-cli auth fx` to log in"
        );
        let adhoc = Naming::Adhoc {
            flag: "--http http://h/mcp".to_owned(),
        };
        assert!(
            trust
                .text(&adhoc)
                .ends_with("`mcp-cli --http http://h/mcp trust fx`")
        );
        assert_eq!(
            auth.text(&adhoc),
            "; run `mcp-cli --http http://h/mcp auth` to log in"
        );
    }
}
