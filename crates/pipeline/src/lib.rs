//! Pipelined connections to one store server, shared by the memcached and Redis stores.
//!
//! memcached and Redis both answer a connection's requests in order, so one connection carries many callers at
//! once: a task per connection writes whatever requests are queued in one write and reads the replies back in the
//! same order, handing each caller its own. Many callers then cost a few syscalls, not one round trip each, which
//! is how a handful of connections keeps up with a benchmark client that opens one connection per request in
//! flight (memaslap, redis-benchmark). What differs between the two servers is only how a reply is read: a
//! [`Protocol`] says that, a greeting (Redis's AUTH and SELECT) each new connection sends first, and what ends each
//! write (memcached's `mn`, whose `MN` must follow the replies of the write's requests: spec/STORES.md §4.1). A
//! write's callers are answered once that end has been read, so a server's surplus reply fails them all rather
//! than being taken as the next request's answer.

mod buffer;

pub use buffer::{malformed, ReadBuffer};

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio::task::AbortHandle;

/// Requests queued on one connection before callers wait for room (bounds memory when a server is slow).
const QUEUE: usize = 1024;
/// Bytes of queued requests gathered into one write.
const WRITE_BATCH: usize = 256 * 1024;

/// Why an exchange failed: the server is slow, gone or confused (the store counts it against the server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl Failure {
    fn timed_out(timeout: Duration) -> Failure {
        Failure(format!("{TIMED_OUT} {} ms", timeout.as_millis()))
    }

    /// Whether the server did not answer within the exchange's `timeout` (rather than answering wrongly).
    pub fn is_timeout(&self) -> bool {
        self.0.starts_with(TIMED_OUT)
    }
}

/// How a timeout's message starts.
const TIMED_OUT: &str = "no answer within";

/// How one server's replies are read.
pub trait Protocol: Send + Sync + 'static {
    /// One reply.
    type Reply: Send + 'static;
    /// What a request expects back (how many replies, or until which one).
    type Expect: Copy + Send + 'static;
    /// A connection's reading state (its buffer), made for each new connection.
    type Reader: Send + 'static;

    fn reader(&self) -> Self::Reader;

    /// Reads the replies to one request. An error ends the connection (its stream is then out of step).
    fn read<'a>(
        reader: &'a mut Self::Reader,
        io: &'a mut OwnedReadHalf,
        expect: Self::Expect,
    ) -> impl Future<Output = Result<Vec<Self::Reply>, Failure>> + Send + 'a;

    /// Requests every new connection sends before any caller's (AUTH, SELECT), with what they expect back and a
    /// check of the replies; `None` for none.
    fn greeting(&self) -> Option<(Bytes, Self::Expect)> {
        None
    }

    /// Whether the greeting's replies say the connection may be used.
    fn greeted(&self, _replies: &[Self::Reply]) -> Result<(), Failure> {
        Ok(())
    }

    /// Bytes that end every write of requests, if the protocol has them (memcached's `mn`: one per write, not per
    /// request, since memcached answers each `mn` with a write of its own); their answer is read by
    /// [`Protocol::read_end`] after the replies of the write's last request.
    fn write_end(&self) -> Option<&'static [u8]> {
        None
    }

    /// Reads the answer to [`Protocol::write_end`]; anything else there is a reply the requests did not ask for.
    fn read_end<'a>(
        _reader: &'a mut Self::Reader,
        _io: &'a mut OwnedReadHalf,
    ) -> impl Future<Output = Result<(), Failure>> + Send + 'a {
        std::future::ready(Ok(()))
    }
}

type Answer<R> = oneshot::Sender<Result<Vec<R>, Failure>>;

/// What the reading half owes, in the order the writing half sent it: a request's replies, or the end of a write.
enum Owed<P: Protocol> {
    Request(P::Expect, Answer<P::Reply>),
    WriteEnd,
}

/// A request for the connection task: its bytes, how to read its replies, and where to send them.
struct Job<P: Protocol> {
    request: Bytes,
    expect: P::Expect,
    answer: Answer<P::Reply>,
}

/// A live connection: its task's queue, and a way to end the task when a caller gives up on it.
struct Link<P: Protocol> {
    jobs: mpsc::Sender<Job<P>>,
    task: AbortHandle,
}

impl<P: Protocol> Drop for Link<P> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A few pipelined connections to one server, each made on first use and again after it failed.
pub struct Connections<P: Protocol> {
    protocol: Arc<P>,
    address: String,
    links: Box<[Mutex<Option<Link<P>>>]>,
    next: AtomicUsize,
}

