//! Replies are hostile too (spec/STORES.md §2): a Redis server, or whatever answers on its port, may announce a
//! 1 GiB value, nest arrays a hundred thousand deep or send a line that never ends, and redis-rs would buffer it
//! all before it could say no (measured: the front grew from 25 MB to 642 MB on one 1 GiB reply, and kept it).
//! redis-rs takes any byte stream, so larder puts this one between it and the socket: a RESP scanner that follows
//! the replies as their bytes arrive and fails the read (an I/O error, which drops the connection) the moment a
//! reply breaks a bound, before anything is buffered for it. It costs a pass over the bytes of each reply's lines;
//! bulk payloads are skipped by count, not scanned.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest line that is not a value (status, error, number, length).
const MAX_LINE: usize = 8 * 1024;
/// How deep aggregates may nest (larder's commands need 3: CLUSTER SLOTS).
pub const MAX_DEPTH: usize = 8;
/// Elements one aggregate may announce.
const MAX_ELEMENTS: u64 = 1 << 20;

/// Where the scanner is within the current reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Expecting a type byte.
    Start,
    /// Reading the line after type byte `kind`, `read` bytes of it so far (the CR included, once seen).
    Line { kind: u8, read: usize },
    /// Skipping a bulk payload and its CR LF.
    Bulk { remaining: u64 },
}

/// Follows RESP2/RESP3 replies byte by byte and refuses the first one that breaks a bound.
#[derive(Debug)]
pub struct ReplyScanner {
    max_value: u64,
    state: State,
    /// The number being read from the current line (a length or count).
    number: Option<i64>,
    negative: bool,
    /// Elements still expected at each open aggregate level.
    pending: Vec<u64>,
}

impl ReplyScanner {
    pub fn new(max_value: usize) -> ReplyScanner {
        ReplyScanner {
            max_value: max_value as u64,
            state: State::Start,
            number: None,
            negative: false,
            pending: Vec::with_capacity(MAX_DEPTH),
        }
    }

