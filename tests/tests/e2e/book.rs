//! The book under `docs/` runs as written: each chapter's ```sh lines, in order, in a fresh
//! folder of its own holding a copy of the README, with an isolated home, the fixtures and the
//! installed reference servers on PATH, and no terminal.
//!
//! The rules the chapters follow (the book's `README.md` states them for its writers):
//! - a ```sh block holds one command a line; each runs with `bash -c` and must exit 0, unless
//!   its comment (two spaces, `#`, text) starts with `exit N`, when it must exit exactly N;
//! - a fenced block directly after a line `<!-- file: PATH -->` is written to PATH (relative to
//!   the chapter's folder, `~/` under the isolated home) when the runner reaches it;
//! - every other block (```text, ```toml without a marker) is only read.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::Scratch;

/// Every chapter of the book, by file name without `.md`; `every_chapter_has_a_test` fails
/// when `docs/` holds one that is not here.
const CHAPTERS: &[&str] = &[
    "README",
    "getting-started",
    "config",
    "calling",
    "servers",
    "catalogue",
    "trust",
    "remote",
    "gateway",
    "daemon",
    "tasks",
    "registry",
    "agents",
    "embedding",
    "benchmarks",
    "reference",
];

/// Key outputs, checked beside every line's exit status: the chapter, the command as written,
/// and what its stdout must start with. Each must be found and run, so a command reworded in
/// its chapter is reworded here too.
const OUTPUTS: &[(&str, &str, &str)] = &[
    (
        "getting-started",
        "mcp-cli call filesystem read_text_file path=README.md",
        "# mcp-client\n",
    ),
    (
        "calling",
        "mcp-cli call everything__echo message=hi",
        "Echo: hi\n",
    ),
    ("calling", "mcp-cli call fx echo text=hello", "hello\n"),
    (
        "calling",
        "mcp-cli call fx types s=012 i=7 'arr=[1,2]' b=true",
        "{\"s\":\"012\",\"i\":7,\"arr\":[1,2],\"b\":true}\n",
    ),
    (
        "calling",
        "mcp-cli call fx rich",
        "rich\n[image content omitted: image/png, 70 bytes]\n",
    ),
    (
        "tour",
        "mcp-cli call filesystem read_text_file path=README.md",
        "# mcp-client\n",
    ),
    (
        "tour",
        "mcp-cli call everything echo message=hi",
        "Echo: hi\n",
    ),
    (
        "config",
        "mcp-cli call notes read_graph",
        "{\n  \"entities\": [],\n  \"relations\": []\n}",
    ),
];

/// How long one line may run before it counts as hung: npx's first start of a server may
/// install it.
const LINE_BUDGET: Duration = Duration::from_secs(180);

fn docs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

/// One thing the runner does, in the chapter's order.
#[derive(Debug)]
enum Step {
    /// A block after `<!-- file: PATH -->`: its text written to PATH.
    File { path: String, text: String },
    /// One line of a ```sh block, with its line number in the chapter and the exit code it
    /// must end with.
    Run {
        line: usize,
        command: String,
        expected: i32,
    },
}

/// The steps of a chapter: its file blocks and its ```sh lines, in order.
fn steps(label: &str, markdown: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut pending_file: Option<(usize, String)> = None;
    let mut lines = markdown.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let trimmed = line.trim();
        if let Some(path) = trimmed
            .strip_prefix("<!-- file:")
            .and_then(|rest| rest.strip_suffix("-->"))
        {
            pending_file = Some((index + 1, path.trim().to_owned()));
            continue;
        }
        let Some(language) = trimmed.strip_prefix("```") else {
            if let Some((marker, _)) = &pending_file {
                panic!("{label}:{marker}: a file marker must be followed by a fenced block");
            }
            continue;
        };
        // A block inside a list item is indented; its lines lose that indentation.
        let indent = line.len() - line.trim_start().len();
        let mut body = Vec::new();
        for (number, inner) in lines.by_ref() {
            if inner.trim() == "```" {
                break;
            }
            let inner = inner.get(indent..).unwrap_or(inner.trim_start());
            body.push((number + 1, inner));
        }
        if let Some((_, path)) = pending_file.take() {
            let mut text: String = body.iter().map(|(_, line)| format!("{line}\n")).collect();
            if text.is_empty() {
                text.push('\n');
            }
            steps.push(Step::File { path, text });
        } else if language.trim() == "sh" {
            for (line, text) in body {
                if let Some((command, expected)) = command_of(text) {
                    steps.push(Step::Run {
                        line,
                        command,
                        expected,
                    });
                }
            }
        }
    }
    steps
}