impl<P: Protocol> Connections<P> {
    pub fn new(protocol: P, address: String, pool: usize) -> Connections<P> {
        Connections {
            protocol: Arc::new(protocol),
            address,
            links: (0..pool.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Sends `request` and reads its replies, within `timeout` (connecting within `connect_timeout` if needed).
    pub async fn exchange(
        &self,
        request: Bytes,
        expect: P::Expect,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Vec<P::Reply>, Failure> {
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
                Err(Failure::timed_out(timeout))
            }
        }
    }

    /// The queue of connection `index`, connecting (and greeting) first if it has none or its task has ended.
    async fn link(&self, index: usize, connect_timeout: Duration) -> Result<mpsc::Sender<Job<P>>, Failure> {
        let mut slot = self.links[index].lock().await;
        if let Some(link) = slot.as_ref().filter(|link| !link.jobs.is_closed()) {
            return Ok(link.jobs.clone());
        }
        *slot = None;
        let within = |what: &str| Failure(format!("no {what} within {} ms", connect_timeout.as_millis()));
        let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(&self.address))
            .await
            .map_err(|_| within("connection"))?
            .map_err(|e| Failure(format!("cannot connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (jobs, queue) = mpsc::channel(QUEUE);
        let link =
            Link { jobs: jobs.clone(), task: tokio::spawn(drive(stream, queue, self.protocol.clone())).abort_handle() };
        if let Some((request, expect)) = self.protocol.greeting() {
            let (answer, reply) = oneshot::channel();
            let greet = async {
                jobs.send(Job { request, expect, answer })
                    .await
                    .map_err(|_| Failure("the connection closed".into()))?;
                reply.await.map_err(|_| Failure("the connection closed during the greeting".into()))?
            };
            let replies = tokio::time::timeout(connect_timeout, greet).await.map_err(|_| within("greeting"))??;
            self.protocol.greeted(&replies)?;
        }
        *slot = Some(link);
        Ok(jobs)
    }
}

/// The connection task: writes queued requests in batches and reads their replies in order. It ends at the first
/// error (the connection's state is then unknown); callers still waiting see the connection closed.
async fn drive<P: Protocol>(stream: TcpStream, queue: mpsc::Receiver<Job<P>>, protocol: Arc<P>) {
    let (read, write) = stream.into_split();
    let (owed, owed_queue) = mpsc::channel(QUEUE);
    let end = protocol.write_end();
    tokio::select! {
        () = write_requests::<P>(write, queue, owed, end) => {}
        () = read_replies::<P>(read, owed_queue, protocol.reader(), end.is_some()) => {}
    }
}

async fn write_requests<P: Protocol>(
    mut write: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Job<P>>,
    owed: mpsc::Sender<Owed<P>>,
    end: Option<&'static [u8]>,
) {
    let mut batch = Vec::with_capacity(16 * 1024);
    while let Some(first) = queue.recv().await {
        batch.clear();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            if owed.send(Owed::Request(job.expect, job.answer)).await.is_err() {
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
        if let Some(end) = end {
            batch.extend_from_slice(end);
            if owed.send(Owed::WriteEnd).await.is_err() {
                return;
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

/// Callers whose replies have been read, waiting for their write's end.
type Answered<P> = Vec<(Answer<<P as Protocol>::Reply>, Vec<<P as Protocol>::Reply>)>;

/// Reads each request's replies in order. With a write end, a write's callers are answered once its end has been
/// read: a failure anywhere in the write (a reply the requests did not ask for, say) fails them all.
async fn read_replies<P: Protocol>(
    mut read: OwnedReadHalf,
    mut owed: mpsc::Receiver<Owed<P>>,
    mut reader: P::Reader,
    ended: bool,
) {
    let mut waiting: Answered<P> = Vec::new();
    let fail_all = |waiting: Answered<P>, failure: &Failure| {
        for (answer, _) in waiting {
            let _ = answer.send(Err(failure.clone()));
        }
    };
    while let Some(next) = owed.recv().await {
        match next {
            Owed::Request(expect, answer) => match P::read(&mut reader, &mut read, expect).await {
                Ok(replies) if ended => waiting.push((answer, replies)),
                // A caller that gave up has dropped its receiver; its replies were still read, keeping the stream
                // in step.
                Ok(replies) => {
                    let _ = answer.send(Ok(replies));
                }
                Err(failure) => {
                    let _ = answer.send(Err(failure.clone()));
                    fail_all(waiting, &failure);
                    return;
                }
            },
            Owed::WriteEnd => match P::read_end(&mut reader, &mut read).await {
                Ok(()) => {
                    for (answer, replies) in waiting.drain(..) {
                        let _ = answer.send(Ok(replies));
                    }
                }
                Err(failure) => {
                    fail_all(waiting, &failure);
                    return;
                }
            },
        }
    }
}
