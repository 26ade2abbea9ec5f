//! ARC (Megiddo and Modha, FAST'03) as libCacheSim implements it (libCacheSim/cache/eviction/ARC.c), byte-aware:
//! T1/T2 hold data, B1/B2 remember evicted keys with their sizes, and `p` (the target size of T1, in the same unit
//! as the capacity) moves by max(|B2|/|B1|, 1) on a B1 hit and by max(|B1|/|B2|, 1) on a B2 hit, where |B| is a
//! ghost list's bytes. With byte-sized objects that moves `p` by a few bytes per ghost hit, as in libCacheSim: the
//! point is to reproduce its published miss counts (checked in the tests of `crate::hit_ratio`), not to improve ARC.

use std::collections::HashMap;

use super::list::{List, Slab, NIL};
use super::Policy;

const T1: u8 = 1;
const T2: u8 = 2;
const B1: u8 = 3;
const B2: u8 = 4;

pub struct Arc {
    slab: Slab,
    map: HashMap<u64, u32>,
    t1: List,
    t2: List,
    b1: List,
    b2: List,
    p: f64,
    capacity: u64,
}

impl Arc {
    pub fn new(capacity: u64) -> Arc {
        Arc {
            slab: Slab::default(),
            map: HashMap::new(),
            t1: List::default(),
            t2: List::default(),
            b1: List::default(),
            b2: List::default(),
            p: 0.0,
            capacity,
        }
    }

    fn list(&mut self, tag: u8) -> &mut List {
        match tag {
            T1 => &mut self.t1,
            T2 => &mut self.t2,
            B1 => &mut self.b1,
            _ => &mut self.b2,
        }
    }

    /// Moves the tail of `from` to the head of `to` (data to ghost).
    fn demote(&mut self, from: u8, to: u8) {
        let i = self.list(from).tail;
        let mut slab = std::mem::take(&mut self.slab);
        self.list(from).unlink(&mut slab, i);
        slab.get_mut(i).tag = to;
        self.list(to).push_head(&mut slab, i);
        self.slab = slab;
    }

    /// Forgets the tail of `tag`'s list entirely.
    fn drop_tail(&mut self, tag: u8) {
        let i = self.list(tag).tail;
        let mut slab = std::mem::take(&mut self.slab);
        self.list(tag).unlink(&mut slab, i);
        self.map.remove(&slab.get(i).key);
        slab.release(i);
        self.slab = slab;
    }

    /// The paper's REPLACE.
    fn replace(&mut self, in_b2: bool) {
        let t1 = self.t1.bytes as f64;
        let from_t1 = (self.t1.bytes > 0 && (t1 > self.p || (t1 == self.p && in_b2))) || self.t2.bytes == 0;
        if from_t1 {
            self.demote(T1, B1);
        } else {
            self.demote(T2, B2);
        }
    }

    /// Case IV of the paper: a miss in every list.
    fn evict_on_full_miss(&mut self, size: u64) {
        if self.t1.bytes + self.b1.bytes + size > self.capacity {
            if self.b1.bytes > 0 {
                self.drop_tail(B1);
                self.replace(false);
            } else {
                self.drop_tail(T1);
            }
        } else {
            if self.t1.bytes + self.b1.bytes + self.t2.bytes + self.b2.bytes >= 2 * self.capacity && self.b2.bytes > 0 {
                self.drop_tail(B2);
            }
            self.replace(false);
        }
    }
}

impl Policy for Arc {
    fn access(&mut self, key: u64, size: u64) -> bool {
        let mut ghost = None;
        if let Some(&i) = self.map.get(&key) {
            let tag = self.slab.get(i).tag;
            let mut slab = std::mem::take(&mut self.slab);
            match tag {
                T1 => {
                    self.t1.unlink(&mut slab, i);
                    slab.get_mut(i).tag = T2;
                    self.t2.push_head(&mut slab, i);
                }
                T2 => self.t2.move_to_head(&mut slab, i),
                B1 => {
                    let delta = (self.b2.bytes as f64 / self.b1.bytes as f64).max(1.0);
                    self.p = (self.p + delta).min(self.capacity as f64);
                    self.b1.unlink(&mut slab, i);
                    ghost = Some(B1);
                }
                _ => {
                    let delta = (self.b1.bytes as f64 / self.b2.bytes as f64).max(1.0);
                    self.p = (self.p - delta).max(0.0);
                    self.b2.unlink(&mut slab, i);
                    ghost = Some(B2);
                }
            }
            if ghost.is_some() {
                self.map.remove(&key);
                slab.release(i);
            }
            self.slab = slab;
            if ghost.is_none() {
                return true;
            }
        }
        if size > self.capacity {
            return false;
        }
        while self.t1.bytes + self.t2.bytes + size > self.capacity {
            match ghost {
                Some(list) => self.replace(list == B2),
                None => self.evict_on_full_miss(size),
            }
        }
        let tag = if ghost.is_some() { T2 } else { T1 };
        let i = self.slab.alloc(key, size, tag);
        let list = if tag == T2 { &mut self.t2 } else { &mut self.t1 };
        list.push_head(&mut self.slab, i);
        self.map.insert(key, i);
        debug_assert!(self.t1.tail != NIL || self.t2.tail != NIL);
        false
    }
}
