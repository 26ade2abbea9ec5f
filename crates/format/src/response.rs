//! HTTP response entries (spec/FORMAT.md §4): status, ordered header pairs, body and the coding the body is stored
//! in, as a MessagePack array. Decoding slices header values and body out of the entry without copying when the
//! payload is stored uncompressed, so a proxy serving a hit does not copy the page.

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;

use crate::codec_ids::{Compressor, Kind, Serializer};
use crate::entry::{encode_with, DecodeLimits, EncodeOptions, Entry};
use crate::error::{DecodeError, EncodeError, ErrorKind};
use crate::header::EntryMeta;

/// The content coding a stored body is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentEncoding {
    Identity,
    Gzip,
    Br,
    Zstd,
}

impl ContentEncoding {
    pub const ALL: &'static [ContentEncoding] =
        &[ContentEncoding::Identity, ContentEncoding::Gzip, ContentEncoding::Br, ContentEncoding::Zstd];

    /// The token used in the entry and in `Content-Encoding`.
    pub fn name(self) -> &'static str {
        match self {
            ContentEncoding::Identity => "identity",
            ContentEncoding::Gzip => "gzip",
            ContentEncoding::Br => "br",
            ContentEncoding::Zstd => "zstd",
        }
    }
}

impl fmt::Display for ContentEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ContentEncoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ContentEncoding::ALL
            .iter()
            .copied()
            .find(|e| e.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown content encoding {s:?} (expected identity, gzip, br or zstd)"))
    }
}

/// A stored HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names and values in response order; duplicates allowed.
    pub headers: Vec<(Bytes, Bytes)>,
    /// The body, in `content_encoding`.
    pub body: Bytes,
    pub content_encoding: ContentEncoding,
}

impl HttpResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&Bytes> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v)
    }

    /// Appends the MessagePack payload of this response to `out`.
    pub fn write_payload(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if !(100..=999).contains(&self.status) {
            return Err(EncodeError::Invalid(format!("status {} is outside 100-999", self.status)));
        }
        let header_count = len_u32(self.headers.len(), "header list")?;
        rmp::encode::write_array_len(out, 4).map_err(EncodeError::serialize)?;
        rmp::encode::write_uint(out, u64::from(self.status)).map_err(EncodeError::serialize)?;
        rmp::encode::write_array_len(out, header_count).map_err(EncodeError::serialize)?;
        for (name, value) in &self.headers {
            rmp::encode::write_array_len(out, 2).map_err(EncodeError::serialize)?;
            rmp::encode::write_bin(out, name).map_err(EncodeError::serialize)?;
            rmp::encode::write_bin(out, value).map_err(EncodeError::serialize)?;
        }
        rmp::encode::write_bin(out, &self.body).map_err(EncodeError::serialize)?;
        rmp::encode::write_str(out, self.content_encoding.name()).map_err(EncodeError::serialize)?;
        Ok(())
    }

    /// Parses a response payload. `payload` is the decompressed payload; parts of it are shared, not copied.
    pub fn from_payload(payload: &Bytes) -> Result<HttpResponse, DecodeError> {
        let mut reader = PayloadReader { payload, pos: 0 };
        let elements = reader.array_len("response")?;
        if elements < 4 {
            return Err(bad_value(format!("response array has {elements} elements, needs at least 4")));
        }
        let status = reader.uint("status")?;
        if !(100..=999).contains(&status) {
            return Err(bad_value(format!("status {status} is outside 100-999")));
        }
        let count = reader.array_len("headers")?;
        let mut headers = Vec::with_capacity((count as usize).min(payload.len() / 3));
        for _ in 0..count {
            if reader.array_len("header pair")? != 2 {
                return Err(bad_value("a header must be a [name, value] pair"));
            }
            let name = reader.bytes("header name")?;
            let value = reader.bytes("header value")?;
            headers.push((name, value));
        }
        let body = reader.bin("body")?;
        let encoding = reader.str("content_encoding")?;
        let content_encoding =
            ContentEncoding::ALL.iter().copied().find(|e| e.name().as_bytes() == &encoding[..]).ok_or_else(|| {
                bad_value(format!("unknown content_encoding {:?}", String::from_utf8_lossy(&encoding)))
            })?;
        for _ in 4..elements {
            reader.skip_value()?;
        }
        if reader.pos != payload.len() {
            return Err(bad_value(format!("{} bytes after the response", payload.len() - reader.pos)));
        }
        Ok(HttpResponse { status: status as u16, headers, body, content_encoding })
    }
}

/// Encodes a response as a complete kind-1 entry (serializer msgpack; `options.serializer` is ignored).
pub fn encode_response(
    response: &HttpResponse,
    meta: &EntryMeta,
    options: &EncodeOptions,
) -> Result<Vec<u8>, EncodeError> {
    let hint = response.body.len() + response.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>() + 32;
    encode_with(Kind::Response, Serializer::MsgPack, meta, options, hint, |out| response.write_payload(out))
}

