//! The catalogue: every server's tools under `<server>__<tool>` names, policy applied, each
//! mapped back to its server, beside its resources, resource templates and prompts, listed
//! live or read from the catalogue on disk; and calls through it.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use mcp_smol::proto::{CacheHint, CacheScope, Tool};
use serde_json::Value;

use crate::config::{Action, Rule};
use crate::hub::cache::Freshness;
use crate::hub::features::{
    self, Features, PromptEntry, ResourceEntry, SkillEntry, Skipped, TemplateEntry,
};
use crate::hub::slot::Slot;
use crate::hub::stored::{Judged, StoredTools};
use crate::hub::{ApproveChanges, Ask, Hub, HubError, PinChange};
use crate::names;

/// One tool as the hub offers it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// The server it belongs to.
    pub server: String,
    /// Its provider-safe shown name, `<server>__<tool>`.
    pub name: String,
    /// The tool as the server describes it (its own name, schema, description), shared
    /// with the hub's listing.
    pub tool: Arc<Tool>,
    /// The `ask` rule that covers it: calls wait for approval.
    pub ask: Option<Rule>,
}

/// The tools, resources and prompts of many servers, and the servers that could not be listed.
///
/// Built from the listings one hub holds in memory for its running servers, each served until
/// its cache hint's `ttlMs` runs out (then listed again on next use) or a list change says
/// otherwise (a listing without a hint is kept until a list change), and, for a server that
/// is not running, from the catalogue on disk ([`Settings::catalogue_dir`]) for a week after
/// it was listed, whatever its `ttlMs` and `cacheScope` said. A server with no listing there
/// (never listed, or a week ago) is started and listed, and the listing kept.
///
/// The hint governs reuse of a server's definitions, and nothing read from disk is reused for
/// a call: a call lists its server live (again, once the hint runs out) and checks that
/// listing against the pins. What is read from disk passes the same filters, rules and pin
/// checks as a live listing: a tool denied or withheld stays so. The listings were all made
/// under the one set of credentials the hub's servers run with, and the folder is the user's
/// own (0700, files 0600), read by nobody else: a private cache in the 2026-07-28 revision's
/// sense, which may keep `cacheScope: private` listings for the same authorization context,
/// so those are kept too (`hub/stored.rs` says how the key follows credentials). The
/// daemon, which serves many commands from one hub, serves only its own user (the socket's
/// peer uid is checked) under its own credentials: a command's environment and tokens are not
/// passed to it, so no request reaches a listing under other credentials.
///
/// [`Settings::catalogue_dir`]: crate::hub::Settings::catalogue_dir
#[derive(Debug, Default)]
pub struct Catalogue {
    /// Every tool the policy lets through, by server, in each server's order.
    pub tools: Vec<ToolEntry>,
    /// Every resource, by server, in each server's order.
    pub resources: Vec<ResourceEntry>,
    /// Every resource template, by server.
    pub templates: Vec<TemplateEntry>,
    /// Every prompt, by server.
    pub prompts: Vec<PromptEntry>,
    /// Every skill, by server.
    pub skills: Vec<SkillEntry>,
    /// Entries servers sent unreadably, left out of the lists above.
    pub skipped: Vec<Skipped>,
    /// Servers that were asked for but could not be listed, with why.
    pub failures: Vec<(String, HubError)>,
    /// Tools left out, with a warning each: their definition changed since it was pinned
    /// ([`HubError::ToolWithheld`]), the poisoning scan flagged it ([`HubError::ToolFlagged`]),
    /// or an `x-mcp-header` annotation of theirs is invalid
    /// ([`HubError::ToolRejected`]); prompts, resources and templates the scan flagged
    /// ([`HubError::FeatureFlagged`]); the warning that a server is another than the one
    /// pinned under its name before ([`HubError::AnotherServer`]), whose tools are listed;
    /// and a server's listing cut at its `max_listed` ([`HubError::ListingCapped`]).
    pub withheld: Vec<HubError>,
}

impl Catalogue {
    /// The entry whose shown name is `name`.
    pub fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.iter().find(|entry| entry.name == name)
    }
}

