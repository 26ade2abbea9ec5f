//! The entry header (spec/FORMAT.md §1): the fixed 23 bytes and the optional stale window, version and tags.
//! Everything a store or a cache needs to decide about an entry (expiry, version, tags) is read here, without
//! touching the payload.

use crate::codec_ids::{Compressor, Kind, Serializer};
use crate::error::{DecodeError, EncodeError, ErrorKind};

/// The two bytes every entry starts with.
pub const MAGIC: [u8; 2] = [0xC1, 0x4C];
/// The format version this crate reads and writes.
pub const FORMAT_VERSION: u8 = 1;
/// Length of the fixed part of the header.
pub const FIXED_HEADER_LEN: usize = 23;
/// Offset of `expires_at`, for readers that want only the expiry.
pub const EXPIRES_AT_OFFSET: usize = 15;

const FLAG_STALE: u8 = 0x01;
const FLAG_VERSION: u8 = 0x02;
const FLAG_TAGS: u8 = 0x04;
const RESERVED_FLAGS: u8 = !(FLAG_STALE | FLAG_VERSION | FLAG_TAGS);

/// The metadata an entry carries besides its value: times, stale window, version and tags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryMeta {
    /// When the entry was made, in ms since the Unix epoch.
    pub created_at: u64,
    /// When it stops being fresh, in ms since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// How long past `expires_at` it may still be served while it is recomputed, in ms; 0 = not at all.
    pub stale_ms: u64,
    /// Rails-style recyclable-key version; a reader asking for another version treats the entry as a miss.
    pub version: Option<String>,
    /// Tags for purge by tag.
    pub tags: Vec<String>,
}

impl EntryMeta {
    /// Metadata for an entry made at `created_at` that is fresh for `ttl_ms` (0 = forever).
    pub fn with_ttl(created_at: u64, ttl_ms: u64) -> Self {
        EntryMeta {
            created_at,
            expires_at: if ttl_ms == 0 { 0 } else { created_at.saturating_add(ttl_ms) },
            ..EntryMeta::default()
        }
    }
}

/// A parsed header, borrowing version and tags from the entry bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header<'a> {
    pub kind: Kind,
    pub serializer: Serializer,
    pub compressor: Compressor,
    pub created_at: u64,
    pub expires_at: u64,
    pub stale_ms: u64,
    pub version: Option<&'a str>,
    pub tags: Vec<&'a str>,
}

impl<'a> Header<'a> {
    /// Parses the header and returns it with the offset where the payload starts.
    pub fn parse(entry: &'a [u8]) -> Result<(Header<'a>, usize), DecodeError> {
        if entry.len() < 3 {
            if entry.len() >= 2 && entry[..2] != MAGIC {
                return Err(bad_magic(entry));
            }
            return Err(truncated("fixed header", FIXED_HEADER_LEN, entry.len()));
        }
        if entry[..2] != MAGIC {
            return Err(bad_magic(entry));
        }
        if entry[2] != FORMAT_VERSION {
            return Err(DecodeError::new(
                ErrorKind::UnsupportedVersion,
                format!("format version {} (this reader knows version {FORMAT_VERSION})", entry[2]),
            ));
        }
        if entry.len() < FIXED_HEADER_LEN {
            return Err(truncated("fixed header", FIXED_HEADER_LEN, entry.len()));
        }
        let kind = Kind::from_id(entry[3])?;
        let serializer = Serializer::from_id(entry[4])?;
        let compressor = Compressor::from_id(entry[5])?;
        let flags = entry[6];
        if flags & RESERVED_FLAGS != 0 {
            return Err(DecodeError::new(ErrorKind::BadHeader, format!("reserved flag bits set: {flags:#04x}")));
        }
        if kind == Kind::Response && serializer != Serializer::MsgPack {
            return Err(DecodeError::new(
                ErrorKind::BadHeader,
                format!("an HTTP response entry must use msgpack, not {}", serializer.name()),
            ));
        }
        let created_at = read_u64(entry, 7);
        let expires_at = read_u64(entry, EXPIRES_AT_OFFSET);
        let mut cursor = Cursor { bytes: entry, pos: FIXED_HEADER_LEN };
        let stale_ms = if flags & FLAG_STALE != 0 { cursor.u64("stale window")? } else { 0 };
        let version = if flags & FLAG_VERSION != 0 { Some(cursor.string("version")?) } else { None };
        let tags = if flags & FLAG_TAGS != 0 {
            let count = cursor.u16("tag count")?;
            let mut tags = Vec::with_capacity(usize::from(count).min(entry.len() / 2));
            for _ in 0..count {
                tags.push(cursor.string("tag")?);
            }
            tags
        } else {
            Vec::new()
        };
        let header = Header { kind, serializer, compressor, created_at, expires_at, stale_ms, version, tags };
        Ok((header, cursor.pos))
    }

