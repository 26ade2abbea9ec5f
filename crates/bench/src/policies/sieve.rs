//! SIEVE (Zhang et al., NSDI'24) as libCacheSim implements it (libCacheSim/cache/eviction/Sieve.c), byte-aware: one
//! FIFO, a visited bit set on every hit, and a hand that walks from the oldest entry towards the newest, clearing
//! visited bits, and evicts the first unvisited entry it meets; new entries go in at the head, behind the hand.

use std::collections::HashMap;

use super::list::{List, Slab, NIL};
use super::Policy;

pub struct Sieve {
    slab: Slab,
    map: HashMap<u64, u32>,
    queue: List,
    hand: u32,
    capacity: u64,
}

impl Sieve {
    pub fn new(capacity: u64) -> Sieve {
        Sieve { slab: Slab::default(), map: HashMap::new(), queue: List::default(), hand: NIL, capacity }
    }

    fn evict(&mut self) {
        let mut i = if self.hand == NIL { self.queue.tail } else { self.hand };
        while self.slab.get(i).freq > 0 {
            self.slab.get_mut(i).freq -= 1;
            let newer = self.slab.prev(i);
            i = if newer == NIL { self.queue.tail } else { newer };
        }
        self.hand = self.slab.prev(i);
        self.queue.unlink(&mut self.slab, i);
        self.map.remove(&self.slab.get(i).key);
        self.slab.release(i);
    }
}

impl Policy for Sieve {
    fn access(&mut self, key: u64, size: u64) -> bool {
        if let Some(&i) = self.map.get(&key) {
            self.slab.get_mut(i).freq = 1;
            return true;
        }
        if size > self.capacity {
            return false;
        }
        while self.queue.bytes + size > self.capacity {
            self.evict();
        }
        let i = self.slab.alloc(key, size, 0);
        self.queue.push_head(&mut self.slab, i);
        self.map.insert(key, i);
        false
    }
}
