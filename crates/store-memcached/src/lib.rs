//! larder's memcached store (spec/STORES.md §4): a pool of servers chosen by the ketama ring, spoken to in the meta
//! protocol with pipelined batches, with failure ejection and purge records checked on read.
//!
//! Why a protocol client of its own: the Rust crates for memcached (`memcache`, blocking; `async-memcached`, one
//! connection, no meta-protocol CAS/`ma` autovivify; `memcache-async`, text protocol over a caller's stream) each miss
//! something larder needs here: the ketama ring shared with every other language, per-request timeouts, pipelined
//! multi-gets across servers, CAS and counters in the meta protocol, and errors that name the server. The protocol
//! larder uses is small (`mg`, `ms`, `md`, `ma`, `mn`, `stats`, `flush_all`), and `protocol.rs` bounds everything
//! it reads.

mod protocol;
mod purge;
pub mod ring;
mod server;
mod store;

pub use store::MemcachedStore;
