//! Resources, resource templates, prompts and skills in the hub: listed the first time
//! something needs them (if the server declares them), refreshed on its `list_changed`
//! notifications (a skill's on `resources/list_changed`, as the skills extension has it), and
//! reached through one request path, [`Hub::request`].

use std::sync::Arc;
use std::time::Instant;

use mcp_smol::Client;
use mcp_smol::proto::skills::Skill;
use mcp_smol::proto::{
    FromResult, Listing, Prompt, Request, Resource, ResourceTemplate, ServerInfo,
};

use crate::hub::cache::Freshness;
use crate::hub::{Hub, HubError, HubEvent};
use crate::names;

/// A server's features besides tools (resources, resource templates, prompts, skills), as last
/// listed; by default, none.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Features {
    pub(crate) resources: Vec<Resource>,
    pub(crate) templates: Vec<ResourceTemplate>,
    pub(crate) prompts: Vec<Prompt>,
    /// The skills' entries (`skills/list`); their files are read only when a skill is fetched.
    pub(crate) skills: Vec<Skill>,
    /// `(list, count)` of entries the server sent unreadably, for the caller to report.
    pub(crate) skipped: Vec<(&'static str, usize)>,
    /// `(list, cap)` of the lists the server made longer than `max_listed`: only the first
    /// `cap` are above.
    pub(crate) capped: Vec<(String, usize)>,
    /// Until when all of the above may be used without listing them again.
    pub(crate) fresh: Freshness,
}

impl Features {
    /// Lists what the server's capabilities say it has, resources, prompts and skills side by
    /// side (their round trips overlap); a server that declares none is asked nothing.
    pub(crate) async fn list(client: &Client, info: &ServerInfo) -> Result<Self, mcp_smol::Error> {
        let asked = Instant::now();
        let resources = async {
            if info.capabilities.resources.is_none() {
                return Ok(None);
            }
            let resources = client.list_all::<Resource>().await?;
            // Templates are optional even for a server with resources: a refusal means none.
            let templates = match client.list_all::<ResourceTemplate>().await {
                Ok(templates) => Some(templates),
                Err(mcp_smol::Error::Request(_)) => None,
                Err(error) => return Err(error),
            };
            Ok(Some((resources, templates)))
        };
        let prompts = async {
            if info.capabilities.prompts.is_none() {
                return Ok(None);
            }
            client.list_all::<Prompt>().await.map(Some)
        };
        let skills = async {
            if info.capabilities.skills.is_none() {
                return Ok(None);
            }
            client.list_all::<Skill>().await.map(Some)
        };
        let (resources, (prompts, skills)) =
            futures_lite::future::zip(resources, futures_lite::future::zip(prompts, skills)).await;
        let mut features = Features::default();
        if let Some((resources, templates)) = resources? {
            features.resources = features.note("resource", resources, asked);
            if let Some(templates) = templates {
                features.templates = features.note("resource template", templates, asked);
            }
        }
        if let Some(prompts) = prompts? {
            features.prompts = features.note("prompt", prompts, asked);
        }
        if let Some(skills) = skills? {
            features.skills = features.note("skill", skills, asked);
        }
        Ok(features)
    }

    /// What changed from this listing to `listed`, told as `server`'s list changes would be (a
    /// skill's change as the resources', as the skills extension tells it).
    pub(crate) fn changes(&self, listed: &Features, server: &str) -> Vec<HubEvent> {
        let server = server.to_owned();
        let resources = (self.resources != listed.resources
            || self.templates != listed.templates
            || self.skills != listed.skills)
            .then(|| HubEvent::ResourcesChanged {
                server: server.clone(),
            });
        let prompts =
            (self.prompts != listed.prompts).then_some(HubEvent::PromptsChanged { server });
        resources.into_iter().chain(prompts).collect()
    }

    /// Takes in one listing asked for at `asked`: its skipped entries, its freshness.
    fn note<T>(&mut self, list: &'static str, listing: Listing<T>, asked: Instant) -> Vec<T> {
        self.fresh = self.fresh.and(Freshness::of(listing.cache, asked));
        if listing.skipped > 0 {
            self.skipped.push((list, listing.skipped));
        }
        if let Some(cap) = listing.capped {
            self.capped.push((list.to_owned(), cap));
        }
        listing.items
    }
}

/// One resource as the hub offers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceEntry {
    /// The server it belongs to.
    pub server: String,
    /// The resource as the server describes it; its URI is read through that server.
    pub resource: Resource,
}

/// One resource template as the hub offers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateEntry {
    /// The server it belongs to.
    pub server: String,
    /// The template as the server describes it.
    pub template: ResourceTemplate,
}

/// One skill as the hub offers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillEntry {
    /// The server it belongs to.
    pub server: String,
    /// Its provider-safe shown name, `<server>__<skill>`, as a tool's.
    pub name: String,
    /// The entry as the server sent it; its files are read through that server.
    pub skill: Skill,
}

/// One prompt as the hub offers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptEntry {
    /// The server it belongs to.
    pub server: String,
    /// Its provider-safe shown name, `<server>__<prompt>`.
    pub name: String,
    /// The prompt as the server describes it (its own name, arguments).
    pub prompt: Prompt,
}