/// A ```sh line's command and the exit code its comment asks for (`# exit N`, else 0); `None`
/// for a blank line or a line that is only a comment.
fn command_of(line: &str) -> Option<(String, i32)> {
    let (command, comment) = match line.find("  #") {
        Some(at) => (&line[..at], line[at + 3..].trim()),
        None => (line, ""),
    };
    let command = command.trim();
    if command.is_empty() || command.starts_with('#') {
        return None;
    }
    let expected = comment
        .strip_prefix("exit ")
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits
                .parse()
                .unwrap_or_else(|_| panic!("`# exit N` needs a number: {line}"))
        })
        .unwrap_or(0);
    Some((command.to_owned(), expected))
}

/// Runs one chapter as written; panics naming the chapter, the line and what it printed when a
/// line exits otherwise than it says.
fn run_chapter(chapter: &str) {
    let file = docs_dir().join(format!("{chapter}.md"));
    let markdown = std::fs::read_to_string(&file)
        .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
    check_links(chapter, &markdown);
    run_blocks(chapter, &format!("docs/{chapter}.md"), &markdown);
}

/// Runs the blocks of `markdown` (shown as `label` in failures) in a fresh folder; `key` names
/// its entries in [`OUTPUTS`].
fn run_blocks(key: &str, label: &str, markdown: &str) {
    let (npm, python) = (mcp_tests::npm_bin(), mcp_tests::python_bin());
    let dir = Scratch::new(&format!("book-{key}"));
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    dir.write("README.md", &readme);
    let home = dir.0.join("home");
    let runtime = dir.0.join("run");
    for folder in [&home, &runtime] {
        std::fs::create_dir_all(folder).unwrap();
    }
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    // The fixtures are built beside mcp-cli.
    let binaries = crate::support::cli_binary().parent().unwrap().to_owned();
    let path = std::env::join_paths([binaries, npm.clone(), python].into_iter().chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let environment = Environment {
        path: path.into_string().unwrap(),
        home,
        runtime,
        npm_prefix: npm.parent().unwrap().parent().unwrap().to_owned(),
        groups: Default::default(),
    };
    let mut checked = Vec::new();
    let mut ran = 0;
    for step in steps(label, markdown) {
        match step {
            Step::File { path, text } => {
                let target = match path.strip_prefix("~/") {
                    Some(rest) => environment.home.join(rest),
                    None => dir.0.join(&path),
                };
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::write(&target, text).unwrap();
            }
            Step::Run {
                line,
                command,
                expected,
            } => {
                let (code, stdout, stderr) = environment.run(&dir.0, &command);
                assert_eq!(
                    code, expected,
                    "{label}:{line}: `{command}` exited {code}, not {expected}\n\
                     stdout:\n{stdout}\nstderr:\n{stderr}"
                );
                ran += 1;
                for (_, wanted, start) in OUTPUTS.iter().filter(|(of, ..)| *of == key) {
                    if *wanted == command {
                        assert!(
                            stdout.starts_with(start),
                            "{label}:{line}: `{command}` printed\n{stdout}\nnot {start:?}..."
                        );
                        checked.push(*wanted);
                    }
                }
            }
        }
    }
    for (_, wanted, _) in OUTPUTS.iter().filter(|(of, ..)| *of == key) {
        assert!(
            checked.contains(wanted),
            "{label} no longer runs `{wanted}`, whose output this test checks"
        );
    }
    // Nothing a line started outlives the chapter (a registry started in the background).
    for group in environment.groups.borrow().iter() {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .stderr(Stdio::null())
            .status();
    }
    eprintln!("{label}: {ran} line(s) ran as written");
}

/// What every line of a chapter runs with.
struct Environment {
    path: String,
    home: PathBuf,
    runtime: PathBuf,
    npm_prefix: PathBuf,
    /// The process group of every line run, ended with the chapter.
    groups: std::cell::RefCell<Vec<u32>>,
}

impl Environment {
    /// Runs `command` with `bash -c` in `dir`, stdin empty; its exit code (-1 when killed) and
    /// output. A line that outlives its budget is killed with its whole process group.
    fn run(&self, dir: &Path, command: &str) -> (i32, String, String) {
        let mut bash = Command::new("bash");
        bash.args(["-c", command])
            .current_dir(dir)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Nothing of the developer's own mcp-cli set-up reaches the chapter.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("MCP_") || key.starts_with("XDG_") {
                bash.env_remove(&*key);
            }
        }
        bash.env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("MCP_CLI_NPM_PREFIX", &self.npm_prefix)
            // npx's downloads are kept across runs, beside the installed servers.
            .env(
                "npm_config_cache",
                mcp_tests::servers_dir().join("npm-cache"),
            )
            // Logins go to a file in the isolated home, never a developer's own keychain.
            .env("MCP_CLI_TOKEN_STORE", "file");
        let child = bash.spawn().unwrap();
        let group = child.id();
        self.groups.borrow_mut().push(group);
        let (done, finished) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if finished.recv_timeout(LINE_BUDGET) == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
            {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{group}")])
                    .status();
            }
        });
        let output = child.wait_with_output().unwrap();
        drop(done);
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

