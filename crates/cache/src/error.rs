//! Errors a cache call can return. They are `Clone` because one loader failure is handed to every caller that
//! waited on it.

use std::sync::Arc;

use larder_format::EncodeError;
use larder_store::StoreError;

/// Why a cache call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CacheError {
    /// The loader returned an error; nothing was cached.
    #[error("loader failed: {0}")]
    Loader(Arc<dyn std::error::Error + Send + Sync>),
    /// The loader panicked; nothing was cached and the cache stays usable.
    #[error("loader panicked: {0}")]
    LoaderPanicked(String),
    /// The value could not be encoded (for example, it does not serialize).
    #[error("cannot encode value: {0}")]
    Encode(Arc<EncodeError>),
    /// The store failed an operation whose outcome the caller asked for (write, delete).
    #[error(transparent)]
    Store(Arc<StoreError>),
}

impl From<StoreError> for CacheError {
    fn from(e: StoreError) -> Self {
        CacheError::Store(Arc::new(e))
    }
}

impl From<EncodeError> for CacheError {
    fn from(e: EncodeError) -> Self {
        CacheError::Encode(Arc::new(e))
    }
}
