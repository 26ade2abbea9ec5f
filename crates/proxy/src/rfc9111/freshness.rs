//! How long a response stays fresh and how old it already is (RFC 9111 §4.2): freshness lifetime from s-maxage,
//! max-age, Expires or (when enabled) the Last-Modified heuristic; and the corrected initial age from Age, Date and
//! the time the request took.

use std::time::{Duration, UNIX_EPOCH};

use http::header::{AGE, DATE, EXPIRES, LAST_MODIFIED};
use http::{HeaderMap, StatusCode};

use super::cache_control::{Directives, MAX_DELTA_SECONDS};

/// Statuses a cache may give heuristic freshness (RFC 9110 §15.1).
pub fn heuristically_cacheable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 451 | 501)
}

/// An HTTP-date (IMF-fixdate, or the two obsolete forms RFC 9110 requires recipients to accept) in ms, read at the
/// present time.
pub fn parse_http_date(text: &str) -> Option<u64> {
    parse_http_date_at(text, larder_format::now_ms())
}

/// An HTTP-date read at `now_ms` (a response's time, spec/HTTP.md §1.5): RFC 850's two-digit year is resolved
/// against that year, so a decision about a stored response does not depend on the clock it is replayed on.
pub fn parse_http_date_at(text: &str, now_ms: u64) -> Option<u64> {
    // ms per year of 365.2425 days: 3652425 * 86400 * 1000 / 10000.
    let now_year = 1970 + now_ms as i64 / (365_2425 * 8_640);
    super::date::parse(text, now_year)
}

/// `ms` as an IMF-fixdate.
pub fn format_http_date(ms: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(ms))
}

/// The `Date` header in ms, if present and valid.
pub fn date_ms(headers: &HeaderMap, response_time_ms: u64) -> Option<u64> {
    headers.get(DATE).and_then(|v| v.to_str().ok()).and_then(|v| parse_http_date_at(v, response_time_ms))
}

/// The `Age` header in seconds: the first element of the first line, if it is delta-seconds; otherwise 0 (ignored).
pub fn age_seconds(headers: &HeaderMap) -> u64 {
    let Some(first) = headers.get(AGE).and_then(|v| v.to_str().ok()) else { return 0 };
    let element = first.split(',').next().unwrap_or("").trim();
    super::cache_control::delta_seconds(Some(element)).unwrap_or(0)
}

/// RFC 9111 §4.2.3: how old the response already was when it arrived, in ms.
pub fn corrected_initial_age_ms(headers: &HeaderMap, request_time_ms: u64, response_time_ms: u64) -> u64 {
    let apparent = date_ms(headers, response_time_ms).map_or(0, |date| response_time_ms.saturating_sub(date));
    let delay = response_time_ms.saturating_sub(request_time_ms);
    let corrected_age_value = age_seconds(headers).saturating_mul(1000).saturating_add(delay);
    apparent.max(corrected_age_value)
}

/// Where a freshness lifetime came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifetimeSource {
    SMaxAge,
    MaxAge,
    Expires,
    Heuristic,
}

