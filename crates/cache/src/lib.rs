//! The cache programs call: typed values in the shared entry format (spec/FORMAT.md) over any [`Store`].
//!
//! ```
//! # async fn demo() -> Result<(), larder_cache::CacheError> {
//! use std::time::Duration;
//! use larder_cache::Cache;
//! use larder_store::MemoryStore;
//!
//! let cache = Cache::new(MemoryStore::builder().build().expect("valid store"));
//! let user: String = cache
//!     .fetch("user:7", Duration::from_secs(60), || async { Ok::<_, std::io::Error>("Ada".to_owned()) })
//!     .await?;
//! assert_eq!(user, "Ada");
//! # Ok(()) }
//! ```
//!
//! [`Store`]: larder_store::Store

mod cache;
pub mod coalesce;
mod entries;
mod error;
mod fetch;
mod locks;
mod outage;
mod stats;

pub use cache::{Cache, CacheBuilder, WriteOptions};
pub use error::CacheError;
pub use fetch::Cacheable;
pub use locks::{HeldLock, Lock, LockState};
pub use outage::DEFAULT_OUTAGE_MEMORY;
pub use stats::CacheStats;
