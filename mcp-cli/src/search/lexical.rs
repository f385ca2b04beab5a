//! Ranked full-text search over tools: BM25F over four weighted fields (names, title,
//! description, parameters), with words split at `snake_case`, `camelCase`, `kebab-case` and
//! punctuation, lowercased, and folded by a light stemmer so `files`, `file`, `creating` and
//! `create` meet.
//!
//! Our own rather than a search crate's: the corpus is a few hundred short documents, indexed
//! afresh for each search, so an engine with segments, a query parser and its own storage
//! (tantivy) would cost minutes of build time for nothing the ranking needs.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::hub::{Catalogue, Hub, ToolEntry};

/// The fields a tool is searched by, in order of weight.
const FIELDS: usize = 4;
/// How much a word counts in each field: the server's and tool's names, the title, the
/// description, the parameters' names and descriptions.
const WEIGHTS: [f32; FIELDS] = [3.0, 2.0, 1.0, 0.5];
/// BM25's saturation: how fast repeating a word stops adding to the score.
const K1: f32 = 1.2;
/// BM25's length normalisation: how much a long field is discounted.
const B: f32 = 0.75;
/// A tool that says it is deprecated ranks below a current one that matches as well.
const DEPRECATED: f32 = 0.5;

/// The tools to search, as [`Hub::tools_of`] lists them (from the catalogue on disk for a
/// server not running, when it keeps a fresh listing): the one place search reads the
/// catalogue, so that the command line and the gateway keep to the same source.
pub async fn catalogue(hub: &Hub, servers: &[String]) -> Catalogue {
    hub.tools_of(servers).await
}

/// An index over some tools, built once and searched many times.
#[derive(Debug, Default)]
pub struct Index {
    tools: Vec<ToolEntry>,
    /// Each tool's field lengths in words.
    lengths: Vec<[f32; FIELDS]>,
    /// Each field's average length over all tools.
    average: [f32; FIELDS],
    /// For each word, the tools holding it and how often in each field.
    postings: HashMap<String, Vec<(usize, [f32; FIELDS])>>,
    /// Each tool's multiplier: [`DEPRECATED`] or 1.
    boosts: Vec<f32>,
}

/// One tool that matched, with its score (higher is better).
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<'a> {
    /// The tool.
    pub entry: &'a ToolEntry,
    /// How well it matched: a sum over the query's words, comparable within one search only.
    pub score: f32,
}

impl Hit<'_> {
    /// The hit as `search --json` prints it and the gateway's `search_tools` returns it: the
    /// shown name, the server, the tool's own name, a one-line description, the score to two
    /// decimals.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.entry.name,
            "server": self.entry.server,
            "tool": self.entry.tool.name,
            "description": summary(self.entry),
            "score": (f64::from(self.score) * 100.0).round() / 100.0,
        })
    }
}

impl Index {
    /// Indexes `tools`, keeping them for [`search`](Self::search) and [`get`](Self::get).
    pub fn new(tools: Vec<ToolEntry>) -> Self {
        let mut index = Index::default();
        let deprecated = stem("deprecated");
        for (at, entry) in tools.iter().enumerate() {
            let fields = fields(entry);
            let mut counts: HashMap<String, [f32; FIELDS]> = HashMap::new();
            let mut lengths = [0.0; FIELDS];
            for (field, text) in fields.iter().enumerate() {
                for (surface, stem) in words(text) {
                    counts.entry(stem).or_default()[field] += 1.0;
                    counts.entry(exact(&surface)).or_default()[field] += 1.0;
                    lengths[field] += 1.0;
                }
            }
            for (word, counts) in counts {
                index.postings.entry(word).or_default().push((at, counts));
            }
            for (sum, length) in index.average.iter_mut().zip(lengths) {
                *sum += length;
            }
            index.lengths.push(lengths);
            let says_deprecated = words(&fields[1])
                .chain(words(&fields[2]))
                .any(|(_, word)| word == deprecated);
            index
                .boosts
                .push(if says_deprecated { DEPRECATED } else { 1.0 });
        }
        let count = tools.len().max(1) as f32;
        for sum in &mut index.average {
            *sum = (*sum / count).max(1.0);
        }
        index.tools = tools;
        index
    }

