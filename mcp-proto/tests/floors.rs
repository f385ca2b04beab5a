//! The crate's floors, checked from its own source: every file under `src/wire/`,
//! `src/model/` and `src/machines/` names only files of its floor or of the floors below it
//! (`lib.rs` stands on top of all three), and the files of one floor name each other in no
//! circle. See "The core's floors" in ARCHITECTURE.md.
//!
//! What counts as naming a file: a `use` of a path, or a path in code, that starts with
//! `crate::`, `super::`, `self::` or a child module, resolved to the file of the longest
//! module it names. An item named through the crate root (`crate::Connection`) is named in
//! `lib.rs`, the top floor. Comments, string literals and items under `#[cfg(test)]` or
//! `#[cfg(doc)]` (with the files of such modules) are left out: tests may look anywhere, and
//! a doc link is no dependency.
//!
//! `cargo test -p mcp-proto --test floors -- --nocapture` prints the graph's figures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The floors from the bottom; a file's floor is the folder it sits in under `src/`.
const FLOORS: [&str; 3] = ["wire", "model", "machines"];

/// A module by its path from the crate root (`["machines", "connection", "wire"]`); the
/// root itself is empty.
type Module = Vec<String>;

#[test]
fn each_floor_imports_only_the_floors_below_it_and_no_file_of_a_floor_is_in_a_circle() {
    let graph = Graph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let mut faults = Vec::new();
    let outside: Vec<_> = (graph.files.keys())
        .filter(|module| floor(module).is_none())
        .map(name)
        .collect();
    if !outside.is_empty() {
        faults.push(format!("files on no floor: {}", outside.join(", ")));
    }
    let upward = graph.upward();
    for (from, to) in &upward {
        faults.push(format!(
            "{} imports {}, a floor above it",
            name(from),
            name(to)
        ));
    }
    let circles = graph.circles();
    for circle in &circles {
        let files: Vec<_> = circle.iter().map(name).collect();
        faults.push(format!("files in a circle: {}", files.join(", ")));
    }
    println!(
        "{} files, {} imports between files, {} up a floor, {} circles",
        graph.files.len(),
        graph.imports.values().map(BTreeSet::len).sum::<usize>(),
        upward.len(),
        circles.len()
    );
    for (index, floor_name) in FLOORS.iter().enumerate() {
        let files = (graph.files.keys()).filter(|module| floor(module) == Some(index));
        println!("{floor_name}: {} files", files.count());
    }
    assert!(faults.is_empty(), "\n{}", faults.join("\n"));
}

