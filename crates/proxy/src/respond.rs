//! Responses to clients: a stored response (in a coding the client accepts, as a 304 when the client's validators
//! match, headers only for HEAD), a passed-through upstream response, and larder's own short error pages. Every
//! response says how the cache handled it.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AGE, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, ETAG, VARY};
use http::{HeaderMap, Method, Response, StatusCode};
use hyper::body::Incoming;
use larder_format::ContentEncoding;

use crate::body::ProxyBody;
use crate::encoding::{self, Accepted};
use crate::rfc9111::conditional::{self, NOT_MODIFIED_HEADERS};
use crate::rfc9111::headers::is_hop_by_hop;
use crate::stored::Stored;

/// How the cache handled a request, as the status header reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    Hit,
    Miss,
    Stale,
    Bypass,
}

impl CacheStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Hit => "HIT",
            CacheStatus::Miss => "MISS",
            CacheStatus::Stale => "STALE",
            CacheStatus::Bypass => "BYPASS",
        }
    }
}

/// The largest body decoded for a client that does not accept the stored coding.
const MAX_DECODED: usize = 256 << 20;

/// Serves a stored response to a request.
pub fn from_stored(
    stored: &Stored,
    method: &Method,
    request: &HeaderMap,
    now_ms: u64,
    status_header: &HeaderName,
    status: CacheStatus,
) -> Response<ProxyBody> {
    let age = HeaderValue::from(stored.age_seconds(now_ms));
    let label = HeaderValue::from_static(status.as_str());
    if conditional::not_modified(request, &stored.headers) {
        let mut response = Response::new(ProxyBody::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        let headers = response.headers_mut();
        for name in NOT_MODIFIED_HEADERS {
            for value in stored.headers.get_all(*name) {
                headers.append(*name, value.clone());
            }
        }
        headers.insert(AGE, age);
        headers.insert(status_header.clone(), label);
        return response;
    }
    let r = &stored.response;
    let opaque_coding = stored.headers.contains_key(CONTENT_ENCODING);
    let accepted = Accepted::from_request(request);
    let (body, coding, transformed) = if opaque_coding || accepted.accepts(r.content_encoding) {
        (r.body.clone(), r.content_encoding, false)
    } else {
        match encoding::decode(&r.body, r.content_encoding, MAX_DECODED) {
            Ok(decoded) => (decoded, ContentEncoding::Identity, true),
            Err(_) => return error(StatusCode::BAD_GATEWAY, "stored response could not be decoded", status_header),
        }
    };
    let mut response = Response::new(ProxyBody::empty());
    *response.status_mut() = stored.status();
    let headers = response.headers_mut();
    headers.reserve(stored.headers.len() + 4);
    for (name, value) in &stored.headers {
        headers.append(name.clone(), value.clone());
    }
    if coding != ContentEncoding::Identity && !opaque_coding {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.name()));
    }
    if r.content_encoding != ContentEncoding::Identity && !opaque_coding {
        add_vary_accept_encoding(headers);
    }
    if transformed {
        weaken_etag(headers);
    }
    headers.insert(AGE, age);
    headers.insert(status_header.clone(), label);
    if method == Method::HEAD {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    } else {
        *response.body_mut() = ProxyBody::full(body);
    }
    response
}

/// Passes an upstream response on, without its hop-by-hop fields.
pub fn passed_through(
    upstream: Response<Incoming>,
    status_header: &HeaderName,
    status: CacheStatus,
) -> Response<ProxyBody> {
    let (parts, body) = upstream.into_parts();
    with_parts(parts, ProxyBody::Incoming(body), status_header, status)
}

/// An upstream response head with the given body (a prefix already read and the rest, say).
pub fn with_parts(
    mut parts: http::response::Parts,
    body: ProxyBody,
    status_header: &HeaderName,
    status: CacheStatus,
) -> Response<ProxyBody> {
    let hop: Vec<HeaderName> = parts.headers.keys().filter(|n| is_hop_by_hop(n, &parts.headers)).cloned().collect();
    for name in hop {
        parts.headers.remove(name);
    }
    for name in ["surrogate-control", "surrogate-key", "cache-tag"] {
        parts.headers.remove(name);
    }
    parts.headers.insert(status_header.clone(), HeaderValue::from_static(status.as_str()));
    Response::from_parts(parts, body)
}

/// A short plain-text response from larder itself.
pub fn error(status: StatusCode, message: &str, status_header: &HeaderName) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(Bytes::from(format!("{message}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response.headers_mut().insert(status_header.clone(), HeaderValue::from_static(CacheStatus::Bypass.as_str()));
    response
}

fn add_vary_accept_encoding(headers: &mut HeaderMap) {
    let already = headers
        .get_all(VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|n| n.trim().eq_ignore_ascii_case("accept-encoding")));
    if !already {
        headers.append(VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// A decoded body is another representation: its entity tag can only be weak.
fn weaken_etag(headers: &mut HeaderMap) {
    if let Some(etag) = headers.get(ETAG).and_then(|v| v.to_str().ok()) {
        if !etag.starts_with("W/") {
            if let Ok(weak) = HeaderValue::from_str(&format!("W/{etag}")) {
                headers.insert(ETAG, weak);
            }
        }
    }
}
