//! A shard's hash table: open addressing over 8-byte slots, each an entry's address (48 bits), a 12-bit tag of its
//! key's hash and its 4-bit distance from its home slot, so a probe reads an entry only when the tag matches (one
//! slot in 4,096 otherwise), and no control bytes or second array exist.
//!
//! Why not hashbrown: `larder bench memory` at 1M entries measured its table at 18.9 bytes per entry (9-byte
//! buckets, power-of-two sizes, every shard just past a doubling at load 0.48). These slots, at a capacity that is
//! not a power of two and grows by 1.25x when 7/8 full, cost 8 / load = 9.1-11.4 bytes per entry.
//!
//! Indexing is fast-range (Lemire): a hash's home is `(h * capacity) >> 64`, a multiply instead of a mask, so the
//! capacity need not be a power of two. Collisions probe linearly. A removal shifts the rest
//! of its cluster back instead of leaving a tombstone, so probes stay short under churn and the table never needs a
//! rebuild to clear them. Which entries may move follows from their distances; only an entry 15 or more slots from
//! home has its hash recomputed from its key (without the distances, every removal rehashed the rest of its
//! cluster: 30-odd keys at 7/8 full, most of a test's time).

use super::entry::{EntryRef, EntryView, ADDR_BITS};

const EMPTY: u64 = 0;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
const TAG_SHIFT: u32 = ADDR_BITS + 4;
const DIST_SHIFT: u32 = ADDR_BITS;
/// A distance of 15 means "15 or more": the entry's home is found by hashing its key again.
const FAR: u64 = 15;
/// The table grows when it would become fuller than 7/8 ...
const MAX_LOAD: (usize, usize) = (7, 8);
/// ... by a quarter, so that it is between 70% and 87.5% full once it holds more than a few entries.
const GROWTH: (usize, usize) = (5, 4);
const MIN_CAPACITY: usize = 16;

/// The hash bits that choose a slot. The shard is chosen by bits 40..46 and the tag is bits 0..12, so neither
/// takes part (within a shard, the shard bits are the same for every key and would bunch the homes together).
fn index_bits(hash: u64) -> u64 {
    ((hash >> 46) << 46) | (((hash >> 16) & 0xFF_FFFF) << 22)
}

fn tag(hash: u64) -> u64 {
    hash & 0xFFF
}

/// The entry's address, without the tag and distance.
fn addr(slot: u64) -> u64 {
    slot & ADDR_MASK
}

fn dist(slot: u64) -> u64 {
    (slot >> DIST_SHIFT) & FAR
}

fn with_dist(slot: u64, d: u64) -> u64 {
    (slot & !(FAR << DIST_SHIFT)) | (d.min(FAR) << DIST_SHIFT)
}

pub struct SlotTable {
    slots: Box<[u64]>,
    len: usize,
}

impl Default for SlotTable {
    fn default() -> Self {
        SlotTable { slots: Box::new([]), len: 0 }
    }
}

impl SlotTable {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Number of slots.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn home(&self, hash: u64) -> usize {
        ((u128::from(index_bits(hash)) * self.slots.len() as u128) >> 64) as usize
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// The position of an entry with this hash for which `eq` holds.
    pub fn find(&self, hash: u64, eq: impl Fn(&EntryRef) -> bool) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let wanted = tag(hash);
        let mut i = self.home(hash);
        // The table is never full (at most 7/8), so an empty slot ends every probe.
        loop {
            let slot = self.slots[i];
            if slot == EMPTY {
                return None;
            }
            if slot >> TAG_SHIFT == wanted && eq(&self.view(slot)) {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    fn view(&self, slot: u64) -> EntryView<'_> {
        // SAFETY: every non-empty slot holds an address from `EntryRef::into_addr` whose reference the table owns
        // until `take` gives it back, which needs `&mut self`; the view borrows `self`, so it cannot outlive that.
        unsafe { EntryRef::view(addr(slot)) }
    }

    /// The entry at `i`, if the slot is occupied.
    pub fn get(&self, i: usize) -> Option<EntryView<'_>> {
        let slot = *self.slots.get(i)?;
        (slot != EMPTY).then(|| self.view(slot))
    }

