//! A spinner on stderr for work that takes more than a moment, shown only on a terminal.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long work may take before the spinner appears: quick calls stay silent.
const DELAY: Duration = Duration::from_millis(300);
const FRAME: Duration = Duration::from_millis(100);
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Whether spinners are held back while something else (a prompt) owns the terminal line;
/// the lock also keeps a frame from being drawn in the middle of that.
static PAUSED: Mutex<bool> = Mutex::new(false);

/// Keeps every spinner off the terminal until dropped, its line cleared: for a prompt.
#[derive(Debug)]
pub(crate) struct Paused(());

pub(crate) fn pause() -> Paused {
    let mut paused = PAUSED.lock().unwrap_or_else(PoisonError::into_inner);
    *paused = true;
    let _ = write!(std::io::stderr(), "\r\x1b[2K");
    Paused(())
}

impl Drop for Paused {
    fn drop(&mut self) {
        *PAUSED.lock().unwrap_or_else(PoisonError::into_inner) = false;
    }
}

/// Shows a label with a spinner until dropped. Does nothing when stderr is not a terminal.
#[derive(Debug)]
pub(crate) struct Spinner {
    label: Arc<Mutex<String>>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Spinner {
    pub(crate) fn start(label: impl Into<String>) -> Self {
        let label = Arc::new(Mutex::new(label.into()));
        if !std::io::stderr().is_terminal() {
            return Self {
                label,
                stop: None,
                thread: None,
            };
        }
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let shown = label.clone();
        let thread = std::thread::spawn(move || {
            if stopped.recv_timeout(DELAY).is_ok() {
                return;
            }
            for frame in FRAMES.iter().cycle() {
                let text = shown.lock().map(|l| l.clone()).unwrap_or_default();
                // Labels carry servers' progress messages: no escape sequence of theirs runs.
                let text = crate::output::escape_controls(&text);
                let paused = PAUSED.lock().unwrap_or_else(PoisonError::into_inner);
                if !*paused {
                    // A terminal that went away is no reason to panic: the spinner just stops
                    // showing.
                    let _ = write!(std::io::stderr(), "\r\x1b[2K{frame} {text}");
                }
                drop(paused);
                if !matches!(
                    stopped.recv_timeout(FRAME),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                ) {
                    let _ = write!(std::io::stderr(), "\r\x1b[2K");
                    return;
                }
            }
        });
        Self {
            label,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub(crate) fn set_label(&self, text: impl Into<String>) {
        if let Ok(mut label) = self.label.lock() {
            *label = text.into();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
