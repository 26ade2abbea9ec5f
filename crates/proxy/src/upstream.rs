//! The connection to the app behind larder: pooled keep-alive HTTP/1.1 connections (hyper's client), request
//! rewriting (target, hop-by-hop fields, forwarding headers), and the two ways it fails: unreachable (502) and too
//! slow (504).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http::header::{HeaderValue, HOST};
use http::{HeaderMap, Method, Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::body::{BodyTooLarge, ProxyBody};
use crate::rfc9111::headers::is_hop_by_hop;

/// Why the upstream gave no response.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream unreachable: {0}")]
    Unreachable(String),
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    BodyTooLarge(BodyTooLarge),
}

pub struct Upstream {
    client: Client<HttpConnector, ProxyBody>,
    /// `scheme://authority` of the upstream.
    origin: String,
    /// Path prefix the upstream is mounted under ("" for none).
    base_path: String,
    timeout: Duration,
}

impl Upstream {
    pub fn new(url: &Uri, connect_timeout: Duration, timeout: Duration) -> Upstream {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(256)
            .build(connector);
        let origin = format!("{}://{}", url.scheme_str().unwrap_or("http"), url.authority().map_or("", |a| a.as_str()));
        let base_path = url.path().trim_end_matches('/').to_owned();
        Upstream { client, origin, base_path, timeout }
    }

    /// Sends a request upstream: `path_and_query` is the client's, headers are the client's end-to-end fields plus
    /// forwarding information and any `extra` fields (validators).
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        client_headers: &HeaderMap,
        client: Option<SocketAddr>,
        extra: &[(http::HeaderName, HeaderValue)],
        body: ProxyBody,
    ) -> Result<(Response<Incoming>, Duration), UpstreamError> {
        let uri = format!("{}{}{}", self.origin, self.base_path, path_and_query);
        let mut request = Request::builder().method(method).uri(uri);
        let Some(headers) = request.headers_mut() else {
            return Err(UpstreamError::Unreachable("invalid request target".into()));
        };
        for (name, value) in client_headers {
            if !is_hop_by_hop(name, client_headers) {
                headers.append(name.clone(), value.clone());
            }
        }
        for (name, value) in extra {
            headers.insert(name.clone(), value.clone());
        }
        if !headers.contains_key(HOST) {
            if let Ok(host) = HeaderValue::from_str(self.origin.split("://").nth(1).unwrap_or("")) {
                headers.insert(HOST, host);
            }
        }
        if let Some(addr) = client {
            let forwarded = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
                Some(prior) => format!("{prior}, {}", addr.ip()),
                None => addr.ip().to_string(),
            };
            if let Ok(value) = HeaderValue::from_str(&forwarded) {
                headers.insert("x-forwarded-for", value);
            }
        }
        headers.append(http::header::VIA, HeaderValue::from_static("1.1 larder"));
        let request = request.body(body).map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
        let started = Instant::now();
        match tokio::time::timeout(self.timeout, self.client.request(request)).await {
            Ok(Ok(response)) => Ok((response, started.elapsed())),
            Ok(Err(error)) => Err(classify(error)),
            Err(_) => Err(UpstreamError::Timeout(self.timeout)),
        }
    }
}

/// A client error caused by the request body's size limit is the client's fault (413), anything else the
/// upstream's (502).
fn classify(error: hyper_util::client::legacy::Error) -> UpstreamError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    while let Some(e) = source {
        if let Some(too_large) = e.downcast_ref::<BodyTooLarge>() {
            return UpstreamError::BodyTooLarge(BodyTooLarge(too_large.0));
        }
        source = e.source();
    }
    let detail = std::error::Error::source(&error).map_or_else(|| error.to_string(), |s| s.to_string());
    UpstreamError::Unreachable(detail)
}
