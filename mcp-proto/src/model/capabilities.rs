//! The server's capabilities, as far as a client acts on them and as a server declares them:
//! read leniently, written back the same.

use serde_json::{Map, Value};

use crate::model::skills::SKILLS_EXTENSION;

/// The server's `capabilities`, as far as a client acts on them. Read leniently: a capability
/// that is not an object (`true`, `null`, a list) counts as absent, and so does every flag
/// that is not `true`; an odd shape never fails the handshake.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerCapabilities {
    /// `tools`: it offers tools.
    pub tools: Option<ListCapability>,
    /// `resources`: it offers resources (and maybe resource templates).
    pub resources: Option<ResourcesCapability>,
    /// `prompts`: it offers prompts.
    pub prompts: Option<ListCapability>,
    /// `logging`: it takes `logging/setLevel` and sends log messages.
    pub logging: bool,
    /// `completions`: it answers `completion/complete`.
    pub completions: bool,
    /// `experimental`, as sent: non-standard capabilities, for whoever knows them.
    pub experimental: Option<Value>,
    /// What it offers of tasks, in either era.
    pub tasks: TasksCapability,
    /// `extensions["io.modelcontextprotocol/skills"]`: it offers skills (`skills/list`,
    /// `skills/get`), their files read as resources.
    pub skills: Option<SkillsCapability>,
}

/// The server's skills extension settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkillsCapability {
    /// `directoryRead`: it answers `resources/directory/read` on a skill's folders.
    pub directory_read: bool,
}

/// A list the server offers (`tools`, `prompts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListCapability {
    /// `listChanged`: it says when the list changes.
    pub list_changed: bool,
}

/// The server's `resources` capability.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourcesCapability {
    /// `subscribe`: it takes `resources/subscribe`.
    pub subscribe: bool,
    /// `listChanged`: it says when the list changes.
    pub list_changed: bool,
}

impl ServerCapabilities {
    /// Reads the `capabilities` object of an `initialize` result; anything that is not an
    /// object declares nothing.
    pub(crate) fn read(value: &Value) -> Self {
        let declared = |name: &str| value.get(name).filter(|entry| entry.is_object());
        let flag = |entry: &Value, name: &str| entry.get(name) == Some(&Value::Bool(true));
        let list = |name: &str| {
            declared(name).map(|entry| ListCapability {
                list_changed: flag(entry, "listChanged"),
            })
        };
        Self {
            tools: list("tools"),
            resources: declared("resources").map(|entry| ResourcesCapability {
                subscribe: flag(entry, "subscribe"),
                list_changed: flag(entry, "listChanged"),
            }),
            prompts: list("prompts"),
            logging: declared("logging").is_some(),
            completions: declared("completions").is_some(),
            experimental: declared("experimental").cloned(),
            tasks: TasksCapability::read(value),
            skills: (value.get("extensions"))
                .and_then(|extensions| extensions.get(SKILLS_EXTENSION))
                .filter(|entry| entry.is_object())
                .map(|entry| SkillsCapability {
                    directory_read: flag(entry, "directoryRead"),
                }),
        }
    }

    /// The `capabilities` object a server sends, declaring what these say: the mirror of
    /// reading them.
    pub fn to_json(&self) -> Value {
        let mut declared = Map::new();
        let mut declare = |name: &str, entry: Value| _ = declared.insert(name.to_owned(), entry);
        let flags = |flags: &[(&str, bool)]| -> Value {
            let set = flags.iter().filter(|(_, on)| *on);
            Value::Object(
                set.map(|(name, _)| ((*name).to_owned(), Value::Bool(true)))
                    .collect(),
            )
        };
        if let Some(tools) = self.tools {
            declare("tools", flags(&[("listChanged", tools.list_changed)]));
        }
        if let Some(resources) = self.resources {
            let entry = flags(&[
                ("subscribe", resources.subscribe),
                ("listChanged", resources.list_changed),
            ]);
            declare("resources", entry);
        }
        if let Some(prompts) = self.prompts {
            declare("prompts", flags(&[("listChanged", prompts.list_changed)]));
        }
        let empty = || Value::Object(Map::new());
        if self.logging {
            declare("logging", empty());
        }
        if self.completions {
            declare("completions", empty());
        }
        if let Some(experimental) = &self.experimental {
            declare("experimental", experimental.clone());
        }
        let TasksCapability {
            tool_calls,
            list,
            cancel,
            extension,
        } = self.tasks;
        if tool_calls || list || cancel {
            let mut tasks = Map::new();
            let mut offer = |name: &str, entry: Value| _ = tasks.insert(name.to_owned(), entry);
            if list {
                offer("list", empty());
            }
            if cancel {
                offer("cancel", empty());
            }
            if tool_calls {
                offer("requests", serde_json::json!({"tools": {"call": {}}}));
            }
            declare("tasks", Value::Object(tasks));
        }
        let mut extensions = Map::new();
        if extension {
            extensions.insert(TASKS_EXTENSION.to_owned(), empty());
        }
        if let Some(skills) = self.skills {
            let entry = flags(&[("directoryRead", skills.directory_read)]);
            extensions.insert(SKILLS_EXTENSION.to_owned(), entry);
        }
        if !extensions.is_empty() {
            declare("extensions", Value::Object(extensions));
        }
        Value::Object(declared)
    }
}

