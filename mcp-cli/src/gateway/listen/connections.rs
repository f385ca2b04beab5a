//! How many connections `serve --listen` holds: at most `--max-connections` at once, one more
//! answered `503 Service Unavailable` and closed, and the memory of a burst of them given back
//! to the system once most have closed.
//!
//! Each open connection costs its task, hyper's read and write buffers and our read buffer
//! (tens of KiB). They are freed when it closes, but glibc's allocator keeps freed memory in
//! its arenas, so without [`give_back`] the process stays at its peak for good.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_net::TcpStream;
use futures_lite::future::FutureExt;
use futures_lite::{AsyncReadExt, AsyncWriteExt};

/// The default of `--max-connections`: two for each of the 256 sessions a listener takes (a
/// session's requests and its standalone stream), and within the soft limit of 1024 open
/// files most systems start a shell with, leaving room for the servers' pipes and logs.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// At most this many refusals are being written at once; past them a connection is closed
/// without a word, so that a flood costs no more than this.
const MAX_REFUSING: usize = 64;

/// How long a refusal may take to write, and to read what the host sent meanwhile.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// Memory is given back once the connections open fall to a quarter of a peak of at least
/// this many.
const GIVE_BACK_FROM: usize = 64;

/// The connections open, against the cap.
#[derive(Debug)]
pub(super) struct Connections {
    max: usize,
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    open: AtomicUsize,
    /// The most open at once since memory was last given back.
    peak: AtomicUsize,
    refusing: AtomicUsize,
}

/// One open connection's place under the cap, given up when dropped (once its connection's
/// memory has been freed).
#[derive(Debug)]
pub(super) struct Open(Arc<Counts>);

impl Connections {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            counts: Arc::default(),
        }
    }

    /// A place for one more connection, or `None` when `max` are open.
    pub(super) fn enter(&self) -> Option<Open> {
        // One step, so that a connection closing on another thread meanwhile is not lost.
        let more = |open: usize| (open < self.max).then_some(open + 1);
        let open = (self.counts.open).fetch_update(Ordering::AcqRel, Ordering::Acquire, more);
        let open = open.ok()? + 1;
        self.counts.peak.fetch_max(open, Ordering::AcqRel);
        Some(Open(self.counts.clone()))
    }

    /// Answers a connection past the cap with a 503 that says why, then closes it: on a task
    /// of its own while fewer than [`MAX_REFUSING`] are being answered, else at once.
    pub(super) fn refuse(&self, executor: &async_executor::Executor<'static>, stream: TcpStream) {
        let counts = self.counts.clone();
        if counts.refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
            counts.refusing.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let max = self.max;
        executor
            .spawn(async move {
                let timeout = async {
                    async_io::Timer::after(REFUSAL_TIME).await;
                };
                refusal(stream, max).or(timeout).await;
                counts.refusing.fetch_sub(1, Ordering::AcqRel);
            })
            .detach();
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let left = self.0.open.fetch_sub(1, Ordering::AcqRel) - 1;
        let peak = self.0.peak.load(Ordering::Acquire);
        if peak >= GIVE_BACK_FROM && left <= peak / 4 {
            self.0.peak.store(left, Ordering::Release);
            give_back();
        }
    }
}

/// Writes the 503, ends our side, and reads what the host sent until it closes too: closing
/// with its bytes unread would reset the connection, and the host might lose the answer.
async fn refusal(mut stream: TcpStream, max: usize) {
    let body = format!(
        "mcp-cli serve: {max} connections are open, the most --max-connections allows; \
         try again shortly\n"
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink).await, Ok(read) if read > 0) {}
}

/// Gives the memory freed by closed connections back to the system (glibc keeps it
/// otherwise); elsewhere nothing needs doing, or can be done.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn give_back() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: malloc_trim takes no pointer of ours; it walks glibc's own arenas under their
    // locks and may be called from any thread at any time.
    let _ = unsafe { malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_holds_and_a_closed_connection_makes_room() {
        let connections = Connections::new(2);
        let first = connections.enter().unwrap();
        let _second = connections.enter().unwrap();
        assert!(connections.enter().is_none());
        drop(first);
        assert!(connections.enter().is_some());
    }

    #[test]
    fn a_burst_closing_resets_the_peak() {
        let connections = Connections::new(1000);
        let burst: Vec<Open> = (0..100).map(|_| connections.enter().unwrap()).collect();
        assert_eq!(connections.counts.peak.load(Ordering::Acquire), 100);
        drop(burst);
        // Given back once at 25 left; the peak then counts from there.
        assert_eq!(connections.counts.open.load(Ordering::Acquire), 0);
        assert!(connections.counts.peak.load(Ordering::Acquire) <= 25);
    }
}
