//! Which header fields belong to one connection (hop-by-hop) and so are neither forwarded nor stored
//! (RFC 9110 §7.6.1, RFC 9111 §3.1).

use http::header::{HeaderName, CONNECTION};
use http::HeaderMap;

/// Always hop-by-hop, whatever `Connection` says.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authentication-info",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Whether `name` is hop-by-hop whatever `Connection` says.
pub fn is_always_hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(&name.as_str())
}

/// Whether `name` must not pass beyond this hop: a fixed hop-by-hop field, or one listed in `Connection`.
pub fn is_hop_by_hop(name: &HeaderName, headers: &HeaderMap) -> bool {
    is_always_hop_by_hop(name)
        || headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|l| l.split(','))
            .any(|listed| listed.trim().eq_ignore_ascii_case(name.as_str()))
}

/// Removes the hop-by-hop fields from `headers` in place: the fixed ones and every field `Connection` names. One
/// pass over the names finds them (most requests carry none, or only `Connection: keep-alive`).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let mut doomed: Vec<HeaderName> = headers.keys().filter(|name| is_always_hop_by_hop(name)).cloned().collect();
    if doomed.is_empty() {
        return;
    }
    doomed.extend(
        headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|l| l.split(','))
            .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok()),
    );
    for name in doomed {
        headers.remove(name);
    }
}

/// `headers` without its hop-by-hop fields.
pub fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !is_hop_by_hop(name, headers) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn connection_listed_and_fixed_hop_by_hop_fields_are_dropped() {
        let mut h = HeaderMap::new();
        for (n, v) in [("connection", "a, B"), ("a", "1"), ("b", "2"), ("c", "3"), ("keep-alive", "x"), ("te", "y")] {
            h.append(n, HeaderValue::from_static(v));
        }
        let kept = end_to_end(&h);
        assert_eq!(kept.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["c"]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h, kept, "in place, the same fields go");
    }
}
