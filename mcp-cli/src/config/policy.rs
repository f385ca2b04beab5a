//! What may start and what may be called: tool-name globs, per-server tool filters, the
//! server allow- and denylists, and the rules.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use super::{ConfigError, Entry, Server};

/// A shell-style pattern on a name: `*` is any text, `?` one character, `[abc]` and `[a-z]`
/// one of a set, `[!x]` (or `[^x]`) one character not in it; all else stands for itself.
/// Matching covers the whole name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    // Boxed, not growable: a glob travels inside every rule and every error naming one.
    pattern: Box<str>,
    tokens: Box<[Token]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(char),
    AnyChar,
    AnyText,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Glob {
    /// The error names the pattern and what is wrong with it.
    pub fn new(pattern: &str) -> Result<Glob, String> {
        let mut tokens = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            tokens.push(match c {
                '*' => Token::AnyText,
                '?' => Token::AnyChar,
                '[' => {
                    class(&mut chars).map_err(|why| format!("invalid glob {pattern:?}: {why}"))?
                }
                c => Token::Char(c),
            });
        }
        Ok(Glob {
            pattern: pattern.into(),
            tokens: tokens.into(),
        })
    }

    /// Whether the whole of `text` fits the pattern (not a part of it).
    pub fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        let (mut token, mut at) = (0, 0);
        // The last `*` seen and where in the text it would resume: backtracking to it alone
        // is enough, which keeps matching O(pattern × text) whatever the pattern.
        let mut star = None;
        while at < text.len() {
            match self.tokens.get(token) {
                Some(Token::AnyText) => {
                    star = Some((token, at));
                    token += 1;
                }
                Some(one) if one.matches(text[at]) => {
                    token += 1;
                    at += 1;
                }
                _ => match star {
                    Some((star_token, star_at)) => {
                        star = Some((star_token, star_at + 1));
                        token = star_token + 1;
                        at = star_at + 1;
                    }
                    None => return false,
                },
            }
        }
        self.tokens[token..]
            .iter()
            .all(|token| *token == Token::AnyText)
    }

    /// The pattern as written, for messages.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }
}

impl Token {
    /// Whether this one-character token matches `c`.
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Char(expected) => *expected == c,
            Token::AnyChar => true,
            Token::AnyText => false,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(low, high)| (*low..=*high).contains(&c)) != *negated
            }
        }
    }
}

/// Reads a class after its `[`. A `]` right after the `[` (or `[!`) is a member, as in
/// fnmatch, so `[]]` matches `]`; a `-` first or last is a member too.
fn class(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<Token, String> {
    let negated = chars.next_if(|c| matches!(c, '!' | '^')).is_some();
    let mut members = Vec::new();
    loop {
        match chars.next() {
            None => return Err("unclosed `[`".to_owned()),
            Some(']') if !members.is_empty() => break,
            Some(c) => members.push(c),
        }
    }
    let mut ranges = Vec::new();
    let mut rest = &members[..];
    loop {
        let (range, tail) = match rest {
            [] => break,
            [low, '-', high, tail @ ..] => ((*low, *high), tail),
            [c, tail @ ..] => ((*c, *c), tail),
        };
        if range.0 > range.1 {
            return Err(format!("range `{}-{}` is backwards", range.0, range.1));
        }
        ranges.push(range);
        rest = tail;
    }
    Ok(Token::Class { negated, ranges })
}

/// Through serde, so that a bad pattern is an error naming the file, the line and the key.
impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let pattern = String::deserialize(deserializer)?;
        Glob::new(&pattern).map_err(D::Error::custom)
    }
}

/// `always_load` as written: `true` (every tool), `false`, or globs of tool names.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum AlwaysLoad {
    Every(bool),
    Tools(Vec<Glob>),
}

impl AlwaysLoad {
    /// The globs it stands for.
    pub(super) fn globs(this: Option<Self>) -> Vec<Glob> {
        match this {
            Some(AlwaysLoad::Every(true)) => {
                vec![Glob::new("*").unwrap_or_else(|_| unreachable!())]
            }
            Some(AlwaysLoad::Every(false)) | None => Vec::new(),
            Some(AlwaysLoad::Tools(globs)) => globs,
        }
    }
}

