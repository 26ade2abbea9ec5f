//! larder's own RESP2 reader for the read path of a standalone server: GET, MGET and the greeting (AUTH, SELECT).
//!
//! Why not redis-rs's parser here: measured with callgrind on `larder bench stores --ops get_many` (100 × 1 KiB),
//! redis-rs's combine-based reply parser was 45% of the client's instructions (a `Vec` copied per value), and
//! larder's MGET ran at 0.62x redis-benchmark. This reader takes each value as a slice of the read buffer
//! (`Bytes`, no copy) and knows the shape it expects: one reply per command, and MGET's array of exactly as many
//! bulk strings as keys asked for, so a server cannot make it hold more than `keys × max_value`. Every length is
//! checked before anything is allocated for it, as `bounded.rs` does for the connections redis-rs reads.

use bytes::{Bytes, BytesMut};
use larder_pipeline::{malformed, Failure, ReadBuffer};
use tokio::io::AsyncRead;
use tokio::net::tcp::OwnedReadHalf;

/// The longest line that is not a value (status, error, number, length).
const MAX_LINE: usize = 8 * 1024;

/// One reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK` and other status lines.
    Status(String),
    /// `-ERR …`.
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `$n` (`None` for `$-1`, a miss).
    Bulk(Option<Bytes>),
    /// An array of bulk strings (MGET's reply).
    Values(Vec<Option<Bytes>>),
}

/// What a request expects back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// This many replies that are not arrays (one per command).
    Replies(usize),
    /// One array of exactly this many bulk strings (an MGET of this many keys), or an error.
    Values(usize),
}

/// Commands in RESP's request form (each an array of bulk strings), written straight into one buffer: one
/// request, sent in one piece, however many commands it holds.
pub struct Request(BytesMut);

impl Request {
    /// A request of about `bytes` bytes of arguments in all.
    pub fn new(bytes: usize) -> Request {
        Request(BytesMut::with_capacity(bytes + 64))
    }

    /// Starts a command of `args` arguments (the next `args` calls of [`Request::arg`]).
    pub fn command(&mut self, args: usize) -> &mut Request {
        self.0.reserve(16 + 16 * args);
        self.0.extend_from_slice(b"*");
        push_decimal(&mut self.0, args);
        self.0.extend_from_slice(b"\r\n");
        self
    }

    pub fn arg(&mut self, arg: &[u8]) -> &mut Request {
        let mut head = [0u8; 24];
        head[0] = b'$';
        let mut at = 1 + write_decimal(&mut head[1..], arg.len() as u64);
        head[at..at + 2].copy_from_slice(b"\r\n");
        at += 2;
        self.0.reserve(at + arg.len() + 2);
        self.0.extend_from_slice(&head[..at]);
        self.0.extend_from_slice(arg);
        self.0.extend_from_slice(b"\r\n");
        self
    }

    /// An argument that is a number, in decimal (an expiry, say), written without a `String` in between.
    pub fn arg_decimal(&mut self, n: u64) -> &mut Request {
        let mut digits = [0u8; 20];
        let length = write_decimal(&mut digits, n);
        self.arg(&digits[..length])
    }

    pub fn finish(self) -> Bytes {
        self.0.freeze()
    }
}

/// A whole command from its arguments.
pub fn command(args: &[&[u8]]) -> Bytes {
    let mut request = Request::new(args.iter().map(|a| a.len()).sum());
    request.command(args.len());
    for arg in args {
        request.arg(arg);
    }
    request.finish()
}

/// `n` in decimal (what `format!` did here cost a fifth of an MGET's instructions).
fn push_decimal(out: &mut BytesMut, n: usize) {
    let mut digits = [0u8; 20];
    let length = write_decimal(&mut digits, n as u64);
    out.extend_from_slice(&digits[..length]);
}

/// Writes `n` in decimal at the start of `out` (20 bytes hold any `u64`); how many bytes it took.
fn write_decimal(out: &mut [u8], mut n: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let length = digits.len() - at;
    out[..length].copy_from_slice(&digits[at..]);
    length
}

/// A bulk string found in the read buffer: where its bytes lie (`None` for a nil), and where the next reply starts.
type Found = (Option<(usize, usize)>, usize);

/// Reads replies from a connection, keeping what arrives beyond the current one.
pub struct ReplyReader {
    buffer: ReadBuffer,
    max_value: usize,
    /// The text of the last status or error line.
    last_text: String,
}

impl ReplyReader {
    pub fn new(max_value: usize) -> ReplyReader {
        ReplyReader { buffer: ReadBuffer::new(), max_value, last_text: String::new() }
    }

