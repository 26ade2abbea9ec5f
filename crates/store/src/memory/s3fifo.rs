//! The eviction policy: S3-FIFO (Yang et al., SOSP 2023), weighted by bytes, with an optional entry-count bound.
//!
//! New entries enter a small FIFO; those read at least twice while there move to the main FIFO, the rest leave and
//! are remembered in the ghost, so that a quick return goes straight to main. Main is a CLOCK: an entry read since
//! its last pass gets another round. A read only bumps a counter in the entry, which is why the read path takes no
//! exclusive lock. One-hit wonders and scans pass through the small queue without displacing the main working set
//! (scan resistance).
//!
//! Parameters were chosen by replaying the shipped traces (docs/benchmarks.md, "hit ratio"): a small queue of 20%
//! of capacity and promotion after two reads beat ARC on every ARC-paper capacity of the OLTP trace.
//!
//! Admission by frequency (crates/bench/RESULTS-memory.md, 2026-11-29): a count-min sketch of recent insertions
//! (`sketch.rs`, about a byte per entry, updated by writes only) remembers keys that missed before, over about two
//! cache fills. An entry read once in the small queue moves to main if it had missed before: it has then been
//! asked for at least three times lately, the test "read twice in small" applies over a longer window. That keeps
//! the blocks a trace re-reads at a distance longer than the small queue plus the ghost (libCacheSim's cloudPhysics
//! sample, where ARC and SIEVE keep them and plain S3-FIFO does not).

use super::entry::{EntryRef, IN_MAIN};
use super::ghost::Ghost;
use super::queue::Fifo;
use super::sketch::Sketch;
use crate::clock::LazyNow;

/// Share of capacity given to the small queue.
const SMALL_SHARE: f64 = 0.20;
/// Sketch counters per entry held (4 bits each: a byte per entry, rounded up to a power of two per shard; one
/// counter per entry collided enough to cost lirs-sprite at 5,000 entries 0.2 points).
const SKETCH_PER_ENTRY: usize = 2;
/// The sketch halves its counters every this many insertions per entry held, so it remembers about two cache
/// fills of misses: longer than the ghost's window, which is what the returning keys of byte-sized block traces
/// need; a longer memory (4, 10 fills) promoted too much on arc-OLTP, a shorter one (1) lost cloudPhysics' gain.
const SKETCH_RESET: usize = 2;
/// Misses seen before (by the sketch) that let an entry read once in the small queue move to main.
const PROMOTE_RETURNING_AFTER: u8 = 1;
/// Where `admit` keeps the sketch's count (0..=3) of the entry's earlier misses: flag bits 2 and 3.
const PRIOR_SHIFT: u8 = 2;
const PRIOR_MASK: u8 = 0x0C;
/// Reads needed in the small queue to be promoted to main.
const PROMOTE_AFTER: u8 = 2;
/// Ghost size relative to the number of entries the cache holds.
const GHOST_SHARE: f64 = 0.9;

/// Why an entry left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Evicted,
    Expired,
}

pub struct S3Fifo {
    small: Fifo,
    main: Fifo,
    ghost: Ghost,
    sketch: Sketch,
    capacity_weight: usize,
    capacity_entries: usize,
}

impl S3Fifo {
    /// A policy bounded by `capacity_weight` (sum of entry weights) and `capacity_entries`.
    pub fn new(capacity_weight: usize, capacity_entries: usize) -> S3Fifo {
        let mut policy = S3Fifo {
            small: Fifo::default(),
            main: Fifo::default(),
            ghost: Ghost::new(16),
            sketch: Sketch::new(64, 64 * SKETCH_RESET),
            capacity_weight,
            capacity_entries,
        };
        policy.ghost = Ghost::new(policy.ghost_capacity());
        policy
    }

