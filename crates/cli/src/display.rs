//! "Display JSON" (spec/CLI.md): how `inspect` writes decoded values, identically in every language, so outputs
//! can be compared byte for byte. Floats are written as Python's `repr` writes them, bytes that are not UTF-8 as
//! `{"$base64":…}`, and maps keep their order and duplicate keys.

use std::borrow::Cow;
use std::fmt::Write as _;

use base64::Engine;
use larder_format::json::JsonNode;
use rmpv::ValueRef;

/// Python's `repr` of a float: shortest round-trip digits, positional for decimal exponents -4..=15, else
/// scientific with a sign and at least two exponent digits.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let (digits, exponent) = shortest_digits(f.abs());
    let mut out = String::new();
    if f < 0.0 {
        out.push('-');
    }
    if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.push_str(&"0".repeat(int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.push_str(&"0".repeat((-exponent - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs());
    }
    out
}

/// The shortest significant digits that read back to `f` (positive, finite), and the decimal exponent of the first.
///
/// Rust's `{:e}` finds how many digits are needed; when two texts of that length both read back, Python picks the
/// one nearer the exact value, ties to even, and so do we: the exact expansion, rounded half-even to that length.
fn shortest_digits(f: f64) -> (String, i32) {
    let split = |sci: &str| -> (String, i32) {
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci, "0"));
        (mantissa.chars().filter(char::is_ascii_digit).collect(), exponent.parse().unwrap_or(0))
    };
    let (shortest, exponent) = split(&format!("{f:e}"));
    let n = shortest.len();
    // 40 more digits than needed: the exact expansion rounded there decides ties correctly for every f64.
    let (exact, exact_exponent) = split(&format!("{:.*e}", n + 40, f));
    if exact_exponent != exponent {
        return (shortest, exponent);
    }
    let (head, tail) = exact.split_at(n);
    let round_up = match tail.as_bytes().first() {
        Some(b'6'..=b'9') => true,
        Some(b'5') => tail[1..].bytes().any(|b| b != b'0') || head.bytes().last().is_some_and(|d| (d - b'0') % 2 == 1),
        _ => false,
    };
    let mut digits: Vec<u8> = head.bytes().collect();
    let mut exponent = exponent;
    if round_up {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                digits.pop();
                exponent += 1;
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let candidate = String::from_utf8(digits).unwrap_or_default();
    let text = format!("{}.{}e{exponent}", &candidate[..1], &candidate[1..]);
    if text.parse::<f64>().ok() == Some(f) {
        (candidate.trim_end_matches('0').to_owned(), exponent)
    } else {
        (shortest, exponent)
    }
}

/// Appends `s` as a JSON string literal.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends bytes: a JSON string when they are UTF-8, else `{"$base64":"…"}`.
pub fn write_bytes(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => write_str(out, text),
        Err(_) => {
            out.push_str("{\"$base64\":\"");
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(bytes));
            out.push_str("\"}");
        }
    }
}

/// Bytes as a display string without quotes (header lines of the human form).
pub fn bytes_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => {
            let mut out = String::new();
            write_bytes(&mut out, bytes);
            out
        }
    }
}

/// On a terminal, `inspect` shows at most this many characters of a line's text (or of a body) unless --full.
pub const CUT_AT: usize = 200;

/// `text` cut to its first `limit` characters (Unicode scalar values, as every language can count them) followed
/// by `… (N more characters)`; unchanged when it is no longer than `limit`.
pub fn cut_text(text: &str, limit: usize) -> Cow<'_, str> {
    match text.char_indices().nth(limit) {
        None => Cow::Borrowed(text),
        Some((end, _)) => {
            let more = text[end..].chars().count();
            let noun = if more == 1 { "character" } else { "characters" };
            Cow::Owned(format!("{}… ({more} more {noun})", &text[..end]))
        }
    }
}

/// Containers may nest this deep in displayed values (spec/CLI.md, FORMAT.md §2).
pub const MAX_DEPTH: usize = larder_format::json::MAX_NESTING;

/// Why a value cannot be displayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayError {
    /// Containers nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// The display would exceed 16 characters per payload byte plus 1 MiB (map keys that are maps double their
    /// escaping at every level, so a few bytes could otherwise print gigabytes).
    TooLarge,
}

/// Bounds for writing one value's display.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    max_chars: usize,
}

impl Limits {
    /// The limits for a value whose payload is `payload_len` bytes.
    pub fn for_payload(payload_len: usize) -> Limits {
        Limits { max_chars: payload_len.saturating_mul(16).saturating_add(1 << 20) }
    }

    /// Aborts early on bytes (at least one per character, at most four), then checks characters exactly.
    fn check_growing(&self, out: &str) -> Result<(), DisplayError> {
        if out.len() > self.max_chars.saturating_mul(4) {
            return Err(DisplayError::TooLarge);
        }
        Ok(())
    }

    pub fn check_final(&self, out: &str) -> Result<(), DisplayError> {
        if out.len() > self.max_chars && out.chars().count() > self.max_chars {
            return Err(DisplayError::TooLarge);
        }
        Ok(())
    }
}

