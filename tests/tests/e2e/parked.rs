//! `call --park`, `answer` and `parked`: a call whose server asks a question with nobody at a
//! terminal returns at once with the question (exit 5) and waits on the daemon, and a later
//! command answers it and prints the call's result, in both eras, for forms and links; bad
//! answers leave the question parked; `ask` rules are never parked; without the daemon
//! `--park` (and `--async` on a local server) is refused with the command to run.

use serde_json::Value;

use crate::support::{FIXTURE, Run, Scratch};

/// A scratch folder with its own runtime folder, whose daemon is stopped on drop. Servers:
/// `st` (stateless era: `ask` asks for a name), `loop` (stateless era: `ask` asks for ever),
/// `link` (handshake era: `open_link` asks to open a link), `hs` (handshake era:
/// `task_ask_first` asks for a name, with a default, before it answers).
struct Parking {
    scratch: Scratch,
}

impl Parking {
    fn new(name: &str, extra: &str) -> Self {
        let scratch = Scratch::new(&format!("parked-{name}"));
        let config = format!(
            "[mcp.st]\ncommand = {FIXTURE:?}\nargs = [\"good\", \"--era\", \"stateless\"]\n\n\
             [mcp.loop]\ncommand = {FIXTURE:?}\nargs = [\"input-loop\"]\n\n\
             [mcp.link]\ncommand = {FIXTURE:?}\nargs = [\"url-elicitation\"]\n\n\
             [mcp.hs]\ncommand = {FIXTURE:?}\nargs = [\"tasks\"]\n{extra}"
        );
        scratch.project_file(".mcp-cli.toml", &config);
        Self { scratch }
    }

    fn cli(&self, args: &[&str]) -> Run {
        self.cli_with(args, &[])
    }

    fn cli_with(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let runtime = self.scratch.0.join("run");
        let mut env = env.to_vec();
        env.push(("XDG_RUNTIME_DIR", runtime.to_str().unwrap()));
        self.scratch.cli_with(args, &env, None)
    }

    fn start_daemon(&self) {
        let run = self.cli(&["daemon", "start"]);
        assert_eq!(run.code, 0, "{run:?}");
    }

    /// `call --park --json ARGS`, which must park: its question.
    fn park(&self, args: &[&str]) -> Value {
        let mut line = vec!["--json", "call", "--park"];
        line.extend(args);
        let run = self.cli(&line);
        assert_eq!(run.code, 5, "{run:?}");
        parked_question(&run)
    }

    fn parked(&self) -> Vec<Value> {
        let run = self.cli(&["--json", "parked"]);
        assert_eq!(run.code, 0, "{run:?}");
        serde_json::from_str(&run.stdout).unwrap()
    }

