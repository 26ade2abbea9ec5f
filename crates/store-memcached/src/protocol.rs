//! The meta protocol (memcached ≥ 1.6, protocol.txt "Meta Commands"): commands written into a batch buffer, and
//! replies read back from a connection. Every length a server sends is checked against a bound before anything is
//! allocated for it, so a confused or hostile server yields an error, never a panic or an unbounded buffer.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

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
    /// `MN`: the end of a batch.
    End,
    /// `STAT <name> <value>` (of `stats`).
    Stat(String, String),
    /// `CLIENT_ERROR …`, `SERVER_ERROR …` or `ERROR`.
    Error(String),
}

/// Why a reply could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Closed,
    Malformed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Closed => f.write_str("connection closed"),
            ReadError::Malformed(m) => write!(f, "malformed reply: {m}"),
        }
    }
}

/// Reads replies from a connection, keeping what arrives beyond the current one.
pub struct ReplyReader {
    buffer: BytesMut,
    max_value: usize,
}

impl ReplyReader {
    pub fn new(max_value: usize) -> ReplyReader {
        ReplyReader { buffer: BytesMut::with_capacity(16 * 1024), max_value }
    }

    /// The next reply.
    pub async fn read<R: AsyncRead + Unpin>(&mut self, io: &mut R) -> Result<Reply, ReadError> {
        let line_end = loop {
            if let Some(at) = self.buffer.windows(2).position(|w| w == b"\r\n") {
                break at;
            }
            if self.buffer.len() > MAX_LINE {
                return Err(ReadError::Malformed(format!("a reply line longer than {MAX_LINE} bytes")));
            }
            self.fill(io).await?;
        };
        let line = String::from_utf8_lossy(&self.buffer[..line_end]).into_owned();
        self.buffer.advance(line_end + 2);
        let mut tokens = line.split(' ');
        let reply = match tokens.next().unwrap_or_default() {
            "VA" => {
                let size: usize = tokens
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| ReadError::Malformed(format!("{line:?}")))?;
                if size > self.max_value {
                    return Err(ReadError::Malformed(format!(
                        "a {size}-byte value, over the {}-byte bound",
                        self.max_value
                    )));
                }
                let (mut key, mut cas) = (None, None);
                for flag in tokens {
                    match flag.as_bytes().first() {
                        Some(b'k') => key = Some(flag[1..].to_owned()),
                        Some(b'c') => cas = flag[1..].parse().ok(),
                        _ => {}
                    }
                }
                while self.buffer.len() < size + 2 {
                    self.buffer.reserve(size + 2 - self.buffer.len());
                    self.fill(io).await?;
                }
                if &self.buffer[size..size + 2] != b"\r\n" {
                    return Err(ReadError::Malformed("a value not followed by CRLF".into()));
                }
                let data = self.buffer.split_to(size).freeze();
                self.buffer.advance(2);
                Reply::Value { data, key, cas }
            }
            "HD" | "OK" => Reply::Done,
            "STAT" => {
                let name = tokens.next().unwrap_or_default().to_owned();
                Reply::Stat(name, tokens.next().unwrap_or_default().to_owned())
            }
            "NS" => Reply::NotStored,
            "EX" => Reply::Exists,
            "NF" => Reply::NotFound,
            "EN" => Reply::Miss,
            "MN" | "END" => Reply::End,
            "ERROR" | "CLIENT_ERROR" | "SERVER_ERROR" => Reply::Error(line),
            _ => return Err(ReadError::Malformed(format!("{:?}", cut(&line)))),
        };
        Ok(reply)
    }

    async fn fill<R: AsyncRead + Unpin>(&mut self, io: &mut R) -> Result<(), ReadError> {
        if self.buffer.capacity() - self.buffer.len() < 4096 {
            self.buffer.reserve(16 * 1024);
        }
        match io.read_buf(&mut self.buffer).await {
            Ok(0) => Err(ReadError::Closed),
            Ok(_) => Ok(()),
            Err(e) => Err(ReadError::Io(e)),
        }
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
                Err(ReadError::Closed) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
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
        assert_eq!(got[1..4], [Ok(Reply::Done), Ok(Reply::Miss), Ok(Reply::End)]);
        assert_eq!(got[4], Ok(Reply::Error("CLIENT_ERROR bad".into())));
    }

    #[tokio::test]
    async fn garbage_and_oversized_values_are_errors_not_allocations() {
        let huge = replies(b"VA 99999999999 \r\n", 1 << 20).await;
        assert!(huge[0].as_ref().is_err_and(|e| e.contains("bound")), "{huge:?}");
        let nonsense = replies(b"HTTP/1.1 200 OK\r\n", 100).await;
        assert!(nonsense[0].as_ref().is_err_and(|e| e.contains("malformed")), "{nonsense:?}");
        let endless = replies(&[b'x'; 20_000], 100).await;
        assert!(endless[0].as_ref().is_err_and(|e| e.contains("longer")), "{endless:?}");
        let bad_end = replies(b"VA 2\r\nabcd\r\n", 100).await;
        assert!(bad_end[0].is_err(), "{bad_end:?}");
    }
}
