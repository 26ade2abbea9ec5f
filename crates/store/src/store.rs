//! The `Store` interface every backend implements: async operations over entry bytes, designed for remote backends
//! (a memcached pool, Redis, SQL, files) as much as for the embedded memory store. A store never deserializes a
//! value; it may read the entry header (spec/FORMAT.md) for expiry and tags.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::error::StoreError;
use crate::health::ServerReport;
use crate::value::Value;

/// Counters a store keeps. Remote backends report what their servers report, or zeros where they cannot know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
    pub expirations: u64,
    /// Writes refused (value too large, key too long).
    pub rejections: u64,
    pub entries: u64,
    /// Bytes the entries weigh (keys, values and bookkeeping).
    pub bytes: u64,
    /// The byte bound, if any (0 = none).
    pub capacity_bytes: u64,
    /// Things under the store's root that it did not write and leaves alone (the file store's foreign files).
    pub foreign: u64,
}

/// What a purge did (spec/STORES.md §4.4): removed a number of entries, or, on memcached, recorded the purge for
/// readers to apply, which cannot count what it hides. Never a 0 that means "done".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purged {
    Removed(usize),
    Recorded,
}

impl Purged {
    /// The number removed, when the store could count it.
    pub fn count(self) -> Option<usize> {
        match self {
            Purged::Removed(n) => Some(n),
            Purged::Recorded => None,
        }
    }

    /// Two purges' results together (layers of one store, several tags): recorded if either was.
    #[must_use]
    pub fn and(self, other: Purged) -> Purged {
        match (self, other) {
            (Purged::Removed(a), Purged::Removed(b)) => Purged::Removed(a + b),
            _ => Purged::Recorded,
        }
    }
}

impl std::fmt::Display for Purged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Purged::Removed(n) => write!(f, "{n}"),
            Purged::Recorded => f.write_str("recorded (readers skip what it covers; the store cannot count it)"),
        }
    }
}

/// Async operations on keys and entry bytes.
///
/// `ttl` is a store-side expiry on top of the entry's own (`None` = only the entry's). A backend that reads entry
/// headers never returns an entry past its hard expiry (`expires_at + stale window`).
pub trait Store: Send + Sync + 'static {
    /// The backend's name, as errors and metrics name it ("memory", "memcached", …).
    fn backend(&self) -> &'static str;

    /// The largest value a write of a short key can store (memcached's item size, the memory store's entry
    /// bound). Callers that buffer a value before writing it (the proxy's fills) stop buffering past this.
    fn max_value_bytes(&self) -> usize {
        usize::MAX
    }

    /// Failures counted per server since the store was opened (`host:port`, count), for `/metrics`. Stores
    /// without servers report none.
    fn server_errors(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Each server's state (up, failing, ejected) and latest failure, for `/health`. Stores without servers
    /// report none.
    fn server_reports(&self) -> Vec<ServerReport> {
        Vec::new()
    }

    /// The memory copy (L1) this store keeps of a shared one, if it keeps one (spec/STORES.md §9): the cache layer
    /// keeps what it loads during an outage there (§3, "When the store fails").
    fn local_copy(&self) -> Option<crate::MemoryStore> {
        None
    }

    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Value>, StoreError>> + Send;

    /// One result per key, in order.
    fn get_many(&self, keys: &[&str]) -> impl Future<Output = Result<Vec<Option<Value>>, StoreError>> + Send;

    fn set(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stores every item with one TTL, in as few round trips as the backend allows. Not atomic: after an error,
    /// some items may be stored.
    fn set_many(
        &self,
        items: &[(&str, &[u8])],
        ttl: Option<Duration>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            for (key, value) in items {
                self.set(key, value, ttl).await?;
            }
            Ok(())
        }
    }

    /// Stores only if the key is absent (or expired); `true` if it stored. The building block for locks.
    fn add(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Adds `delta` to the counter at `key` (spec/STORES.md §3: ASCII decimal, not an entry) and returns the new
    /// value. A missing key is created holding `delta` (with `ttl`) when `create` is true, and is `None` otherwise.
    /// A value that is not a decimal integer is an error, and the value is left as it was.
    fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send;

    /// Deletes `key` only while it holds exactly `expected` (releasing a lock taken with [`Store::add`] without
    /// releasing one another process took after it expired); `true` if it deleted.
    fn delete_if(&self, key: &str, expected: &[u8]) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// `true` if the key was present.
    fn delete(&self, key: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// How many of the keys were present.
    fn delete_many(&self, keys: &[&str]) -> impl Future<Output = Result<usize, StoreError>> + Send;

    fn clear(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Removes every entry whose key starts with `prefix` (a prefix of safe-key bytes; "" is everything).
    fn purge_prefix(&self, prefix: &str) -> impl Future<Output = Result<Purged, StoreError>> + Send;

    /// Removes every entry whose header carries `tag`.
    fn purge_tag(&self, tag: &str) -> impl Future<Output = Result<Purged, StoreError>> + Send;

    fn stats(&self) -> impl Future<Output = Result<StoreStats, StoreError>> + Send;
}

/// A boxed future, for stores chosen at run time.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The object-safe twin of [`Store`]: every `Store` is a `DynStore`, and `Arc<dyn DynStore>` is a `Store` again,
/// so a configuration can pick a backend at run time at the price of one allocation per call.
pub trait DynStore: Send + Sync + 'static {
    fn backend(&self) -> &'static str;
    fn max_value_bytes(&self) -> usize;
    fn server_errors(&self) -> Vec<(String, u64)>;
    fn server_reports(&self) -> Vec<ServerReport>;
    fn local_copy(&self) -> Option<crate::MemoryStore>;
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Value>, StoreError>>;
    fn get_many<'a>(&'a self, keys: &'a [&'a str]) -> BoxFuture<'a, Result<Vec<Option<Value>>, StoreError>>;
    fn set<'a>(&'a self, key: &'a str, value: &'a [u8], ttl: Option<Duration>)
        -> BoxFuture<'a, Result<(), StoreError>>;
    fn add<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    fn set_many<'a>(
        &'a self,
        items: &'a [(&'a str, &'a [u8])],
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn incr<'a>(
        &'a self,
        key: &'a str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> BoxFuture<'a, Result<Option<i64>, StoreError>>;
    fn delete_if<'a>(&'a self, key: &'a str, expected: &'a [u8]) -> BoxFuture<'a, Result<bool, StoreError>>;
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;
    fn delete_many<'a>(&'a self, keys: &'a [&'a str]) -> BoxFuture<'a, Result<usize, StoreError>>;
    fn clear(&self) -> BoxFuture<'_, Result<(), StoreError>>;
    fn purge_prefix<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Purged, StoreError>>;
    fn purge_tag<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Purged, StoreError>>;
    fn stats(&self) -> BoxFuture<'_, Result<StoreStats, StoreError>>;
}

