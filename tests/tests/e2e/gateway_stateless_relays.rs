//! `mcp-cli serve`'s relays before hosts of the stateless era (2026-07-28), beyond forms: a
//! backend's link (URL-mode elicitation), its roots question and its -32042 (URL elicitation
//! required) each come to the host as an input round of its call when the request declared
//! what it takes, and the host's answers go back; raw lines for each case, and the TypeScript
//! SDK v2 and Python SDK 2.x hosts answering through their own handlers.

use std::time::{Duration, Instant};

use mcp_smol::ServerCommand;
use mcp_smol::serde_json::{Value, json};

use crate::gateway_stateless::{RawModernHost, run_host, serve};
use crate::support::{FIXTURE, Scratch};

/// The one input request of an `input_required` answer: its key, and the request.
fn input_request(round: &Value) -> (String, Value) {
    let result = &round["result"];
    assert_eq!(result["resultType"], "input_required", "{round}");
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{round}");
    let (key, request) = requests.iter().next().unwrap();
    (key.clone(), request.clone())
}

/// `call` again, answering `round`'s one input request under `key` with `answer`.
fn retry(call: &Value, round: &Value, key: &str, answer: Value) -> Value {
    let mut retry = call.clone();
    retry["requestState"] = round["result"]["requestState"].clone();
    retry["inputResponses"] = json!({ key: answer });
    retry
}

/// `serve` on a config of one fixture server `fx` with these arguments.
fn serve_one(scratch: &Scratch, args: &[&str], extra_env: &[(&str, &str)]) -> ServerCommand {
    let text = format!("[mcp.fx]\ncommand = {FIXTURE:?}\nargs = {args:?}\n");
    serve(scratch, &scratch.write("one.toml", &text), extra_env)
}

