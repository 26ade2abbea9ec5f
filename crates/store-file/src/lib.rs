//! larder's file store (spec/STORES.md §7): one file per key in hash-sharded directories, written to a temporary
//! file and renamed into place (so readers in any process see a whole file or none), with `flock` around
//! read-modify-write operations and an optional byte bound. All file work runs on tokio's blocking pool.

mod dirfd;
mod layout;
mod scan;
mod store;

pub use store::FileStore;
