//! The body type for everything the proxy sends: whole buffers (cache hits, small errors), bodies streamed
//! from the other side (pass-through, request bodies to the upstream), and a buffered prefix followed by the rest
//! of a stream (a response that turned out too large to cache). One enum instead of a boxed trait object keeps a
//! cache hit free of allocations for its body.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub enum ProxyBody {
    /// A whole body (taken on first poll).
    Full(Option<Bytes>),
    /// A body arriving from the other side.
    Incoming(Incoming),
    /// What was already read, then the rest.
    Prefixed(Option<Bytes>, Incoming),
    /// A body that must stop past a size limit (request bodies to the upstream).
    Limited { inner: Incoming, remaining: u64 },
}

/// A request body grew past its limit.
#[derive(Debug, thiserror::Error)]
#[error("request body exceeds the {0}-byte limit")]
pub struct BodyTooLarge(pub u64);

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
            ProxyBody::Incoming(incoming) => Pin::new(incoming).poll_frame(cx).map_err(Into::into),
            ProxyBody::Prefixed(prefix, rest) => match prefix.take() {
                Some(bytes) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
                None => Pin::new(rest).poll_frame(cx).map_err(Into::into),
            },
            ProxyBody::Limited { inner, remaining } => match Pin::new(inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                    if len > *remaining {
                        return Poll::Ready(Some(Err(Box::new(BodyTooLarge(*remaining)))));
                    }
                    *remaining -= len;
                    Poll::Ready(Some(Ok(frame)))
                }
                other => other.map_err(Into::into),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(bytes) => bytes.is_none(),
            ProxyBody::Incoming(incoming) => incoming.is_end_stream(),
            ProxyBody::Prefixed(prefix, rest) => prefix.is_none() && rest.is_end_stream(),
            ProxyBody::Limited { inner, .. } => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ProxyBody::Incoming(incoming) => incoming.size_hint(),
            ProxyBody::Prefixed(prefix, rest) => {
                let extra = prefix.as_ref().map_or(0, |b| b.len() as u64);
                let inner = rest.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(inner.lower() + extra);
                if let Some(upper) = inner.upper() {
                    hint.set_upper(upper + extra);
                }
                hint
            }
            ProxyBody::Limited { inner, .. } => inner.size_hint(),
        }
    }
}

/// What collecting a body up to a limit produced.
pub enum Collected {
    /// The whole body, within the limit.
    Whole(Bytes),
    /// The limit was reached: what was read so far, and the unread rest.
    TooLarge(Bytes, Incoming),
}

/// Reads `body` into memory unless it exceeds `limit` bytes.
pub async fn collect_up_to(mut body: Incoming, limit: usize) -> Result<Collected, hyper::Error> {
    use http_body_util::BodyExt;
    if body.size_hint().lower() > limit as u64 {
        return Ok(Collected::TooLarge(Bytes::new(), body));
    }
    let mut buffer = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        if let Ok(data) = frame.into_data() {
            buffer.extend_from_slice(&data);
            if buffer.len() > limit {
                return Ok(Collected::TooLarge(buffer.freeze(), body));
            }
        }
    }
    Ok(Collected::Whole(buffer.freeze()))
}
