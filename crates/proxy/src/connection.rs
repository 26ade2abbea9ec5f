//! One client connection, from accept to close, with the deadlines that keep idle or slow clients from holding
//! connection slots for ever:
//!
//! - a connection must complete its first request head within the header timeout from accept (hyper also limits
//!   each head from its first byte);
//! - a connection with no request under way is closed after the idle timeout (keep-alive idle, and HTTP/2
//!   connections that send only a preface, pings or nothing);
//! - on shutdown it finishes the requests under way (up to the grace period) and then closes.
//!
//! A request is "under way" from its head to the end of its response body, tracked by a guard inside the
//! response body ([`Tracked`]); that body also writes the access log line when the response is done. Each
//! connection also has its upstream slots: how many upstream requests it may have running at once (upstream.rs).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

use crate::access_log::{AccessLog, AccessRecord};
use crate::body::{BoxError, ProxyBody};
use crate::cache_status::Verdict;

/// The deadlines of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// From accept to the first request head.
    pub header: Duration,
    /// With no request under way.
    pub idle: Duration,
    /// For requests under way once shutdown (or an idle close) begins.
    pub grace: Duration,
}

/// What the connection's requests share.
pub struct ConnState {
    opened: Instant,
    in_flight: AtomicUsize,
    served_any: AtomicBool,
    /// When the connection last became idle, in ms since `opened`.
    idle_since_ms: AtomicU64,
    /// Upstream requests this connection may have under way.
    pub upstream_slots: Arc<Semaphore>,
}

impl ConnState {
    pub fn new(upstream_slots: usize) -> Arc<ConnState> {
        Arc::new(ConnState {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            served_any: AtomicBool::new(false),
            idle_since_ms: AtomicU64::new(0),
            upstream_slots: Arc::new(Semaphore::new(upstream_slots)),
        })
    }

    /// When the connection may be closed for idleness, if no request starts before.
    fn idle_deadline(&self, timeouts: &Timeouts) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = self.opened + Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
        let allowed = if self.served_any.load(Ordering::Acquire) { timeouts.idle } else { timeouts.header };
        Some(since + allowed)
    }
}

/// Marks a request under way until dropped.
pub struct RequestGuard(Arc<ConnState>);

impl RequestGuard {
    pub fn new(state: &Arc<ConnState>) -> RequestGuard {
        state.in_flight.fetch_add(1, Ordering::AcqRel);
        state.served_any.store(true, Ordering::Release);
        RequestGuard(state.clone())
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let state = &self.0;
        let elapsed = Instant::now().saturating_duration_since(state.opened).as_millis() as u64;
        state.idle_since_ms.store(elapsed, Ordering::Release);
        state.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as under way until it ends, and logs it then.
pub struct Tracked {
    inner: ProxyBody,
    sent: u64,
    _guard: Option<RequestGuard>,
    log: Option<PendingLine>,
}

struct PendingLine {
    sink: AccessLog,
    record: AccessRecord,
    status: u16,
    verdict: Verdict,
}

impl Tracked {
    pub fn new(
        inner: ProxyBody,
        guard: Option<RequestGuard>,
        log: Option<(AccessLog, AccessRecord, u16, Verdict)>,
    ) -> Tracked {
        let log = log.map(|(sink, record, status, verdict)| PendingLine { sink, record, status, verdict });
        Tracked { inner, sent: 0, _guard: guard, log }
    }

    fn write_log(&mut self) {
        if let Some(line) = self.log.take() {
            line.sink.write(line.record.line(line.status, self.sent, &line.verdict));
        }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => self.sent += frame.data_ref().map_or(0, |d| d.len() as u64),
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => self.write_log(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        // A body never polled to its end (HEAD, a client that left) is logged with what was sent.
        self.write_log();
    }
}

/// Serves one connection until it closes, shutdown finishes it, or it idles past its deadline.
pub async fn drive<S, B>(
    stream: TcpStream,
    builder: Arc<auto::Builder<TokioExecutor>>,
    service: S,
    state: Arc<ConnState>,
    timeouts: Timeouts,
    mut stop: watch::Receiver<bool>,
) where
    S: hyper::service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let mut hard_deadline: Option<Instant> = None;
    loop {
        let wake = match hard_deadline {
            Some(deadline) => deadline,
            None => state.idle_deadline(&timeouts).unwrap_or_else(|| Instant::now() + timeouts.idle),
        };
        tokio::select! {
            _ = connection.as_mut() => return,
            changed = stop.changed(), if hard_deadline.is_none() => {
                if changed.is_ok() && !*stop.borrow() {
                    continue;
                }
                connection.as_mut().graceful_shutdown();
                hard_deadline = Some(Instant::now() + timeouts.grace);
            }
            _ = tokio::time::sleep_until(wake) => {
                if hard_deadline.is_some() {
                    // Shutting down and still not done: the client is holding on. Close.
                    return;
                }
                if state.idle_deadline(&timeouts).is_some_and(|deadline| deadline <= Instant::now()) {
                    connection.as_mut().graceful_shutdown();
                    hard_deadline = Some(Instant::now() + timeouts.grace.min(timeouts.header));
                }
            }
        }
    }
}
