//! One memcached server: a few pipelined connections (larder_pipeline) and its health (larder_store::Health:
//! failures, ejection, errors counted for `/metrics`; spec/STORES.md §4.3). The meta protocol's part is how a
//! request's replies end ([`Expect`]).

use std::time::Duration;

use bytes::Bytes;
use larder_pipeline::Connections;
pub use larder_pipeline::Failure;
use larder_store::Health;
use tokio::net::tcp::OwnedReadHalf;

use crate::protocol::{Reply, ReplyReader};

/// How many replies a batch reads.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// Exactly this many.
    Count(usize),
    /// `STAT` lines up to `END` (`stats`), or one `OK` (`flush_all`) or error.
    UntilEndOrOne,
}

/// Bytes a request's replies may take besides their values (spec/STORES.md §2: at most 64 KiB).
const FRAMING: u64 = 64 << 10;
/// `STAT` lines a `stats` may get (memcached sends about a hundred; spec/STORES.md §2: at most 1,024).
const MAX_STATS: usize = 1024;

/// The meta protocol's replies, for the pipeline.
struct Meta {
    max_value: usize,
}

/// What the replies to a request may take in all: a value bound (`max_value`, the item size and a line) for each
/// command, and the framing allowance (spec/STORES.md §2, "Whole reply").
fn allowance(expect: Expect, max_value: usize) -> u64 {
    let values = match expect {
        Expect::Count(n) => n.max(1),
        Expect::UntilEndOrOne => 1,
    };
    (values as u64).saturating_mul(max_value as u64).saturating_add(FRAMING)
}

impl larder_pipeline::Protocol for Meta {
    type Reply = Reply;
    type Expect = Expect;
    type Reader = ReplyReader;

    fn reader(&self) -> ReplyReader {
        ReplyReader::new(self.max_value)
    }

    async fn read(reader: &mut ReplyReader, io: &mut OwnedReadHalf, expect: Expect) -> Result<Vec<Reply>, Failure> {
        read_replies(reader, io, expect).await
    }

    fn write_end(&self) -> Option<&'static [u8]> {
        Some(crate::protocol::END)
    }

    async fn read_end(reader: &mut ReplyReader, io: &mut OwnedReadHalf) -> Result<(), Failure> {
        ended(reader, io).await
    }
}

/// The replies to one request, bounded as a whole: in bytes by [`allowance`], in number by the commands sent (one
/// reply each) or, for `stats`, by [`MAX_STATS`].
async fn read_replies<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut ReplyReader,
    io: &mut R,
    expect: Expect,
) -> Result<Vec<Reply>, Failure> {
    reader.allow(allowance(expect, reader.max_value()));
    let mut replies = Vec::new();
    if let Expect::Count(0) = expect {
        return Ok(replies);
    }
    loop {
        let reply = reader.read(io).await?;
        if let Reply::NoOp = reply {
            return Err(larder_pipeline::malformed("MN before the requests' replies had all come"));
        }
        let end = matches!(reply, Reply::End);
        replies.push(reply);
        match expect {
            Expect::Count(n) if replies.len() == n => break,
            Expect::UntilEndOrOne if end || matches!(replies.last(), Some(Reply::Done | Reply::Error(_))) => break,
            // `stats` gets STAT lines and END, `flush_all` OK: nothing else answers either.
            Expect::UntilEndOrOne if !matches!(replies.last(), Some(Reply::Stat(..))) => {
                let what = match replies.pop() {
                    Some(Reply::Value { data, .. }) => format!("a {}-byte value", data.len()),
                    other => format!("{other:?}"),
                };
                return Err(larder_pipeline::malformed(&format!("{what} where STAT lines, END or OK were expected")));
            }
            Expect::UntilEndOrOne if replies.len() > MAX_STATS => {
                return Err(larder_pipeline::malformed(&format!("more than {MAX_STATS} STAT lines")));
            }
            _ => {}
        }
    }
    Ok(replies)
}

/// Reads the `MN` that must follow the replies to a write's requests (spec/STORES.md §4.1): anything else is a reply
/// they did not ask for, and the stream is out of step.
async fn ended<R: tokio::io::AsyncRead + Unpin>(reader: &mut ReplyReader, io: &mut R) -> Result<(), Failure> {
    reader.allow(FRAMING);
    let what = match reader.read(io).await? {
        Reply::NoOp => return Ok(()),
        Reply::Value { data, .. } => format!("a {}-byte value", data.len()),
        other => format!("{other:?}"),
    };
    Err(larder_pipeline::malformed(&format!("{what} where the MN after the requests' replies was expected")))
}

pub struct Server {
    /// `host:port`, as errors and metrics name it.
    pub name: String,
    connections: Connections<Meta>,
    /// Failures, ejection from the ring, and errors since start.
    pub health: Health,
}

impl Server {
    pub fn new(name: String, address: String, pool: usize, max_value: usize) -> Server {
        Server {
            health: Health::named("memcached", &name),
            name,
            connections: Connections::new(Meta { max_value }, address, pool),
        }
    }

