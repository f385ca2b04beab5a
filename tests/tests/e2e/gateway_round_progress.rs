//! A stateless-era host's call over `serve --listen` that goes through an input round (here
//! an `ask` rule's question) gets the progress its backend sends afterwards: on the stream
//! of the retry that answered, not of the first request, whose exchange has ended.

use std::time::Duration;

use mcp_smol::proto::{ClientCapabilities, Protocol};
use mcp_smol::{HttpServer, Options};
use serde_json::json;

use crate::gateway_listen::listen_configured;
use crate::support::{Scratch, bounded, quick, text};

#[test]
fn progress_after_an_input_round_reaches_the_host() {
    let scratch = Scratch::new("round-progress");
    let rule = "[[permissions.rules]]\ntool = \"fx__progress\"\naction = \"ask\"\n";
    let listening = listen_configured(&scratch, &["good"], rule, &[]);
    let mut server = HttpServer::new(listening.url.clone());
    let bearer = format!("Bearer {}", listening.token);
    server.headers.push(("Authorization".to_owned(), bearer));
    let mut options: Options = quick();
    options.core.protocol = Protocol::Revision("2026-07-28");
    options.core.request_timeout = Duration::from_secs(60);
    options.core.capabilities = ClientCapabilities {
        elicitation: true,
        ..ClientCapabilities::default()
    };
    bounded(async {
        let (client, driver) = mcp_smol::start(server, options).unwrap();
        smol::spawn(driver).detach();
        let notifications = client.notifications().await;
        let forms = client.server_requests().await;
        let answering = client.clone();
        smol::spawn(async move {
            while let Ok(form) = forms.recv().await {
                let yes = json!({"action": "accept", "content": {}});
                answering.respond(form.id, Ok(yes)).await;
            }
        })
        .detach();
        let arguments = json!({"steps": 3, "ms": 20});
        let done = client.call_tool("fx__progress", arguments).await.unwrap();
        assert_eq!(text(&done), "done 3 steps");
        let mut progress = Vec::new();
        while let Ok(notification) = notifications.try_recv() {
            if notification.method == "notifications/progress" {
                let params = notification.params.unwrap_or_default();
                progress.push(params["progress"].as_f64().unwrap());
            }
        }
        assert_eq!(progress, [1.0, 2.0, 3.0]);
        client.close().await;
    });
}
