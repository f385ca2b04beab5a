//! What the server role reads and writes in the stateless era (2026-07-28): each request's
//! `_meta`, the `server/discover` result, the -32022 refusal, `resultType`, the host's
//! `subscriptions/listen`, and the multi-round-trip results and retries the caller builds and
//! reads. The state transitions stay in `server.rs`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::machines::server::config::{ClientInfo, ServerConfig};
use crate::model::capabilities::{ListCapability, ServerCapabilities};
use crate::model::params::{CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION};
use crate::model::request::{Params, Request};
use crate::model::result_members::SERVER_INFO;
use crate::model::stateless::{ACKNOWLEDGED, ListenFilter, MULTI_ROUND_METHODS, SUBSCRIPTION_ID};
use crate::model::types::{Implementation, Notification};
use crate::model::versions::{STATELESS_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS};
use crate::wire::jsonrpc::RpcError;

/// The method that tells a host our versions, capabilities and identity.
pub(crate) const DISCOVER: &str = "server/discover";

/// What a request's `_meta` says about its era.
pub(crate) enum RequestEra {
    /// No `io.modelcontextprotocol/protocolVersion`: a handshake-era request.
    Unstated,
    /// A stateless revision we speak, with what the host says of itself on this request.
    Stateless(ClientInfo),
    /// A revision we do not speak per request (or not text): refuse with -32022.
    Unsupported(Option<String>),
}

/// Reads the era members of a request's `params._meta`.
pub(crate) fn request_era(params: Option<&Value>) -> RequestEra {
    let meta = params.and_then(|params| params.get("_meta"));
    let Some(version) = meta.and_then(|meta| meta.get(PROTOCOL_VERSION)) else {
        return RequestEra::Unstated;
    };
    let Some(version) = version.as_str() else {
        return RequestEra::Unsupported(None);
    };
    let Some(version) = STATELESS_VERSIONS.iter().find(|v| **v == version) else {
        return RequestEra::Unsupported(Some(version.to_owned()));
    };
    let member = |name: &str| meta.and_then(|meta| meta.get(name)).cloned();
    let client = (member(CLIENT_INFO))
        .and_then(|info| serde_json::from_value::<Implementation>(info).ok())
        .unwrap_or_default();
    let capabilities = match member(CLIENT_CAPABILITIES) {
        Some(capabilities @ Value::Object(_)) => capabilities,
        _ => json!({}),
    };
    RequestEra::Stateless(ClientInfo {
        protocol_version: (*version).to_owned(),
        client,
        capabilities,
    })
}

/// The refusal of a revision we do not speak per request, naming the ones we do.
pub(crate) fn unsupported_version(requested: Option<&str>) -> RpcError {
    let mut data = json!({ "supported": SUPPORTED_PROTOCOL_VERSIONS });
    if let Some(requested) = requested {
        data["requested"] = json!(requested);
    }
    RpcError {
        code: RpcError::UNSUPPORTED_PROTOCOL_VERSION,
        message: match requested {
            Some(requested) => format!("Unsupported protocol version: {requested}"),
            None => "Unsupported protocol version: `_meta` names none as text".to_owned(),
        },
        data: Some(data),
    }
}

/// The `server/discover` result: every revision we speak (a host that prefers the handshake
/// sends `initialize` next), our capabilities, identity and instructions.
pub(crate) fn discover_result(config: &ServerConfig) -> Value {
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": SUPPORTED_PROTOCOL_VERSIONS,
        "capabilities": config.capabilities.to_json(),
        "_meta": { SERVER_INFO: { "name": config.name, "version": config.version } },
    });
    if let Some(instructions) = &config.instructions {
        result["instructions"] = json!(instructions);
    }
    result
}

/// The host's open subscriptions, by the `subscriptions/listen` id as JSON text.
#[derive(Default)]
pub(crate) struct Subscriptions {
    open: BTreeMap<String, Subscription>,
}

struct Subscription {
    /// The host's id, echoed in every notification's `_meta` and in the closing answer.
    id: Value,
    agreed: ListenFilter,
}

