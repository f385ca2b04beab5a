//! `structuredContent` checked against the tool's `outputSchema`: the fixture's lying tool
//! caught by `call` (result shown, path named, exit 1) and by the gateway (a tool error that
//! keeps the content), the check turned off per call and per server, and the reference
//! servers' structured tools validating clean.

use serde_json::{Value, json};

use crate::gateway::RawHost;
use crate::support::{FIXTURE, Scratch, fixture_block};

#[test]
fn a_result_that_breaks_its_schema_is_shown_and_exits_1_naming_the_path() {
    let dir = Scratch::new("schema-lying");
    dir.project_file(".mcp-cli.toml", &fixture_block("fx", "output-schema"));
    let run = dir.cli(&["call", "fx", "lying"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "{\"temperature\":\"hot\",\"conditions\":\"sunny\"}\n"
    );
    assert!(
        run.stderr.contains("fx__lying: the result does not match the tool's outputSchema at /temperature: want number, but got string"),
        "{}",
        run.stderr
    );

    // --json: the whole result on stdout, the finding as one JSON object on stderr.
    let run = dir.cli(&["--json", "call", "fx", "lying"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let result: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(result["structuredContent"]["temperature"], "hot");
    let error: Value = serde_json::from_str(run.stderr.trim()).unwrap();
    assert_eq!(error["error"]["exitCode"], 1);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("at /temperature"), "{error}");

    // A tool that declares a schema must send structuredContent.
    let run = dir.cli(&["call", "fx", "unstructured"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "sunny, 21 degrees\n");
    assert!(
        run.stderr.contains(
            "at /: the tool declares an outputSchema but the result has no structuredContent"
        ),
        "{}",
        run.stderr
    );

    // A result that matches passes.
    let run = dir.cli(&["call", "fx", "wide"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn no_validate_and_validate_output_false_turn_the_check_off() {
    let dir = Scratch::new("schema-off");
    dir.project_file(".mcp-cli.toml", &fixture_block("fx", "output-schema"));
    let run = dir.cli(&["call", "fx", "lying", "--no-validate"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));

    let off = format!(
        "{}validate_output = false\n",
        fixture_block("fx", "output-schema")
    );
    dir.project_file(".mcp-cli.toml", &off);
    let run = dir.cli(&["call", "fx", "lying"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));

    std::fs::remove_file(dir.0.join(".mcp-cli.toml")).unwrap();
    let json = json!({"mcpServers": {"fx": {"command": FIXTURE, "args": ["output-schema"], "validateOutput": false}}});
    dir.project_file(".mcp.json", &json.to_string());
    let run = dir.cli(&["call", "fx", "unstructured"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let json = json!({"mcpServers": {"fx": {"command": FIXTURE, "args": ["output-schema"]}}});
    dir.project_file(".mcp.json", &json.to_string());
    assert_eq!(dir.cli(&["call", "fx", "unstructured"]).code, 1);
}

#[test]
fn the_gateway_sends_a_mismatch_as_a_tool_error_keeping_the_content() {
    let dir = Scratch::new("schema-gateway");
    let config = dir.write("c.toml", &fixture_block("fx", "output-schema"));
    let config = config.to_str().unwrap();
    let (mut serve, mut host) = RawHost::start_patient(&dir, &["--config", config, "serve"], "{}");
    let lying = host.request(
        1,
        "tools/call",
        json!({"name": "fx__lying", "arguments": {}}),
    );
    let result = &lying["result"];
    assert_eq!(result["isError"], true, "{lying}");
    assert_eq!(result.get("structuredContent"), None);
    let said = result["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("outputSchema at /temperature"), "{said}");
    assert_eq!(
        result["content"][1]["text"],
        "{\"temperature\":\"hot\",\"conditions\":\"sunny\"}"
    );
    let wide = host.request(
        2,
        "tools/call",
        json!({"name": "fx__wide", "arguments": {}}),
    );
    assert_eq!(wide["result"]["structuredContent"]["f99"], 99.5, "{wide}");
    assert_eq!(wide["result"].get("isError"), None);
    drop(host);
    assert!(serve.wait().unwrap().success());
}

/// The reference servers' tools that declare an `outputSchema`, each called and validated:
/// none may be reported (the schemas are theirs, the results theirs).
#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_reference_servers_structured_tools_validate_clean() {
    let (npm, python) = (mcp_tests::npm_bin(), mcp_tests::python_bin());
    let dir = Scratch::new("schema-real");
    let root = dir.0.display().to_string();
    dir.write("note.txt", "a note\n");
    let program = |bin: &std::path::Path, name: &str| bin.join(name).display().to_string();
    let config = format!(
        "[mcp.everything]\ncommand = {:?}\n\n[mcp.filesystem]\ncommand = {:?}\nargs = [{root:?}]\n\n\
         [mcp.memory]\ncommand = {:?}\nenv = {{ MEMORY_FILE_PATH = {:?} }}\n\n[mcp.time]\ncommand = {:?}\n",
        program(&npm, "mcp-server-everything"),
        program(&npm, "mcp-server-filesystem"),
        program(&npm, "mcp-server-memory"),
        dir.0.join("memory.jsonl").display().to_string(),
        program(&python, "mcp-server-time"),
    );
    dir.project_file(".mcp-cli.toml", &config);
    let note = format!("path={root}/note.txt");
    let here = format!("path={root}");
    let entity =
        r#"entities:=[{"name":"Ada","entityType":"person","observations":["wrote a program"]}]"#;
    let calls: &[&[&str]] = &[
        &["everything", "get-structured-content", "location=Chicago"],
        &["filesystem", "read_text_file", &note],
        &["filesystem", "get_file_info", &note],
        &["filesystem", "list_directory", &here],
        &["filesystem", "directory_tree", &here],
        &["filesystem", "list_allowed_directories"],
        &["memory", "create_entities", entity],
        &["memory", "read_graph"],
        &["memory", "search_nodes", "query=Ada"],
        &["time", "get_current_time", "timezone=UTC"],
        &[
            "time",
            "convert_time",
            "source_timezone=UTC",
            "time=12:00",
            "target_timezone=Europe/Paris",
        ],
    ];
    for call in calls {
        let (server, tool) = (call[0], call[1]);
        // Each one declares a schema, so a clean run means a checked one.
        let tools = dir.cli(&["--json", "tools", server]);
        let tools: Value = serde_json::from_str(&tools.stdout).unwrap();
        let declared = (tools.as_array().unwrap().iter())
            .find(|entry| entry["name"] == format!("{server}__{tool}") || entry["name"] == tool)
            .unwrap_or_else(|| panic!("{server} has no {tool}: {tools}"));
        assert!(declared["outputSchema"].is_object(), "{declared}");
        let mut args = vec!["call"];
        args.extend_from_slice(call);
        let run = dir.cli(&args);
        assert_eq!(run.code, 0, "{call:?}: {}", run.stderr);
        assert!(
            !run.stderr.contains("outputSchema"),
            "{call:?}: {}",
            run.stderr
        );
        // And the structured content is there to check.
        args.insert(0, "--json");
        let run = dir.cli(&args);
        let result: Value = serde_json::from_str(&run.stdout).unwrap();
        assert!(!result["structuredContent"].is_null(), "{call:?}: {result}");
    }
}
