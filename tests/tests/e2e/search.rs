//! Tool search: `mcp-cli search` and `serve --search` over eight real servers from npm and PyPI
//! (the bytes of tool definitions a host receives, twenty plain-language queries ranked), and
//! over the fixture (`call_tool` through the policy, the gateway's own tool names never
//! shadowed by a backend's, `--proxy`'s `action: "search"`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::gateway::RawHost;
use crate::support::{Scratch, fixture_block};

/// Twenty things a person asks for, each with the tool that does it.
const QUERIES: &[(&str, &str)] = &[
    ("read a file", "filesystem__read_text_file"),
    ("current time in Tokyo", "time__get_current_time"),
    ("create a git branch", "git__create_branch"),
    (
        "what time is it in New York when it is 9am in Paris",
        "time__convert_time",
    ),
    ("fetch a web page", "fetch__fetch"),
    ("download the contents of a URL as markdown", "fetch__fetch"),
    (
        "open a pull request on GitHub",
        "github__create_pull_request",
    ),
    ("write text to a file", "filesystem__write_file"),
    (
        "list the files in a directory",
        "filesystem__list_directory",
    ),
    (
        "find files matching a glob pattern",
        "filesystem__search_files",
    ),
    ("show changes that are not staged yet", "git__diff_unstaged"),
    ("commit my changes with a message", "git__commit"),
    ("show the git commit log", "git__log"),
    (
        "store a new entity in the knowledge graph",
        "memory__create_entities",
    ),
    ("search my knowledge graph", "memory__search_nodes"),
    (
        "think through a hard problem step by step",
        "sequential-thinking__sequentialthinking",
    ),
    ("add two numbers", "everything__get-sum"),
    ("echo a message back", "everything__echo"),
    ("report a bug as a GitHub issue", "github__create_issue"),
    ("merge a pull request", "github__merge_pull_request"),
];

/// A config with eight real servers: filesystem, everything, memory, sequential-thinking and
/// github from npm, git, time and fetch from PyPI: a test that uses it needs Node and Python.
pub(crate) fn eight_servers(scratch: &Scratch) -> PathBuf {
    let npm = mcp_tests::npm_bin();
    let python = mcp_tests::python_bin();
    let (search_npm, search_python) = mcp_tests::search_bins();
    let repo = scratch.0.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let init = Command::new("git").args(["init", "-q"]).arg(&repo).status();
    assert!(init.unwrap().success(), "git init");
    let server = |name: &str, program: PathBuf, args: &[&str]| {
        format!("[mcp.{name}]\ncommand = {program:?}\nargs = {args:?}\n\n")
    };
    let repo = repo.to_str().unwrap();
    let text = [
        server("filesystem", npm.join("mcp-server-filesystem"), &[repo]),
        server("everything", npm.join("mcp-server-everything"), &[]),
        server("memory", npm.join("mcp-server-memory"), &[]),
        server(
            "sequential-thinking",
            search_npm.join("mcp-server-sequential-thinking"),
            &[],
        ),
        server("github", search_npm.join("mcp-server-github"), &[]),
        server(
            "git",
            python.join("mcp-server-git"),
            &["--repository", repo],
        ),
        server("time", python.join("mcp-server-time"), &[]),
        server("fetch", search_python.join("mcp-server-fetch"), &[]),
    ]
    .concat();
    scratch.write("eight.toml", &text)
}

/// What a tool call through the gateway returned, as structured content.
fn structured(answer: &Value) -> &Value {
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{answer}");
    &result["structuredContent"]
}

/// The tools `search_tools` answers `query` with, best first.
fn hits(host: &mut RawHost, id: u64, query: &str, limit: u64) -> Vec<Value> {
    let arguments = json!({"query": query, "limit": limit});
    let params = json!({"name": "search_tools", "arguments": arguments});
    let answer = host.request(id, "tools/call", params);
    structured(&answer)["tools"].as_array().unwrap().clone()
}

