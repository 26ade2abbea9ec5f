//! Byte sizes as people write them, the same in flags, environment variables and the TOML file: `1048576`,
//! `512K`, `256M`, `1.5G`, `2GiB`, `512kb` (binary multiples; case and a trailing `B`/`iB` do not matter). A TOML
//! file may also give a plain integer.

use serde::de::{self, Deserializer, Visitor};

/// Parses a size; negative, fractional-byte-free garbage and overflowing sizes are errors that say why.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err(format!("{text:?}: a size cannot be negative"));
    }
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(split);
    let shift = match suffix.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0u32,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        other => return Err(format!("{text:?}: unknown size suffix {other:?} (use K, M, G or T)")),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let valid_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !valid_digits(whole) || !valid_digits(fraction) {
        return Err(format!("{text:?} is not a size (examples: 1048576, 512K, 256M, 1.5G)"));
    }
    let too_large = || format!("{text:?} is too large");
    let multiplier = 1u128 << shift;
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| too_large())? };
    let mut bytes = whole.checked_mul(multiplier).ok_or_else(too_large)?;
    if !fraction.is_empty() {
        let digits = fraction.len().min(18);
        let numerator: u128 = fraction[..digits].parse().map_err(|_| too_large())?;
        bytes += numerator * multiplier / 10u128.pow(digits as u32);
    }
    u64::try_from(bytes).map_err(|_| too_large())
}

/// A size that must fit the platform's `usize`.
pub fn parse_usize(text: &str) -> Result<usize, String> {
    parse_size(text).and_then(|n| usize::try_from(n).map_err(|_| format!("{text:?} is too large for this machine")))
}

/// serde: a size given as an integer or a string.
pub fn deserialize_usize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
    deserializer.deserialize_any(SizeVisitor).and_then(|n| usize::try_from(n).map_err(de::Error::custom))
}

/// serde: as [`deserialize_usize`], for 64-bit fields.
pub fn deserialize_u64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(SizeVisitor)
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a size in bytes: an integer, or a string such as \"512M\" or \"1.5G\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("{v}: a size cannot be negative")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        Err(E::custom(format!("{v}: give a fractional size as a string with a unit, such as \"1.5G\"")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse_size(v).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_decimals() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("512kb"), Ok(512 << 10));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size(".5K"), Ok(512));
        assert_eq!(parse_size(" 64 M "), Ok(64 << 20));
        for bad in ["12X", "M", "", "1.2.3G", "-1", "-5M", "1e6", "99999999999999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("-5M").is_err_and(|e| e.contains("negative")));
    }

    #[test]
    fn toml_takes_integers_and_strings() {
        #[derive(serde::Deserialize)]
        struct S {
            #[serde(deserialize_with = "deserialize_usize")]
            size: usize,
        }
        let read = |text: &str| toml::from_str::<S>(text).map(|s| s.size).map_err(|e| e.to_string());
        assert_eq!(read("size = 1024"), Ok(1024));
        assert_eq!(read("size = \"1.5G\""), Ok(3 << 29));
        assert!(read("size = -1").is_err_and(|e| e.contains("negative")));
        assert!(read("size = 1.5").is_err());
    }
}