/// The reading itself: what counts as a path, and what is left out.
#[test]
fn paths_are_read_from_use_items_and_code_and_never_from_comments_literals_or_tests() {
    let source = r##"
//! A doc naming crate::model::in_a_doc.
use crate::wire::{framing::{self, Line}, jsonrpc as rpc};
use super::sibling::Item;
use serde_json::Value;
mod child;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod inline {
    use crate::model::in_a_test;
}
fn f<'de>(c: char) -> &'de str {
    let _ = ('x', '\'', "crate::model::in_a_string", r#"crate::model::in_a_raw_string"#);
    child::thing();
    crate::machines::connection::Connection::new();
    "/* crate::model::in_a_string_too */"
}
/* crate::model::in_a_comment */
"##;
    let (code, test_children) = without_test_items(&code_only(source));
    assert_eq!(test_children, ["tests"]);
    let paths: BTreeSet<String> = (paths_named(&code, &children(&code)).iter())
        .map(|path| path.join("::"))
        .collect();
    let expected = [
        "crate::wire::framing",
        "crate::wire::framing::Line",
        "crate::wire::jsonrpc",
        "super::sibling::Item",
        "child::thing",
        "crate::machines::connection::Connection::new",
    ];
    assert_eq!(paths, expected.map(str::to_owned).into());
    let modules: BTreeSet<Module> = [
        vec![],
        vec!["wire".into()],
        vec!["wire".into(), "framing".into()],
    ]
    .into();
    let here: Module = vec!["wire".into(), "sse".into()];
    let resolved = |path: &str| {
        resolve(
            &here,
            &path.split("::").map(str::to_owned).collect::<Vec<_>>(),
            &modules,
        )
    };
    assert_eq!(resolved("crate::wire::framing::Line"), ["wire", "framing"]);
    assert_eq!(resolved("super::framing"), ["wire", "framing"]);
    assert_eq!(resolved("crate::Connection"), Module::new());
}

/// A floor's index in [`FLOORS`]; `lib.rs` is above them all. `None` for a file elsewhere.
fn floor(module: &Module) -> Option<usize> {
    match module.first() {
        None => Some(FLOORS.len()),
        Some(folder) => FLOORS.iter().position(|floor| folder == floor),
    }
}

/// A module as its file is named: `machines/connection/wire.rs`, `lib.rs`.
fn name(module: &Module) -> String {
    match module.is_empty() {
        true => "lib.rs".to_owned(),
        false => format!("{}.rs", module.join("/")),
    }
}

/// Which files name which, by module.
struct Graph {
    /// Every file compiled outside tests, with its code (comments and literals left out).
    files: BTreeMap<Module, String>,
    /// The files each file names, itself left out.
    imports: BTreeMap<Module, BTreeSet<Module>>,
}

impl Graph {
    fn read(src: &Path) -> Self {
        let mut code = BTreeMap::new();
        let mut left_out = BTreeSet::new();
        for path in rust_files(src) {
            let module = module_of(
                &path
                    .strip_prefix(src)
                    .expect("under src")
                    .with_extension(""),
            );
            let text = std::fs::read_to_string(&path).expect("a source file reads");
            let (kept, test_children) = without_test_items(&code_only(&text));
            for child in test_children {
                left_out.insert([module.clone(), vec![child]].concat());
            }
            code.insert(module, kept);
        }
        code.retain(|module: &Module, _| {
            !(left_out.iter()).any(|out: &Module| module.starts_with(out))
        });
        let modules: BTreeSet<Module> = code.keys().cloned().collect();
        let imports = (code.iter())
            .map(|(module, text)| {
                let named = (paths_named(text, &children(text)).iter())
                    .map(|path| resolve(module, path, &modules))
                    .filter(|target| target != module)
                    .collect();
                (module.clone(), named)
            })
            .collect();
        Self {
            files: code,
            imports,
        }
    }

    /// Every import of a file from a floor above its own.
    fn upward(&self) -> Vec<(Module, Module)> {
        let mut upward = Vec::new();
        for (from, targets) in &self.imports {
            for to in targets {
                if floor(to) > floor(from) {
                    upward.push((from.clone(), to.clone()));
                }
            }
        }
        upward
    }

    /// The sets of files of one floor that name each other round in a circle (strongly
    /// connected components of more than one file, by Tarjan's algorithm).
    fn circles(&self) -> Vec<Vec<Module>> {
        let mut search = Tarjan {
            imports: (self.imports.iter())
                .map(|(from, targets)| {
                    let same_floor = targets.iter().filter(|to| floor(to) == floor(from));
                    (from.clone(), same_floor.cloned().collect())
                })
                .collect(),
            ..Tarjan::default()
        };
        for module in self.files.keys() {
            if !search.index.contains_key(module) {
                search.visit(module);
            }
        }
        search.components.retain(|component| component.len() > 1);
        search.components
    }
}

#[derive(Default)]
struct Tarjan {
    imports: BTreeMap<Module, Vec<Module>>,
    index: BTreeMap<Module, usize>,
    low: BTreeMap<Module, usize>,
    stack: Vec<Module>,
    components: Vec<Vec<Module>>,
}

impl Tarjan {
    fn visit(&mut self, module: &Module) {
        let index = self.index.len();
        self.index.insert(module.clone(), index);
        self.low.insert(module.clone(), index);
        self.stack.push(module.clone());
        for target in self.imports.get(module).cloned().unwrap_or_default() {
            let reached = match self.index.get(&target) {
                None => {
                    self.visit(&target);
                    self.low[&target]
                }
                Some(&target_index) if self.stack.contains(&target) => target_index,
                Some(_) => continue,
            };
            let low = self.low[module].min(reached);
            self.low.insert(module.clone(), low);
        }
        if self.low[module] == index {
            let at = self
                .stack
                .iter()
                .position(|m| m == module)
                .expect("on the stack");
            let mut component = self.stack.split_off(at);
            component.sort();
            self.components.push(component);
        }
    }
}

fn rust_files(folder: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).expect("a source folder reads") {
        let path = entry.expect("a source folder reads").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// `machines/connection/wire` is `["machines", "connection", "wire"]`; `wire/mod` is
/// `["wire"]`; `lib` is the root.
fn module_of(relative: &Path) -> Module {
    let mut module: Module = (relative.iter())
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if module
        .last()
        .is_some_and(|last| last == "mod" || last == "lib")
    {
        module.pop();
    }
    module
}

/// The code of a file with its comments gone and every string and character literal
/// emptied, so that nothing in them reads as a path.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut at = 0;
    let starts = |at: usize, with: &str| {
        with.chars()
            .enumerate()
            .all(|(n, c)| chars.get(at + n) == Some(&c))
    };
    while at < chars.len() {
        let c = chars[at];
        if starts(at, "//") {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if starts(at, "/*") {
            let mut depth = 0;
            loop {
                if starts(at, "/*") {
                    depth += 1;
                    at += 2;
                } else if starts(at, "*/") {
                    depth -= 1;
                    at += 2;
                    if depth == 0 {
                        break;
                    }
                } else if at >= chars.len() {
                    break;
                } else {
                    at += 1;
                }
            }
            code.push(' ');
        } else if c == '"' {
            at += 1;
            while at < chars.len() && chars[at] != '"' {
                at += if chars[at] == '\\' { 2 } else { 1 };
            }
            at += 1;
            code.push_str("\"\"");
        } else if c == '\''
            && (chars.get(at + 1) == Some(&'\\') || chars.get(at + 2) == Some(&'\''))
        {
            // A character literal; a lifetime (`'de`) has no closing quote after one character.
            at += 2;
            while at < chars.len() && chars[at] != '\'' {
                at += 1;
            }
            at += 1;
            code.push_str("' '");
        } else if c.is_alphanumeric() || c == '_' {
            let start = at;
            while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            let word: String = chars[start..at].iter().collect();
            let hashes = chars[at..].iter().take_while(|&&c| c == '#').count();
            let raw = (word == "r" || word == "br") && chars.get(at + hashes) == Some(&'"');
            if raw {
                // A raw string: it ends at a quote followed by as many hashes.
                at += hashes + 1;
                let end: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                while at < chars.len() && !starts(at, &end) {
                    at += 1;
                }
                at += end.chars().count();
                code.push_str("\"\"");
            } else {
                code.push_str(&word);
            }
        } else {
            code.push(c);
            at += 1;
        }
    }
    code
}

/// The code without the items under `#[cfg(test)]` or `#[cfg(doc)]`, and the names of
/// the child modules so left out (whose files are then left out too).
fn without_test_items(code: &str) -> (String, Vec<String>) {
    let mut kept = code.to_owned();
    let mut children = Vec::new();
    while let Some(start) = ["#[cfg(test)]", "#[cfg(doc)]"]
        .iter()
        .filter_map(|attribute| kept.find(attribute))
        .min()
    {
        let item_start = start + kept[start..].find(']').expect("the attribute ends") + 1;
        let item = &kept[item_start..];
        let words: Vec<&str> = item
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .take(4)
            .collect();
        let mut depth = 0usize;
        let mut end = item.len();
        for (at, c) in item.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' => depth = depth.saturating_sub(1),
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = at + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = at + 1;
                    break;
                }
                _ => {}
            }
        }
        if item[..end].trim_end().ends_with(';')
            && let Some(at) = words.iter().position(|w| *w == "mod")
        {
            children.push(words[at + 1].to_owned());
        }
        kept.replace_range(start..item_start + end, " ");
    }
    (kept, children)
}

