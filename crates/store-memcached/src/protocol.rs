//! The meta protocol (memcached ≥ 1.6, protocol.txt "Meta Commands"): commands written into a batch buffer, and
//! replies read back from a connection. Every length a server sends is checked against a bound before anything is
//! allocated for it, so a confused or hostile server yields an error, never a panic or an unbounded buffer.

use bytes::Bytes;
use larder_pipeline::{malformed, Failure, ReadBuffer};
use tokio::io::AsyncRead;

/// The longest reply line accepted (a `VA` line with flags, or an error message).
const MAX_LINE: usize = 8 * 1024;

/// One reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// `VA <size> <flags>`: a value, with the key (`k`) and CAS (`c`) when asked for.
    Value { data: Bytes, key: Option<String>, cas: Option<u64> },
    /// `HD`: done.
    Done,
    /// `NS`: not stored (an `add` found the key).
    NotStored,
    /// `EX`: the CAS did not match.
    Exists,
    /// `NF`: not found.
    NotFound,
    /// `EN`: a miss.
    Miss,
    /// `END`: the end of `stats`.
    End,
    /// `MN`: the answer to `mn`, after the replies to a write's requests.
    NoOp,
    /// `STAT <name> <value>` (of `stats`).
    Stat(String, String),
    /// `CLIENT_ERROR …`, `SERVER_ERROR …` or `ERROR`.
    Error(String),
}

/// Reads replies from a connection, keeping what arrives beyond the current one.
pub struct ReplyReader {
    buffer: ReadBuffer,
    max_value: usize,
    /// Bytes the replies to the current request may still take (spec/STORES.md §2, "Whole reply").
    left: u64,
}

impl ReplyReader {
    pub fn new(max_value: usize) -> ReplyReader {
        ReplyReader { buffer: ReadBuffer::new(), max_value, left: u64::MAX }
    }

    /// The longest value a reply may hold.
    pub fn max_value(&self) -> usize {
        self.max_value
    }

    /// Bounds the replies read from now on (a request's, as a whole) to `bytes` in all.
    pub fn allow(&mut self, bytes: u64) {
        self.left = bytes;
    }

    /// Counts `n` bytes of a reply against what the request's replies may take, before they are read.
    fn take(&mut self, n: usize) -> Result<(), Failure> {
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            malformed("replies of more bytes in all than the request can get (a value bound per command and 64 KiB)")
        })?;
        Ok(())
    }

    /// The next reply. An error leaves the connection out of step: its caller closes it.
    pub async fn read<R: AsyncRead + Unpin>(&mut self, io: &mut R) -> Result<Reply, Failure> {
        let length = self.buffer.line(io, MAX_LINE).await?;
        self.take(length + 2)?;
        let line = &self.buffer.bytes()[..length];
        let mut tokens = line.split(|&b| b == b' ');
        let reply = match tokens.next().unwrap_or_default() {
            b"VA" => {
                let size: usize = tokens
                    .next()
                    .and_then(|s| std::str::from_utf8(s).ok())
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| malformed(&format!("{:?}", cut(&String::from_utf8_lossy(line)))))?;
                if size > self.max_value {
                    return Err(malformed(&format!("a {size}-byte value, over the {}-byte bound", self.max_value)));
                }
                let (mut key, mut cas) = (None, None);
                for flag in tokens {
                    match flag.split_first() {
                        Some((b'k', rest)) => key = Some(String::from_utf8_lossy(rest).into_owned()),
                        Some((b'c', rest)) => cas = std::str::from_utf8(rest).ok().and_then(|c| c.parse().ok()),
                        _ => {}
                    }
                }
                self.buffer.advance(length + 2);
                self.take(size + 2)?;
                self.buffer.at_least(io, size + 2).await?;
                if &self.buffer.bytes()[size..size + 2] != b"\r\n" {
                    return Err(malformed("a value not followed by CRLF"));
                }
                let data = self.buffer.split_to(size).freeze();
                self.buffer.advance(2);
                return Ok(Reply::Value { data, key, cas });
            }
            b"HD" | b"OK" => Reply::Done,
            b"STAT" => {
                let name = String::from_utf8_lossy(tokens.next().unwrap_or_default()).into_owned();
                Reply::Stat(name, String::from_utf8_lossy(tokens.next().unwrap_or_default()).into_owned())
            }
            b"NS" => Reply::NotStored,
            b"EX" => Reply::Exists,
            b"NF" => Reply::NotFound,
            b"EN" => Reply::Miss,
            b"END" => Reply::End,
            b"MN" => Reply::NoOp,
            b"ERROR" | b"CLIENT_ERROR" | b"SERVER_ERROR" => Reply::Error(String::from_utf8_lossy(line).into_owned()),
            _ => return Err(malformed(&format!("{:?}", cut(&String::from_utf8_lossy(line))))),
        };
        self.buffer.advance(length + 2);
        Ok(reply)
    }
}

