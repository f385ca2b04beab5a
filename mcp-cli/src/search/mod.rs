//! Tool search: the tools that best match a plain-language query, ranked two ways and fused.
//!
//! - `lexical`: BM25F over the tools' words, always there.
//! - `semantic`: cosine similarity of static embeddings or of a sentence encoder's vectors
//!   (`encoder`, its tools' vectors kept by `vectors`), when a model is installed.
//! - The two are fused: each tool's score in each ranking as a share of that ranking's best,
//!   the semantic share weighed half (`SEMANTIC_WEIGHT`; whole under an encoder,
//!   `ENCODER_WEIGHT`), so neither ranking's scale matters and a tool both like beats one
//!   only a single ranking likes.
//! - A query that names a tool outright (its shown name, `SERVER.TOOL`, its own name or its
//!   title) returns it first, whatever the rankings say.

mod encoder;
pub(crate) mod lexical;
pub(crate) mod semantic;
mod vectors;

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use crate::hub::{Catalogue, Hub, ToolEntry};
use lexical::Lexical;
pub use semantic::Model;

/// How much the semantic ranking counts beside the lexical one, each scored as a share of
/// its best: measured over the benchmark (`tests/tests/e2e/search_quality.rs`), 0.5 put the
/// right tool first most often; 1 less so, and reciprocal-rank fusion less still (the
/// static model's cosines are a weaker signal than the words, so an equal say costs).
const SEMANTIC_WEIGHT: f32 = 0.5;

/// The same under a sentence encoder, whose cosines are as strong a signal as the words:
/// measured over the benchmark, 1 put the right tool first most often (0.75 and 1.5 less).
const ENCODER_WEIGHT: f32 = 1.0;

/// The tools to search, as [`Hub::tools_of`] lists them (from the catalogue on disk for a
/// server not running, when it keeps a fresh listing): the one place search reads the
/// catalogue, so that the command line and the gateway keep to the same source.
pub async fn catalogue(hub: &Hub, servers: &[String]) -> Catalogue {
    hub.tools_of(servers).await
}

/// An index over `tools` with the installed model (`semantic::located`, in this process's
/// environment), and, when a model is named or present but cannot be read, why: the tools are
/// then ranked by their words alone.
///
/// The last index built is kept, and given again for the same tools and model: the daemon
/// and the gateway search one catalogue again and again, and indexing its words was half of
/// what a warm search cost.
pub fn with_installed_model(tools: Vec<ToolEntry>) -> (Arc<Index>, Option<String>) {
    static LAST: Last = Last(Mutex::new(None));
    let env = |name: &str| std::env::var(name).ok();
    let (model, unreadable) = match semantic::located(&env) {
        Ok(model) => (model, None),
        Err(why) => {
            let why = format!("search ranks by words alone: the search model is unreadable: {why}");
            (None, Some(why))
        }
    };
    (LAST.index(tools, model), unreadable)
}

/// The last index built; its tools and model are what it was built from. (Its model stays
/// alive with it, so a model loaded later never shares its address.)
struct Last(Mutex<Option<Arc<Index>>>);

impl Last {
    /// The last index if it was built from `tools` and `model`, else a new one, kept.
    fn index(&self, tools: Vec<ToolEntry>, model: Option<Arc<Model>>) -> Arc<Index> {
        let mut last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = &*last
            && index.model().map(Arc::as_ptr) == model.as_ref().map(Arc::as_ptr)
            && index.tools == tools
        {
            return index.clone();
        }
        let index = Arc::new(Index::with_model(tools, model));
        *last = Some(index.clone());
        index
    }
}

/// An index over some tools, built once and searched many times.
#[derive(Debug, Default)]
pub struct Index {
    tools: Vec<ToolEntry>,
    lexical: Lexical,
    semantic: Option<Semantic>,
}

/// The semantic side of an index: the model, and each tool's vector in the tools' order.
///
/// The vectors are computed for each index, from the listings as they are: 100 tools take
/// under a millisecond, less than reading vectors back from a file would. (Each piece
/// weighed by its rarity among the tools was measured too: it helps the semantic ranking
/// alone, 47% of the benchmark's queries first against 43%, but not the fused one.)
#[derive(Debug)]
struct Semantic {
    model: Arc<Model>,
    vectors: Vec<Arc<[f32]>>,
}