/// The names `search_tools` answers `query` with, best first.
fn found(host: &mut RawHost, id: u64, query: &str, limit: u64) -> Vec<String> {
    (hits(host, id, query, limit).iter())
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn search_finds_the_right_tool_among_eight_real_servers() {
    let scratch = Scratch::new("search-real");
    let config = eight_servers(&scratch);
    let config = config.to_str().unwrap();

    // Every tool, as a host receives them from `serve`.
    let (mut serve, mut host) =
        RawHost::start_patient(&scratch, &["--config", config, "serve"], "{}");
    let listed = host.request(1, "tools/list", json!({}));
    let every = &listed["result"]["tools"];
    let servers: BTreeSet<&str> = (every.as_array().unwrap().iter())
        .filter_map(|tool| tool["name"].as_str()?.split_once("__"))
        .map(|(server, _)| server)
        .collect();
    assert_eq!(servers.len(), 8, "{servers:?}");
    let every_bytes = every.to_string().len();
    drop(host);
    assert!(serve.wait().unwrap().success());

    // Three tools instead, with `--search`.
    let args = ["--config", config, "serve", "--search"];
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, "{}");
    let listed = host.request(1, "tools/list", json!({}));
    let three = &listed["result"]["tools"];
    assert_eq!(three.as_array().unwrap().len(), 3, "{listed}");
    let search_bytes = three.to_string().len();

    let (mut first, mut top3) = (0, 0);
    for (id, (query, wanted)) in (2..).zip(QUERIES) {
        let names = found(&mut host, id, query, 3);
        match names.iter().position(|name| name == wanted) {
            Some(0) => first += 1,
            place => println!("miss: {query:?} wants {wanted}, ranked {place:?}: {names:?}"),
        }
        top3 += usize::from(names.iter().any(|name| name == wanted));
    }
    // Every tool of every server, asked for by name, comes first: by its shown name, by its
    // own name (or one of that name, when two servers have one), by its title.
    let mut id = 1000;
    for tool in every.as_array().unwrap() {
        let shown = tool["name"].as_str().unwrap();
        id += 3;
        let by_shown = hits(&mut host, id, shown, 1);
        assert_eq!(by_shown[0]["name"], shown, "by its shown name");
        // Its own name, which the shown one may shorten (`git_add` of server git is `git__add`).
        let own = by_shown[0]["tool"].as_str().unwrap();
        let by_name = hits(&mut host, id + 1, own, 1);
        assert_eq!(by_name[0]["tool"], own, "{own}: {by_name:?}");
        if let Some(title) = tool["title"].as_str() {
            let by_title = found(&mut host, id + 2, title, 1);
            let titles: Vec<&Value> = (every.as_array().unwrap().iter())
                .filter(|other| other["name"] == by_title[0].as_str())
                .map(|other| &other["title"])
                .collect();
            assert_eq!(titles, [&json!(title)], "{title}: {by_title:?}");
        }
    }
    drop(host);
    assert!(serve.wait().unwrap().success());
    let count = every.as_array().unwrap().len();
    println!(
        "tool definitions from tools/list, {count} tools of {servers:?}: {every_bytes} bytes \
         without --search, {search_bytes} with; queries: {first}/{} first, {top3}/{} in the top 3",
        QUERIES.len(),
        QUERIES.len()
    );
    assert!(
        first >= 17,
        "only {first} of {} ranked first",
        QUERIES.len()
    );
    assert_eq!(top3, QUERIES.len(), "not every query in the top 3");
    assert!(
        search_bytes * 10 < every_bytes,
        "{search_bytes} vs {every_bytes}"
    );

    // The same index on the command line.
    let run = scratch.cli(&[
        "--config",
        config,
        "search",
        "--json",
        "--limit",
        "2",
        "create",
        "a git branch",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let hits: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(hits.as_array().unwrap().len(), 2, "{hits}");
    assert_eq!(hits[0]["name"], "git__create_branch", "{hits}");
    assert_eq!(hits[0]["server"], "git");
    assert!(hits[0]["score"].as_f64().unwrap() >= hits[1]["score"].as_f64().unwrap());
}

/// The fixture as `fx` with its `add` tool denied and its `structured` tool asked about, and
/// as `search`, whose tools bear the gateway's own tool names.
fn fixture_config(scratch: &Scratch) -> String {
    let text = format!(
        "{}\n{}\n[[permissions.rules]]\ntool = \"fx__add\"\naction = \"deny\"\n\n\
         [[permissions.rules]]\ntool = \"fx__structured\"\naction = \"ask\"\n",
        fixture_block("fx", "good"),
        fixture_block("search", "gateway-names"),
    );
    scratch
        .write("search.toml", &text)
        .to_str()
        .unwrap()
        .to_owned()
}

fn call(host: &mut RawHost, id: u64, tool: &str, arguments: Value) -> Value {
    let answer = host.request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    );
    answer["result"].clone()
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn serve_search_describes_and_calls_through_the_policy() {
    let scratch = Scratch::new("search-serve");
    let config = fixture_config(&scratch);
    let args = ["--config", &config, "serve", "--search"];
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, r#"{"elicitation": {}}"#);
    assert_eq!(
        host.tool_names(1),
        ["search_tools", "describe_tool", "call_tool"]
    );

    let names = found(&mut host, 2, "echo the message", 5);
    assert_eq!(
        names.first().map(String::as_str),
        Some("fx__echo"),
        "{names:?}"
    );
    // A denied tool is not found, and not called.
    assert!(!found(&mut host, 3, "add numbers", 10).contains(&"fx__add".to_owned()));
    let denied = call(
        &mut host,
        4,
        "call_tool",
        json!({"name": "fx__add", "arguments": {"a": 1, "b": 2}}),
    );
    assert_eq!(denied["isError"], true, "{denied}");
    assert!(text(&denied).contains("fx__add"), "{denied}");

    let echoed = call(
        &mut host,
        5,
        "call_tool",
        json!({"name": "fx__echo", "arguments": {"text": "hi"}}),
    );
    assert_ne!(echoed["isError"], true, "{echoed}");
    assert!(text(&echoed).contains("hi"), "{echoed}");

    let described = call(&mut host, 6, "describe_tool", json!({"name": "fx__echo"}));
    let definition = &described["structuredContent"];
    assert_eq!(definition["name"], "fx__echo", "{described}");
    assert!(
        definition["inputSchema"]["properties"].is_object(),
        "{described}"
    );
    let unknown = call(&mut host, 7, "describe_tool", json!({"name": "fx__nope"}));
    assert_eq!(unknown["isError"], true, "{unknown}");

    // An `ask` rule asks the host, as for a direct call, and the call waits for the answer.
    let asked = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {
        "name": "call_tool", "arguments": {"name": "fx__structured"}}});
    host.send(&asked.to_string());
    let question = host.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let message = question["params"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("fx__structured"), "{question}");
    let accept = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept"}});
    host.send(&accept.to_string());
    let answered = host.next();
    assert_eq!(answered["id"], 10, "{answered}");
    assert_eq!(
        answered["result"]["structuredContent"]["answer"], 42,
        "{answered}"
    );

    let empty = call(&mut host, 8, "search_tools", json!({"query": " "}));
    assert_eq!(empty["isError"], true, "{empty}");
    // Only the three tools are offered: a backend's tool is reached through call_tool.
    let direct = host.request(
        9,
        "tools/call",
        json!({"name": "fx__echo", "arguments": {}}),
    );
    assert_eq!(direct["error"]["code"], -32602, "{direct}");
    drop(host);
    assert!(serve.wait().unwrap().success());
}

