//! Counters as every store and language keeps them (spec/STORES.md §3): the ASCII decimal text of a signed 64-bit
//! integer, not an entry, so memcached's `incr` and Redis's `INCRBY` work on them natively.

/// The counter a stored value holds: an optional `-` and 1 to 19 digits, then trailing spaces only (memcached pads
/// a counter whose decrement shortened it in place: "10" less 1 reads back as "9 ").
pub fn parse(value: &[u8]) -> Option<i64> {
    let end = value.iter().rposition(|&b| b != b' ').map_or(0, |last| last + 1);
    let value = &value[..end];
    let digits = value.strip_prefix(b"-").unwrap_or(value);
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// The stored form of a counter.
pub fn format(value: i64) -> String {
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_plain_decimal() {
        assert_eq!(parse(b"42"), Some(42));
        assert_eq!(parse(b"-7"), Some(-7));
        assert_eq!(parse(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse(b"9 "), Some(9), "memcached's padding after a decrement");
        for bad in [&b""[..], b" ", b"-", b"+1", b" 1", b"1 2", b"1\t", b"0x10", b"9223372036854775808", b"1.5"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(format(-12), "-12");
    }
}