/// While a catalogue waits for servers to start: dropped before they have (a caller that
/// stopped waiting, for a deadline of its own), it leaves them owing their first listing as
/// a change ([`Slot::owe_listing`]), since the caller was given none of it. Their starts go
/// on ([`Hub::start`]).
struct Owing<'a> {
    hub: &'a super::Inner,
    servers: &'a [String],
    features: bool,
}

impl Owing<'_> {
    /// The caller has what it waited for: nothing is owed.
    fn settled(self) {
        std::mem::forget(self);
    }
}

impl Drop for Owing<'_> {
    fn drop(&mut self) {
        for server in self.servers {
            if let Ok(slot) = self.hub.slot(server) {
                slot.owe_listing(self.hub, self.features);
            }
        }
    }
}

/// A server's tools kept on disk, what was judged of them, those its connection rejected, and
/// its resources and prompts when they were asked for.
type StoredListing = (Arc<Vec<Tool>>, Arc<Judged>, Vec<HubError>, Option<Features>);

/// How the policy treats one tool.
enum Verdict {
    Shown(Option<Rule>),
    Filtered,
    Denied(Rule),
    Withheld(PinChange),
    Flagged(Vec<crate::scan::Finding>),
}

impl Hub {
    /// The tools, resources and prompts of every server the catalogue stands for
    /// ([`default_servers`]): from the catalogue on disk for those not running that have a
    /// fresh listing there, the others started in parallel; the wait is about that of the
    /// slowest server started.
    ///
    /// [`default_servers`]: Hub::default_servers
    pub async fn catalogue(&self) -> Catalogue {
        self.catalogue_of(&self.default_servers()).await
    }

    /// The tools, resources and prompts of the named servers (configured names): read from
    /// the catalogue on disk, or started and listed in parallel, as
    /// [`catalogue`](Self::catalogue) says. A server whose tools are listed but whose
    /// resources or prompts cannot be is in both [`tools`](Catalogue::tools) and
    /// [`failures`](Catalogue::failures).
    pub async fn catalogue_of(&self, servers: &[String]) -> Catalogue {
        self.listing(servers, true, true).await
    }

    /// The tools of the named servers, as [`catalogue_of`](Self::catalogue_of) lists them,
    /// without their resources and prompts: those are not asked for, so the wait is that of
    /// the tools alone.
    pub async fn tools_of(&self, servers: &[String]) -> Catalogue {
        self.listing(servers, false, true).await
    }

    /// The tools of the named servers listed live, each started if it is not running, the
    /// catalogue on disk left unread (and refreshed with what they list): `tools --refresh`.
    pub async fn tools_live(&self, servers: &[String]) -> Catalogue {
        self.listing(servers, false, false).await
    }