    /// The replies to one request.
    pub async fn read_expected<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        expect: Expect,
    ) -> Result<Vec<Reply>, Failure> {
        match expect {
            Expect::Replies(n) => {
                let mut replies = Vec::with_capacity(n);
                for _ in 0..n {
                    let kind = loop {
                        match self.buffer.bytes().first() {
                            Some(&kind) => break kind,
                            None => self.buffer.fill(io).await?,
                        }
                    };
                    replies.push(match kind {
                        b'$' => Reply::Bulk(self.whole_bulk(io).await?),
                        b'*' => return Err(malformed("an array where a single reply was expected")),
                        _ => {
                            let (kind, number) = self.header(io).await?;
                            self.single(kind, number)?
                        }
                    });
                }
                Ok(replies)
            }
            Expect::Values(n) => {
                let (kind, count) = self.header(io).await?;
                if kind != b'*' {
                    // An error (a WRONGTYPE, say) is an answer; anything else is out of step.
                    return match self.single(kind, count)? {
                        error @ Reply::Error(_) => Ok(vec![error]),
                        _ => Err(malformed("MGET answered without an array")),
                    };
                }
                if count != Some(n as i64) {
                    return Err(malformed(&format!("an array of {count:?} values for {n} keys")));
                }
                // The values are found in the buffer first (where each starts and ends), then the reply is taken
                // out whole and each value is a slice of it: one split of the buffer per reply, not per value.
                let mut spans: Vec<Option<(usize, usize)>> = Vec::with_capacity(n);
                let mut at = 0;
                while spans.len() < n {
                    match self.find_bulk(at)? {
                        Some((span, next)) => {
                            spans.push(span);
                            at = next;
                        }
                        None => self.buffer.fill(io).await?,
                    }
                }
                let reply = self.buffer.split_to(at).freeze();
                let values = spans.into_iter().map(|span| span.map(|(start, end)| reply.slice(start..end))).collect();
                Ok(vec![Reply::Values(values)])
            }
        }
    }

    /// A reply that is not a bulk string or an array, whose header line (`kind`, and its number for `:`) has been read.
    fn single(&mut self, kind: u8, number: Option<i64>) -> Result<Reply, Failure> {
        Ok(match kind {
            b':' => Reply::Integer(number.ok_or_else(|| malformed("an integer without digits"))?),
            b'+' => Reply::Status(self.text()),
            b'-' => Reply::Error(self.text()),
            other => return Err(malformed(&format!("a reply of type {:?}", char::from(other)))),
        })
    }

    /// The text of the last header line (a status or an error), already consumed from the buffer.
    fn text(&mut self) -> String {
        std::mem::take(&mut self.last_text)
    }

    /// Reads one header line: its type byte and, for `$`, `*` and `:`, its number.
    async fn header<R: AsyncRead + Unpin>(&mut self, io: &mut R) -> Result<(u8, Option<i64>), Failure> {
        let length = self.buffer.line(io, MAX_LINE).await?;
        let line = &self.buffer.bytes()[..length];
        let (kind, rest) = match line.split_first() {
            Some((&kind, rest)) => (kind, rest),
            None => return Err(malformed("an empty reply line")),
        };
        let number = match kind {
            b'$' | b'*' | b':' => Some(parse_number(rest)?),
            b'+' | b'-' => {
                self.last_text = String::from_utf8_lossy(rest).into_owned();
                None
            }
            other => return Err(malformed(&format!("a reply that starts with byte {other:#04x}"))),
        };
        self.buffer.advance(length + 2);
        Ok((kind, number))
    }

    /// One bulk string reply (a GET's), read through [`Self::find_bulk`] as MGET's values are.
    async fn whole_bulk<R: AsyncRead + Unpin>(&mut self, io: &mut R) -> Result<Option<Bytes>, Failure> {
        loop {
            if let Some((span, next)) = self.find_bulk(0)? {
                let reply = self.buffer.split_to(next).freeze();
                return Ok(span.map(|(start, end)| reply.slice(start..end)));
            }
            self.buffer.fill(io).await?;
        }
    }

    /// Where the bulk string at `at` in the buffer lies (`None` for a nil) and where the next reply starts, if all of
    /// it has arrived; `Ok(None)` if more must be read first. MGET's values are found without an `await` each (the
    /// async header-then-payload path cost about 450 instructions a value), and a length past `max_value` is
    /// refused as soon as its line is seen, before the payload arrives.
    fn find_bulk(&mut self, at: usize) -> Result<Option<Found>, Failure> {
        let buffer = &self.buffer.bytes()[at..];
        let Some(&kind) = buffer.first() else { return Ok(None) };
        if kind != b'$' {
            return Err(malformed(&format!("a value of type {:?} where a bulk string was expected", char::from(kind))));
        }
        let Some(newline) = memchr::memchr(b'\n', &buffer[..buffer.len().min(MAX_LINE)]) else {
            if buffer.len() > MAX_LINE {
                return Err(malformed(&format!("a reply line longer than {MAX_LINE} bytes")));
            }
            return Ok(None);
        };
        if newline < 2 || buffer[newline - 1] != b'\r' {
            return Err(malformed("an empty reply line, or one not ended by CRLF"));
        }
        let size = match parse_number(&buffer[1..newline - 1])? {
            -1 => return Ok(Some((None, at + newline + 1))),
            n if n < 0 => return Err(malformed(&format!("a bulk length of {n}"))),
            n if n as u64 > self.max_value as u64 => {
                return Err(malformed(&format!("a value of {n} bytes, past max_value ({} bytes)", self.max_value)));
            }
            n => n as usize,
        };
        let end = newline + 1 + size + 2;
        if buffer.len() < end {
            let missing = end - buffer.len();
            self.buffer.reserve(missing);
            return Ok(None);
        }
        if &buffer[end - 2..end] != b"\r\n" {
            return Err(malformed("a value not followed by CRLF"));
        }
        let start = at + newline + 1;
        Ok(Some((Some((start, start + size)), at + end)))
    }
}

