//! `serve --listen` shares one hub among its hosts: a backend with no roots configured that
//! asks for its roots (`roots/list`) is given the roots of the handshake-era host whose call
//! waits on it, asked of that host over its session; with no call waiting, those of the
//! session host that called it last.

use std::time::Duration;

use mcp_smol::proto::{ClientCapabilities, Protocol};
use mcp_smol::{HttpServer, Options};
use serde_json::json;

use crate::gateway_listen::{Listening, listen_to};
use crate::support::{Scratch, bounded, quick, text};

#[test]
fn a_backends_roots_question_reaches_the_session_host_whose_call_waits_on_it() {
    let scratch = Scratch::new("listen-roots");
    // The backend asks half a second after its handshake: while the call that started it runs.
    let listening = listen_to(&scratch, &["late-roots", "--delay-ms", "500"], &[]);
    let (server, options) = roots_host(&listening);
    bounded(async {
        let (client, driver) = mcp_smol::start(server, options).unwrap();
        smol::spawn(driver).detach();
        let asked = client.server_requests().await;
        let answering = client.clone();
        smol::spawn(async move {
            while let Ok(request) = asked.recv().await {
                assert_eq!(request.method, "roots/list");
                let roots = json!({"roots": [{"uri": "file:///host/project", "name": "project"}]});
                answering.respond(request.id, Ok(roots)).await;
            }
        })
        .detach();
        let slow = json!({"steps": 20, "ms": 100});
        let done = client.call_tool("fx__progress", slow).await.unwrap();
        assert_eq!(text(&done), "done 20 steps");
        let reported = client.call_tool("fx__report", json!({})).await.unwrap();
        assert!(
            text(&reported).contains("file:///host/project"),
            "{reported:?}"
        );
        client.close().await;
    });
}

/// A backend with no roots configured that asks for them while no call waits on it is given
/// the roots of the session host that called it last (asked over that session's own stream);
/// that host's `notifications/roots/list_changed` makes the backend ask again, and the host is
/// asked again.
#[test]
fn roots_asked_with_no_call_waiting_go_to_the_session_host_that_called_the_server_last() {
    let scratch = Scratch::new("listen-roots-idle");
    // The backend asks two seconds after its handshake: after the call that started it.
    let listening = listen_to(&scratch, &["late-roots", "--delay-ms", "2000"], &[]);
    let (server, options) = roots_host(&listening);
    bounded(async {
        let (client, driver) = mcp_smol::start(server, options).unwrap();
        smol::spawn(driver).detach();
        let asked = client.server_requests().await;
        let (answered, heard) = smol::channel::unbounded();
        let answering = client.clone();
        smol::spawn(async move {
            let mut count = 0;
            while let Ok(request) = asked.recv().await {
                assert_eq!(request.method, "roots/list");
                count += 1;
                let uri = format!("file:///host/project-{count}");
                let roots = json!({"roots": [{"uri": uri, "name": "project"}]});
                answering.respond(request.id, Ok(roots)).await;
                let _ = answered.send(count).await;
            }
        })
        .detach();
        let echoed = client
            .call_tool("fx__echo", json!({"text": "hi"}))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "hi");
        // Reports until the backend has had an answer to its question.
        let report = |client: &mcp_smol::Client, until: &'static str| {
            let client = client.clone();
            async move {
                loop {
                    let reported = client.call_tool("fx__report", json!({})).await.unwrap();
                    let reported = text(&reported);
                    if reported.contains(until) {
                        return reported;
                    }
                    smol::Timer::after(Duration::from_millis(50)).await;
                }
            }
        };
        let first = report(&client, "\"roots\"").await;
        assert!(first.contains("file:///host/project-1"), "{first}");
        assert_eq!(heard.recv().await.unwrap(), 1);

        client
            .notify("notifications/roots/list_changed", None)
            .await;
        let again = report(&client, "roots-again-1").await;
        assert!(again.contains("file:///host/project-2"), "{again}");
        assert_eq!(heard.recv().await.unwrap(), 2);
        client.close().await;
    });
}

/// A handshake-era host of `listening` that declares roots.
fn roots_host(listening: &Listening) -> (HttpServer, Options) {
    let mut server = HttpServer::new(listening.url.clone());
    let bearer = format!("Bearer {}", listening.token);
    server.headers.push(("Authorization".to_owned(), bearer));
    let mut options: Options = quick();
    options.core.protocol = Protocol::Revision("2025-11-25");
    options.core.request_timeout = Duration::from_secs(60);
    options.core.capabilities = ClientCapabilities {
        roots: true,
        ..ClientCapabilities::default()
    };
    (server, options)
}
