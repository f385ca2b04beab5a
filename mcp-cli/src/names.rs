//! Tool names as programs see them: `<server>__<tool>`, safe for model providers.
//!
//! Providers accept `^[a-zA-Z0-9_-]{1,64}$`. Other characters become `_`; a longer name keeps
//! its first 55 characters and ends with `_` and 8 hex digits of a hash of the whole name, so
//! shortening is deterministic and distinct names stay distinct. A tool whose name already
//! starts with its server's name and a separator loses that prefix (`git` + `git_status` →
//! `git__status`, not `git__git_status`); [`tool_matches`] maps such a short form, and every
//! name [`qualified`] prints, back to the tool.

const MAX_LEN: usize = 64;
const HASH_HEX: usize = 8;

/// The provider-safe `<server>__<tool>` name.
pub fn qualified(server: &str, tool: &str) -> String {
    let full = format!("{server}__{}", short_tool(server, tool));
    let safe = safe(&full);
    if safe.len() <= MAX_LEN {
        return safe;
    }
    let keep = MAX_LEN - HASH_HEX - 1;
    format!("{}_{:08x}", &safe[..keep], fnv1a(full.as_bytes()))
}

/// [`qualified`] for every tool of one server, in order, made distinct: tools whose names
/// collide once made safe (`get.weather` and `get_weather`) each get a stable hash suffix,
/// as long names do.
pub fn shown_names(server: &str, tools: &[&str]) -> Vec<String> {
    let plain: Vec<String> = tools.iter().map(|tool| qualified(server, tool)).collect();
    let mut seen = std::collections::HashMap::new();
    for name in &plain {
        *seen.entry(name.as_str()).or_insert(0) += 1;
    }
    (tools.iter().zip(&plain))
        .map(|(tool, name)| match seen[name.as_str()] {
            1 => name.clone(),
            _ => hashed(server, tool),
        })
        .collect()
}

/// The safe `<server>__<tool>`, cut to leave room, and a hash of the tool's full name.
fn hashed(server: &str, tool: &str) -> String {
    let full = format!("{server}__{}", short_tool(server, tool));
    let safe = safe(&full);
    let keep = safe.len().min(MAX_LEN - HASH_HEX - 1);
    format!("{}_{:08x}", &safe[..keep], fnv1a(full.as_bytes()))
}

/// Why `server` cannot be a server's name beside `others` (the other servers'), if it cannot:
/// its tools' names must tell which server they are of. A name holding `__` (once made safe)
/// would make `a__b`'s tool `c` and `a`'s tool `b__c` one name; two names that are one once
/// made safe (`my.git`, `my_git`) would share all their tools' names.
pub(crate) fn server_name_clash<'a>(
    server: &str,
    others: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let shown = safe(server);
    if shown.contains("__") {
        return Some(format!(
            "a server's name may not hold `__` (here {shown:?} once made safe for tool names): \
             it separates the server from the tool in `SERVER__TOOL`, so this server's tools \
             could be taken for another's; rename it"
        ));
    }
    let mut others = others.into_iter().filter(|other| *other != server);
    let same = others.find(|other| safe(other) == shown)?;
    Some(format!(
        "its tools would be shown under the same names as those of server {same:?} (both are \
         {shown:?} in tool names); rename one of them"
    ))
}

/// `name` with every character providers refuse replaced by `_` (not shortened).
pub fn safe(name: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    name.chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .collect()
}

/// The tool's name without a leading `<server>_`, `<server>-` or `<server>__`.
fn short_tool<'a>(server: &str, tool: &'a str) -> &'a str {
    let Some(rest) = tool.strip_prefix(server) else {
        return tool;
    };
    let stripped = ["__", "_", "-"]
        .iter()
        .find_map(|sep| rest.strip_prefix(sep));
    match stripped {
        Some(short) if !short.is_empty() => short,
        _ => tool,
    }
}

/// Whether `given` (from a command line) names `tool` of `server`: its name, its name without
/// the server prefix, or the tool part of what [`qualified`] prints (safe, maybe shortened).
pub fn tool_matches(server: &str, tool: &str, given: &str) -> bool {
    tool == given
        || short_tool(server, tool) == given
        || qualified(server, tool) == format!("{}__{given}", safe(server))
}

/// Splits `SERVER__TOOL` or `SERVER.TOOL`. Tool names may contain `.` and `__` themselves, so
/// the split that names a known server wins; failing that, the first `__`, then the first `.`.
pub fn split_qualified(token: &str, is_server: impl Fn(&str) -> bool) -> Option<(String, String)> {
    let splits = |separator: &'static str| {
        token
            .match_indices(separator)
            .map(move |(at, _)| (&token[..at], &token[at + separator.len()..]))
            .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
    };
    let mut candidates = splits("__").chain(splits("."));
    let first = splits("__").next().or_else(|| splits(".").next());
    let known = candidates.find(|(server, _)| is_server(server));
    known
        .or(first)
        .map(|(server, tool)| (server.to_owned(), tool.to_owned()))
}

