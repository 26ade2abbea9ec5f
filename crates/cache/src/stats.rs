//! What the cache layer counts, beyond what its store counts.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one cache (shared by its namespaces).
#[derive(Debug, Default)]
pub struct CacheCounters {
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) stale_served: AtomicU64,
    pub(crate) loads: AtomicU64,
    pub(crate) coalesced_waits: AtomicU64,
    pub(crate) coalesced_across_processes: AtomicU64,
    pub(crate) corrupt_entries: AtomicU64,
    pub(crate) store_errors: AtomicU64,
}

/// A snapshot of [`CacheCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Stale values returned while another caller recomputed.
    pub stale_served: u64,
    /// Loader runs.
    pub loads: u64,
    /// Callers that waited for another's loader instead of running their own.
    pub coalesced_waits: u64,
    /// Cold misses answered by the value another process computed under the store lock (spec/STORES.md §3).
    pub coalesced_across_processes: u64,
    /// Entries that failed to decode and were treated as misses.
    pub corrupt_entries: u64,
    /// Store failures absorbed (reads treated as misses, writes skipped).
    pub store_errors: u64,
}

impl CacheCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> CacheStats {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CacheStats {
            hits: load(&self.hits),
            misses: load(&self.misses),
            stale_served: load(&self.stale_served),
            loads: load(&self.loads),
            coalesced_waits: load(&self.coalesced_waits),
            coalesced_across_processes: load(&self.coalesced_across_processes),
            corrupt_entries: load(&self.corrupt_entries),
            store_errors: load(&self.store_errors),
        }
    }
}
