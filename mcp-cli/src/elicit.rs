//! Servers' forms (`elicitation/create`) on the command line: each field of the requested
//! schema asked on the terminal in name order (so that answers typed ahead, or by a script,
//! meet the same questions whatever order the server wrote the fields in), its default shown
//! and its answer checked. Without a terminal
//! a form is declined at once, unless `--yes` lets its defaults answer it.

use std::io::{BufRead, IsTerminal, Write};

use serde_json::{Map, Number, Value};

use crate::hub::{ElicitAnswer, ElicitHandler, Elicitation};
use crate::spinner;

/// Asks on the terminal. Without one, `yes` (`--yes`) accepts a form every required field
/// of which has a default, with every default filled in; otherwise it is declined.
pub(crate) fn handler(yes: bool) -> ElicitHandler {
    ElicitHandler::new(move |elicitation: Elicitation| {
        async move {
            let terminal = has_terminal();
            if let Some(link) = elicitation.url.clone() {
                // A link is opened only when a person said yes to it, never unattended.
                if !terminal {
                    return ElicitAnswer::Decline;
                }
                let answer = blocking::unblock(move || {
                    let _paused = spinner::pause();
                    let mut input = std::io::stdin().lock();
                    url_form(&elicitation, &mut input, &mut std::io::stderr())
                })
                .await;
                if answer == ElicitAnswer::Accept(Map::new()) {
                    let browser = std::env::var("BROWSER").ok();
                    if !crate::auth::browser::open(link.url.clone(), browser).await {
                        crate::output::diagnostic(&format!("mcp-cli: open {} yourself", link.url));
                    }
                }
                return answer;
            }
            if !terminal {
                return match yes {
                    true => defaults(&elicitation.schema),
                    false => ElicitAnswer::Decline,
                };
            }
            // Off the executor's thread, so that Ctrl-C is still noticed while we wait.
            blocking::unblock(move || {
                let _paused = spinner::pause();
                let mut input = std::io::stdin().lock();
                form(&elicitation, &mut input, &mut std::io::stderr())
            })
            .await
        }
    })
    .taking_urls()
}

