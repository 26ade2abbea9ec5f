//! Invalidation by unsafe methods (RFC 9111 §4.4): after a successful POST, PUT, DELETE (or any method that is
//! not known to be safe), stored responses for the target URI, and for the `Location` and `Content-Location` URIs
//! on the same host, are no longer to be used.

use http::header::{CONTENT_LOCATION, LOCATION};
use http::{HeaderMap, Method, StatusCode};

/// Whether a request with this method never changes state (RFC 9110 §9.2.1).
pub fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE)
}

/// Paths (with query) to invalidate on `authority`, given an unsafe request's target and its response.
pub fn targets(method: &Method, status: StatusCode, authority: &str, path: &str, response: &HeaderMap) -> Vec<String> {
    if is_safe(method) || !(status.is_success() || status.is_redirection()) {
        return Vec::new();
    }
    let mut out = vec![path.to_owned()];
    for name in [LOCATION, CONTENT_LOCATION] {
        if let Some(target) =
            response.get(&name).and_then(|v| v.to_str().ok()).and_then(|v| same_host_path(v, authority))
        {
            if !out.contains(&target) {
                out.push(target);
            }
        }
    }
    out
}

/// The path of `reference` if it points at `authority` (a path reference, or an absolute URI on that host).
fn same_host_path(reference: &str, authority: &str) -> Option<String> {
    if reference.starts_with('/') && !reference.starts_with("//") {
        return Some(reference.to_owned());
    }
    let rest = reference.split_once("://")?.1;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, path) = rest.split_at(end);
    host.eq_ignore_ascii_case(authority).then(|| if path.is_empty() { "/".to_owned() } else { path.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn successful_unsafe_requests_invalidate_their_target_and_same_host_locations() {
        let mut h = HeaderMap::new();
        h.insert(LOCATION, HeaderValue::from_static("/created/1"));
        h.insert(CONTENT_LOCATION, HeaderValue::from_static("http://other.example/x"));
        let t = targets(&Method::POST, StatusCode::CREATED, "shop.example", "/items", &h);
        assert_eq!(t, ["/items", "/created/1"]);
        let m_search = Method::from_bytes(b"M-SEARCH").expect("method");
        assert_eq!(targets(&m_search, StatusCode::OK, "a", "/x", &HeaderMap::new()), ["/x"]);
        assert!(targets(&Method::GET, StatusCode::OK, "a", "/x", &h).is_empty());
        assert!(targets(&Method::DELETE, StatusCode::INTERNAL_SERVER_ERROR, "a", "/x", &h).is_empty());
        assert_eq!(same_host_path("https://Shop.Example/p?q=1", "shop.example").as_deref(), Some("/p?q=1"));
    }
}
