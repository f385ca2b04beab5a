//! The catalogue on disk through the `mcp-cli` binary: `tools`, `search` and `serve`'s listing
//! answered without starting a server, `--refresh`, listings kept whatever their cache hints
//! (a call still lists live), an edited entry listed afresh, the policy applied to what is
//! read from disk, and eight real servers listed from disk.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::gateway::RawHost;
use crate::search::eight_servers;
use crate::support::{FIXTURE, Run, Scratch};

/// The capabilities of a host that fills in forms.
const FORMS: &str = r#"{"elicitation": {}}"#;

/// A config block running the fixture with `args` as server `name`.
fn block(name: &str, args: &[&str]) -> String {
    format!("[mcp.{name}]\ncommand = {FIXTURE:?}\nargs = {args:?}\n\n")
}

/// How many times server `name` has been started in `scratch`: each start marks its log.
pub(crate) fn starts(scratch: &Scratch, name: &str) -> usize {
    let log = scratch.0.join(format!("state/mcp-cli/logs/{name}.log"));
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.matches(" started: ").count()
}

/// The servers whose listings the catalogue folder holds, by the key written in each file
/// (`NAME-DIGEST-DIGEST`).
fn kept(scratch: &Scratch) -> BTreeSet<String> {
    let dir = scratch.0.join("state/mcp-cli/catalogue");
    let Ok(files) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    (files.map(|file| file.unwrap().path()))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let file: Value = serde_json::from_str(&text).unwrap();
            let key = file["key"].as_str().unwrap();
            key.rsplitn(3, '-').last().unwrap().to_owned()
        })
        .collect()
}

/// Runs `mcp-cli --config CONFIG args` in `scratch`.
fn cli(scratch: &Scratch, args: &[&str]) -> Run {
    let config = scratch.0.join("config.toml");
    let mut all = vec!["--config", config.to_str().unwrap()];
    all.extend(args);
    scratch.cli(&all)
}

#[test]
fn listed_once_then_answered_from_disk_until_a_tool_is_called() {
    let scratch = Scratch::new("catalogue-disk");
    scratch.write("config.toml", &block("fx", &["good"]));
    let first = cli(&scratch, &["tools"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stdout.contains("fx__echo"), "{first:?}");
    assert_eq!(starts(&scratch, "fx"), 1);
    assert_eq!(kept(&scratch), BTreeSet::from(["fx".to_owned()]));

    // `tools`, `search` and the gateway's listing, none starting the server.
    let second = cli(&scratch, &["tools"]);
    assert_eq!(
        (second.code, &second.stdout),
        (0, &first.stdout),
        "{second:?}"
    );
    let search = cli(&scratch, &["search", "echo", "the", "text"]);
    assert_eq!(search.code, 0, "{search:?}");
    assert!(search.stdout.starts_with("fx__echo"), "{search:?}");
    let config = scratch.0.join("config.toml");
    let args = ["--config", config.to_str().unwrap(), "serve"];
    // A host that fills in forms, as the command line does: a server may list other tools
    // to a client that cannot, so those listings are kept apart.
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, FORMS);
    assert!(host.tool_names(1).contains(&"fx__echo".to_owned()));
    drop(host);
    assert!(serve.wait().unwrap().success());
    assert_eq!(starts(&scratch, "fx"), 1, "listed without a start");

    // A call starts it; `--refresh` lists it live.
    let call = cli(&scratch, &["call", "fx", "echo", "text=hi"]);
    assert_eq!((call.code, call.stdout.trim()), (0, "hi"), "{call:?}");
    assert_eq!(starts(&scratch, "fx"), 2);
    let refreshed = cli(&scratch, &["tools", "--refresh"]);
    assert_eq!(refreshed.stdout, first.stdout, "{refreshed:?}");
    assert_eq!(starts(&scratch, "fx"), 3);
    let searched = cli(&scratch, &["search", "--refresh", "echo", "the", "text"]);
    assert_eq!(searched.stdout, search.stdout, "{searched:?}");
    assert_eq!(starts(&scratch, "fx"), 4, "search --refresh lists it live");

    // `servers` shows how old the listing is.
    let servers = cli(&scratch, &["servers"]);
    assert!(servers.stdout.starts_with("NAME"), "{servers:?}");
    let header: Vec<&str> = servers
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let row = (servers.stdout.lines()).find(|line| line.starts_with("fx "));
    let row: Vec<&str> = row.unwrap().split_whitespace().collect();
    let listed = header
        .iter()
        .position(|column| *column == "LISTED")
        .unwrap();
    assert!(row[listed].ends_with('s'), "{servers:?}");
    let servers = cli(&scratch, &["--json", "servers"]);
    let rows: Value = serde_json::from_str(&servers.stdout).unwrap();
    let fx = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "fx");
    assert!(fx.unwrap()["catalogue_age"].is_u64(), "{rows}");
}

