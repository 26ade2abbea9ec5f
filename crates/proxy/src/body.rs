//! Bodies, each with the bound and deadline that keeps one slow or huge peer from holding larder's memory or
//! connections:
//!
//! - [`ProxyBody`], what clients receive: a whole buffer (cache hits, larder's own pages), or a body arriving from
//!   the upstream, perhaps after a prefix already read. One enum instead of a boxed trait object keeps a cache hit
//!   free of allocations for its body.
//! - [`UpstreamBody`], a response body from the upstream: it fails if the upstream goes quiet for longer than the
//!   idle timeout, and it holds the upstream slot (and any fill-buffer budget) of the request until it ends.
//! - [`RequestBody`], a client's request body on its way upstream: cut off past its size limit or its deadline,
//!   its failures marked as the client's, not the upstream's.
//! - [`collect_up_to`], which buffers a body for the store within a size limit, a byte budget shared by every fill
//!   under way, and a deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A body sent to a client.
pub enum ProxyBody {
    /// A whole body (taken on first poll).
    Full(Option<Bytes>),
    /// What was already read (if anything), then the rest of an upstream body.
    Upstream(Option<Bytes>, UpstreamBody),
}

impl ProxyBody {
    pub fn empty() -> ProxyBody {
        ProxyBody::Full(None)
    }

    pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
        let bytes = bytes.into();
        ProxyBody::Full((!bytes.is_empty()).then_some(bytes))
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ProxyBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Upstream(prefix, rest) => match prefix.take() {
                Some(bytes) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
                None => Pin::new(rest).poll_frame(cx),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(bytes) => bytes.is_none(),
            ProxyBody::Upstream(prefix, rest) => prefix.is_none() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ProxyBody::Upstream(prefix, rest) => {
                let extra = prefix.as_ref().map_or(0, |b| b.len() as u64);
                let inner = rest.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(inner.lower() + extra);
                if let Some(upper) = inner.upper() {
                    hint.set_upper(upper + extra);
                }
                hint
            }
        }
    }
}

/// The upstream went quiet for longer than its idle timeout while sending a body.
#[derive(Debug, thiserror::Error)]
#[error("the upstream sent nothing for {0:?} in the middle of a body")]
pub struct UpstreamIdle(pub Duration);

/// A response body from the upstream, with an idle deadline and the resources its request holds.
pub struct UpstreamBody {
    inner: Incoming,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    /// The upstream slot of the client connection this request came from, released when the body ends.
    _slot: Option<OwnedSemaphorePermit>,
    /// Fill-buffer budget for a prefix that was read and is still being sent.
    _budget: Option<OwnedSemaphorePermit>,
}

impl UpstreamBody {
    pub fn new(inner: Incoming, idle: Duration, slot: Option<OwnedSemaphorePermit>) -> UpstreamBody {
        UpstreamBody { inner, idle, deadline: Box::pin(tokio::time::sleep(idle)), _slot: slot, _budget: None }
    }

