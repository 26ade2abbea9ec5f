//! Conditional requests: answering a client's `If-None-Match` / `If-Modified-Since` from a stored response
//! (RFC 9110 §13), and merging a `304 Not Modified` from the upstream into the stored response (RFC 9111 §4.3.4).

use http::header::{HeaderName, DATE, ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};
use http::HeaderMap;

use super::freshness::parse_http_date;

/// Whether the client's conditional request is satisfied by the stored response, so a 304 answers it.
/// `If-None-Match` takes precedence: when present, `If-Modified-Since` is ignored.
pub fn not_modified(request: &HeaderMap, stored: &HeaderMap) -> bool {
    let mut inm_lines = request.get_all(IF_NONE_MATCH).iter().peekable();
    if inm_lines.peek().is_some() {
        let Some(etag) = stored.get(ETAG).and_then(|v| v.to_str().ok()) else { return false };
        return inm_lines.filter_map(|v| v.to_str().ok()).flat_map(|l| l.split(',')).any(|candidate| {
            let candidate = candidate.trim();
            candidate == "*" || weak_eq(candidate, etag)
        });
    }
    let Some(since) = request.get(IF_MODIFIED_SINCE).and_then(|v| v.to_str().ok()).and_then(parse_http_date) else {
        return false;
    };
    // Without Last-Modified, the stored response's Date stands in (RFC 9111 §4.3.2).
    stored
        .get(LAST_MODIFIED)
        .or_else(|| stored.get(DATE))
        .and_then(|v| v.to_str().ok())
        .and_then(parse_http_date)
        .is_some_and(|modified| modified <= since)
}

/// Weak comparison of entity tags: equal opaque tags, either or both weak.
fn weak_eq(a: &str, b: &str) -> bool {
    let strip = |t: &str| t.trim().strip_prefix("W/").unwrap_or(t.trim()).to_owned();
    strip(a) == strip(b)
}

/// Headers a 304 to a client carries from the stored response (RFC 9110 §15.4.5).
pub const NOT_MODIFIED_HEADERS: &[&str] =
    &["cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified"];

/// Headers a stored response keeps when a 304 updates it (RFC 9111 §3.2: not Content-Length).
fn keeps_on_update(name: &HeaderName) -> bool {
    name == http::header::CONTENT_LENGTH
}

/// The stored headers updated by a 304's headers: every field the 304 carries replaces the stored one, except
/// those the cache must not update.
pub fn merge_304(stored: &HeaderMap, not_modified: &HeaderMap) -> HeaderMap {
    let mut merged = stored.clone();
    for name in not_modified.keys() {
        if keeps_on_update(name) || super::headers::is_hop_by_hop(name, not_modified) {
            continue;
        }
        merged.remove(name);
        for value in not_modified.get_all(name) {
            merged.append(name.clone(), value.clone());
        }
    }
    merged
}

/// The validators to send upstream when revalidating `stored`.
pub fn validators(stored: &HeaderMap) -> Vec<(HeaderName, http::HeaderValue)> {
    let mut out = Vec::new();
    if let Some(etag) = stored.get(ETAG) {
        out.push((IF_NONE_MATCH, etag.clone()));
    }
    if let Some(modified) = stored.get(LAST_MODIFIED) {
        out.push((IF_MODIFIED_SINCE, modified.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::rfc9111::test_headers as map;

    #[test]
    fn if_none_match_uses_weak_comparison_and_wins_over_if_modified_since() {
        let stored = map(&[("etag", "\"abc\""), ("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT")]);
        assert!(not_modified(&map(&[("if-none-match", "W/\"abc\"")]), &stored));
        assert!(not_modified(&map(&[("if-none-match", "\"x\", \"abc\"")]), &stored));
        assert!(not_modified(&map(&[("if-none-match", "*")]), &stored));
        let both = map(&[("if-none-match", "\"other\""), ("if-modified-since", "Tue, 02 Jan 2024 00:00:00 GMT")]);
        assert!(!not_modified(&both, &stored), "If-None-Match takes precedence");
        assert!(not_modified(&map(&[("if-modified-since", "Tue, 02 Jan 2024 00:00:00 GMT")]), &stored));
        assert!(!not_modified(&map(&[("if-modified-since", "Sun, 31 Dec 2023 00:00:00 GMT")]), &stored));
    }

    #[test]
    fn a_304_updates_stored_headers_but_not_content_length() {
        let stored = map(&[("content-length", "36"), ("x-test", "old"), ("cache-control", "max-age=1"), ("keep", "1")]);
        let update = map(&[("content-length", "10"), ("x-test", "new"), ("cache-control", "max-age=3600")]);
        let merged = merge_304(&stored, &update);
        assert_eq!(merged.get("content-length").map(|v| v.as_bytes()), Some(&b"36"[..]));
        assert_eq!(merged.get("x-test").map(|v| v.as_bytes()), Some(&b"new"[..]));
        assert_eq!(merged.get("cache-control").map(|v| v.as_bytes()), Some(&b"max-age=3600"[..]));
        assert_eq!(merged.get("keep").map(|v| v.as_bytes()), Some(&b"1"[..]));
    }
}
