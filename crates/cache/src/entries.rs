//! Entry bytes under full store keys, for callers that build and read entries themselves: the proxy's HTTP
//! responses and its admin API. They reach the store only through these calls, so whatever store sits underneath
//! (memory today, a shared one tomorrow) is counted and absorbed the same way as `fetch`'s own reads and writes.
//!
//! Two flavours: the request path absorbs store failures (a cache that is down must not fail a request; each
//! failure is counted in `CacheStats::store_errors`), while the admin calls report them to the operator.

use std::time::Duration;

use larder_store::{Purged, Store, StoreStats, Value};

use crate::cache::Cache;
use crate::error::CacheError;
use crate::stats::CacheCounters;

impl<S: Store> Cache<S> {
    /// The name of the store's backend ("memory", "memcached", …).
    pub fn backend(&self) -> &'static str {
        self.shared.store.backend()
    }

    /// Failures per server of a shared store (`host:port`, count).
    pub fn server_errors(&self) -> Vec<(String, u64)> {
        self.shared.store.server_errors()
    }

    /// Each store server's state and latest failure (none for the memory store).
    pub fn server_reports(&self) -> Vec<larder_store::ServerReport> {
        self.shared.store.server_reports()
    }

    /// The largest entry the store accepts under a short key.
    pub fn max_entry_bytes(&self) -> usize {
        self.shared.store.max_value_bytes()
    }

    /// The stored bytes under a full store key (no namespace applied); a store failure is a counted miss.
    pub async fn get_entry(&self, store_key: &str) -> Option<Value> {
        self.get_raw(store_key).await
    }

    /// The stored bytes under several full store keys, in one request to the store; a store failure is a counted
    /// miss for all of them.
    pub async fn get_entries(&self, store_keys: &[&str]) -> Vec<Option<Value>> {
        self.get_many_raw(store_keys).await
    }

    /// Stores entry bytes under a full store key; `false` when the store did not take it. A store failure is
    /// absorbed and counted, since losing a cache write must not fail the request that produced it, and the entry
    /// is kept in the outage memory instead (spec/STORES.md §3, "When the store fails").
    pub async fn put_entry(&self, store_key: &str, entry: &[u8], ttl: Option<Duration>) -> bool {
        let stored = self.shared.store.set(store_key, entry, ttl).await;
        if self.failed(&stored) {
            self.shared.outage.keep(store_key, entry, ttl);
            return false;
        }
        self.absorbed(stored).is_some()
    }

    /// Whether the store is failing now, as far as this cache has seen (spec/STORES.md §3, "When the store fails").
    pub fn store_failing(&self) -> bool {
        self.shared.outage.is_failing()
    }

    /// Removes the entry under a full store key; a store failure is counted and reported as `false`.
    pub async fn remove_entry(&self, store_key: &str) -> bool {
        self.shared.outage.forget(store_key);
        let removed = self.shared.store.delete(store_key).await;
        self.failed(&removed);
        self.absorbed(removed).unwrap_or(false)
    }

    /// Removes the entries under several full store keys; how many were there (failures counted, as 0).
    pub async fn remove_entries(&self, store_keys: &[&str]) -> usize {
        if store_keys.is_empty() {
            return 0;
        }
        for key in store_keys {
            self.shared.outage.forget(key);
        }
        let removed = self.shared.store.delete_many(store_keys).await;
        self.failed(&removed);
        self.absorbed(removed).unwrap_or(0)
    }

    /// As [`get_entry`](Self::get_entry), reporting a store failure.
    pub async fn read_entry(&self, store_key: &str) -> Result<Option<Value>, CacheError> {
        Ok(self.shared.store.get(store_key).await?)
    }

    /// As [`put_entry`](Self::put_entry), reporting a store failure (a value too large, a server down).
    pub async fn write_entry(&self, store_key: &str, entry: &[u8], ttl: Option<Duration>) -> Result<(), CacheError> {
        Ok(self.shared.store.set(store_key, entry, ttl).await?)
    }

    /// As [`remove_entry`](Self::remove_entry), reporting a store failure.
    pub async fn delete_entry(&self, store_key: &str) -> Result<bool, CacheError> {
        Ok(self.shared.store.delete(store_key).await?)
    }

    /// Removes every entry whose full store key starts with `prefix` (or records the purge, on memcached).
    pub async fn purge_prefix(&self, prefix: &str) -> Result<Purged, CacheError> {
        self.shared.outage.forget_prefix(prefix);
        Ok(self.shared.store.purge_prefix(prefix).await?)
    }

    /// Removes every entry tagged `tag` (or records the purge, on memcached).
    pub async fn purge_tag(&self, tag: &str) -> Result<Purged, CacheError> {
        self.shared.outage.forget_tag(tag);
        Ok(self.shared.store.purge_tag(tag).await?)
    }

    /// What the store reports about itself.
    pub async fn store_stats(&self) -> Result<StoreStats, CacheError> {
        Ok(self.shared.store.stats().await?)
    }

    pub(crate) fn absorbed<T>(&self, result: Result<T, larder_store::StoreError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(_) => {
                CacheCounters::bump(&self.shared.counters.store_errors);
                None
            }
        }
    }
}