impl Subscriptions {
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.open.contains_key(key)
    }

    /// Opens one: what the host asked for that our `capabilities` can honour (list changes
    /// we declare `listChanged` for, resource updates when we declare `subscribe`). Returns
    /// the acknowledgement to send first.
    pub(crate) fn open(
        &mut self,
        id: Value,
        params: Option<&Value>,
        capabilities: &ServerCapabilities,
    ) -> Vec<u8> {
        let asked = (params.and_then(|params| params.get("notifications")))
            .map_or_else(ListenFilter::default, ListenFilter::from_json);
        let changes = |list: Option<ListCapability>| list.is_some_and(|list| list.list_changed);
        let resources = capabilities.resources.unwrap_or_default();
        let agreed = ListenFilter {
            tools_list_changed: asked.tools_list_changed && changes(capabilities.tools),
            prompts_list_changed: asked.prompts_list_changed && changes(capabilities.prompts),
            resources_list_changed: asked.resources_list_changed && resources.list_changed,
            resource_uris: match resources.subscribe {
                true => asked.resource_uris,
                false => Vec::new(),
            },
            // The gateway relays no task notifications: its hosts poll.
            task_ids: Vec::new(),
        };
        let params = json!({
            "_meta": { SUBSCRIPTION_ID: id },
            "notifications": agreed.to_json(),
        });
        let acknowledgement = crate::wire::jsonrpc::notification(ACKNOWLEDGED, Some(params));
        self.open
            .insert(id.to_string(), Subscription { id, agreed });
        acknowledgement
    }

    /// Ends one the host cancelled; `false` if `key` names none.
    pub(crate) fn cancel(&mut self, key: &str) -> bool {
        self.open.remove(key).is_some()
    }

    /// The notification as each subscription that asked for it receives it, tagged with its
    /// id; none for a notification no subscription carries.
    pub(crate) fn route(&self, method: &str, params: Option<&Value>) -> Vec<Vec<u8>> {
        let uri = params
            .and_then(|params| params.get("uri"))
            .and_then(Value::as_str);
        let wanted = |filter: &ListenFilter| match method {
            Notification::TOOLS_LIST_CHANGED => filter.tools_list_changed,
            Notification::PROMPTS_LIST_CHANGED => filter.prompts_list_changed,
            Notification::RESOURCES_LIST_CHANGED => filter.resources_list_changed,
            Notification::RESOURCE_UPDATED => {
                uri.is_some_and(|uri| filter.resource_uris.iter().any(|u| u == uri))
            }
            _ => false,
        };
        (self.open.values())
            .filter(|subscription| wanted(&subscription.agreed))
            .map(|subscription| {
                let mut params = match params {
                    Some(Value::Object(params)) => params.clone(),
                    _ => Map::new(),
                };
                let meta = params.entry("_meta").or_insert_with(|| json!({}));
                if !meta.is_object() {
                    *meta = json!({});
                }
                meta[SUBSCRIPTION_ID] = subscription.id.clone();
                crate::wire::jsonrpc::notification(method, Some(Value::Object(params)))
            })
            .collect()
    }

    /// Ends every subscription gracefully: the answers to their `subscriptions/listen`.
    pub(crate) fn close_all(&mut self) -> Vec<Vec<u8>> {
        let open = std::mem::take(&mut self.open);
        (open.into_values())
            .map(|subscription| {
                let result = json!({
                    "resultType": "complete",
                    "_meta": { SUBSCRIPTION_ID: subscription.id },
                });
                crate::wire::jsonrpc::response(subscription.id, Ok(result))
            })
            .collect()
    }
}

/// An `input_required` result (stateless era): what the caller needs from the host before a
/// `tools/call`, `prompts/get` or `resources/read` can finish. The host retries the request
/// with the answers under the same keys and the `requestState` unchanged; read the retry with
/// [`HostInput::of`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InputRequired {
    /// Each request to the host (`elicitation/create`, `roots/list`, `sampling/createMessage`)
    /// under a key of the caller's, unique in this result.
    pub requests: BTreeMap<String, Request>,
    /// Opaque to the host, echoed on its retry.
    pub state: Option<String>,
}

impl InputRequired {
    /// The result to answer the host's request with.
    pub fn to_result(&self) -> Value {
        let requests: Map<String, Value> = (self.requests.iter())
            .map(|(key, request)| {
                let mut entry = json!({ "method": request.method() });
                if let Params::Value(params) = &request.params {
                    entry["params"] = params.clone();
                }
                (key.clone(), entry)
            })
            .collect();
        let mut result = json!({ "resultType": "input_required" });
        if !requests.is_empty() {
            result["inputRequests"] = Value::Object(requests);
        }
        if let Some(state) = &self.state {
            result["requestState"] = json!(state);
        }
        result
    }
}

/// What a host's retry of a multi-round-trip request carries: its answers to our
/// `inputRequests`, by key, and the `requestState` we gave it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostInput {
    /// `inputResponses`: each answer as sent, under the key of its request.
    pub responses: Map<String, Value>,
    /// `requestState`, as sent.
    pub state: Option<String>,
}

impl HostInput {
    /// The retry's input, if `method` may take one and `params` carry `inputResponses` or a
    /// `requestState`; members of another type are ignored.
    pub fn of(method: &str, params: Option<&Value>) -> Option<Self> {
        if !MULTI_ROUND_METHODS.contains(&method) {
            return None;
        }
        let params = params?;
        let responses = match params.get("inputResponses") {
            Some(Value::Object(responses)) => Some(responses.clone()),
            _ => None,
        };
        let state = params.get("requestState").and_then(Value::as_str);
        if responses.is_none() && state.is_none() {
            return None;
        }
        Some(Self {
            responses: responses.unwrap_or_default(),
            state: state.map(str::to_owned),
        })
    }
}