    async fn listing(&self, servers: &[String], features: bool, from_disk: bool) -> Catalogue {
        let stored: Vec<Option<StoredListing>> = (servers.iter())
            .map(|server| from_disk.then(|| self.stored(server, features)).flatten())
            .collect();
        let to_start: Vec<String> = (servers.iter().zip(&stored))
            .filter(|(_, stored)| stored.is_none())
            .map(|(server, _)| server.clone())
            .collect();
        // In the order asked for, whichever way each was listed: hosts want a stable order.
        let owing = Owing {
            hub: &self.inner,
            servers: &to_start,
            features,
        };
        let started = self.start_listing(&to_start, features).await;
        owing.settled();
        let mut started = started.into_iter();
        let mut catalogue = Catalogue::default();
        for (server, stored) in servers.iter().zip(stored) {
            let (tools, listed) = match stored {
                Some((tools, judged, rejected, features)) => {
                    let shown = self.shown_tools(server, &tools, &judged, rejected);
                    (Ok(shown), features.map(|features| Ok(Arc::new(features))))
                }
                None => {
                    let Some((server, started, listed)) = started.next() else {
                        break;
                    };
                    (started.and_then(|()| self.tools(&server)), listed)
                }
            };
            let server = server.clone();
            match tools {
                Ok((tools, withheld)) => {
                    catalogue.tools.extend(tools);
                    catalogue.withheld.extend(withheld);
                }
                Err(error) => {
                    catalogue.failures.push((server, error));
                    continue;
                }
            }
            match listed {
                Some(Ok(listed)) => {
                    let features::Entries {
                        resources,
                        templates,
                        prompts,
                        skills,
                        skipped,
                    } = features::entries(&server, &listed);
                    // What the scan flags is left out until `trust`, as a tool is.
                    let withheld = self.withheld_features(&server, &listed);
                    let kept = |feature: &str, id: &str| {
                        !(withheld.iter()).any(|f| f.feature == feature && f.id == id)
                    };
                    let resources = resources.into_iter();
                    let templates = templates.into_iter();
                    let prompts = prompts.into_iter();
                    (catalogue.resources)
                        .extend(resources.filter(|e| kept("resource", &e.resource.uri)));
                    (catalogue.templates).extend(
                        templates.filter(|e| kept("resource template", &e.template.uri_template)),
                    );
                    (catalogue.prompts).extend(prompts.filter(|e| kept("prompt", &e.prompt.name)));
                    let skills = skills.into_iter();
                    (catalogue.skills).extend(skills.filter(|e| kept("skill", &e.skill.uri)));
                    catalogue.skipped.extend(skipped);
                    let capped =
                        (listed.capped.iter()).map(|(list, cap)| HubError::ListingCapped {
                            server: server.clone(),
                            list: list.clone(),
                            cap: *cap,
                        });
                    catalogue.withheld.extend(capped);
                    catalogue
                        .withheld
                        .extend(withheld.iter().map(|f| f.error(&server)));
                }
                Some(Err(error)) => catalogue.failures.push((server, error)),
                None => {}
            }
        }
        catalogue
    }

    /// The cache hint for a listing of `servers` made of what they last listed (their tools,
    /// and with `features` their resources and prompts): the shortest life left among them,
    /// `private` when any is (or when one that runs gave no hint, as a handshake-era server
    /// does: what it lists is this configuration's); `None` when none gave a hint.
    pub fn cache_hint(&self, servers: &[String], features: bool) -> Option<CacheHint> {
        let mut whole: Option<Freshness> = None;
        let mut unhinted = false;
        let now = Instant::now();
        for server in servers {
            let Some(fresh) = (self.inner.slot(server).ok()).and_then(|s| s.freshness(features))
            else {
                continue;
            };
            match fresh.hint_left(now) {
                Some(_) => whole = Some(whole.map_or(fresh, |whole| whole.and(fresh))),
                None => unhinted = true,
            }
        }
        let mut hint = whole?.hint_left(now)?;
        if unhinted {
            hint.scope = CacheScope::Private;
        }
        Some(hint)
    }

    /// The listing of `server` kept in the catalogue on disk, its tools and, with `features`,
    /// its resources and prompts, if it is not running (then its live listing is at hand)
    /// and what is asked for is kept there and fresh.
    fn stored(&self, server: &str, features: bool) -> Option<StoredListing> {
        let slot = self.inner.slot(server).ok()?;
        if slot.client_tools().is_some() {
            return None;
        }
        let key = self.inner.catalogue_key(slot.spec().ok()?);
        let now = SystemTime::now();
        let kept = self.inner.stored.tools(&key, now)?;
        let judged = self.judged_kept(server, &key, &kept);
        let rejected = kept_errors(server, kept.rejected, kept.capped);
        let features = match features {
            true => Some(self.inner.stored.features(&key, now)?),
            false => None,
        };
        Some((kept.tools, judged, rejected, features))
    }

    /// What was judged of `kept`, `server`'s listing kept under `key`, made again and kept
    /// with it if it no longer stands (kept by another build, or against other servers).
    fn judged_kept(&self, server: &str, key: &str, kept: &StoredTools) -> Arc<Judged> {
        let others = self.other_servers(server);
        let scanner = super::scanning::scanner();
        if kept.judged.stands(kept.tools.len(), &others, scanner) {
            return kept.judged.clone();
        }
        let judged = Arc::new(self.inner.judged(server, &kept.tools));
        // Without a name for this build's scan rules no verdict of it would stand either.
        if scanner.is_some() {
            (self.inner.stored).judge_again(key, &kept.tools, judged.clone());
        }
        judged
    }

