//! A FIFO of entries that supports O(1) removal from the middle: each entry remembers its sequence number, removal
//! leaves a tombstone, and the queue is compacted when tombstones outnumber live entries. S3-FIFO's two queues are
//! two of these.

use std::collections::VecDeque;

use super::entry::EntryRef;

#[derive(Default)]
pub struct Fifo {
    slots: VecDeque<Option<EntryRef>>,
    /// Sequence number of `slots[0]`; sequence numbers wrap, and only differences are used.
    head_seq: u32,
    live: usize,
    /// Sum of the weights of the live entries.
    weight: usize,
}

impl Fifo {
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn weight(&self) -> usize {
        self.weight
    }

    pub fn push_back(&mut self, entry: EntryRef, weight: usize) {
        entry.set_queue_seq(self.head_seq.wrapping_add(self.slots.len() as u32));
        self.slots.push_back(Some(entry));
        self.live += 1;
        self.weight += weight;
    }

    /// The oldest live entry, removed from the queue.
    pub fn pop_front(&mut self, weight_of: impl Fn(&EntryRef) -> usize) -> Option<EntryRef> {
        while let Some(slot) = self.slots.pop_front() {
            self.head_seq = self.head_seq.wrapping_add(1);
            if let Some(entry) = slot {
                self.live -= 1;
                self.weight -= weight_of(&entry);
                return Some(entry);
            }
        }
        None
    }

    /// Removes `entry` (which must be in this queue) and returns the queue's reference to it.
    pub fn remove(&mut self, entry: &EntryRef, weight: usize) -> Option<EntryRef> {
        let index = entry.queue_seq().wrapping_sub(self.head_seq) as usize;
        let slot = self.slots.get_mut(index)?;
        if !slot.as_ref().is_some_and(|held| held.same(entry)) {
            return None;
        }
        let held = slot.take();
        self.live -= 1;
        self.weight -= weight;
        if self.slots.len() > 64 && self.slots.len() > 2 * self.live {
            self.compact();
        }
        held
    }

    /// Drops tombstones and renumbers the live entries.
    fn compact(&mut self) {
        self.slots.retain(Option::is_some);
        self.slots.shrink_to(self.slots.len() * 5 / 4 + 16);
        for (i, entry) in self.slots.iter().flatten().enumerate() {
            entry.set_queue_seq(self.head_seq.wrapping_add(i as u32));
        }
    }

    /// Live entries in queue order, starting `skip` slots from the front, at most `limit` slots examined.
    pub fn window(&self, skip: usize, limit: usize) -> impl Iterator<Item = &EntryRef> {
        self.slots.iter().skip(skip).take(limit).flatten()
    }

    /// Number of slots, tombstones included (for cursors over the queue).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &EntryRef> {
        self.slots.iter().flatten()
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.live = 0;
        self.weight = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> EntryRef {
        EntryRef::new(key.as_bytes(), b"", 0)
    }

    #[test]
    fn pops_in_insertion_order_skipping_removed_entries() {
        let mut q = Fifo::default();
        let entries: Vec<EntryRef> = (0..5).map(|i| entry(&i.to_string())).collect();
        for e in &entries {
            q.push_back(e.clone(), 10);
        }
        assert!(q.remove(&entries[1], 10).is_some());
        assert!(q.remove(&entries[1], 10).is_none(), "a removed entry is not removed twice");
        let order: Vec<Vec<u8>> = std::iter::from_fn(|| q.pop_front(|_| 10)).map(|e| e.key().to_vec()).collect();
        assert_eq!(order, [b"0".to_vec(), b"2".to_vec(), b"3".to_vec(), b"4".to_vec()]);
        assert_eq!((q.len(), q.weight()), (0, 0));
    }

    #[test]
    fn removal_still_finds_entries_after_compaction_and_wrapping() {
        let mut q = Fifo { head_seq: u32::MAX - 10, ..Fifo::default() };
        let entries: Vec<EntryRef> = (0..300).map(|i| entry(&i.to_string())).collect();
        for e in &entries {
            q.push_back(e.clone(), 1);
        }
        for e in entries.iter().step_by(3) {
            assert!(q.remove(e, 1).is_some());
        }
        for e in entries.iter().skip(1).step_by(3) {
            assert!(q.remove(e, 1).is_some(), "entry {:?} lost after compaction", e.key());
        }
        assert_eq!(q.len(), 100);
        assert!(q.slot_count() < 300, "tombstones were compacted");
        assert_eq!(q.pop_front(|_| 1).map(|e| e.key().to_vec()), Some(b"2".to_vec()));
    }
}