/// A RESP number: an optional `-` and at most 18 digits (no overflow, no `+`, no spaces).
fn parse_number(text: &[u8]) -> Result<i64, Failure> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 {
        return Err(bad_number(text));
    }
    let mut n: i64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return Err(bad_number(text));
        }
        n = n * 10 + i64::from(digit);
    }
    Ok(if negative { -n } else { n })
}

#[cold]
fn bad_number(text: &[u8]) -> Failure {
    malformed(&format!("a number {:?}", String::from_utf8_lossy(&text[..text.len().min(32)])))
}

/// RESP replies for the pipeline ([`larder_pipeline::Connections`]), with AUTH and SELECT as each connection's
/// greeting.
pub struct Resp {
    pub max_value: usize,
    /// AUTH and SELECT for the URL's credentials and database (empty for neither).
    pub greeting: Vec<Bytes>,
}

impl larder_pipeline::Protocol for Resp {
    type Reply = Reply;
    type Expect = Expect;
    type Reader = ReplyReader;

    fn reader(&self) -> ReplyReader {
        ReplyReader::new(self.max_value)
    }

    async fn read(reader: &mut ReplyReader, io: &mut OwnedReadHalf, expect: Expect) -> Result<Vec<Reply>, Failure> {
        reader.read_expected(io, expect).await
    }

    fn greeting(&self) -> Option<(Bytes, Expect)> {
        (!self.greeting.is_empty()).then(|| (Bytes::from(self.greeting.concat()), Expect::Replies(self.greeting.len())))
    }