    /// The tools indexed, in the order given.
    pub fn tools(&self) -> &[ToolEntry] {
        &self.tools
    }

    /// The tool whose shown name is `name`.
    pub fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.iter().find(|entry| entry.name == name)
    }

    /// The `limit` best matches for `query`, best first; ties keep the tools' order. Only tools
    /// that hold at least one of the query's words are returned.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit<'_>> {
        let original = query;
        let mut query: Vec<String> = words(query)
            .flat_map(|(surface, stem)| {
                let synonym = SYNONYMS.iter().find(|(word, _)| *word == surface);
                let synonym = synonym.into_iter().flat_map(|(_, synonym)| words(synonym));
                [(surface, stem)].into_iter().chain(synonym)
            })
            .flat_map(|(surface, stem)| [exact(&surface), stem])
            .collect();
        query.sort();
        query.dedup();
        let total = self.tools.len() as f32;
        let mut scores = vec![0.0_f32; self.tools.len()];
        for word in &query {
            let Some(postings) = self.postings.get(word) else {
                continue;
            };
            let held = postings.len() as f32;
            let idf = (1.0 + (total - held + 0.5) / (held + 0.5)).ln();
            for (at, counts) in postings {
                let weighted: f32 = (0..FIELDS)
                    .map(|field| {
                        let norm = 1.0 - B + B * self.lengths[*at][field] / self.average[field];
                        WEIGHTS[field] * counts[field] / norm
                    })
                    .sum();
                scores[*at] += idf * weighted / (K1 + weighted);
            }
        }
        // A tool the query names outright comes first, its score raised past every other's.
        let named = normalized(original);
        let best = scores.iter().copied().fold(0.0_f32, f32::max);
        let mut hits: Vec<Hit<'_>> = (self.tools.iter().zip(&scores).zip(&self.boosts))
            .filter(|((_, score), _)| **score > 0.0)
            .map(|((entry, score), boost)| {
                let bonus = if names(entry, &named) { best } else { 0.0 };
                Hit {
                    entry,
                    score: score * boost + bonus,
                }
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
        hits
    }
}

/// Lowercased, with runs of blanks as one space: how a query and a name are compared.
fn normalized(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.join(" ").to_lowercase()
}

/// Whether `query` ([`normalized`]) is the tool's name outright: its shown name, `SERVER.TOOL`,
/// `mcp__SERVER__TOOL` (Claude Code's spelling), its own name, or its title.
fn names(entry: &ToolEntry, query: &str) -> bool {
    let tool = &entry.tool;
    let spellings = [
        entry.name.clone(),
        format!("{}.{}", entry.server, tool.name),
        format!("mcp__{}__{}", entry.server, tool.name),
        tool.name.clone(),
    ];
    let title = tool.title.as_deref().map(normalized);
    (spellings.iter()).any(|name| normalized(name) == query) || title.as_deref() == Some(query)
}

/// A tool's text by field: names, title, description, parameters.
fn fields(entry: &ToolEntry) -> [String; FIELDS] {
    let tool = &entry.tool;
    let names = format!("{} {}", entry.server, tool.name);
    let title = tool.title.clone().unwrap_or_default();
    let description = tool.description.clone().unwrap_or_default();
    let mut parameters = String::new();
    if let Some(Value::Object(properties)) = tool.input_schema.get("properties") {
        for (name, property) in properties {
            parameters.push_str(name);
            parameters.push(' ');
            if let Some(text) = property.get("description").and_then(Value::as_str) {
                parameters.push_str(text);
                parameters.push(' ');
            }
        }
    }
    [names, title, description, parameters]
}

