//! How larder handled a request, decided once per request as a [`Verdict`] and reported the same way everywhere:
//! the `X-Cache` header (HIT, MISS, STALE, BYPASS), the RFC 9211 `Cache-Status` header, the metrics (which count
//! each request under exactly one outcome, so they add up to the requests served) and the access log.

use std::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

/// The one thing that happened to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Answered from the cache, fresh.
    Hit,
    /// A stale stored response, validated with the upstream (304) and answered from the cache.
    Revalidated,
    /// Answered with a stale stored response (while revalidating, or because the upstream failed or was slow).
    Stale,
    /// Sent upstream to fill the cache.
    Miss,
    /// Answered by another request's upstream fill, which it waited for.
    Collapsed,
    /// A cacheable method sent upstream without a cache fill: a URL known not to be storable, credentials, HEAD.
    Pass,
    /// A method larder does not cache, sent upstream.
    Bypass,
    /// Answered by larder itself without the cache or the upstream (a refused request, PURGE, `OPTIONS *`).
    Local,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Hit,
        Outcome::Revalidated,
        Outcome::Stale,
        Outcome::Miss,
        Outcome::Collapsed,
        Outcome::Pass,
        Outcome::Bypass,
        Outcome::Local,
    ];

    /// The label in metrics and the access log.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Revalidated => "revalidated",
            Outcome::Stale => "stale",
            Outcome::Miss => "miss",
            Outcome::Collapsed => "collapsed",
            Outcome::Pass => "pass",
            Outcome::Bypass => "bypass",
            Outcome::Local => "local",
        }
    }

    /// The `X-Cache` value, as before `Cache-Status` existed.
    pub fn x_cache(self) -> &'static str {
        match self {
            Outcome::Hit | Outcome::Revalidated => "HIT",
            Outcome::Stale => "STALE",
            Outcome::Miss | Outcome::Collapsed | Outcome::Pass => "MISS",
            Outcome::Bypass | Outcome::Local => "BYPASS",
        }
    }
}

/// Why a request went upstream (RFC 9211 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fwd {
    /// The method is not cached.
    Method,
    /// Nothing was stored for the URL.
    UriMiss,
    /// A response was stored for the URL, but not for this request's variant.
    VaryMiss,
    /// The stored response was stale.
    Stale,
    /// The request itself required it (credentials, request directives).
    Request,
    /// larder does not handle this request with the cache: its URL is known not to be storable (hit-for-miss).
    Bypass,
}

impl Fwd {
    fn token(self) -> &'static str {
        match self {
            Fwd::Method => "method",
            Fwd::UriMiss => "uri-miss",
            Fwd::VaryMiss => "vary-miss",
            Fwd::Stale => "stale",
            Fwd::Request => "request",
            Fwd::Bypass => "bypass",
        }
    }
}

/// How larder handled one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub fwd: Option<Fwd>,
    /// The status the upstream answered, when it was asked.
    pub fwd_status: Option<u16>,
    /// Whether the response was stored.
    pub stored: bool,
    /// Seconds of freshness left in the response served from the cache (negative when stale).
    pub ttl: Option<i64>,
    /// Why: the reason a response was not stored, the stale rule that applied, why a request was refused.
    pub detail: Option<&'static str>,
    /// How long the upstream took to answer, when it was asked.
    pub upstream_time: Option<Duration>,
}

impl Verdict {
    pub fn new(outcome: Outcome) -> Verdict {
        Verdict { outcome, fwd: None, fwd_status: None, stored: false, ttl: None, detail: None, upstream_time: None }
    }

    pub fn forwarded(outcome: Outcome, fwd: Fwd) -> Verdict {
        Verdict { fwd: Some(fwd), ..Verdict::new(outcome) }
    }

    pub fn with_detail(mut self, detail: &'static str) -> Verdict {
        self.detail = Some(detail);
        self
    }

    pub fn with_ttl(mut self, ttl: i64) -> Verdict {
        self.ttl = Some(ttl);
        self
    }

    /// The `Cache-Status` member for this cache: `larder; hit; ttl=42`, `larder; fwd=uri-miss; fwd-status=200;
    /// stored`, `larder; fwd=uri-miss; fwd-status=200; detail=private`… Built by hand rather than with `format!`:
    /// it is on every response.
    pub fn cache_status(&self) -> String {
        let mut numbers = itoa::Buffer::new();
        let mut out = String::with_capacity(64);
        out.push_str("larder");
        let answered_here = matches!(self.outcome, Outcome::Hit | Outcome::Stale) && self.fwd.is_none();
        if answered_here {
            out.push_str("; hit");
        }
        if let Some(fwd) = self.fwd {
            out.push_str("; fwd=");
            out.push_str(fwd.token());
        }
        if let Some(status) = self.fwd_status {
            out.push_str("; fwd-status=");
            out.push_str(numbers.format(status));
        }
        if self.stored {
            out.push_str("; stored");
        }
        if self.outcome == Outcome::Collapsed {
            out.push_str("; collapsed");
        }
        if let Some(ttl) = self.ttl {
            out.push_str("; ttl=");
            out.push_str(numbers.format(ttl));
        }
        if let Some(detail) = self.detail {
            out.push_str("; detail=");
            out.push_str(detail);
        }
        out
    }

    /// Sets `X-Cache` (under its configured name) and, if enabled, adds larder's `Cache-Status` member after any
    /// the upstream sent (RFC 9211 §2 lists caches from the origin outwards).
    pub fn apply(&self, headers: &mut HeaderMap, x_cache: &HeaderName, cache_status: bool) {
        headers.insert(x_cache.clone(), HeaderValue::from_static(self.outcome.x_cache()));
        if cache_status {
            if let Ok(value) = HeaderValue::try_from(self.cache_status()) {
                headers.append(CACHE_STATUS, value);
            }
        }
    }
}

/// `Cache-Status` (RFC 9211).
pub const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_status_members_follow_rfc_9211() {
        assert_eq!(Verdict::new(Outcome::Hit).with_ttl(42).cache_status(), "larder; hit; ttl=42");
        let mut miss = Verdict::forwarded(Outcome::Miss, Fwd::UriMiss);
        miss.fwd_status = Some(200);
        miss.stored = true;
        miss.ttl = Some(60);
        assert_eq!(miss.cache_status(), "larder; fwd=uri-miss; fwd-status=200; stored; ttl=60");
        let collapsed = Verdict::forwarded(Outcome::Collapsed, Fwd::UriMiss);
        assert_eq!(collapsed.cache_status(), "larder; fwd=uri-miss; collapsed");
        let private = Verdict::forwarded(Outcome::Miss, Fwd::UriMiss).with_detail("private");
        assert_eq!(private.cache_status(), "larder; fwd=uri-miss; detail=private");
        let swr = Verdict::new(Outcome::Stale).with_ttl(-5).with_detail("stale-while-revalidate");
        assert_eq!(swr.cache_status(), "larder; hit; ttl=-5; detail=stale-while-revalidate");
    }

    #[test]
    fn x_cache_keeps_its_four_values() {
        let values: Vec<&str> = Outcome::ALL.iter().map(|o| o.x_cache()).collect();
        assert_eq!(values, ["HIT", "HIT", "STALE", "MISS", "MISS", "MISS", "BYPASS", "BYPASS"]);
    }
}
