//! Errors of the entry format. Decoding errors carry a [`ErrorKind`] whose name is shared by every language
//! (spec/FORMAT.md §7), so tests and operators can compare failures across implementations.

use std::fmt;

/// The language-neutral kind of a decoding failure (spec/FORMAT.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    Truncated,
    BadMagic,
    UnsupportedVersion,
    UnknownCodec,
    BadHeader,
    TooLarge,
    CorruptPayload,
    BadValue,
}

impl ErrorKind {
    /// The kind's name as the spec and the vectors spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Truncated => "truncated",
            ErrorKind::BadMagic => "bad_magic",
            ErrorKind::UnsupportedVersion => "unsupported_version",
            ErrorKind::UnknownCodec => "unknown_codec",
            ErrorKind::BadHeader => "bad_header",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::CorruptPayload => "corrupt_payload",
            ErrorKind::BadValue => "bad_value",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an entry could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {detail}")]
pub struct DecodeError {
    kind: ErrorKind,
    detail: String,
}

impl DecodeError {
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        DecodeError { kind, detail: detail.into() }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn detail(&self) -> &str {
        &self.detail
    }
}

/// Why a value could not be encoded into an entry.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("cannot serialize value: {0}")]
    Serialize(String),
    #[error("{field} is {len} bytes; the format allows at most 65535")]
    FieldTooLong { field: &'static str, len: usize },
    #[error("{0} tags; the format allows at most 65535")]
    TooManyTags(usize),
    #[error("{0}")]
    Invalid(String),
    #[error("compression failed: {0}")]
    Compress(String),
}

impl EncodeError {
    /// A serializer's own failure, kept as its message.
    pub(crate) fn serialize(error: impl std::fmt::Display) -> Self {
        EncodeError::Serialize(error.to_string())
    }
}