#[test]
fn a_server_that_no_longer_starts_is_listed_from_disk_and_refresh_says_why() {
    let scratch = Scratch::new("catalogue-broken");
    let mode = scratch.0.join("mode");
    let args = ["good", "--mode-file", mode.to_str().unwrap()];
    scratch.write("config.toml", &block("fx", &args));
    let first = cli(&scratch, &["tools"]);
    assert_eq!(first.code, 0, "{first:?}");
    // From now on the same command line fails at once.
    scratch.write("mode", "exit-in-handshake");
    let second = cli(&scratch, &["tools"]);
    assert_eq!(
        (second.code, &second.stdout),
        (0, &first.stdout),
        "{second:?}"
    );
    let refreshed = cli(&scratch, &["tools", "--refresh"]);
    assert_ne!(refreshed.code, 0, "{refreshed:?}");
    assert!(refreshed.stderr.contains("fx"), "{refreshed:?}");
    assert!(!refreshed.stdout.contains("fx__echo"), "{refreshed:?}");
    let call = cli(&scratch, &["call", "fx", "echo", "text=hi"]);
    assert_ne!(call.code, 0, "{call:?}");
    // A failed refresh keeps the listing it could not replace.
    let again = cli(&scratch, &["tools"]);
    assert_eq!((again.code, &again.stdout), (0, &first.stdout), "{again:?}");
}

#[test]
fn listings_are_answered_from_disk_whatever_their_hints_and_calls_list_live() {
    let scratch = Scratch::new("catalogue-hints");
    let stateless = |ttl: &'static str, scope: &'static str| {
        [
            "good",
            "--era",
            "stateless",
            "--ttl-ms",
            ttl,
            "--cache-scope",
            scope,
        ]
    };
    // `ttl0` marks its listings as servers on the Python SDK 2.x do.
    let config = [
        block("public", &stateless("600000", "public")),
        block("ttl0", &stateless("0", "private")),
        block("expired", &stateless("1", "public")),
    ]
    .concat();
    scratch.write("config.toml", &config);
    let servers = ["public", "ttl0", "expired"];
    let first = cli(&scratch, &["tools"]);
    assert_eq!(first.code, 0, "{first:?}");
    for server in servers {
        assert!(
            first.stdout.contains(&format!("{server}__echo")),
            "{first:?}"
        );
    }
    assert_eq!(servers.map(|name| starts(&scratch, name)), [1, 1, 1]);
    let expected = BTreeSet::from(servers.map(str::to_owned));
    assert_eq!(kept(&scratch), expected, "private listings kept too");

    // A warm catalogue: `tools` and `search` start none of them.
    let second = cli(&scratch, &["tools"]);
    assert_eq!(
        (second.code, &second.stdout),
        (0, &first.stdout),
        "{second:?}"
    );
    let search = cli(&scratch, &["search", "echo", "the", "text"]);
    assert_eq!(search.code, 0, "{search:?}");
    assert!(search.stdout.contains("ttl0__echo"), "{search:?}");
    assert_eq!(servers.map(|name| starts(&scratch, name)), [1, 1, 1]);

    // A call lists its server live, whatever is kept.
    let call = cli(&scratch, &["call", "ttl0", "echo", "text=hi"]);
    assert_eq!((call.code, call.stdout.trim()), (0, "hi"), "{call:?}");
    assert_eq!(starts(&scratch, "ttl0"), 2);
}

