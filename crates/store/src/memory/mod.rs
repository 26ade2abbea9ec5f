//! The embedded memory store: larder's default store, the proxy's L1 and a program's in-process cache.
//!
//! Concurrent (sharded; reads take a shard's lock shared and write nothing but a frequency counter), bounded by
//! bytes (key, value and bookkeeping) and optionally by entry count, with per-entry expiry and S3-FIFO eviction.
//! Expired entries are never returned; they are reclaimed when read, when the eviction hand meets them, and by an
//! incremental crawler that a background thread (or the caller, via [`MemoryStore::run_maintenance`]) drives, so
//! no request ever scans the store.

pub(crate) mod entry;
mod ghost;
mod queue;
mod s3fifo;
mod shard;
mod sketch;
mod striped_lock;
mod table;

use std::hash::BuildHasher;
use std::sync::{Arc, Weak};
use std::time::Duration;

use larder_format::{Entry, FIXED_HEADER_LEN, MAGIC};

use self::entry::{EntryRef, MAX_VALUE_LEN};
use self::shard::{Charge, Counters, Shard, WriteMode};
use crate::clock::{Clock, LazyNow, SystemClock};
use crate::error::StoreError;
use crate::keys::{check_key, check_prefix};
use crate::store::{Purged, Store, StoreStats};
use crate::value::Value;

pub use self::shard::{weight_for, ENTRY_OVERHEAD};

const BACKEND: &str = "memory";

/// How a memory store is bounded and run. Build one with [`MemoryStore::builder`].
#[derive(Clone)]
pub struct MemoryStoreBuilder {
    capacity_bytes: usize,
    max_entries: Option<usize>,
    max_entry_fraction: f64,
    shards: Option<usize>,
    clock: Arc<dyn Clock>,
    maintenance_interval: Option<Duration>,
    charge: Charge,
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("capacity must be at least 4096 bytes, got {0}")]
    CapacityTooSmall(usize),
    #[error("max_entries must be at least 1")]
    NoEntries,
    #[error("max entry fraction must be in (0, 1], got {0}")]
    BadFraction(f64),
}

impl Default for MemoryStoreBuilder {
    fn default() -> Self {
        MemoryStoreBuilder {
            capacity_bytes: 256 << 20,
            max_entries: None,
            max_entry_fraction: 1.0 / 16.0,
            shards: None,
            clock: Arc::new(SystemClock),
            maintenance_interval: Some(Duration::from_millis(100)),
            charge: Charge::Everything,
        }
    }
}

impl MemoryStoreBuilder {
    /// The byte bound (default 256 MiB): entries weigh their key, value and bookkeeping.
    pub fn capacity_bytes(mut self, bytes: usize) -> Self {
        self.capacity_bytes = bytes;
        self
    }

    /// An entry-count bound on top of the byte bound.
    pub fn max_entries(mut self, entries: usize) -> Self {
        self.max_entries = Some(entries);
        self
    }

    /// Entries weighing more than this fraction of the capacity are refused (default 1/16).
    pub fn max_entry_fraction(mut self, fraction: f64) -> Self {
        self.max_entry_fraction = fraction;
        self
    }

    /// Number of shards (rounded down to a power of two); by default it follows the core count and capacity.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards.max(1));
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How often a background thread crawls for expired entries; `None` leaves it to
    /// [`MemoryStore::run_maintenance`].
    pub fn maintenance_interval(mut self, interval: Option<Duration>) -> Self {
        self.maintenance_interval = interval;
        self
    }

    /// For trace replays only: charge each entry its value's length alone, as cache simulators count object sizes,
    /// so that a replay's figures compare with theirs. The store then holds more than its bound in key and
    /// bookkeeping bytes.
    #[doc(hidden)]
    pub fn charge_values_only(mut self, values_only: bool) -> Self {
        self.charge = if values_only { Charge::ValueOnly } else { Charge::Everything };
        self
    }

