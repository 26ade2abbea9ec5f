//! Responses to clients: a stored response (as a 304 when the client's validators match, a byte range when asked,
//! headers only for HEAD), a passed-through upstream response, and larder's own short pages. How the cache handled
//! the request is added afterwards, from its `Verdict` (cache_status.rs).

use bytes::Bytes;
use http::header::{
    HeaderValue, AGE, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, IF_RANGE, LAST_MODIFIED,
    RANGE, VARY,
};
use http::{HeaderMap, Method, Response, StatusCode};
use larder_format::ContentEncoding;

use crate::body::{ProxyBody, UpstreamBody};
use crate::rfc9111::conditional::{self, NOT_MODIFIED_HEADERS};
use crate::rfc9111::headers::strip_hop_by_hop;
use crate::stored::Stored;

/// Fields that steer caches and are not passed on: they are for larder, not for browsers.
pub const CONSUMED: &[&str] = &["surrogate-control", "surrogate-key", "cache-tag"];

/// How a stored response relates to what its URL may be served as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Representation {
    /// Its body was decoded or compressed from the stored one: its entity tag can only be weak.
    pub transformed: bool,
    /// Clients with another `Accept-Encoding` may get another coding, so caches after larder must vary on it.
    pub varies_on_coding: bool,
}

/// The coding a stored response's body is in: the entry's, or a known one that a pushed entry gives as a header.
/// `None` for a coding larder does not know (served as is, to everyone).
pub fn stored_coding(stored: &Stored) -> Option<ContentEncoding> {
    let header = stored.headers.get(CONTENT_ENCODING).and_then(|v| v.to_str().ok()).map(str::trim);
    match header.map(str::parse::<ContentEncoding>) {
        None => Some(stored.content_encoding),
        Some(Ok(coding)) if stored.content_encoding == ContentEncoding::Identity => Some(coding),
        Some(Ok(_)) => Some(stored.content_encoding),
        Some(Err(_)) => None,
    }
}

/// Serves a stored response to a request. It is consumed: its header map becomes the response's (a hit builds
/// one header map, not two).
pub fn from_stored(
    stored: Stored,
    method: &Method,
    request: &HeaderMap,
    now_ms: u64,
    representation: Representation,
) -> Response<ProxyBody> {
    let age = HeaderValue::from(stored.age_seconds(now_ms));
    let coding = stored_coding(&stored);
    let status = stored.status();
    let Stored { headers: mut fields, body, .. } = stored;
    if representation.transformed {
        weaken_etag(&mut fields);
    }
    if conditional::not_modified(request, &fields) {
        let mut response = Response::new(ProxyBody::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        let headers = response.headers_mut();
        for name in NOT_MODIFIED_HEADERS {
            for value in fields.get_all(*name) {
                headers.append(*name, value.clone());
            }
        }
        if representation.varies_on_coding {
            add_vary_accept_encoding(headers);
        }
        headers.insert(AGE, age);
        return response;
    }
    // Framing and connection fields are the server's to set (spec/FORMAT.md §4): a stored Content-Length that
    // disagrees with the body would break the response. A known coding is set below from the entry.
    strip_hop_by_hop(&mut fields);
    fields.remove(CONTENT_LENGTH);
    if coding.is_some() {
        fields.remove(CONTENT_ENCODING);
    }
    if let Some(coding) = coding.filter(|c| *c != ContentEncoding::Identity) {
        fields.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.name()));
    }
    if representation.varies_on_coding {
        add_vary_accept_encoding(&mut fields);
    }
    fields.insert(AGE, age);
    let len = body.len() as u64;
    let range = byte_range(request, &fields, status, len);
    let mut response = Response::new(ProxyBody::empty());
    *response.status_mut() = status;
    let body = match range {
        Range::Whole => body,
        Range::Part(start, end) => {
            *response.status_mut() = StatusCode::PARTIAL_CONTENT;
            let content_range = format!("bytes {start}-{end}/{len}");
            if let Ok(value) = HeaderValue::from_str(&content_range) {
                fields.insert(CONTENT_RANGE, value);
            }
            body.slice(start as usize..=end as usize)
        }
        Range::Unsatisfiable => {
            *response.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            if let Ok(value) = HeaderValue::from_str(&format!("bytes */{len}")) {
                fields.insert(CONTENT_RANGE, value);
            }
            Bytes::new()
        }
    };
    if method == Method::HEAD {
        fields.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    } else {
        *response.body_mut() = ProxyBody::full(body);
    }
    *response.headers_mut() = fields;
    response
}

/// What a `Range` request asks of a stored body.
#[derive(Debug, PartialEq, Eq)]
enum Range {
    /// No usable range: the whole body with the stored status.
    Whole,
    /// Bytes `start..=end`.
    Part(u64, u64),
    /// A range that starts past the end (416).
    Unsatisfiable,
}

