//! `larder bench hit-ratio`: replays a trace through the real memory store and through an exact LRU of the same
//! capacity, in the same harness, and reports both: the share of requests answered (request hit ratio) and, for
//! traces that record object sizes, the share of requested bytes answered (byte hit ratio) and the miss counts that
//! simulators such as libCacheSim publish. Unsized traces bound the store by entry count; sized traces bound it by
//! bytes, counting object sizes only as those simulators do (the store's own bookkeeping, 0.2% of a 38 KB object,
//! would otherwise make the comparison inexact), unless told to charge what the store charges in service.
//! Measured: the LRU column reproduces the ARC paper's LRU figures on OLTP and libCacheSim's published LRU miss
//! counts on its cloudPhysics sample exactly (tests below and docs/benchmarks.md), which checks the readers.

use std::collections::HashMap;
use std::time::Duration;

use larder_store::memory::weight_for;
use larder_store::MemoryStore;
use serde::Serialize;

use crate::policies::{Policy, Reference};
use crate::trace::Request;

/// One capacity's result.
#[derive(Debug, Clone, Serialize)]
pub struct HitRatioRow {
    pub trace: String,
    /// Entries for unsized traces, bytes for sized ones.
    pub capacity: usize,
    pub capacity_unit: &'static str,
    pub requests: usize,
    pub larder_hit_ratio: f64,
    pub lru_hit_ratio: f64,
    pub larder_misses: u64,
    pub lru_misses: u64,
    /// Sized traces only: every requested byte, and the shares and amounts the caches answered and missed.
    pub requested_bytes: Option<u64>,
    pub larder_byte_hit_ratio: Option<f64>,
    pub lru_byte_hit_ratio: Option<f64>,
    pub larder_missed_bytes: Option<u64>,
    pub lru_missed_bytes: Option<u64>,
    pub shards: usize,
    /// The reference policies replayed beside larder (ARC, S3-FIFO, SIEVE), in the order asked for.
    pub references: Vec<PolicyRow>,
}

/// One reference policy's result at one capacity.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRow {
    pub policy: &'static str,
    pub hit_ratio: f64,
    pub misses: u64,
    pub byte_hit_ratio: Option<f64>,
    pub missed_bytes: Option<u64>,
}

/// How a replay sets up the store.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Shard count; `None` lets the store choose, as it does in service.
    pub shards: Option<usize>,
    /// Sized traces: charge each entry what the store charges in service (key, value and bookkeeping) instead of
    /// the object's size alone.
    pub charge_bookkeeping: bool,
    /// Reference policies to replay beside larder and LRU.
    pub references: Vec<Reference>,
}

/// Replays `requests` at `capacity` through larder's memory store and an exact LRU, the store as it runs by default.
pub fn replay(trace: &str, requests: &[Request], capacity: usize) -> Result<HitRatioRow, String> {
    replay_with(trace, requests, capacity, ReplayOptions::default())
}

