//! JSON documents to canonical MessagePack (spec/FORMAT.md §2): the bytes every language must produce for the same
//! JSON document. Numbers are read from their text (this workspace builds serde_json with `arbitrary_precision`),
//! so `1.0` stays a float, `-0` is the integer 0, and integers beyond 64 bits are refused instead of rounded.
//!
//! Do not feed a `serde_json::Value` to `rmp_serde` directly: with `arbitrary_precision` its numbers serialize as
//! a private struct. This module is the way to write JSON as MessagePack.

use serde_json::{Number, Value};

use crate::error::EncodeError;

/// Arrays and maps may nest this deep in a value (spec/FORMAT.md §2); deeper documents are refused.
pub const MAX_NESTING: usize = 100;

/// Appends the canonical MessagePack form of `value` to `out`.
pub fn msgpack_from_json(value: &Value, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    check_nesting(value)?;
    write_value(value, out)
}

/// Refuses documents nested deeper than [`MAX_NESTING`] containers.
pub fn check_nesting(value: &Value) -> Result<(), EncodeError> {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if level >= MAX_NESTING {
            return Err(EncodeError::Invalid(format!("value nested more than {MAX_NESTING} levels deep")));
        }
        stack.extend(children.map(|child| (child, level + 1)));
    }
    Ok(())
}

fn write_value(value: &Value, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let io = |e: rmp::encode::ValueWriteError| EncodeError::Serialize(e.to_string());
    match value {
        Value::Null => rmp::encode::write_nil(out).map_err(|e| EncodeError::Serialize(e.to_string()))?,
        Value::Bool(b) => rmp::encode::write_bool(out, *b).map_err(|e| EncodeError::Serialize(e.to_string()))?,
        Value::Number(n) => write_number(n, out)?,
        Value::String(s) => rmp::encode::write_str(out, s).map_err(io)?,
        Value::Array(items) => {
            rmp::encode::write_array_len(out, len_u32(items.len())?).map_err(io)?;
            for item in items {
                write_value(item, out)?;
            }
        }
        Value::Object(map) => {
            rmp::encode::write_map_len(out, len_u32(map.len())?).map_err(io)?;
            for (key, item) in map {
                rmp::encode::write_str(out, key).map_err(io)?;
                write_value(item, out)?;
            }
        }
    }
    Ok(())
}

/// Whether a JSON number's text denotes an integer (no fraction, no exponent).
pub fn is_integer_text(text: &str) -> bool {
    !text.contains(['.', 'e', 'E'])
}

fn write_number(n: &Number, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let io = |e: rmp::encode::ValueWriteError| EncodeError::Serialize(e.to_string());
    let text = n.as_str();
    if !is_integer_text(text) {
        let float: f64 = text.parse().map_err(|_| EncodeError::Invalid(format!("bad number {text}")))?;
        rmp::encode::write_f64(out, float).map_err(io)?;
    } else if let Ok(unsigned) = text.parse::<u64>() {
        rmp::encode::write_uint(out, unsigned).map_err(io)?;
    } else if let Ok(signed) = text.parse::<i64>() {
        // `-0` parses here as 0 and takes the unsigned form, as in every other language.
        if signed >= 0 {
            rmp::encode::write_uint(out, signed as u64).map_err(io)?;
        } else {
            rmp::encode::write_sint(out, signed).map_err(io)?;
        }
    } else {
        return Err(EncodeError::Invalid(format!("integer {text} is outside the MessagePack range [-2^63, 2^64-1]")));
    }
    Ok(())
}

fn len_u32(len: usize) -> Result<u32, EncodeError> {
    u32::try_from(len).map_err(|_| EncodeError::Invalid(format!("collection of {len} items is too long")))
}