impl Semantic {
    fn new(model: Arc<Model>, tools: &[ToolEntry]) -> Self {
        let documents: Vec<String> = tools.iter().map(document).collect();
        let vectors = model.embed_documents(&documents);
        Semantic { model, vectors }
    }

    /// The cosine of `query` with each tool, in the tools' order.
    fn cosines(&self, query: &str) -> Vec<f32> {
        let asked = self.model.embed(query);
        (self.vectors.iter())
            .map(|tool| cosine(&asked, tool))
            .collect()
    }
}

/// One tool that matched, with its fused score and how each ranking placed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<'a> {
    /// The tool.
    pub entry: &'a ToolEntry,
    /// How well it matched: from 0 to 1 by the rankings (1 when every ranking put it first),
    /// and 1 more for a tool the query names, which so comes first.
    pub score: f32,
    /// Whether the query is the tool's name outright.
    pub named: bool,
    /// Its place and score in the lexical ranking, if any word of the query is in it.
    pub lexical: Option<Placed>,
    /// Its place and cosine similarity in the semantic ranking, if a model ranked it.
    pub semantic: Option<Placed>,
    /// The query's words the tool holds.
    pub matched: Vec<String>,
}

/// A tool's place in one ranking (1 for the first) and its score there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    /// 1 for the first.
    pub place: usize,
    /// The ranking's own score: BM25F's sum, or a cosine similarity.
    pub score: f32,
}

impl Hit<'_> {
    /// The hit as the gateway's `search_tools` returns it: the shown name, the server, the
    /// tool's own name, a one-line description, the score to two decimals. Short, since each
    /// result costs the model's context.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.entry.name,
            "server": self.entry.server,
            "tool": self.entry.tool.name,
            "description": summary(self.entry),
            "score": rounded(self.score),
        })
    }

    /// The hit as `search --json` prints it: [`to_json`](Self::to_json) and what each
    /// ranking made of it (`{"place", "score"}` or null), and whether the query names it.
    pub fn to_json_scored(&self) -> Value {
        let placed = |placed: Option<Placed>| {
            placed.map(|p| json!({"place": p.place, "score": rounded(p.score)}))
        };
        let mut hit = self.to_json();
        hit["named"] = self.named.into();
        hit["lexical"] = placed(self.lexical).into();
        hit["semantic"] = placed(self.semantic).into();
        hit["matched"] = self.matched.clone().into();
        hit
    }

    /// Why the hit ranked where it did, in one line: `the query names it`, then the lexical
    /// ranking's place and the words it holds, then the semantic ranking's place and cosine.
    pub fn explain(&self) -> String {
        let mut why = Vec::new();
        if self.named {
            why.push("the query names it".to_owned());
        }
        match self.lexical {
            Some(p) => why.push(format!(
                "words: #{} ({:.2}) for {}",
                p.place,
                p.score,
                self.matched.join(", ")
            )),
            None => why.push("words: none of the query's".to_owned()),
        }
        if let Some(p) = self.semantic {
            why.push(format!("meaning: #{} (cosine {:.2})", p.place, p.score));
        }
        why.join("; ")
    }
}

fn rounded(score: f32) -> f64 {
    (f64::from(score) * 100.0).round() / 100.0
}

impl Index {
    /// Indexes `tools` for the lexical ranking alone.
    pub fn new(tools: Vec<ToolEntry>) -> Self {
        Self::with_model(tools, None)
    }

    /// Indexes `tools` for both rankings when `model` is given.
    pub fn with_model(tools: Vec<ToolEntry>, model: Option<Arc<Model>>) -> Self {
        let lexical = Lexical::new(&tools);
        let semantic = model.map(|model| Semantic::new(model, &tools));
        Index {
            tools,
            lexical,
            semantic,
        }
    }

