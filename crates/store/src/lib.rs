//! Stores: where entries (spec/FORMAT.md) live. [`Store`] is the async interface every backend implements;
//! [`MemoryStore`] is the embedded default, the proxy's L1 and a program's in-process cache. The remote backends
//! (memcached, Redis, SQL, files) live in their own crates and follow spec/STORES.md; what they share (URLs,
//! expiry, counters, sizes) is here.

mod clock;
pub mod counter;
mod error;
pub mod expiry;
pub mod health;
pub mod keys;
pub mod memory;
mod size;
mod store;
mod tiered;
pub mod url;
mod value;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{OpenError, StoreError};
pub use health::{FailurePolicy, Health, ServerReport};
pub use memory::{ConfigError, MemoryStore, MemoryStoreBuilder};
pub use size::{parse_size, parse_usize};
pub use store::{BoxFuture, DynStore, Purged, Store, StoreStats};
pub use tiered::TieredStore;
pub use url::{StoreUrl, UrlError};
pub use value::Value;