/// Every relative link of a chapter names a chapter that exists and, after `#`, a heading of
/// it (as a forge makes its anchor).
fn check_links(chapter: &str, markdown: &str) {
    for target in markdown.split("](").skip(1) {
        let Some(target) = target.split(')').next() else {
            continue;
        };
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
        let linked = if file.is_empty() {
            markdown.to_owned()
        } else {
            let path = docs_dir().join(file);
            match std::fs::read_to_string(&path) {
                Ok(text) => text,
                // A folder or a file of the repository, not a chapter.
                Err(_) if path.exists() => continue,
                // A chapter not written yet: its own test fails, naming it.
                Err(_) if CHAPTERS.contains(&file.trim_end_matches(".md")) => continue,
                Err(error) => panic!("docs/{chapter}.md links to {target}: {error}"),
            }
        };
        if !anchor.is_empty() {
            assert!(
                anchors(&linked).iter().any(|known| known == anchor),
                "docs/{chapter}.md links to {target}, a heading that does not exist"
            );
        }
    }
}

/// The anchors a forge gives a chapter's headings: lower case, spaces as `-`, punctuation but
/// `-` and `_` dropped.
fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let anchor: String = (title.to_lowercase().chars())
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        found.push(anchor);
    }
    found
}

#[test]
fn every_chapter_has_a_test() {
    let mut found: Vec<String> = std::fs::read_dir(docs_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_suffix(".md").map(str::to_owned))
        .collect();
    found.sort();
    for chapter in &found {
        assert!(
            CHAPTERS.contains(&chapter.as_str()),
            "docs/{chapter}.md has no test of its own: add it to CHAPTERS and a #[test] in book.rs"
        );
    }
}