    /// Follows `bytes` (the next ones the server sent); the reason for refusing them, if a reply breaks a bound.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        while !bytes.is_empty() {
            match self.state {
                State::Start => {
                    if !is_counted(bytes[0]) && !b"+-:_,#(".contains(&bytes[0]) {
                        return Err(format!("a reply that starts with byte {:#04x}", bytes[0]));
                    }
                    self.state = State::Line { kind: bytes[0], read: 0 };
                    self.number = None;
                    self.negative = false;
                    bytes = &bytes[1..];
                }
                State::Bulk { remaining } => {
                    let take = remaining.min(bytes.len() as u64);
                    bytes = &bytes[take as usize..];
                    if take == remaining {
                        self.value_done();
                    } else {
                        self.state = State::Bulk { remaining: remaining - take };
                    }
                }
                State::Line { kind, read } => {
                    let end = bytes.iter().position(|b| *b == b'\n');
                    let line = &bytes[..end.unwrap_or(bytes.len())];
                    if read + line.len() > MAX_LINE {
                        return Err(format!("a reply line longer than {MAX_LINE} bytes"));
                    }
                    if is_counted(kind) {
                        self.read_number(line)?;
                    }
                    match end {
                        None => {
                            self.state = State::Line { kind, read: read + line.len() };
                            bytes = &[];
                        }
                        Some(end) => {
                            bytes = &bytes[end + 1..];
                            self.line_done(kind)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Accumulates the digits of a length or count line (the CR before the LF is skipped).
    fn read_number(&mut self, line: &[u8]) -> Result<(), String> {
        for &b in line {
            match b {
                b'-' if self.number.is_none() && !self.negative => self.negative = true,
                b'0'..=b'9' => {
                    let n = self.number.unwrap_or(0);
                    let next = n.checked_mul(10).and_then(|n| n.checked_add(i64::from(b - b'0')));
                    self.number = Some(next.ok_or("a length that overflows")?);
                }
                b'\r' => {}
                _ => return Err(format!("a length with byte {b:#04x}")),
            }
        }
        Ok(())
    }

    fn line_done(&mut self, kind: u8) -> Result<(), String> {
        if !is_counted(kind) {
            self.value_done();
            return Ok(());
        }
        let n = self.number.ok_or("a length line without digits")?;
        let n = if self.negative { -n } else { n };
        if n < 0 {
            // -1 is RESP2's null bulk string or array.
            if n != -1 {
                return Err(format!("a length of {n}"));
            }
            self.value_done();
            return Ok(());
        }
        let n = n as u64;
        match kind {
            b'$' | b'!' | b'=' | b'?' => {
                if n > self.max_value {
                    return Err(format!("a value of {n} bytes, past max_value ({} bytes)", self.max_value));
                }
                self.state = State::Bulk { remaining: n + 2 };
            }
            _ => {
                let elements = if kind == b'%' || kind == b'|' { n.saturating_mul(2) } else { n };
                if elements > MAX_ELEMENTS {
                    return Err(format!("an aggregate of {n} elements"));
                }
                if self.pending.len() >= MAX_DEPTH {
                    return Err(format!("replies nested more than {MAX_DEPTH} deep"));
                }
                if elements == 0 {
                    self.value_done();
                } else {
                    self.pending.push(elements);
                    self.state = State::Start;
                }
            }
        }
        Ok(())
    }

    /// One value is complete: count it against the aggregates that hold it.
    fn value_done(&mut self) {
        self.state = State::Start;
        while let Some(left) = self.pending.last_mut() {
            *left -= 1;
            if *left > 0 {
                return;
            }
            self.pending.pop();
        }
    }
}

/// Types whose line is a length or count.
fn is_counted(kind: u8) -> bool {
    b"$!=?*~>%|".contains(&kind)
}

/// A byte stream whose reads pass through a [`ReplyScanner`]: a reply that breaks a bound is an I/O error.
pub struct BoundedStream<S> {
    inner: S,
    scanner: ReplyScanner,
}

impl<S> BoundedStream<S> {
    pub fn new(inner: S, max_value: usize) -> BoundedStream<S> {
        BoundedStream { inner, scanner: ReplyScanner::new(max_value) }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for BoundedStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let result = this.scanner.feed(&buf.filled()[before..]);
                Poll::Ready(result.map_err(|reason| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("refused the server's reply: {reason}"))
                }))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for BoundedStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_in_pieces(bytes: &[u8], max_value: usize, piece: usize) -> Result<(), String> {
        let mut scanner = ReplyScanner::new(max_value);
        for chunk in bytes.chunks(piece.max(1)) {
            scanner.feed(chunk)?;
        }
        Ok(())
    }

    #[test]
    fn real_replies_pass_in_any_split() {
        let replies: &[&[u8]] = &[
            b"+OK\r\n",
            b"-ERR unknown command\r\n",
            b":42\r\n",
            b"$5\r\nhello\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*3\r\n$1\r\na\r\n$-1\r\n$2\r\n\r\n\r\n",
            b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nk\r\n$1\r\nj\r\n",
            b"*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$3\r\nabc\r\n",
            b"%1\r\n+a\r\n:1\r\n_\r\n,1.5\r\n#t\r\n=7\r\ntxt:abc\r\n",
            b"*0\r\n+after empty\r\n",
        ];
        let all: Vec<u8> = replies.concat();
        for piece in [1, 2, 3, 7, all.len()] {
            assert_eq!(scan_in_pieces(&all, 64, piece), Ok(()), "pieces of {piece}");
        }
    }

    #[test]
    fn replies_past_a_bound_are_refused_as_they_arrive() {
        let huge = scan_in_pieces(b"$1073741824\r\n", 64 << 20, 5);
        assert!(huge.is_err_and(|e| e.contains("max_value")));
        assert!(scan_in_pieces(b"$65\r\n", 64, 100).is_err());
        assert!(scan_in_pieces(b"$64\r\n", 64, 100).is_ok());
        let nested = b"*1\r\n".repeat(MAX_DEPTH + 1);
        assert!(scan_in_pieces(&nested, 64, 3).is_err_and(|e| e.contains("nested")));
        assert!(scan_in_pieces(&b"*1\r\n".repeat(MAX_DEPTH), 64, 3).is_ok());
        let endless = [b"+".as_slice(), &[b'x'; MAX_LINE + 1]].concat();
        assert!(scan_in_pieces(&endless, 64, 1000).is_err_and(|e| e.contains("line")));
        assert!(scan_in_pieces(b"*99999999999\r\n", 64, 100).is_err());
        assert!(scan_in_pieces(b"$-2\r\n", 64, 100).is_err());
        assert!(scan_in_pieces(b"$1x\r\n", 64, 100).is_err());
        assert!(scan_in_pieces(b"\x00garbage", 64, 100).is_err());
        assert!(scan_in_pieces(b"$99999999999999999999999\r\n", 64, 100).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let bytes: Vec<u8> =
                (0..rng.usize(0..64)).map(|_| *rng.choice(b"$*%:+-_\r\n0123456789x").unwrap_or(&b'x')).collect();
            let _ = scan_in_pieces(&bytes, 16, rng.usize(1..8));
        }
    }
}
