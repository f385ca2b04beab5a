//! Opening the system browser: `$BROWSER` if set, else `xdg-open` (or `open` on macOS).

use std::process::{Command, Stdio};

/// Tries to open `url`; whether some opener accepted it. Never fatal: the caller prints the
/// URL either way and keeps waiting.
pub(crate) async fn open(url: String, browser_env: Option<String>) -> bool {
    blocking::unblock(move || {
        candidates(browser_env)
            .into_iter()
            .any(|argv| run(&argv, &url))
    })
    .await
}

/// The commands to try, each as argv with `%s` standing for the URL (appended when absent).
fn candidates(browser_env: Option<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // `$BROWSER` is a colon-separated list of commands (the sensible-browser convention).
    for entry in browser_env.unwrap_or_default().split(':') {
        if let Ok(words) = shell_words::split(entry)
            && !words.is_empty()
        {
            out.push(words);
        }
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    out.push(vec![opener.to_owned()]);
    out
}

fn run(argv: &[String], url: &str) -> bool {
    let mut args: Vec<String> = argv.iter().map(|a| a.replace("%s", url)).collect();
    if !argv.iter().any(|a| a.contains("%s")) {
        args.push(url.to_owned());
    }
    let Some((program, rest)) = args.split_first() else {
        return false;
    };
    // The opener's chatter would land in our stderr between our own lines.
    Command::new(program)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browser_variable_comes_first() {
        let list = candidates(Some("firefox --new-tab:w3m %s".into()));
        assert_eq!(list[0], ["firefox", "--new-tab"]);
        assert_eq!(list[1], ["w3m", "%s"]);
        assert_eq!(list.len(), 3);
        assert_eq!(candidates(None).len(), 1);
    }

    #[test]
    fn an_opener_counts_only_when_it_succeeds() {
        assert!(run(&["true".into()], "http://x"));
        assert!(!run(&["false".into()], "http://x"));
        assert!(!run(&["/nonexistent/opener".into()], "http://x"));
    }
}