    fn greeted(&self, replies: &[Reply]) -> Result<(), Failure> {
        match replies.iter().find(|r| !matches!(r, Reply::Status(_))) {
            None => Ok(()),
            Some(Reply::Error(message)) => Err(Failure(format!("the server refused the connection: {message}"))),
            Some(other) => Err(malformed(&format!("{other:?} to AUTH or SELECT"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;

    use super::*;

    /// Bytes that arrive `piece` at a time.
    struct Pieces {
        bytes: Vec<u8>,
        at: usize,
        piece: usize,
    }

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let end = (self.at + self.piece).min(self.bytes.len()).min(self.at + buf.remaining());
            buf.put_slice(&self.bytes[self.at..end]);
            self.at = end;
            Poll::Ready(Ok(()))
        }
    }

    async fn read(bytes: &[u8], expect: Expect, max_value: usize, piece: usize) -> Result<Vec<Reply>, Failure> {
        let mut io = Pieces { bytes: bytes.to_vec(), at: 0, piece: piece.max(1) };
        ReplyReader::new(max_value).read_expected(&mut io, expect).await
    }

    fn bulk(text: &str) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(text.as_bytes()))
    }

    #[tokio::test]
    async fn replies_are_read_in_any_split() {
        for piece in [1, 2, 3, 7, 1000] {
            let got = read(b"$5\r\nhello\r\n$-1\r\n+OK\r\n-ERR no\r\n:42\r\n$0\r\n\r\n", Expect::Replies(6), 64, piece)
                .await
                .expect("replies");
            let want = vec![
                Reply::Bulk(bulk("hello")),
                Reply::Bulk(None),
                Reply::Status("OK".into()),
                Reply::Error("ERR no".into()),
                Reply::Integer(42),
                Reply::Bulk(bulk("")),
            ];
            assert_eq!(got, want, "pieces of {piece}");
            let values = read(b"*3\r\n$1\r\na\r\n$-1\r\n$2\r\n\r\n\r\n", Expect::Values(3), 64, piece).await;
            assert_eq!(values, Ok(vec![Reply::Values(vec![bulk("a"), None, bulk("\r\n")])]), "pieces of {piece}");
        }
        let error = read(b"-WRONGTYPE x\r\n", Expect::Values(2), 64, 5).await;
        assert_eq!(error, Ok(vec![Reply::Error("WRONGTYPE x".into())]));
    }

    #[tokio::test]
    async fn replies_past_a_bound_or_of_the_wrong_shape_are_refused() {
        let refused = |bytes: &'static [u8], expect: Expect| async move {
            let result = read(bytes, expect, 64, 3).await;
            assert!(result.is_err(), "{:?} should be refused, got {result:?}", String::from_utf8_lossy(bytes));
        };
        // A value past max_value is refused from its length, before any of it is read.
        refused(b"$65\r\n", Expect::Replies(1)).await;
        assert!(read(b"$64\r\n", Expect::Replies(1), 64, 3).await.is_err_and(|f| f.0.contains("closed")));
        refused(b"$1073741824\r\n", Expect::Replies(1)).await;
        // MGET's array must hold exactly the keys asked for, each a bulk string.
        refused(b"*99999999999\r\n", Expect::Values(3)).await;
        refused(b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", Expect::Values(3)).await;
        refused(b"*-1\r\n", Expect::Values(1)).await;
        refused(b"*1\r\n*1\r\n$1\r\na\r\n", Expect::Values(1)).await;
        refused(b"*1\r\n:1\r\n", Expect::Values(1)).await;
        refused(b"+OK\r\n", Expect::Values(1)).await;
        refused(b"*1\r\n$1\r\na\r\n", Expect::Replies(1)).await;
        // Malformed lines and numbers.
        refused(b"$-2\r\n", Expect::Replies(1)).await;
        refused(b"$1x\r\n", Expect::Replies(1)).await;
        refused(b"$99999999999999999999999\r\n", Expect::Replies(1)).await;
        refused(b"$\r\n", Expect::Replies(1)).await;
        refused(b"$3\r\nabcde\r\n", Expect::Replies(1)).await;
        refused(b"+OK\n", Expect::Replies(1)).await;
        refused(b"\x00garbage\r\n", Expect::Replies(1)).await;
        refused(b"%1\r\n", Expect::Replies(1)).await;
        let endless = [b"+".as_slice(), &[b'x'; MAX_LINE + 1]].concat();
        let result = read(&endless, Expect::Replies(1), 64, 1000).await;
        assert!(result.is_err_and(|f| f.0.contains("line")));
    }

    #[tokio::test]
    async fn random_bytes_never_panic() {
        let mut rng = fastrand::Rng::with_seed(11);
        for _ in 0..3000 {
            let bytes: Vec<u8> =
                (0..rng.usize(0..48)).map(|_| *rng.choice(b"$*:+-\r\n0123456789x").unwrap_or(&b'x')).collect();
            let expect = if rng.bool() { Expect::Values(rng.usize(0..4)) } else { Expect::Replies(rng.usize(1..3)) };
            let _ = read(&bytes, expect, 16, rng.usize(1..8)).await;
        }
    }

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        assert_eq!(&command(&[b"MGET", b"a", b""])[..], b"*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$0\r\n\r\n");
        let long = vec![b'x'; 1234567];
        assert!(command(&[&long]).starts_with(b"*1\r\n$1234567\r\nxxx"));
    }

    #[test]
    fn numbers_are_decimal_bulk_strings() {
        for (n, text) in
            [(0u64, "0"), (7, "7"), (1_764_000_000_000, "1764000000000"), (u64::MAX, "18446744073709551615")]
        {
            let mut request = Request::new(0);
            request.command(1).arg_decimal(n);
            let expected = format!("*1\r\n${}\r\n{text}\r\n", text.len());
            assert_eq!(&request.finish()[..], expected.as_bytes());
        }
    }
}
