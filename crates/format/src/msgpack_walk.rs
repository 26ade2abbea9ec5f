//! Measures one MessagePack object without decoding it: no allocation and no recursion (a count of values still
//! to visit stands in for the stack, and since every value takes at least one byte that count can never exceed
//! the input). Used to refuse trailing bytes before deserializing, to skip reserved response elements, and to find
//! the ext types a value holds (the admin API refuses pickle and Marshal values, spec/FORMAT.md §2).

use rmp::Marker;

/// The length in bytes of the MessagePack object at the start of `bytes`, or why it is not a whole object.
pub fn object_len(bytes: &[u8]) -> Result<usize, String> {
    walk(bytes, |_| {})
}

/// Whether the MessagePack object at the start of `bytes` holds an ext value of one of `types`, at any depth.
pub fn holds_ext(bytes: &[u8], types: &[i8]) -> Result<bool, String> {
    let mut found = false;
    walk(bytes, |ext_type| found |= types.contains(&ext_type))?;
    Ok(found)
}

/// Walks one object, calling `on_ext` with the type of every ext value in it; its length.
fn walk(bytes: &[u8], mut on_ext: impl FnMut(i8)) -> Result<usize, String> {
    let mut pos = 0usize;
    let mut pending: u64 = 1;
    let be = |pos: &mut usize, width: usize| -> Result<u64, String> {
        let end = pos.checked_add(width).filter(|&e| e <= bytes.len()).ok_or("payload ends early")?;
        let value = bytes[*pos..end].iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        *pos = end;
        Ok(value)
    };
    while pending > 0 {
        if pending > (bytes.len() - pos) as u64 {
            return Err("payload ends early".into());
        }
        pending -= 1;
        let marker = Marker::from_u8(bytes[pos]);
        pos += 1;
        let skip = match marker {
            Marker::FixPos(_) | Marker::FixNeg(_) | Marker::Null | Marker::True | Marker::False => 0,
            Marker::U8 | Marker::I8 => 1,
            Marker::U16 | Marker::I16 => 2,
            Marker::U32 | Marker::I32 | Marker::F32 => 4,
            Marker::U64 | Marker::I64 | Marker::F64 => 8,
            Marker::FixStr(n) => u64::from(n),
            Marker::Str8 | Marker::Bin8 => be(&mut pos, 1)?,
            Marker::Str16 | Marker::Bin16 => be(&mut pos, 2)?,
            Marker::Str32 | Marker::Bin32 => be(&mut pos, 4)?,
            Marker::FixArray(n) => {
                pending += u64::from(n);
                0
            }
            Marker::Array16 => {
                pending += be(&mut pos, 2)?;
                0
            }
            Marker::Array32 => {
                pending += be(&mut pos, 4)?;
                0
            }
            Marker::FixMap(n) => {
                pending += 2 * u64::from(n);
                0
            }
            Marker::Map16 => {
                pending += 2 * be(&mut pos, 2)?;
                0
            }
            Marker::Map32 => {
                pending += 2 * be(&mut pos, 4)?;
                0
            }
            Marker::FixExt1 => 2,
            Marker::FixExt2 => 3,
            Marker::FixExt4 => 5,
            Marker::FixExt8 => 9,
            Marker::FixExt16 => 17,
            Marker::Ext8 => 1 + be(&mut pos, 1)?,
            Marker::Ext16 => 1 + be(&mut pos, 2)?,
            Marker::Ext32 => 1 + be(&mut pos, 4)?,
            Marker::Reserved => return Err("reserved marker 0xc1".into()),
        };
        if matches!(
            marker,
            Marker::FixExt1
                | Marker::FixExt2
                | Marker::FixExt4
                | Marker::FixExt8
                | Marker::FixExt16
                | Marker::Ext8
                | Marker::Ext16
                | Marker::Ext32
        ) {
            // The type byte comes first in what is skipped.
            if let Some(ext_type) = bytes.get(pos) {
                on_ext(*ext_type as i8);
            }
        }
        let end = usize::try_from(skip)
            .ok()
            .and_then(|s| pos.checked_add(s))
            .filter(|&e| e <= bytes.len())
            .ok_or("payload ends early")?;
        pos = end;
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::{holds_ext, object_len};

    #[test]
    fn finds_ext_types_at_any_depth() {
        // [1, {"k": ext8(len 2, type 80)}]
        let nested = [0x92, 0x01, 0x81, 0xa1, b'k', 0xc7, 0x02, 80, 0xaa, 0xbb];
        assert_eq!(holds_ext(&nested, &[80, 101]), Ok(true));
        assert_eq!(holds_ext(&nested, &[101]), Ok(false));
        // fixext1 of type 101; a bin whose bytes look like an ext is not one
        assert_eq!(holds_ext(&[0xd4, 101, 0x00], &[101]), Ok(true));
        assert_eq!(holds_ext(&[0xc4, 0x03, 0xd4, 101, 0x00], &[101]), Ok(false));
        assert!(holds_ext(&[0xc7, 0x05, 80], &[80]).is_err(), "truncated");
    }

    #[test]
    fn measures_nested_objects_and_stops_at_their_end() {
        // {"a": [1, "xy", {}], "b": nil} followed by two stray bytes
        let bytes = [0x82, 0xa1, b'a', 0x93, 0x01, 0xa2, b'x', b'y', 0x80, 0xa1, b'b', 0xc0, 0x01, 0x02];
        assert_eq!(object_len(&bytes), Ok(12));
    }

    #[test]
    fn refuses_truncation_and_oversized_claims() {
        assert!(object_len(&[0xa5, b'a']).is_err());
        assert!(object_len(&[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(object_len(&[0xc1]).is_err());
        assert!(object_len(&[]).is_err());
    }
}