    fn ids(&self) -> Vec<String> {
        let parked = self.parked().into_iter();
        parked
            .map(|q| q["id"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for Parking {
    fn drop(&mut self) {
        let _ = self.cli(&["daemon", "stop"]);
    }
}

/// The question a run printed under `--json`, `{"parked": QUESTION}` on stdout.
fn parked_question(run: &Run) -> Value {
    let printed: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{error}: {run:?}"));
    printed["parked"].clone()
}

/// The text of the call's result an `answer` printed: as the parked call would have, under
/// `--json`, the whole result object.
fn result_text(run: &Run) -> String {
    let result: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{error}: {run:?}"));
    result["content"][0]["text"].as_str().unwrap().to_owned()
}

fn id_of(question: &Value) -> String {
    question["id"].as_str().unwrap().to_owned()
}

#[test]
fn a_parked_form_is_answered_by_a_later_command_with_the_calls_result() {
    let parking = Parking::new("form", "");
    parking.start_daemon();
    let question = parking.park(&["st", "ask"]);
    let id = id_of(&question);
    assert_eq!(question["server"], "st", "{question}");
    assert_eq!(question["tool"], "ask", "{question}");
    assert_eq!(question["kind"], "form", "{question}");
    assert_eq!(question["message"], "What is your name?", "{question}");
    assert_eq!(
        question["requestedSchema"]["required"],
        serde_json::json!(["name"])
    );
    assert_eq!(
        question["answerWith"],
        format!("mcp-cli answer {id} name=VALUE")
    );
    assert!(
        question["expiresInSeconds"].as_u64().unwrap() > 200,
        "{question}"
    );
    assert_eq!(parking.ids(), vec![id.clone()]);

    // Answers that do not fit the form are refused before the server sees them, and the
    // question stays parked.
    let run = parking.cli(&["answer", &id, "nmae=Ada"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("the form has no field \"nmae\"; its fields: name"),
        "{run:?}"
    );
    assert!(run.stderr.contains("the question still waits"), "{run:?}");
    let run = parking.cli(&["--json", "answer", &id]);
    assert_eq!(run.code, 2, "{run:?}");
    let error: Value = serde_json::from_str(run.stderr.trim()).unwrap();
    assert_eq!(error["error"]["kind"], "usage", "{run:?}");
    assert!(
        (error["error"]["message"].as_str().unwrap()).contains("name is required"),
        "{run:?}"
    );
    assert_eq!(parking.ids(), vec![id.clone()]);

    // The answer's output is the call's, as `call` prints it.
    let run = parking.cli(&["answer", &id, "name=Ada Lovelace"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        result_text(&run),
        "accept {\"name\":\"Ada Lovelace\"}",
        "{run:?}"
    );
    assert!(parking.parked().is_empty());
    let run = parking.cli(&["answer", &id, "name=Ada"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("no question is parked as {id}: answered already")),
        "{run:?}"
    );
}

#[test]
fn a_form_in_the_handshake_era_parks_and_its_defaults_answer_it() {
    let parking = Parking::new("handshake", "");
    parking.start_daemon();
    let question = parking.park(&["hs", "task_ask_first"]);
    assert_eq!(question["message"], "Whom should the task greet?");
    // Its one field has a default: the answer needs no pair.
    let id = id_of(&question);
    assert_eq!(question["answerWith"], format!("mcp-cli answer {id}"));
    let run = parking.cli(&["answer", &id]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(result_text(&run), "hello Ada", "{run:?}");
}

#[test]
fn a_question_asked_again_is_parked_again_under_a_new_id() {
    let parking = Parking::new("loop", "");
    parking.start_daemon();
    let first = id_of(&parking.park(&["loop", "ask"]));
    let run = parking.cli(&["--json", "answer", &first, "name=a"]);
    assert_eq!(run.code, 5, "{run:?}");
    let second = id_of(&parked_question(&run));
    assert_ne!(first, second);
    assert_eq!(parking.ids(), vec![second.clone()]);
    // Printed for a person: who asks what, the fields, and the command that answers.
    let run = parking.cli(&["answer", &second, "name=b"]);
    assert_eq!(run.code, 5, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "loop asks, for its tool ask: What is your name?");
    assert_eq!(lines[1], "  name=  name (string, required)");
    let third = lines[2]
        .strip_prefix("parked as ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{run:?}"));
    assert!(
        lines[2].contains(&format!("`mcp-cli answer {third} name=VALUE` answers it")),
        "{run:?}"
    );
    let run = parking.cli(&["answer", third, "--cancel"]);
    assert_ne!(run.code, 0, "{run:?}");
}

#[test]
fn a_parked_link_is_declined_or_opened_then_answered_yes() {
    let parking = Parking::new("link", "");
    parking.start_daemon();
    let question = parking.park(&["link", "open_link"]);
    assert_eq!(question["kind"], "link", "{question}");
    let url = question["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("https://"), "{question}");
    let id = id_of(&question);
    assert_eq!(
        question["answerWith"],
        format!("mcp-cli answer {id} --open")
    );
    let run = parking.cli(&["answer", &id, "--decline"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(result_text(&run), "link decline", "{run:?}");

    // `--open` hands the link to the browser here, then says yes.
    let opened = parking.scratch.0.join("opened");
    let browser = parking.scratch.write(
        "browser.sh",
        &format!("#!/bin/sh\nprintf '%s' \"$1\" > {opened:?}\n"),
    );
    let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&browser, executable).unwrap();
    let id = id_of(&parking.park(&["link", "open_link"]));
    let run = parking.cli(&["answer", &id, "name=x"]);
    assert_eq!(run.code, 2, "a link takes no fields: {run:?}");
    let browser = browser.to_str().unwrap();
    let run = parking.cli_with(&["answer", &id, "--open"], &[("BROWSER", browser)]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(result_text(&run), "link accept", "{run:?}");
    assert_eq!(std::fs::read_to_string(&opened).unwrap(), url);
}

#[test]
fn without_the_daemon_park_and_async_are_refused_with_the_command_to_run() {
    let parking = Parking::new("cold", "");
    let run = parking.cli(&["call", "--park", "st", "ask"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--park: no daemon runs"), "{run:?}");
    assert!(run.stderr.contains("mcp-cli daemon start"), "{run:?}");
    // Asked for by the environment rather than by the person, it is not forced: the call
    // runs here, where nobody answers the form.
    let run = parking.cli_with(&["call", "st", "ask"], &[("MCP_CLI_PARK", "1")]);
    assert_ne!(run.code, 5, "{run:?}");
    assert_ne!(run.code, 0, "{run:?}");

    let run = parking.cli(&["call", "--async", "hs", "task_sleep", "ms=1"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "--async: hs is a local server that this command starts and stops when it ends"
        ),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("run `mcp-cli daemon start` first"),
        "{run:?}"
    );
    let run = parking.cli(&["--json", "parked"]);
    assert_eq!((run.code, run.stdout.trim()), (0, "[]"), "{run:?}");
    let run = parking.cli(&["answer", "q00000000", "name=x"]);
    assert_eq!(run.code, 2, "{run:?}");
}

#[test]
fn a_call_under_an_ask_rule_is_never_parked() {
    let rules = "\n[[permissions.rules]]\ntool = \"st__ask\"\naction = \"ask\"\n\n\
                 [[permissions.rules]]\ntool = \"link__open_link\"\naction = \"ask\"\npark = true\n";
    let parking = Parking::new("ask-rule", rules);
    parking.start_daemon();
    let run = parking.cli(&["call", "--park", "st", "ask"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("tool st__ask needs approval (rule tool = \"st__ask\""),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("an ask rule is the person's to answer, and a call is never parked on one"),
        "{run:?}"
    );
    assert!(parking.parked().is_empty());
    // The rule covers that tool alone: another call parks.
    parking.park(&["loop", "ask"]);
    // A run that does not park still goes cold, where the person is asked on a terminal.
    let status = parking.cli(&["--json", "daemon", "status"]);
    assert!(
        status
            .stdout
            .contains("ask rules are answered on the caller's terminal")
    );

    // The person let this rule's question be parked: it is, before the call is made, as a
    // form with no fields; then the call's own question.
    let approval = parking.park(&["link", "open_link"]);
    let message = approval["message"].as_str().unwrap();
    assert!(
        message.starts_with("Allow link__open_link with arguments {}?"),
        "{approval}"
    );
    let run = parking.cli(&["--json", "answer", &id_of(&approval)]);
    assert_eq!(run.code, 5, "{run:?}");
    let link = parked_question(&run);
    assert_eq!(link["kind"], "link", "{link}");
    let run = parking.cli(&["answer", &id_of(&link), "--decline"]);
    assert_eq!(result_text(&run), "link decline", "{run:?}");
    // Declined, the rule's question refuses the call, which is never made.
    let approval = parking.park(&["link", "open_link"]);
    let run = parking.cli(&["answer", &id_of(&approval), "--decline"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("was not approved"), "{run:?}");
}

#[test]
fn park_is_only_for_ask_rules() {
    let rule = "\n[[permissions.rules]]\ntool = \"st__ask\"\naction = \"deny\"\npark = true\n";
    let parking = Parking::new("park-deny", rule);
    let run = parking.cli(&["tools"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("`park = true` is for `ask` rules: only a question can wait for its answer"),
        "{run:?}"
    );
}

#[test]
fn with_park_set_by_the_environment_a_call_parks() {
    let parking = Parking::new("env", "");
    parking.start_daemon();
    let run = parking.cli_with(&["--json", "call", "st", "ask"], &[("MCP_CLI_PARK", "1")]);
    assert_eq!(run.code, 5, "{run:?}");
    let id = id_of(&parked_question(&run));
    let run = parking.cli(&["answer", &id, "name=env"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(result_text(&run), "accept {\"name\":\"env\"}");
}
