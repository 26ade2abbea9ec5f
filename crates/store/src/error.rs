//! What can go wrong in a store, saying which backend (and, for remote stores, which server) failed.

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The value is larger than the store accepts; nothing was stored.
    #[error("{backend}: value of {size} bytes for key {key:?} exceeds the {limit}-byte entry limit")]
    TooLarge { backend: &'static str, key: String, size: usize, limit: usize },
    /// The key (or purge prefix) is not a safe key (spec/STORES.md §2: 1 to 250 bytes, none of them 0x00–0x20 or
    /// 0x7F); refused before anything was sent. `key` is shown escaped and cut to 80 characters.
    #[error("{backend}: invalid key {key}: {reason}")]
    InvalidKey { backend: &'static str, key: String, reason: &'static str },
    /// A server could not be reached or answered with an error.
    #[error("{backend} server {server}: {message}")]
    Server { backend: &'static str, server: String, message: String },
    /// A server did not answer in time.
    #[error("{backend} server {server}: no answer within {timeout_ms} ms")]
    Timeout { backend: &'static str, server: String, timeout_ms: u64 },
    /// `incr` found a value that is not a decimal integer (spec/STORES.md §3); it was left as it was.
    #[error("{backend}: the value at key {key:?} is not a counter")]
    NotACounter { backend: &'static str, key: String },
    /// The backend cannot do this operation (e.g. purge by tag on memcached).
    #[error("{backend}: {operation} is not supported")]
    Unsupported { backend: &'static str, operation: &'static str },
}

impl StoreError {
    /// The backend that failed ("memory", "memcached", "redis", …).
    pub fn backend(&self) -> &'static str {
        match self {
            StoreError::TooLarge { backend, .. }
            | StoreError::InvalidKey { backend, .. }
            | StoreError::Server { backend, .. }
            | StoreError::Timeout { backend, .. }
            | StoreError::NotACounter { backend, .. }
            | StoreError::Unsupported { backend, .. } => backend,
        }
    }

    /// The server that failed, for remote backends.
    pub fn server(&self) -> Option<&str> {
        match self {
            StoreError::Server { server, .. } | StoreError::Timeout { server, .. } => Some(server),
            _ => None,
        }
    }
}

/// Why a store could not be opened from its URL.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL is malformed or names an unknown option (nothing was contacted).
    #[error(transparent)]
    Url(#[from] crate::url::UrlError),
    /// A local store (SQLite, files) could not be created or opened, or a schema is newer than this larder.
    #[error(transparent)]
    Store(#[from] StoreError),
}
