//! larder's Redis store (spec/STORES.md §5), standalone (`redis://`) and Cluster (`redis+cluster://`), on redis-rs:
//! the well-kept Rust client, whose multiplexed connections pipeline requests and whose cluster connection follows
//! slot moves and splits multi-key commands (MGET, DEL) across slots. larder adds what spec/STORES.md asks on top:
//! native expiry from the entry header (`PXAT`), tag sets, prefix purges by `SCAN` on every master, counters and
//! locks as small scripts, a bound on every request, errors that name the server, and sockets of its own that
//! refuse replies past the spec's bounds before redis-rs buffers them (`bounded.rs`), with a failed connection
//! replaced on the next request (`connect.rs`). A standalone server's GET, MGET and plain SET/DEL writes skip
//! redis-rs: larder's own RESP reader on pipelined connections (`resp.rs`, larder_pipeline), measured faster on
//! multi-gets and large writes. Those connections are a second set beside redis-rs's, each of `pool` connections,
//! so a standalone server sees up to twice the URL's `pool`.

mod bounded;
mod connect;
mod resp;
mod scripts;
mod store;

pub use store::RedisStore;