/// Whether a person can be asked here: a terminal to read from and one to ask on.
pub(crate) fn has_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// A URL-mode elicitation: the link shown with its host, opened only after a yes (accept);
/// `n` declines, end of input cancels. A link that is not `https` or `http` is declined
/// unasked: nothing else is handed to the browser.
pub(crate) fn url_form(
    elicitation: &Elicitation,
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> ElicitAnswer {
    let link = elicitation.url.as_ref().map_or("", |url| url.url.as_str());
    let parsed = url::Url::parse(link).ok();
    let web = parsed
        .as_ref()
        .filter(|url| matches!(url.scheme(), "https" | "http"));
    let mut say = |text: &str| {
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    };
    let Some(host) = web.and_then(|url| url.host_str()) else {
        say(&format!(
            "mcp-cli: server {} asked to open {link:?}, which is not a web link: declined\n",
            elicitation.server
        ));
        return ElicitAnswer::Decline;
    };
    say(&format!(
        "mcp-cli: server {} asks you to open a link: {}\n  {link}\n  (on {host})\nOpen it in the browser? [y/N] ",
        elicitation.server, elicitation.message
    ));
    match read_line(input).map(|answer| answer.to_lowercase()) {
        None => ElicitAnswer::Cancel,
        Some(answer) if matches!(answer.as_str(), "y" | "yes") => ElicitAnswer::Accept(Map::new()),
        Some(_) => ElicitAnswer::Decline,
    }
}

/// Asks for each field in turn. End of input cancels; answering `n` to the first question
/// declines.
pub(crate) fn form(
    elicitation: &Elicitation,
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> ElicitAnswer {
    let mut say = |text: &str| {
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    };
    say(&format!(
        "mcp-cli: server {} asks: {}\nFill in the form? [Y/n] ",
        elicitation.server, elicitation.message
    ));
    let Some(answer) = read_line(input) else {
        return ElicitAnswer::Cancel;
    };
    if matches!(answer.to_lowercase().as_str(), "n" | "no") {
        return ElicitAnswer::Decline;
    }
    let schema = &elicitation.schema;
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let empty = Map::new();
    let fields = (schema.get("properties").and_then(Value::as_object)).unwrap_or(&empty);
    let mut fields: Vec<(&String, &Value)> = fields.iter().collect();
    fields.sort_unstable_by_key(|(key, _)| key.as_str());
    let mut content = Map::new();
    for (key, field) in fields {
        let is_required = required.contains(&key.as_str());
        say(&question(key, field, is_required));
        loop {
            let Some(line) = read_line(input) else {
                return ElicitAnswer::Cancel;
            };
            let value = if line.is_empty() {
                match field.get("default") {
                    Some(default) => Ok(Some(default.clone())),
                    None if is_required => Err("an answer is required".to_owned()),
                    None => Ok(None),
                }
            } else {
                parse(field, &line).map(Some)
            };
            match value {
                Ok(value) => {
                    if let Some(value) = value {
                        content.insert(key.clone(), value);
                    }
                    break;
                }
                Err(why) => say(&format!("  {why}; again: ")),
            }
        }
    }
    ElicitAnswer::Accept(content)
}

/// A form filled in from `KEY=VALUE` pairs (`mcp-cli answer`), each read as its field's type
/// is read on the terminal; a field left out takes its default, if it has one. A key the form
/// does not have, a value its field does not take, or a required field left with no value is
/// refused, naming it.
pub(crate) fn filled(schema: &Value, pairs: &[String]) -> Result<Map<String, Value>, String> {
    let empty = Map::new();
    let fields = (schema.get("properties").and_then(Value::as_object)).unwrap_or(&empty);
    let mut content = Map::new();
    for pair in pairs {
        let Some((key, text)) = pair.split_once('=') else {
            return Err(format!("{pair:?} is not KEY=VALUE"));
        };
        let Some(field) = fields.get(key) else {
            let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
            names.sort_unstable();
            return Err(match names.is_empty() {
                true => format!("the form has no field {key:?}: it has none"),
                false => format!(
                    "the form has no field {key:?}; its fields: {}",
                    names.join(", ")
                ),
            });
        };
        let value = parse(field, text).map_err(|why| format!("{key}: {why}"))?;
        content.insert(key.to_owned(), value);
    }
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (key, field) in fields {
        if content.contains_key(key) {
            continue;
        }
        match field.get("default") {
            Some(default) => {
                content.insert(key.clone(), default.clone());
            }
            None if required.contains(&key.as_str()) => {
                return Err(format!("{key} is required: give {key}=VALUE"));
            }
            None => {}
        }
    }
    Ok(content)
}

/// The answer of someone who presses Enter at every question: each default taken; declined
/// when a required field has none.
fn defaults(schema: &Value) -> ElicitAnswer {
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let empty = Map::new();
    let fields = (schema.get("properties").and_then(Value::as_object)).unwrap_or(&empty);
    let mut content = Map::new();
    for (key, field) in fields {
        match field.get("default") {
            Some(default) => {
                content.insert(key.clone(), default.clone());
            }
            None if required.contains(&key.as_str()) => return ElicitAnswer::Decline,
            None => {}
        }
    }
    ElicitAnswer::Accept(content)
}

fn read_line(input: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

/// `  Title (type, required) [default]: description\n  > `
fn question(key: &str, field: &Value, required: bool) -> String {
    format!("  {}\n  > ", field_line(key, field, required))
}

/// `Title (type, required) [default]: description`, a field of a form as a person reads it.
pub(crate) fn field_line(key: &str, field: &Value, required: bool) -> String {
    let text = |name: &str| field.get(name).and_then(Value::as_str);
    let mut line = text("title").unwrap_or(key).to_owned();
    let mut notes = vec![kind(field)];
    if let Some(choices) = choices(field) {
        notes = vec![format!("one of {}", choices.join(", "))];
    }
    if field.get("type").and_then(Value::as_str) == Some("array") {
        notes.push("comma-separated".to_owned());
    }
    if required {
        notes.push("required".to_owned());
    }
    line.push_str(&format!(" ({})", notes.join(", ")));
    if let Some(default) = field.get("default") {
        let shown = match default {
            Value::String(text) => text.clone(),
            Value::Array(items) => (items.iter())
                .map(|item| {
                    item.as_str()
                        .map_or_else(|| item.to_string(), str::to_owned)
                })
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        };
        line.push_str(&format!(" [{shown}]"));
    }
    if let Some(description) = text("description") {
        line.push_str(&format!(": {description}"));
    }
    line
}

fn kind(field: &Value) -> String {
    let kind = field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    match field.get("format").and_then(Value::as_str) {
        Some(format) => format!("{kind}, {format}"),
        None => kind.to_owned(),
    }
}

/// The values a field (or an array field's items) may take, if it is an enum.
fn choices(field: &Value) -> Option<Vec<String>> {
    let field = match field.get("type").and_then(Value::as_str) {
        Some("array") => field.get("items")?,
        _ => field,
    };
    if let Some(values) = field.get("enum").and_then(Value::as_array) {
        return Some(
            values
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        );
    }
    let options = (field.get("oneOf").or_else(|| field.get("anyOf")))?.as_array()?;
    let consts = options
        .iter()
        .filter_map(|option| option.get("const")?.as_str());
    Some(consts.map(str::to_owned).collect())
}

/// Reads one answer as the field's type: numbers and booleans strictly, enums only from their
/// choices, arrays as comma-separated items.
fn parse(field: &Value, text: &str) -> Result<Value, String> {
    let number = |key: &str| field.get(key).and_then(Value::as_f64);
    let in_range = |value: f64| {
        let low = number("minimum").is_none_or(|minimum| value >= minimum);
        let high = number("maximum").is_none_or(|maximum| value <= maximum);
        match (low && high, number("minimum"), number("maximum")) {
            (true, _, _) => Ok(()),
            (false, minimum, maximum) => Err(format!(
                "not between {} and {}",
                minimum.map_or("-∞".to_owned(), |n| n.to_string()),
                maximum.map_or("∞".to_owned(), |n| n.to_string())
            )),
        }
    };
    let choose = |text: &str| match choices(field) {
        Some(choices) if !choices.iter().any(|choice| choice == text) => {
            Err(format!("{text:?} is not one of {}", choices.join(", ")))
        }
        _ => Ok(Value::String(text.to_owned())),
    };
    match field.get("type").and_then(Value::as_str) {
        Some("boolean") => match text.to_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err(format!("{text:?} is not yes or no")),
        },
        Some("integer") => {
            let value: i64 = text
                .parse()
                .map_err(|_| format!("{text:?} is not an integer"))?;
            in_range(value as f64)?;
            Ok(Value::from(value))
        }
        Some("number") => {
            let value: f64 = text
                .parse()
                .map_err(|_| format!("{text:?} is not a number"))?;
            in_range(value)?;
            Number::from_f64(value)
                .map(Value::Number)
                .ok_or_else(|| format!("{text:?} is not a finite number"))
        }
        Some("array") => {
            let items = text
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty());
            Ok(Value::Array(items.map(choose).collect::<Result<_, _>>()?))
        }
        _ => choose(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(schema: Value, typed: &str) -> (ElicitAnswer, String) {
        let elicitation = Elicitation {
            server: "fx".into(),
            message: "Who are you?".into(),
            schema,
            url: None,
        };
        let mut out = Vec::new();
        let answer = form(&elicitation, &mut typed.as_bytes(), &mut out);
        (answer, String::from_utf8(out).unwrap())
    }

    #[test]
    fn fields_are_typed_checked_and_defaulted() {
        let schema = json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "title": "Name"},
            "age": {"type": "integer", "minimum": 1, "maximum": 150, "default": 30},
            "ok": {"type": "boolean"},
            "pet": {"type": "string", "enum": ["cat", "dog"], "default": "cat"},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "b"}]}},
            "note": {"type": "string"}
        }});
        // Fields come in name order: age, name, note, ok, pet, tags.
        let typed = "y\n200\n\n\nAda\n\nyes\nfish\ndog\na, b\n";
        let (answer, shown) = ask(schema, typed);
        let expected = json!({"age": 30, "name": "Ada", "ok": true, "pet": "dog",
                              "tags": ["a", "b"]});
        assert_eq!(
            answer,
            ElicitAnswer::Accept(expected.as_object().unwrap().clone())
        );
        assert!(shown.contains("mcp-cli: server fx asks: Who are you?"));
        assert!(shown.contains("  age (integer) [30]\n  > "), "{shown}");
        assert!(shown.contains("not between 1 and 150; again: "));
        assert!(shown.contains("Name (string, required)"));
        assert!(shown.contains("an answer is required; again: "));
        assert!(shown.contains("\"fish\" is not one of cat, dog"));
    }

    #[test]
    fn a_link_is_shown_with_its_host_and_opened_only_after_yes() {
        let asking = |link: &str| Elicitation {
            server: "fx".into(),
            message: "Connect your account".into(),
            schema: json!({}),
            url: Some(crate::hub::UrlElicitation {
                url: link.into(),
                id: "e-1".into(),
            }),
        };
        let link = asking("https://auth.example.com/connect?id=e-1");
        let ask = |typed: &str| {
            let mut out = Vec::new();
            let answer = url_form(&link, &mut typed.as_bytes(), &mut out);
            (answer, String::from_utf8(out).unwrap())
        };
        let (answer, shown) = ask("y\n");
        assert_eq!(answer, ElicitAnswer::Accept(Map::new()));
        assert!(shown.contains("(on auth.example.com)"), "{shown}");
        assert_eq!(ask("\n").0, ElicitAnswer::Decline);
        assert_eq!(ask("").0, ElicitAnswer::Cancel);
        let mut out = Vec::new();
        let odd = asking("file:///etc/passwd");
        let answer = url_form(&odd, &mut "y\n".as_bytes(), &mut out);
        assert_eq!(answer, ElicitAnswer::Decline);
    }

    #[test]
    fn no_declines_and_end_of_input_cancels() {
        let schema = json!({"properties": {"name": {"type": "string"}}});
        assert_eq!(ask(schema.clone(), "n\n").0, ElicitAnswer::Decline);
        assert_eq!(ask(schema.clone(), "").0, ElicitAnswer::Cancel);
        assert_eq!(ask(schema, "\n").0, ElicitAnswer::Cancel);
    }

    #[test]
    fn unattended_answers_take_every_default() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "note": {"type": "string"}}, "required": []});
        let ElicitAnswer::Accept(content) = defaults(&schema) else {
            panic!("declined")
        };
        assert_eq!(
            Value::Object(content),
            serde_json::json!({"name": "John Doe", "age": 30})
        );
        let required = serde_json::json!({"properties": {"note": {"type": "string"}},
            "required": ["note"]});
        assert_eq!(defaults(&required), ElicitAnswer::Decline);
    }

    #[test]
    fn pairs_fill_a_form_as_answers_typed_on_the_terminal_would() {
        let schema = json!({"type": "object", "required": ["name", "age"], "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 1, "default": 30},
            "ok": {"type": "boolean"}
        }});
        let fill = |pairs: &[&str]| {
            let pairs: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
            filled(&schema, &pairs)
        };
        assert_eq!(
            fill(&["name=Ada", "ok=yes"]),
            Ok(json!({"name": "Ada", "age": 30, "ok": true})
                .as_object()
                .unwrap()
                .clone())
        );
        assert_eq!(
            fill(&["age=0", "name=Ada"]),
            Err("age: not between 1 and ∞".into())
        );
        assert_eq!(
            fill(&["ok=maybe", "name=x"]),
            Err("ok: \"maybe\" is not yes or no".into())
        );
        assert_eq!(fill(&[]), Err("name is required: give name=VALUE".into()));
        assert_eq!(
            fill(&["nmae=Ada"]),
            Err("the form has no field \"nmae\"; its fields: age, name, ok".into())
        );
        assert_eq!(fill(&["name"]), Err("\"name\" is not KEY=VALUE".into()));
    }
}
