//! Skills (the skills extension, SEP-2640) from real servers: the TypeScript SDK v2 peer's
//! `pdf-tools` (a SKILL.md, a text file in a subfolder, a binary file) listed, printed and
//! installed by `skills` and `skill` in both eras, with nothing read before it is fetched;
//! the rmcp peer's `release-notes`, from rmcp's own catalog of a folder; and a TypeScript SDK
//! host reading and verifying the TypeScript peer's skill through `serve`.

use std::path::PathBuf;

use serde_json::Value;

use crate::gateway_stateless::run_host;
use crate::support::Scratch;

/// The peer's skill as it serves it.
const SKILL_MD: &str = "---\nname: pdf-tools\n\
    description: \"Fill in PDF forms: read the fields, then write them.\"\nlicense: MIT\n\
    metadata:\n  version: \"2\"\n  author: peer\n---\n# PDF tools\n\n\
    Read references/FORMS.md before filling a form.\n";
const FORMS_MD: &str = "Fields are named by their label.\n";
const MARK_BIN: [u8; 6] = [0, 1, 2, 255, 254, 10];

/// The TypeScript peer behind `tee`, which keeps every line the hub sends it in `log`.
fn peer_script(scratch: &Scratch) -> (String, PathBuf) {
    script_of(scratch, mcp_tests::ts_peer())
}

/// `peer` behind `tee`, as a `--stdio` command line, and where `tee` keeps what it is sent.
fn script_of(scratch: &Scratch, peer: mcp_tests::Peer) -> (String, PathBuf) {
    let log = scratch.0.join("received.log");
    let mut line = format!(
        "tee -a '{}' | exec '{}'",
        log.display(),
        peer.program.display()
    );
    for arg in &peer.args {
        line.push_str(&format!(" '{}'", arg.to_string_lossy()));
    }
    let script = scratch.write("peer.sh", &format!("#!/bin/sh\n{line}\n"));
    (format!("sh {}", script.display()), log)
}

/// How many `method` requests the peer has been sent.
fn sent(log: &PathBuf, method: &str) -> usize {
    let log = std::fs::read_to_string(log).unwrap_or_default();
    let lines = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok());
    lines.filter(|line| line["method"] == method).count()
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_typescript_peer_skill_is_listed_printed_and_installed_in_both_eras() {
    for protocol in ["2025-11-25", "2026-07-28"] {
        let scratch = Scratch::new(&format!("skills-ts-{protocol}"));
        let (stdio, log) = peer_script(&scratch);
        let run = |args: &[&str], env: &[(&str, &str)]| {
            let mut line = vec!["--stdio", &stdio, "--protocol", protocol];
            line.extend(args);
            scratch.cli_with(&line, env, None)
        };

        // Listing asks for the list only.
        let listed = run(&["skills"], &[]);
        assert_eq!(listed.code, 0, "{listed:?}");
        assert_eq!(
            listed.stdout.trim_end(),
            "sh__pdf-tools  3 files, 245 B  Fill in PDF forms: read the fields, then write them.",
            "{listed:?}"
        );
        let listed = run(&["--json", "skills"], &[]);
        let entries: Value = serde_json::from_str(&listed.stdout).unwrap();
        assert_eq!(
            entries[0]["uri"], "skill://pdf-tools/SKILL.md",
            "{entries:#}"
        );
        assert_eq!(entries[0]["resources"].as_array().unwrap().len(), 3);
        assert!(sent(&log, "skills/list") >= 1);
        assert_eq!(sent(&log, "resources/read"), 0, "a listing read a file");

        // Printed: its SKILL.md alone is read.
        let printed = run(&["skill", "pdf-tools"], &[]);
        assert_eq!(printed.code, 0, "{printed:?}");
        assert_eq!(printed.stdout, SKILL_MD);
        assert_eq!(sent(&log, "resources/read"), 1);

        // Installed: every file, byte for byte, then only replaced with --force.
        let dir = scratch.0.join("skills");
        let to = dir.display().to_string();
        let installed = run(&["skill", "pdf-tools", "--to", &to], &[]);
        assert_eq!(installed.code, 0, "{installed:?}");
        assert!(
            installed.stdout.contains("(3 files, checked)"),
            "{installed:?}"
        );
        let folder = dir.join("pdf-tools");
        assert_eq!(
            std::fs::read_to_string(folder.join("SKILL.md")).unwrap(),
            SKILL_MD
        );
        let forms = std::fs::read_to_string(folder.join("references/FORMS.md")).unwrap();
        assert_eq!(forms, FORMS_MD);
        assert_eq!(
            std::fs::read(folder.join("assets/mark.bin")).unwrap(),
            MARK_BIN
        );
        assert_eq!(sent(&log, "resources/read"), 4);
        let again = run(&["skill", "pdf-tools", "--to", &to], &[]);
        assert_eq!(again.code, 2, "{again:?}");
        assert!(again.stderr.contains("pass --force"), "{again:?}");
        let forced = run(
            &["--json", "skill", "pdf-tools", "--to", &to, "--force"],
            &[],
        );
        assert_eq!(forced.code, 0, "{forced:?}");
        let written: Value = serde_json::from_str(&forced.stdout).unwrap();
        let files = ["SKILL.md", "assets/mark.bin", "references/FORMS.md"];
        assert_eq!(written["files"], serde_json::json!(files), "{written:#}");

        // Into the folder Claude Code reads personal skills from.
        let claude = scratch.0.join("claude");
        let env = [("CLAUDE_CONFIG_DIR", claude.to_str().unwrap())];
        let installed = run(&["skill", "pdf-tools", "--to", "claude"], &env);
        assert_eq!(installed.code, 0, "{installed:?}");
        let manifest = claude.join("skills/pdf-tools/SKILL.md");
        assert_eq!(std::fs::read_to_string(manifest).unwrap(), SKILL_MD);

        let unknown = run(&["skill", "nope"], &[]);
        assert_eq!(unknown.code, 2, "{unknown:?}");
        assert!(
            unknown
                .stderr
                .contains("has no skill nope; it has: pdf-tools"),
            "{unknown:?}"
        );
    }
}