/// The first sentence of a tool's description (or its title), at most 200 characters, for a
/// result list: short, since each result costs the model's context.
pub fn summary(entry: &ToolEntry) -> String {
    let text = (entry.tool.description.as_deref())
        .or(entry.tool.title.as_deref())
        .unwrap_or_default();
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let line = line.unwrap_or_default();
    let line = line.find(". ").map_or(line, |end| &line[..=end]);
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", line[..cut].trim_end()),
        None => line.to_owned(),
    }
}

/// Words too common in tool descriptions and questions to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i",
    "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "so", "that", "the",
    "their", "them", "then", "this", "to", "use", "using", "want", "what", "when", "which", "with",
    "you", "your",
];

/// Everyday words for what tools call otherwise, searched for beside the word itself.
const SYNONYMS: &[(&str, &str)] = &[
    ("folder", "directory"),
    ("folders", "directories"),
    ("dir", "directory"),
    ("make", "create"),
    ("remove", "delete"),
    ("erase", "delete"),
    ("find", "search"),
    ("look", "search"),
    ("modify", "edit"),
    ("change", "edit"),
    ("rename", "move"),
    ("download", "fetch"),
    ("website", "url"),
];

/// The words of `text`, each as written (lowercased) and as its stem: split at anything but
/// letters and digits and at case changes (`readFile`, `HTTPServer` → `http server`), stop
/// words left out, each folded by [`stem`].
fn words(text: &str) -> impl Iterator<Item = (String, String)> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .flat_map(split_case)
        .map(str::to_lowercase)
        .filter(|word| !STOP_WORDS.contains(&word.as_str()))
        .map(|word| {
            let stem = stem(&word);
            (word, stem)
        })
}

/// The term a word is indexed under as written, beside its stem: a tool that holds the very
/// word asked for (`file`, not only `files`) ranks above one that holds only its stem.
fn exact(word: &str) -> String {
    format!("={word}")
}

/// `word` split where its case changes from lower to upper (`readFile`), and before the last
/// capital of a run followed by lower case (`HTTPServer` → `HTTP`, `Server`).
fn split_case(word: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut parts = Vec::new();
    let mut start = 0;
    for pair in 1..chars.len() {
        let (at, c) = chars[pair];
        let before = chars[pair - 1].1;
        let next_lower = chars.get(pair + 1).is_some_and(|(_, n)| n.is_lowercase());
        let boundary = (before.is_lowercase() && c.is_uppercase())
            || (before.is_uppercase() && c.is_uppercase() && next_lower);
        if boundary {
            parts.push(&word[start..at]);
            start = at;
        }
    }
    parts.push(&word[start..]);
    parts.retain(|part| !part.is_empty());
    parts
}

