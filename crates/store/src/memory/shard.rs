//! One shard of the memory store: a hash table of entries (`table.rs`) and the eviction policy for them, behind a
//! striped read-write lock. Reads take it shared (many readers at once, each on its own stripe; the policy needs only an
//! atomic bump in the entry); writes take it exclusively and evict before they return, so the shard's bound holds
//! at every moment.

use std::sync::atomic::{AtomicU64, Ordering};

use super::entry::{EntryRef, EntryView, REMOVED};
use super::s3fifo::{Exit, S3Fifo};
use super::striped_lock::StripedLock;
use super::table::SlotTable;
use crate::clock::LazyNow;

/// Memory an entry costs beyond its own allocation, charged against the bound: its table slot (8 bytes at 70-87.5%
/// occupancy, ~10) and queue slot (8, and the queue's spare room, ~9), the allocator's header and rounding (8 + ~8
/// on average), and its share of the ghost (~4-7). Measured by `larder bench memory`.
pub const ENTRY_OVERHEAD: usize = 40;

/// What an entry is charged against the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// Everything it makes the process hold (the default).
    Everything,
    /// Its value's length alone (at least 1, so the bound still bounds), as cache simulators count object sizes
    /// (trace replays only).
    ValueOnly,
}

impl Charge {
    pub fn weight(self, entry: &EntryRef) -> usize {
        self.weight_for(entry.key().len(), entry.value().len())
    }

    pub fn weight_for(self, key_len: usize, value_len: usize) -> usize {
        match self {
            Charge::Everything => weight_for(key_len, value_len),
            Charge::ValueOnly => value_len.max(1),
        }
    }
}

/// The weight an entry with these lengths will be charged.
pub fn weight_for(key_len: usize, value_len: usize) -> usize {
    super::entry::HEADER_LEN + key_len + value_len + ENTRY_OVERHEAD
}

/// Event counters. The store keeps several copies ("stripes"), padded to their own cache lines, and each thread
/// counts in its own stripe, so counting a hit does not bounce a cache line between cores.
#[derive(Default)]
#[repr(align(128))]
pub struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub inserts: AtomicU64,
    pub evictions: AtomicU64,
    pub expirations: AtomicU64,
    pub rejections: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

pub struct Shard {
    inner: StripedLock<Inner>,
}

struct Inner {
    table: SlotTable,
    policy: S3Fifo,
    charge: Charge,
    /// Where the expiry crawler resumes.
    crawl_cursor: usize,
}

/// How a write treats an existing live entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Replace it.
    Set,
    /// Keep it and report that nothing was stored.
    Add,
}

impl Shard {
    pub fn new(capacity_weight: usize, capacity_entries: usize, lock_stripes: usize, charge: Charge) -> Shard {
        Shard {
            inner: StripedLock::new(
                Inner {
                    table: SlotTable::default(),
                    policy: S3Fifo::new(capacity_weight, capacity_entries),
                    charge,
                    crawl_cursor: 0,
                },
                lock_stripes,
            ),
        }
    }

    /// A live entry for `key`, or `None`. Expired entries are never returned (and are removed on the spot).
    pub fn get(
        &self,
        hash: u64,
        key: &[u8],
        now: &LazyNow<'_>,
        hasher: &impl Fn(&[u8]) -> u64,
        counters: &Counters,
    ) -> Option<EntryRef> {
        let found = {
            let inner = self.inner.read();
            inner.find(hash, key).map(|e| (*e).clone())
        };
        match found {
            Some(entry) if !entry.is_expired(now) => {
                entry.touch();
                Counters::add(&counters.hits, 1);
                Some(entry)
            }
            Some(entry) => {
                let mut inner = self.inner.write();
                if inner.remove_exact(&entry, hasher) {
                    Counters::add(&counters.expirations, 1);
                }
                Counters::add(&counters.misses, 1);
                None
            }
            None => {
                Counters::add(&counters.misses, 1);
                None
            }
        }
    }

    /// Whether a live entry exists, without counting a hit or touching the policy.
    pub fn contains(&self, hash: u64, key: &[u8], now: &LazyNow<'_>) -> bool {
        let inner = self.inner.read();
        inner.find(hash, key).is_some_and(|e| !e.is_expired(now))
    }

    /// A live entry's expiry (0 = never), or `None` when there is no live entry.
    pub fn expires_at(&self, hash: u64, key: &[u8], now: &LazyNow<'_>) -> Option<u64> {
        let inner = self.inner.read();
        inner.find(hash, key).filter(|e| !e.is_expired(now)).map(|e| e.expires_at())
    }