    /// Sends `request` and reads its replies, within `timeout` (connecting within `connect_timeout` if needed).
    pub async fn exchange(
        &self,
        request: Bytes,
        expect: Expect,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Vec<Reply>, Failure> {
        self.connections.exchange(request, expect, timeout, connect_timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8], expect: Expect, max_value: usize) -> Result<Vec<Reply>, Failure> {
        let mut reader = ReplyReader::new(max_value);
        let mut io = bytes;
        read_replies(&mut reader, &mut io, expect).await
    }

    #[tokio::test]
    async fn a_stats_reply_is_bounded_in_lines_and_bytes() {
        let stats = [b"STAT pid 1\r\n".repeat(100), b"END\r\n".to_vec()].concat();
        assert_eq!(read(&stats, Expect::UntilEndOrOne, 2048).await.map(|r| r.len()), Ok(101));
        // Endless STAT lines, each short: refused at line 1,025, not read until memory runs out.
        let endless = b"STAT x 1\r\n".repeat(2000);
        let refused = read(&endless, Expect::UntilEndOrOne, 1 << 20).await;
        assert!(refused.is_err_and(|f| f.0.contains("STAT lines")));
        // Long STAT lines: refused once they pass a value bound and 64 KiB in all.
        let long = [b"STAT x ".as_slice(), &[b'y'; 8000], b"\r\n"].concat().repeat(20);
        let refused = read(&long, Expect::UntilEndOrOne, 2048).await;
        assert!(refused.is_err_and(|f| f.0.contains("in all")));
    }

    /// The replies of a write's requests, then its `MN`.
    async fn read_write(bytes: &[u8], expects: &[Expect], max_value: usize) -> Result<(), Failure> {
        let mut reader = ReplyReader::new(max_value);
        let mut io = bytes;
        for expect in expects {
            read_replies(&mut reader, &mut io, *expect).await?;
        }
        ended(&mut reader, &mut io).await
    }

    #[tokio::test]
    async fn a_write_is_answered_by_its_requests_replies_then_mn_and_nothing_else() {
        let value = |size: usize| [format!("VA {size}\r\n").into_bytes(), vec![b'x'; size], b"\r\n".to_vec()].concat();
        let fine = [value(10), b"EN\r\nHD\r\nSTAT pid 1\r\nEND\r\nMN\r\n".to_vec()].concat();
        let expects = [Expect::Count(2), Expect::Count(1), Expect::UntilEndOrOne];
        assert_eq!(read_write(&fine, &expects, 64).await, Ok(()));
        // A value more than the requests asked for, where MN should be (a get answered twice): out of step.
        let surplus = [value(10), value(10), b"EN\r\nMN\r\n".to_vec()].concat();
        let refused = read_write(&surplus, &[Expect::Count(1)], 64).await;
        assert!(refused.is_err_and(|f| f.0.contains("a 10-byte value where the MN")));
        // stats answered with a second END after its own.
        let twice = b"STAT pid 1\r\nEND\r\nEND\r\nMN\r\n";
        assert!(read_write(twice, &[Expect::UntilEndOrOne], 64).await.is_err_and(|f| f.0.contains("End where")));
        // A reply short: MN where a request's reply should be.
        let short = [value(10), b"MN\r\n".to_vec()].concat();
        let refused = read_write(&short, &[Expect::Count(2)], 64).await;
        assert!(refused.is_err_and(|f| f.0.contains("MN before")));
    }

    #[tokio::test]
    async fn stats_and_flush_all_take_only_their_own_replies() {
        assert_eq!(read(b"OK\r\n", Expect::UntilEndOrOne, 64).await.map(|r| r.len()), Ok(1));
        assert_eq!(read(b"SERVER_ERROR no\r\n", Expect::UntilEndOrOne, 64).await.map(|r| r.len()), Ok(1));
        let value = read(b"VA 3\r\nabc\r\nEND\r\n", Expect::UntilEndOrOne, 64).await;
        assert!(value.is_err_and(|f| f.0.contains("a 3-byte value where")));
        assert!(read(b"STAT a 1\r\nNS\r\n", Expect::UntilEndOrOne, 64).await.is_err());
    }

    #[tokio::test]
    async fn a_batch_holds_at_most_a_value_bound_per_command_and_64_kib() {
        let value = |size: usize| [format!("VA {size}\r\n").into_bytes(), vec![b'x'; size], b"\r\n".to_vec()].concat();
        let three = [value(1000), value(1000), b"EN\r\n".to_vec()].concat();
        assert_eq!(read(&three, Expect::Count(3), 1024).await.map(|r| r.len()), Ok(3));
        // Each reply line may run to 8 KiB: 100 such lines to a batch of 100 commands pass no bound of their own,
        // and are refused by the batch's whole one (100 value bounds of 16 bytes and 64 KiB).
        let lines = [b"HD ".as_slice(), &[b'x'; 8000], b"\r\n"].concat().repeat(100);
        let refused = read(&lines, Expect::Count(100), 16).await;
        assert!(refused.is_err_and(|f| f.0.contains("in all")));
    }
}