/// Which of a server's own tool names may be shown and called.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// `None`: every tool not disabled.
    pub enabled: Option<Vec<Glob>>,
    /// Wins over `enabled`.
    pub disabled: Vec<Glob>,
}

impl ToolFilter {
    /// Whether the server's own tool name `tool` may be shown and called: it matches
    /// `enabled` (when set) and no `disabled` glob.
    pub fn allows(&self, tool: &str) -> bool {
        let matches = |globs: &[Glob]| globs.iter().any(|glob| glob.matches(tool));
        self.enabled.as_deref().is_none_or(matches) && !matches(&self.disabled)
    }
}

/// What a [`Rule`] does to the tools it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Called without asking.
    Allow,
    /// Hidden from listings and refused when called.
    Deny,
    /// Listed, but each call waits for a person's (or the host's) yes first.
    Ask,
}

/// One tool rule of a config file (`[[rules]]`, or a host's `permissions` lists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Matched against the shown name and the `mcp__<server>__<tool>` form.
    pub tool: Glob,
    /// What happens to a tool it matches.
    pub action: Action,
    /// `FILE line N`, for messages.
    pub origin: String,
    /// An `ask` rule whose question the person lets a parked call put to whoever answers it
    /// (`park = true`: `mcp-cli answer`, perhaps an agent); otherwise such a call is refused.
    pub parkable: bool,
}

impl std::fmt::Display for Glob {
    /// The pattern as written.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.pattern)
    }
}

impl std::fmt::Display for Action {
    /// As a config file spells it: `allow`, `deny`, `ask`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Ask => "ask",
        })
    }
}

impl std::fmt::Display for Rule {
    /// As a person reads it, where it was written beside it: `deny tool = "fs__write_*"
    /// (config.toml line 4)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} tool = {:?} ({})",
            self.action,
            self.tool.as_str(),
            self.origin
        )
    }
}

/// A server named in `mcp_server_allowlist` or `mcp_server_denylist`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// The server's configured name.
    pub server: String,
    /// The file whose list it is in: a server must be in the allowlist of every file that
    /// has one.
    pub file: std::path::PathBuf,
    /// `FILE line N`, for messages.
    pub origin: String,
    /// In an allowlist: what the server ran when the list was read (defined in the list's
    /// own file or one before it), if it was defined by then. The list admits that, and no
    /// later file's replacement that runs something else.
    pub admits: Option<Entry>,
}

/// Every file's policy, concatenated in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// If non-empty, only these servers may start.
    pub allowlist: Vec<ListEntry>,
    /// These servers never start.
    pub denylist: Vec<ListEntry>,
    /// First match wins; a tool no rule matches is allowed.
    pub rules: Vec<Rule>,
}

impl Policy {
    /// Why `server` may not start, naming the list that says so; `None` if it may.
    pub fn server_denied(&self, server: &Server) -> Option<String> {
        let name = server.name.as_str();
        if let Some(entry) = self.denylist.iter().find(|entry| entry.server == name) {
            return Some(format!("denied by mcp_server_denylist ({})", entry.origin));
        }
        // An allowlist admits what a name ran when it was read, not whatever a later file
        // puts under that name.
        let replaced = (self.allowlist.iter()).find(|entry| {
            entry.server == name
                && (entry.admits.as_ref()).is_some_and(|e| !runs_the_same(e, &server.entry))
        });
        if let Some(entry) = replaced {
            let admitted = (entry.admits.as_ref())
                .map(Entry::command_line)
                .unwrap_or_default();
            return Some(format!(
                "not in mcp_server_allowlist as it is now: {} admits {name} as `{admitted}`, \
                 and a later file replaced it",
                entry.origin
            ));
        }
        // Each file with an allowlist must list it: a project file cannot widen the user's.
        let mut files = self.allowlist.iter().map(|entry| &entry.file);
        let missing_from = files.find(|&file| {
            let mut list = self.allowlist.iter().filter(|entry| &entry.file == file);
            !list.any(|entry| entry.server == name)
        })?;
        let first = self
            .allowlist
            .iter()
            .find(|entry| &entry.file == missing_from)?;
        Some(format!("not in mcp_server_allowlist ({})", first.origin))
    }

