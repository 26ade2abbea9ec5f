//! S3-FIFO (Yang et al., SOSP'23) as libCacheSim implements it (libCacheSim/cache/eviction/S3FIFO.c), byte-aware,
//! with the paper's defaults: a small FIFO of 10% of the bytes, a main FIFO of the rest, a ghost FIFO of 90% of the
//! bytes (keys and sizes of entries evicted from small), and promotion from small to main for entries read at least
//! `move_to_main_threshold` times there (libCacheSim's default and its published test: 2). Main reinserts an entry
//! read since its last pass with its count capped at 3 and lowered by one. A ghost hit inserts straight into main.

use std::collections::HashMap;

use super::list::{List, Slab};
use super::Policy;

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const GHOST: u8 = 2;

pub struct S3Fifo {
    slab: Slab,
    map: HashMap<u64, u32>,
    ghost_map: HashMap<u64, u32>,
    small: List,
    main: List,
    ghost: List,
    capacity: u64,
    small_capacity: u64,
    main_capacity: u64,
    ghost_capacity: u64,
    threshold: i64,
}

impl S3Fifo {
    pub fn new(capacity: u64) -> S3Fifo {
        S3Fifo::with(capacity, 0.10, 0.90, 2)
    }

    pub fn with(capacity: u64, small_ratio: f64, ghost_ratio: f64, threshold: i64) -> S3Fifo {
        // The same truncations as libCacheSim's S3FIFO_init.
        let small_capacity = (capacity as f64 * small_ratio) as u64;
        S3Fifo {
            slab: Slab::default(),
            map: HashMap::new(),
            ghost_map: HashMap::new(),
            small: List::default(),
            main: List::default(),
            ghost: List::default(),
            capacity,
            small_capacity,
            main_capacity: capacity - small_capacity,
            ghost_capacity: (capacity as f64 * ghost_ratio) as u64,
            threshold,
        }
    }

    fn evict(&mut self) {
        if self.main.bytes > self.main_capacity || self.small.bytes == 0 {
            self.evict_main();
        } else {
            self.evict_small();
        }
    }

    fn evict_small(&mut self) {
        while self.small.bytes > 0 {
            let i = self.small.tail;
            self.small.unlink(&mut self.slab, i);
            if self.slab.get(i).freq >= self.threshold {
                let node = self.slab.get_mut(i);
                node.freq = 0;
                node.tag = MAIN;
                self.main.push_head(&mut self.slab, i);
                continue;
            }
            let (key, size) = (self.slab.get(i).key, self.slab.get(i).size);
            self.map.remove(&key);
            self.slab.release(i);
            self.remember(key, size);
            return;
        }
    }

    fn evict_main(&mut self) {
        while self.main.bytes > 0 {
            let i = self.main.tail;
            let freq = self.slab.get(i).freq;
            if freq >= 1 {
                self.main.move_to_head(&mut self.slab, i);
                self.slab.get_mut(i).freq = freq.min(3) - 1;
                continue;
            }
            self.main.unlink(&mut self.slab, i);
            self.map.remove(&self.slab.get(i).key);
            self.slab.release(i);
            return;
        }
    }

    /// The ghost is a FIFO cache of its own: a key already there stays where it is.
    fn remember(&mut self, key: u64, size: u64) {
        if self.ghost_map.contains_key(&key) || size > self.ghost_capacity {
            return;
        }
        while self.ghost.bytes + size > self.ghost_capacity {
            let i = self.ghost.tail;
            self.ghost.unlink(&mut self.slab, i);
            self.ghost_map.remove(&self.slab.get(i).key);
            self.slab.release(i);
        }
        let i = self.slab.alloc(key, size, GHOST);
        self.ghost.push_head(&mut self.slab, i);
        self.ghost_map.insert(key, i);
    }
}

impl Policy for S3Fifo {
    fn access(&mut self, key: u64, size: u64) -> bool {
        if let Some(&i) = self.map.get(&key) {
            self.slab.get_mut(i).freq += 1;
            return true;
        }
        let hit_on_ghost = match self.ghost_map.remove(&key) {
            Some(i) => {
                self.ghost.unlink(&mut self.slab, i);
                self.slab.release(i);
                true
            }
            None => false,
        };
        if size > self.small_capacity {
            return false;
        }
        while self.small.bytes + self.main.bytes + size > self.capacity {
            self.evict();
        }
        let tag = if hit_on_ghost {
            MAIN
        } else if size >= self.small_capacity {
            return false;
        } else {
            SMALL
        };
        let i = self.slab.alloc(key, size, tag);
        if tag == MAIN {
            self.main.push_head(&mut self.slab, i);
        } else {
            self.small.push_head(&mut self.slab, i);
        }
        self.map.insert(key, i);
        false
    }
}
