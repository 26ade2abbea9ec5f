//! Durations in flags, environment variables and the TOML file, with the units store URLs take (spec/STORES.md §1:
//! `ms`, `s`, `m`, `h`, parsed by larder-store's one parser), so `--stale-if-error 5m` means five minutes. A bare
//! number keeps the setting's own unit, as before: seconds for `*_secs` settings, milliseconds for `*_ms` ones.

use serde::de::{self, Deserializer, Visitor};

/// A `*_secs` setting: `300`, `300s`, `5m`, `1h`; whole seconds only.
pub fn parse_secs(text: &str) -> Result<u64, String> {
    let duration = larder_store::url::parse_duration(text.trim(), 1_000).ok_or_else(|| invalid(text, "seconds"))?;
    if duration.subsec_nanos() != 0 {
        return Err(format!("{text:?}: give whole seconds (this setting counts seconds)"));
    }
    Ok(duration.as_secs())
}

/// A `*_ms` setting: `250`, `250ms`, `2s`, `1m`.
pub fn parse_ms(text: &str) -> Result<u64, String> {
    let duration = larder_store::url::parse_duration(text.trim(), 1).ok_or_else(|| invalid(text, "milliseconds"))?;
    u64::try_from(duration.as_millis()).map_err(|_| format!("{text:?} is too long"))
}

fn invalid(text: &str, bare: &str) -> String {
    format!("{text:?} is not a duration: a number ({bare}) or a number with one of ms, s, m, h, such as 5m")
}

/// serde: a `*_secs` setting given as an integer or a string with a unit.
pub fn deserialize_secs<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(DurationVisitor { parse: parse_secs })
}

/// serde: a `*_ms` setting given as an integer or a string with a unit.
pub fn deserialize_ms<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(DurationVisitor { parse: parse_ms })
}

struct DurationVisitor {
    parse: fn(&str) -> Result<u64, String>,
}

impl Visitor<'_> for DurationVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a duration: an integer in the setting's unit, or a string such as \"5m\" or \"250ms\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("{v}: a duration cannot be negative")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        (self.parse)(v).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_bare_numbers_keep_the_settings_unit() {
        assert_eq!(parse_secs("300"), Ok(300));
        assert_eq!(parse_secs("5m"), Ok(300));
        assert_eq!(parse_secs("1h"), Ok(3600));
        assert_eq!(parse_secs("2000ms"), Ok(2));
        assert!(parse_secs("1500ms").is_err_and(|e| e.contains("whole seconds")));
        assert_eq!(parse_ms("250"), Ok(250));
        assert_eq!(parse_ms("2s"), Ok(2000));
        for bad in ["5 m", "5min", "-5s", "1.5s", "", "s", "1d"] {
            assert!(parse_secs(bad).is_err() && parse_ms(bad).is_err(), "{bad}");
        }
        assert!(parse_secs("5x").is_err_and(|e| e.contains("ms, s, m, h")));
    }
}