/// Replays `requests` at `capacity` through larder's memory store and an exact LRU.
pub fn replay_with(
    trace: &str,
    requests: &[Request],
    capacity: usize,
    options: ReplayOptions,
) -> Result<HitRatioRow, String> {
    let sized = requests.first().is_some_and(|r| r.size.is_some());
    let mut builder = MemoryStore::builder().maintenance_interval(None);
    if let Some(shards) = options.shards {
        builder = builder.shards(shards);
    }
    let values_only = sized && !options.charge_bookkeeping;
    let (store, unit) = if sized {
        (builder.capacity_bytes(capacity).charge_values_only(values_only).build(), "bytes")
    } else {
        (builder.capacity_bytes(usize::MAX / 2).max_entries(capacity).build(), "entries")
    };
    let store = store.map_err(|e| e.to_string())?;
    let largest = requests.iter().filter_map(|r| r.size).max().unwrap_or(0) as usize;
    let zeros = vec![0u8; largest];
    let mut lru =
        WeightedLru::new(if sized { capacity } else { usize::MAX }, if sized { usize::MAX } else { capacity });
    let max_weight = store.max_entry_weight();
    // The references take the unit the capacity is in: bytes (as charged) for sized traces, 1 per entry otherwise.
    let mut references: Vec<(Reference, Box<dyn Policy>, u64, u64)> =
        options.references.iter().map(|&r| (r, r.build(capacity as u64), 0, 0)).collect();
    let (mut larder_hits, mut lru_hits) = (0u64, 0u64);
    let (mut requested, mut larder_hit_bytes, mut lru_hit_bytes) = (0u64, 0u64, 0u64);
    let mut key = String::new();
    for request in requests {
        key.clear();
        key.push_str(&request.key.to_string());
        let size = request.size.unwrap_or(0) as usize;
        requested += size as u64;
        if store.get_now(&key).is_some() {
            larder_hits += 1;
            larder_hit_bytes += size as u64;
        } else {
            // Objects over the store's entry limit are refused; the LRU refuses the same ones below.
            let _ = store.set_now(&key, &zeros[..size], None::<Duration>);
        }
        let weight = if values_only { size.max(1) } else { weight_for(key.len(), size) };
        if lru.access(request.key, weight, weight <= max_weight) {
            lru_hits += 1;
            lru_hit_bytes += size as u64;
        }
        let unit = if sized { weight as u64 } else { 1 };
        for (_, policy, hits, hit_bytes) in &mut references {
            if policy.access(request.key, unit) {
                *hits += 1;
                *hit_bytes += size as u64;
            }
        }
    }
    let n = requests.len().max(1) as f64;
    let of_bytes = |hit: u64| sized.then(|| hit as f64 / requested.max(1) as f64);
    Ok(HitRatioRow {
        trace: trace.to_owned(),
        capacity,
        capacity_unit: unit,
        requests: requests.len(),
        larder_hit_ratio: larder_hits as f64 / n,
        lru_hit_ratio: lru_hits as f64 / n,
        larder_misses: requests.len() as u64 - larder_hits,
        lru_misses: requests.len() as u64 - lru_hits,
        requested_bytes: sized.then_some(requested),
        larder_byte_hit_ratio: of_bytes(larder_hit_bytes),
        lru_byte_hit_ratio: of_bytes(lru_hit_bytes),
        larder_missed_bytes: sized.then(|| requested - larder_hit_bytes),
        lru_missed_bytes: sized.then(|| requested - lru_hit_bytes),
        shards: store.shard_count(),
        references: references
            .into_iter()
            .map(|(reference, _, hits, hit_bytes)| PolicyRow {
                policy: reference.name(),
                hit_ratio: hits as f64 / n,
                misses: requests.len() as u64 - hits,
                byte_hit_ratio: of_bytes(hit_bytes),
                missed_bytes: sized.then(|| requested - hit_bytes),
            })
            .collect(),
    })
}

/// An exact LRU bounded by total weight and by entry count: the baseline every policy is compared with.
struct WeightedLru {
    map: HashMap<u64, usize>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    weight: usize,
    capacity_weight: usize,
    capacity_entries: usize,
}

struct Node {
    key: u64,
    weight: usize,
    prev: usize,
    next: usize,
}

const NIL: usize = usize::MAX;

impl WeightedLru {
    fn new(capacity_weight: usize, capacity_entries: usize) -> Self {
        WeightedLru {
            map: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            weight: 0,
            capacity_weight,
            capacity_entries,
        }
    }