    /// The tools indexed, in the order given.
    pub fn tools(&self) -> &[ToolEntry] {
        &self.tools
    }

    /// Whether the semantic ranking takes part.
    #[cfg(test)]
    fn is_semantic(&self) -> bool {
        self.semantic.is_some()
    }

    fn model(&self) -> Option<&Arc<Model>> {
        self.semantic.as_ref().map(|semantic| &semantic.model)
    }

    /// The tool whose shown name is `name`.
    pub fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.iter().find(|entry| entry.name == name)
    }

    /// The `limit` best matches for `query`, best first; ties keep the tools' order. Without
    /// a model only tools holding a word of the query are returned; with one, any tool may
    /// be, since meaning needs no shared word.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit<'_>> {
        let named = normalized(query);
        if named.is_empty() {
            return Vec::new();
        }
        let query = lexical::without_urls(query);
        let scored = self.lexical.score(&query);
        let lexical = places(scored.iter().map(|s| s.score));
        let semantic =
            (self.semantic.as_ref()).map(|semantic| places(semantic.cosines(&query).into_iter()));
        // Each ranking's scores as shares of its best, so that neither's scale matters.
        let best = |places: &[Option<Placed>]| {
            (places.iter().flatten().map(|p| p.score)).fold(f32::MIN_POSITIVE, f32::max)
        };
        let best_lexical = best(&lexical);
        let best_semantic = semantic.as_deref().map_or(1.0, best);
        let weight = match self.model() {
            Some(model) if model.is_encoder() => ENCODER_WEIGHT,
            _ => SEMANTIC_WEIGHT,
        };
        let whole = 1.0 + semantic.as_ref().map_or(0.0, |_| weight);
        let mut hits: Vec<Hit<'_>> = Vec::new();
        for (at, (entry, scored)) in self.tools.iter().zip(scored).enumerate() {
            let lexical = lexical[at];
            let semantic = semantic.as_ref().and_then(|places| places[at]);
            let named = names(entry, &named);
            if lexical.is_none() && semantic.is_none() && !named {
                continue;
            }
            let share = |placed: Option<Placed>, best: f32| placed.map_or(0.0, |p| p.score / best);
            let fused = share(lexical, best_lexical) + weight * share(semantic, best_semantic);
            hits.push(Hit {
                entry,
                score: fused / whole + f32::from(u8::from(named)),
                named,
                lexical,
                semantic,
                matched: scored.matched,
            });
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
        hits
    }
}

/// Each tool's place by `scores` (1 for the highest; ties by the tools' order), `None` for a
/// score of 0 or less: no evidence.
fn places(scores: impl Iterator<Item = f32>) -> Vec<Option<Placed>> {
    let scores: Vec<f32> = scores.collect();
    let mut order: Vec<usize> = (0..scores.len()).filter(|at| scores[*at] > 0.0).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
    let mut places = vec![None; scores.len()];
    for (place, at) in order.into_iter().enumerate() {
        places[at] = Some(Placed {
            place: place + 1,
            score: scores[at],
        });
    }
    places
}

/// Two vectors' cosine similarity, both being of length 1 (or 0).
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// What a tool's vector is made from: its server's and its own name's words, its title, and
/// the first sentence of its description. (The whole description and the parameters' names
/// were measured too: over the benchmark they find the right tool less often, since a long
/// description's mean drifts towards every other long one.)
fn document(entry: &ToolEntry) -> String {
    let tool = &entry.tool;
    let words = |name: &str| name.replace(['_', '-'], " ");
    let mut text = format!("{} {}", words(&entry.server), words(&tool.name));
    for part in [tool.title.clone(), Some(first_sentence(entry))] {
        text.push_str(". ");
        text.push_str(&part.unwrap_or_default());
    }
    text
}

