//! `mcp-cli serve` on stdin and stdout and a handshake-era host's roots: a backend with no
//! roots configured that asks for its roots is given the host's, and the host's
//! `notifications/roots/list_changed` makes the backends given them ask again.

use serde_json::{Value, json};

use crate::gateway::RawHost;
use crate::support::{FIXTURE, Scratch};

/// A backend's `roots/list` reaches a host that declared roots, and the host's roots go back
/// to the backend (a server with no roots of its own configured).
#[test]
fn a_backends_roots_question_is_relayed_to_a_host_that_declared_roots() {
    let scratch = Scratch::new("gateway-roots");
    let config = scratch.write(
        "roots.toml",
        &format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"late-roots\"]\n"),
    );
    let args = ["--config", config.to_str().unwrap(), "serve"];
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, r#"{"roots": {}}"#);
    let roots = json!({"roots": [{"uri": "file:///host/project", "name": "project"}]});
    // Reads lines until the answer to `id`, answering each roots question meanwhile; how
    // many were asked.
    let until_answered = |host: &mut RawHost, id: u64| {
        let mut asked = 0;
        loop {
            let line = host.next();
            if line["method"] == "roots/list" {
                asked += 1;
                let answer = json!({"jsonrpc": "2.0", "id": line["id"], "result": roots});
                host.send(&answer.to_string());
            } else if line["id"] == id {
                return (line, asked);
            }
        }
    };
    host.send(&json!({"jsonrpc": "2.0", "id": 100, "method": "tools/list"}).to_string());
    let (listed, mut asked) = until_answered(&mut host, 100);
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    // The backend asks on its own time: until it has had our answer, report again.
    let mut id = 101;
    let reported = loop {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "fx__report", "arguments": {}}});
        host.send(&call.to_string());
        let (reported, more) = until_answered(&mut host, id);
        asked += more;
        let text = reported["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        if asked > 0 && text.contains("roots") {
            break text;
        }
        id += 1;
        assert!(id < 400, "the backend never had the roots: {text}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(asked, 1, "{reported}");
    assert!(reported.contains("file:///host/project"), "{reported}");
    drop(host);
    assert!(serve.wait().unwrap().success());
}

/// A host's `notifications/roots/list_changed` reaches the backends given its roots (servers
/// with none configured), which ask for them again and get the new ones.
#[test]
fn a_hosts_roots_change_makes_the_backends_given_its_roots_ask_again() {
    let scratch = Scratch::new("gateway-roots-changed");
    let config = scratch.write(
        "roots.toml",
        &format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = [\"roots-call\"]\n"),
    );
    let args = ["--config", config.to_str().unwrap(), "serve"];
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, r#"{"roots": {}}"#);
    let roots =
        |name: &str| json!({"roots": [{"uri": format!("file:///host/{name}"), "name": name}]});
    // Reads lines until the answer to `id`, answering each roots question with `now`'s roots.
    let until_answered = |host: &mut RawHost, id: u64, now: &str| loop {
        let line = host.next();
        if line["method"] == "roots/list" {
            let answer = json!({"jsonrpc": "2.0", "id": line["id"], "result": roots(now)});
            host.send(&answer.to_string());
        } else if line["id"] == id {
            return line;
        }
    };
    let call = |id: u64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": {}}})
        .to_string()
    };
    host.send(&call(1, "fx__show_roots"));
    let shown = until_answered(&mut host, 1, "first");
    assert!(shown.to_string().contains("file:///host/first"), "{shown}");

    host.send(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#);
    // The backend asks again on its own time: report until it has had our answer.
    let mut id = 2;
    loop {
        host.send(&call(id, "fx__report"));
        let reported = until_answered(&mut host, id, "second");
        let text = reported["result"]["content"][0]["text"].as_str().unwrap();
        let answers: Vec<Value> = serde_json::from_str(text).unwrap();
        if let Some(again) = answers.iter().find(|a| a["id"] == "roots-again-1") {
            assert_eq!(again["result"], roots("second"), "{text}");
            assert_eq!(answers.len(), 2, "told once, asked once more: {text}");
            break;
        }
        id += 1;
        assert!(
            id < 400,
            "the backend was never told its roots changed: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(host);
    assert!(serve.wait().unwrap().success());
}
