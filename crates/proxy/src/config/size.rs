//! Byte sizes in flags, environment variables and the TOML file, parsed by larder-store's one size parser (the same
//! syntax as store URLs: `1048576`, `512K`, `256M`, `1.5G`, `2GiB`). A TOML file may also give a plain integer.

use serde::de::{self, Deserializer, Visitor};

pub use larder_store::{parse_size, parse_usize};

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