    /// The moment past which the entry may not be returned at all, even stale; `None` = never.
    pub fn hard_expiry(&self) -> Option<u64> {
        hard_expiry(self.expires_at, self.stale_ms)
    }

    /// Owned copy of the metadata.
    pub fn meta(&self) -> EntryMeta {
        EntryMeta {
            created_at: self.created_at,
            expires_at: self.expires_at,
            stale_ms: self.stale_ms,
            version: self.version.map(str::to_owned),
            tags: self.tags.iter().map(|t| (*t).to_owned()).collect(),
        }
    }
}

/// `expires_at + stale_ms`, or `None` when the entry never expires.
pub fn hard_expiry(expires_at: u64, stale_ms: u64) -> Option<u64> {
    (expires_at != 0).then(|| expires_at.saturating_add(stale_ms))
}

/// Reads only `expires_at` from an entry: the cheapest check a store can make. `None` if the bytes are too short
/// or do not start like an entry.
pub fn peek_expires_at(entry: &[u8]) -> Option<u64> {
    (entry.len() >= FIXED_HEADER_LEN && entry[..2] == MAGIC).then(|| read_u64(entry, EXPIRES_AT_OFFSET))
}

/// Writes the header for `meta` and returns the offset of the compressor byte (set again once compression is
/// decided).
pub(crate) fn write_header(
    out: &mut Vec<u8>,
    kind: Kind,
    serializer: Serializer,
    compressor: Compressor,
    meta: &EntryMeta,
) -> Result<usize, EncodeError> {
    let mut flags = 0u8;
    if meta.stale_ms > 0 {
        flags |= FLAG_STALE;
    }
    if meta.version.is_some() {
        flags |= FLAG_VERSION;
    }
    if !meta.tags.is_empty() {
        flags |= FLAG_TAGS;
    }
    out.extend_from_slice(&MAGIC);
    out.push(FORMAT_VERSION);
    out.push(kind.id());
    out.push(serializer.id());
    let compressor_at = out.len();
    out.push(compressor.id());
    out.push(flags);
    out.extend_from_slice(&meta.created_at.to_le_bytes());
    out.extend_from_slice(&meta.expires_at.to_le_bytes());
    if meta.stale_ms > 0 {
        out.extend_from_slice(&meta.stale_ms.to_le_bytes());
    }
    if let Some(version) = &meta.version {
        write_string(out, "version", version)?;
    }
    if !meta.tags.is_empty() {
        let count = u16::try_from(meta.tags.len()).map_err(|_| EncodeError::TooManyTags(meta.tags.len()))?;
        out.extend_from_slice(&count.to_le_bytes());
        for tag in &meta.tags {
            write_string(out, "tag", tag)?;
        }
    }
    Ok(compressor_at)
}

/// Bytes the header for `meta` takes, for sizing buffers.
pub(crate) fn header_len(meta: &EntryMeta) -> usize {
    let mut len = FIXED_HEADER_LEN;
    if meta.stale_ms > 0 {
        len += 8;
    }
    if let Some(version) = &meta.version {
        len += 2 + version.len();
    }
    if !meta.tags.is_empty() {
        len += 2 + meta.tags.iter().map(|t| 2 + t.len()).sum::<usize>();
    }
    len
}

fn write_string(out: &mut Vec<u8>, field: &'static str, s: &str) -> Result<(), EncodeError> {
    let len = u16::try_from(s.len()).map_err(|_| EncodeError::FieldTooLong { field, len: s.len() })?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut buf = [0u8; 8];
    buf.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(buf)
}

fn bad_magic(entry: &[u8]) -> DecodeError {
    DecodeError::new(
        ErrorKind::BadMagic,
        format!("starts with {} instead of c14c: not a larder entry", hex::encode(&entry[..2])),
    )
}

fn truncated(what: &str, need: usize, have: usize) -> DecodeError {
    DecodeError::new(ErrorKind::Truncated, format!("{what} needs {need} bytes, entry has {have}"))
}

/// Reads the optional fields, turning every short read into a `truncated` error.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, what: &str, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| truncated(what, self.pos + n, self.bytes.len()))?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    fn u16(&mut self, what: &str) -> Result<u16, DecodeError> {
        let b = self.take(what, 2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        let b = self.take(what, 8)?;
        Ok(read_u64(b, 0))
    }

    fn string(&mut self, what: &str) -> Result<&'a str, DecodeError> {
        let len = usize::from(self.u16(what)?);
        let bytes = self.take(what, len)?;
        std::str::from_utf8(bytes)
            .map_err(|e| DecodeError::new(ErrorKind::BadHeader, format!("{what} is not valid UTF-8: {e}")))
    }
}