    /// The tools of `server` as last kept in the catalogue on disk, however old, policy and
    /// pins applied as to any listing, and those withheld: for a host that cannot wait for
    /// the server to list them again (the gateway's). `None` when none was ever kept; the
    /// server's first listing is then told as a change ([`HubEvent::ToolsChanged`]).
    ///
    /// [`HubEvent::ToolsChanged`]: crate::hub::HubEvent::ToolsChanged
    #[cfg(feature = "cli")]
    pub(crate) fn last_kept_tools(&self, server: &str) -> Option<Catalogue> {
        let slot = self.inner.slot(server).ok()?;
        let key = self.inner.catalogue_key(slot.spec().ok()?);
        let Some(kept) = self.inner.stored.last_tools(&key) else {
            // The host goes on without them: their first listing is a change for it.
            slot.owe_listing(&self.inner, false);
            return None;
        };
        let judged = self.judged_kept(server, &key, &kept);
        let rejected = kept_errors(server, kept.rejected, kept.capped);
        let (tools, withheld) = self.shown_tools(server, &kept.tools, &judged, rejected);
        Some(Catalogue {
            tools,
            withheld,
            ..Catalogue::default()
        })
    }

    /// How long ago `server`'s tools were listed and kept in the catalogue on disk.
    pub(crate) fn stored_age(&self, server: &str) -> Option<std::time::Duration> {
        let slot = self.inner.slot(server).ok()?;
        let key = self.inner.catalogue_key(slot.spec().ok()?);
        self.inner.stored.age(&key, SystemTime::now())
    }

    /// The tools of one running server, policy applied, and those withheld; it must have been
    /// started.
    fn tools(&self, server: &str) -> Result<(Vec<ToolEntry>, Vec<HubError>), HubError> {
        let slot = self.inner.slot(server)?;
        let (live, judged) = slot.client_listing().ok_or_else(|| HubError::Unavailable {
            server: server.to_owned(),
            state: slot.status().state,
            reason: "not running".to_owned(),
        })?;
        Ok(self.shown_tools(server, &live, &judged, slot.rejected_tools()))
    }

    /// `server`'s `tools` as the policy and the pins let them through, live or from disk alike,
    /// and those withheld (after `withheld`, those the connection rejected). What was `judged`
    /// of them when they were kept on disk stands in for a digest and a scan.
    fn shown_tools(
        &self,
        server: &str,
        live: &Arc<Vec<Tool>>,
        judged: &Judged,
        mut withheld: Vec<HubError>,
    ) -> (Vec<ToolEntry>, Vec<HubError>) {
        withheld.extend(self.observe_pins(server, live));
        let looked = self.looked(server, live);
        let others = self.other_servers(server);
        let pin_key = self.pin_key(server);
        let scanner = super::scanning::scanner();
        let mut entries = Vec::new();
        let shown = looked.tools.iter().zip(looked.shown.iter().cloned());
        for (at, (tool, shown)) in shown.enumerate() {
            let judged = judged.of(at, live.len(), &others, scanner);
            match self.verdict(server, pin_key.as_deref(), tool, &shown, judged) {
                Verdict::Shown(ask) => entries.push(entry(server, tool, shown, ask)),
                Verdict::Withheld(change) => withheld.push(withheld_error(server, tool, change)),
                Verdict::Flagged(findings) => withheld.push(flagged_error(server, tool, findings)),
                Verdict::Filtered | Verdict::Denied(_) => {}
            }
        }
        (entries, withheld)
    }

    /// How many tools of a running server the policy and the pins let through; `None` when
    /// it is not running.
    pub(crate) fn shown_count(&self, server: &str) -> Option<usize> {
        self.tools(server).ok().map(|(tools, _)| tools.len())
    }

