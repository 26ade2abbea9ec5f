//! HTTP caching semantics for a shared cache (RFC 9111, RFC 9213 `CDN-Cache-Control`, RFC 5861 stale
//! extensions), as pure functions over header maps: what may be stored, for how long, and whether a stored
//! response may be reused, served stale, or must be revalidated. The proxy calls these; nothing here does I/O.
//!
//! Why not the `http-cache-semantics` crate: it keeps its decisions in a serialized policy object beside each
//! response, while larder's entries (spec/FORMAT.md) carry freshness in their header for every language to read;
//! and it knows neither `CDN-Cache-Control` nor `Surrogate-Control`. The rules below are small and tested against
//! the public cache-tests suite (docs/conformance.md).

pub mod cache_control;
pub mod conditional;
pub mod date;
pub mod freshness;
pub mod headers;
pub mod invalidation;
pub mod vary;

use std::time::Duration;

use http::header::{
    HeaderName, AUTHORIZATION, CACHE_CONTROL, CONTENT_ENCODING, ETAG, LAST_MODIFIED, PRAGMA, SET_COOKIE,
};
use http::{HeaderMap, Method, StatusCode};
use larder_format::ContentEncoding;

use self::cache_control::Directives;
use self::freshness::LifetimeSource;

/// The knobs of the caching rules (from the proxy's configuration).
#[derive(Debug, Clone)]
pub struct Rules {
    /// Targeted fields in order of precedence (RFC 9213), e.g. `CDN-Cache-Control`.
    pub targeted_fields: Vec<HeaderName>,
    /// Honour `Surrogate-Control` (after targeted fields, before `Cache-Control`).
    pub surrogate_control: bool,
    /// Heuristic freshness for responses without explicit freshness (10% of their age since Last-Modified, up to
    /// this); `None` disables it, the default.
    pub heuristic_cap: Option<Duration>,
    /// Store responses that carry `Set-Cookie` (off by default: a shared cache would hand one user's cookie to
    /// everyone).
    pub cache_set_cookie: bool,
    /// stale-while-revalidate for responses that do not say.
    pub default_stale_while_revalidate: Duration,
    /// stale-if-error for responses that do not say.
    pub default_stale_if_error: Duration,
    /// How long a stale response with validators is kept for conditional revalidation.
    pub revalidation_window: Duration,
    /// Honour request `Cache-Control` / `Pragma` (off by default: a reverse proxy shields a slow app from clients
    /// that force reloads; RFC 9111 allows a cache to be configured this way).
    pub honor_request_directives: bool,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            targeted_fields: vec![HeaderName::from_static("cdn-cache-control")],
            surrogate_control: true,
            heuristic_cap: None,
            cache_set_cookie: false,
            default_stale_while_revalidate: Duration::ZERO,
            default_stale_if_error: Duration::ZERO,
            revalidation_window: Duration::from_secs(3600),
            honor_request_directives: false,
        }
    }
}

/// The directives that govern this cache for a response, and whether `Expires` still counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Governing {
    pub directives: Directives,
    /// False when a targeted field replaced `Cache-Control` (and with it `Expires`).
    pub use_expires: bool,
}

impl Rules {
    /// The first valid, non-empty targeted field, else `Surrogate-Control` when it holds a directive larder acts on,
    /// else `Cache-Control` (spec/HTTP.md §1.3).
    pub fn governing(&self, response: &HeaderMap) -> Governing {
        for field in &self.targeted_fields {
            if let Some(directives) = Directives::parse_structured(response.get_all(field)) {
                return Governing { directives, use_expires: false };
            }
        }
        if self.surrogate_control {
            if let Some(directives) = Directives::parse_surrogate(response.get_all("surrogate-control")) {
                return Governing { directives, use_expires: false };
            }
        }
        Governing { directives: Directives::parse(response.get_all(CACHE_CONTROL)), use_expires: true }
    }

