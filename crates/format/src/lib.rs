//! larder's entry format: the bytes every larder component and client library agree on (spec/FORMAT.md).
//!
//! An entry is a small header (kind, serializer, compressor, created-at, expires-at, stale window, version, tags)
//! followed by a payload. The header is readable without decompressing anything; the payload is a serialized value
//! or an HTTP response, compressed when that pays. This crate does no I/O.
//!
//! ```
//! use larder_format::{decode_value, encode_value, DecodeLimits, EncodeOptions, EntryMeta};
//!
//! let meta = EntryMeta::with_ttl(1_700_000_000_000, 60_000);
//! let bytes = encode_value(&vec!["a", "b"], &meta, &EncodeOptions::default()).unwrap();
//! let (meta, value): (EntryMeta, Vec<String>) = decode_value(&bytes, &DecodeLimits::default()).unwrap();
//! assert_eq!(value, ["a", "b"]);
//! assert_eq!(meta.expires_at, 1_700_000_060_000);
//! ```

mod codec_ids;
pub mod compress;
mod entry;
mod error;
mod header;
pub mod json;
pub mod key;
pub mod msgpack_walk;
mod response;
mod serialize;

pub use codec_ids::{Compressor, Kind, Serializer};
pub use entry::{
    decode_value, encode_serialized, encode_value, DecodeLimits, EncodeOptions, Entry, DEFAULT_COMPRESS_THRESHOLD,
};
pub use error::{DecodeError, EncodeError, ErrorKind};
pub use header::{
    hard_expiry, peek_expires_at, EntryMeta, Header, EXPIRES_AT_OFFSET, FIXED_HEADER_LEN, FORMAT_VERSION, MAGIC,
};
pub use response::{decode_response, encode_response, ContentEncoding, HttpResponse};
pub use serialize::{deserialize, serialize_into};

/// Milliseconds since the Unix epoch, from the system clock.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
