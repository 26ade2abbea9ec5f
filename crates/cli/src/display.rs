//! "Display JSON" (spec/CLI.md): how `inspect` writes decoded values, identically in every language, so outputs
//! can be compared byte for byte. Floats are written as Python's `repr` writes them, bytes that are not UTF-8 as
//! `{"$base64":…}`, and maps keep their order and duplicate keys.

use std::fmt::Write as _;

use base64::Engine;
use rmpv::ValueRef;
use serde_json::Value;

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
    // Rust's `{:e}` gives the shortest digits that read back to the same float, as `d.ddde±x`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
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

/// Appends a decoded MessagePack value.
pub fn write_msgpack(out: &mut String, value: &ValueRef<'_>) {
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
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_msgpack(out, item);
            }
            out.push(']');
        }
        ValueRef::Map(pairs) => {
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
                        write_msgpack(&mut text, other);
                        write_str(out, &text);
                    }
                }
                out.push(':');
                write_msgpack(out, item);
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
}

/// Appends a JSON value read from a json-serialized payload.
pub fn write_json(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let text = n.as_str();
            if larder_format::json::is_integer_text(text) {
                // JSON forbids leading zeros, so only `-0` needs normalising.
                out.push_str(if text == "-0" { "0" } else { text });
            } else {
                out.push_str(&float_repr(text.parse().unwrap_or(f64::NAN)));
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, key);
                out.push(':');
                write_json(out, item);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::float_repr;

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
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(float_repr(*value), *expected, "{value:e}");
        }
    }
}
