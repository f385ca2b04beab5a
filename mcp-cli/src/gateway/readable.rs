//! A host's TCP connection as `serve --listen` gives it to hyper: read only once the reactor
//! said it may be read.
//!
//! Hyper polls a kept-alive connection for reading several times per request, and each poll
//! of an [`Async`] stream tries the read first: four failed reads (`EAGAIN`) a request, a
//! tenth of what serving it cost. A read that leaves the socket empty (it filled less than
//! the buffer) waits for the reactor instead; so does one that failed.

use std::io::{self, Read};
use std::net::TcpStream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use async_io::Async;
use futures_lite::io::{AsyncRead, AsyncWrite};

/// A connection whose reads wait for readiness once the socket was found empty.
pub(crate) struct ReadWhenReady {
    io: Arc<Async<TcpStream>>,
    /// Whether a read may find bytes without waiting for the reactor.
    maybe_more: bool,
}

impl ReadWhenReady {
    pub(crate) fn new(stream: async_net::TcpStream) -> Self {
        Self {
            io: stream.into(),
            maybe_more: true,
        }
    }
}

impl AsyncRead for ReadWhenReady {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            if !self.maybe_more {
                ready!(self.io.poll_readable(cx))?;
            }
            match Read::read(&mut self.io.get_ref(), buf) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.maybe_more = false;
                }
                Ok(read) => {
                    // Less than asked for: the socket had no more then.
                    self.maybe_more = read == buf.len();
                    return Poll::Ready(Ok(read));
                }
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

impl AsyncWrite for ReadWhenReady {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut &*self.io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self.io).poll_flush(cx)
    }

    /// Ends our side, as `async_net`'s stream does.
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.io.get_ref().shutdown(std::net::Shutdown::Write))
    }
}