    /// Pins the tools of `server` not pinned yet, unless its config turns pinning off (then
    /// only reads what `trust` accepted, for the poisoning scan). Returns the warning that
    /// `server` is another server than the one pinned under its name before, if it is.
    fn observe_pins(&self, server: &str, tools: &[Tool]) -> Option<HubError> {
        let key = self.pin_key(server);
        let another =
            (key.as_deref()).is_some_and(|key| self.inner.pins.another_server(server, key));
        let read_afresh = match key {
            Some(key) => self.inner.pins.observe(&key, tools, true),
            None => self.observe_trust(server, tools),
        };
        if read_afresh {
            self.inner.found.changed();
        }
        let slot = another.then(|| self.inner.slot(server).ok()).flatten()?;
        Some(HubError::AnotherServer {
            server: server.to_owned(),
            command: slot.status().command,
        })
    }

    /// What `server`'s pins are kept under, if its tools are pinned.
    fn pin_key(&self, server: &str) -> Option<String> {
        let slot = self.inner.slot(server).ok()?;
        let spec = slot.spec().ok()?;
        spec.pin_tools.then(|| super::pins::key(spec))
    }

    /// Accepts the current definitions of `server`'s tools as its pins,
    /// starting it if it must, once `approve` has seen the tools whose definition changed,
    /// and with them its prompts, resources and templates as they are, findings and all.
    /// Returns those tools, with how.
    pub async fn trust(
        &self,
        server: &str,
        approve: ApproveChanges<'_>,
    ) -> Result<Vec<(String, PinChange)>, HubError> {
        let slot = self.inner.slot(server)?;
        let live = slot.listed(&self.inner).await?;
        let unpinnable = |reason: String| HubError::Unavailable {
            server: server.to_owned(),
            state: slot.status().state,
            reason,
        };
        if self.inner.settings.pin_dir.is_none() {
            return Err(unpinnable(
                "this hub pins no tools (no pin folder)".to_owned(),
            ));
        }
        // Listed before anything is accepted; a server that cannot list them has none to accept.
        let features = slot.features(&self.inner).await.ok();
        let key = self.trust_key(server);
        let accepted = (self.inner.pins).accept(&key, &live.tools, approve);
        self.inner.found.changed();
        let accepted = accepted.map_err(unpinnable)?;
        if let Some(features) = features {
            self.accept_features(server, &features)
                .map_err(unpinnable)?;
        }
        Ok(accepted)
    }

    /// Finds a tool by the name a program or a person gives: `SERVER__TOOL` (as the
    /// catalogue shows it) or `SERVER.TOOL`. Starts the server if it must.
    pub async fn find(&self, qualified: &str) -> Result<ToolEntry, HubError> {
        let (server, tool) = self.locate(qualified)?;
        self.find_tool(&server, &tool).await
    }

    /// The configured server a qualified tool name (`SERVER__TOOL`, `SERVER.TOOL`) names, and
    /// the tool part as given; starts nothing.
    pub(crate) fn locate(&self, qualified: &str) -> Result<(String, String), HubError> {
        if let Some(located) = self.inner.found.located(qualified) {
            return Ok(located);
        }
        let generation = self.inner.found.generation();
        let is_server = |name: &str| self.resolve(name).is_ok();
        let Some((server, tool)) = names::split_qualified(qualified, is_server) else {
            return Err(HubError::UnknownServer {
                given: qualified.to_owned(),
                known: self.status().into_iter().map(|s| s.name).collect(),
            });
        };
        let server = self.resolve(&server)?;
        (self.inner.found).keep_located(qualified, generation, (&server, &tool));
        Ok((server, tool))
    }

    /// Finds one tool of `server` (a configured name) by its own name, its name without the
    /// server prefix, or the tool part of its shown name. Starts the server if it must. A tool
    /// the policy leaves out is an error that says which rule or list did.
    pub async fn find_tool(&self, server: &str, given: &str) -> Result<ToolEntry, HubError> {
        let slot = self.inner.slot(server)?;
        let now = Instant::now();
        let lists = |listing: &Arc<Vec<Tool>>| slot.still_lists(listing, now);
        if let Some(found) = self.inner.found.tool(server, given, lists) {
            return Ok(found);
        }
        // Boxed: found afresh only after a change, its state would weigh on every call's.
        Box::pin(self.find_afresh(&slot, server, given)).await
    }

