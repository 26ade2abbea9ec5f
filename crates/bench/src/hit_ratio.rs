//! `larder bench hit-ratio`: replays a trace through the real memory store and through an exact LRU of the same
//! capacity, in the same harness, and reports both hit ratios. Unsized traces bound the store by entry count;
//! traces with object sizes bound it by bytes, with the same weights (key, value, bookkeeping) for both.

use std::collections::HashMap;
use std::time::Duration;

use larder_store::memory::weight_for;
use larder_store::MemoryStore;
use serde::Serialize;

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
    pub shards: usize,
}

/// Replays `requests` at `capacity` through larder's memory store and an exact LRU.
pub fn replay(trace: &str, requests: &[Request], capacity: usize) -> Result<HitRatioRow, String> {
    let sized = requests.first().is_some_and(|r| r.size.is_some());
    let builder = MemoryStore::builder().maintenance_interval(None);
    let (store, unit) = if sized {
        (builder.capacity_bytes(capacity).build(), "bytes")
    } else {
        (builder.capacity_bytes(usize::MAX / 2).max_entries(capacity).build(), "entries")
    };
    let store = store.map_err(|e| e.to_string())?;
    let largest = requests.iter().filter_map(|r| r.size).max().unwrap_or(0) as usize;
    let zeros = vec![0u8; largest];
    let mut lru =
        WeightedLru::new(if sized { capacity } else { usize::MAX }, if sized { usize::MAX } else { capacity });
    let max_weight = store.max_entry_weight();
    let (mut larder_hits, mut lru_hits) = (0u64, 0u64);
    let mut key = String::new();
    for request in requests {
        key.clear();
        key.push_str(&request.key.to_string());
        let size = request.size.unwrap_or(0) as usize;
        if store.get_now(&key).is_some() {
            larder_hits += 1;
        } else {
            // Objects over the store's entry limit are refused; the LRU refuses the same ones below.
            let _ = store.set_now(&key, &zeros[..size], None::<Duration>);
        }
        let weight = weight_for(key.len(), size);
        if lru.access(request.key, weight, weight <= max_weight) {
            lru_hits += 1;
        }
    }
    let n = requests.len().max(1) as f64;
    Ok(HitRatioRow {
        trace: trace.to_owned(),
        capacity,
        capacity_unit: unit,
        requests: requests.len(),
        larder_hit_ratio: larder_hits as f64 / n,
        lru_hit_ratio: lru_hits as f64 / n,
        shards: store.shard_count(),
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