/// The candidate `given` most likely meant: the closest by edit distance if it is close
/// enough to be a typo (a third of its length, 1 to 3 edits), else the shortest one that
/// `given` abbreviates: its letters in order from the start of one of the candidate's words,
/// that part at most three times as long (`msg` for `message`, `allowlist` for
/// `mcp_server_allowlist`). The distance is over characters, a swap of two neighbours counting as
/// one edit (`ecoh` is one edit from `echo`): the optimal string alignment distance.
pub fn nearest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let allowed = (given.chars().count() / 3).clamp(1, 3);
    // One or two letters are too few to call anything a typo of them.
    let typo = (candidates.iter())
        .filter(|_| given.chars().count() >= 3)
        .map(|candidate| (strsim::osa_distance(given, candidate), *candidate))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate);
    let abbreviation = || {
        (candidates.iter().copied())
            .filter(|candidate| given.len() >= 2 && abbreviates(given, candidate))
            .min_by_key(|candidate| candidate.len())
    };
    typo.or_else(abbreviation)
}

/// Whether `short` abbreviates `long`: its letters in order (in any case) from the start of
/// one of `long`'s words to the end, that part at most three times as long as `short` (`msg`, `message`).
/// Letters in order anywhere would be too loose: a long name holds nearly any few letters
/// (`nope` is in `trigger-long-running-operation`), and such a hint misleads.
fn abbreviates(short: &str, long: &str) -> bool {
    let same = |a: &char, b: &char| a.to_lowercase().eq(b.to_lowercase());
    let short: Vec<char> = short.chars().collect();
    let long: Vec<char> = long.chars().collect();
    (0..long.len())
        .filter(|&at| is_word_start(&long, at))
        .map(|at| &long[at..])
        .filter(|rest| rest.len() <= 3 * short.len())
        .filter(|rest| matches!((rest.first(), short.first()), (Some(a), Some(b)) if same(a, b)))
        .any(|rest| {
            let mut rest = rest.iter();
            short.iter().all(|c| rest.any(|l| same(l, c)))
        })
}

/// A word starts a name, follows a separator (`_`, `-`, `.`, ...) or is a capital after a
/// small letter (`camelCase`).
fn is_word_start(name: &[char], at: usize) -> bool {
    let Some(before) = at.checked_sub(1).map(|i| name[i]) else {
        return true;
    };
    name[at].is_alphanumeric()
        && (!before.is_alphanumeric() || (before.is_lowercase() && name[at].is_uppercase()))
}