    /// Stores `entry`, whose key must not be in the table, growing first if it would be too full.
    pub fn insert(&mut self, hash: u64, entry: EntryRef, rehash: &impl Fn(&[u8]) -> u64) {
        if (self.len + 1) * MAX_LOAD.1 > self.slots.len() * MAX_LOAD.0 {
            self.grow(rehash);
        }
        let slot = entry.into_addr() | (tag(hash) << TAG_SHIFT);
        self.place(hash, slot);
        self.len += 1;
    }

    fn place(&mut self, hash: u64, slot: u64) {
        let mut i = self.home(hash);
        let mut d = 0;
        while self.slots[i] != EMPTY {
            i = self.next(i);
            d += 1;
        }
        self.slots[i] = with_dist(slot, d);
    }

    fn grow(&mut self, rehash: &impl Fn(&[u8]) -> u64) {
        let capacity = (self.slots.len() * GROWTH.0 / GROWTH.1).max(self.slots.len() + 1).max(MIN_CAPACITY);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; capacity].into_boxed_slice());
        for &slot in old.iter().filter(|&&s| s != EMPTY) {
            let hash = rehash(self.view(slot).key());
            self.place(hash, slot);
        }
    }

    /// Takes the entry at `i` out and closes the gap: each later entry of the cluster that may live at the hole
    /// moves back into it.
    pub fn take(&mut self, i: usize, rehash: &impl Fn(&[u8]) -> u64) -> Option<EntryRef> {
        let slot = *self.slots.get(i).filter(|s| **s != EMPTY)?;
        self.slots[i] = EMPTY;
        self.len -= 1;
        let n = self.slots.len();
        let mut hole = i;
        let mut j = self.next(i);
        while self.slots[j] != EMPTY {
            let moving = self.slots[j];
            let gap = ((j + n - hole) % n) as u64;
            // The entry at `j` may move to the hole if its home is not after the hole, i.e. it is at least `gap`
            // slots from home; its distance says so, unless it is too far to be recorded.
            let d = match dist(moving) {
                FAR => ((j + n - self.home(rehash(self.view(moving).key()))) % n) as u64,
                d => d,
            };
            if d >= gap {
                self.slots[hole] = with_dist(moving, d - gap);
                self.slots[j] = EMPTY;
                hole = j;
            }
            j = self.next(j);
        }
        // SAFETY: the slot held an address from `into_addr` whose reference the table owned; it is no longer in
        // the table, so this is the only place that takes it back.
        Some(unsafe { EntryRef::from_addr(addr(slot)) })
    }

    /// Empties the table, handing each entry to `each`, and frees the slots.
    pub fn drain(&mut self, mut each: impl FnMut(EntryRef)) {
        let old = std::mem::take(&mut self.slots);
        self.len = 0;
        for &slot in old.iter().filter(|&&s| s != EMPTY) {
            // SAFETY: the slot's reference was owned by the table, which no longer holds it.
            each(unsafe { EntryRef::from_addr(addr(slot)) });
        }
    }
}