#[test]
fn the_rmcp_peer_skill_is_installed_in_both_eras() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("servers/rmcp-peer/skills/release-notes");
    for protocol in ["2025-11-25", "2026-07-28"] {
        let scratch = Scratch::new(&format!("skills-rmcp-{protocol}"));
        let (stdio, log) = script_of(&scratch, mcp_tests::rmcp_peer());
        let run = |args: &[&str]| {
            let mut line = vec!["--stdio", &stdio, "--protocol", protocol];
            line.extend(args);
            scratch.cli(&line)
        };
        let listed = run(&["skills"]);
        assert_eq!(listed.code, 0, "{listed:?}");
        let files = ["SKILL.md", "templates/NOTES.md"];
        let bytes: u64 = (files.iter())
            .map(|file| folder.join(file).metadata().unwrap().len())
            .sum();
        let row = format!(
            "sh__release-notes  2 files, {bytes} B  Write release notes from merged changes, \
             one line per change."
        );
        assert_eq!(listed.stdout.trim_end(), row, "{listed:?}");
        assert_eq!(sent(&log, "resources/read"), 0, "a listing read a file");
        let dir = scratch.0.join("skills");
        let installed = run(&["skill", "release-notes", "--to", dir.to_str().unwrap()]);
        assert_eq!(installed.code, 0, "{installed:?}");
        for file in files {
            let written = std::fs::read(dir.join("release-notes").join(file)).unwrap();
            assert_eq!(written, std::fs::read(folder.join(file)).unwrap(), "{file}");
        }
        assert_eq!(sent(&log, "resources/read"), 2);
    }
}