/// Entries a server sent that could not be read and were left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The server.
    pub server: String,
    /// `resource`, `resource template`, `prompt` or `skill`.
    pub list: &'static str,
    /// How many.
    pub count: usize,
}

impl Hub {
    /// Sends one request to `server` (a configured name), starting it if it must, and reads
    /// the result as the request's type: [`Request::read_resource`](crate::Request::read_resource),
    /// [`get_prompt`](crate::Request::get_prompt), [`complete`](crate::Request::complete),
    /// [`subscribe`](crate::Request::subscribe),
    /// [`set_logging_level`](crate::Request::set_logging_level), ...
    ///
    /// A `tools/call` passes the same gate as [`call`](Hub::call): a tool the policy filters
    /// or denies, or whose pinned definition changed, is refused, and an `ask` rule is asked.
    pub async fn request<T: FromResult>(
        &self,
        server: &str,
        request: Request<T>,
    ) -> Result<T, HubError> {
        if let Some((tool, arguments)) = request.tool_call() {
            self.admit(server, tool, arguments).await?;
        }
        let slot = self.inner.slot(server)?;
        let live = slot.ensure_running(&self.inner).await?;
        (live.client.request(request).await).map_err(|error| HubError::Server {
            server: server.to_owned(),
            error,
        })
    }

    /// Finds one prompt of `server` (a configured name) by its own name or the prompt part of
    /// its shown name. Starts the server if it must.
    pub async fn find_prompt(&self, server: &str, given: &str) -> Result<PromptEntry, HubError> {
        let slot = self.inner.slot(server)?;
        let features = slot.features(&self.inner).await?;
        let prompts = &features.prompts;
        let found = (prompts.iter().find(|prompt| prompt.name == given))
            .or_else(|| (prompts.iter()).find(|p| names::tool_matches(server, &p.name, given)));
        let withheld = || {
            let withheld = self.withheld_features(server, &features);
            (withheld.into_iter())
                .find(|f| f.feature == "prompt" && found.is_some_and(|p| p.name == f.id))
        };
        if let Some(flagged) = withheld() {
            return Err(flagged.error(server));
        }
        match found {
            Some(prompt) => Ok(prompt_entry(server, prompt)),
            None => Err(HubError::UnknownPrompt {
                server: server.to_owned(),
                given: given.to_owned(),
                known: prompts.iter().map(|prompt| prompt.name.clone()).collect(),
            }),
        }
    }
}

impl Hub {
    /// Finds one skill of `server` (a configured name) by its name or the skill part of its
    /// shown name, in the running connection's listing. Starts the server if it must.
    pub async fn find_skill(&self, server: &str, given: &str) -> Result<SkillEntry, HubError> {
        let slot = self.inner.slot(server)?;
        let features = slot.features(&self.inner).await?;
        let skills = &features.skills;
        let found = (skills.iter().find(|skill| skill.name() == given))
            .or_else(|| (skills.iter()).find(|s| names::tool_matches(server, s.name(), given)));
        let withheld = self.withheld_features(server, &features);
        let flagged = (withheld.into_iter())
            .find(|f| f.feature == "skill" && found.is_some_and(|s| s.uri == f.id));
        if let Some(flagged) = flagged {
            return Err(flagged.error(server));
        }
        match found {
            Some(skill) => Ok(SkillEntry {
                server: server.to_owned(),
                name: names::qualified(server, skill.name()),
                skill: skill.clone(),
            }),
            None => Err(HubError::UnknownSkill {
                server: server.to_owned(),
                given: given.to_owned(),
                known: skills.iter().map(|skill| skill.name().to_owned()).collect(),
            }),
        }
    }
}

pub(crate) fn prompt_entry(server: &str, prompt: &Prompt) -> PromptEntry {
    PromptEntry {
        server: server.to_owned(),
        name: names::qualified(server, &prompt.name),
        prompt: prompt.clone(),
    }
}

/// The entries of one server's features, for the catalogue.
pub(crate) fn entries(server: &str, features: &Arc<Features>) -> Entries {
    let resources = (features.resources.iter())
        .map(|resource| ResourceEntry {
            server: server.to_owned(),
            resource: resource.clone(),
        })
        .collect();
    let templates = (features.templates.iter())
        .map(|template| TemplateEntry {
            server: server.to_owned(),
            template: template.clone(),
        })
        .collect();
    let prompts = (features.prompts.iter())
        .map(|prompt| prompt_entry(server, prompt))
        .collect();
    let skills = (features.skills.iter())
        .map(|skill| SkillEntry {
            server: server.to_owned(),
            name: names::qualified(server, skill.name()),
            skill: skill.clone(),
        })
        .collect();
    let skipped = (features.skipped.iter())
        .map(|&(list, count)| Skipped {
            server: server.to_owned(),
            list,
            count,
        })
        .collect();
    Entries {
        resources,
        templates,
        prompts,
        skills,
        skipped,
    }
}

/// One server's features as catalogue entries.
pub(crate) struct Entries {
    pub(crate) resources: Vec<ResourceEntry>,
    pub(crate) templates: Vec<TemplateEntry>,
    pub(crate) prompts: Vec<PromptEntry>,
    pub(crate) skills: Vec<SkillEntry>,
    pub(crate) skipped: Vec<Skipped>,
}