fn cut(line: &str) -> &str {
    let mut end = line.len().min(80);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// `mg <key> v [flags]`.
pub fn get(out: &mut Vec<u8>, key: &str, flags: &str) {
    out.extend_from_slice(b"mg ");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b" v");
    if !flags.is_empty() {
        out.push(b' ');
        out.extend_from_slice(flags.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// `ms <key> <len> T<exptime> F0 [flags]` and the data.
pub fn set(out: &mut Vec<u8>, key: &str, value: &[u8], exptime: i64, flags: &str) {
    out.extend_from_slice(format!("ms {key} {} T{exptime} F0", value.len()).as_bytes());
    if !flags.is_empty() {
        out.push(b' ');
        out.extend_from_slice(flags.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// `mn`, which ends every write of requests on a connection: its `MN` follows the replies of all of them.
pub const END: &[u8] = b"mn\r\n";

/// `md <key> [flags]`.
pub fn delete(out: &mut Vec<u8>, key: &str, flags: &str) {
    out.extend_from_slice(b"md ");
    out.extend_from_slice(key.as_bytes());
    if !flags.is_empty() {
        out.push(b' ');
        out.extend_from_slice(flags.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn replies(bytes: &[u8], max_value: usize) -> Vec<Result<Reply, String>> {
        let mut reader = ReplyReader::new(max_value);
        let mut io = bytes;
        let mut out = Vec::new();
        loop {
            match reader.read(&mut io).await {
                Ok(reply) => out.push(Ok(reply)),
                Err(Failure(e)) if e.contains("closed") => return out,
                Err(Failure(e)) => {
                    out.push(Err(e));
                    return out;
                }
            }
        }
    }

    #[tokio::test]
    async fn reads_values_and_status_lines() {
        let got = replies(b"VA 3 kfoo c7\r\nabc\r\nHD\r\nEN\r\nMN\r\nCLIENT_ERROR bad\r\n", 100).await;
        assert_eq!(
            got[0],
            Ok(Reply::Value { data: Bytes::from_static(b"abc"), key: Some("foo".into()), cas: Some(7) })
        );
        assert_eq!(got[1..4], [Ok(Reply::Done), Ok(Reply::Miss), Ok(Reply::NoOp)]);
        assert_eq!(got[4], Ok(Reply::Error("CLIENT_ERROR bad".into())));
    }

    #[tokio::test]
    async fn garbage_and_oversized_values_are_errors_not_allocations() {
        let huge = replies(b"VA 99999999999 \r\n", 1 << 20).await;
        assert!(huge[0].as_ref().is_err_and(|e| e.contains("bound")), "{huge:?}");
        let nonsense = replies(b"HTTP/1.1 200 OK\r\n", 100).await;
        assert!(nonsense[0].as_ref().is_err_and(|e| e.contains("refused")), "{nonsense:?}");
        let endless = replies(&[b'x'; 20_000], 100).await;
        assert!(endless[0].as_ref().is_err_and(|e| e.contains("longer")), "{endless:?}");
        let bad_end = replies(b"VA 2\r\nabcd\r\n", 100).await;
        assert!(bad_end[0].is_err(), "{bad_end:?}");
    }

    #[tokio::test]
    async fn replies_arriving_a_byte_at_a_time_read_the_same() {
        let bytes = b"VA 5 c9\r\nab\r\nc\r\nEN\r\nSTAT pid 42\r\nEND\r\n";
        let (mut client, mut server) = tokio::io::duplex(1);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for byte in bytes {
                server.write_all(&[*byte]).await.expect("write");
            }
        });
        let mut reader = ReplyReader::new(100);
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(reader.read(&mut client).await.map_err(|e| e.0));
        }
        writer.await.expect("writer");
        assert_eq!(
            got,
            [
                Ok(Reply::Value { data: Bytes::from_static(b"ab\r\nc"), key: None, cas: Some(9) }),
                Ok(Reply::Miss),
                Ok(Reply::Stat("pid".into(), "42".into())),
                Ok(Reply::End),
            ]
        );
    }

    #[tokio::test]
    async fn a_line_ended_by_a_bare_newline_is_malformed() {
        let got = replies(b"HD\nEN\r\n", 100).await;
        assert!(got[0].as_ref().is_err_and(|e| e.contains("CRLF")), "{got:?}");
    }

    /// What a confused or hostile server might send: pieces of real replies, wrong lengths, stray bytes. The
    /// reader must answer each read with a reply or an error, never panic, and never hold more than a value's bound
    /// plus a line.
    #[tokio::test]
    async fn random_replies_give_replies_or_errors_within_the_bounds() {
        const PIECES: &[&[u8]] = &[
            b"VA ",
            b"5",
            b"99999999",
            b" k",
            b"abc",
            b" c12",
            b"\r\n",
            b"\n",
            b"\r",
            b"hello",
            b"HD",
            b"EN",
            b"MN",
            b"STAT ",
            b"CLIENT_ERROR x",
            b" ",
            b"\0",
            b"\xff\xfe",
        ];
        let mut rng = fastrand::Rng::with_seed(8);
        for _ in 0..3_000 {
            let mut bytes = Vec::new();
            for _ in 0..rng.usize(1..24) {
                if rng.u8(..) < 16 {
                    bytes.extend((0..rng.usize(..64)).map(|_| rng.u8(..)));
                } else {
                    bytes.extend_from_slice(PIECES[rng.usize(..PIECES.len())]);
                }
            }
            let mut reader = ReplyReader::new(1000);
            let mut io = &bytes[..];
            for _ in 0..64 {
                match reader.read(&mut io).await {
                    Ok(Reply::Value { data, .. }) => assert!(data.len() <= 1000),
                    Ok(_) => {}
                    Err(_) => break,
                }
                assert!(reader.buffer.capacity() <= 64 * 1024, "no allocation beyond the value bound and a line");
            }
        }
    }
}
