//! What one server may cost us: a listing longer than `max_listed` cut to its first entries
//! (one page, many pages, a line parsed as it arrives) with a warning that says so, told again
//! from the catalogue on disk, and the files we write staying small.

use crate::support::{FIXTURE, Run, Scratch};

/// A config running the fixture's `huge-listing` mode as server `huge`, listing `listed` tools
/// (`extra` fixture arguments), keeping `max_listed` of them, the lines the client sends logged.
fn huge(scratch: &Scratch, listed: usize, max_listed: usize, extra: &[&str]) {
    let log = scratch.0.join("received.log");
    let mut args = vec!["huge-listing", "--log-received", log.to_str().unwrap()];
    args.extend(extra);
    let config = format!(
        "[mcp.huge]\ncommand = {FIXTURE:?}\nargs = {args:?}\nenv = {{ MCP_FIXTURE_LISTED = \"{listed}\" }}\nmax_listed = {max_listed}\n"
    );
    scratch.write("config.toml", &config);
}

fn tools(scratch: &Scratch) -> Run {
    let config = scratch.0.join("config.toml");
    scratch.cli(&["--config", config.to_str().unwrap(), "tools", "huge"])
}

/// The tool names `tools` printed, in order.
fn names(run: &Run) -> Vec<String> {
    run.stdout.lines().map(str::to_owned).collect()
}

/// The first `n` names the fixture lists, as `tools` shows them.
fn first(n: usize) -> Vec<String> {
    (0..n).map(|n| format!("huge__tool_{n}")).collect()
}

const WARNING: &str = "mcp-cli: server huge listed more than 100 tools; the first 100 are kept \
                       (`max_listed` in its entry raises the cap)";

/// The size of the largest file under the scratch folder's state folder.
fn largest_state_file(scratch: &Scratch) -> u64 {
    fn walk(dir: &std::path::Path, largest: &mut u64) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                walk(&entry.path(), largest);
            } else {
                *largest = (*largest).max(meta.len());
            }
        }
    }
    let mut largest = 0;
    walk(&scratch.0.join("state"), &mut largest);
    largest
}

/// How many `tools/list` requests the fixture received.
fn list_requests(scratch: &Scratch) -> usize {
    let log = std::fs::read_to_string(scratch.0.join("received.log")).unwrap_or_default();
    log.lines()
        .filter(|line| line.contains("\"tools/list\""))
        .count()
}

#[test]
fn a_listing_past_max_listed_keeps_its_first_entries_and_says_so() {
    let scratch = Scratch::new("limits-one-page");
    huge(&scratch, 1000, 100, &[]);
    let run = tools(&scratch);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(names(&run), first(100), "{run:?}");
    assert!(run.stderr.contains(WARNING), "{run:?}");
    // 100 small tools pinned and catalogued: a few tens of kilobytes at most.
    let largest = largest_state_file(&scratch);
    assert!(largest < 64 * 1024, "a state file of {largest} bytes");

    // Read back from the catalogue on disk, without starting the server: the same warning.
    let again = tools(&scratch);
    assert_eq!(list_requests(&scratch), 1, "answered from disk");
    assert_eq!((again.code, names(&again)), (0, first(100)), "{again:?}");
    assert!(again.stderr.contains(WARNING), "{again:?}");
}

#[test]
fn the_cap_counts_over_all_pages_and_no_page_past_it_is_asked_for() {
    let scratch = Scratch::new("limits-pages");
    huge(&scratch, 1000, 100, &["--page-size", "30"]);
    let run = tools(&scratch);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(names(&run), first(100), "{run:?}");
    assert!(run.stderr.contains(WARNING), "{run:?}");
    // Pages of 0-29, 30-59, 60-89 and 90-119: the fourth holds the 101st, and is the last.
    assert_eq!(list_requests(&scratch), 4);
}

#[test]
fn a_listing_parsed_as_it_arrives_keeps_its_first_entries() {
    let scratch = Scratch::new("limits-long-line");
    // About 1.7 MB in one line: past the 1 MiB from which a line is parsed as it arrives.
    huge(&scratch, 30_000, 100, &[]);
    let run = tools(&scratch);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(names(&run), first(100), "{run:?}");
    assert!(run.stderr.contains(WARNING), "{run:?}");
    assert!(largest_state_file(&scratch) < 64 * 1024);
}

#[test]
fn a_listing_within_max_listed_is_whole_and_quiet() {
    let scratch = Scratch::new("limits-within");
    huge(&scratch, 100, 100, &["--page-size", "50"]);
    let run = tools(&scratch);
    assert_eq!((run.code, names(&run)), (0, first(100)), "{run:?}");
    assert!(!run.stderr.contains("listed more than"), "{run:?}");
}
