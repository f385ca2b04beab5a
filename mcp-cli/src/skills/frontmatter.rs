//! A `SKILL.md`'s frontmatter: the YAML between its opening `---` line and the next, read as
//! JSON (YAML 1.2's core schema types plain scalars: `true`, `3`, `1.5`, `null`), and compared
//! field by field with the frontmatter a server's entry gives for it.

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::Parser;
use yaml_rust2::{Event, Yaml, YamlLoader};

/// How deep the frontmatter may nest: real ones hold a `metadata` object one level down.
const MAX_DEPTH: usize = 32;

/// The frontmatter of `markdown` as a JSON object, or why there is none.
pub(crate) fn read(markdown: &str) -> Result<Map<String, Value>, String> {
    let yaml = split(markdown).ok_or("it does not begin with a `---` frontmatter block")?;
    // An alias repeats what its anchor holds, and aliases of aliases grow without bound (a
    // few lines can stand for gigabytes): no skill needs one, so none is read.
    let mut events = Parser::new_from_str(&yaml);
    loop {
        match events.next_token() {
            Ok((Event::StreamEnd, _)) => break,
            Ok((Event::Alias(_), _)) => return Err("its frontmatter uses a YAML alias".to_owned()),
            Ok(_) => {}
            Err(error) => return Err(format!("its frontmatter is not YAML: {error}")),
        }
    }
    let documents = YamlLoader::load_from_str(&yaml)
        .map_err(|error| format!("its frontmatter is not YAML: {error}"))?;
    match documents.into_iter().next().map(|doc| to_json(doc, 0)) {
        Some(Ok(Value::Object(frontmatter))) => Ok(frontmatter),
        Some(Err(error)) => Err(format!("its frontmatter {error}")),
        _ => Err("its frontmatter is not a mapping".to_owned()),
    }
}

/// The lines between the first line, `---` (after a byte-order mark), and the next `---`
/// line; line ends may be CRLF.
fn split(markdown: &str) -> Option<String> {
    let markdown = markdown.strip_prefix('\u{feff}').unwrap_or(markdown);
    let mut lines = markdown.split('\n').map(|line| line.trim_end_matches('\r'));
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut yaml = String::new();
    for line in lines {
        if line.trim_end() == "---" {
            return Some(yaml);
        }
        yaml.push_str(line);
        yaml.push('\n');
    }
    None
}

fn to_json(yaml: Yaml, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nests deeper than {MAX_DEPTH} levels"));
    }
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Boolean(flag) => Value::Bool(flag),
        Yaml::Integer(number) => Value::Number(number.into()),
        Yaml::String(text) => Value::String(text),
        Yaml::Real(text) => match text.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(number) => Value::Number(number),
            None => return Err(format!("holds {text}, a number JSON cannot carry")),
        },
        Yaml::Array(items) => Value::Array(
            (items.into_iter())
                .map(|item| to_json(item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(entries) => {
            let mut object = Map::new();
            for (key, value) in entries {
                let key = match key {
                    Yaml::String(key) => key,
                    Yaml::Integer(key) => key.to_string(),
                    Yaml::Boolean(key) => key.to_string(),
                    other => return Err(format!("has a key that is not text: {other:?}")),
                };
                object.insert(key, to_json(value, depth + 1)?);
            }
            Value::Object(object)
        }
        Yaml::Alias(_) | Yaml::BadValue => return Err("holds a value it cannot type".to_owned()),
    })
}

/// Each field in which `file` and `entry` differ, as `name: file "a", entry "b"`; empty when
/// they are the same. Numbers are compared by value (`1` is `1.0`), as JSON means them.
pub(crate) fn differences(file: &Map<String, Value>, entry: &Map<String, Value>) -> Vec<String> {
    let fields = file
        .keys()
        .chain(entry.keys().filter(|key| !file.contains_key(*key)));
    let shown = |value: Option<&Value>| value.map_or("nothing".to_owned(), Value::to_string);
    (fields.filter(|field| !same(file.get(*field), entry.get(*field))))
        .map(|field| {
            let (in_file, in_entry) = (shown(file.get(field)), shown(entry.get(field)));
            format!("{field}: file {in_file}, entry {in_entry}")
        })
        .collect()
}

fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(a)), Some(Value::Number(b))) => a.as_f64() == b.as_f64(),
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(Some(a), Some(b)))
        }
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            a.len() == b.len() && a.iter().all(|(key, a)| same(Some(a), b.get(key)))
        }
        // A field that is null is one left out.
        (None | Some(Value::Null), None | Some(Value::Null)) => true,
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_frontmatter_reads_as_json_with_yaml_typing() {
        let markdown = "\u{feff}---\r\nname: pdf-processing\r\ndescription: \"Extract: PDFs\"\r\n\
            version: 2\r\nratio: 1.5\r\nbeta: true\r\nnothing: ~\r\nquoted: '3'\r\n\
            metadata:\r\n  tags: [a, b]\r\n  long: >\r\n    folded\r\n    text\r\n---\r\n# Body\r\n";
        assert_eq!(
            Value::Object(read(markdown).unwrap()),
            json!({
                "name": "pdf-processing",
                "description": "Extract: PDFs",
                "version": 2,
                "ratio": 1.5,
                "beta": true,
                "nothing": null,
                "quoted": "3",
                "metadata": {"tags": ["a", "b"], "long": "folded text\n"},
            })
        );
    }

    #[test]
    fn what_is_no_frontmatter_says_why() {
        let cases = [
            ("# no frontmatter\n", "does not begin"),
            ("---\nname: x\n", "does not begin"),
            ("---\n- a\n- b\n---\n", "not a mapping"),
            ("---\nname: [unclosed\n---\n", "not YAML"),
            ("---\na: &x [1, 2]\nb: *x\n---\n", "alias"),
            ("---\n? [a]\n: b\n---\n", "not text"),
            ("---\nname: a\nname: b\n---\n", "not YAML"),
        ];
        for (markdown, why) in cases {
            let error = read(markdown).unwrap_err();
            assert!(error.contains(why), "{markdown:?}: {error}");
        }
        let deep = format!("---\na: {}{}\n---\n", "[".repeat(40), "]".repeat(40));
        assert!(read(&deep).unwrap_err().contains("deeper"));
    }

    #[test]
    fn differences_name_each_field_that_differs() {
        let file = object(json!({"name": "a", "description": "Exfiltrate", "n": 1, "x": null}));
        let entry = object(json!({"name": "a", "description": "Extract", "n": 1.0, "extra": [1]}));
        assert_eq!(
            differences(&file, &entry),
            [
                "description: file \"Exfiltrate\", entry \"Extract\"",
                "extra: file nothing, entry [1]",
            ]
        );
        assert!(differences(&file, &file).is_empty());
    }
}