    pub fn build(self) -> Result<MemoryStore, ConfigError> {
        if self.capacity_bytes < 4096 {
            return Err(ConfigError::CapacityTooSmall(self.capacity_bytes));
        }
        if self.max_entries == Some(0) {
            return Err(ConfigError::NoEntries);
        }
        if !(self.max_entry_fraction > 0.0 && self.max_entry_fraction <= 1.0) {
            return Err(ConfigError::BadFraction(self.max_entry_fraction));
        }
        let shard_count = self.shard_count();
        let per_shard_bytes = self.capacity_bytes / shard_count;
        let per_shard_entries = self.max_entries.map_or(usize::MAX, |n| n.div_ceil(shard_count));
        let max_entry_weight = ((self.capacity_bytes as f64 * self.max_entry_fraction) as usize).min(per_shard_bytes);
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
        let lock_stripes = cores.min(16);
        let charge = self.charge;
        let shards =
            (0..shard_count).map(|_| Shard::new(per_shard_bytes, per_shard_entries, lock_stripes, charge)).collect();
        let stripe_count = (2 * cores).next_power_of_two();
        let inner = Arc::new(Inner {
            shards,
            stripes: (0..stripe_count).map(|_| Counters::default()).collect(),
            shard_mask: shard_count as u64 - 1,
            hasher: foldhash::quality::RandomState::default(),
            clock: self.clock,
            max_entry_weight,
            charge,
            capacity_bytes: self.capacity_bytes,
            crawl_budget: 4096,
            updates: (0..shard_count).map(|_| parking_lot::Mutex::new(())).collect(),
        });
        if let Some(interval) = self.maintenance_interval {
            spawn_maintenance(Arc::downgrade(&inner), interval);
        }
        Ok(MemoryStore { inner })
    }

    /// Enough shards for the cores, but few enough that each holds a useful share of the capacity (a policy
    /// split over too-small shards loses hit ratio) and that the largest allowed entry fits in one.
    fn shard_count(&self) -> usize {
        if let Some(n) = self.shards {
            return prev_power_of_two(n);
        }
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
        let by_cores = 4 * cores;
        let by_fraction = (1.0 / self.max_entry_fraction) as usize;
        let by_bytes = self.capacity_bytes / (4 << 20);
        let by_entries = self.max_entries.map_or(usize::MAX, |n| n / 4096);
        prev_power_of_two(by_cores.min(by_fraction).min(by_bytes).min(by_entries).clamp(1, 64))
    }
}

fn prev_power_of_two(n: usize) -> usize {
    if n.is_power_of_two() {
        n
    } else {
        n.next_power_of_two() / 2
    }
}

/// The embedded memory store. Cloning shares the same store.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    shards: Box<[Shard]>,
    stripes: Box<[Counters]>,
    shard_mask: u64,
    hasher: foldhash::quality::RandomState,
    clock: Arc<dyn Clock>,
    max_entry_weight: usize,
    charge: Charge,
    capacity_bytes: usize,
    crawl_budget: usize,
    /// One per shard: serialises read-modify-write operations (`incr`, `delete_if`) on that shard's keys.
    updates: Box<[parking_lot::Mutex<()>]>,
}

impl Inner {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard(&self, hash: u64) -> &Shard {
        // Bits 40..: the table uses the low bits and the top seven, the ghost the low bits and the top sixteen.
        &self.shards[((hash >> 40) & self.shard_mask) as usize]
    }

    /// This thread's counters.
    fn counters(&self) -> &Counters {
        &self.stripes[thread_index() & (self.stripes.len() - 1)]
    }

    fn run_maintenance(&self) -> usize {
        let now = LazyNow::new(&*self.clock);
        now.get();
        let hasher = |k: &[u8]| self.hash(k);
        self.shards.iter().map(|s| s.crawl(&now, self.crawl_budget, &hasher, self.counters())).sum()
    }
}

/// A small number per thread, to pick its counter stripe and its lock stripe.
pub(crate) fn thread_index() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    INDEX.with(|i| *i)
}

fn spawn_maintenance(inner: Weak<Inner>, interval: Duration) {
    let spawned = std::thread::Builder::new().name("larder-memory-maintenance".into()).spawn(move || loop {
        std::thread::sleep(interval);
        match inner.upgrade() {
            Some(inner) => {
                inner.run_maintenance();
            }
            None => return,
        }
    });
    // Without the thread, expired entries are still never returned and are reclaimed by reads and eviction.
    drop(spawned);
}

