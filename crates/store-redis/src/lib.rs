//! larder's Redis store (spec/STORES.md §5), standalone (`redis://`) and Cluster (`redis+cluster://`), on redis-rs:
//! the well-kept Rust client, whose `ConnectionManager` reconnects by itself after a server restart and whose
//! cluster connection follows slot moves and splits multi-key commands (MGET, DEL) across slots. larder adds what
//! spec/STORES.md asks on top: native expiry from the entry header (`PXAT`), tag sets, prefix purges by `SCAN` on
//! every master, counters and locks as small scripts, a bound on every request, and errors that name the server.

mod connect;
mod scripts;
mod store;

pub use store::RedisStore;