#[test]
fn a_backends_tool_never_shadows_the_gateways_own() {
    let scratch = Scratch::new("search-shadow");
    let config = fixture_config(&scratch);
    let mine = ["search_tools", "describe_tool", "call_tool", "mcp"];

    // Listed whole, the backend's tools keep their server's prefix.
    let args = ["--config", &config, "serve"];
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, "{}");
    let names = host.tool_names(1);
    for name in [
        "search__tools",
        "search__describe_tool",
        "search__call_tool",
        "search__mcp",
    ] {
        assert!(names.contains(&name.to_owned()), "{name}: {names:?}");
    }
    assert!(
        names.iter().all(|name| !mine.contains(&name.as_str())),
        "{names:?}"
    );
    drop(host);
    assert!(serve.wait().unwrap().success());

    // With --search, `search_tools` is ours; the backend's is found and called by its name.
    let args = ["--config", &config, "serve", "--search"];
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, "{}");
    let names = found(&mut host, 1, "search tools", 10);
    assert!(names.contains(&"search__tools".to_owned()), "{names:?}");
    let theirs = call(&mut host, 2, "call_tool", json!({"name": "search__tools"}));
    assert_eq!(text(&theirs), "this is search_tools", "{theirs}");
    let theirs = call(
        &mut host,
        3,
        "call_tool",
        json!({"name": "search__call_tool"}),
    );
    assert_eq!(text(&theirs), "this is call_tool", "{theirs}");
    let ours = call(&mut host, 4, "call_tool", json!({"name": "call_tool"}));
    assert_eq!(ours["isError"], true, "{ours}");
    drop(host);
    assert!(serve.wait().unwrap().success());

    // With --proxy, `mcp` is ours, and it searches too.
    let args = ["--config", &config, "serve", "--proxy"];
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, "{}");
    assert_eq!(host.tool_names(1), ["mcp"]);
    let searched = call(
        &mut host,
        2,
        "mcp",
        json!({"action": "search", "query": "echo"}),
    );
    let names: Vec<&str> = (searched["structuredContent"]["tools"].as_array())
        .unwrap_or_else(|| panic!("{searched}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names.first(), Some(&"fx__echo"), "{searched}");
    let input = json!({"action": "call", "server": "search", "tool": "mcp"});
    let theirs = call(&mut host, 3, "mcp", input);
    assert_eq!(text(&theirs), "this is mcp", "{theirs}");
    drop(host);
    assert!(serve.wait().unwrap().success());
}

#[test]
fn search_on_the_command_line() {
    let scratch = Scratch::new("search-cli");
    let config = fixture_config(&scratch);
    let run = scratch.cli(&["--config", &config, "search", "echo", "the", "message"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("fx__echo "), "{}", run.stdout);
    assert!(!run.stdout.contains("fx__add"), "{}", run.stdout);

    let run = scratch.cli(&["--config", &config, "search", "--limit", "1", "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);

    let run = scratch.cli(&["--config", &config, "search", "--json", "zebra"]);
    assert_eq!((run.code, run.stdout.trim()), (0, "[]"), "{}", run.stderr);
    let run = scratch.cli(&["--config", &config, "search", "zebra"]);
    assert!(run.stderr.contains("no tool matches"), "{}", run.stderr);

    let run = scratch.cli(&["--config", &config, "search", " "]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = scratch.cli(&["--config", &config, "search"]);
    assert_eq!(run.code, 2, "{}", run.stderr);

    // A server that cannot start fails the run as `tools` does; the others are searched.
    let broken = format!(
        "{}[mcp.broken]\ncommand = \"/nonexistent/server\"\n",
        std::fs::read_to_string(&config).unwrap()
    );
    let broken = scratch.write("broken.toml", &broken);
    let run = scratch.cli(&["--config", broken.to_str().unwrap(), "search", "echo"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stdout.starts_with("fx__echo "), "{}", run.stdout);
    assert!(run.stderr.contains("broken"), "{}", run.stderr);
}

/// Tools a server's config always loads (`always_load`, `alwaysLoad` in JSON) are listed by
/// `serve --search` beside its three tools and called by their names; search still finds
/// them; a tool not loaded always is refused as before, and so is one the policy denies.
#[test]
fn tools_the_config_always_loads_are_listed_beside_the_search_tools() {
    let scratch = Scratch::new("search-always-load");
    let toml = format!(
        "{}always_load = [\"echo\", \"add\"]\n\n[[permissions.rules]]\ntool = \"fx__add\"\n\
         action = \"deny\"\n",
        fixture_block("fx", "good")
    );
    let toml = scratch.write("always.toml", &toml);
    let fixture = crate::support::FIXTURE;
    let json = json!({"mcpServers": {"all": {"command": fixture, "args": ["resources"],
                                              "alwaysLoad": true}}});
    let json = scratch.write("always.json", &json.to_string());
    let (toml, json) = (toml.to_str().unwrap(), json.to_str().unwrap());
    let args = ["--config", toml, "--config", json, "serve", "--search"];
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, "{}");
    let listed = host.request(1, "tools/list", json!({}));
    let names: Vec<&str> = (listed["result"]["tools"].as_array().unwrap().iter())
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(&names[..3], ["search_tools", "describe_tool", "call_tool"]);
    assert!(names.contains(&"fx__echo"), "{names:?}");
    // Every tool of `all`; `fx__add` is denied, so never listed.
    assert!(names.contains(&"all__echo"), "{names:?}");
    assert!(!names.contains(&"fx__add"), "{names:?}");
    assert!(!names.contains(&"fx__fail"), "{names:?}");
    let echoed = call(&mut host, 2, "fx__echo", json!({"text": "direct"}));
    assert_eq!(text(&echoed), "direct", "{echoed}");
    let refused = host.request(
        3,
        "tools/call",
        json!({"name": "fx__fail", "arguments": {}}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("always_load"),
        "{refused}"
    );
    assert!(found(&mut host, 4, "fx__echo", 1) == ["fx__echo"]);
    drop(host);
    assert!(serve.wait().unwrap().success());

    // `true` and globs only: anything else is a config error naming the line.
    let bad = scratch.write(
        "bad.toml",
        &format!("{}always_load = 5\n", fixture_block("fx", "good")),
    );
    let run = scratch.cli(&["--config", bad.to_str().unwrap(), "tools"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("always_load"), "{run:?}");
}