/// A host on the TypeScript SDK v2 client's `SkillsClient`, through `serve`: it lists the
/// skills and reads each file of each, which the SDK verifies against the entry (size,
/// digest, and the SKILL.md's frontmatter) and refuses on any mismatch.
const TS_SKILLS_HOST: &str = r#"
const [pkg, config] = process.argv.slice(2);
const { Client } = await import(`${pkg}/dist/index.mjs`);
const { StdioClientTransport } = await import(`${pkg}/dist/stdio.mjs`);
const { SkillsClient } = await import(`${pkg}/dist/ext/skills/index.mjs`);
const print = (step, value) => console.log(JSON.stringify({ step, ...value }));
const transport = new StdioClientTransport({
  command: process.env.MCP_CLI,
  args: ["--config", config, "serve"],
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "ts-skills-host", version: "1" });
await client.connect(transport);
const skills = new SkillsClient(client);
print("supported", { supported: skills.supported });
const listing = await skills.list();
print("list", { uris: listing.skills.map((skill) => skill.uri), invalid: listing.invalid });
for (const skill of listing.skills) {
  for (const entry of skill.resources) {
    const file = await skills.read(skill, entry.uri);
    print("read", { uri: file.uri, verified: file.verified, bytes: [...file.bytes] });
  }
}
await client.close();
"#;

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn a_typescript_sdk_host_verifies_the_skills_the_gateway_serves() {
    let (node, package) = mcp_tests::ts_client();
    let scratch = Scratch::new("skills-gateway-ts");
    let (stdio, _log) = peer_script(&scratch);
    let (program, script) = stdio.split_once(' ').unwrap();
    let config = scratch.write(
        "gateway.toml",
        &format!("[mcp.docs]\ncommand = {program:?}\nargs = [{script:?}]\n"),
    );
    let host = scratch
        .write("host.mjs", TS_SKILLS_HOST)
        .display()
        .to_string();
    let args = [
        host.as_str(),
        package.to_str().unwrap(),
        config.to_str().unwrap(),
    ];
    let lines = run_host(&scratch, &config, &node, &args);
    let step =
        |name: &str| -> Vec<&Value> { lines.iter().filter(|line| line["step"] == name).collect() };
    assert_eq!(step("supported")[0]["supported"], true, "{lines:#?}");
    let list = step("list");
    assert_eq!(
        list[0]["uris"],
        serde_json::json!(["skill://docs/pdf-tools/SKILL.md"]),
        "{lines:#?}"
    );
    assert_eq!(list[0]["invalid"], serde_json::json!([]));
    let reads: Vec<(String, bool, Vec<u8>)> = (step("read").iter())
        .map(|read| {
            let bytes = read["bytes"].as_array().unwrap().iter();
            let bytes = bytes.map(|byte| byte.as_u64().unwrap() as u8).collect();
            (
                read["uri"].as_str().unwrap().to_owned(),
                read["verified"] == true,
                bytes,
            )
        })
        .collect();
    let root = "skill://docs/pdf-tools";
    assert_eq!(
        reads,
        [
            (
                format!("{root}/SKILL.md"),
                true,
                SKILL_MD.as_bytes().to_vec()
            ),
            (format!("{root}/assets/mark.bin"), true, MARK_BIN.to_vec()),
            (
                format!("{root}/references/FORMS.md"),
                true,
                FORMS_MD.as_bytes().to_vec()
            ),
        ],
        "{lines:#?}"
    );
}

/// The fixture's `skills` mode as server `fx` (`options` after the mode), each line it is
/// sent kept in `received.log`; the config file's path.
fn fixture_config(scratch: &Scratch, options: &[&str], era: &str) -> (String, PathBuf) {
    let log = scratch.0.join("received.log");
    let mut args = vec![
        "skills",
        "--era",
        era,
        "--log-received",
        log.to_str().unwrap(),
    ];
    args.extend(options);
    let config = format!(
        "[mcp.fx]\ncommand = {:?}\nargs = {args:?}\n",
        crate::support::FIXTURE
    );
    (
        scratch.write("config.toml", &config).display().to_string(),
        log,
    )
}

