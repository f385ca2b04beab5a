//! A socket as hyper reads and writes it, at the least cost per request: used by our HTTP
//! client and by `mcp-cli serve --listen`.
//!
//! Two costs go. Hyper hands each read a buffer it has not initialized, and smol-hyper's
//! adapter zeroes the whole of it (8 KiB or more) on every read, more work than the rest of
//! an exchange's parsing: [`HyperIo`] reads into a buffer of its own, zeroed once, and copies
//! what came. And hyper polls a kept-alive connection for reading several times per request,
//! each poll of an [`Async`] stream trying the read first (four to six failed reads,
//! `EAGAIN`, a request): [`ReadWhenReady`] waits for the reactor once the socket was found
//! empty.

use std::io::{self, Read};
use std::net::TcpStream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use async_io::Async;
use futures_lite::io::{AsyncRead, AsyncWrite};
use hyper::rt::ReadBufCursor;

/// The most one read asks of the socket: hyper's buffer may offer more (it grows to 400 KiB
/// for large bodies), but a larger read gains little and the buffer stays small.
const MOST_READ: usize = 64 * 1024;

/// A byte stream (`futures` I/O traits) given to hyper (`hyper::rt` I/O traits).
#[derive(Debug)]
pub struct HyperIo<S> {
    stream: S,
    /// Where reads land before hyper's buffer; zeroed once, as it grows.
    landing: Vec<u8>,
}

impl<S> HyperIo<S> {
    /// Wraps `stream`.
    pub fn new(stream: S) -> Self {
        Self {
            stream,
            landing: Vec::new(),
        }
    }
}

impl<S: AsyncRead + Unpin> hyper::rt::Read for HyperIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let wanted = buf.remaining().min(MOST_READ);
        if this.landing.len() < wanted {
            this.landing.resize(wanted, 0);
        }
        let landing = &mut this.landing[..wanted];
        let read = ready!(Pin::new(&mut this.stream).poll_read(cx, landing))?;
        buf.put_slice(&this.landing[..read]);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> hyper::rt::Write for HyperIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_close(cx)
    }
}

/// A socket or pipe on the reactor whose reads wait for the reactor once it was found empty:
/// a read that failed (`EAGAIN`), or that filled less than it asked for. An [`Async`]
/// stream's own read tries the system call first on every poll, and a loop that polls its
/// reader whenever it wakes for anything else makes reads that find nothing.
#[derive(Debug)]
pub struct ReadWhenReady<T = TcpStream> {
    io: Arc<Async<T>>,
    /// Whether a read may find bytes without waiting for the reactor.
    maybe_more: bool,
}

impl ReadWhenReady {
    /// Wraps `stream`.
    pub fn new(stream: async_net::TcpStream) -> Self {
        Self::on_reactor(stream.into())
    }
}

impl<T> ReadWhenReady<T> {
    /// Wraps `io`, a file or socket already on the reactor.
    pub fn on_reactor(io: Arc<Async<T>>) -> Self {
        Self {
            io,
            maybe_more: true,
        }
    }

    /// The file or socket read.
    pub fn get_ref(&self) -> &Async<T> {
        &self.io
    }
}

impl<T> AsyncRead for ReadWhenReady<T>
where
    for<'a> &'a T: Read,
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            if !self.maybe_more {
                // Ready only for an event delivered since the last call: no system call
                // until the peer writes again.
                ready!(self.io.poll_readable(cx))?;
                self.maybe_more = true;
            }
            match Read::read(&mut self.io.get_ref(), buf) {
                Ok(read) => {
                    // Less than asked for: it had no more then.
                    self.maybe_more = read == buf.len() && read > 0;
                    return Poll::Ready(Ok(read));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.maybe_more = false;
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
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