    /// [`find_tool`](Self::find_tool) when no tool found before stands: the server started
    /// or listed again if it must, the pins and the policy asked, the finding kept.
    async fn find_afresh(
        &self,
        slot: &Arc<Slot>,
        server: &str,
        given: &str,
    ) -> Result<ToolEntry, HubError> {
        let generation = self.inner.found.generation();
        let live = slot.listed(&self.inner).await?;
        // Found for a call, which says whatever keeps it from running: a warning has no place.
        let _another = self.observe_pins(server, &live.tools);
        let looked = self.looked(server, &live.tools);
        let (tools, shown) = (&looked.tools, &looked.shown);
        let pin_key = self.pin_key(server);
        let verdict =
            |tool, shown: &str| self.verdict(server, pin_key.as_deref(), tool, shown, None);
        let index = match tools.iter().position(|tool| tool.name == given) {
            Some(exact) => exact,
            None => {
                // As the catalogue shows it (`SERVER__` left out), which may carry a hash.
                let shown_given = format!("{}__{given}", names::safe(server));
                let matching: Vec<usize> = (0..tools.len())
                    .filter(|&i| {
                        shown[i] == shown_given
                            || names::tool_matches(server, &tools[i].name, given)
                    })
                    .collect();
                match matching.as_slice() {
                    [index] => *index,
                    [] => {
                        let rejected = slot.rejected_tools().into_iter().find(|error| {
                            matches!(error, HubError::ToolRejected { tool, .. } if tool == given)
                        });
                        if let Some(rejected) = rejected {
                            return Err(rejected);
                        }
                        return Err(HubError::UnknownTool {
                            server: server.to_owned(),
                            given: given.to_owned(),
                            known: (tools.iter().zip(shown.iter()))
                                .filter(|(t, s)| matches!(verdict(t, s), Verdict::Shown(_)))
                                .map(|(t, _)| t.name.clone())
                                .collect(),
                        });
                    }
                    // Distinct names can look alike once made safe (`a.b` and `a/b`).
                    several => {
                        return Err(HubError::AmbiguousTool {
                            server: server.to_owned(),
                            given: given.to_owned(),
                            candidates: several.iter().map(|&i| tools[i].name.clone()).collect(),
                        });
                    }
                }
            }
        };
        let (tool, shown) = (&tools[index], shown[index].clone());
        match verdict(tool, &shown) {
            Verdict::Shown(ask) => {
                let entry = entry(server, tool, shown, ask);
                let pins = self.inner.pins.next_look(&self.trust_key(server));
                let asked = (server, given);
                (self.inner.found).keep(asked, generation, &live.tools, pins, &entry);
                Ok(entry)
            }
            Verdict::Filtered => Err(HubError::ToolFiltered {
                server: server.to_owned(),
                tool: tool.name.clone(),
            }),
            Verdict::Denied(rule) => Err(HubError::ToolDenied { tool: shown, rule }),
            Verdict::Withheld(change) => Err(withheld_error(server, tool, change)),
            Verdict::Flagged(findings) => Err(flagged_error(server, tool, findings)),
        }
    }

    /// The one gate every route to a tool passes: the tool of `server` named `name` (its own
    /// name) as the policy and the pins let it be called, once an `ask` rule covering it has
    /// been answered yes.
    pub(crate) async fn admit(
        &self,
        server: &str,
        name: &str,
        arguments: &Value,
    ) -> Result<ToolEntry, HubError> {
        let entry = self.find_tool(server, name).await?;
        self.approve(&entry, arguments).await?;
        Ok(entry)
    }

    /// The `ask` rule covering `entry`, if any, answered: an error unless the answer is yes.
    pub(crate) async fn approve(
        &self,
        entry: &ToolEntry,
        arguments: &Value,
    ) -> Result<(), HubError> {
        if let Some(rule) = &entry.ask {
            let ask = Ask {
                tool: entry.name.clone(),
                arguments: arguments.clone(),
                rule: rule.clone(),
            };
            let approval = match &self.inner.settings.ask {
                Some(handler) => handler.decide(ask).await,
                None => Err("nobody to ask".to_owned()),
            };
            if let Err(why) = approval {
                return Err(HubError::NotApproved {
                    tool: entry.name.clone(),
                    rule: rule.clone(),
                    why,
                });
            }
        }
        Ok(())
    }