/// A light English stemmer: plurals, `-ing`, `-ed` and a final `-e` folded, so that `files`,
/// `branches`, `entities`, `creating`, `created` and `create` meet their stems. Words of three
/// letters or fewer, and what would become so, are kept whole.
fn stem(word: &str) -> String {
    if word.len() <= 3 || !word.is_ascii() {
        return word.to_owned();
    }
    let mut stem = word;
    let plural = if let Some(base) = stem.strip_suffix("ies") {
        Some(format!("{base}y"))
    } else if ["sses", "shes", "ches", "xes", "zes"]
        .iter()
        .any(|ending| stem.ends_with(ending))
    {
        Some(stem[..stem.len() - 2].to_owned())
    } else if stem.ends_with('s') && !stem.ends_with("ss") && !stem.ends_with("us") {
        Some(stem[..stem.len() - 1].to_owned())
    } else {
        None
    };
    let owned;
    if let Some(base) = plural {
        owned = base;
        stem = &owned;
    }
    for ending in ["ing", "ed"] {
        if let Some(base) = stem.strip_suffix(ending)
            && base.len() >= 3
        {
            let bytes = base.as_bytes();
            let doubled = bytes.len() >= 2
                && bytes[bytes.len() - 1] == bytes[bytes.len() - 2]
                && !b"lsz".contains(&bytes[bytes.len() - 1]);
            let base = if doubled {
                &base[..base.len() - 1]
            } else {
                base
            };
            return base.trim_end_matches('e').to_owned();
        }
    }
    match stem.strip_suffix('e') {
        Some(base) if base.len() >= 3 => base.to_owned(),
        _ => stem.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(server: &str, tool: Value) -> ToolEntry {
        let tool: crate::Tool = serde_json::from_value(tool).unwrap();
        ToolEntry {
            server: server.to_owned(),
            name: crate::names::qualified(server, &tool.name),
            tool: tool.into(),
            ask: None,
        }
    }

    fn terms(text: &str) -> Vec<String> {
        words(text).map(|(_, stem)| stem).collect()
    }

    #[test]
    fn a_query_that_names_a_tool_finds_it_first() {
        let index = Index::new(vec![
            entry(
                "web",
                json!({"name": "fetch", "title": "Get A Page", "inputSchema": {},
                       "description": "Deprecated: fetches a URL."}),
            ),
            entry(
                "web",
                json!({"name": "fetch_url", "inputSchema": {},
                       "description": "Fetch a URL: fetch pages, fetch files, fetch anything."}),
            ),
        ]);
        let first = |query: &str| index.search(query, 2)[0].entry.name.clone();
        // Deprecated, it would rank below the other on its words alone.
        assert_eq!(first("fetch pages"), "web__fetch_url");
        for query in [
            "fetch",
            "web__fetch",
            " WEB__Fetch ",
            "web.fetch",
            "mcp__web__fetch",
            "get  a page",
        ] {
            assert_eq!(first(query), "web__fetch", "{query:?}");
            let hits = index.search(query, 2);
            assert!(hits[0].score > hits[1].score, "{query:?}: {hits:?}");
        }
        assert_eq!(first("fetch_url"), "web__fetch_url");
    }

    #[test]
    fn words_split_at_case_and_punctuation() {
        assert_eq!(terms("read_text_file"), ["read", "text", "fil"]);
        assert_eq!(terms("readTextFile"), ["read", "text", "fil"]);
        assert_eq!(terms("get-file-info"), ["get", "fil", "info"]);
        assert_eq!(terms("HTTPServer"), ["http", "server"]);
        assert_eq!(terms("Asia/Tokyo, e.g."), ["asia", "tokyo", "e", "g"]);
        assert_eq!(terms("the name of a file"), ["nam", "fil"]);
        assert_eq!(terms(""), Vec::<String>::new());
        assert_eq!(terms("résumé ÉTÉ"), ["résumé", "été"]);
    }

    #[test]
    fn stems_fold_plurals_and_verb_endings() {
        let same = |a: &str, b: &str| assert_eq!(stem(a), stem(b), "{a} vs {b}");
        same("files", "file");
        same("branches", "branch");
        same("entities", "entity");
        same("creating", "create");
        same("created", "creates");
        same("running", "run");
        same("timezones", "timezone");
        same("thinking", "think");
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("class"), "class");
        assert_eq!(stem("get"), "get");
        assert_eq!(stem("using"), "using");
    }

    fn sample() -> Index {
        Index::new(vec![
            entry(
                "fs",
                json!({"name": "read_file", "title": "Read File",
                       "description": "Read the complete contents of a file.",
                       "inputSchema": {"type": "object", "properties": {
                           "path": {"type": "string", "description": "Where the file is"}}}}),
            ),
            entry(
                "fs",
                json!({"name": "write_file",
                       "description": "Create a new file or overwrite one with new content.",
                       "inputSchema": {"type": "object", "properties": {
                           "path": {"type": "string"}, "content": {"type": "string"}}}}),
            ),
            entry(
                "git",
                json!({"name": "git_create_branch",
                       "description": "Creates a new branch from an optional base branch",
                       "inputSchema": {"type": "object", "properties": {
                           "branch_name": {"type": "string"}}}}),
            ),
            entry(
                "time",
                json!({"name": "get_current_time",
                       "description": "Get current time in a specific timezone",
                       "inputSchema": {"type": "object", "properties": {
                           "timezone": {"type": "string",
                                        "description": "IANA name, such as Asia/Tokyo"}}}}),
            ),
        ])
    }

    fn first(index: &Index, query: &str) -> String {
        let hits = index.search(query, 3);
        hits.first()
            .map_or_else(String::new, |hit| hit.entry.name.clone())
    }

    #[test]
    fn the_best_match_ranks_first() {
        let index = sample();
        assert_eq!(first(&index, "read a file"), "fs__read_file");
        assert_eq!(first(&index, "create a branch"), "git__create_branch");
        assert_eq!(first(&index, "writing files"), "fs__write_file");
        assert_eq!(
            first(&index, "what time is it in Tokyo"),
            "time__get_current_time"
        );
        assert_eq!(
            first(&index, "time__get_current_time"),
            "time__get_current_time"
        );
    }

    #[test]
    fn scores_fall_and_limits_hold() {
        let index = sample();
        let hits = index.search("file", 10);
        assert_eq!(hits.len(), 2);
        assert!(hits[0].score >= hits[1].score && hits[1].score > 0.0);
        assert_eq!(index.search("file", 1).len(), 1);
        assert!(index.search("zebra", 10).is_empty());
        assert!(index.search("", 10).is_empty());
        assert!(index.search("the of a", 10).is_empty());
        assert!(Index::new(Vec::new()).search("file", 10).is_empty());
    }

    #[test]
    fn names_outweigh_parameters() {
        let index = Index::new(vec![
            entry(
                "a",
                json!({"name": "lookup", "inputSchema": {"type": "object",
                       "properties": {"branch": {"type": "string"}}}}),
            ),
            entry("b", json!({"name": "branch"})),
        ]);
        assert_eq!(first(&index, "branch"), "b__branch");
    }

    #[test]
    fn a_deprecated_tool_ranks_below_its_successor() {
        let index = Index::new(vec![
            entry(
                "fs",
                json!({"name": "read_file", "description": "Read a file. DEPRECATED: use read_text_file."}),
            ),
            entry(
                "fs",
                json!({"name": "read_text_file", "description": "Read a file as text."}),
            ),
        ]);
        assert_eq!(first(&index, "read a file"), "fs__read_text_file");
    }

    #[test]
    fn summaries_are_one_short_line() {
        let long = "x".repeat(300);
        let index = Index::new(vec![
            entry(
                "s",
                json!({"name": "a", "description": "\n  First line. More.\nSecond."}),
            ),
            entry("s", json!({"name": "b", "title": "Only a title"})),
            entry("s", json!({"name": "c", "description": long})),
            entry("s", json!({"name": "d"})),
        ]);
        let summaries: Vec<String> = index.tools().iter().map(summary).collect();
        assert_eq!(summaries[0], "First line.");
        assert_eq!(summaries[1], "Only a title");
        assert_eq!(summaries[2].chars().count(), 201);
        assert_eq!(summaries[3], "");
        assert_eq!(index.get("s__b").unwrap().tool.name, "b");
        assert!(index.get("s__z").is_none());
    }

    #[test]
    fn everyday_words_find_tools_named_otherwise() {
        let index = Index::new(vec![
            entry("fs", json!({"name": "create_directory"})),
            entry("fs", json!({"name": "list_directory"})),
            entry("fs", json!({"name": "create_file"})),
        ]);
        assert_eq!(first(&index, "make a new folder"), "fs__create_directory");
        let exact = index.search("folder", 5);
        assert_eq!(exact.len(), 2);
    }
}
