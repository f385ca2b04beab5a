//! The host's end of `serve` on stdio: our stdin and stdout, read and written on the reactor
//! when they are pipes or sockets (as a host spawns us), through a blocking thread otherwise.
//!
//! A blocking thread costs a hand-off and two wake-ups per message each way, most of what a
//! call through the gateway added; the reactor reads a pipe on the thread that handles it.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_io::Async;
use futures_lite::io::{AsyncRead, AsyncWrite};
use mcp_smol::ReadWhenReady;
use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};

/// What the host writes to us.
pub(crate) type Reader = Box<dyn AsyncRead + Unpin + Send>;
/// What the host reads from us.
pub(crate) type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// Our stdin and stdout as the host's byte stream.
pub(crate) fn host_stdio() -> (Reader, Writer) {
    let reader: Reader = match on_reactor(io::stdin().as_fd(), None) {
        Some(pipe) => Box::new(pipe),
        None => Box::new(blocking::Unblock::new(io::stdin())),
    };
    // Non-blocking mode belongs to the open file, which stderr may share (`2>&1`): a message
    // written there while the pipe is full would then fail instead of waiting.
    let stderr = (io::stderr().as_fd().try_clone_to_owned().ok()).map(File::from);
    let writer: Writer = match on_reactor(io::stdout().as_fd(), stderr.as_ref()) {
        Some(pipe) => Box::new(pipe),
        None => Box::new(blocking::Unblock::new(io::stdout())),
    };
    (reader, writer)
}

/// `fd` registered with the reactor, if it is a pipe or a socket (a terminal or a file is
/// shared with others, or cannot be polled) and not the same file as `unless`.
fn on_reactor(fd: BorrowedFd<'_>, unless: Option<&File>) -> Option<HostPipe> {
    let file = File::from(fd.try_clone_to_owned().ok()?);
    let metadata = file.metadata().ok()?;
    let kind = metadata.file_type();
    if !(kind.is_fifo() || kind.is_socket()) {
        return None;
    }
    if let Some(other) = unless.and_then(|other| other.metadata().ok())
        && (other.dev(), other.ino()) == (metadata.dev(), metadata.ino())
    {
        return None;
    }
    let flags = fcntl_getfl(&file).ok()?;
    let io = Async::new(file).ok()?;
    Some(HostPipe {
        io: ReadWhenReady::on_reactor(Arc::new(io)),
        flags,
    })
}

/// A pipe or socket of ours on the reactor; its blocking mode is given back when it is
/// dropped, for whoever shares it after us.
struct HostPipe {
    /// Read only once the reactor says so after a read found it empty or drained it: the
    /// server's loop polls its reader whenever it wakes for anything else (a backend's
    /// answer, a write done), which made three reads that found nothing per call.
    io: ReadWhenReady<File>,
    /// The file's flags before [`Async::new`] made it non-blocking.
    flags: OFlags,
}

impl Drop for HostPipe {
    fn drop(&mut self) {
        let _ = fcntl_setfl(self.io.get_ref().get_ref(), self.flags);
    }
}

impl AsyncRead for HostPipe {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for HostPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io.get_ref()).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io.get_ref()).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io.get_ref()).poll_close(cx)
    }
}
