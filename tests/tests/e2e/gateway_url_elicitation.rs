//! URL-mode elicitation (2025-11-25) through `mcp-cli serve`: the hub declares
//! `elicitation: {"form": {}, "url": {}}` to its servers; a backend's link reaches a host that
//! declared URL mode, with the backend's `notifications/elicitation/complete` after it; a host
//! that declared forms only never sees the link, and the backend is told `decline`. A
//! backend's -32042 (URL elicitation required) reaches a host that takes links as it came, and
//! any other host, and the command line, as a failure naming the link.

use std::time::Duration;

use mcp_smol::proto::{ClientCapabilities, Protocol, Request, RpcError};
use mcp_smol::{Client, Options};
use serde_json::{Value, json};

use crate::support::{FIXTURE, Scratch, bounded, close_and_check, quick, start, text};
use crate::tasks::gateway;

fn host(urls: bool) -> Options {
    let mut options = quick();
    options.core.protocol = Protocol::Revision("2025-11-25");
    options.core.request_timeout = Duration::from_secs(30);
    options.core.capabilities = ClientCapabilities {
        elicitation: true,
        elicitation_url: urls,
        ..ClientCapabilities::default()
    };
    options
}

/// Accepts every elicitation the host is asked; the params of each, in order.
async fn accept_all(client: &Client) -> smol::channel::Receiver<Value> {
    let asked = client.server_requests().await;
    let (seen, heard) = smol::channel::unbounded();
    let client = client.clone();
    smol::spawn(async move {
        while let Ok(request) = asked.recv().await {
            let _ = seen.send(request.params.clone().unwrap_or_default()).await;
            client
                .respond(request.id, Ok(json!({"action": "accept"})))
                .await;
        }
    })
    .detach();
    heard
}

#[test]
fn a_backends_link_reaches_a_host_that_takes_links_and_its_completion_follows() {
    let scratch = Scratch::new("gateway-url-elicitation");
    let log = scratch.0.join("received.log");
    let args = ["url-elicitation", "--log-received", log.to_str().unwrap()];
    let config = format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = {args:?}\n");
    scratch.project_file(".mcp-cli.toml", &config);
    let command = gateway(&scratch);
    bounded(async {
        let client = start(&command, host(true));
        let notes = client.notifications().await;
        let asked = accept_all(&client).await;
        let call = Request::call_tool("fx__open_link", json!({}));
        assert_eq!(text(&client.request(call).await.unwrap()), "link accept");
        let form = asked.recv().await.unwrap();
        assert_eq!(form["mode"], "url", "{form}");
        assert_eq!(form["url"], "https://auth.example.com/connect?id=link-1");
        assert_eq!(form["elicitationId"], "link-1");
        loop {
            let note = notes.recv().await.unwrap();
            if note.method == "notifications/elicitation/complete" {
                assert_eq!(note.params.unwrap()["elicitationId"], "link-1");
                break;
            }
        }
        close_and_check(&client).await;

        // Forms only: the link never reaches the host, and the backend hears `decline`.
        let client = start(&command, host(false));
        let asked = accept_all(&client).await;
        let call = Request::call_tool("fx__open_link", json!({}));
        assert_eq!(text(&client.request(call).await.unwrap()), "link decline");
        assert!(asked.try_recv().is_err());
        close_and_check(&client).await;
    });
    // The hub told the backend it takes links.
    let received = std::fs::read_to_string(&log).unwrap();
    let initialize = received
        .lines()
        .find(|l| l.contains("\"initialize\""))
        .unwrap();
    let initialize: Value = serde_json::from_str(initialize).unwrap();
    let declared = &initialize["params"]["capabilities"]["elicitation"];
    assert_eq!(declared, &json!({"form": {}, "url": {}}), "{initialize}");
}

/// The link the fixture's `needs_link` names in its -32042.
const LINK: &str = "https://auth.example.com/connect?id=link-1";

/// A scratch folder whose only server answers `needs_link`'s first call with -32042.
fn url_required(name: &str) -> Scratch {
    let scratch = Scratch::new(name);
    let config = format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"url-required\"]\n");
    scratch.project_file(".mcp-cli.toml", &config);
    scratch
}

/// A backend's -32042 (URL elicitation required) reaches a handshake-era host that takes links
/// as it came, `data` and all, and the call made again goes through; a host that takes forms
/// only gets a tool error naming the link and saying to call again.
#[test]
fn a_url_elicitation_required_error_reaches_a_host_that_takes_links_as_it_came() {
    let scratch = url_required("gateway-url-required");
    let command = gateway(&scratch);
    bounded(async {
        let client = start(&command, host(true));
        let call = Request::call_tool("fx__needs_link", json!({}));
        let refused = client.request(call.clone()).await.unwrap_err();
        let mcp_smol::Error::Request(mcp_smol::proto::RequestError::Remote(rpc)) = refused else {
            panic!("not the backend's error: {refused:?}");
        };
        assert_eq!(rpc.code, RpcError::URL_ELICITATION_REQUIRED, "{rpc:?}");
        let data = rpc.data.unwrap();
        assert_eq!(data["elicitations"][0]["url"], LINK, "{data}");
        assert_eq!(data["elicitations"][0]["elicitationId"], "link-1", "{data}");
        let again = client.request(call).await.unwrap();
        assert_eq!(text(&again), "linked after 2 calls");
        close_and_check(&client).await;
    });

    // Asked to run as a task: the -32042 comes before any task is made, and goes as it came.
    let scratch = url_required("gateway-url-required-task");
    let command = gateway(&scratch);
    bounded(async {
        let client = start(&command, host(true));
        let params = json!({"name": "fx__needs_link", "arguments": {}, "task": {}});
        let as_task = Request::new("tools/call", Some(params));
        let refused = client.request(as_task.clone()).await.unwrap_err();
        let mcp_smol::Error::Request(mcp_smol::proto::RequestError::Remote(rpc)) = refused else {
            panic!("not the backend's error: {refused:?}");
        };
        assert_eq!(rpc.code, RpcError::URL_ELICITATION_REQUIRED, "{rpc:?}");
        // Made again, it runs: the backend answers at once, so the task is the gateway's own.
        let again = client.request(as_task).await.unwrap();
        assert!(again["task"]["taskId"].is_string(), "{again}");
        close_and_check(&client).await;
    });

    let scratch = url_required("gateway-url-required-forms");
    let command = gateway(&scratch);
    bounded(async {
        let client = start(&command, host(false));
        let call = Request::call_tool("fx__needs_link", json!({}));
        let result = client.request(call).await.unwrap();
        assert!(result.is_error, "{result:?}");
        let why = text(&result);
        assert!(why.contains(LINK) && why.contains("again"), "{why}");
        close_and_check(&client).await;
    });
}

/// On the command line, a -32042 is a tool failure that names the link to open and says to
/// make the call again, not an opaque code.
#[test]
fn mcp_cli_call_names_the_link_a_url_elicitation_required_error_asks_to_open() {
    let scratch = url_required("cli-url-required");
    let run = scratch.cli(&["call", "fx__needs_link"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains(LINK), "{}", run.stderr);
    assert!(
        run.stderr.contains("Connect your account"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("call it again"), "{}", run.stderr);
}
