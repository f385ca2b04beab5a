//! Reading a pipe on the reactor, asking the kernel only when something is likely there.
//!
//! A plain async read tries the pipe first and waits for readiness only when the pipe is
//! empty. With the server on another CPU, the pipe is empty between a request and its answer,
//! so each turn of the driver paid a `read` that found nothing. Here a read that came back
//! short means the pipe is drained, and the next read waits for the reactor's word first.
//!
//! With the server on our CPU it is the other way round: our request wakes it, the kernel
//! often switches to it at once, and its answer is in the pipe before we come to read. Asking
//! the reactor first would then cost a turn of it for nothing (six system calls on async-io),
//! so after each write the driver says an answer may be waiting ([`PipeInput::expect`]) and
//! the pipe is tried first.

use std::io::{self, ErrorKind, PipeReader, Read};
use std::task::{Context, Poll, ready};

use async_io::Async;

/// One pipe's read end, non-blocking, registered with the reactor.
#[derive(Debug)]
pub(crate) struct PipeInput {
    pipe: Async<PipeReader>,
    /// The last read filled the whole buffer, so more may be waiting.
    maybe_more: bool,
}

impl PipeInput {
    pub(crate) fn new(pipe: PipeReader) -> io::Result<Self> {
        Ok(Self {
            pipe: Async::new(pipe)?,
            // Whatever was written before we registered is read at once.
            maybe_more: true,
        })
    }

    /// We just wrote to the server, which may have answered already: the next read tries the
    /// pipe before asking the reactor.
    pub(crate) fn expect(&mut self) {
        self.maybe_more = true;
    }

    /// Reads what the pipe holds, up to `buffer`'s length; `Ok(0)` at EOF.
    #[cfg(test)]
    async fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read(cx, buffer)).await
    }

    /// Polls for what the pipe holds, up to `buffer`'s length; `Ok(0)` at EOF.
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buffer: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            if self.maybe_more {
                let mut pipe = self.pipe.get_ref();
                match pipe.read(buffer) {
                    Ok(n) => {
                        self.maybe_more = n == buffer.len() && n > 0;
                        return Poll::Ready(Ok(n));
                    }
                    Err(error) if error.kind() == ErrorKind::WouldBlock => self.maybe_more = false,
                    Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                    Err(error) => return Poll::Ready(Err(error)),
                }
            }
            // Ready only for an event delivered since the last call: a drained pipe costs
            // no system call until the server writes again.
            ready!(self.pipe.poll_readable(cx))?;
            self.maybe_more = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_what_was_written_before_and_after_it_drained() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"early").unwrap();
        let mut input = PipeInput::new(reader).unwrap();
        let mut buffer = [0; 64];
        async_io::block_on(async {
            let n = input.read(&mut buffer).await.unwrap();
            assert_eq!(&buffer[..n], b"early");
            // Drained: the next read waits for the reactor, which must still see new data.
            let late = async {
                writer.write_all(b"late").unwrap();
                writer
            };
            let (n, writer) = futures_lite::future::zip(input.read(&mut buffer), late).await;
            assert_eq!(&buffer[..n.unwrap()], b"late");
            drop(writer);
            assert_eq!(input.read(&mut buffer).await.unwrap(), 0);
        });
    }

    /// One poll, with no reactor turn to deliver readiness.
    fn poll_once(input: &mut PipeInput, buffer: &mut [u8]) -> Option<io::Result<usize>> {
        futures_lite::future::block_on(futures_lite::future::poll_once(input.read(buffer)))
    }

    #[test]
    fn after_a_write_the_answer_is_read_without_the_reactor() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"first").unwrap();
        let mut input = PipeInput::new(reader).unwrap();
        let mut buffer = [0; 64];
        assert!(matches!(poll_once(&mut input, &mut buffer), Some(Ok(5))));
        // Drained: what comes next waits for the reactor's word...
        writer.write_all(b"second").unwrap();
        assert!(poll_once(&mut input, &mut buffer).is_none());
        // ...unless an answer is expected, when the pipe is tried first.
        input.expect();
        assert!(matches!(poll_once(&mut input, &mut buffer), Some(Ok(6))));
        assert_eq!(&buffer[..6], b"second");
    }

    #[test]
    fn a_full_buffer_is_read_again_at_once() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(&[7; 100]).unwrap();
        drop(writer);
        let mut input = PipeInput::new(reader).unwrap();
        let mut buffer = [0; 60];
        async_io::block_on(async {
            assert_eq!(input.read(&mut buffer).await.unwrap(), 60);
            assert_eq!(input.read(&mut buffer).await.unwrap(), 40);
            assert_eq!(input.read(&mut buffer).await.unwrap(), 0);
        });
    }
}
