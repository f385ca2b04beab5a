//! A read buffer that starts small and grows while reads fill it.

use std::ops::{Deref, DerefMut};

/// Bytes to read into. Most connections only ever carry short messages, so it starts small
/// and doubles each time a read fills it, up to its cap: zeroing a full-size buffer up front
/// cost every connection a page fault per 4 KiB it mostly never used.
#[derive(Debug)]
pub(crate) struct ReadBuffer {
    bytes: Vec<u8>,
    max: usize,
}

impl ReadBuffer {
    pub(crate) fn new(initial: usize, max: usize) -> Self {
        Self {
            bytes: vec![0; initial.clamp(1, max.max(1))],
            max,
        }
    }

    /// Notes that a read returned `n` bytes. One that filled the buffer means more may be
    /// waiting: the next read gets twice the room.
    pub(crate) fn grow_if_filled(&mut self, n: usize) {
        let len = self.bytes.len();
        if n == len && len < self.max {
            self.bytes.resize(len.saturating_mul(2).min(self.max), 0);
        }
    }
}

impl Deref for ReadBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl DerefMut for ReadBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_after_a_full_read_up_to_its_cap() {
        let mut buffer = ReadBuffer::new(4, 10);
        assert_eq!(buffer.len(), 4);
        buffer.grow_if_filled(3);
        assert_eq!(buffer.len(), 4, "a short read says the source is drained");
        buffer.grow_if_filled(4);
        assert_eq!(buffer.len(), 8);
        buffer.grow_if_filled(8);
        assert_eq!(buffer.len(), 10);
        buffer.grow_if_filled(10);
        assert_eq!(buffer.len(), 10);
    }
}
