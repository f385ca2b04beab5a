//! `mcp-cli serve --listen` answering with event streams: what a backend sends while a call
//! runs (progress), what the gateway asks of the host (an `ask` rule's form) and list changes
//! reach HTTP hosts of both eras: our own client and the TypeScript SDK v2 client. Raw HTTP
//! for the stream's edges: `GET` without a session, `subscriptions/listen` without
//! `Accept: text/event-stream`.

use std::process::Command;
use std::time::Duration;

use mcp_smol::proto::{ClientCapabilities, ListenFilter, Protocol, Request};
use mcp_smol::serde_json::{Value, json};
use mcp_smol::{HttpServer, Notification, Options};

use crate::gateway_listen::{
    Listening, STATELESS, exchange, listen_configured, raw_request, wait_for_log,
};
use crate::support::{Scratch, bounded, quick, text};

/// An `ask` rule on the fixture's `add`: the gateway asks the host before each call of it.
const ASK_ADD: &str = "[[permissions.rules]]\ntool = \"fx__add\"\naction = \"ask\"\n";

/// `serve --listen` on the fixture in `list-changed` mode (its tools change after the first
/// call), with [`ASK_ADD`].
fn listening(scratch: &Scratch) -> Listening {
    listen_configured(scratch, &["list-changed"], ASK_ADD, &[])
}

/// Our client over HTTP at `revision`, with the token, declaring elicitation.
fn host(listening: &Listening, revision: &'static str) -> (mcp_smol::Client, mcp_smol::Driver) {
    let mut server = HttpServer::new(listening.url.clone());
    let bearer = format!("Bearer {}", listening.token);
    server.headers.push(("Authorization".to_owned(), bearer));
    let mut options: Options = quick();
    options.core.protocol = Protocol::Revision(revision);
    options.core.handshake_timeout = Duration::from_secs(30);
    options.core.request_timeout = Duration::from_secs(30);
    options.core.capabilities = ClientCapabilities {
        elicitation: true,
        ..ClientCapabilities::default()
    };
    mcp_smol::start(server, options).unwrap()
}

async fn next_of(
    notifications: &smol::channel::Receiver<Notification>,
    method: &str,
) -> Notification {
    loop {
        let notification = notifications.recv().await.unwrap();
        if notification.method == method {
            return notification;
        }
    }
}

/// The progress values among the notifications received so far.
fn progress_so_far(notifications: &smol::channel::Receiver<Notification>) -> Vec<f64> {
    let mut values = Vec::new();
    while let Ok(notification) = notifications.try_recv() {
        if notification.method == "notifications/progress" {
            let params = notification.params.unwrap_or_default();
            values.push(params["progress"].as_f64().unwrap());
        }
    }
    values
}

