//! One memcached server: a small pool of connections, each used by one batch at a time (a batch is pipelined: all
//! its commands are written at once and the replies read in order), and its health (larder_store::Health: failures,
//! ejection, errors counted for `/metrics`; spec/STORES.md §4.3).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use larder_store::Health;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::protocol::{ReadError, Reply, ReplyReader};

/// How many replies a batch reads.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// Exactly this many.
    Count(usize),
    /// Up to and including `MN` (or `END`).
    UntilEnd,
    /// Up to `END`, or one reply that is not a `STAT` line (`flush_all`'s `OK`, an error).
    UntilEndOrOne,
}

/// Why a batch failed (counted against the server).
#[derive(Debug)]
pub struct Failure(pub String);

struct Connection {
    stream: TcpStream,
    reader: ReplyReader,
}

pub struct Server {
    /// `host:port`, as errors and metrics name it.
    pub name: String,
    address: String,
    connections: Box<[Mutex<Option<Connection>>]>,
    next: AtomicUsize,
    /// Failures, ejection from the ring, and errors since start.
    pub health: Health,
    max_value: usize,
}

impl Server {
    pub fn new(name: String, address: String, pool: usize, max_value: usize) -> Server {
        Server {
            name,
            address,
            connections: (0..pool.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            health: Health::default(),
            max_value,
        }
    }

    /// Sends `request` and reads its replies, within `timeout` (connecting within `connect_timeout` if needed).
    pub async fn exchange(
        &self,
        request: &[u8],
        expect: Expect,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Vec<Reply>, Failure> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let slots = self.connections.len();
        let mut guard = None;
        for i in 0..slots {
            if let Ok(slot) = self.connections[(start + i) % slots].try_lock() {
                guard = Some(slot);
                break;
            }
        }
        let work = async {
            let mut slot = match guard {
                Some(slot) => slot,
                None => self.connections[start % slots].lock().await,
            };
            if slot.as_ref().is_some_and(|c| c.reader.mid_reply()) {
                // A timeout cut this connection's last exchange short: its next reply would be an old one.
                *slot = None;
            }
            if slot.is_none() {
                let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(&self.address))
                    .await
                    .map_err(|_| Failure(format!("no connection within {} ms", connect_timeout.as_millis())))?
                    .map_err(|e| Failure(format!("cannot connect: {e}")))?;
                let _ = stream.set_nodelay(true);
                *slot = Some(Connection { stream, reader: ReplyReader::new(self.max_value) });
            }
            let result = match slot.as_mut() {
                Some(connection) => run(connection, request, expect).await,
                None => Err(Failure("no connection".into())),
            };
            if result.is_err() {
                // The connection's state is unknown after an error: never reuse it.
                *slot = None;
            }
            result
        };
        tokio::time::timeout(timeout, work)
            .await
            .unwrap_or_else(|_| Err(Failure(format!("no answer within {} ms", timeout.as_millis()))))
    }
}

async fn run(connection: &mut Connection, request: &[u8], expect: Expect) -> Result<Vec<Reply>, Failure> {
    connection.reader.begin();
    connection.stream.write_all(request).await.map_err(|e| Failure(format!("write: {e}")))?;
    let mut replies = Vec::new();
    loop {
        let reply = connection.reader.read(&mut connection.stream).await.map_err(|e| match e {
            ReadError::Closed => Failure("the server closed the connection".into()),
            other => Failure(other.to_string()),
        })?;
        let end = matches!(reply, Reply::End);
        replies.push(reply);
        match expect {
            Expect::Count(n) if replies.len() == n => break,
            Expect::UntilEnd if end => break,
            Expect::UntilEndOrOne if end || !matches!(replies.last(), Some(Reply::Stat(..))) => break,
            _ => {}
        }
    }
    connection.reader.finish();
    Ok(replies)
}
