//! A host's resources and prompts: `resources/list`, `resources/templates/list` and
//! `prompts/list` from the catalogue, under the hub's names; `prompts/get` and
//! `resources/read` planned to the server whose prompt or resource it is ([`call`](super::call)).
//!
//! Stateless era: a listing or a read carries `ttlMs` and `cacheScope`. A backend's read keeps
//! its own; a listing made of several servers' gets the strictest of theirs; with none to go
//! by, it is fresh for no time and private, which is never wrong.

use std::sync::Arc;
use std::time::Duration;

use mcp_smol::proto::{
    CacheHint, CacheScope, ListResult, Listed, Prompt, RawResult, Request, RpcError,
    server::{ClientInfo, HostRequestId},
};
use serde::Serialize;
use serde_json::{Map, Value};

use super::call::{Plan, Route, Work};
use super::errors::{internal_error, invalid_params, resource_not_found, withheld};
use super::{Gateway, HostLink, large, skills};

/// A hint that is never wrong: stale at once, for these credentials only.
pub(crate) const STALE_AT_ONCE: CacheHint = CacheHint {
    ttl: Duration::ZERO,
    scope: CacheScope::Private,
};

impl Gateway {
    /// The cache hint of a listing made of the served servers' (`features`: of resources or
    /// prompts, not tools), for a stateless-era host; none for a handshake-era one.
    pub(crate) fn list_hint(&self, era: Option<&ClientInfo>, features: bool) -> Option<CacheHint> {
        era?;
        Some((self.hub.cache_hint(&self.servers(), features)).unwrap_or(STALE_AT_ONCE))
    }

    /// `resources/list`, `resources/templates/list` or `prompts/list`, in one page.
    pub(crate) async fn list_features(
        &self,
        method: &str,
        era: Option<&ClientInfo>,
    ) -> Result<Value, RpcError> {
        let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
        let cache = self.list_hint(era, true);
        let page = match method {
            "resources/list" => page(&catalogue.resources, |entry| entry.resource.clone(), cache),
            "resources/templates/list" => {
                page(&catalogue.templates, |entry| entry.template.clone(), cache)
            }
            // Under the hub's names, which `prompts/get` takes.
            _ => page(
                &catalogue.prompts,
                |entry| Prompt {
                    name: entry.name.clone(),
                    ..entry.prompt.clone()
                },
                cache,
            ),
        };
        Ok(Value::Object(page))
    }

    /// A host's `prompts/get`, from the server whose prompt it is.
    pub(crate) async fn get_prompt(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        params: &Value,
        era: Option<&ClientInfo>,
    ) -> Result<RawResult, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
        let Some(entry) = catalogue.prompts.iter().find(|p| p.name == name) else {
            return Err((withheld(&catalogue, "prompt", name))
                .unwrap_or_else(|| invalid_params(format!("unknown prompt {name}"))));
        };
        let arguments = match params.get("arguments") {
            Some(Value::Object(arguments)) => arguments.clone(),
            _ => Map::new(),
        };
        let work = Work::Request {
            server: entry.server.clone(),
            origin: format!("prompts/get {name}"),
            request: Request::get_prompt(&entry.prompt.name, arguments).untyped(),
        };
        let route = Route::of(era, "prompts/get", params);
        self.run(host, id, Plan { work, route }).await
    }

    /// A host's `resources/read`: a result the gateway kept whole ([`large`]), a skill's file
    /// ([`skills`]), or the server's whose resource or template it is.
    pub(crate) async fn read(
        self: &Arc<Self>,
        host: &HostLink,
        id: HostRequestId,
        params: &Value,
        era: Option<&ClientInfo>,
    ) -> Result<RawResult, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(kept) = large::read(uri, &self.results) {
            return kept.map(RawResult::from).map_err(resource_not_found);
        }
        let catalogue = Box::pin(self.hub.catalogue_of(&self.servers())).await;
        if let Some(file) = skills::served_as(uri, &catalogue) {
            let read = Box::pin(self.read_skill_file(host, id, (params, era), file)).await?;
            return match era {
                Some(_) => hinted(read),
                None => Ok(read),
            };
        }
        if let Some(error) = withheld(&catalogue, "resource", uri) {
            return Err(error);
        }
        let listed = catalogue.resources.iter().find(|e| e.resource.uri == uri);
        // A URI from a template: the first server whose template scheme matches.
        let scheme = uri.split(':').next().unwrap_or_default();
        let templated = || {
            (catalogue.templates.iter())
                .find(|e| e.template.uri_template.split(':').next() == Some(scheme))
                .map(|entry| &entry.server)
        };
        let Some(server) = listed.map(|entry| &entry.server).or_else(templated) else {
            return Err(resource_not_found(format!("resource not found: {uri}")));
        };
        let work = Work::Request {
            server: server.clone(),
            origin: format!("resources/read {uri}"),
            request: Request::read_resource(uri).untyped(),
        };
        let route = Route::of(era, "resources/read", params);
        let read = self.run(host, id, Plan { work, route }).await?;
        match era {
            Some(_) => hinted(read),
            None => Ok(read),
        }
    }
}

/// A read for a stateless-era host: with the backend's cache hint, or one that is never wrong.
fn hinted(read: RawResult) -> Result<RawResult, RpcError> {
    match read.into_value() {
        Ok(Value::Object(mut read)) => {
            if !read.contains_key("ttlMs") {
                STALE_AT_ONCE.insert_into(&mut read);
            }
            Ok(Value::Object(read).into())
        }
        Ok(other) => Ok(other.into()),
        Err(error) => Err(internal_error(format!(
            "the server's read cannot be read: {error}"
        ))),
    }
}

/// One page of everything, as `T`s made of the catalogue's entries.
fn page<E, T: Listed + Serialize>(
    entries: &[E],
    item: impl Fn(&E) -> T,
    cache: Option<CacheHint>,
) -> Map<String, Value> {
    let page = ListResult {
        items: entries.iter().map(item).collect(),
        next_cursor: None,
        skipped: 0,
        cache,
    };
    page.to_json()
}