/// The steps both eras share, once the host listens for list changes on `notifications`: a
/// call's three progress reports arrive before its result; the `ask` rule's form reaches the
/// host, whose yes lets the call through; the backend's list change comes (after the first
/// call), and the tool it added is listed.
async fn progress_form_and_list_change(
    client: &mcp_smol::Client,
    notifications: &smol::channel::Receiver<Notification>,
) -> Notification {
    let forms = client.server_requests().await;
    let answering = client.clone();
    let answered = smol::spawn(async move {
        let form = forms.recv().await.unwrap();
        assert_eq!(form.method, "elicitation/create");
        let message = form.params.as_ref().unwrap()["message"].as_str().unwrap();
        assert!(message.contains("fx__add"), "{message}");
        answering
            .respond(form.id, Ok(json!({"action": "accept", "content": {}})))
            .await;
    });

    let done = client
        .call_tool("fx__progress", json!({"steps": 3, "ms": 20}))
        .await
        .unwrap();
    assert_eq!(text(&done), "done 3 steps");
    // They came on the call's own stream, before its answer.
    assert_eq!(progress_so_far(notifications), [1.0, 2.0, 3.0]);

    let added = client
        .call_tool("fx__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert!(!added.is_error, "{added:?}");
    assert_eq!(text(&added), "3");
    answered.await;

    let changed = next_of(notifications, "notifications/tools/list_changed").await;
    let tools = client.list_tools().await.unwrap();
    assert!(
        tools.iter().any(|tool| tool.name == "fx__extra"),
        "{tools:?}"
    );
    changed
}

#[test]
fn a_session_host_gets_progress_forms_and_list_changes_over_event_streams() {
    let scratch = Scratch::new("sse-session");
    let listening = listening(&scratch);
    bounded(async {
        let (client, driver) = host(&listening, "2025-11-25");
        smol::spawn(driver).detach();
        let info = client.wait_ready().await.unwrap();
        assert_eq!(info.protocol_version, "2025-11-25");
        let notifications = client.notifications().await;
        // The list change comes on the session's own stream (GET).
        progress_form_and_list_change(&client, &notifications).await;
        client.close().await;
    });
}

#[test]
fn a_stateless_host_gets_progress_forms_and_list_changes_over_event_streams() {
    let scratch = Scratch::new("sse-stateless");
    let listening = listening(&scratch);
    bounded(async {
        let (client, driver) = host(&listening, "2026-07-28");
        smol::spawn(driver).detach();
        let info = client.wait_ready().await.unwrap();
        assert_eq!(info.protocol_version, "2026-07-28");
        let notifications = client.notifications().await;
        let filter = ListenFilter {
            tools_list_changed: true,
            ..ListenFilter::default()
        };
        let listener = client.clone();
        let listen = smol::spawn(async move { listener.request(Request::listen(&filter)).await });
        let ack = next_of(&notifications, "notifications/subscriptions/acknowledged").await;
        let subscription = ack
            .subscription_id()
            .expect("the ack names the subscription");
        assert_eq!(
            ack.acknowledged().map(|agreed| agreed.tools_list_changed),
            Some(true)
        );
        let changed = progress_form_and_list_change(&client, &notifications).await;
        assert_eq!(changed.subscription_id(), Some(subscription));
        drop(listen);
        client.close().await;
    });
}

#[test]
fn a_stream_asked_for_wrongly_is_refused_with_the_reason() {
    let scratch = Scratch::new("sse-refusals");
    let listening = listening(&scratch);
    let address = listening.address.as_str();
    let bearer = format!("Bearer {}", listening.token);
    let events = ("Accept", "text/event-stream");

    // GET without a session: stateless-era hosts listen with a request instead.
    let get = exchange(address, "GET", &[("Authorization", &bearer), events], b"");
    assert_eq!(get.status, 405, "{}", get.body);
    assert!(get.body.contains("subscriptions/listen"), "{}", get.body);
    let unknown = [
        ("Authorization", bearer.as_str()),
        events,
        ("Mcp-Session-Id", "nope"),
    ];
    let get = exchange(address, "GET", &unknown, b"");
    assert_eq!(get.status, 404, "{}", get.body);
    let get = exchange(address, "GET", &[("Authorization", &bearer)], b"");
    assert_eq!(get.status, 406, "{}", get.body);

    // subscriptions/listen from a host that takes no event stream.
    let listen = json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let listen = serde_json::to_vec(&listen).unwrap();
    let headers = [
        ("Authorization", bearer.as_str()),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "subscriptions/listen"),
    ];
    let refused = exchange(address, "POST", &headers, &listen);
    assert_eq!(refused.status, 406, "{}", refused.body);
    assert!(
        refused.body.contains("text/event-stream"),
        "{}",
        refused.body
    );
}