impl Drop for SlotTable {
    fn drop(&mut self) {
        self.drain(drop);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// A well-spread hash of a key.
    fn spread(key: &[u8]) -> u64 {
        use std::hash::BuildHasher;
        foldhash::quality::FixedState::with_seed(7).hash_one(key)
    }

    /// Every key the same home and tag: every probe walks one chain and compares keys.
    fn same(_: &[u8]) -> u64 {
        0x1234_5678_9abc_def0
    }

    /// Homes spread, but every key has tag 0x0AA.
    fn one_tag(key: &[u8]) -> u64 {
        (spread(key) & !0xFFF) | 0xAA
    }

    fn put(table: &mut SlotTable, key: &str, hash: &impl Fn(&[u8]) -> u64) {
        let e = EntryRef::new(key.as_bytes(), key.as_bytes(), 0);
        table.insert(hash(key.as_bytes()), e, hash);
    }

    fn has(table: &SlotTable, key: &str, hash: &impl Fn(&[u8]) -> u64) -> bool {
        table.find(hash(key.as_bytes()), |e| e.key() == key.as_bytes()).is_some()
    }

    fn del(table: &mut SlotTable, key: &str, hash: &impl Fn(&[u8]) -> u64) -> bool {
        match table.find(hash(key.as_bytes()), |e| e.key() == key.as_bytes()) {
            Some(i) => table.take(i, hash).is_some_and(|e| e.key() == key.as_bytes()),
            None => false,
        }
    }

    #[test]
    fn grows_by_a_quarter_and_stays_between_70_and_88_percent_full() {
        let mut t = SlotTable::default();
        for i in 0..100_000 {
            put(&mut t, &i.to_string(), &spread);
            let load = t.len() as f64 / t.capacity() as f64;
            assert!(load <= 0.875, "load {load} at {i}");
            if t.len() > 1000 {
                assert!(load >= 0.69, "load {load} at {} entries", t.len());
            }
        }
        assert!((0..100_000).all(|i| has(&t, &i.to_string(), &spread)));
        assert!(!has(&t, "100000", &spread));
    }

    #[test]
    fn removal_inside_a_probe_chain_keeps_the_rest_findable() {
        for hash in [same as fn(&[u8]) -> u64, one_tag, spread] {
            let mut t = SlotTable::default();
            for i in 0..200 {
                put(&mut t, &i.to_string(), &hash);
            }
            // Remove from the middle, the start and the end of chains, then check every survivor.
            for i in (0..200).filter(|i| i % 3 == 1) {
                assert!(del(&mut t, &i.to_string(), &hash));
            }
            assert!(!del(&mut t, "1", &hash), "removed twice");
            for i in 0..200 {
                assert_eq!(has(&t, &i.to_string(), &hash), i % 3 != 1, "key {i}");
            }
            assert_eq!(t.len(), 200 - 67);
            assert_eq!(t.slots.iter().filter(|&&s| s != EMPTY).count(), t.len());
        }
    }

    #[test]
    fn a_chain_that_wraps_past_the_last_slot_is_shifted_back_across_the_end() {
        // Homes at the very end of the table: the chain wraps to slot 0 and later removals must close gaps
        // on both sides of the wrap.
        let last = |key: &[u8]| u64::MAX - u64::from(key.first().copied().unwrap_or(0) % 3);
        let mut t = SlotTable::default();
        for i in 0..12 {
            put(&mut t, &format!("{}{i}", i % 3), &last);
        }
        assert_eq!(t.capacity(), 16);
        assert!(t.slots[0] != EMPTY, "the chain wrapped");
        for i in [0, 5, 11, 3] {
            assert!(del(&mut t, &format!("{}{i}", i % 3), &last));
        }
        for i in (0..12).filter(|i| ![0, 5, 11, 3].contains(i)) {
            assert!(has(&t, &format!("{}{i}", i % 3), &last), "key {i} lost");
        }
    }

    #[test]
    fn equal_tags_are_told_apart_by_their_keys() {
        let mut t = SlotTable::default();
        for i in 0..5000 {
            put(&mut t, &format!("k{i}"), &one_tag);
        }
        for i in 0..5000 {
            let i_found = t.find(one_tag(format!("k{i}").as_bytes()), |e| e.key() == format!("k{i}").as_bytes());
            let value = i_found.and_then(|at| t.get(at)).map(|e| e.value().to_vec());
            assert_eq!(value, Some(format!("k{i}").into_bytes()));
        }
        assert!(!has(&t, "k5000", &one_tag));
    }

    #[test]
    fn a_table_at_its_fullest_empties_by_removal_and_refills() {
        for hash in [same as fn(&[u8]) -> u64, spread] {
            let mut t = SlotTable::default();
            let mut i = 0;
            // Fill to exactly 7/8 of a grown table.
            while i < 100 || t.len() * 8 < t.capacity() * 7 {
                put(&mut t, &i.to_string(), &hash);
                i += 1;
            }
            let full = t.capacity();
            while let Some(at) = (0..t.capacity()).find(|&at| t.get(at).is_some()) {
                assert!(t.take(at, &hash).is_some());
                check_distances(&t, &hash);
            }
            assert_eq!((t.len(), t.capacity()), (0, full));
            for k in 0..i {
                put(&mut t, &k.to_string(), &hash);
            }
            assert_eq!(t.capacity(), full, "refilling to the same count does not grow");
            assert!((0..i).all(|k| has(&t, &k.to_string(), &hash)));
        }
    }

    #[test]
    fn references_are_released_by_take_drain_and_drop() {
        let probe = EntryRef::new(b"k", b"v", 0);
        let mut t = SlotTable::default();
        t.insert(spread(b"k"), probe.clone(), &spread);
        let i = t.find(spread(b"k"), |e| e.same(&probe));
        let taken = i.and_then(|i| t.take(i, &spread)).unwrap_or_else(|| panic!("entry not found"));
        drop(taken);
        t.insert(spread(b"k"), probe.clone(), &spread);
        let mut drained = Vec::new();
        t.drain(|e| drained.push(e));
        assert_eq!(drained.len(), 1);
        assert_eq!((t.len(), t.capacity()), (0, 0));
        t.insert(spread(b"k"), probe.clone(), &spread);
        drop(t);
        drop(drained);
        // Only `probe` is left: cloning and dropping once more must not touch freed memory (run under Miri to see).
        assert_eq!(probe.clone().value(), b"v");
    }

    /// Every slot records its entry's distance from home (15 for 15 or more), and nothing lies beyond an empty slot.
    fn check_distances(t: &SlotTable, hash: &impl Fn(&[u8]) -> u64) {
        let n = t.capacity();
        for (i, &slot) in t.slots.iter().enumerate().filter(|(_, &s)| s != EMPTY) {
            let home = t.home(hash(t.view(slot).key()));
            let actual = ((i + n - home) % n) as u64;
            assert_eq!(dist(slot), actual.min(FAR), "slot {i}, home {home}");
            assert!((0..actual as usize).all(|k| t.slots[(home + k) % n] != EMPTY), "a gap before slot {i}");
        }
    }

    #[test]
    fn distances_stay_exact_through_growth_and_removals() {
        for hash in [same as fn(&[u8]) -> u64, one_tag, spread] {
            let mut t = SlotTable::default();
            for i in 0..3000 {
                put(&mut t, &i.to_string(), &hash);
                if i % 4 == 3 {
                    assert!(del(&mut t, &(i / 2).to_string(), &hash) || i / 2 % 4 == 3);
                }
            }
            check_distances(&t, &hash);
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        Remove(u8),
        Find(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![any::<u8>().prop_map(Op::Insert), any::<u8>().prop_map(Op::Remove), any::<u8>().prop_map(Op::Find)]
    }

    proptest! {
        /// The table agrees with a `HashMap` after any sequence of operations, under a good hash, a hash with
        /// one tag for every key, and a hash that sends keys to a few homes.
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec(op(), 1..400), kind in 0..3u8) {
            let hash = move |key: &[u8]| match kind {
                0 => spread(key),
                1 => one_tag(key),
                _ => spread(&key[..1.min(key.len())]),
            };
            let mut t = SlotTable::default();
            let mut model: HashMap<String, ()> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k) => {
                        let key = format!("{}-{k}", k % 5);
                        if model.insert(key.clone(), ()).is_none() {
                            put(&mut t, &key, &hash);
                        }
                    }
                    Op::Remove(k) => {
                        let key = format!("{}-{k}", k % 5);
                        prop_assert_eq!(del(&mut t, &key, &hash), model.remove(&key).is_some());
                    }
                    Op::Find(k) => {
                        let key = format!("{}-{k}", k % 5);
                        prop_assert_eq!(has(&t, &key, &hash), model.contains_key(&key));
                    }
                }
                prop_assert_eq!(t.len(), model.len());
            }
            check_distances(&t, &hash);
            let mut keys: Vec<Vec<u8>> = (0..t.capacity()).filter_map(|i| t.get(i)).map(|e| e.key().to_vec()).collect();
            keys.sort();
            let mut expected: Vec<Vec<u8>> = model.keys().map(|k| k.clone().into_bytes()).collect();
            expected.sort();
            prop_assert_eq!(keys, expected);
        }
    }
}