    pub fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }

    pub fn weight(&self) -> usize {
        self.small.weight() + self.main.weight()
    }

    pub fn capacity_weight(&self) -> usize {
        self.capacity_weight
    }

    pub fn over_capacity(&self) -> bool {
        self.weight() > self.capacity_weight || self.len() > self.capacity_entries
    }

    /// Takes in a new entry (already in the table).
    pub fn admit(&mut self, entry: EntryRef, hash: u64, weight: usize) {
        self.resize_ghost();
        let prior = self.sketch.estimate(hash).min(3);
        self.sketch.increment(hash);
        entry.set_flags((entry.flags() & !PRIOR_MASK) | (prior << PRIOR_SHIFT));
        if self.ghost.contains(hash) {
            entry.set_flags(entry.flags() | IN_MAIN);
            self.main.push_back(entry, weight);
        } else {
            self.small.push_back(entry, weight);
        }
    }

    /// Takes an entry out of whichever queue holds it (delete, replace, expiry found on read).
    pub fn remove(&mut self, entry: &EntryRef, weight: usize) -> Option<EntryRef> {
        if entry.flags() & IN_MAIN != 0 {
            self.main.remove(entry, weight)
        } else {
            self.small.remove(entry, weight)
        }
    }

    /// Chooses and removes the next entry to leave; expired entries leave first whenever the hand meets them.
    /// `hash` recomputes a key's hash (for the ghost); `weight` gives an entry's weight.
    pub fn evict(
        &mut self,
        now: &LazyNow<'_>,
        hash: impl Fn(&[u8]) -> u64,
        weight: impl Fn(&EntryRef) -> usize,
    ) -> Option<(EntryRef, Exit)> {
        loop {
            let small_full = self.small.weight() as f64 >= self.capacity_weight as f64 * SMALL_SHARE
                || self.small.len() as f64 >= self.capacity_entries as f64 * SMALL_SHARE;
            if !self.small.is_empty() && (small_full || self.main.is_empty()) {
                let entry = self.small.pop_front(&weight)?;
                if entry.is_expired(now) {
                    return Some((entry, Exit::Expired));
                }
                let prior = (entry.flags() & PRIOR_MASK) >> PRIOR_SHIFT;
                let f = entry.freq();
                if f >= PROMOTE_AFTER || (f >= 1 && prior >= PROMOTE_RETURNING_AFTER) {
                    entry.set_freq(0);
                    entry.set_flags(entry.flags() | IN_MAIN);
                    let w = weight(&entry);
                    self.main.push_back(entry, w);
                    continue;
                }
                self.ghost.insert(hash(entry.key()));
                return Some((entry, Exit::Evicted));
            }
            let entry = self.main.pop_front(&weight)?;
            if entry.is_expired(now) {
                return Some((entry, Exit::Expired));
            }
            let freq = entry.freq();
            if freq > 0 {
                entry.set_freq(freq - 1);
                let w = weight(&entry);
                self.main.push_back(entry, w);
                continue;
            }
            return Some((entry, Exit::Evicted));
        }
    }

    /// Up to `limit` queue slots from `cursor` on, for the expiry crawler; returns the next cursor.
    pub fn crawl(&self, cursor: usize, limit: usize) -> (Vec<EntryRef>, usize) {
        let small_slots = self.small.slot_count();
        let total = small_slots + self.main.slot_count();
        if total == 0 {
            return (Vec::new(), 0);
        }
        let start = if cursor >= total { 0 } else { cursor };
        let mut found: Vec<EntryRef> = Vec::new();
        if start < small_slots {
            found.extend(self.small.window(start, limit).cloned());
        }
        let main_skip = start.saturating_sub(small_slots);
        let main_limit = (start + limit).saturating_sub(small_slots.max(start));
        found.extend(self.main.window(main_skip, main_limit).cloned());
        (found, start + limit)
    }

    /// Every entry, small queue first.
    pub fn iter(&self) -> impl Iterator<Item = &EntryRef> {
        self.small.iter().chain(self.main.iter())
    }

    pub fn clear(&mut self) {
        self.small.clear();
        self.main.clear();
        self.ghost.clear();
        self.sketch.clear();
    }

    /// Keeps the ghost sized to the number of entries held (byte-bounded caches learn it as they fill).
    fn resize_ghost(&mut self) {
        let wanted = self.ghost_capacity();
        let have = self.ghost.capacity();
        if wanted > 2 * have || (wanted < have / 4 && have > 1024) {
            self.ghost = Ghost::new(wanted);
        }
        let entries = self.entries_held();
        let counters = entries * SKETCH_PER_ENTRY;
        let have = self.sketch.counters();
        if counters > 2 * have || (counters < have / 4 && have > 1024) {
            self.sketch = Sketch::new(counters, entries * SKETCH_RESET);
        }
    }
}

impl S3Fifo {
    /// A count-bounded cache remembers as many ghosts as it holds entries; a byte-bounded one follows its size.
    fn ghost_capacity(&self) -> usize {
        ((self.entries_held() as f64 * GHOST_SHARE) as usize).max(16)
    }

    /// The entry count the ghost and the sketch are sized for: the bound, or what a byte-bounded cache holds.
    fn entries_held(&self) -> usize {
        if self.capacity_entries == usize::MAX {
            self.len().max(1024)
        } else {
            self.capacity_entries
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::memory::MemoryStore;

    #[test]
    fn a_key_read_again_after_its_ghost_is_gone_earns_main_on_its_next_visit() {
        // 1,000 entries: small 200, ghost 900. 100 keys are set and read once, then 1,500 one-time keys pass (the
        // keys leave small unpromoted and their ghosts are forgotten); then the same again. On the second visit the
        // sketch knows they missed before, so one read is enough to reach main, and they survive the next scan.
        let store = MemoryStore::builder().capacity_bytes(64 << 20).max_entries(1_000).shards(1).build().expect("ok");
        let mut scan = 0;
        let mut survivors = Vec::new();
        for _ in 0..2 {
            for i in 0..100 {
                let key = format!("r{i}");
                if store.get_now(&key).is_none() {
                    store.set_now(&key, b"v", None).expect("stored");
                }
            }
            for i in 0..100 {
                assert!(store.get_now(&format!("r{i}")).is_some());
            }
            for _ in 0..1_500 {
                store.set_now(&format!("scan{scan}"), b"v", None).expect("stored");
                scan += 1;
            }
            survivors.push((0..100).filter(|i| store.contains(&format!("r{i}"))).count());
        }
        assert!(survivors[0] < 10, "read once on a first visit is not enough: {survivors:?}");
        assert!(survivors[1] >= 90, "read once on a return is: {survivors:?}");
    }
}