    /// Stores an entry, evicting as needed. Returns false when `mode` is `Add` and a live entry exists.
    pub fn insert(
        &self,
        hash: u64,
        entry: EntryRef,
        mode: WriteMode,
        now: &LazyNow<'_>,
        hasher: &impl Fn(&[u8]) -> u64,
        counters: &Counters,
    ) -> bool {
        let mut inner = self.inner.write();
        let existing = inner.find(hash, entry.key()).map(|e| (*e).clone());
        if let Some(old) = existing {
            if mode == WriteMode::Add && !old.is_expired(now) {
                return false;
            }
            inner.remove_exact(&old, hasher);
        }
        let w = inner.charge.weight(&entry);
        inner.table.insert(hash, entry.clone(), hasher);
        inner.policy.admit(entry, hash, w);
        debug_assert_eq!(inner.table.len(), inner.policy.len(), "table and queues hold the same entries");
        Counters::add(&counters.inserts, 1);
        let (evicted, expired) = inner.shrink_to_bound(now, hasher);
        Counters::add(&counters.evictions, evicted);
        Counters::add(&counters.expirations, expired);
        true
    }

    /// Removes `key`; true if a live entry was there.
    pub fn remove(&self, hash: u64, key: &[u8], now: &LazyNow<'_>, hasher: &impl Fn(&[u8]) -> u64) -> bool {
        let mut inner = self.inner.write();
        let Some(entry) = inner.find(hash, key).map(|e| (*e).clone()) else { return false };
        inner.remove_exact(&entry, hasher);
        !entry.is_expired(now)
    }

    /// Removes every entry for which `matches` holds; returns how many.
    pub fn purge(&self, matches: impl Fn(&EntryRef) -> bool, hasher: &impl Fn(&[u8]) -> u64) -> usize {
        let mut inner = self.inner.write();
        let doomed: Vec<EntryRef> = inner.policy.iter().filter(|e| matches(e)).cloned().collect();
        for entry in &doomed {
            inner.remove_exact(entry, hasher);
        }
        doomed.len()
    }

    /// Examines up to `budget` entries from where the last call stopped and removes the expired ones.
    pub fn crawl(
        &self,
        now: &LazyNow<'_>,
        budget: usize,
        hasher: &impl Fn(&[u8]) -> u64,
        counters: &Counters,
    ) -> usize {
        let mut inner = self.inner.write();
        let (window, next) = inner.policy.crawl(inner.crawl_cursor, budget);
        inner.crawl_cursor = next;
        let mut expired = 0;
        for entry in window.iter().filter(|e| e.is_expired(now)) {
            if inner.remove_exact(entry, hasher) {
                expired += 1;
            }
        }
        Counters::add(&counters.expirations, expired as u64);
        expired
    }

    pub fn clear(&self) {
        let mut inner = self.inner.write();
        inner.table.drain(|entry| entry.set_flags(entry.flags() | REMOVED));
        inner.policy.clear();
        inner.crawl_cursor = 0;
    }

    /// (entries, weight, weight bound)
    pub fn usage(&self) -> (usize, usize, usize) {
        let inner = self.inner.read();
        (inner.policy.len(), inner.policy.weight(), inner.policy.capacity_weight())
    }
}

impl Inner {
    fn find(&self, hash: u64, key: &[u8]) -> Option<EntryView<'_>> {
        self.table.find(hash, |e| e.key() == key).and_then(|i| self.table.get(i))
    }

    /// Takes `entry` out of the table and its queue, if it is still the one stored. True if it was.
    fn remove_exact(&mut self, entry: &EntryRef, hasher: &impl Fn(&[u8]) -> u64) -> bool {
        let hash = hasher(entry.key());
        let Some(slot) = self.table.find(hash, |e| e.same(entry)) else { return false };
        self.table.take(slot, hasher);
        entry.set_flags(entry.flags() | REMOVED);
        self.policy.remove(entry, self.charge.weight(entry));
        true
    }

    /// Evicts until the bound holds; returns (evicted, expired).
    fn shrink_to_bound(&mut self, now: &LazyNow<'_>, hasher: &impl Fn(&[u8]) -> u64) -> (u64, u64) {
        let (mut evicted, mut expired) = (0, 0);
        while self.policy.over_capacity() {
            let charge = self.charge;
            let Some((victim, exit)) = self.policy.evict(now, hasher, |e| charge.weight(e)) else { break };
            let hash = hasher(victim.key());
            if let Some(slot) = self.table.find(hash, |e| e.same(&victim)) {
                self.table.take(slot, hasher);
            }
            victim.set_flags(victim.flags() | REMOVED);
            match exit {
                Exit::Evicted => evicted += 1,
                Exit::Expired => expired += 1,
            }
        }
        (evicted, expired)
    }
}
