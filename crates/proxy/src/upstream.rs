//! The connection to the app behind larder: pooled keep-alive HTTP/1.1 connections (hyper's client), the request
//! larder sends for a client's (exactly the target, fields and framing larder keyed on, plus its forwarding
//! fields), and the ways it fails: unreachable (502), too slow (504), or the client's own fault (400, 413).
//!
//! Every upstream request runs in a task of its own. A client that goes away (an HTTP/2 stream reset, a closed
//! connection) then does not cut the upstream request off in the middle, which would throw its pooled connection
//! away and open a new one for the next request: the request finishes, its body is drained within a bound, and
//! the connection goes back to the pool. What bounds the work a client can cause this way is its connection's
//! upstream slots (see `connection.rs`), held until the response body ends.

use std::time::{Duration, Instant};

use http::header::{HeaderName, HeaderValue};
use http::{Method, Request, Response, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::OwnedSemaphorePermit;

use crate::body::{drain, BodyTooLarge, ClientBodyError, RequestBody, UpstreamBody};
use crate::forwarding::add_forwarding;
use crate::request::RequestContext;

/// Why the upstream gave no response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream unreachable: {0}")]
    Unreachable(String),
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    /// The client's request body passed its size limit (413).
    #[error("request body exceeds the {0}-byte limit")]
    BodyTooLarge(u64),
    /// The client's request body was malformed, broken off or too slow (400).
    #[error("{0}")]
    ClientBody(String),
}

/// Most of an unwanted response body read so its connection can be reused, and how long that may take.
const DRAIN_BYTES: usize = 1 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(5);

pub struct Upstream {
    client: Client<HttpConnector, RequestBody>,
    /// `scheme://authority` of the upstream.
    origin: String,
    /// Path prefix the upstream is mounted under ("" for none).
    base_path: String,
    /// Time allowed for the response head.
    timeout: Duration,
    /// Time a response body may go quiet.
    idle: Duration,
}

impl Upstream {
    pub fn new(url: &Uri, connect_timeout: Duration, timeout: Duration, idle: Duration) -> Upstream {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(256)
            .build(connector);
        let origin = format!("{}://{}", url.scheme_str().unwrap_or("http"), url.authority().map_or("", |a| a.as_str()));
        let base_path = url.path().trim_end_matches('/').to_owned();
        Upstream { client, origin, base_path, timeout, idle }
    }

    /// The `host:port` larder connects to.
    pub fn address(&self) -> &str {
        self.origin.split("://").nth(1).unwrap_or("")
    }

    /// The request larder sends for `ctx`: its method, normalised target and fields (but those in `omit`),
    /// larder's forwarding fields, `Via`, and `extra` fields (validators). Framing is hyper's to write from `body`.
    pub fn request_for(
        &self,
        ctx: &RequestContext,
        method: Method,
        omit: &[HeaderName],
        extra: &[(HeaderName, HeaderValue)],
        body: RequestBody,
    ) -> Result<Request<RequestBody>, UpstreamError> {
        let uri = format!("{}{}{}", self.origin, self.base_path, ctx.target);
        let mut request = Request::builder().method(method).uri(uri);
        let Some(fields) = request.headers_mut() else {
            return Err(UpstreamError::Unreachable("invalid request target".into()));
        };
        fields.reserve(ctx.headers.len() + extra.len() + 5);
        for (name, value) in &ctx.headers {
            if !omit.contains(name) {
                fields.append(name.clone(), value.clone());
            }
        }
        for (name, value) in extra {
            fields.insert(name.clone(), value.clone());
        }
        add_forwarding(fields, ctx.client.ip(), ctx.scheme, &ctx.authority);
        fields.append(http::header::VIA, HeaderValue::from_static("1.1 larder"));
        request.body(body).map_err(|e| UpstreamError::Unreachable(e.to_string()))
    }

    /// Sends a request in a task of its own (see the module's comment); `slot` is the client connection's upstream
    /// slot, held by the response body. Returns the response head and the time it took.
    pub async fn send(
        &self,
        request: Request<RequestBody>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<(Response<UpstreamBody>, Duration), UpstreamError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (client, timeout, idle) = (self.client.clone(), self.timeout, self.idle);
        tokio::spawn(async move {
            let started = Instant::now();
            let result = match tokio::time::timeout(timeout, client.request(request)).await {
                Ok(Ok(response)) => Ok((response.map(|b| UpstreamBody::new(b, idle, slot)), started.elapsed())),
                Ok(Err(error)) => Err(classify(error)),
                Err(_) => Err(UpstreamError::Timeout(timeout)),
            };
            if let Err(Ok((unwanted, _))) = tx.send(result) {
                drain(unwanted.into_body(), DRAIN_BYTES, DRAIN_TIME).await;
            }
        });
        rx.await.unwrap_or_else(|_| Err(UpstreamError::Unreachable("the upstream request task failed".into())))
    }

    /// Whether a TCP connection to the upstream can be opened now (the readiness check).
    pub async fn reachable(&self, within: Duration) -> Result<(), String> {
        let address = self.address().to_owned();
        match tokio::time::timeout(within, tokio::net::TcpStream::connect(&address)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(format!("{address}: {error}")),
            Err(_) => Err(format!("{address}: no connection within {within:?}")),
        }
    }
}

/// A failure caused by the client's request body is the client's (413, 400); anything else the upstream's (502).
fn classify(error: hyper_util::client::legacy::Error) -> UpstreamError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    while let Some(e) = source {
        if let Some(too_large) = e.downcast_ref::<BodyTooLarge>() {
            return UpstreamError::BodyTooLarge(too_large.0);
        }
        if let Some(client) = e.downcast_ref::<ClientBodyError>() {
            return UpstreamError::ClientBody(client.to_string());
        }
        source = e.source();
    }
    let detail = std::error::Error::source(&error).map_or_else(|| error.to_string(), |s| s.to_string());
    UpstreamError::Unreachable(detail)
}
