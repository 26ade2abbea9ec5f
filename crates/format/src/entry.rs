//! Whole entries: header + payload. Encoding serializes straight after the header, then applies the compression
//! rule (compress only at or above the threshold, keep only if smaller); decoding parses the header without touching
//! the payload and decompresses only when asked.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec_ids::{Compressor, Kind, Serializer};
use crate::compress::{self, DEFAULT_MAX_SIZE};
use crate::error::{DecodeError, EncodeError, ErrorKind};
use crate::header::{header_len, write_header, EntryMeta, Header};
use crate::serialize;

/// Default compression threshold: payloads shorter than this are stored uncompressed.
pub const DEFAULT_COMPRESS_THRESHOLD: usize = 1024;

/// How values are turned into entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    pub serializer: Serializer,
    pub compressor: Compressor,
    /// Payloads shorter than this many bytes are not compressed.
    pub compress_threshold: usize,
    /// Compression level; `None` = the codec's default.
    pub level: Option<i32>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            serializer: Serializer::MsgPack,
            compressor: Compressor::Lz4,
            compress_threshold: DEFAULT_COMPRESS_THRESHOLD,
            level: None,
        }
    }
}

/// Limits applied while decoding untrusted entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The most bytes a payload may decompress to.
    pub max_size: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits { max_size: DEFAULT_MAX_SIZE }
    }
}

/// Encodes `value` with `options.serializer` into a complete entry.
pub fn encode_value<T: Serialize + ?Sized>(
    value: &T,
    meta: &EntryMeta,
    options: &EncodeOptions,
) -> Result<Vec<u8>, EncodeError> {
    encode_with(Kind::Value, options.serializer, meta, options, 64, |out| {
        serialize::serialize_into(options.serializer, value, out)
    })
}

/// Builds an entry from a payload that is already serialized with `serializer` (raw bytes, text, a MessagePack
/// document made elsewhere).
pub fn encode_serialized(
    kind: Kind,
    serializer: Serializer,
    payload: &[u8],
    meta: &EntryMeta,
    options: &EncodeOptions,
) -> Result<Vec<u8>, EncodeError> {
    if kind == Kind::Response && serializer != Serializer::MsgPack {
        return Err(EncodeError::Invalid("an HTTP response entry must use the msgpack serializer".into()));
    }
    encode_with(kind, serializer, meta, options, payload.len(), |out| {
        out.extend_from_slice(payload);
        Ok(())
    })
}

/// Writes the header, lets `write_payload` append the serialized payload, then compresses when that pays.
pub(crate) fn encode_with(
    kind: Kind,
    serializer: Serializer,
    meta: &EntryMeta,
    options: &EncodeOptions,
    size_hint: usize,
    write_payload: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(header_len(meta) + size_hint);
    let compressor_at = write_header(&mut out, kind, serializer, Compressor::None, meta)?;
    let payload_at = out.len();
    write_payload(&mut out)?;
    let payload_len = out.len() - payload_at;
    if options.compressor != Compressor::None && payload_len >= options.compress_threshold {
        // Compress into a second buffer that starts with a copy of the header; keep whichever is shorter.
        let mut compressed = Vec::with_capacity(payload_at + payload_len / 2);
        compressed.extend_from_slice(&out[..payload_at]);
        compress::compress_into(options.compressor, options.level, &out[payload_at..], &mut compressed)?;
        if compressed.len() < out.len() {
            compressed[compressor_at] = options.compressor.id();
            return Ok(compressed);
        }
    }
    Ok(out)
}

/// A parsed entry: its header, and its payload still in stored (possibly compressed) form.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub header: Header<'a>,
    stored_payload: &'a [u8],
    /// Offset of the payload within the entry bytes.
    payload_offset: usize,
}

impl<'a> Entry<'a> {
    /// Parses the header only; the payload is neither decompressed nor deserialized.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let (header, payload_offset) = Header::parse(bytes)?;
        Ok(Entry { header, stored_payload: &bytes[payload_offset..], payload_offset })
    }

    /// The payload as stored (compressed if the header says so).
    pub fn stored_payload(&self) -> &'a [u8] {
        self.stored_payload
    }

    /// Where the payload starts in the entry bytes.
    pub fn payload_offset(&self) -> usize {
        self.payload_offset
    }

    /// The decompressed payload; borrowed when the entry is not compressed.
    pub fn payload(&self, limits: &DecodeLimits) -> Result<Cow<'a, [u8]>, DecodeError> {
        if self.header.compressor == Compressor::None {
            if self.stored_payload.len() > limits.max_size {
                return Err(DecodeError::new(
                    ErrorKind::TooLarge,
                    format!(
                        "payload of {} bytes exceeds the {}-byte limit",
                        self.stored_payload.len(),
                        limits.max_size
                    ),
                ));
            }
            return Ok(Cow::Borrowed(self.stored_payload));
        }
        compress::decompress(self.header.compressor, self.stored_payload, limits.max_size).map(Cow::Owned)
    }

    /// Decompresses and deserializes the value.
    pub fn value<T: DeserializeOwned>(&self, limits: &DecodeLimits) -> Result<T, DecodeError> {
        if self.header.kind != Kind::Value {
            return Err(DecodeError::new(ErrorKind::BadValue, "entry holds an HTTP response, not a value"));
        }
        let payload = self.payload(limits)?;
        serialize::deserialize(self.header.serializer, &payload)
    }
}

/// Decodes a value entry in one call: its metadata and its value.
pub fn decode_value<T: DeserializeOwned>(bytes: &[u8], limits: &DecodeLimits) -> Result<(EntryMeta, T), DecodeError> {
    let entry = Entry::parse(bytes)?;
    let value = entry.value(limits)?;
    Ok((entry.header.meta(), value))
}