/// 32-bit FNV-1a: tiny, stable across releases and platforms.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_join_with_a_double_underscore() {
        assert_eq!(qualified("fs", "read_file"), "fs__read_file");
    }

    #[test]
    fn server_names_that_would_share_tool_names_are_refused() {
        assert_eq!(server_name_clash("github", ["git", "github"]), None);
        let double = server_name_clash("a__b", ["a"]).unwrap();
        assert!(double.contains("may not hold `__`"), "{double}");
        assert!(server_name_clash("a..b", []).unwrap().contains("\"a__b\""));
        let same = server_name_clash("my_git", ["my.git"]).unwrap();
        assert!(same.contains("server \"my.git\""), "{same}");
    }

    #[test]
    fn unsafe_characters_become_underscores() {
        assert_eq!(
            qualified("my server", "get.item/v2"),
            "my_server__get_item_v2"
        );
        assert_eq!(qualified("café", "x"), "caf___x");
    }

    #[test]
    fn no_double_prefix() {
        assert_eq!(qualified("git", "git_status"), "git__status");
        assert_eq!(qualified("git", "git-log"), "git__log");
        assert_eq!(qualified("git", "git__diff"), "git__diff");
        assert_eq!(qualified("git", "github_issue"), "git__github_issue");
        assert_eq!(qualified("git", "git_"), "git__git_");
        assert!(tool_matches("git", "git_status", "status"));
        assert!(tool_matches("git", "git_status", "git_status"));
        assert!(!tool_matches("git", "git_status", "log"));
    }

    #[test]
    fn every_printed_name_matches_its_tool() {
        let long = "t".repeat(60);
        for (server, tool) in [
            ("fs", "read_file"),
            ("my server", "get.item/v2"),
            ("weird.srv", "echo"),
            ("git", "git_status"),
            ("git", "git__git_x"),
            ("server", long.as_str()),
        ] {
            let printed = qualified(server, tool);
            let (_, part) = printed.split_once("__").unwrap();
            assert!(
                tool_matches(server, tool, part),
                "{server} {tool}: {printed}"
            );
        }
        assert!(tool_matches("my server", "get.item/v2", "get.item/v2"));
        assert!(!tool_matches("my server", "get.item/v2", "get_item_v3"));
        assert!(!tool_matches("server", &long, &"t".repeat(55)));
    }

    #[test]
    fn long_names_are_shortened_deterministically() {
        let tool = "t".repeat(60);
        let name = qualified("server", &tool);
        assert_eq!(name.len(), 64);
        assert_eq!(name, qualified("server", &tool));
        assert_ne!(name, qualified("server", &"t".repeat(61)));
        assert!(name.starts_with("server__ttt"));
        let exactly = "t".repeat(64 - "server__".len());
        assert_eq!(qualified("server", &exactly).len(), 64);
        assert_eq!(qualified("server", &exactly), format!("server__{exactly}"));
    }

    #[test]
    fn colliding_names_get_distinct_hashes() {
        let shown = shown_names("w", &["get.weather", "get_weather", "other"]);
        assert_eq!(shown[2], "w__other");
        assert_ne!(shown[0], shown[1]);
        assert!(
            shown[0].starts_with("w__get_weather_")
                && shown[0].len() == "w__get_weather_".len() + 8
        );
        assert_eq!(
            shown,
            shown_names("w", &["get.weather", "get_weather", "other"])
        );
    }

    #[test]
    fn no_shown_name_is_one_of_the_gateways_own_tools() {
        // `serve --search` and `--proxy` offer these beside no backend tool: a shown name holds
        // `__` after its server's part, or is a 64-character shortened one, so none can shadow.
        let gateway = ["search_tools", "describe_tool", "call_tool", "mcp"];
        let long = "search_tools".repeat(6);
        for (server, tool) in [
            ("search", "search_tools"),
            ("search", "tools"),
            ("describe", "describe_tool"),
            ("call", "_tool"),
            ("mcp", "mcp"),
            ("", "search_tools"),
            ("search_tools", ""),
            (long.as_str(), "x"),
            ("s", long.as_str()),
        ] {
            for shown in [qualified(server, tool)]
                .into_iter()
                .chain(shown_names(server, &[tool, tool]))
            {
                assert!(
                    !gateway.contains(&shown.as_str()),
                    "{server} {tool}: {shown}"
                );
                assert!(shown.contains("__") || shown.len() == MAX_LEN, "{shown}");
            }
        }
        assert_eq!(qualified("search", "search_tools"), "search__tools");
    }

    #[test]
    fn nearest_names_forgive_typos_only() {
        let names = ["message", "messages", "text", "filesystem"];
        assert_eq!(nearest("msg", names), Some("message"));
        assert_eq!(nearest("mesage", names), Some("message"));
        assert_eq!(nearest("txt", names), Some("text"));
        assert_eq!(nearest("filesytem", names), Some("filesystem"));
        assert_eq!(nearest("zzz", names), None);
        assert_eq!(strsim::osa_distance("kitten", "sitting"), 3);
        assert_eq!(strsim::osa_distance("", "ab"), 2);
        assert_eq!(strsim::osa_distance("ecoh", "echo"), 1);
        // Over characters, not bytes.
        assert_eq!(strsim::osa_distance("čaj", "caj"), 1);
        assert_eq!(nearest("ecoh", ["echo", "blob"]), Some("echo"));
    }

    #[test]
    fn unrelated_names_are_not_suggested() {
        // server-everything's tools: `nope` holds letters of the longest in order, and no more.
        let everything = [
            "echo",
            "get-annotated-message",
            "get-env",
            "get-resource-links",
            "get-resource-reference",
            "get-structured-content",
            "get-sum",
            "get-tiny-image",
            "toggle-simulated-logging",
            "trigger-long-running-operation",
        ];
        assert_eq!(nearest("nope", everything), None);
        assert_eq!(nearest("xyz", everything), None);
        // Abbreviations of one word, from its start, still are.
        assert_eq!(nearest("env", everything), Some("get-env"));
        assert_eq!(
            nearest("struct", ["getStructuredContent"]),
            Some("getStructuredContent")
        );
        assert_eq!(
            nearest("allowlist", ["mcp_server_allowlist"]),
            Some("mcp_server_allowlist")
        );
        assert_eq!(nearest("ms", ["message"]), None);
    }

    #[test]
    fn qualified_tokens_split_at_a_known_server() {
        let known = |name: &str| ["fs", "my__srv", "a.b"].contains(&name);
        let split = |token| split_qualified(token, known);
        assert_eq!(
            split("fs__read_file"),
            Some(("fs".into(), "read_file".into()))
        );
        assert_eq!(
            split("fs.read.file"),
            Some(("fs".into(), "read.file".into()))
        );
        assert_eq!(
            split("my__srv__tool"),
            Some(("my__srv".into(), "tool".into()))
        );
        assert_eq!(split("a.b.tool"), Some(("a.b".into(), "tool".into())));
        assert_eq!(
            split("unknown__tool"),
            Some(("unknown".into(), "tool".into()))
        );
        assert_eq!(split("plain"), None);
        assert_eq!(split("__tool"), None);
    }
}
