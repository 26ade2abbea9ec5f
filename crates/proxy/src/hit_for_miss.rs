//! Hit-for-miss (Varnish's name): a short memory of URLs whose responses could not be stored (`private`,
//! `Set-Cookie`, too large…). Requests for them go straight upstream, in parallel, instead of queueing behind one
//! another as coalesced misses would. The memory is per process, bounded, and only a hint: a URL remembered by
//! mistake (a hash collision, or an app that changed its mind) loses coalescing for a while, never correctness,
//! because the response of a request sent this way is still stored when it may be.

use std::collections::HashMap;
use std::hash::BuildHasher;

use parking_lot::Mutex;

const SHARDS: usize = 16;

/// URLs remembered as not storable, each until a time (ms since the epoch).
pub struct HitForMiss {
    shards: [Mutex<HashMap<u64, u64>>; SHARDS],
    per_shard: usize,
    hasher: std::collections::hash_map::RandomState,
}

impl HitForMiss {
    /// Remembers at most `capacity` URLs.
    pub fn new(capacity: usize) -> HitForMiss {
        HitForMiss {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    fn locate(&self, key: &str) -> (&Mutex<HashMap<u64, u64>>, u64) {
        let hash = self.hasher.hash_one(key);
        (&self.shards[(hash % SHARDS as u64) as usize], hash)
    }

    /// Whether `key` is remembered as not storable at `now_ms`.
    pub fn contains(&self, key: &str, now_ms: u64) -> bool {
        let (shard, hash) = self.locate(key);
        shard.lock().get(&hash).is_some_and(|until| now_ms < *until)
    }

    /// Remembers `key` until `until_ms`. A full shard first drops what has expired, then, if still full, everything:
    /// the memory is a hint and must stay bounded.
    pub fn remember(&self, key: &str, now_ms: u64, until_ms: u64) {
        let (shard, hash) = self.locate(key);
        let mut map = shard.lock();
        if map.len() >= self.per_shard && !map.contains_key(&hash) {
            map.retain(|_, until| now_ms < *until);
            if map.len() >= self.per_shard {
                map.clear();
            }
        }
        map.insert(hash, until_ms);
    }

    /// Forgets `key` (its response was stored after all).
    pub fn forget(&self, key: &str) {
        let (shard, hash) = self.locate(key);
        shard.lock().remove(&hash);
    }

    /// URLs remembered now (expired ones included until they are dropped).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_a_time_and_stays_bounded() {
        let memory = HitForMiss::new(64);
        memory.remember("a", 1_000, 2_000);
        assert!(memory.contains("a", 1_500));
        assert!(!memory.contains("a", 2_000));
        assert!(!memory.contains("b", 1_500));
        memory.forget("a");
        assert!(!memory.contains("a", 1_500));
        for i in 0..10_000 {
            memory.remember(&format!("url/{i}"), 1_000, 2_000);
        }
        assert!(memory.len() <= 64, "{} remembered", memory.len());
    }
}
