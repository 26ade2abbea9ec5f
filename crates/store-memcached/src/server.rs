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
    /// Up to `END`, or one reply that is not a `STAT` line (`flush_all`'s `OK`, an error).
    UntilEndOrOne,
}

/// The meta protocol's replies, for the pipeline.
struct Meta {
    max_value: usize,
}

impl larder_pipeline::Protocol for Meta {
    type Reply = Reply;
    type Expect = Expect;
    type Reader = ReplyReader;

    fn reader(&self) -> ReplyReader {
        ReplyReader::new(self.max_value)
    }

    async fn read(reader: &mut ReplyReader, io: &mut OwnedReadHalf, expect: Expect) -> Result<Vec<Reply>, Failure> {
        let mut replies = Vec::new();
        loop {
            let reply = reader.read(io).await?;
            let end = matches!(reply, Reply::End);
            replies.push(reply);
            match expect {
                Expect::Count(n) if replies.len() == n => break,
                Expect::UntilEndOrOne if end || !matches!(replies.last(), Some(Reply::Stat(..))) => break,
                _ => {}
            }
        }
        Ok(replies)
    }
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