/// The first sentence of a tool's description (or its title): to its first line's first `. `.
fn first_sentence(entry: &ToolEntry) -> String {
    let text = (entry.tool.description.as_deref())
        .or(entry.tool.title.as_deref())
        .unwrap_or_default();
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let line = line.unwrap_or_default();
    line.find(". ").map_or(line, |end| &line[..=end]).to_owned()
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

/// The first sentence of a tool's description (or its title), at most 200 characters, for a
/// result list: short, since each result costs the model's context.
pub fn summary(entry: &ToolEntry) -> String {
    let line = first_sentence(entry);
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", line[..cut].trim_end()),
        None => line.to_owned(),
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

    /// An index of three tools and a model of a few words in three directions: deleting,
    /// reading, and things.
    fn with_meaning() -> Index {
        let dir = semantic::tests::scratch("fusion");
        let pieces = [
            "[UNK]",
            "forget",
            "person",
            "delete",
            "entities",
            "read",
            "file",
            "contents",
            "show",
            "graph",
            "from",
            "the",
            "knowledge",
            "multiple",
            "a",
        ];
        let direction = |piece: &str| match piece {
            "forget" | "delete" => [1.0, 0.0, 0.0],
            "read" | "show" | "contents" => [0.0, 1.0, 0.0],
            _ => [0.0, 0.0, 1.0],
        };
        semantic::tests::write_model(&dir, &pieces, |id| direction(pieces[id]).to_vec());
        let model = Model::load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        Index::with_model(
            vec![
                entry(
                    "fs",
                    json!({"name": "read_file", "description": "Read a file."}),
                ),
                entry(
                    "memory",
                    json!({"name": "delete_entities",
                           "description": "Delete multiple entities from the knowledge graph"}),
                ),
                entry(
                    "fs",
                    json!({"name": "show_contents", "description": "Show contents."}),
                ),
            ],
            Some(Arc::new(model)),
        )
    }

    #[test]
    fn meaning_finds_a_tool_that_shares_no_word_with_the_query() {
        let index = with_meaning();
        assert!(index.is_semantic());
        let hits = index.search("forget", 3);
        assert_eq!(hits[0].entry.name, "memory__delete_entities");
        assert_eq!(hits[0].lexical, None);
        assert_eq!(hits[0].semantic.map(|p| p.place), Some(1));
        assert!(
            hits[0].explain().contains("meaning: #1"),
            "{}",
            hits[0].explain()
        );
        // Words the lexical ranking finds still count: both rankings put `read_file` first.
        let hits = index.search("read a file", 3);
        assert_eq!(hits[0].entry.name, "fs__read_file");
        assert_eq!(hits[0].score, 1.0);
        assert_eq!(hits[0].matched, ["read", "file"]);
        let json = hits[0].to_json_scored();
        assert_eq!(json["lexical"]["place"], 1);
        assert_eq!(json["semantic"]["place"], 1);
        assert_eq!(json["named"], false);
        // Fused, a tool both rankings like beats one only one ranking likes.
        assert!(hits[0].score > hits[1].score);
        // Without the model, nothing holds the word.
        let words_only = Index::new(index.tools().to_vec());
        assert!(words_only.search("forget", 3).is_empty());
    }

    #[test]
    fn a_named_tool_comes_first_whatever_the_meaning() {
        let index = with_meaning();
        let hits = index.search("fs__show_contents", 3);
        assert_eq!(hits[0].entry.name, "fs__show_contents");
        assert!(hits[0].named && hits[0].score > 1.0);
        assert!(hits[0].explain().starts_with("the query names it"));
        assert!(index.search("  ", 3).is_empty());
    }

    #[test]
    fn the_last_index_is_given_again_for_the_same_tools_and_model() {
        let last = Last(Mutex::new(None));
        let tools = sample().tools().to_vec();
        let first = last.index(tools.clone(), None);
        assert!(Arc::ptr_eq(&first, &last.index(tools.clone(), None)));
        let mut fewer = tools.clone();
        fewer.pop();
        let other = last.index(fewer, None);
        assert!(!Arc::ptr_eq(&first, &other) && other.tools().len() == tools.len() - 1);
        let model = with_meaning().model().cloned();
        let with_model = last.index(tools.clone(), model.clone());
        assert!(with_model.is_semantic() && !Arc::ptr_eq(&other, &with_model));
        assert!(Arc::ptr_eq(&with_model, &last.index(tools, model)));
    }
}