/// Appends a decoded MessagePack value; `level` is the number of containers around it.
pub fn write_msgpack(
    out: &mut String,
    value: &ValueRef<'_>,
    level: usize,
    limits: &Limits,
) -> Result<(), DisplayError> {
    match value {
        ValueRef::Nil => out.push_str("null"),
        ValueRef::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        ValueRef::Integer(i) => {
            let _ = write!(out, "{i}");
        }
        ValueRef::F32(f) => out.push_str(&float_repr(f64::from(*f))),
        ValueRef::F64(f) => out.push_str(&float_repr(*f)),
        ValueRef::String(s) => write_bytes(out, s.as_bytes()),
        ValueRef::Binary(b) => write_bytes(out, b),
        ValueRef::Array(items) => {
            enter(level)?;
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_msgpack(out, item, level + 1, limits)?;
            }
            out.push(']');
        }
        ValueRef::Map(pairs) => {
            enter(level)?;
            out.push('{');
            for (i, (key, item)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match key {
                    ValueRef::String(s) if s.as_str().is_some() => write_str(out, s.as_str().unwrap_or_default()),
                    ValueRef::Binary(b) if std::str::from_utf8(b).is_ok() => write_bytes(out, b),
                    other => {
                        let mut text = String::new();
                        write_msgpack(&mut text, other, level + 1, limits)?;
                        write_str(out, &text);
                    }
                }
                out.push(':');
                write_msgpack(out, item, level + 1, limits)?;
            }
            out.push('}');
        }
        ValueRef::Ext(kind, data) => {
            let _ = write!(out, "{{\"$ext\":{kind},\"$base64\":");
            out.push('"');
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(data));
            out.push_str("\"}");
        }
    }
    limits.check_growing(out)
}

/// A container opening at `level` (containers around it) must stay within [`MAX_DEPTH`].
fn enter(level: usize) -> Result<(), DisplayError> {
    if level >= MAX_DEPTH {
        Err(DisplayError::TooDeep)
    } else {
        Ok(())
    }
}

/// Appends a JSON value read from a json-serialized payload (duplicate keys and number texts as written);
/// `level` as for [`write_msgpack`].
pub fn write_json(out: &mut String, value: &JsonNode, level: usize, limits: &Limits) -> Result<(), DisplayError> {
    match value {
        JsonNode::Null => out.push_str("null"),
        JsonNode::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        JsonNode::Number(text) => {
            if larder_format::json::is_integer_text(text) {
                // JSON forbids leading zeros, so only `-0` needs normalising.
                out.push_str(if text == "-0" { "0" } else { text });
            } else {
                out.push_str(&float_repr(text.parse().unwrap_or(f64::NAN)));
            }
        }
        JsonNode::String(s) => write_str(out, s),
        JsonNode::Array(items) => {
            enter(level)?;
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item, level + 1, limits)?;
            }
            out.push(']');
        }
        JsonNode::Object(pairs) => {
            enter(level)?;
            out.push('{');
            for (i, (key, item)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, key);
                out.push(':');
                write_json(out, item, level + 1, limits)?;
            }
            out.push('}');
        }
    }
    limits.check_growing(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_arrays(levels: usize) -> Vec<u8> {
        let mut bytes = vec![0x91; levels];
        bytes.push(0x01);
        bytes
    }

    fn display(payload: &[u8]) -> Result<String, DisplayError> {
        let value = rmpv::decode::read_value_ref(&mut &payload[..]).expect("valid msgpack");
        let limits = Limits::for_payload(payload.len());
        let mut out = String::new();
        write_msgpack(&mut out, &value, 0, &limits)?;
        limits.check_final(&out).map(|()| out)
    }

    #[test]
    fn cut_counts_characters_and_names_what_it_left_out() {
        assert_eq!(cut_text("abc", 3), "abc");
        assert_eq!(cut_text("abcd", 3), "abc… (1 more character)");
        assert_eq!(cut_text("ééééé", 2), "éé… (3 more characters)");
        assert_eq!(cut_text("", 0), "");
        assert_eq!(cut_text("🍞x", 0), "… (2 more characters)");
    }

    #[test]
    fn nesting_is_allowed_to_the_limit_and_refused_past_it() {
        assert!(display(&nested_arrays(MAX_DEPTH)).is_ok());
        assert_eq!(display(&nested_arrays(MAX_DEPTH + 1)), Err(DisplayError::TooDeep));
    }

    #[test]
    fn keys_that_are_maps_cannot_blow_up_the_output() {
        // {{{…{1: 2}…}: 2}: 2}: each level escapes the one inside it, doubling the backslashes.
        let mut payload = vec![0x81; 40];
        payload.push(0x01);
        payload.extend(std::iter::repeat_n(0x02, 40));
        assert_eq!(display(&payload), Err(DisplayError::TooLarge));
    }

    /// Expected texts are Python 3's `repr(float)` of each value.
    #[test]
    fn floats_print_as_python_repr() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (123456789.0, "123456789.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e16, "1.2345e+16"),
            (1e20, "1e+20"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (-0.0, "-0.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::from(0.1f32), "0.10000000149011612"),
            ((1u64 << 49) as f64 + 0.25, "562949953421312.2"),
            ((1u64 << 49) as f64 + 0.75, "562949953421312.8"),
            (9.5, "9.5"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(float_repr(*value), *expected, "{value:e}");
        }
    }
}