    /// True on a hit. On a miss the key is inserted (if `admit`) and the least recent entries leave.
    fn access(&mut self, key: u64, weight: usize, admit: bool) -> bool {
        if let Some(&i) = self.map.get(&key) {
            self.unlink(i);
            self.push_front(i);
            return true;
        }
        if !admit {
            return false;
        }
        let node = Node { key, weight, prev: NIL, next: NIL };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.push_front(i);
        self.map.insert(key, i);
        self.weight += weight;
        while (self.weight > self.capacity_weight || self.map.len() > self.capacity_entries) && self.tail != NIL {
            let victim = self.tail;
            self.unlink(victim);
            self.weight -= self.nodes[victim].weight;
            self.map.remove(&self.nodes[victim].key);
            self.free.push(victim);
        }
        false
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next].prev = prev;
        }
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].prev = NIL;
        self.nodes[i].next = self.head;
        if self.head != NIL {
            self.nodes[self.head].prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reqs(keys: &[u64]) -> Vec<Request> {
        keys.iter().map(|&key| Request { key, size: None }).collect()
    }

    #[test]
    fn lru_evicts_the_least_recently_used() {
        let mut lru = WeightedLru::new(usize::MAX, 2);
        assert!(!lru.access(1, 1, true));
        assert!(!lru.access(2, 1, true));
        assert!(lru.access(1, 1, true));
        assert!(!lru.access(3, 1, true)); // evicts 2, the least recent
        assert!(lru.access(1, 1, true));
        assert!(!lru.access(2, 1, true));
    }

    #[test]
    fn sized_replays_count_bytes_and_misses_as_simulators_do() {
        let sized = |pairs: &[(u64, u32)]| -> Vec<Request> {
            pairs.iter().map(|&(key, size)| Request { key, size: Some(size) }).collect()
        };
        // Everything fits in 64 KiB: each object misses once, and the hits are the repeats.
        let trace = sized(&[(1, 1024), (2, 2048), (1, 1024), (2, 2048), (3, 4096), (3, 4096), (1, 1024)]);
        let row = replay("bytes", &trace, 64 * 1024).expect("replays");
        assert_eq!(row.capacity_unit, "bytes");
        assert_eq!(row.requested_bytes, Some(15 * 1024));
        assert_eq!((row.lru_misses, row.larder_misses), (3, 3));
        assert_eq!((row.lru_missed_bytes, row.larder_missed_bytes), (Some(7 * 1024), Some(7 * 1024)));
        for ratio in [row.lru_byte_hit_ratio, row.larder_byte_hit_ratio] {
            assert!((ratio.expect("sized") - 8.0 / 15.0).abs() < 1e-9, "{ratio:?}");
        }
        assert!((row.larder_hit_ratio - 4.0 / 7.0).abs() < 1e-9);
        // Unsized traces report no bytes.
        let counted = replay("keys", &reqs(&[1, 2, 1]), 10).expect("replays");
        assert_eq!((counted.requested_bytes, counted.larder_byte_hit_ratio), (None, None));
        assert_eq!((counted.larder_misses, counted.lru_misses), (2, 2));
    }

    #[test]
    fn charging_bookkeeping_leaves_room_for_fewer_objects() {
        // 64 objects of 4000 bytes in a 256,000-byte cache: counted by object size they all fit, so the second
        // pass hits every time; charged with keys and bookkeeping they do not, and LRU misses the whole pass.
        let pass: Vec<Request> = (0..64).map(|key| Request { key, size: Some(4000) }).collect();
        let trace: Vec<Request> = pass.iter().chain(pass.iter()).copied().collect();
        let options = ReplayOptions { shards: Some(1), ..ReplayOptions::default() };
        let objects_only = replay_with("fit", &trace, 256_000, options.clone()).expect("replays");
        assert_eq!((objects_only.lru_misses, objects_only.larder_misses), (64, 64));
        let charged = ReplayOptions { charge_bookkeeping: true, ..options };
        let with_bookkeeping = replay_with("fit", &trace, 256_000, charged).expect("replays");
        assert_eq!(with_bookkeeping.lru_misses, 128);
        assert!(with_bookkeeping.larder_misses > 64);
    }

    #[test]
    fn replay_counts_hits_for_both() {
        // A hot set read three times per round, then a scan of new keys longer than the cache: LRU loses the hot
        // set to every scan, a scan-resistant policy keeps it.
        let mut trace = Vec::new();
        let mut next_cold = 1_000;
        for _ in 0..20 {
            for _ in 0..3 {
                trace.extend(0..10);
            }
            trace.extend(next_cold..next_cold + 50);
            next_cold += 50;
        }
        let row = replay("scan", &reqs(&trace), 20).expect("replays");
        assert!((row.lru_hit_ratio - 20.0 / 80.0).abs() < 0.01, "{}", row.lru_hit_ratio);
        assert!(row.larder_hit_ratio > row.lru_hit_ratio + 0.05, "{} vs {}", row.larder_hit_ratio, row.lru_hit_ratio);
        let trace: Vec<u64> = (0..300).map(|i| i % 3).collect();
        let everything_fits = replay("fits", &reqs(&trace), 10).expect("replays");
        assert_eq!(everything_fits.larder_hit_ratio, 297.0 / 300.0);
        assert_eq!(everything_fits.lru_hit_ratio, 297.0 / 300.0);
    }
}