    /// How the policy treats `tool` of `server`, shown as `shown`, whose pins are kept under
    /// `pin_key` ([`pin_key`](Self::pin_key)); `judged` is its pin digest and whether it is
    /// known to scan clean, when its listing kept them ([`Judged::of`]).
    fn verdict(
        &self,
        server: &str,
        pin_key: Option<&str>,
        tool: &Arc<Tool>,
        shown: &str,
        judged: Option<(&str, bool)>,
    ) -> Verdict {
        let slot = self.inner.slot(server);
        let filter = slot.as_ref().ok().and_then(|slot| slot.spec().ok());
        if filter.is_some_and(|spec| !spec.tools.allows(&tool.name)) {
            return Verdict::Filtered;
        }
        let (sha256, clean) = judged.unzip();
        if let Some(key) = pin_key
            && let Some(change) = self.inner.pins.check(key, tool, sha256)
        {
            return Verdict::Withheld(change);
        }
        if clean != Some(true)
            && let Some(findings) = self.flagged(server, tool)
        {
            return Verdict::Flagged(findings);
        }
        match self.inner.policy.rule_for(shown, server, &tool.name) {
            Some(rule) if rule.action == Action::Deny => Verdict::Denied(rule.clone()),
            Some(rule) if rule.action == Action::Ask => Verdict::Shown(Some(rule.clone())),
            _ => Verdict::Shown(None),
        }
    }
}

/// A server's listing as lookups use it: each tool shared (an entry holds it without a copy)
/// and its shown name. Made once per listing: every call looks its tool up in it.
pub(crate) struct Looked {
    /// The listing these were made from, held so that its address names it.
    listing: Arc<Vec<Tool>>,
    tools: Vec<Arc<Tool>>,
    shown: Vec<String>,
}

impl Hub {
    /// `listing` of `server`, its tools shared and their shown names (distinct even where two
    /// tools' provider-safe names would collide), made again only for another listing.
    fn looked(&self, server: &str, listing: &Arc<Vec<Tool>>) -> Arc<Looked> {
        let mut cache =
            (self.inner.looked.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(cached) = cache.get(server)
            && Arc::ptr_eq(&cached.listing, listing)
        {
            return cached.clone();
        }
        let names: Vec<&str> = listing.iter().map(|tool| tool.name.as_str()).collect();
        let made = Arc::new(Looked {
            listing: listing.clone(),
            tools: listing.iter().cloned().map(Arc::new).collect(),
            shown: names::shown_names(server, &names),
        });
        cache.insert(server.to_owned(), made.clone());
        made
    }
}

/// What a kept listing says of `server`'s tools its connection rejected, and of the cap it
/// was cut at, as the warnings a live listing gives.
fn kept_errors(
    server: &str,
    rejected: Vec<(String, String)>,
    capped: Option<usize>,
) -> Vec<HubError> {
    let capped = capped.map(|cap| HubError::ListingCapped {
        server: server.to_owned(),
        list: "tool".to_owned(),
        cap,
    });
    (rejected.into_iter())
        .map(|(tool, reason)| HubError::ToolRejected {
            server: server.to_owned(),
            tool,
            reason,
        })
        .chain(capped)
        .collect()
}

fn withheld_error(server: &str, tool: &Tool, change: PinChange) -> HubError {
    HubError::ToolWithheld {
        server: server.to_owned(),
        tool: tool.name.clone(),
        change,
    }
}

fn flagged_error(server: &str, tool: &Tool, findings: Vec<crate::scan::Finding>) -> HubError {
    HubError::ToolFlagged {
        server: server.to_owned(),
        tool: tool.name.clone(),
        findings,
    }
}

fn entry(server: &str, tool: &Arc<Tool>, name: String, ask: Option<Rule>) -> ToolEntry {
    ToolEntry {
        server: server.to_owned(),
        name,
        tool: tool.clone(),
        ask,
    }
}