/// Sends `wrong` (a retry naming a parked call's state, of another tool, which cannot take
/// the call over) until the call is gone, its wait over; ids from `first` on.
fn wait_until_dropped(host: &mut RawModernHost, wrong: &Value, first: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for id in first.. {
        let refused = host.declaring(id, "tools/call", wrong.clone(), "2026-07-28", json!({}));
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        if message.contains("no call waiting") {
            return;
        }
        assert!(message.contains("belongs to"), "{refused}");
        assert!(
            Instant::now() < deadline,
            "the parked call outlived its wait"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The link the fixture's `open_link` and `needs_link` name.
const LINK: &str = "https://auth.example.com/connect?id=link-1";

/// A handshake-era backend's link (URL-mode elicitation) comes to a stateless-era host as an
/// input round when its request declared links, without the `elicitationId` and the
/// completion notification the 2026-07-28 revision removed, and the host's answer reaches the
/// backend; a request that declared forms only gets no round, and the backend hears `decline`.
#[test]
fn a_backends_link_is_an_input_round_for_a_request_that_declared_links() {
    let scratch = Scratch::new("gateway-modern-link");
    let mut host = RawModernHost::start(&serve_one(&scratch, &["url-elicitation"], &[]));
    let links = json!({"elicitation": {"url": {}}});
    let call = json!({"name": "fx__open_link", "arguments": {}});
    let round = host.declaring(1, "tools/call", call.clone(), "2026-07-28", links.clone());
    let (key, asked) = input_request(&round);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let params = &asked["params"];
    assert_eq!(params["mode"], "url", "{asked}");
    assert_eq!(params["url"], LINK, "{asked}");
    assert!(params.get("elicitationId").is_none(), "{asked}");
    let accepted = retry(&call, &round, &key, json!({"action": "accept"}));
    let done = host.declaring(2, "tools/call", accepted, "2026-07-28", links);
    assert_eq!(
        done["result"]["content"][0]["text"], "link accept",
        "{done}"
    );

    let forms = json!({"elicitation": {}});
    let declined = host.declaring(3, "tools/call", call, "2026-07-28", forms);
    assert_eq!(declined["result"]["resultType"], "complete", "{declined}");
    assert_eq!(declined["result"]["content"][0]["text"], "link decline");
    let completions = (host.others.iter())
        .filter(|line| line["method"] == "notifications/elicitation/complete")
        .count();
    assert_eq!(completions, 0, "{:?}", host.others);
}

/// A backend with no roots configured that asks for them during a stateless-era host's call
/// (a handshake-era backend's `roots/list` request, a stateless-era backend's input request)
/// gets them through an input round of that call when the request declared `roots`; a
/// request that did not gets no round and the backend no roots; a round the host never
/// answers ends, and the backend is answered (no roots) rather than left waiting.
#[test]
fn a_backends_roots_question_is_an_input_round_for_a_request_that_declared_roots() {
    let scratch = Scratch::new("gateway-modern-roots");
    let config = scratch.write(
        "roots.toml",
        &format!(
            "[mcp.old]\ncommand = {FIXTURE:?}\nargs = [\"roots-call\"]\n\n\
             [mcp.new]\ncommand = {FIXTURE:?}\nargs = [\"roots-call\", \"--era\", \"stateless\"]\n"
        ),
    );
    let command = serve(&scratch, &config, &[("MCP_CLI_INPUT_WAIT_MS", "300")]);
    let mut host = RawModernHost::start(&command);
    let roots = json!({"roots": {}});
    let project = json!({"roots": [{"uri": "file:///host/project", "name": "project"}]});
    let mut id = 0;
    for server in ["old", "new"] {
        let call = json!({"name": format!("{server}__show_roots"), "arguments": {}});
        id += 1;
        let round = host.declaring(id, "tools/call", call.clone(), "2026-07-28", roots.clone());
        let (key, asked) = input_request(&round);
        assert_eq!(asked["method"], "roots/list", "{asked}");
        let answered = retry(&call, &round, &key, project.clone());
        id += 1;
        let done = host.declaring(id, "tools/call", answered, "2026-07-28", roots.clone());
        let shown = done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(shown.contains("file:///host/project"), "{server}: {done}");

        id += 1;
        let bare = host.declaring(id, "tools/call", call, "2026-07-28", json!({}));
        assert_eq!(bare["result"]["resultType"], "complete", "{server}: {bare}");
        assert_eq!(
            bare["result"]["content"][0]["text"], "[]",
            "{server}: {bare}"
        );
    }

    // Never answered: the call is dropped once its wait ends, and the backend hears no roots.
    let call = json!({"name": "old__show_roots", "arguments": {}});
    let round = host.declaring(100, "tools/call", call.clone(), "2026-07-28", roots.clone());
    let (key, _) = input_request(&round);
    let echo = json!({"name": "old__echo", "arguments": {"text": "x"}});
    wait_until_dropped(&mut host, &retry(&echo, &round, &key, project), 101);
    let deadline = Instant::now() + Duration::from_secs(30);
    let report = json!({"name": "old__report", "arguments": {}});
    loop {
        let reported = host.declaring(1000, "tools/call", report.clone(), "2026-07-28", json!({}));
        let answers = reported["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        let answers: Vec<Value> = serde_json::from_str(&answers).unwrap();
        // The fixture's ids are `roots-of-ID`: ours for the three calls above, then this one.
        if answers.len() == 3 {
            assert_eq!(answers[2]["result"], json!({"roots": []}), "{answers:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the backend's question was left waiting"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A form a backend of either era asks during a stateless-era host's `prompts/get` or
/// `resources/read` is an input round of that request when it declared elicitation, and the
/// retry's answer reaches the backend; a request that did not declare it gets no round, and
/// the backend hears `decline`. A retry naming another request's state cannot take it over. A backend's -32042
/// answering a prompt is a round of links, and the prompt is got again once they are open.
#[test]
fn a_backends_form_during_a_prompt_or_a_read_is_an_input_round() {
    let scratch = Scratch::new("gateway-modern-reads");
    let forms = json!({"elicitation": {}});
    let text_of = |answer: &Value| {
        let result = &answer["result"];
        assert_eq!(result["resultType"], "complete", "{answer}");
        let text = (result["messages"][0]["content"]["text"].as_str())
            .or(result["contents"][0]["text"].as_str());
        text.unwrap_or_else(|| panic!("no text in {answer}"))
            .to_owned()
    };
    let prompt = ("prompts/get", json!({"name": "fx__plain"}));
    let read = ("resources/read", json!({"uri": "fx://text/hello"}));
    // A backend of each era: a form request of ours, or an input round of its own.
    for era in ["handshake", "stateless"] {
        let args = ["ask-in-reads", "--era", era];
        let mut host = RawModernHost::start(&serve_one(&scratch, &args, &[]));
        let mut id = 0;
        for (method, params) in [&prompt, &read] {
            id += 1;
            let round = host.declaring(id, method, params.clone(), "2026-07-28", forms.clone());
            let (key, asked) = input_request(&round);
            assert_eq!(asked["method"], "elicitation/create", "{era}: {asked}");
            assert_eq!(
                asked["params"]["message"], "Which colour?",
                "{era}: {asked}"
            );
            let answer = json!({"action": "accept", "content": {"colour": "teal"}});
            // The other method, with this round's state: it cannot take this request over.
            let (other, other_params) = if *method == "prompts/get" {
                &read
            } else {
                &prompt
            };
            let stolen = retry(other_params, &round, &key, answer.clone());
            id += 1;
            let refused = host.declaring(id, other, stolen, "2026-07-28", forms.clone());
            let message = refused["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("belongs to"), "{era}: {refused}");
            id += 1;
            let answered = retry(params, &round, &key, answer);
            let done = host.declaring(id, method, answered, "2026-07-28", forms.clone());
            let text = text_of(&done);
            assert_eq!(text, r#""accept" {"colour":"teal"}"#, "{era}: {method}");

            id += 1;
            let bare = host.declaring(id, method, params.clone(), "2026-07-28", json!({}));
            assert_eq!(text_of(&bare), r#""decline" null"#, "{era}: {method}");
        }
    }

    let mut host = RawModernHost::start(&serve_one(&scratch, &["ask-in-reads"], &[]));
    // A -32042 answering a prompt is a round of links, and the prompt is got again once open.
    let links = json!({"elicitation": {"url": {}}});
    let greet = json!({"name": "fx__greet", "arguments": {"name": "Ada"}});
    let round = host.declaring(
        20,
        "prompts/get",
        greet.clone(),
        "2026-07-28",
        links.clone(),
    );
    let (key, asked) = input_request(&round);
    assert_eq!(asked["params"]["mode"], "url", "{asked}");
    assert_eq!(asked["params"]["url"], LINK, "{asked}");
    let accepted = retry(&greet, &round, &key, json!({"action": "accept"}));
    let done = host.declaring(21, "prompts/get", accepted, "2026-07-28", links);
    assert_eq!(text_of(&done), "linked after 2 gets");
}

/// A backend's -32042 (URL elicitation required) before a stateless-era host: a request that
/// declared links gets them as an input round, and once the host accepts, the call is made
/// again (a call that would run as a task too); declined, or not declared, it is a tool error
/// (naming the link when the host could not be asked); a host that never answers leaves
/// nothing waiting.
#[test]
fn a_url_elicitation_required_error_is_an_input_round_and_the_call_is_made_again() {
    let links = json!({"elicitation": {"url": {}}});
    // A host that takes tasks: the -32042 comes before any task is made, and is the same round.
    let tasking = json!({"elicitation": {"url": {}},
                         "extensions": {mcp_smol::proto::TASKS_EXTENSION: {}}});
    let call = json!({"name": "fx__needs_link", "arguments": {}});
    let cases = [
        ("accept", "linked after 2 calls", &links),
        ("decline", "decline", &links),
        ("accept", "linked after 2 calls", &tasking),
    ];
    for (n, (name, answer, links)) in cases.into_iter().enumerate() {
        let scratch = Scratch::new(&format!("gateway-modern-required-{n}"));
        let mut host = RawModernHost::start(&serve_one(&scratch, &["url-required"], &[]));
        let round = host.declaring(1, "tools/call", call.clone(), "2026-07-28", links.clone());
        let (key, asked) = input_request(&round);
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        assert_eq!(asked["params"]["mode"], "url", "{asked}");
        assert_eq!(asked["params"]["url"], LINK, "{asked}");
        assert_eq!(
            asked["params"]["message"], "Connect your account",
            "{asked}"
        );
        let answered = retry(&call, &round, &key, json!({"action": name}));
        let done = host.declaring(2, "tools/call", answered, "2026-07-28", links.clone());
        let result = &done["result"];
        assert_eq!(
            result["isError"].as_bool(),
            (name == "decline").then_some(true)
        );
        let shown = result["content"][0]["text"].as_str().unwrap();
        assert!(shown.contains(answer), "{done}");
    }

    let scratch = Scratch::new("gateway-modern-required-forms");
    let mut host = RawModernHost::start(&serve_one(&scratch, &["url-required"], &[]));
    let forms = json!({"elicitation": {}});
    let refused = host.declaring(1, "tools/call", call.clone(), "2026-07-28", forms);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let why = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(why.contains(LINK) && why.contains("again"), "{why}");

    let scratch = Scratch::new("gateway-modern-required-gone");
    let env = [("MCP_CLI_INPUT_WAIT_MS", "200")];
    let mut host = RawModernHost::start(&serve_one(&scratch, &["url-required"], &env));
    let round = host.declaring(1, "tools/call", call.clone(), "2026-07-28", links.clone());
    let (key, _) = input_request(&round);
    let echo = json!({"name": "fx__echo", "arguments": {"text": "x"}});
    wait_until_dropped(
        &mut host,
        &retry(&echo, &round, &key, json!({"action": "accept"})),
        2,
    );
    // The backend is free: a new call goes through (its link counts as opened by now).
    let again = host.declaring(99, "tools/call", call, "2026-07-28", links);
    assert_eq!(
        again["result"]["content"][0]["text"],
        "linked after 2 calls"
    );
}

/// A TypeScript SDK v2 host at 2026-07-28 that declares forms, links and roots: a backend's
/// link, its roots question and its -32042 each come to it as an input round, which the SDK
/// answers through its own handlers, and the answers reach the backends.
const TS_RELAY_HOST: &str = r#"
const [pkg, config] = process.argv.slice(2);
const { Client } = await import(`${pkg}/dist/index.mjs`);
const { StdioClientTransport } = await import(`${pkg}/dist/stdio.mjs`);
const print = (step, value) => console.log(JSON.stringify({ step, ...value }));
const text = (result) => result.content.map((item) => item.text ?? "").join("");

const transport = new StdioClientTransport({
  command: process.env.MCP_CLI,
  args: ["--config", config, "serve"],
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "ts-relays", version: "1" }, {
  capabilities: { elicitation: { form: {}, url: {} }, roots: {} },
  versionNegotiation: { mode: { pin: "2026-07-28" } },
});
const asked = [];
client.setRequestHandler("elicitation/create", async (request) => {
  asked.push({ mode: request.params.mode ?? "form", url: request.params.url ?? null });
  return { action: "accept" };
});
client.setRequestHandler("roots/list", async () => {
  asked.push({ roots: true });
  return { roots: [{ uri: "file:///ts/project", name: "project" }] };
});
await client.connect(transport);
for (const tool of ["link__open_link", "roots__show_roots", "required__needs_link"]) {
  const result = await client.callTool({ name: tool, arguments: {} });
  print(tool, { text: text(result), isError: result.isError === true });
}
print("asked", { asked });
await client.close();
"#;

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn typescript_sdk_v2_host_answers_links_roots_and_url_elicitation_required_in_rounds() {
    let (node, package) = mcp_tests::ts_client();
    let scratch = Scratch::new("gateway-modern-ts-relays");
    let config = relays_config(&scratch);
    let script = scratch
        .write("host.mjs", TS_RELAY_HOST)
        .display()
        .to_string();
    let package = package.display().to_string();
    let config_arg = config.display().to_string();
    let args = [script.as_str(), package.as_str(), config_arg.as_str()];
    let lines = run_host(&scratch, &config, &node, &args);
    check_relay_steps(&lines, "file:///ts/project");
}

/// The Python SDK 2.x host, which chooses the era itself, with the same steps as
/// [`TS_RELAY_HOST`].
const PY_RELAY_HOST: &str = r#"
import json, os, sys
import anyio
from mcp import Client, StdioServerParameters
from mcp import types

def show(step, **value):
    print(json.dumps({"step": step, **value}), flush=True)

def text(result):
    return "".join(getattr(item, "text", "") for item in result.content)

async def main(config):
    asked = []
    async def elicit(context, params):
        asked.append({"mode": getattr(params, "mode", None) or "form", "url": getattr(params, "url", None)})
        return types.ElicitResult(action="accept")
    async def roots(context):
        asked.append({"roots": True})
        return types.ListRootsResult(roots=[types.Root(uri="file:///py/project", name="project")])
    server = StdioServerParameters(command=os.environ["MCP_CLI"], args=["--config", config, "serve"], env=dict(os.environ))
    async with Client(server, elicitation_callback=elicit, list_roots_callback=roots) as client:
        show("connected", version=client.protocol_version)
        for tool in ["link__open_link", "roots__show_roots", "required__needs_link"]:
            result = await client.call_tool(tool, {})
            show(tool, text=text(result), isError=bool(result.is_error))
    show("asked", asked=asked)

anyio.run(main, sys.argv[1])
"#;

#[test]
#[cfg_attr(no_python, ignore = "needs Python 3 with venv on PATH")]
fn python_sdk_2_host_answers_links_roots_and_url_elicitation_required_in_rounds() {
    let peer = mcp_tests::mcpserver_peer();
    let scratch = Scratch::new("gateway-modern-py-relays");
    let config = relays_config(&scratch);
    let script = scratch.write("host.py", PY_RELAY_HOST);
    let (script, config_arg) = (script.display().to_string(), config.display().to_string());
    let lines = run_host(&scratch, &config, &peer.program, &[&script, &config_arg]);
    let connected = lines.iter().find(|line| line["step"] == "connected");
    assert_eq!(
        connected.map(|line| &line["version"]),
        Some(&json!("2026-07-28")),
        "{lines:#?}"
    );
    check_relay_steps(&lines, "file:///py/project");
}

/// A server of each relay the SDK hosts answer: a link, a roots question, a -32042.
fn relays_config(scratch: &Scratch) -> std::path::PathBuf {
    scratch.write(
        "relays.toml",
        &format!(
            "[mcp.link]\ncommand = {FIXTURE:?}\nargs = [\"url-elicitation\"]\n\n\
             [mcp.roots]\ncommand = {FIXTURE:?}\nargs = [\"roots-call\"]\n\n\
             [mcp.required]\ncommand = {FIXTURE:?}\nargs = [\"url-required\"]\n"
        ),
    )
}

/// What an SDK host printed for the three relays: each call answered through its handlers,
/// its roots (`roots_uri`) reaching the server, and what it was asked, in order.
fn check_relay_steps(lines: &[Value], roots_uri: &str) {
    let step = |name: &str| {
        (lines.iter().find(|line| line["step"] == name))
            .unwrap_or_else(|| panic!("no step {name} in {lines:#?}"))
    };
    assert_eq!(step("link__open_link")["text"], "link accept", "{lines:#?}");
    let roots = step("roots__show_roots")["text"].as_str().unwrap();
    assert!(roots.contains(roots_uri), "{lines:#?}");
    let required = step("required__needs_link");
    assert_eq!(required["text"], "linked after 2 calls", "{lines:#?}");
    let asked = &step("asked")["asked"];
    let link = json!({"mode": "url", "url": LINK});
    assert_eq!(asked, &json!([link, {"roots": true}, link]), "{lines:#?}");
}