    /// Decides whether and how a response to a GET may be stored: the rules of spec/HTTP.md §1,
    /// checked in the order given there, so that the reason reported is the same in every implementation;
    /// spec/vectors/storage.json holds the cases (tests/storage_vectors.rs runs them).
    pub fn storage(
        &self,
        method: &Method,
        request: &HeaderMap,
        status: StatusCode,
        response: &HeaderMap,
        request_time_ms: u64,
        response_time_ms: u64,
    ) -> Result<StorePlan, NotStored> {
        if *method != Method::GET {
            return Err(NotStored::Method);
        }
        // Interim responses are not final; larder neither stores nor combines partial content; a 304 only refreshes
        // what is stored; 600-999 are not valid statuses (RFC 9110 §15).
        if status.is_informational()
            || status == StatusCode::PARTIAL_CONTENT
            || status == StatusCode::NOT_MODIFIED
            || status.as_u16() >= 600
        {
            return Err(NotStored::Status);
        }
        if self.honor_request_directives && Directives::parse(request.get_all(CACHE_CONTROL)).no_store {
            return Err(NotStored::NoStoreRequest);
        }
        let Governing { directives: d, use_expires } = self.governing(response);
        if d.must_understand {
            // must-understand overrides no-store for statuses this cache implements, and forbids others.
            if !understood(status) {
                return Err(NotStored::Status);
            }
        } else if d.no_store {
            return Err(NotStored::NoStore);
        }
        if d.private {
            return Err(NotStored::Private);
        }
        if request.contains_key(AUTHORIZATION) && !(d.public || d.must_revalidate || d.s_maxage.is_some()) {
            return Err(NotStored::Authorization);
        }
        if response.contains_key(SET_COOKIE) && !self.cache_set_cookie {
            return Err(NotStored::SetCookie);
        }
        // Accept-Encoding does not select a variant when larder can decode the stored coding: it is sent to
        // clients that accept it and decoded for the others, so one entry serves every Accept-Encoding. A coding
        // larder cannot decode (say `deflate`) is passed through as is, so there the origin's Vary must stay.
        let mut vary = vary::vary_names(response).ok_or(NotStored::VaryStar)?;
        if coding_is_decodable(response) {
            vary.retain(|name| name != "accept-encoding");
        }
        let has_validator = response.contains_key(ETAG) || response.contains_key(LAST_MODIFIED);
        let lifetime = freshness::lifetime_ms(status, response, &d, use_expires, self.heuristic_cap, response_time_ms);
        let (lifetime_ms, source) = match lifetime {
            Some(found) => found,
            // RFC 9111 §3: storable without freshness when the status is heuristically cacheable or the response is
            // public; with a validator it is kept, stale, for revalidation.
            None if has_validator && (freshness::heuristically_cacheable(status) || d.public) => {
                (0, LifetimeSource::MaxAge)
            }
            None => return Err(NotStored::NoFreshness),
        };
        let initial_age_ms = freshness::corrected_initial_age_ms(response, request_time_ms, response_time_ms);
        // no-cache: storable, but every reuse needs revalidation, so it is stale from the start.
        let fresh_ms = if d.no_cache { 0 } else { lifetime_ms.saturating_sub(initial_age_ms) };
        let stale = self.stale_allowance(&d, source);
        let mut keep_ms = stale.while_revalidate.max(stale.if_error).as_millis() as u64;
        if has_validator {
            keep_ms = keep_ms.max(self.revalidation_window.as_millis() as u64);
        }
        if fresh_ms == 0 && keep_ms == 0 {
            return Err(NotStored::NoFreshness);
        }
        Ok(StorePlan { fresh_ms, initial_age_ms, keep_stale_ms: keep_ms, vary })
    }

