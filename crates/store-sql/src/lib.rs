//! larder's SQL stores (spec/STORES.md §6): SQLite and PostgreSQL, one Solid-Cache-like table of entries keyed by a
//! hash of the key, and a tag index. On sqlx: one well-kept async API (and pool) for both databases, with lazy
//! connection, reconnection after a server restart, and bounded waits; larder needs nothing sqlx's compile-time
//! macros would add, so they stay off.

mod schema;
mod store;

pub use store::SqlStore;
