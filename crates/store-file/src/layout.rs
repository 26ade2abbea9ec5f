//! What is in a key's file (`<root>/<h0h1>/<h2h3>/<h>` with `h` the SHA-256 of the stored key, store.rs):
//! `"LDR1"`, the expiry (u64 LE ms, 0 = never), the key length (u16 LE), the key, then the value.

pub const MAGIC: &[u8; 4] = b"LDR1";
pub const HEADER_LEN: usize = 4 + 8 + 2;

/// The file's bytes for `key` and `value`.
pub fn encode(key: &str, value: &[u8], expires_at: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + key.len() + value.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&expires_at.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(value);
    out
}

/// A file's parts: (expires_at, key, value offset); `None` when it is not a well-formed larder file.
pub fn decode(file: &[u8]) -> Option<(u64, &str, usize)> {
    if file.len() < HEADER_LEN || &file[..4] != MAGIC {
        return None;
    }
    let expires_at = u64::from_le_bytes(file[4..12].try_into().ok()?);
    let key_len = usize::from(u16::from_le_bytes([file[12], file[13]]));
    let key = std::str::from_utf8(file.get(HEADER_LEN..HEADER_LEN + key_len)?).ok()?;
    Some((expires_at, key, HEADER_LEN + key_len))
}

/// Whether a file's expiry has passed.
pub fn expired(expires_at: u64, now: u64) -> bool {
    expires_at != 0 && expires_at <= now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let bytes = encode("k", b"value", 42);
        assert_eq!(decode(&bytes), Some((42, "k", HEADER_LEN + 1)));
        assert_eq!(&bytes[HEADER_LEN + 1..], b"value");
        assert_eq!(decode(b"LDR1"), None);
        assert_eq!(decode(b"XXXX00000000\x01\x00k"), None);
        let mut short = encode("key", b"", 0);
        short.truncate(HEADER_LEN + 1);
        assert_eq!(decode(&short), None, "a key cut short");
    }
}