#[test]
fn an_edited_entry_does_not_reuse_the_old_listing() {
    let scratch = Scratch::new("catalogue-edited");
    scratch.write("config.toml", &block("fx", &["good"]));
    let first = cli(&scratch, &["tools"]);
    assert_eq!(first.code, 0, "{first:?}");
    // Another command line under the same name: another server.
    scratch.write("config.toml", &block("fx", &["good", "--page-size", "3"]));
    let edited = cli(&scratch, &["tools"]);
    assert_eq!(edited.code, 0, "{edited:?}");
    assert_eq!(starts(&scratch, "fx"), 2);
    let files = std::fs::read_dir(scratch.0.join("state/mcp-cli/catalogue")).unwrap();
    assert_eq!(files.count(), 2, "one listing per entry");
    // Each entry keeps its own: back to the first, nothing starts.
    scratch.write("config.toml", &block("fx", &["good"]));
    let back = cli(&scratch, &["tools"]);
    assert_eq!((back.code, &back.stdout), (0, &first.stdout), "{back:?}");
    assert_eq!(starts(&scratch, "fx"), 2);
}

/// What the catalogue file of server `name` says it was judged against: the other servers
/// its tools were scanned beside.
fn judged_against(scratch: &Scratch, name: &str) -> Vec<String> {
    let dir = scratch.0.join("state/mcp-cli/catalogue");
    let prefix = format!("{name}-");
    let file = (std::fs::read_dir(dir).unwrap())
        .map(|file| std::fs::read_to_string(file.unwrap().path()).unwrap())
        .map(|text| serde_json::from_str::<Value>(&text).unwrap())
        .find(|file| file["key"].as_str().unwrap().starts_with(&prefix))
        .unwrap();
    let others = &file["tools"]["items"]["judged"]["others"];
    serde_json::from_value(others.clone()).unwrap()
}

/// A listing's verdicts stand only beside the servers they were made against: once another
/// server is configured, the listing read from disk is judged again, once, and kept so, and
/// the server is not started for it.
#[test]
fn a_listing_read_from_disk_is_judged_again_once_the_servers_change() {
    let scratch = Scratch::new("catalogue-rejudged");
    scratch.write("config.toml", &block("fx", &["good"]));
    let first = cli(&scratch, &["tools"]);
    assert_eq!(first.code, 0, "{first:?}");
    // Beside whatever else the scratch home configures (its host configs' servers).
    let before = judged_against(&scratch, "fx");
    assert!(!before.contains(&"gx".to_owned()), "{before:?}");
    let both = format!("{}{}", block("fx", &["good"]), block("gx", &["good"]));
    scratch.write("config.toml", &both);
    let second = cli(&scratch, &["tools"]);
    assert_eq!(second.code, 0, "{second:?}");
    assert!(second.stdout.contains("fx__echo") && second.stdout.contains("gx__echo"));
    assert_eq!((starts(&scratch, "fx"), starts(&scratch, "gx")), (1, 1));
    let with = |name: &str| {
        let mut others = [before.clone(), vec![name.to_owned()]].concat();
        others.sort();
        others
    };
    assert_eq!(judged_against(&scratch, "fx"), with("gx"));
    assert_eq!(judged_against(&scratch, "gx"), with("fx"));
}