/// Resolves a single `bytes=` range (RFC 9110 §14) against a stored 200 of `len` bytes. Several ranges, other
/// units, malformed specs, and an `If-Range` that does not match the stored validator all mean "the whole body".
fn byte_range(request: &HeaderMap, stored: &HeaderMap, status: StatusCode, len: u64) -> Range {
    let Some(spec) = request.get(RANGE).and_then(|v| v.to_str().ok()) else { return Range::Whole };
    if status != StatusCode::OK || len == 0 {
        return Range::Whole;
    }
    if let Some(if_range) = request.get(IF_RANGE).and_then(|v| v.to_str().ok()) {
        let etag = stored.get(ETAG).and_then(|v| v.to_str().ok());
        let modified = stored.get(LAST_MODIFIED).and_then(|v| v.to_str().ok());
        let matches = if if_range.starts_with('"') || if_range.starts_with("W/") {
            // A strong comparison: weak tags never match.
            !if_range.starts_with("W/") && etag.is_some_and(|e| e == if_range)
        } else {
            modified.is_some_and(|m| m == if_range)
        };
        if !matches {
            return Range::Whole;
        }
    }
    let Some(set) = spec.trim().strip_prefix("bytes=") else { return Range::Whole };
    if set.contains(',') {
        return Range::Whole;
    }
    let Some((first, last)) = set.trim().split_once('-') else { return Range::Whole };
    let digits =
        |s: &str| (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse::<u64>().ok()).flatten();
    match (first.trim(), last.trim()) {
        ("", suffix) => match digits(suffix) {
            Some(0) => Range::Unsatisfiable,
            Some(n) => Range::Part(len.saturating_sub(n), len - 1),
            None => Range::Whole,
        },
        (start, "") => match digits(start) {
            Some(s) if s >= len => Range::Unsatisfiable,
            Some(s) => Range::Part(s, len - 1),
            None => Range::Whole,
        },
        (start, end) => match (digits(start), digits(end)) {
            (Some(s), Some(e)) if s <= e => {
                if s >= len {
                    Range::Unsatisfiable
                } else {
                    Range::Part(s, e.min(len - 1))
                }
            }
            _ => Range::Whole,
        },
    }
}

/// Passes an upstream response on, without its hop-by-hop fields.
pub fn passed_through(upstream: Response<UpstreamBody>) -> Response<ProxyBody> {
    let (parts, body) = upstream.into_parts();
    with_parts(parts, ProxyBody::Upstream(None, body))
}

/// An upstream response head with the given body (a prefix already read and the rest, say).
pub fn with_parts(mut parts: http::response::Parts, body: ProxyBody) -> Response<ProxyBody> {
    strip_hop_by_hop(&mut parts.headers);
    for name in CONSUMED {
        parts.headers.remove(*name);
    }
    Response::from_parts(parts, body)
}

/// A short plain-text response from larder itself.
pub fn error(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(Bytes::from(format!("{message}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// A small JSON response from larder itself.
pub fn json(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(Bytes::from(body + "\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn range(spec: &'static str, len: u64) -> Range {
        let mut request = HeaderMap::new();
        request.insert(RANGE, HeaderValue::from_static(spec));
        byte_range(&request, &HeaderMap::new(), StatusCode::OK, len)
    }

    #[test]
    fn single_byte_ranges_resolve_against_the_body() {
        assert_eq!(range("bytes=0-1", 11), Range::Part(0, 1));
        assert_eq!(range("bytes=5-", 11), Range::Part(5, 10));
        assert_eq!(range("bytes=-3", 11), Range::Part(8, 10));
        assert_eq!(range("bytes=5-100", 11), Range::Part(5, 10));
        assert_eq!(range("bytes=11-", 11), Range::Unsatisfiable);
        assert_eq!(range("bytes=0-1,3-4", 11), Range::Whole);
        assert_eq!(range("bytes=4-2", 11), Range::Whole);
        assert_eq!(range("items=0-1", 11), Range::Whole);
        assert_eq!(range("bytes=-0", 11), Range::Unsatisfiable);
        assert_eq!(range("bytes=-", 11), Range::Whole);
        assert_eq!(range("bytes=-5", 0), Range::Whole);
    }

    #[test]
    fn if_range_needs_a_strong_match() {
        let mut stored = HeaderMap::new();
        stored.insert(ETAG, HeaderValue::from_static("\"v1\""));
        let with = |if_range: &'static str| {
            let mut request = HeaderMap::new();
            request.insert(RANGE, HeaderValue::from_static("bytes=0-1"));
            request.insert(IF_RANGE, HeaderValue::from_static(if_range));
            byte_range(&request, &stored, StatusCode::OK, 10)
        };
        assert_eq!(with("\"v1\""), Range::Part(0, 1));
        assert_eq!(with("\"v2\""), Range::Whole);
        assert_eq!(with("W/\"v1\""), Range::Whole);
    }
}