#[test]
fn the_runner_reads_files_commands_and_exit_codes() {
    let markdown = "Text.\n\n<!-- file: ~/.config/x.toml -->\n```toml\n[mcp.a]\n```\n\n\
                    ```sh\nmcp-cli servers\n\nmcp-cli call a b  # exit 2: no such tool\n```\n\n\
                    - a list item\n\n  ```sh\n  echo  # prints a blank line\n  ```\n\n\
                    ```text\nnot run\n```\n";
    let steps = steps("example", markdown);
    let shown: Vec<String> = steps
        .iter()
        .map(|step| match step {
            Step::File { path, text } => format!("file {path}: {text}"),
            Step::Run {
                line,
                command,
                expected,
            } => format!("{line}: {command} -> {expected}"),
        })
        .collect();
    assert_eq!(
        shown,
        [
            "file ~/.config/x.toml: [mcp.a]\n",
            "9: mcp-cli servers -> 0",
            "11: mcp-cli call a b -> 2",
            "17: echo -> 0",
        ]
    );
    assert_eq!(
        anchors("# Trust\n## The network allowlist\n### `--stdio`, ad hoc\n"),
        ["trust", "the-network-allowlist", "--stdio-ad-hoc"]
    );
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_table_of_contents_runs_as_written() {
    run_chapter("README");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_getting_started_chapter_runs_as_written() {
    run_chapter("getting-started");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_config_chapter_runs_as_written() {
    run_chapter("config");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_calling_chapter_runs_as_written() {
    run_chapter("calling");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_servers_chapter_runs_as_written() {
    run_chapter("servers");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_catalogue_chapter_runs_as_written() {
    run_chapter("catalogue");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_trust_chapter_runs_as_written() {
    run_chapter("trust");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_remote_chapter_runs_as_written() {
    run_chapter("remote");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_gateway_chapter_runs_as_written() {
    run_chapter("gateway");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_daemon_chapter_runs_as_written() {
    run_chapter("daemon");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_tasks_chapter_runs_as_written() {
    run_chapter("tasks");
}

#[test]
#[cfg_attr(no_node, ignore = "needs Node.js and npm on PATH")]
fn the_registry_chapter_runs_as_written() {
    run_chapter("registry");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_agents_chapter_runs_as_written() {
    run_chapter("agents");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_embedding_chapter_runs_as_written() {
    run_chapter("embedding");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_benchmarks_chapter_runs_as_written() {
    run_chapter("benchmarks");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_reference_chapter_runs_as_written() {
    run_chapter("reference");
}

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn the_readmes_tour_runs_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    // The tour alone: the set-up commands above it are cargo's, which this very run is. Lines
    // outside it are blanked, so failures keep the README's line numbers.
    let start = readme
        .find("\n## A short tour\n")
        .expect("the README's tour");
    let end = readme[start + 1..]
        .find("\n## ")
        .map_or(readme.len(), |at| start + 1 + at);
    let tour: String = (readme.char_indices())
        .map(|(at, c)| {
            if (start..end).contains(&at) || c == '\n' {
                c
            } else {
                ' '
            }
        })
        .collect();
    run_blocks("tour", "README.md", &tour);
}

/// The Agent Skill `agent-help --skill` prints is the repository's `mcp-cli/skill/SKILL.md`,
/// and every command line in it runs as written, against the servers it names: `files` (the
/// fixture's plain mode, whose `read_path` reads a file and `add` adds), `docs` (its
/// skills mode) and `forms` (its tasks mode, whose `task_ask_first` asks a form).
#[test]
fn the_agent_skill_is_printed_whole_and_every_command_in_it_runs() {
    let skill = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../mcp-cli/skill/SKILL.md"
    ))
    .unwrap();
    let scratch = Scratch::new("agent-skill-printed");
    let printed = scratch.cli(&["agent-help", "--skill"]);
    assert_eq!(printed.code, 0, "{printed:?}");
    assert_eq!(printed.stdout, skill);
    let instructions = scratch.cli(&["agent-help"]);
    assert!(skill.ends_with(&instructions.stdout), "{instructions:?}");
    assert!(instructions.stdout.starts_with("# "), "{instructions:?}");
    // The servers, as a file the runner writes first; the skill's own lines keep their
    // numbers, shifted by the setup's.
    let setup = "<!-- file: ~/.config/mcp-cli/config.toml -->\n```toml\n\
                 [mcp.files]\ncommand = \"mcp-fixture\"\nargs = [\"good\"]\n\n\
                 [mcp.docs]\ncommand = \"mcp-fixture\"\nargs = [\"skills\"]\n\n\
                 [mcp.forms]\ncommand = \"mcp-fixture\"\nargs = [\"tasks\"]\n```\n\n";
    // The daemon the skill starts, stopped after it.
    let teardown = "\n```sh\nmcp-cli daemon stop\n```\n";
    run_blocks(
        "agent-skill",
        "mcp-cli/skill/SKILL.md",
        &format!("{setup}{skill}{teardown}"),
    );
}