/// The freshness lifetime in ms for a shared cache, or `None` when the response gives none.
/// `use_expires` is false when a targeted field (CDN-Cache-Control) replaced Cache-Control and Expires.
pub fn lifetime_ms(
    status: StatusCode,
    headers: &HeaderMap,
    directives: &Directives,
    use_expires: bool,
    heuristic_cap: Option<Duration>,
    response_time_ms: u64,
) -> Option<(u64, LifetimeSource)> {
    if let Some(s) = directives.s_maxage {
        return Some((s * 1000, LifetimeSource::SMaxAge));
    }
    if let Some(m) = directives.max_age {
        return Some((m * 1000, LifetimeSource::MaxAge));
    }
    if use_expires {
        let mut lines = headers.get_all(EXPIRES).iter();
        if let Some(first) = lines.next() {
            // Several Expires lines, or one that is not an HTTP-date, mean "already expired".
            let expires = if lines.next().is_some() {
                None
            } else {
                first.to_str().ok().and_then(|v| parse_http_date_at(v, response_time_ms))
            };
            let date = date_ms(headers, response_time_ms).unwrap_or(response_time_ms);
            let lifetime = expires.map_or(0, |e| e.saturating_sub(date)).min(MAX_DELTA_SECONDS * 1000);
            return Some((lifetime, LifetimeSource::Expires));
        }
    }
    let cap = heuristic_cap?;
    if !heuristically_cacheable(status) && !directives.public {
        return None;
    }
    let last_modified = headers
        .get(LAST_MODIFIED)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_http_date_at(v, response_time_ms))?;
    let date = date_ms(headers, response_time_ms).unwrap_or(response_time_ms);
    let lifetime = (date.saturating_sub(last_modified) / 10).min(cap.as_millis() as u64);
    Some((lifetime, LifetimeSource::Heuristic))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    use crate::rfc9111::test_headers as headers;

    const NOW: u64 = 1_700_000_000_000;

    #[test]
    fn age_takes_the_first_element_of_the_first_line_and_ignores_junk() {
        assert_eq!(age_seconds(&headers(&[("age", "7200, 0")])), 7200);
        assert_eq!(age_seconds(&headers(&[("age", "0, 7200")])), 0);
        assert_eq!(age_seconds(&headers(&[("age", "7200"), ("age", "0")])), 7200);
        for junk in ["abc", "-7200", "7200.0", "7200;foo=bar"] {
            assert_eq!(age_seconds(&headers(&[("age", junk)])), 0, "{junk}");
        }
        assert_eq!(age_seconds(&headers(&[("age", "2147483649")])), 1 << 31);
    }

    #[test]
    fn corrected_initial_age_uses_the_larger_of_apparent_and_reported_age() {
        let date = format_http_date(NOW - 10_000);
        let h = headers(&[("date", &date), ("age", "3")]);
        assert_eq!(corrected_initial_age_ms(&h, NOW - 500, NOW), 10_000);
        let h = headers(&[("age", "30")]);
        assert_eq!(corrected_initial_age_ms(&h, NOW - 500, NOW), 30_500);
    }

    #[test]
    fn lifetime_prefers_s_maxage_then_max_age_then_expires() {
        let d = |s: &str| Directives::parse(&[HeaderValue::from_str(s).expect("valid")]);
        let date = format_http_date(NOW);
        let expires = format_http_date(NOW + 100_000);
        let h = headers(&[("date", &date), ("expires", &expires)]);
        let ok = StatusCode::OK;
        assert_eq!(
            lifetime_ms(ok, &h, &d("max-age=60, s-maxage=5"), true, None, NOW),
            Some((5000, LifetimeSource::SMaxAge))
        );
        assert_eq!(lifetime_ms(ok, &h, &d("max-age=60"), true, None, NOW), Some((60_000, LifetimeSource::MaxAge)));
        assert_eq!(lifetime_ms(ok, &h, &d("public"), true, None, NOW), Some((100_000, LifetimeSource::Expires)));
        assert_eq!(
            lifetime_ms(ok, &h, &d("public"), false, None, NOW),
            None,
            "Expires ignored under CDN-Cache-Control"
        );
    }

    #[test]
    fn invalid_or_repeated_expires_means_already_expired() {
        let none = Directives::default();
        for bad in
            ["0", "Thu, 18 Aug 50 02:01:18 GMT", "Thu, 18-Aug-2050 02:01:18 GMT", "Thu, 18 Aug 2050 02:01:18 UTC"]
        {
            let h = headers(&[("expires", bad)]);
            assert_eq!(
                lifetime_ms(StatusCode::OK, &h, &none, true, None, NOW),
                Some((0, LifetimeSource::Expires)),
                "{bad}"
            );
        }
        let h = headers(&[("expires", "Thu, 18 Aug 2050 02:01:18 GMT"), ("expires", "Thu, 18 Aug 2050 02:01:19 GMT")]);
        assert_eq!(lifetime_ms(StatusCode::OK, &h, &none, true, None, NOW).map(|l| l.0), Some(0));
    }

    #[test]
    fn heuristics_apply_only_when_enabled_and_to_cacheable_statuses() {
        let lm = format_http_date(NOW - 1_000_000);
        let date = format_http_date(NOW);
        let h = headers(&[("date", &date), ("last-modified", &lm)]);
        let none = Directives::default();
        let day = Some(Duration::from_secs(86_400));
        assert_eq!(lifetime_ms(StatusCode::OK, &h, &none, true, None, NOW), None);
        assert_eq!(lifetime_ms(StatusCode::OK, &h, &none, true, day, NOW), Some((100_000, LifetimeSource::Heuristic)));
        assert_eq!(lifetime_ms(StatusCode::CREATED, &h, &none, true, day, NOW), None);
    }
}