/// The extension's name, in the client's and the server's capabilities.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// What the server's capabilities say of tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TasksCapability {
    /// Handshake era: `tasks.requests.tools.call`, so a call may ask to be a task.
    pub tool_calls: bool,
    /// Handshake era: `tasks.list`.
    pub list: bool,
    /// Handshake era: `tasks.cancel`.
    pub cancel: bool,
    /// Stateless era: `extensions["io.modelcontextprotocol/tasks"]`.
    pub extension: bool,
}

impl TasksCapability {
    pub(crate) fn read(capabilities: &Value) -> Self {
        let tasks = capabilities.get("tasks").filter(|t| t.is_object());
        let declared = |path: &[&str]| {
            let mut at = tasks;
            for name in path {
                at = at.and_then(|value| value.get(name));
            }
            at.is_some_and(Value::is_object)
        };
        let extension = (capabilities.get("extensions"))
            .and_then(|extensions| extensions.get(TASKS_EXTENSION))
            .is_some_and(Value::is_object);
        Self {
            tool_calls: declared(&["requests", "tools", "call"]),
            list: declared(&["list"]),
            cancel: declared(&["cancel"]),
            extension,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capabilities_say_what_each_era_offers() {
        let handshake =
            json!({"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}});
        let read = TasksCapability::read(&handshake);
        assert!(read.tool_calls && read.list && read.cancel && !read.extension);
        let stateless = json!({"extensions": {TASKS_EXTENSION: {}}});
        assert!(TasksCapability::read(&stateless).extension);
        assert_eq!(
            TasksCapability::read(&json!({"tasks": true})),
            TasksCapability::default()
        );
    }

    #[test]
    fn capabilities_written_read_back_the_same() {
        let every = ServerCapabilities {
            tools: Some(ListCapability { list_changed: true }),
            resources: Some(ResourcesCapability {
                subscribe: true,
                list_changed: false,
            }),
            prompts: Some(ListCapability::default()),
            logging: true,
            completions: true,
            experimental: Some(json!({"x": 1})),
            tasks: TasksCapability {
                tool_calls: true,
                list: true,
                cancel: false,
                extension: true,
            },
            skills: Some(SkillsCapability {
                directory_read: true,
            }),
        };
        let skills_only = ServerCapabilities {
            skills: Some(SkillsCapability::default()),
            ..ServerCapabilities::default()
        };
        for capabilities in [every, skills_only, ServerCapabilities::default()] {
            let written = capabilities.to_json();
            assert_eq!(
                ServerCapabilities::read(&written),
                capabilities,
                "{written}"
            );
        }
        let written = ServerCapabilities::default().to_json();
        assert_eq!(written, json!({}), "nothing declared, nothing sent");
    }

    #[test]
    fn capabilities_are_read_leniently() {
        let read = |value: Value| ServerCapabilities::read(&value);
        let all = read(json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true},
            "prompts": {},
            "logging": {},
            "completions": {},
            "experimental": {"x": 1},
        }));
        assert_eq!(all.tools, Some(ListCapability { list_changed: true }));
        let resources = ResourcesCapability {
            subscribe: true,
            list_changed: false,
        };
        assert_eq!(all.resources, Some(resources));
        assert_eq!(all.prompts, Some(ListCapability::default()));
        assert!(all.logging && all.completions);
        assert_eq!(all.experimental, Some(json!({"x": 1})));
        // What a hostile or sloppy server may send declares nothing, and fails nothing.
        let odd = read(json!({
            "tools": true,
            "resources": [],
            "prompts": null,
            "logging": "yes",
            "experimental": 3,
        }));
        assert_eq!(odd, ServerCapabilities::default());
        let flags = read(json!({"tools": {"listChanged": "true"}, "resources": {"subscribe": 1}}));
        assert_eq!(flags.tools, Some(ListCapability::default()));
        assert_eq!(flags.resources, Some(ResourcesCapability::default()));
        for value in [json!([]), json!("x"), Value::Null] {
            assert_eq!(read(value), ServerCapabilities::default());
        }
    }
}
