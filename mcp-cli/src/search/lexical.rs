//! The lexical ranking: BM25F over four weighted fields (names, title, description,
//! parameters), with words split at `snake_case`, `camelCase`, `kebab-case` and punctuation,
//! lowercased, and folded by a light stemmer so `files`, `file`, `creating`, `create` and
//! `creation` meet. A URL in a query stands for the word `url`.
//!
//! Our own rather than a search crate's: the corpus is a few hundred short documents, indexed
//! afresh for each search, so an engine with segments, a query parser and its own storage
//! (tantivy) would cost minutes of build time for nothing the ranking needs.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use crate::hub::ToolEntry;

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

/// A BM25F index over some tools, by their place in the list it was built from.
#[derive(Debug, Default)]
pub(crate) struct Lexical {
    /// Each tool's field lengths in words.
    lengths: Vec<[f32; FIELDS]>,
    /// Each field's average length over all tools.
    average: [f32; FIELDS],
    /// Each term's number, by its stem ...
    stems: HashMap<String, usize>,
    /// ... and by the word as written: a tool that holds the very word asked for (`file`,
    /// not only `files`) ranks above one that holds only its stem.
    exacts: HashMap<String, usize>,
    /// For each term, by number, the tools holding it and how often in each field.
    postings: Vec<Vec<(usize, [f32; FIELDS])>>,
    /// Each tool's multiplier: [`DEPRECATED`] or 1.
    boosts: Vec<f32>,
}

/// How one tool scored: its score (0 when no word of the query is in it) and the query's
/// words it holds, as the query spelt them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Scored {
    pub score: f32,
    pub matched: Vec<String>,
}

impl Lexical {
    pub(crate) fn new(tools: &[ToolEntry]) -> Self {
        let mut index = Lexical::default();
        let deprecated = stem("deprecated");
        // A cold search indexes the whole catalogue, so each distinct word is stemmed and
        // given its terms once, by the word as written (`None` for a stop word); every later
        // sight of it is one lookup.
        let mut seen: HashMap<String, Option<(usize, usize)>> = HashMap::new();
        let mut says_deprecated_term = None;
        // Reused for every tool: how often each term is in each of its fields, by term, and
        // the terms it holds.
        let mut counts: Vec<[f32; FIELDS]> = Vec::new();
        let mut held: Vec<usize> = Vec::new();
        for (at, entry) in tools.iter().enumerate() {
            let mut lengths = [0.0; FIELDS];
            let mut says_deprecated = false;
            for (field, text) in fields(entry).iter().enumerate() {
                for_each_lowercase(text, |surface| {
                    let terms = match seen.get(surface) {
                        Some(terms) => *terms,
                        None => {
                            let terms = (!STOP_WORDS.contains(&surface)).then(|| {
                                let stem = stem(surface);
                                let stem_term = term(&mut index.stems, &mut index.postings, &stem);
                                if stem == deprecated {
                                    says_deprecated_term = Some(stem_term);
                                }
                                (
                                    stem_term,
                                    term(&mut index.exacts, &mut index.postings, surface),
                                )
                            });
                            seen.insert(surface.to_owned(), terms);
                            terms
                        }
                    };
                    let Some((stem_term, exact_term)) = terms else {
                        return;
                    };
                    counts.resize(index.postings.len(), [0.0; FIELDS]);
                    for term in [stem_term, exact_term] {
                        if counts[term] == [0.0; FIELDS] {
                            held.push(term);
                        }
                        counts[term][field] += 1.0;
                    }
                    lengths[field] += 1.0;
                    says_deprecated |=
                        matches!(field, 1 | 2) && says_deprecated_term == Some(stem_term);
                });
            }
            for term in held.drain(..) {
                index.postings[term].push((at, counts[term]));
                counts[term] = [0.0; FIELDS];
            }
            for (sum, length) in index.average.iter_mut().zip(lengths) {
                *sum += length;
            }
            index.lengths.push(lengths);
            index
                .boosts
                .push(if says_deprecated { DEPRECATED } else { 1.0 });
        }
        let count = tools.len().max(1) as f32;
        for sum in &mut index.average {
            *sum = (*sum / count).max(1.0);
        }
        index
    }

