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

use super::entry::{EntryRef, IN_MAIN};
use super::ghost::Ghost;
use super::queue::Fifo;
use crate::clock::LazyNow;

/// Share of capacity given to the small queue.
const SMALL_SHARE: f64 = 0.20;
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
                if entry.freq() >= PROMOTE_AFTER {
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
    }

    /// Keeps the ghost sized to the number of entries held (byte-bounded caches learn it as they fill).
    fn resize_ghost(&mut self) {
        let wanted = self.ghost_capacity();
        let have = self.ghost.capacity();
        if wanted > 2 * have || (wanted < have / 4 && have > 1024) {
            self.ghost = Ghost::new(wanted);
        }
    }
}

impl S3Fifo {
    /// A count-bounded cache remembers as many ghosts as it holds entries; a byte-bounded one follows its size.
    fn ghost_capacity(&self) -> usize {
        let entries = if self.capacity_entries == usize::MAX { self.len().max(1024) } else { self.capacity_entries };
        ((entries as f64 * GHOST_SHARE) as usize).max(16)
    }
}
