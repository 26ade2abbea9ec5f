//! Byte sizes as people write them, the same in store URLs, flags, environment variables and the TOML file:
//! `1048576`, `512K`, `256M`, `1.5G`, `2GiB`, `512kb` (binary multiples; case and a trailing `B`/`iB` do not
//! matter).

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
