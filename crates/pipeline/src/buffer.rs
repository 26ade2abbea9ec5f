//! A connection's read buffer, shared by the memcached and Redis reply readers: what has arrived and not been read
//! yet, filled from the socket, with reply lines found under a length bound. Both protocols are lines ended by CRLF
//! with byte payloads between them; each reader parses its own lines and takes payloads out of this buffer as
//! `Bytes` slices (no copy). A line arriving in pieces is scanned once: how far the buffer is known to hold no line
//! end is remembered.

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::Failure;

/// Bytes the buffer grows by when it is nearly full (a read of a large value reserves what it needs instead).
const GROW: usize = 16 * 1024;
/// A read is made into at least this much room. Values are taken out of the buffer as slices of it, so the room
/// left after one is the allocation's tail: with only 4 KiB required, a 10 KB page read from memcached filled the
/// ~6 KB a previous page left, then grew the buffer for the rest and copied what had arrived (a third of an
/// L2 hit's copying). Half of `GROW` makes a page of up to 8 KiB arrive in one read, and a reply that begins
/// with the buffer empty (the usual case) is put in a fresh allocation without copying anything.
const MIN_ROOM: usize = GROW / 2;

pub struct ReadBuffer {
    bytes: BytesMut,
    /// How far `bytes` is known to hold no `\n`.
    scanned: usize,
}

impl Default for ReadBuffer {
    fn default() -> Self {
        ReadBuffer::new()
    }
}

impl ReadBuffer {
    pub fn new() -> ReadBuffer {
        ReadBuffer { bytes: BytesMut::with_capacity(GROW), scanned: 0 }
    }

    /// What has arrived and not been consumed.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How much the buffer holds room for (what a bounds test checks).
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Consumes `n` bytes.
    pub fn advance(&mut self, n: usize) {
        self.bytes.advance(n);
        self.scanned = 0;
    }

    /// Takes the first `n` bytes out (a reply, or a value, whose slices the caller hands on).
    pub fn split_to(&mut self, n: usize) -> BytesMut {
        self.scanned = 0;
        self.bytes.split_to(n)
    }

    /// Makes room for `n` more bytes (a value whose length is known and was checked against its bound).
    pub fn reserve(&mut self, n: usize) {
        self.bytes.reserve(n);
    }

    /// Reads whatever the server sends next (at least one byte).
    pub async fn fill<R: AsyncRead + Unpin>(&mut self, io: &mut R) -> Result<(), Failure> {
        if self.bytes.capacity() - self.bytes.len() < MIN_ROOM {
            self.bytes.reserve(GROW);
        }
        match io.read_buf(&mut self.bytes).await {
            Ok(0) => Err(Failure("the server closed the connection".into())),
            Ok(_) => Ok(()),
            Err(e) => Err(Failure(e.to_string())),
        }
    }

    /// Waits until the buffer starts with a whole line of at most `max_line` bytes, ended by CRLF; the line's
    /// length without its CRLF (the line is `bytes()[..length]`, and `length + 2` bytes are to be consumed).
    pub async fn line<R: AsyncRead + Unpin>(&mut self, io: &mut R, max_line: usize) -> Result<usize, Failure> {
        let newline = loop {
            if let Some(at) = memchr::memchr(b'\n', &self.bytes[self.scanned..]) {
                break self.scanned + at;
            }
            self.scanned = self.bytes.len();
            if self.bytes.len() > max_line {
                return Err(malformed(&format!("a reply line longer than {max_line} bytes")));
            }
            self.fill(io).await?;
        };
        self.scanned = 0;
        if newline == 0 || self.bytes[newline - 1] != b'\r' {
            return Err(malformed("a reply line not ended by CRLF"));
        }
        Ok(newline - 1)
    }

    /// Waits until at least `n` bytes have arrived (a payload whose length was checked against its bound).
    pub async fn at_least<R: AsyncRead + Unpin>(&mut self, io: &mut R, n: usize) -> Result<(), Failure> {
        while self.bytes.len() < n {
            self.bytes.reserve(n - self.bytes.len());
            self.fill(io).await?;
        }
        Ok(())
    }
}

/// A reply the reader refuses (the connection is then out of step and closed).
pub fn malformed(what: &str) -> Failure {
    Failure(format!("refused the server's reply: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_arriving_a_byte_at_a_time_is_found_once_whole() {
        let (mut client, mut server) = tokio::io::duplex(1);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for byte in b"VA 3\r\nabc\r\n" {
                server.write_all(&[*byte]).await.expect("write");
            }
        });
        let mut buffer = ReadBuffer::new();
        let length = buffer.line(&mut client, 100).await.expect("line");
        assert_eq!(&buffer.bytes()[..length], b"VA 3");
        buffer.advance(length + 2);
        buffer.at_least(&mut client, 5).await.expect("payload");
        assert_eq!(&buffer.split_to(3)[..], b"abc");
        writer.await.expect("writer");
    }

    #[tokio::test]
    async fn long_lines_bare_newlines_and_closed_connections_are_failures() {
        let mut endless = &[b'x'; 20_000][..];
        let mut buffer = ReadBuffer::new();
        let long = buffer.line(&mut endless, 8192).await.expect_err("too long");
        assert!(long.0.contains("longer than 8192"), "{long:?}");
        assert!(buffer.capacity() < 64 * 1024, "stopped reading past the bound");

        let mut bare = &b"HD\nEN\r\n"[..];
        let bare = ReadBuffer::new().line(&mut bare, 100).await.expect_err("bare newline");
        assert!(bare.0.contains("CRLF"), "{bare:?}");

        let mut short = &b"abc"[..];
        let closed = ReadBuffer::new().at_least(&mut short, 10).await.expect_err("closed");
        assert!(closed.0.contains("closed"), "{closed:?}");
    }
}