/// Decodes a kind-1 entry. The body and headers share `entry`'s memory when the payload is not compressed.
pub fn decode_response(entry: &Bytes, limits: &DecodeLimits) -> Result<(EntryMeta, HttpResponse), DecodeError> {
    let parsed = Entry::parse(entry)?;
    if parsed.header.kind != Kind::Response {
        return Err(DecodeError::new(ErrorKind::BadValue, "entry holds a value, not an HTTP response"));
    }
    let payload = if parsed.header.compressor == Compressor::None {
        parsed.payload(limits)?;
        entry.slice(parsed.payload_offset()..)
    } else {
        Bytes::from(parsed.payload(limits)?.into_owned())
    };
    let response = HttpResponse::from_payload(&payload)?;
    Ok((parsed.header.meta(), response))
}

fn len_u32(len: usize, what: &str) -> Result<u32, EncodeError> {
    u32::try_from(len).map_err(|_| EncodeError::Invalid(format!("{what} too long: {len}")))
}

fn bad_value(detail: impl Into<String>) -> DecodeError {
    DecodeError::new(ErrorKind::BadValue, detail)
}

/// Walks a MessagePack payload by offset so byte strings can be sliced out of the shared buffer.
struct PayloadReader<'a> {
    payload: &'a Bytes,
    pos: usize,
}

impl PayloadReader<'_> {
    fn rest(&self) -> &[u8] {
        &self.payload[self.pos..]
    }

    fn marker(&mut self, what: &str) -> Result<rmp::Marker, DecodeError> {
        let mut rd = self.rest();
        let marker = rmp::decode::read_marker(&mut rd).map_err(|_| bad_value(format!("{what}: payload ends early")))?;
        self.pos += 1;
        Ok(marker)
    }

    fn be_uint(&mut self, what: &str, width: usize) -> Result<u64, DecodeError> {
        let bytes = self.take(what, width)?;
        Ok(bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }

    fn take(&mut self, what: &str, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.payload.len());
        let end = end.ok_or_else(|| bad_value(format!("{what}: payload ends early")))?;
        let start = self.pos;
        self.pos = end;
        Ok(&self.payload[start..end])
    }

    fn array_len(&mut self, what: &str) -> Result<u32, DecodeError> {
        use rmp::Marker;
        match self.marker(what)? {
            Marker::FixArray(n) => Ok(u32::from(n)),
            Marker::Array16 => Ok(self.be_uint(what, 2)? as u32),
            Marker::Array32 => Ok(self.be_uint(what, 4)? as u32),
            other => Err(bad_value(format!("{what}: expected an array, found {other:?}"))),
        }
    }

    fn uint(&mut self, what: &str) -> Result<u64, DecodeError> {
        let mut rd = self.rest();
        let before = rd.len();
        let value = rmp::decode::read_int::<u64, _>(&mut rd)
            .map_err(|e| bad_value(format!("{what}: expected an unsigned integer ({e})")))?;
        self.pos += before - rd.len();
        Ok(value)
    }

    /// A bin or str (header names and values may be either), shared with the payload buffer.
    fn bytes(&mut self, what: &str) -> Result<Bytes, DecodeError> {
        self.byte_string(what, true, true)
    }

    /// A bin only (the body).
    fn bin(&mut self, what: &str) -> Result<Bytes, DecodeError> {
        self.byte_string(what, true, false)
    }

    /// A str only (content_encoding).
    fn str(&mut self, what: &str) -> Result<Bytes, DecodeError> {
        self.byte_string(what, false, true)
    }

    fn byte_string(&mut self, what: &str, bin: bool, str: bool) -> Result<Bytes, DecodeError> {
        use rmp::Marker;
        let len = match self.marker(what)? {
            Marker::FixStr(n) if str => usize::from(n),
            Marker::Str8 if str => self.be_uint(what, 1)? as usize,
            Marker::Str16 if str => self.be_uint(what, 2)? as usize,
            Marker::Str32 if str => self.be_uint(what, 4)? as usize,
            Marker::Bin8 if bin => self.be_uint(what, 1)? as usize,
            Marker::Bin16 if bin => self.be_uint(what, 2)? as usize,
            Marker::Bin32 if bin => self.be_uint(what, 4)? as usize,
            other => {
                let expected = match (bin, str) {
                    (true, true) => "bin or str",
                    (true, false) => "bin",
                    _ => "str",
                };
                return Err(bad_value(format!("{what}: expected {expected}, found {other:?}")));
            }
        };
        let start = self.pos;
        self.take(what, len)?;
        Ok(self.payload.slice(start..start + len))
    }

    /// Skips one reserved element, of any type.
    fn skip_value(&mut self) -> Result<(), DecodeError> {
        let len =
            crate::msgpack_walk::object_len(self.rest()).map_err(|e| bad_value(format!("reserved element: {e}")))?;
        self.pos += len;
        Ok(())
    }
}
