//! A memory copy (L1) in front of a shared store (L2), spec/STORES.md §9: reads try L1 and copy what L2 returns
//! into it, writes and deletes go to both. An L1 copy lives at most `l1_ttl`, the bound on how long another
//! process's purge or write takes to reach this one; this process's own writes and purges reach its L1 at once.
//! When L2 fails, L1 still answers what it holds and keeps what this process writes, so a store outage costs
//! hit ratio, not answers.

use std::time::Duration;

use crate::error::StoreError;
use crate::memory::MemoryStore;
use crate::store::{Purged, Store, StoreStats};
use crate::value::Value;

/// L1 over L2. Locks and counters (`add`, `incr`, `delete_if`) are decided by L2 alone.
pub struct TieredStore<L2> {
    l1: MemoryStore,
    l2: L2,
    l1_ttl: Duration,
}

impl<L2: Store> TieredStore<L2> {
    pub fn new(l1: MemoryStore, l2: L2, l1_ttl: Duration) -> TieredStore<L2> {
        TieredStore { l1, l2, l1_ttl }
    }

    pub fn l1(&self) -> &MemoryStore {
        &self.l1
    }

    pub fn l2(&self) -> &L2 {
        &self.l2
    }

    /// The TTL an L1 copy gets: at most `l1_ttl`, less when the caller's TTL is shorter.
    fn l1_ttl(&self, ttl: Option<Duration>) -> Option<Duration> {
        Some(ttl.map_or(self.l1_ttl, |t| t.min(self.l1_ttl)))
    }

    fn keep(&self, key: &str, value: &[u8], ttl: Option<Duration>) {
        // A value L1 cannot hold (too large for it) is simply not copied.
        if self.l1.set_now(key, value, self.l1_ttl(ttl)).is_err() {
            self.l1.delete_now(key);
        }
    }
}

impl<L2: Store> Store for TieredStore<L2> {
    fn backend(&self) -> &'static str {
        self.l2.backend()
    }

    fn max_value_bytes(&self) -> usize {
        self.l2.max_value_bytes()
    }

    fn server_errors(&self) -> Vec<(String, u64)> {
        self.l2.server_errors()
    }

    fn server_reports(&self) -> Vec<crate::ServerReport> {
        self.l2.server_reports()
    }

    fn local_copy(&self) -> Option<MemoryStore> {
        Some(self.l1.clone())
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, StoreError> {
        if let Some(value) = self.l1.get_now(key) {
            return Ok(Some(value));
        }
        let found = self.l2.get(key).await?;
        if let Some(value) = &found {
            self.keep(key, value, None);
        }
        Ok(found)
    }

    async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        let mut answers: Vec<Option<Value>> = keys.iter().map(|k| self.l1.get_now(k)).collect();
        let missing: Vec<usize> = (0..keys.len()).filter(|&i| answers[i].is_none()).collect();
        if missing.is_empty() {
            return Ok(answers);
        }
        let ask: Vec<&str> = missing.iter().map(|&i| keys[i]).collect();
        let found = self.l2.get_many(&ask).await?;
        for (&i, value) in missing.iter().zip(found) {
            if let Some(value) = &value {
                self.keep(keys[i], value, None);
            }
            answers[i] = value;
        }
        Ok(answers)
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        self.keep(key, value, ttl);
        self.l2.set(key, value, ttl).await
    }

    async fn set_many(&self, items: &[(&str, &[u8])], ttl: Option<Duration>) -> Result<(), StoreError> {
        for (key, value) in items {
            self.keep(key, value, ttl);
        }
        self.l2.set_many(items, ttl).await
    }

    async fn add(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        let added = self.l2.add(key, value, ttl).await?;
        if added {
            self.keep(key, value, ttl);
        }
        Ok(added)
    }

    async fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        self.l1.delete_now(key);
        self.l2.incr(key, delta, ttl, create).await
    }

    async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool, StoreError> {
        self.l1.delete_now(key);
        self.l2.delete_if(key, expected).await
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        let local = self.l1.delete_now(key);
        Ok(self.l2.delete(key).await? || local)
    }

    async fn delete_many(&self, keys: &[&str]) -> Result<usize, StoreError> {
        for key in keys {
            self.l1.delete_now(key);
        }
        self.l2.delete_many(keys).await
    }

    async fn clear(&self) -> Result<(), StoreError> {
        self.l1.clear_now();
        self.l2.clear().await
    }

    async fn purge_prefix(&self, prefix: &str) -> Result<Purged, StoreError> {
        crate::keys::check_prefix(self.l2.backend(), prefix)?;
        let local = self.l1.purge_prefix_now(prefix);
        Ok(at_least(self.l2.purge_prefix(prefix).await?, local))
    }

    async fn purge_tag(&self, tag: &str) -> Result<Purged, StoreError> {
        let local = self.l1.purge_tag_now(tag);
        Ok(at_least(self.l2.purge_tag(tag).await?, local))
    }

    /// L2's figures (the shared store is the one that matters); L1's are on [`TieredStore::l1`].
    async fn stats(&self) -> Result<StoreStats, StoreError> {
        self.l2.stats().await
    }
}

/// The shared store's answer, which knows more than the local copy's, unless the local copy removed more.
fn at_least(shared: Purged, local: usize) -> Purged {
    match shared {
        Purged::Removed(n) => Purged::Removed(n.max(local)),
        Purged::Recorded => Purged::Recorded,
    }
}