/// The child modules a file declares (`mod wire;`).
fn children(code: &str) -> BTreeSet<String> {
    let words = words(code);
    (words.windows(3))
        .filter(|w| w[0] == "mod" && w[2] == ";")
        .map(|w| w[1].clone())
        .collect()
}

/// The code as words: identifiers, `::`, and each other character but spaces.
fn words(code: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = c.to_string();
            while let Some(&next) = chars.peek().filter(|c| c.is_alphanumeric() || **c == '_') {
                word.push(next);
                chars.next();
            }
            words.push(word);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            words.push("::".to_owned());
        } else if !c.is_whitespace() {
            words.push(c.to_string());
        }
    }
    words
}

/// Every path the code names that may lead to another file of the crate: those of its
/// `use` items, spelled out (`use a::{b, c::d}` names `a::b` and `a::c::d`), and in the rest
/// of the code each `a::b::c` that starts with `crate`, `super`, `self` or a child module.
fn paths_named(code: &str, children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let words = words(code);
    let is_name = |word: &str| {
        word.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    };
    let leads = |word: &str| matches!(word, "crate" | "super" | "self") || children.contains(word);
    let mut paths = Vec::new();
    let mut at = 0;
    while at < words.len() {
        if words[at] == "use" {
            let end = (at..words.len())
                .find(|&n| words[n] == ";")
                .unwrap_or(words.len());
            let mut tree = UseTree {
                words: &words[at + 1..end],
                at: 0,
            };
            for path in tree.paths(&[]) {
                if path.first().is_some_and(|first| leads(first)) {
                    paths.push(path);
                }
            }
            at = end;
        } else if leads(&words[at])
            && words.get(at + 1).is_some_and(|w| w == "::")
            && (at == 0 || words[at - 1] != "::")
        {
            let mut path = vec![words[at].clone()];
            while words.get(at + 1).is_some_and(|w| w == "::")
                && words.get(at + 2).is_some_and(|w| is_name(w))
            {
                path.push(words[at + 2].clone());
                at += 2;
            }
            paths.push(path);
        }
        at += 1;
    }
    paths
}

