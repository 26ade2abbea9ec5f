//! A reader-writer lock whose readers do not share a cache line.
//!
//! An ordinary read-write lock makes every reader write the lock word, so two cores reading the same shard bounce
//! that line between them on every get; measured here, two threads got 1.1x the gets of one. This lock keeps one
//! raw lock per "stripe" (a few, each on its own cache line); a reader locks only its thread's stripe, a writer
//! locks all of them in order. Reads then scale with cores, and a write costs one uncontended lock per stripe.
//! (crossbeam's `ShardedLock` is the same idea with a fixed eight stripes; sizing stripes to the machine keeps
//! writes cheaper on small ones.)

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

use parking_lot::lock_api::RawRwLock as _;
use parking_lot::RawRwLock;

#[repr(align(128))]
struct Stripe(RawRwLock);

pub struct StripedLock<T> {
    stripes: Box<[Stripe]>,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` follows reader-writer rules enforced by the stripes (shared access needs one stripe
// held shared, exclusive access needs every stripe held exclusively), so the lock is as thread-safe as RwLock<T>.
unsafe impl<T: Send> Send for StripedLock<T> {}
unsafe impl<T: Send + Sync> Sync for StripedLock<T> {}

impl<T> StripedLock<T> {
    /// A lock with `stripes` stripes (rounded up to a power of two).
    pub fn new(data: T, stripes: usize) -> Self {
        let count = stripes.max(1).next_power_of_two();
        StripedLock { stripes: (0..count).map(|_| Stripe(RawRwLock::INIT)).collect(), data: UnsafeCell::new(data) }
    }

    /// Shared access, locking only the calling thread's stripe.
    pub fn read(&self) -> ReadGuard<'_, T> {
        let stripe = &self.stripes[crate::memory::thread_index() & (self.stripes.len() - 1)].0;
        stripe.lock_shared();
        ReadGuard { lock: self, stripe }
    }

    /// Exclusive access, locking every stripe (always in the same order, so writers cannot deadlock).
    pub fn write(&self) -> WriteGuard<'_, T> {
        for stripe in self.stripes.iter() {
            stripe.0.lock_exclusive();
        }
        WriteGuard { lock: self }
    }
}

pub struct ReadGuard<'a, T> {
    lock: &'a StripedLock<T>,
    stripe: &'a RawRwLock,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: a stripe is held shared, so no writer (which needs every stripe) can hold the data.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this guard took the stripe shared in `read` and releases it exactly once.
        unsafe { self.stripe.unlock_shared() };
    }
}

pub struct WriteGuard<'a, T> {
    lock: &'a StripedLock<T>,
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: every stripe is held exclusively.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: every stripe is held exclusively, and `&mut self` makes this the only reference.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        for stripe in self.lock.stripes.iter().rev() {
            // SAFETY: `write` took every stripe exclusively; each is released exactly once.
            unsafe { stripe.0.unlock_exclusive() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StripedLock;

    #[test]
    fn writers_exclude_each_other_and_readers() {
        let lock = StripedLock::new(0u64, 4);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        // A lost update would show if two writers ever overlapped.
                        let mut g = lock.write();
                        let v = *g;
                        *g = v + 1;
                    }
                });
                s.spawn(|| {
                    for _ in 0..10_000 {
                        let g = lock.read();
                        assert!(*g <= 40_000);
                    }
                });
            }
        });
        assert_eq!(*lock.read(), 40_000);
    }
}