    fn holding(mut self, budget: Option<OwnedSemaphorePermit>) -> UpstreamBody {
        self._budget = budget;
        self
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = Instant::now() + this.idle;
                this.deadline.as_mut().reset(next);
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(UpstreamIdle(this.idle))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body grew past its limit.
#[derive(Debug, thiserror::Error)]
#[error("request body exceeds the {0}-byte limit")]
pub struct BodyTooLarge(pub u64);

/// The client broke its request body off, sent it malformed (a bad chunk size), or took too long.
#[derive(Debug, thiserror::Error)]
#[error("the request body {0}")]
pub struct ClientBodyError(pub String);

/// A body sent upstream.
pub enum RequestBody {
    Empty,
    /// A client's body, limited in size and time.
    Client {
        inner: Incoming,
        limit: u64,
        received: u64,
        deadline: Pin<Box<Sleep>>,
    },
}

impl RequestBody {
    pub fn from_client(inner: Incoming, limit: u64, within: Duration) -> RequestBody {
        RequestBody::Client { inner, limit, received: 0, deadline: Box::pin(tokio::time::sleep(within)) }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let RequestBody::Client { inner, limit, received, deadline } = self.get_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                *received += frame.data_ref().map_or(0, |d| d.len() as u64);
                if *received > *limit {
                    return Poll::Ready(Some(Err(Box::new(BodyTooLarge(*limit)))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(Box::new(ClientBodyError(error.to_string()))))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    Poll::Ready(Some(Err(Box::new(ClientBodyError("did not arrive within its deadline".into())))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::Empty => true,
            RequestBody::Client { inner, .. } => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::Empty => SizeHint::with_exact(0),
            RequestBody::Client { inner, .. } => inner.size_hint(),
        }
    }
}

/// The bytes every fill under way may buffer at once, shared by all of them.
#[derive(Clone)]
pub struct FillBudget(std::sync::Arc<Semaphore>);

impl FillBudget {
    pub fn new(bytes: usize) -> FillBudget {
        FillBudget(std::sync::Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))))
    }

    /// Takes `bytes` more into `held`, if the budget has them.
    fn take(&self, held: &mut Option<OwnedSemaphorePermit>, bytes: usize) -> bool {
        let Ok(more) =
            u32::try_from(bytes).map_err(drop).and_then(|n| self.0.clone().try_acquire_many_owned(n).map_err(drop))
        else {
            return false;
        };
        match held {
            Some(permit) => permit.merge(more),
            None => *held = Some(more),
        }
        true
    }
}

/// What buffering a body for the store produced.
pub enum Collected {
    /// The whole body, within every bound; the budget it holds is released when the permit drops.
    Whole(Bytes, Option<OwnedSemaphorePermit>),
    /// A bound was reached: a body to send instead (what was read, then the rest), and which bound.
    Streamed(ProxyBody, StreamReason),
}

/// Why a body is streamed instead of stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamReason {
    /// Larger than the largest storable body.
    TooLarge,
    /// Other fills hold the buffer budget.
    Budget,
}

/// Why a body could not be buffered.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("the upstream did not finish the body within {0:?}")]
    Deadline(Duration),
    #[error("the upstream body broke off: {0}")]
    Broken(BoxError),
}

/// Reads `body` into memory unless it exceeds `limit` bytes or the shared `budget`, all before `deadline`.
pub async fn collect_up_to(
    mut body: UpstreamBody,
    limit: usize,
    budget: &FillBudget,
    deadline: Instant,
    allowed: Duration,
) -> Result<Collected, CollectError> {
    use http_body_util::BodyExt;
    if body.size_hint().lower() > limit as u64 {
        return Ok(Collected::Streamed(ProxyBody::Upstream(None, body), StreamReason::TooLarge));
    }
    let expected = body.size_hint().exact().map_or(0, |n| n as usize);
    // The buffer grows by explicit, exact steps, and every byte of its capacity is taken from the budget first.
    let mut held = None;
    let mut buffer: Vec<u8> = Vec::new();
    if expected > 0 {
        if !budget.take(&mut held, expected) {
            return Ok(Collected::Streamed(ProxyBody::Upstream(None, body), StreamReason::Budget));
        }
        buffer.reserve_exact(expected);
    }
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(CollectError::Deadline(allowed)),
            Ok(None) => break,
            Ok(Some(Err(error))) => return Err(CollectError::Broken(error)),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        let grown = buffer.len() + data.len();
        let reason = if grown > limit {
            Some(StreamReason::TooLarge)
        } else if grown > buffer.capacity() {
            let new_capacity = grown.max(buffer.capacity().saturating_mul(2).min(limit));
            if budget.take(&mut held, new_capacity - buffer.capacity()) {
                buffer.reserve_exact(new_capacity - buffer.len());
                None
            } else {
                Some(StreamReason::Budget)
            }
        } else {
            None
        };
        buffer.extend_from_slice(&data);
        if let Some(reason) = reason {
            let prefix = Bytes::from(buffer);
            return Ok(Collected::Streamed(ProxyBody::Upstream(Some(prefix), body.holding(held)), reason));
        }
    }
    Ok(Collected::Whole(Bytes::from(buffer), held))
}

/// Reads an upstream body nobody wants any more, so its connection can go back to the pool; gives up (dropping
/// the connection) past `max` bytes or `within`.
pub async fn drain(mut body: UpstreamBody, max: usize, within: Duration) {
    use http_body_util::BodyExt;
    let mut read = 0usize;
    let _ = tokio::time::timeout(within, async {
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, Bytes::len);
            if read > max {
                return;
            }
        }
    })
    .await;
}