/// A stateless-era host that closes its call's event stream cancels the call at its backend
/// (the transport's cancellation), after the stream had carried its progress.
#[test]
fn closing_a_calls_event_stream_cancels_the_backend_call() {
    use std::io::{Read, Write};
    let scratch = Scratch::new("sse-hangup");
    let listening = listening(&scratch);
    let address = listening.address.as_str();
    let bearer = format!("Bearer {}", listening.token);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "slow",
    });
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "fx__progress", "arguments": {"steps": 100000, "ms": 20}, "_meta": meta}});
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Accept", "application/json, text/event-stream"),
        STATELESS[0],
        STATELESS[1],
    ];
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let body = serde_json::to_vec(&call).unwrap();
    stream
        .write_all(&raw_request(address, "POST", &headers, &body))
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("notifications/progress") {
        let read = stream.read(&mut buffer).unwrap();
        assert!(read > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&seen).to_lowercase();
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(head.contains(r#""progresstoken":"slow""#), "{head}");
    drop(stream);
    wait_for_log(&listening.log, "notifications/cancelled");
}

/// A TypeScript SDK v2 host over Streamable HTTP at `era` (`legacy` for the handshake era, or
/// a pinned revision), declaring elicitation: listen for tool changes (a GET stream in the
/// handshake era, `subscriptions/listen` in the stateless one), a call with progress, a call
/// an `ask` rule covers (its form accepted), the list change.
const TS_HOST: &str = r#"
const [pkg, url, token, era] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = await import(`${pkg}/dist/index.mjs`);
const print = (step, value) => console.log(JSON.stringify({ step, ...value }));
const text = (result) => result.content.map((item) => item.text ?? "").join("");
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const mode = era === "legacy" ? era : { pin: era };
const client = new Client({ name: "ts-http-sse", version: "1" }, {
  capabilities: { elicitation: { form: {} } },
  versionNegotiation: { mode },
});
const forms = [];
client.setRequestHandler("elicitation/create", async (request) => {
  forms.push(request.params.message);
  return { action: "accept", content: {} };
});
let changed = null;
const listChanged = new Promise((resolve) => { changed = resolve; });
client.setNotificationHandler("notifications/tools/list_changed", () => changed());
await client.connect(transport);
print("connected", { version: client.getNegotiatedProtocolVersion?.() ?? null });
const subscription = era === "legacy" ? null : await client.listen({ toolsListChanged: true });
const reports = [];
const slow = await client.callTool({ name: "fx__progress", arguments: { steps: 3, ms: 20 } },
  { onprogress: (progress) => reports.push(progress.progress) });
print("progress", { text: text(slow), reports });
const added = await client.callTool({ name: "fx__add", arguments: { a: 1, b: 2 } });
print("ask", { text: text(added), isError: added.isError === true, forms });
// Unreferenced: a pending timer would keep node running after the host is done.
const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("no list_changed within 20 s")), 20000).unref());
await Promise.race([listChanged, timeout]);
const after = (await client.listTools({}, { cacheMode: "refresh" }).catch(() => client.listTools())).tools.map((tool) => tool.name);
print("list-changed", { names: after });
if (subscription) await subscription.close();
await client.close();
"#;

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn typescript_sdk_v2_host_gets_progress_forms_and_list_changes_in_both_eras() {
    let (node, package) = mcp_tests::ts_client();
    for era in ["legacy", "2026-07-28"] {
        let scratch = Scratch::new(&format!("sse-ts-{era}"));
        let listening = listening(&scratch);
        let script = scratch.write("host.mjs", TS_HOST);
        let output = Command::new(&node)
            .arg(&script)
            .arg(&package)
            .args([&listening.url, &listening.token, era])
            .current_dir(&scratch.0)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{era}:\n{stdout}\n{stderr}");
        let lines: Vec<Value> = (stdout.lines())
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let step = |name: &str| {
            let found = lines.iter().find(|line| line["step"] == name);
            (found.unwrap_or_else(|| panic!("{era}: no step {name} in {stdout}"))).clone()
        };
        let version = step("connected")["version"].clone();
        match era {
            "legacy" => assert!(version.as_str().is_some_and(|v| v < "2026"), "{stdout}"),
            pinned => assert_eq!(version, pinned, "{stdout}"),
        }
        let progress = step("progress");
        assert_eq!(progress["text"], "done 3 steps", "{stdout}");
        assert_eq!(progress["reports"], json!([1, 2, 3]), "{stdout}");
        let ask = step("ask");
        assert_eq!(
            (ask["text"].clone(), ask["isError"].clone()),
            (json!("3"), json!(false))
        );
        assert!(
            ask["forms"][0].as_str().unwrap().contains("fx__add"),
            "{stdout}"
        );
        let names = step("list-changed")["names"].clone();
        assert!(
            names.as_array().unwrap().contains(&json!("fx__extra")),
            "{stdout}"
        );
    }
}