    /// The first rule matching the tool's shown name (`<server>__<tool>` as
    /// [`qualified`](crate::names::qualified) prints it) or `mcp__<server>__<tool>` (Claude
    /// Code's spelling, with the raw names); `None`: allowed by default.
    pub fn rule_for(&self, shown_name: &str, server: &str, tool: &str) -> Option<&Rule> {
        let claude_name = format!("mcp__{server}__{tool}");
        self.rules
            .iter()
            .find(|rule| rule.tool.matches(shown_name) || rule.tool.matches(&claude_name))
    }

    /// Checks, once every file is read, that each list entry and each rule with a literal
    /// server part names a server in `names`; `rule_keys` holds each rule's key in its file.
    pub(super) fn check_names(
        &self,
        names: &[&str],
        rule_keys: &[String],
    ) -> Result<(), ConfigError> {
        let unknown = |origin: &str, key: &str, server: &str| {
            super::errors::unknown_server(origin, key, server, names)
        };
        let lists = [
            ("security.mcp_server_allowlist", &self.allowlist),
            ("security.mcp_server_denylist", &self.denylist),
        ];
        for (key, list) in lists {
            if let Some(entry) = list.iter().find(|e| !names.contains(&e.server.as_str())) {
                return Err(unknown(&entry.origin, key, &entry.server));
            }
        }
        // A rule may name a server by its name or by the provider-safe form shown in tool
        // names; a server literally called `mcp` may also be meant by a leading `mcp__`.
        let known = |server: &str| {
            (names.iter()).any(|name| *name == server || crate::names::safe(name) == server)
        };
        for (rule, key) in self.rules.iter().zip(rule_keys) {
            let pattern = rule.tool.as_str();
            let Some(server) = literal_server(pattern) else {
                continue;
            };
            let named = known(server) || (pattern.starts_with("mcp__") && known("mcp"));
            if !named {
                return Err(unknown(&rule.origin, key, server));
            }
        }
        Ok(())
    }
}

/// Whether two entries run the same program (or reach the same URL) in the same way, whatever
/// else differs (enabled or not, timeouts, tool filters).
fn runs_the_same(a: &Entry, b: &Entry) -> bool {
    let spec = |entry: &Entry| match entry {
        Entry::Enabled(spec) | Entry::Disabled(spec) => Some(spec.clone()),
        Entry::Invalid { .. } => None,
    };
    match (spec(a), spec(b)) {
        (Some(a), Some(b)) => a.command == b.command && a.remote == b.remote,
        _ => a == b,
    }
}

