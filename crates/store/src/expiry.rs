//! When a stored value stops being servable, the same rule in every backend (spec/STORES.md §2): the earlier of the
//! store-side TTL a caller passes and the entry's own hard expiry (`expires_at + stale_ms`, FORMAT.md §1). Remote
//! stores turn it into their native expiry (memcached exptime, Redis PXAT, an SQL column, a file's header), so an
//! entry written with no TTL, as the proxy writes them, still leaves the store when it can no longer be served.

use std::time::Duration;

/// The entry's hard expiry in ms, if `value` is an entry that expires.
pub fn entry_hard_expiry(value: &[u8]) -> Option<u64> {
    larder_format::Header::parse(value).ok().and_then(|(header, _)| header.hard_expiry())
}

/// The moment (ms since the epoch) past which `value` must not be returned, `None` = never.
pub fn expires_at_ms(value: &[u8], ttl: Option<Duration>, now_ms: u64) -> Option<u64> {
    let from_ttl = ttl.map(|t| now_ms.saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX)));
    match (from_ttl, entry_hard_expiry(value)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (one, other) => one.or(other),
    }
}

/// memcached's exptime for an absolute expiry (protocol.txt): 0 = never; up to 30 days a relative number of
/// seconds, beyond that a Unix time. Rounded up, so an entry never leaves before it should; an expiry already
/// past is `-1` (memcached treats a negative exptime as immediately expired).
pub fn memcached_exptime(expires_at_ms: Option<u64>, now_ms: u64) -> i64 {
    const THIRTY_DAYS_SECS: u64 = 30 * 24 * 3600;
    let Some(at) = expires_at_ms else { return 0 };
    if at <= now_ms {
        return -1;
    }
    let relative = (at - now_ms).div_ceil(1000);
    if relative <= THIRTY_DAYS_SECS {
        relative as i64
    } else {
        i64::try_from(at.div_ceil(1000)).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use larder_format::{encode_value, EncodeOptions, EntryMeta};

    fn entry(expires_at: u64, stale_ms: u64) -> Vec<u8> {
        let meta = EntryMeta { created_at: 1, expires_at, stale_ms, ..EntryMeta::default() };
        encode_value(&(), &meta, &EncodeOptions::default()).unwrap_or_default()
    }

    #[test]
    fn the_earlier_of_ttl_and_hard_expiry() {
        let now = 1_000_000;
        assert_eq!(expires_at_ms(&entry(now + 5_000, 2_000), None, now), Some(now + 7_000));
        assert_eq!(expires_at_ms(&entry(now + 5_000, 0), Some(Duration::from_secs(1)), now), Some(now + 1_000));
        assert_eq!(expires_at_ms(&entry(0, 0), None, now), None);
        assert_eq!(expires_at_ms(b"not an entry", Some(Duration::from_secs(2)), now), Some(now + 2_000));
        assert_eq!(expires_at_ms(b"not an entry", None, now), None);
    }

    #[test]
    fn memcached_relative_up_to_thirty_days_then_absolute() {
        let now = 1_700_000_000_000;
        assert_eq!(memcached_exptime(None, now), 0);
        assert_eq!(memcached_exptime(Some(now + 1), now), 1);
        assert_eq!(memcached_exptime(Some(now + 30 * 86_400_000), now), 30 * 86_400);
        assert_eq!(memcached_exptime(Some(now + 30 * 86_400_000 + 1000), now), 1_700_000_000 + 30 * 86_400 + 1);
        assert_eq!(memcached_exptime(Some(now), now), -1);
    }
}