impl MemoryStore {
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder::default()
    }

    /// The live value for `key`.
    pub fn get_now(&self, key: &str) -> Option<Value> {
        let inner = &*self.inner;
        let hash = inner.hash(key.as_bytes());
        let hasher = |k: &[u8]| inner.hash(k);
        let now = LazyNow::new(&*inner.clock);
        inner
            .shard(hash)
            .get(hash, key.as_bytes(), &now, &hasher, inner.counters())
            .map(|entry| Value::from(bytes::Bytes::from_owner(entry)))
    }

    /// Whether a live value exists for `key` (not counted as a hit or miss).
    pub fn contains(&self, key: &str) -> bool {
        let inner = &*self.inner;
        let hash = inner.hash(key.as_bytes());
        inner.shard(hash).contains(hash, key.as_bytes(), &LazyNow::new(&*inner.clock))
    }

    /// Stores `value` under `key`; readable as soon as this returns.
    pub fn set_now(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        self.write(key, value, ttl, WriteMode::Set).map(|_| ())
    }

    /// Stores only if no live value exists; true if it stored.
    pub fn add_now(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        self.write(key, value, ttl, WriteMode::Add)
    }

    pub fn delete_now(&self, key: &str) -> bool {
        let inner = &*self.inner;
        let hash = inner.hash(key.as_bytes());
        let hasher = |k: &[u8]| inner.hash(k);
        inner.shard(hash).remove(hash, key.as_bytes(), &LazyNow::new(&*inner.clock), &hasher)
    }

    /// Adds `delta` to the counter at `key` (see [`Store::incr`]).
    pub fn incr_now(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        check_key(BACKEND, key)?;
        let _serialised = self.update_lock(key);
        let next = match self.get_now(key) {
            Some(value) => {
                let current = crate::counter::parse(&value)
                    .ok_or_else(|| StoreError::NotACounter { backend: BACKEND, key: key.to_owned() })?;
                current.saturating_add(delta)
            }
            None if create => delta,
            None => return Ok(None),
        };
        // A counter keeps the expiry it was created with, as memcached's and Redis's do.
        let ttl = match self.live_expiry(key) {
            Some((0, _)) => None,
            Some((expires_at, now)) => Some(Duration::from_millis(expires_at.saturating_sub(now).max(1))),
            None => ttl,
        };
        self.set_now(key, crate::counter::format(next).as_bytes(), ttl)?;
        Ok(Some(next))
    }

    /// Deletes `key` only while it holds `expected` (see [`Store::delete_if`]).
    pub fn delete_if_now(&self, key: &str, expected: &[u8]) -> bool {
        let _serialised = self.update_lock(key);
        match self.get_now(key) {
            Some(value) if *value == *expected => self.delete_now(key),
            _ => false,
        }
    }

    /// Removes entries whose key starts with `prefix`.
    pub fn purge_prefix_now(&self, prefix: &str) -> usize {
        let prefix = prefix.as_bytes();
        self.purge(|entry| entry.key().starts_with(prefix))
    }

    /// Removes entries whose header carries `tag` (values that are not entries have no tags).
    pub fn purge_tag_now(&self, tag: &str) -> usize {
        self.purge(|entry| {
            let value = entry.value();
            // Only entries with the tags flag (FORMAT.md §1) are parsed.
            value.len() >= FIXED_HEADER_LEN
                && value[..2] == MAGIC
                && value[6] & 0x04 != 0
                && Entry::parse(value).is_ok_and(|e| e.header.tags.contains(&tag))
        })
    }

    pub fn clear_now(&self) {
        for shard in self.inner.shards.iter() {
            shard.clear();
        }
    }

    pub fn stats_now(&self) -> StoreStats {
        let mut stats = StoreStats { capacity_bytes: self.inner.capacity_bytes as u64, ..StoreStats::default() };
        let load = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
        for c in self.inner.stripes.iter() {
            stats.hits += load(&c.hits);
            stats.misses += load(&c.misses);
            stats.inserts += load(&c.inserts);
            stats.evictions += load(&c.evictions);
            stats.expirations += load(&c.expirations);
            stats.rejections += load(&c.rejections);
        }
        for shard in self.inner.shards.iter() {
            let (entries, bytes, _) = shard.usage();
            stats.entries += entries as u64;
            stats.bytes += bytes as u64;
        }
        stats
    }

    /// Crawls every shard for expired entries once (what the background thread does each interval); returns how
    /// many it reclaimed.
    pub fn run_maintenance(&self) -> usize {
        self.inner.run_maintenance()
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.inner.shards.len()
    }

    /// The heaviest entry accepted, in weight (key + value + bookkeeping).
    pub fn max_entry_weight(&self) -> usize {
        self.inner.max_entry_weight
    }

    fn update_lock(&self, key: &str) -> parking_lot::MutexGuard<'_, ()> {
        let inner = &*self.inner;
        let index = (inner.hash(key.as_bytes()) & inner.shard_mask) as usize;
        inner.updates[index].lock()
    }

    /// A live key's expiry (0 = never) and the time now, or `None` when there is no live value.
    fn live_expiry(&self, key: &str) -> Option<(u64, u64)> {
        let inner = &*self.inner;
        let hash = inner.hash(key.as_bytes());
        let now = LazyNow::new(&*inner.clock);
        let expires_at = inner.shard(hash).expires_at(hash, key.as_bytes(), &now)?;
        Some((expires_at, now.get()))
    }

    fn purge(&self, matches: impl Fn(&EntryRef) -> bool) -> usize {
        let inner = &*self.inner;
        let hasher = |k: &[u8]| inner.hash(k);
        inner.shards.iter().map(|s| s.purge(&matches, &hasher)).sum()
    }

    fn write(&self, key: &str, value: &[u8], ttl: Option<Duration>, mode: WriteMode) -> Result<bool, StoreError> {
        let inner = &*self.inner;
        let hash = inner.hash(key.as_bytes());
        let shard = inner.shard(hash);
        let reject = |error: StoreError| {
            Counters::add(&inner.counters().rejections, 1);
            Err(error)
        };
        if let Err(error) = check_key(BACKEND, key) {
            return reject(error);
        }
        if inner.charge.weight_for(key.len(), value.len()) > inner.max_entry_weight || value.len() > MAX_VALUE_LEN {
            return reject(StoreError::TooLarge {
                backend: BACKEND,
                key: key.to_owned(),
                size: value.len(),
                limit: inner.max_entry_weight.saturating_sub(inner.charge.weight_for(key.len(), 0)),
            });
        }
        let now = LazyNow::new(&*inner.clock);
        let expires_at = effective_expiry(value, ttl, &now);
        if expires_at != 0 && expires_at <= now.get() {
            // Already past its hard expiry: storing it could only ever produce misses.
            if mode == WriteMode::Set {
                self.delete_now(key);
            }
            return Ok(mode == WriteMode::Set);
        }
        let entry = EntryRef::new(key.as_bytes(), value, expires_at);
        let hasher = |k: &[u8]| inner.hash(k);
        Ok(shard.insert(hash, entry, mode, &now, &hasher, inner.counters()))
    }
}

