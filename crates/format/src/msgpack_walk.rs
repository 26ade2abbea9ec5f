//! Measures one MessagePack object without decoding it: no allocation and no recursion (a count of values still
//! to visit stands in for the stack, and since every value takes at least one byte that count can never exceed
//! the input). Used to refuse trailing bytes before deserializing, and to skip reserved response elements.

use rmp::Marker;

/// The length in bytes of the MessagePack object at the start of `bytes`, or why it is not a whole object.
pub fn object_len(bytes: &[u8]) -> Result<usize, String> {
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
    use super::object_len;

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
