//! One memcached server: a few multiplexed connections and its health (larder_store::Health: failures, ejection,
//! errors counted for `/metrics`; spec/STORES.md §4.3).
//!
//! memcached answers a connection's requests in order, so one connection carries many callers at once: a task per
//! connection writes whatever requests are queued in one write and reads the replies back in the same order,
//! handing each caller its own. Many callers then cost a few syscalls, not one round trip each, which is how a
//! handful of connections keeps up with a client that opens one connection per request in flight (memaslap).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use larder_store::Health;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio::task::AbortHandle;

use crate::protocol::{ReadError, Reply, ReplyReader};

/// Requests queued on one connection before callers wait for room (bounds memory when a server is slow).
const QUEUE: usize = 1024;
/// Bytes of queued requests gathered into one write.
const WRITE_BATCH: usize = 256 * 1024;

/// How many replies a batch reads.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// Exactly this many.
    Count(usize),
    /// Up to `END`, or one reply that is not a `STAT` line (`flush_all`'s `OK`, an error).
    UntilEndOrOne,
}

/// Why a batch failed (counted against the server).
#[derive(Debug, Clone)]
pub struct Failure(pub String);

type Answer = oneshot::Sender<Result<Vec<Reply>, Failure>>;

/// A request for the connection task: its bytes, how to read its replies, and where to send them.
struct Job {
    request: Bytes,
    expect: Expect,
    answer: Answer,
}

/// A live connection: its task's queue, and a way to end the task when a caller gives up on it.
struct Link {
    jobs: mpsc::Sender<Job>,
    task: AbortHandle,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub struct Server {
    /// `host:port`, as errors and metrics name it.
    pub name: String,
    address: String,
    links: Box<[Mutex<Option<Link>>]>,
    next: AtomicUsize,
    /// Failures, ejection from the ring, and errors since start.
    pub health: Health,
    max_value: usize,
}

impl Server {
    pub fn new(name: String, address: String, pool: usize, max_value: usize) -> Server {
        Server {
            health: Health::named("memcached", &name),
            name,
            address,
            links: (0..pool.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            max_value,
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
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.links.len();
        let (answer, reply) = oneshot::channel();
        let job = Job { request, expect, answer };
        let mut used = None;
        let work = async {
            let jobs = self.link(index, connect_timeout).await?;
            used = Some(jobs.clone());
            jobs.send(job).await.map_err(|_| Failure("the connection closed".into()))?;
            reply.await.map_err(|_| Failure("the connection closed before the answer".into()))?
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(result) => result,
            Err(_) => {
                // The replies still owed on this connection are late: the server is slow or gone. End the
                // connection (its other callers fail now rather than at their own deadlines); the next request
                // connects afresh.
                if let (Ok(mut slot), Some(used)) = (self.links[index].try_lock(), used) {
                    if slot.as_ref().is_some_and(|link| link.jobs.same_channel(&used)) {
                        *slot = None;
                    }
                }
                Err(Failure(format!("no answer within {} ms", timeout.as_millis())))
            }
        }
    }

    /// The queue of connection `index`, connecting first if it has none or its task has ended.
    async fn link(&self, index: usize, connect_timeout: Duration) -> Result<mpsc::Sender<Job>, Failure> {
        let mut slot = self.links[index].lock().await;
        if let Some(link) = slot.as_ref().filter(|link| !link.jobs.is_closed()) {
            return Ok(link.jobs.clone());
        }
        *slot = None;
        let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(&self.address))
            .await
            .map_err(|_| Failure(format!("no connection within {} ms", connect_timeout.as_millis())))?
            .map_err(|e| Failure(format!("cannot connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (jobs, queue) = mpsc::channel(QUEUE);
        let task = tokio::spawn(drive(stream, queue, self.max_value)).abort_handle();
        *slot = Some(Link { jobs: jobs.clone(), task });
        Ok(jobs)
    }
}

/// The connection task: writes queued requests in batches and reads their replies in order. It ends at the first
/// error (the connection's state is then unknown); callers still waiting see the connection closed.
async fn drive(stream: TcpStream, queue: mpsc::Receiver<Job>, max_value: usize) {
    let (read, write) = stream.into_split();
    let (owed, owed_queue) = mpsc::channel(QUEUE);
    tokio::select! {
        () = write_requests(write, queue, owed) => {}
        () = read_replies(read, owed_queue, max_value) => {}
    }
}

async fn write_requests(
    mut write: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Job>,
    owed: mpsc::Sender<(Expect, Answer)>,
) {
    let mut batch = Vec::with_capacity(16 * 1024);
    while let Some(first) = queue.recv().await {
        batch.clear();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            if owed.send((job.expect, job.answer)).await.is_err() {
                return;
            }
            if job.request.len() >= WRITE_BATCH / 4 {
                // A large request (a big value) goes out as it is rather than copied into the batch.
                if write.write_all(&batch).await.is_err() || write.write_all(&job.request).await.is_err() {
                    return;
                }
                batch.clear();
            } else {
                batch.extend_from_slice(&job.request);
            }
            if batch.len() < WRITE_BATCH {
                next = queue.try_recv().ok();
            }
        }
        if !batch.is_empty() && write.write_all(&batch).await.is_err() {
            return;
        }
        if batch.capacity() > 4 * WRITE_BATCH {
            batch = Vec::with_capacity(16 * 1024);
        }
    }
}

async fn read_replies(mut read: OwnedReadHalf, mut owed: mpsc::Receiver<(Expect, Answer)>, max_value: usize) {
    let mut reader = ReplyReader::new(max_value);
    while let Some((expect, answer)) = owed.recv().await {
        let result = read_one(&mut reader, &mut read, expect).await;
        let failed = result.is_err();
        // A caller that gave up has dropped its receiver; its replies were still read, keeping the stream in step.
        let _ = answer.send(result);
        if failed {
            return;
        }
    }
}

async fn read_one(reader: &mut ReplyReader, read: &mut OwnedReadHalf, expect: Expect) -> Result<Vec<Reply>, Failure> {
    let mut replies = Vec::new();
    loop {
        let reply = reader.read(read).await.map_err(|e| match e {
            ReadError::Closed => Failure("the server closed the connection".into()),
            other => Failure(other.to_string()),
        })?;
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
