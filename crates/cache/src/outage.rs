//! The outage memory (spec/STORES.md §3, "When the store fails"): what this process loaded while its store failed,
//! kept in a bounded memory store so that a frozen, killed or refusing store does not send every request to the
//! loader or the app. Only a *failure* counts (no connection, a timeout, a broken reply, a server refused at once
//! while ejected): a key that is invalid or a value too large is the caller's error, not an outage.
//!
//! - A write the store fails is kept here, under the same key and expiry; a read the store fails is answered from
//!   here. Deletes and purges apply here too.
//! - A good answer from the shared store itself once no failure has been seen for a second empties it: nothing is
//!   written back, since other processes may have written newer values, and a purge sent during the outage may have
//!   been lost. "Once no failure for a second": with several servers (a memcached pool, a Redis Cluster failing
//!   over) the others answer while one fails, and their answers must not drop what the failing one's keys need.
//!   "Itself": an L1 copy answering while its L2 is down is not the store answering, so the store's own server
//!   reports must all read `up` too (checked at most every 100 ms, and only while a failure is on record).
//! - Healthy, it costs a read one relaxed atomic load.
//! - Over a store with an L1 (spec/STORES.md §9), the L1 *is* the outage memory: a value loaded during the outage
//!   is kept there for its own lifetime rather than `l1_ttl`, and the whole L1 is dropped on recovery (it refills
//!   from the store within `l1_ttl`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use larder_store::{MemoryStore, Store, StoreError, Value};

/// How often, at most, a good answer during an outage looks at the servers' reports.
const RECOVERY_CHECK_MS: u64 = 100;

/// How long the store must go without a failure before a good answer empties the outage memory.
pub(crate) const QUIET_MS: u64 = 1000;

/// The default size in the libraries (spec/STORES.md §3); the front's is its `outage_memory` setting.
pub const DEFAULT_OUTAGE_MEMORY: usize = 16 << 20;

#[derive(Default)]
pub(crate) struct OutageMemory {
    memory: Option<MemoryStore>,
    /// A failure is on record and no good answer has followed it.
    failing: AtomicBool,
    last_failure_ms: AtomicU64,
    next_recovery_check_ms: AtomicU64,
}

impl OutageMemory {
    pub(crate) fn new(memory: Option<MemoryStore>) -> OutageMemory {
        OutageMemory { memory, ..OutageMemory::default() }
    }

    /// Whether the store is failing now, as far as this cache has seen.
    pub(crate) fn is_failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// Notes what a call of the store came to; `true` if it was a failure.
    pub(crate) fn observe<T, S: Store>(&self, result: &Result<T, StoreError>, store: &S, now_ms: u64) -> bool {
        match result {
            Ok(_) => {
                if self.is_failing() {
                    self.maybe_recovered(store, now_ms);
                }
                false
            }
            Err(error) if is_failure(error) => {
                self.last_failure_ms.store(now_ms, Ordering::Relaxed);
                self.failing.store(true, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    fn maybe_recovered<S: Store>(&self, store: &S, now_ms: u64) {
        let due = self.next_recovery_check_ms.load(Ordering::Relaxed);
        if now_ms < due || now_ms.saturating_sub(self.last_failure_ms.load(Ordering::Relaxed)) < QUIET_MS {
            return;
        }
        self.next_recovery_check_ms.store(now_ms + RECOVERY_CHECK_MS, Ordering::Relaxed);
        if !store.server_reports().iter().all(|server| server.state == "up") {
            return;
        }
        if self.failing.swap(false, Ordering::Relaxed) {
            if let Some(memory) = &self.memory {
                let kept = memory.stats_now().entries;
                memory.clear_now();
                tracing::info!(
                    "{}: answering again; the outage memory's {kept} entries are dropped, not written back",
                    store.backend()
                );
            }
        }
    }

    /// What the outage memory holds for `key`.
    pub(crate) fn get(&self, key: &str) -> Option<Value> {
        self.memory.as_ref()?.get_now(key)
    }

    /// Keeps a value whose write the store failed (a value the memory cannot hold is not kept).
    pub(crate) fn keep(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> bool {
        self.memory.as_ref().is_some_and(|memory| memory.set_now(key, value, ttl).is_ok())
    }

    pub(crate) fn forget(&self, key: &str) {
        if let Some(memory) = &self.memory {
            memory.delete_now(key);
        }
    }

    pub(crate) fn forget_prefix(&self, prefix: &str) {
        if let Some(memory) = &self.memory {
            memory.purge_prefix_now(prefix);
        }
    }

    pub(crate) fn forget_tag(&self, tag: &str) {
        if let Some(memory) = &self.memory {
            memory.purge_tag_now(tag);
        }
    }
}

/// Whether an error is the store failing (rather than the caller's request being refused).
pub(crate) fn is_failure(error: &StoreError) -> bool {
    matches!(error, StoreError::Server { .. } | StoreError::Timeout { .. })
}