/// The server a tool pattern names outright: the text before its first `__` (after a
/// leading `mcp__`), if that holds no wildcard.
fn literal_server(pattern: &str) -> Option<&str> {
    let rest = pattern.strip_prefix("mcp__").unwrap_or(pattern);
    let (server, _) = rest.split_once("__")?;
    (!server.is_empty() && !server.contains(['*', '?', '['])).then_some(server)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn glob(pattern: &str) -> Glob {
        Glob::new(pattern).unwrap()
    }

    #[test]
    fn a_rule_reads_as_written() {
        let rule = Rule {
            tool: glob("fs__write_*"),
            action: Action::Deny,
            origin: "config.toml line 4".to_owned(),
            parkable: false,
        };
        assert_eq!(
            rule.to_string(),
            "deny tool = \"fs__write_*\" (config.toml line 4)"
        );
        assert_eq!(glob("a?b").to_string(), "a?b");
        assert_eq!(Action::Ask.to_string(), "ask");
    }

    #[test]
    fn glob_matching() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("read_file", &["read_file"], &["read_files", "read_fil", ""]),
            ("", &[""], &["a"]),
            ("*", &["", "anything at all"], &[]),
            ("read_*", &["read_", "read_file"], &["write_file", "xread_"]),
            ("*_file", &["read_file", "_file"], &["read_files"]),
            ("a*b*c", &["abc", "aXbYbZc", "abbc"], &["acb", "ab"]),
            ("?", &["x", "é"], &["", "xy"]),
            ("f?le", &["file", "fole"], &["fle", "fiile"]),
            ("[abc]x", &["ax", "cx"], &["dx", "x"]),
            ("[a-c0-9]", &["b", "7"], &["d", "-"]),
            ("[!x]", &["y"], &["x", ""]),
            ("[^x]", &["y"], &["x"]),
            ("[]]", &["]"], &["["]),
            ("[a-]", &["a", "-"], &["b"]),
            ("gh__*", &["gh__list", "gh__"], &["gh_list"]),
        ];
        for (pattern, yes, no) in cases {
            let glob = glob(pattern);
            for text in *yes {
                assert!(glob.matches(text), "{pattern:?} should match {text:?}");
            }
            for text in *no {
                assert!(!glob.matches(text), "{pattern:?} should not match {text:?}");
            }
        }
        assert_eq!(glob("a*").as_str(), "a*");
    }

    #[test]
    fn glob_errors_name_the_pattern() {
        assert_eq!(
            Glob::new("[abc").unwrap_err(),
            "invalid glob \"[abc\": unclosed `[`"
        );
        assert!(Glob::new("x[!").unwrap_err().contains("unclosed"));
        assert!(Glob::new("[]").unwrap_err().contains("unclosed"));
        assert!(Glob::new("[z-a]").unwrap_err().contains("backwards"));
    }

    #[test]
    fn long_patterns_match_in_reasonable_time() {
        // Without care, each `*` multiplies the work of the ones before it.
        let glob = glob(&format!("{}c", "a*".repeat(50)));
        assert!(!glob.matches(&format!("{}b", "a".repeat(2000))));
    }

    #[test]
    fn disabled_tools_win_over_enabled_ones() {
        let all = ToolFilter::default();
        assert!(all.allows("anything"));
        let filter = ToolFilter {
            enabled: Some(vec![glob("read_*"), glob("list_*")]),
            disabled: vec![glob("read_secret")],
        };
        assert!(filter.allows("read_file"));
        assert!(filter.allows("list_dir"));
        assert!(!filter.allows("write_file"));
        assert!(!filter.allows("read_secret"));
        let none = ToolFilter {
            enabled: Some(vec![]),
            disabled: vec![],
        };
        assert!(!none.allows("read_file"));
        let only_disabled = ToolFilter {
            enabled: None,
            disabled: vec![glob("*")],
        };
        assert!(!only_disabled.allows("x"));
    }

    /// A server of that name, as a file would define it.
    pub(crate) fn named(name: &str) -> Server {
        let spec = super::super::ServerSpec::new(name, super::super::Command::new(name));
        Server {
            name: name.to_owned(),
            entry: Entry::Enabled(spec),
            source: super::super::Source::File("/c.toml".into()),
        }
    }

    fn entry(server: &str, line: usize) -> ListEntry {
        ListEntry {
            server: server.to_owned(),
            file: "/c.toml".into(),
            origin: format!("/c.toml line {line}"),
            admits: None,
        }
    }

    fn rule(tool: &str, action: Action, line: usize) -> Rule {
        Rule {
            tool: glob(tool),
            action,
            origin: format!("/c.toml line {line}"),
            parkable: false,
        }
    }

    #[test]
    fn server_denied_names_the_list() {
        let mut policy = Policy::default();
        assert_eq!(policy.server_denied(&named("a")), None);
        policy.denylist = vec![entry("bad", 3)];
        assert_eq!(
            policy.server_denied(&named("bad")).as_deref(),
            Some("denied by mcp_server_denylist (/c.toml line 3)")
        );
        assert_eq!(policy.server_denied(&named("a")), None);
        policy.allowlist = vec![entry("a", 2), entry("bad", 2)];
        assert_eq!(policy.server_denied(&named("a")), None);
        assert_eq!(
            policy.server_denied(&named("other")).as_deref(),
            Some("not in mcp_server_allowlist (/c.toml line 2)")
        );
        // The denylist is checked even for an allowed server.
        assert!(
            policy
                .server_denied(&named("bad"))
                .unwrap()
                .contains("denylist")
        );
        // A second file's allowlist narrows the first one's, never widens it.
        let project = |server: &str| ListEntry {
            server: server.to_owned(),
            file: "/project.toml".into(),
            origin: "/project.toml line 9".to_owned(),
            admits: None,
        };
        policy.allowlist.extend([project("a"), project("extra")]);
        assert_eq!(policy.server_denied(&named("a")), None);
        assert_eq!(
            policy.server_denied(&named("extra")).as_deref(),
            Some("not in mcp_server_allowlist (/c.toml line 2)")
        );
        // A name admitted as it was defined admits no other program under it.
        let mut admitted = entry("gh", 4);
        admitted.admits = Some(named("gh").entry);
        policy.allowlist = vec![admitted];
        assert_eq!(policy.server_denied(&named("gh")), None);
        let mut replaced = named("gh");
        replaced.entry = named("sh").entry;
        assert_eq!(
            policy.server_denied(&replaced).as_deref(),
            Some(
                "not in mcp_server_allowlist as it is now: /c.toml line 4 admits gh as `gh`, \
                 and a later file replaced it"
            )
        );
    }

    #[test]
    fn first_matching_rule_wins() {
        let policy = Policy {
            rules: vec![
                rule("fs__write_secret", Action::Deny, 1),
                rule("fs__write_*", Action::Ask, 2),
                rule("mcp__git__*", Action::Deny, 3),
                rule("*", Action::Allow, 4),
            ],
            ..Policy::default()
        };
        let action = |shown: &str, server: &str, tool: &str| {
            policy.rule_for(shown, server, tool).map(|rule| rule.action)
        };
        assert_eq!(
            action("fs__write_secret", "fs", "write_secret"),
            Some(Action::Deny)
        );
        assert_eq!(
            action("fs__write_file", "fs", "write_file"),
            Some(Action::Ask)
        );
        assert_eq!(action("git__status", "git", "status"), Some(Action::Deny));
        assert_eq!(action("fs__read", "fs", "read"), Some(Action::Allow));
        // The `mcp__` form uses the raw names, which the shown name may have changed.
        assert_eq!(
            action("my_git__status", "my.git", "status"),
            Some(Action::Allow)
        );
        let claude = Policy {
            rules: vec![rule("mcp__my.git__status", Action::Deny, 1)],
            ..Policy::default()
        };
        assert_eq!(
            claude
                .rule_for("my_git__status", "my.git", "status")
                .map(|rule| rule.origin.as_str()),
            Some("/c.toml line 1")
        );
        assert_eq!(Policy::default().rule_for("a__b", "a", "b"), None);
    }

    #[test]
    fn names_are_checked_against_the_servers() {
        let names = ["fs", "my.git"];
        let check = |policy: &Policy| {
            let keys: Vec<String> = (0..policy.rules.len())
                .map(|i| format!("permissions.rules[{i}].tool"))
                .collect();
            policy.check_names(&names, &keys)
        };
        let ok = Policy {
            allowlist: vec![entry("fs", 1)],
            denylist: vec![entry("my.git", 2)],
            rules: vec![
                rule("fs__*", Action::Ask, 3),
                rule("my_git__*", Action::Ask, 4),
                rule("mcp__my.git__x", Action::Ask, 5),
                rule("*__delete", Action::Deny, 6),
                rule("f?__x", Action::Deny, 7),
                rule("write_file", Action::Deny, 8),
                rule("mcp__*", Action::Deny, 9),
            ],
        };
        check(&ok).unwrap();
        let bad = Policy {
            denylist: vec![entry("githb", 7)],
            ..Policy::default()
        };
        assert_eq!(
            check(&bad).unwrap_err().to_string(),
            "invalid config /c.toml line 7: security.mcp_server_denylist: no server named \
             \"githb\" (known: fs, my.git)"
        );
        let bad = Policy {
            rules: vec![
                rule("fs__x", Action::Ask, 1),
                rule("mcp__gh__x", Action::Ask, 4),
            ],
            ..Policy::default()
        };
        assert_eq!(
            check(&bad).unwrap_err().to_string(),
            "invalid config /c.toml line 4: permissions.rules[1].tool: no server named \"gh\" \
             (known: fs, my.git)"
        );
    }
}