    /// How long past freshness a response may be served without revalidation (while revalidating, or when the
    /// upstream fails). Nothing when the response forbids stale use.
    pub fn stale_allowance(&self, d: &Directives, source: LifetimeSource) -> StaleAllowance {
        if d.must_revalidate || d.proxy_revalidate || d.no_cache || source == LifetimeSource::SMaxAge {
            return StaleAllowance::default();
        }
        let secs = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_secs);
        StaleAllowance {
            while_revalidate: secs(d.stale_while_revalidate, self.default_stale_while_revalidate),
            if_error: secs(d.stale_if_error, self.default_stale_if_error),
        }
    }

    /// What the stored response's own headers allow once it is stale.
    pub fn stale_allowance_of(&self, stored: &HeaderMap) -> StaleAllowance {
        let governing = self.governing(stored);
        let source =
            if governing.directives.s_maxage.is_some() { LifetimeSource::SMaxAge } else { LifetimeSource::MaxAge };
        self.stale_allowance(&governing.directives, source)
    }

    /// Whether the request insists on a response validated with the upstream (`no-cache`, `max-age=0`,
    /// `Pragma: no-cache`), when request directives are honoured.
    pub fn request_requires_validation(&self, request: &HeaderMap, current_age_ms: u64) -> bool {
        if !self.honor_request_directives {
            return false;
        }
        let mut lines = request.get_all(CACHE_CONTROL).iter().peekable();
        if lines.peek().is_none() {
            return request
                .get_all(PRAGMA)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case("no-cache")));
        }
        let d = Directives::parse(lines);
        d.no_cache || d.max_age.is_some_and(|max| current_age_ms > max * 1000)
    }
}

/// Header maps from literal pairs, for the tests of this module and its children.
#[cfg(test)]
pub(crate) fn test_headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        let name = http::HeaderName::from_bytes(name.as_bytes()).expect("a valid name");
        h.append(name, http::HeaderValue::from_str(value).expect("a valid value"));
    }
    h
}

/// Whether larder can serve this response's coding to any client: no coding, or one it can decode to identity
/// (the same test the hit path applies before deciding to decode).
fn coding_is_decodable(response: &HeaderMap) -> bool {
    let mut codings = response.get_all(CONTENT_ENCODING).iter();
    match (codings.next(), codings.next()) {
        (None, _) => true,
        (Some(value), None) => value.to_str().is_ok_and(|v| v.trim().parse::<ContentEncoding>().is_ok()),
        (Some(_), Some(_)) => false,
    }
}

/// Statuses whose semantics this cache implements (for `must-understand`).
fn understood(status: StatusCode) -> bool {
    matches!(status.as_u16(), 200 | 203 | 204 | 300 | 301 | 302 | 303 | 307 | 308 | 404 | 405 | 410 | 414 | 451 | 501)
}

/// How a storable response is to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorePlan {
    /// How long from now it stays fresh (0 = stale at once: reuse needs revalidation).
    pub fresh_ms: u64,
    /// Its corrected initial age (RFC 9111 §4.2.3), for the `Age` header.
    pub initial_age_ms: u64,
    /// How long past freshness it is kept (stale serving windows, or for revalidation with its validators).
    pub keep_stale_ms: u64,
    /// Request headers it varies on.
    pub vary: Vec<String>,
}

/// How long a stale response may still be used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaleAllowance {
    pub while_revalidate: Duration,
    pub if_error: Duration,
}

/// Why a response is not stored (reported in logs and the `BYPASS` metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotStored {
    #[error("the request method is not GET")]
    Method,
    #[error("the status cannot be stored")]
    Status,
    #[error("no-store")]
    NoStore,
    #[error("the request said no-store")]
    NoStoreRequest,
    #[error("private")]
    Private,
    #[error("the request carried Authorization")]
    Authorization,
    #[error("the response sets a cookie")]
    SetCookie,
    #[error("Vary: *")]
    VaryStar,
    #[error("no freshness information and no validator")]
    NoFreshness,
}

