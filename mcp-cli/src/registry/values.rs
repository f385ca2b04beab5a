//! The values a registry entry needs (arguments, variables, URL variables, headers, a
//! bundle's settings), gathered by their names: `--set` ones first, then the person's answers,
//! then defaults; each checked (`checks.rs`), and a secret one kept aside, written into the
//! entry as `${secret:ENTRY/KEY}`.

use std::collections::BTreeMap;

use super::checks::{checked_value, no_expansion};
use super::model::{Argument, Input, Named};

/// One value the entry needs, as the person is asked for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Question {
    /// What `--set` calls it: the variable's, header's or URL variable's name, the flag
    /// (`--port`), or the positional argument's label.
    pub(crate) key: String,
    pub(crate) input: Input,
}

/// Asks the person for one value; `Ok(None)` when they gave none (an empty answer).
pub(crate) trait Ask {
    fn ask(&mut self, question: &Question) -> Result<Option<String>, String>;
}

/// Nobody to ask: only `--set` values and defaults fill the entry.
pub(crate) struct NoOne;

impl Ask for NoOne {
    fn ask(&mut self, _: &Question) -> Result<Option<String>, String> {
        Ok(None)
    }
}

/// The values being gathered: `--set` ones first, then the person's answers.
pub(super) struct Values<'a> {
    pub(super) entry: &'a str,
    pub(super) given: &'a BTreeMap<String, String>,
    pub(super) ask: &'a mut dyn Ask,
    pub(super) secrets: Vec<(String, String)>,
    /// The keys of required values nobody gave.
    pub(super) missing: Vec<String>,
    /// The `--set` keys some input took.
    pub(super) used: Vec<String>,
    pub(super) warnings: Vec<String>,
}

impl Values<'_> {
    /// The value of input `key`, as written into the entry: the publisher's fixed `value`
    /// (its `{variables}` filled), else what was given or answered, else the default. A
    /// secret one is kept and written as `${secret:ENTRY/KEY}`. `None`: left out.
    pub(super) fn value(
        &mut self,
        key: &str,
        input: &Input,
        what: &str,
    ) -> Result<Option<String>, String> {
        if let Some(fixed) = &input.value {
            no_expansion(key, fixed)?;
            let mut value = fixed.clone();
            for (variable, inner) in &input.variables {
                let filled = self.value(variable, inner, what)?.unwrap_or_default();
                value = value.replace(&format!("{{{variable}}}"), &filled);
            }
            return Ok(Some(value));
        }
        let question = Question {
            key: key.to_owned(),
            input: input.clone(),
        };
        let answer = match self.given.get(key) {
            Some(value) => {
                self.used.push(key.to_owned());
                Some(value.clone())
            }
            None => self.ask.ask(&question)?,
        };
        let answer = answer.filter(|answer| !answer.is_empty());
        let value = match (answer, &input.default) {
            (Some(answer), _) => answer,
            (None, Some(default)) => {
                no_expansion(key, default)?;
                default.clone()
            }
            (None, None) if input.is_required => {
                self.missing.push(key.to_owned());
                return Ok(None);
            }
            (None, None) => return Ok(None),
        };
        let value = checked_value(key, input, value, what)?;
        if input.is_secret {
            let name = format!("{}/{}", self.entry, secret_part(key));
            crate::secrets::check_name(&name)?;
            self.secrets.push((name.clone(), value));
            return Ok(Some(format!("${{secret:{name}}}")));
        }
        Ok(Some(value))
    }

    /// Each argument's words: a positional one's value, a named one's `--flag=value` (or
    /// the flag alone when it takes no value).
    pub(super) fn arguments(&mut self, arguments: &[Argument]) -> Result<Vec<String>, String> {
        let mut words = Vec::new();
        for argument in arguments {
            if argument.input.is_secret {
                let key = argument.name.as_deref().or(argument.value_hint.as_deref());
                self.warnings.push(format!(
                    "the secret {} is passed on the server's command line, which other users of \
                     this machine can read in the process list",
                    key.unwrap_or("argument")
                ));
            }
            match argument.kind.as_str() {
                "named" => {
                    let flag = argument
                        .name
                        .as_deref()
                        .ok_or("a named argument has no name")?;
                    let is_flag = flag.starts_with('-')
                        && flag.len() < 100
                        && flag
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
                    if !is_flag {
                        return Err(format!("{flag:?} is not a command-line flag"));
                    }
                    let takes_value = argument.input.value.is_some()
                        || argument.input.default.is_some()
                        || argument.input.format.as_deref() != Some("boolean")
                        || !argument.input.choices.is_empty();
                    if !takes_value {
                        // A switch: given when the person says true.
                        if self.value(flag, &argument.input, "flag")?.as_deref() == Some("true") {
                            words.push(flag.to_owned());
                        }
                    } else if let Some(value) = self.value(flag, &argument.input, "flag")? {
                        words.push(format!("{flag}={value}"));
                    }
                }
                "positional" => {
                    let key = (argument.value_hint.as_deref())
                        .unwrap_or("argument")
                        .to_owned();
                    if let Some(value) = self.value(&key, &argument.input, "argument")? {
                        words.push(value);
                    }
                }
                other => {
                    return Err(format!(
                        "an argument of type {other:?}, which the schema does not have"
                    ));
                }
            }
        }
        Ok(words)
    }

    /// Environment variables or headers, by name.
    pub(super) fn named(
        &mut self,
        inputs: &[Named],
        what: &str,
    ) -> Result<BTreeMap<String, String>, String> {
        let mut out = BTreeMap::new();
        for named in inputs {
            let fine = !named.name.is_empty()
                && named.name.len() < 200
                && (named.name.chars()).all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !fine {
                return Err(format!(
                    "{:?} cannot name a {what}",
                    crate::auth::http::printable(&named.name)
                ));
            }
            if let Some(value) = self.value(&named.name, &named.input, what)? {
                out.insert(named.name.clone(), value);
            }
        }
        Ok(out)
    }
}

/// A key as part of a secret's name: flags lose their dashes.
fn secret_part(key: &str) -> String {
    (key.trim_start_matches('-').chars())
        .map(|c| match c.is_ascii_alphanumeric() || "._-".contains(c) {
            true => c,
            false => '_',
        })
        .collect()
}
