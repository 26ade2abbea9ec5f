//! Stores: where entries (spec/FORMAT.md) live. [`Store`] is the async interface every backend implements;
//! [`MemoryStore`] is the embedded default, the proxy's L1 and a program's in-process cache.

mod clock;
mod error;
pub mod memory;
mod store;
mod value;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::StoreError;
pub use memory::{ConfigError, MemoryStore, MemoryStoreBuilder};
pub use store::{BoxFuture, DynStore, Store, StoreStats};
pub use value::Value;