impl<S: Store> DynStore for S {
    fn backend(&self) -> &'static str {
        Store::backend(self)
    }
    fn max_value_bytes(&self) -> usize {
        Store::max_value_bytes(self)
    }
    fn server_errors(&self) -> Vec<(String, u64)> {
        Store::server_errors(self)
    }
    fn server_reports(&self) -> Vec<ServerReport> {
        Store::server_reports(self)
    }
    fn local_copy(&self) -> Option<crate::MemoryStore> {
        Store::local_copy(self)
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        Box::pin(Store::get(self, key))
    }
    fn get_many<'a>(&'a self, keys: &'a [&'a str]) -> BoxFuture<'a, Result<Vec<Option<Value>>, StoreError>> {
        Box::pin(Store::get_many(self, keys))
    }
    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(Store::set(self, key, value, ttl))
    }
    fn add<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(Store::add(self, key, value, ttl))
    }
    fn set_many<'a>(
        &'a self,
        items: &'a [(&'a str, &'a [u8])],
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(Store::set_many(self, items, ttl))
    }
    fn incr<'a>(
        &'a self,
        key: &'a str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> BoxFuture<'a, Result<Option<i64>, StoreError>> {
        Box::pin(Store::incr(self, key, delta, ttl, create))
    }
    fn delete_if<'a>(&'a self, key: &'a str, expected: &'a [u8]) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(Store::delete_if(self, key, expected))
    }
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(Store::delete(self, key))
    }
    fn delete_many<'a>(&'a self, keys: &'a [&'a str]) -> BoxFuture<'a, Result<usize, StoreError>> {
        Box::pin(Store::delete_many(self, keys))
    }
    fn clear(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(Store::clear(self))
    }
    fn purge_prefix<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Purged, StoreError>> {
        Box::pin(Store::purge_prefix(self, prefix))
    }
    fn purge_tag<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Purged, StoreError>> {
        Box::pin(Store::purge_tag(self, tag))
    }
    fn stats(&self) -> BoxFuture<'_, Result<StoreStats, StoreError>> {
        Box::pin(Store::stats(self))
    }
}

impl Store for Arc<dyn DynStore> {
    fn backend(&self) -> &'static str {
        DynStore::backend(&**self)
    }
    fn max_value_bytes(&self) -> usize {
        DynStore::max_value_bytes(&**self)
    }
    fn server_errors(&self) -> Vec<(String, u64)> {
        DynStore::server_errors(&**self)
    }
    fn server_reports(&self) -> Vec<ServerReport> {
        DynStore::server_reports(&**self)
    }
    fn local_copy(&self) -> Option<crate::MemoryStore> {
        DynStore::local_copy(&**self)
    }
    async fn get(&self, key: &str) -> Result<Option<Value>, StoreError> {
        DynStore::get(&**self, key).await
    }
    async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        DynStore::get_many(&**self, keys).await
    }
    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        DynStore::set(&**self, key, value, ttl).await
    }
    async fn add(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        DynStore::add(&**self, key, value, ttl).await
    }
    async fn set_many(&self, items: &[(&str, &[u8])], ttl: Option<Duration>) -> Result<(), StoreError> {
        DynStore::set_many(&**self, items, ttl).await
    }
    async fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        DynStore::incr(&**self, key, delta, ttl, create).await
    }
    async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool, StoreError> {
        DynStore::delete_if(&**self, key, expected).await
    }
    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        DynStore::delete(&**self, key).await
    }
    async fn delete_many(&self, keys: &[&str]) -> Result<usize, StoreError> {
        DynStore::delete_many(&**self, keys).await
    }
    async fn clear(&self) -> Result<(), StoreError> {
        DynStore::clear(&**self).await
    }
    async fn purge_prefix(&self, prefix: &str) -> Result<Purged, StoreError> {
        DynStore::purge_prefix(&**self, prefix).await
    }
    async fn purge_tag(&self, tag: &str) -> Result<Purged, StoreError> {
        DynStore::purge_tag(&**self, tag).await
    }
    async fn stats(&self) -> Result<StoreStats, StoreError> {
        DynStore::stats(&**self).await
    }
}