    /// Every tool's score for `query` (its URLs already [`without_urls`]), in the tools'
    /// order.
    pub(crate) fn score(&self, query: &str) -> Vec<Scored> {
        // Each term searched for, with the query's word it came from.
        let mut terms: Vec<(usize, String)> = (words(query).into_iter())
            .flat_map(|(surface, stem)| {
                let synonym = SYNONYMS.iter().find(|(word, _)| *word == surface);
                let synonym = synonym.into_iter().flat_map(|(_, synonym)| words(synonym));
                let synonym: Vec<(String, String)> = synonym.collect();
                let spoken = surface.clone();
                [(surface, stem)]
                    .into_iter()
                    .chain(synonym)
                    .map(move |pair| (pair, spoken.clone()))
            })
            .flat_map(|((surface, stem), spoken)| {
                let exact = self.exacts.get(&surface).copied();
                let stem = self.stems.get(&stem).copied();
                [exact, stem]
                    .into_iter()
                    .flatten()
                    .map(move |term| (term, spoken.clone()))
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        terms.retain(|(term, _)| seen.insert(*term));
        let total = self.lengths.len() as f32;
        let mut scored = vec![Scored::default(); self.lengths.len()];
        for (term, spoken) in &terms {
            let postings = &self.postings[*term];
            let held = postings.len() as f32;
            let idf = (1.0 + (total - held + 0.5) / (held + 0.5)).ln();
            for (at, counts) in postings {
                let weighted: f32 = (0..FIELDS)
                    .map(|field| {
                        let norm = 1.0 - B + B * self.lengths[*at][field] / self.average[field];
                        WEIGHTS[field] * counts[field] / norm
                    })
                    .sum();
                let tool = &mut scored[*at];
                tool.score += self.boosts[*at] * idf * weighted / (K1 + weighted);
                if !tool.matched.contains(spoken) {
                    tool.matched.push(spoken.clone());
                }
            }
        }
        scored
    }
}

/// `query` with each URL (`https://…`, `www.…`) replaced by the word `url`: the tool that
/// fetches a page says so by its `url` parameter, never by the page's host name.
pub(crate) fn without_urls(query: &str) -> String {
    let words = query.split_whitespace().map(|word| {
        let lower = word.to_ascii_lowercase();
        let url = ["http://", "https://", "www."]
            .iter()
            .any(|start| lower.starts_with(start));
        if url { "url" } else { word }
    });
    words.collect::<Vec<_>>().join(" ")
}

/// A tool's text by field: names, title, description, parameters.
fn fields(entry: &ToolEntry) -> [Cow<'_, str>; FIELDS] {
    let tool = &entry.tool;
    let names = format!("{} {}", entry.server, tool.name);
    let title = tool.title.as_deref().unwrap_or_default();
    let description = tool.description.as_deref().unwrap_or_default();
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
    [
        names.into(),
        title.into(),
        description.into(),
        parameters.into(),
    ]
}

/// Words too common in tool descriptions and questions to tell tools apart, and what an
/// apostrophe leaves of a contraction or a possessive (`what's`, `don't`, `we're`, `I'll`,
/// `user's`): a query's `s` would otherwise match every description that says `task's`.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "can", "d", "do", "for", "from", "how",
    "i", "if", "in", "into", "is", "it", "its", "ll", "m", "me", "my", "of", "on", "or", "re", "s",
    "so", "t", "that", "the", "their", "them", "then", "this", "to", "use", "using", "ve", "want",
    "what", "when", "which", "with", "you", "your",
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
fn words(text: &str) -> Vec<(String, String)> {
    let mut words = Vec::new();
    for_each_word(text, |surface, stem| {
        words.push((surface.to_owned(), stem.to_owned()))
    });
    words
}

/// [`words`] without a list: `each` is called with every word as written and its stem.
fn for_each_word(text: &str, mut each: impl FnMut(&str, &str)) {
    for_each_lowercase(text, |lower| {
        if !STOP_WORDS.contains(&lower) {
            each(lower, &stem(lower));
        }
    });
}

/// Every word of `text` lowercased, stop words too, split as [`words`] splits them.
fn for_each_lowercase(text: &str, mut each: impl FnMut(&str)) {
    let mut lower = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        split_case(word, |part| {
            lower.clear();
            match part.is_ascii() {
                true => lower.extend(part.chars().map(|c| c.to_ascii_lowercase())),
                false => lower.extend(part.chars().flat_map(char::to_lowercase)),
            }
            each(&lower);
        });
    }
}

/// The number of `word` in `terms`, given one (and an empty posting list) if new.
fn term(
    terms: &mut HashMap<String, usize>,
    postings: &mut Vec<Vec<(usize, [f32; FIELDS])>>,
    word: &str,
) -> usize {
    if let Some(term) = terms.get(word) {
        return *term;
    }
    postings.push(Vec::new());
    terms.insert(word.to_owned(), postings.len() - 1);
    postings.len() - 1
}

/// Calls `each` with the parts of `word` split where its case changes from lower to upper
/// (`readFile`), and before the last capital of a run followed by lower case (`HTTPServer` →
/// `HTTP`, `Server`).
fn split_case(word: &str, mut each: impl FnMut(&str)) {
    let mut start = 0;
    let mut chars = word.char_indices().peekable();
    let mut before: Option<char> = None;
    while let Some((at, c)) = chars.next() {
        let next_lower = chars.peek().is_some_and(|(_, n)| n.is_lowercase());
        let boundary = before.is_some_and(|b| {
            (b.is_lowercase() && c.is_uppercase())
                || (b.is_uppercase() && c.is_uppercase() && next_lower)
        });
        if boundary && at > start {
            each(&word[start..at]);
            start = at;
        }
        before = Some(c);
    }
    if start < word.len() {
        each(&word[start..]);
    }
}

/// A light English stemmer: plurals, `-ing`, `-ed`, the `-ion` of a noun made from a verb in
/// `-t` and a final `-e` folded, so that `files`, `branches`, `entities`, `creating`,
/// `created`, `creation` and `create` meet their stems. Words of three letters or fewer, and
/// what would become so, are kept whole, as are nouns in `-tion` with short stems (`mention`,
/// `section`), which are no verb's.
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
    if let Some(base) = stem.strip_suffix("ion")
        && base.len() >= 5
        && base.ends_with('t')
    {
        return base.to_owned();
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

    fn terms(text: &str) -> Vec<String> {
        words(text).into_iter().map(|(_, stem)| stem).collect()
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
        same("creation", "create");
        same("deletions", "deleted");
        same("connection", "connect");
        assert_eq!(stem("mention"), stem("mentioned"));
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("class"), "class");
        assert_eq!(stem("get"), "get");
        assert_eq!(stem("using"), "using");
    }

    #[test]
    fn a_url_in_a_query_is_the_word_url() {
        assert_eq!(
            without_urls("get https://example.com/a?b=c now"),
            "get url now"
        );
        assert_eq!(without_urls("open www.rust-lang.org"), "open url");
        assert_eq!(without_urls("the http spec"), "the http spec");
    }
}
