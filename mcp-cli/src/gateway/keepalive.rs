//! Keep-alive for `serve --listen`'s event streams: a comment line (`: keep-alive`) whenever
//! a stream has been quiet for a while, so that proxies and load balancers, which cut idle
//! connections after 30 to 60 seconds, leave a `GET` stream, a `subscriptions/listen` or a
//! long call's stream open. Hosts ignore comments, as the event-stream format says.

use std::time::Duration;

use futures_lite::future::FutureExt;
use futures_lite::stream::{Stream, StreamExt};
use hyper::body::Bytes;

/// A quiet stream gets a comment after this long, unless `MCP_CLI_KEEPALIVE_MS` says.
const INTERVAL: Duration = Duration::from_secs(20);

/// The comment that keeps a stream alive.
pub(crate) const COMMENT: &[u8] = b": keep-alive\n\n";

/// `MCP_CLI_KEEPALIVE_MS` (for tests, or a proxy that cuts sooner), else 20 s.
pub(crate) fn interval() -> Duration {
    let millis = std::env::var("MCP_CLI_KEEPALIVE_MS").ok();
    let millis = millis.and_then(|text| text.trim().parse::<u64>().ok());
    millis
        .filter(|&millis| millis > 0)
        .map_or(INTERVAL, Duration::from_millis)
}

/// `stream`, with [`COMMENT`] sent whenever `every` passes without an event.
pub(crate) fn every(
    stream: impl Stream<Item = Bytes> + Send + 'static,
    every: Duration,
) -> impl Stream<Item = Bytes> + Send + 'static {
    // Dropping `next()` when the timer wins loses nothing: the stream keeps its own state.
    futures_lite::stream::unfold(Box::pin(stream), move |mut stream| async move {
        let next = async { Some(stream.next().await) };
        let quiet = async {
            async_io::Timer::after(every).await;
            None
        };
        match next.or(quiet).await {
            Some(Some(bytes)) => Some((bytes, stream)),
            Some(None) => None,
            None => Some((Bytes::from_static(COMMENT), stream)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_stream_gets_comments_and_events_pass_unchanged() {
        let (events, received) = async_channel::unbounded::<Bytes>();
        let stream = every(received, Duration::from_millis(10));
        futures_lite::future::block_on(async move {
            futures_lite::pin!(stream);
            // Nothing sent: comments, for as long as it stays quiet.
            assert_eq!(stream.next().await.unwrap(), COMMENT);
            assert_eq!(stream.next().await.unwrap(), COMMENT);
            events
                .send(Bytes::from_static(b"data: x\n\n"))
                .await
                .unwrap();
            let mut next = stream.next().await.unwrap();
            while next == COMMENT {
                next = stream.next().await.unwrap();
            }
            assert_eq!(next, &b"data: x\n\n"[..]);
            drop(events);
            while let Some(next) = stream.next().await {
                assert_eq!(next, COMMENT);
            }
        });
    }
}