#[test]
fn a_denied_tool_stays_denied_when_read_from_disk() {
    let scratch = Scratch::new("catalogue-denied");
    let deny =
        |tool: &str| format!("[[permissions.rules]]\ntool = {tool:?}\naction = \"deny\"\n\n");
    let fx = block("fx", &["good"]);
    scratch.write("config.toml", &format!("{fx}{}", deny("fx__add")));
    let first = cli(&scratch, &["tools"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stdout.contains("fx__echo"), "{first:?}");
    assert!(!first.stdout.contains("fx__add"), "{first:?}");
    let second = cli(&scratch, &["--json", "tools"]);
    let names: Vec<Value> = serde_json::from_str::<Vec<Value>>(&second.stdout).unwrap();
    let names: Vec<&str> = (names.iter())
        .map(|tool| tool["qualifiedName"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"fx__echo") && !names.contains(&"fx__add"),
        "{names:?}"
    );
    assert_eq!(starts(&scratch, "fx"), 1);
    // A rule added after the listing applies to it too: the policy is not part of the key.
    let rules = [deny("fx__add"), deny("fx__echo")].concat();
    scratch.write("config.toml", &format!("{fx}{rules}"));
    let third = cli(&scratch, &["tools"]);
    assert_eq!(third.code, 0, "{third:?}");
    assert!(!third.stdout.contains("fx__echo"), "{third:?}");
    assert!(!third.stdout.contains("fx__add"), "{third:?}");
    assert!(third.stdout.contains("fx__blob"), "{third:?}");
    let search = cli(&scratch, &["search", "echo"]);
    assert!(!search.stdout.contains("fx__echo"), "{search:?}");
    assert_eq!(starts(&scratch, "fx"), 1, "all from disk");
    let call = cli(&scratch, &["call", "fx", "echo", "text=hi"]);
    assert_ne!(call.code, 0, "{call:?}");
    assert!(call.stderr.contains("denied"), "{call:?}");
}

#[test]
fn a_host_served_from_disk_is_told_when_the_started_server_lists_other_tools() {
    let scratch = Scratch::new("catalogue-changed");
    let mode = scratch.0.join("mode");
    let args = ["good", "--mode-file", mode.to_str().unwrap()];
    scratch.write("config.toml", &block("fx", &args));
    assert_eq!(cli(&scratch, &["tools"]).code, 0);
    // The server changed since it was listed (an upgrade, say): four more tools.
    scratch.write("mode", "odd-tools");
    let config = scratch.0.join("config.toml");
    let args = ["--config", config.to_str().unwrap(), "serve"];
    // A host that fills in forms, as the command line does: a server may list other tools
    // to a client that cannot, so those listings are kept apart.
    let (mut serve, mut host) = RawHost::start_patient(&scratch, &args, FORMS);
    let listed = host.tool_names(1);
    assert!(!listed.contains(&"fx__research".to_owned()), "{listed:?}");
    assert_eq!(starts(&scratch, "fx"), 1, "listed from disk");
    // A host that waits for ever fails the test instead.
    let pid = serve.id();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let waited = finished.recv_timeout(Duration::from_secs(60));
        if waited == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            let kill = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            drop(kill);
        }
    });
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx__echo", "arguments": {"text": "hi"}}});
    host.send(&call.to_string());
    let (mut answered, mut changed) = (false, false);
    while !(answered && changed) {
        let line = host.next();
        answered |= line["id"] == 2;
        changed |= line["method"] == "notifications/tools/list_changed";
    }
    drop(done);
    let listed = host.tool_names(3);
    assert!(listed.contains(&"fx__research".to_owned()), "{listed:?}");
    drop(host);
    assert!(serve.wait().unwrap().success());
    // And the new listing is kept.
    let tools = cli(&scratch, &["tools"]);
    assert!(tools.stdout.contains("fx__research"), "{tools:?}");
    assert_eq!(starts(&scratch, "fx"), 2);
}

/// Eight real servers (see `search::eight_servers`) that speak both eras.
const EIGHT: [&str; 8] = [
    "filesystem",
    "everything",
    "memory",
    "sequential-thinking",
    "github",
    "git",
    "time",
    "fetch",
];

/// The PyPI servers among them: on the Python SDK 2.x, which in the stateless era marks every
/// listing `ttlMs: 0, cacheScope: private` unless the server says otherwise (these do not).
const PYTHON: [&str; 3] = ["git", "time", "fetch"];

#[test]
#[cfg_attr(
    any(no_node, no_python),
    ignore = "needs Node.js and npm, and Python 3 with venv, on PATH"
)]
fn eight_real_servers_are_listed_from_disk_whatever_their_hints() {
    let scratch = Scratch::new("catalogue-eight");
    let config = eight_servers(&scratch);
    let config = config.to_str().unwrap();
    let timed = |args: &[&str]| {
        let began = Instant::now();
        let run = scratch.cli(&[&["--config", config][..], args].concat());
        (run, began.elapsed())
    };
    let starts = || EIGHT.map(|name| starts(&scratch, name));
    let (live, live_took) = timed(&["tools"]);
    assert_eq!(live.code, 0, "{live:?}");
    assert_eq!(starts(), [1; 8], "{live:?}");
    // The Python servers mark their listings `ttlMs: 0, private`; kept all the same, so the
    // next run starts nothing.
    let kept = kept(&scratch);
    assert!(PYTHON.iter().all(|name| kept.contains(*name)), "{kept:?}");
    let (disk, disk_took) = timed(&["tools"]);
    assert_eq!((disk.code, &disk.stdout), (0, &live.stdout), "{disk:?}");
    assert_eq!(starts(), [1; 8], "none started");
    println!(
        "tools over 8 real servers: {live_took:?} live, {disk_took:?} from disk ({:.1}x faster)",
        live_took.as_secs_f64() / disk_took.as_secs_f64()
    );
}
