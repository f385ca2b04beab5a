//! Replays the config fuzz corpus through the fuzz target's check, on stable.

#![allow(clippy::unwrap_used)]

// The check names `crate::config`: the fuzz crate compiles the config module from its sources.
use mcp_client_cli::config;

#[path = "../../fuzz/src/config_check.rs"]
#[allow(unreachable_pub)]
mod config_check;

#[test]
fn config_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/config");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| config_check::check_config(&data));
        assert!(
            outcome.is_ok(),
            "corpus file {} fails its check",
            path.display()
        );
        count += 1;
    }
    assert!(count > 0, "corpus {} is empty", dir.display());
}