impl NotStored {
    /// The `Cache-Status` detail that reports it.
    pub fn detail(self) -> &'static str {
        match self {
            NotStored::Method => "method",
            NotStored::Status => "status",
            NotStored::NoStore => "no-store",
            NotStored::NoStoreRequest => "request-no-store",
            NotStored::Private => "private",
            NotStored::Authorization => "authorization",
            NotStored::SetCookie => "set-cookie",
            NotStored::VaryStar => "vary-star",
            NotStored::NoFreshness => "no-explicit-freshness",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    use super::test_headers as map;

    fn store(response: &[(&'static str, &'static str)]) -> Result<StorePlan, NotStored> {
        Rules::default().storage(&Method::GET, &HeaderMap::new(), StatusCode::OK, &map(response), NOW, NOW)
    }

    #[test]
    fn explicit_freshness_is_stored_and_prohibitions_are_respected() {
        assert_eq!(store(&[("cache-control", "max-age=60")]).map(|p| p.fresh_ms), Ok(60_000));
        assert_eq!(store(&[("cache-control", "max-age=60, no-store")]), Err(NotStored::NoStore));
        assert_eq!(store(&[("cache-control", "max-age=60, private")]), Err(NotStored::Private));
        assert_eq!(store(&[("cache-control", "max-age=60"), ("set-cookie", "a=b")]), Err(NotStored::SetCookie));
        assert_eq!(store(&[("cache-control", "max-age=60"), ("vary", "*")]), Err(NotStored::VaryStar));
        assert_eq!(store(&[]), Err(NotStored::NoFreshness));
    }

    #[test]
    fn cdn_cache_control_overrides_cache_control_and_invalid_ones_are_ignored() {
        assert_eq!(
            store(&[("cdn-cache-control", "max-age=100"), ("cache-control", "no-store")]).map(|p| p.fresh_ms),
            Ok(100_000)
        );
        assert_eq!(
            store(&[("cdn-cache-control", "max-age=\"100\""), ("cache-control", "no-store")]),
            Err(NotStored::NoStore)
        );
        assert_eq!(
            store(&[("cdn-cache-control", "no-store"), ("cache-control", "max-age=60")]),
            Err(NotStored::NoStore)
        );
    }

    #[test]
    fn no_cache_responses_are_kept_for_revalidation_only() {
        let plan = store(&[("cache-control", "max-age=60, no-cache"), ("etag", "\"x\"")]).expect("stored");
        assert_eq!(plan.fresh_ms, 0);
        assert!(plan.keep_stale_ms > 0);
    }

    #[test]
    fn authorization_needs_explicit_permission() {
        let auth = map(&[("authorization", "Basic x")]);
        let rules = Rules::default();
        let with = |cc: &'static str| {
            rules.storage(&Method::GET, &auth, StatusCode::OK, &map(&[("cache-control", cc)]), NOW, NOW)
        };
        assert_eq!(with("max-age=60"), Err(NotStored::Authorization));
        assert!(with("max-age=60, public").is_ok());
        assert!(with("s-maxage=60").is_ok());
    }

    #[test]
    fn must_understand_overrides_no_store_only_for_known_statuses() {
        let rules = Rules::default();
        let h = map(&[("cache-control", "max-age=60, no-store, must-understand")]);
        assert!(rules.storage(&Method::GET, &HeaderMap::new(), StatusCode::OK, &h, NOW, NOW).is_ok());
        let unknown = StatusCode::from_u16(599).expect("status");
        assert_eq!(rules.storage(&Method::GET, &HeaderMap::new(), unknown, &h, NOW, NOW), Err(NotStored::Status));
    }

    #[test]
    fn stale_serving_is_closed_by_revalidation_directives() {
        let rules = Rules { default_stale_if_error: Duration::from_secs(60), ..Rules::default() };
        let allowance = |cc: &'static str| rules.stale_allowance_of(&map(&[("cache-control", cc)]));
        assert_eq!(allowance("max-age=1, stale-while-revalidate=30").while_revalidate, Duration::from_secs(30));
        assert_eq!(allowance("max-age=1").if_error, Duration::from_secs(60));
        for closed in ["max-age=1, must-revalidate", "max-age=1, proxy-revalidate", "max-age=1, no-cache", "s-maxage=1"]
        {
            assert_eq!(allowance(closed), StaleAllowance::default(), "{closed}");
        }
    }
}
