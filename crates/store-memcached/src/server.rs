//! One memcached server: a small pool of connections, each used by one batch at a time (a batch is pipelined: all
//! its commands are written at once and the replies read in order), and the failure bookkeeping of spec/STORES.md
//! §4.3 (consecutive failures, ejection until a time, errors counted for `/metrics`).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

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
    /// Consecutive failures.
    failures: AtomicU32,
    /// When ejected: the time (ms) it goes back on the ring; 0 = on the ring.
    pub ejected_until: AtomicU64,
    /// Whether it was put back after an ejection and has not answered since (one failure ejects it again).
    on_probation: AtomicU32,
    /// Failures since start.
    pub errors: AtomicU64,
    max_value: usize,
}

impl Server {
    pub fn new(name: String, address: String, pool: usize, max_value: usize) -> Server {
        Server {
            name,
            address,
            connections: (0..pool.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            failures: AtomicU32::new(0),
            ejected_until: AtomicU64::new(0),
            on_probation: AtomicU32::new(0),
            errors: AtomicU64::new(0),
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

    /// Records the outcome of a batch; `true` when this failure ejects the server.
    pub fn record(&self, ok: bool, threshold: u32, retry_after: Duration, now_ms: u64) -> bool {
        if ok {
            self.failures.store(0, Ordering::Relaxed);
            self.on_probation.store(0, Ordering::Relaxed);
            return false;
        }
        self.errors.fetch_add(1, Ordering::Relaxed);
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let probation = self.on_probation.load(Ordering::Relaxed) == 1;
        if failures >= threshold || probation {
            self.ejected_until.store(now_ms + retry_after.as_millis() as u64, Ordering::Relaxed);
            self.failures.store(0, Ordering::Relaxed);
            self.on_probation.store(0, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Puts the server back on the ring if its ejection is over; `true` if it changed.
    pub fn readmit_if_due(&self, now_ms: u64) -> bool {
        let until = self.ejected_until.load(Ordering::Relaxed);
        if until != 0 && until <= now_ms {
            self.ejected_until.store(0, Ordering::Relaxed);
            self.on_probation.store(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    pub fn is_ejected(&self) -> bool {
        self.ejected_until.load(Ordering::Relaxed) != 0
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