/// The earliest of the store-side TTL and the entry's own hard expiry (if the value is an entry); 0 = never.
fn effective_expiry(value: &[u8], ttl: Option<Duration>, now: &LazyNow<'_>) -> u64 {
    let from_ttl = ttl.map(|t| now.get().saturating_add(t.as_millis().min(u128::from(u64::MAX)) as u64).max(1));
    let from_header = crate::expiry::entry_hard_expiry(value).map(|e| e.max(1));
    match (from_ttl, from_header) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => 0,
    }
}

impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// Room for a value under a key of up to 250 bytes (the longest a safe key can be).
    fn max_value_bytes(&self) -> usize {
        let longest_safe_key = larder_format::key::MAX_KEY_LEN;
        self.inner.max_entry_weight.saturating_sub(shard::weight_for(longest_safe_key, 0)).min(MAX_VALUE_LEN)
    }

    // The synchronous methods need no check to be safe (an unsafe key is never stored, so it is never found);
    // the `Store` methods refuse one as every store does (spec/STORES.md §2).
    async fn get(&self, key: &str) -> Result<Option<Value>, StoreError> {
        check_key(BACKEND, key)?;
        Ok(self.get_now(key))
    }

    async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        keys.iter().try_for_each(|k| check_key(BACKEND, k))?;
        Ok(keys.iter().map(|k| self.get_now(k)).collect())
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        self.set_now(key, value, ttl)
    }

    async fn add(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        self.add_now(key, value, ttl)
    }

    async fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        self.incr_now(key, delta, ttl, create)
    }

    async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool, StoreError> {
        check_key(BACKEND, key)?;
        Ok(self.delete_if_now(key, expected))
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        check_key(BACKEND, key)?;
        Ok(self.delete_now(key))
    }

    async fn delete_many(&self, keys: &[&str]) -> Result<usize, StoreError> {
        keys.iter().try_for_each(|k| check_key(BACKEND, k))?;
        Ok(keys.iter().filter(|k| self.delete_now(k)).count())
    }

    async fn clear(&self) -> Result<(), StoreError> {
        self.clear_now();
        Ok(())
    }

    async fn purge_prefix(&self, prefix: &str) -> Result<Purged, StoreError> {
        check_prefix(BACKEND, prefix)?;
        Ok(Purged::Removed(self.purge_prefix_now(prefix)))
    }

    async fn purge_tag(&self, tag: &str) -> Result<Purged, StoreError> {
        Ok(Purged::Removed(self.purge_tag_now(tag)))
    }

    async fn stats(&self) -> Result<StoreStats, StoreError> {
        Ok(self.stats_now())
    }
}