#[test]
fn a_skill_that_fails_a_check_after_its_manifest_writes_nothing_in_both_eras() {
    for era in ["handshake", "stateless"] {
        let scratch = Scratch::new(&format!("skills-second-file-{era}"));
        let (config, log) = fixture_config(&scratch, &["--tamper", "second-file"], era);
        let dir = scratch.0.join("skills");
        let run = scratch.cli(&[
            "--config",
            &config,
            "skill",
            "fx",
            "notes",
            "--to",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 3, "{run:?}");
        assert!(
            run.stderr.contains("refs/STYLE.md has digest sha256:"),
            "{run:?}"
        );
        assert!(run.stderr.contains("nothing was written"), "{run:?}");
        assert!(
            !dir.exists(),
            "{:?}",
            std::fs::read_dir(&dir).map(|d| d.count())
        );
        assert_eq!(
            sent(&log, "resources/read"),
            2,
            "the manifest, then the file that failed"
        );
    }
}

#[test]
fn a_file_name_that_leaves_the_skill_is_refused_before_anything_is_read() {
    let scratch = Scratch::new("skills-escape");
    let (config, log) = fixture_config(&scratch, &["--tamper", "escape"], "handshake");
    let dir = scratch.0.join("skills");
    let run = scratch.cli(&[
        "--config",
        &config,
        "skill",
        "fx",
        "notes",
        "--to",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains("file %2e%2e/outside.txt leaves the skill's folder"),
        "{run:?}"
    );
    assert_eq!(sent(&log, "resources/read"), 0);
    assert!(!dir.exists() && !scratch.0.join("outside.txt").exists());
}

#[test]
fn a_skill_the_scan_flags_is_withheld_until_trusted() {
    let scratch = Scratch::new("skills-poisoned");
    let (config, log) = fixture_config(&scratch, &["--poisoned", "1"], "stateless");
    let listed = scratch.cli(&["--config", &config, "skills"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains("fx__notes"), "{listed:?}");
    assert!(!listed.stdout.contains("sneaky"), "{listed:?}");
    assert!(
        listed
            .stderr
            .contains("is withheld: the poisoning scan flagged it"),
        "{listed:?}"
    );
    let fetched = scratch.cli(&["--config", &config, "skill", "fx", "sneaky"]);
    assert_eq!(fetched.code, 2, "{fetched:?}");
    assert!(fetched.stderr.contains("withheld"), "{fetched:?}");
    assert_eq!(sent(&log, "resources/read"), 0, "nothing of it was read");
    let trusted = scratch.cli(&["--yes", "--config", &config, "trust", "fx"]);
    assert_eq!(trusted.code, 0, "{trusted:?}");
    let fetched = scratch.cli(&["--config", &config, "skill", "fx", "sneaky"]);
    assert_eq!(fetched.code, 0, "{fetched:?}");
    assert!(
        fetched.stdout.starts_with("---\nname: sneaky\n"),
        "{fetched:?}"
    );
}

/// `serve` before a host that speaks the extension: the skills under their server, one got
/// by its URI, a file read through the gateway from its server, and what is not a served
/// skill's file refused.
#[test]
fn the_gateway_serves_skills_under_their_server() {
    let scratch = Scratch::new("skills-gateway-raw");
    let (config, log) = fixture_config(&scratch, &[], "handshake");
    let (mut serve, mut host) =
        crate::gateway::RawHost::start(&scratch, &["--config", &config, "serve"], "{}");
    let listed = host.request(1, "skills/list", serde_json::json!({}));
    let skills = listed["result"]["skills"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(skills.len(), 1, "{listed}");
    assert_eq!(skills[0]["uri"], "skill://fx/notes/SKILL.md");
    assert_eq!(skills[0]["frontmatter"]["name"], "notes");
    let uris: Vec<&str> = (skills[0]["resources"].as_array().unwrap().iter())
        .map(|file| file["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "skill://fx/notes/SKILL.md",
            "skill://fx/notes/refs/STYLE.md"
        ]
    );
    let got = host.request(
        2,
        "skills/get",
        serde_json::json!({"uri": "skill://fx/notes/SKILL.md"}),
    );
    assert_eq!(got["result"]["skill"], skills[0], "{got}");
    let unknown = host.request(
        3,
        "skills/get",
        serde_json::json!({"uri": "skill://notes/SKILL.md"}),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let read = host.request(
        4,
        "resources/read",
        serde_json::json!({"uri": "skill://fx/notes/refs/STYLE.md"}),
    );
    let contents = &read["result"]["contents"];
    assert_eq!(
        contents[0]["uri"], "skill://fx/notes/refs/STYLE.md",
        "{read}"
    );
    assert_eq!(
        contents[0]["text"], "Short lines. Decisions first.\n",
        "{read}"
    );
    assert_eq!(sent(&log, "resources/read"), 1);
    let outside = host.request(
        5,
        "resources/read",
        serde_json::json!({"uri": "skill://fx/notes/../secret"}),
    );
    assert!(outside.get("error").is_some(), "{outside}");
    assert_eq!(
        sent(&log, "resources/read"),
        1,
        "nothing else reached the server"
    );
    drop(host);
    assert!(serve.wait().unwrap().success());
}