/// A `use` item's tree, read word by word.
struct UseTree<'a> {
    words: &'a [String],
    at: usize,
}

impl UseTree<'_> {
    /// The paths of the tree at this point, each after `prefix`.
    fn paths(&mut self, prefix: &[String]) -> Vec<Vec<String>> {
        let mut path = prefix.to_vec();
        loop {
            match self.words.get(self.at).map(String::as_str) {
                Some("{") => {
                    self.at += 1;
                    let mut paths = Vec::new();
                    while !matches!(
                        self.words.get(self.at).map(String::as_str),
                        Some("}") | None
                    ) {
                        paths.extend(self.paths(&path));
                        if self.words.get(self.at).is_some_and(|w| w == ",") {
                            self.at += 1;
                        }
                    }
                    self.at += 1;
                    return paths;
                }
                Some("::") | Some("*") => self.at += 1,
                Some("as") => self.at += 2,
                Some("," | "}") | None => return vec![path],
                // `use a::{self, b}` names `a` itself.
                Some("self") if !path.is_empty() => self.at += 1,
                Some(word) => {
                    path.push(word.to_owned());
                    self.at += 1;
                }
            }
        }
    }
}

/// The file a path leads to: the longest module it names, from the root (`crate`), from a
/// parent (`super`), from the file's own module (`self`) or from a child.
fn resolve(here: &Module, path: &[String], modules: &BTreeSet<Module>) -> Module {
    let mut full = match path[0].as_str() {
        "crate" => Vec::new(),
        "super" | "self" => here.clone(),
        _ => [here.clone(), vec![path[0].clone()]].concat(),
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        full.pop();
        while rest.first().is_some_and(|word| word == "super") {
            full.pop();
            rest = &rest[1..];
        }
    }
    full.extend(rest.iter().cloned());
    (0..=full.len())
        .rev()
        .map(|len| full[..len].to_vec())
        .find(|module| modules.contains(module))
        .unwrap_or_default()
}
