//! URL-mode elicitation (2025-11-25) through the gateway: a backend's link reaches a host
//! that declared `elicitation.url` (the [`Relay`](super::Relay) declines it for any other),
//! and the backend's `notifications/elicitation/complete` follows it to that host.

use serde_json::json;

use crate::gateway::HostLink;

/// Tells `host` that the interaction `id` names has finished, if it takes URL-mode
/// elicitations (a host ignores an id it does not know, as the spec says it must).
pub(crate) fn complete(host: &HostLink, id: &str) {
    if host.client.takes_url_elicitation() {
        let params = json!({ "elicitationId": id });
        (host.server).notify("notifications/elicitation/complete", Some(params));
    }
}
