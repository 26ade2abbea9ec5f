//! One stored entry: a single heap allocation holding a small header, the key bytes and the value bytes, shared by
//! reference count between the store and every reader holding the value.
//!
//! Why not `Arc<(String, Bytes)>`: that costs three allocations and ~100 bytes of bookkeeping per entry; this layout
//! costs one allocation and a 24-byte header, which is what lets the store stay near memcached's per-item overhead.
//! The unsafe code is confined to this file: allocation, reference counting (the same protocol as `std::sync::Arc`)
//! and slicing the bytes that follow the header.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU8, Ordering};

use crate::clock::LazyNow;

/// The header in front of the key and value bytes.
#[repr(C)]
struct Header {
    refcount: AtomicU32,
    value_len: u32,
    key_len: u16,
    /// S3-FIFO access frequency, 0..=3, bumped by readers without a lock.
    freq: AtomicU8,
    /// Queue membership, liveness and the sketch's count of earlier misses (bits 2-3, see `s3fifo.rs`), changed
    /// only under the shard's write lock.
    flags: AtomicU8,
    /// Position in its queue (see `queue.rs`), changed only under the shard's write lock.
    queue_seq: AtomicU32,
    /// Hard expiry in ms since the epoch (0 = never), split so the header needs only 4-byte alignment.
    expires_lo: u32,
    expires_hi: u32,
}

pub const HEADER_LEN: usize = std::mem::size_of::<Header>();
const ALIGN: usize = std::mem::align_of::<Header>();
const _: () = assert!(HEADER_LEN == 24);

/// Flag: the entry sits in the main queue (else the small queue).
pub const IN_MAIN: u8 = 0x01;
/// Flag: the entry was removed from the table (deleted, replaced, expired or evicted).
pub const REMOVED: u8 = 0x02;

/// Largest key the memory store accepts.
pub const MAX_KEY_LEN: usize = u16::MAX as usize;
/// Largest value the memory store accepts (4 GiB - 1).
pub const MAX_VALUE_LEN: usize = u32::MAX as usize;

/// A counted reference to an entry.
pub struct EntryRef {
    ptr: NonNull<Header>,
}

// SAFETY: the header's mutable fields are atomics; the key and value bytes are written once, before the pointer is
// shared, and never again. Dropping follows Arc's protocol, so references may move and be shared across threads.
unsafe impl Send for EntryRef {}
unsafe impl Sync for EntryRef {}

impl EntryRef {
    /// Allocates an entry holding copies of `key` and `value`. Callers check the length limits first.
    pub fn new(key: &[u8], value: &[u8], expires_at: u64) -> EntryRef {
        assert!(key.len() <= MAX_KEY_LEN && value.len() <= MAX_VALUE_LEN, "entry length limits checked by caller");
        let layout = layout_for(key.len(), value.len());
        // SAFETY: the layout has a non-zero size (the header alone is 24 bytes).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<Header>()) else { handle_alloc_error(layout) };
        if (raw as usize as u64) >> ADDR_BITS != 0 {
            // The table packs addresses into 48 bits (x86-64 and AArch64 user space); an allocator that hands out
            // a higher address cannot be used, and that is an allocation failure, not a silent truncation.
            // SAFETY: `raw` was allocated just above with `layout` and nothing else refers to it.
            unsafe { dealloc(raw, layout) };
            handle_alloc_error(layout)
        }
        // SAFETY: `raw` is a fresh allocation of HEADER_LEN + key + value bytes with the header's alignment; we
        // initialise the header and both byte ranges before anyone else can see the pointer.
        unsafe {
            ptr.as_ptr().write(Header {
                refcount: AtomicU32::new(1),
                value_len: value.len() as u32,
                key_len: key.len() as u16,
                freq: AtomicU8::new(0),
                flags: AtomicU8::new(0),
                queue_seq: AtomicU32::new(0),
                expires_lo: expires_at as u32,
                expires_hi: (expires_at >> 32) as u32,
            });
            let data = raw.add(HEADER_LEN);
            std::ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), data.add(key.len()), value.len());
        }
        EntryRef { ptr }
    }

    fn header(&self) -> &Header {
        // SAFETY: the pointer stays valid while any EntryRef (this one included) exists.
        unsafe { self.ptr.as_ref() }
    }

    fn data(&self) -> *const u8 {
        // SAFETY: the bytes follow the header inside the same allocation.
        unsafe { self.ptr.as_ptr().cast::<u8>().add(HEADER_LEN) }
    }

    pub fn key(&self) -> &[u8] {
        let len = usize::from(self.header().key_len);
        // SAFETY: `len` key bytes were initialised right after the header and are never written again.
        unsafe { std::slice::from_raw_parts(self.data(), len) }
    }

    pub fn value(&self) -> &[u8] {
        let h = self.header();
        // SAFETY: `value_len` bytes were initialised right after the key and are never written again.
        unsafe { std::slice::from_raw_parts(self.data().add(usize::from(h.key_len)), h.value_len as usize) }
    }

    /// Hard expiry in ms since the epoch; 0 = never.
    pub fn expires_at(&self) -> u64 {
        let h = self.header();
        u64::from(h.expires_lo) | (u64::from(h.expires_hi) << 32)
    }

    /// Whether the entry must no longer be returned now (the clock is read only for entries that expire).
    pub fn is_expired(&self, now: &LazyNow<'_>) -> bool {
        let at = self.expires_at();
        at != 0 && now.get() >= at
    }

    /// Records a read: the frequency saturates at 3, so hot entries stop writing to their header.
    pub fn touch(&self) {
        let freq = &self.header().freq;
        let f = freq.load(Ordering::Relaxed);
        if f < 3 {
            freq.store(f + 1, Ordering::Relaxed);
        }
    }

    pub fn freq(&self) -> u8 {
        self.header().freq.load(Ordering::Relaxed)
    }

    pub fn set_freq(&self, f: u8) {
        self.header().freq.store(f, Ordering::Relaxed);
    }

    pub fn flags(&self) -> u8 {
        self.header().flags.load(Ordering::Relaxed)
    }

    pub fn set_flags(&self, flags: u8) {
        self.header().flags.store(flags, Ordering::Relaxed);
    }

    pub fn queue_seq(&self) -> u32 {
        self.header().queue_seq.load(Ordering::Relaxed)
    }

    pub fn set_queue_seq(&self, seq: u32) {
        self.header().queue_seq.store(seq, Ordering::Relaxed);
    }

    /// Gives up this reference as its address (below 2^48, a multiple of 4), for the table's packed slots;
    /// [`EntryRef::from_addr`] takes it back.
    pub fn into_addr(self) -> u64 {
        let addr = self.ptr.as_ptr() as usize as u64;
        std::mem::forget(self);
        addr
    }

    /// Takes back a reference given up by [`EntryRef::into_addr`].
    ///
    /// # Safety
    /// `addr` must come from `into_addr`, and that reference must not have been taken back already.
    pub unsafe fn from_addr(addr: u64) -> EntryRef {
        // SAFETY: by the contract, `addr` is a live entry's non-null address whose reference we now own again.
        EntryRef { ptr: unsafe { NonNull::new_unchecked(addr as usize as *mut Header) } }
    }

    /// Looks at the entry whose reference is held at `addr`, without taking that reference.
    ///
    /// # Safety
    /// `addr` must come from `into_addr`, and that reference must stay untaken for the lifetime `'a`.
    pub unsafe fn view<'a>(addr: u64) -> EntryView<'a> {
        // SAFETY: the caller keeps the reference alive for 'a; ManuallyDrop keeps this copy from releasing it.
        EntryView { entry: ManuallyDrop::new(unsafe { EntryRef::from_addr(addr) }), held: PhantomData }
    }

    /// Whether two references point at the same entry.
    pub fn same(&self, other: &EntryRef) -> bool {
        self.ptr == other.ptr
    }
}

/// Bits an entry's address may use: the table keeps the upper 16 of its 64-bit slots for a hash tag.
pub const ADDR_BITS: u32 = 48;

/// A borrowed look at an entry the table holds a reference to; cloning it (`(*view).clone()`) takes a new one.
pub struct EntryView<'a> {
    entry: ManuallyDrop<EntryRef>,
    held: PhantomData<&'a EntryRef>,
}

impl std::ops::Deref for EntryView<'_> {
    type Target = EntryRef;

    fn deref(&self) -> &EntryRef {
        &self.entry
    }
}

fn layout_for(key_len: usize, value_len: usize) -> Layout {
    // Lengths are bounded by MAX_KEY_LEN and MAX_VALUE_LEN, so the size cannot overflow isize on 64-bit targets.
    Layout::from_size_align(HEADER_LEN + key_len + value_len, ALIGN).expect("entry layout fits in isize")
}

/// A hit hands out the value as `Bytes` owning this reference, so the entry's memory lives while it is read.
impl AsRef<[u8]> for EntryRef {
    fn as_ref(&self) -> &[u8] {
        self.value()
    }
}

impl Clone for EntryRef {
    fn clone(&self) -> Self {
        let old = self.header().refcount.fetch_add(1, Ordering::Relaxed);
        // As Arc does: a count this high means references are being leaked; stop before it can wrap.
        if old > u32::MAX / 2 {
            std::process::abort();
        }
        EntryRef { ptr: self.ptr }
    }
}

impl Drop for EntryRef {
    fn drop(&mut self) {
        if self.header().refcount.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Synchronise with every other reference's release before freeing (Arc's protocol).
        fence(Ordering::Acquire);
        let layout = layout_for(usize::from(self.header().key_len), self.header().value_len as usize);
        // SAFETY: this was the last reference; the allocation was made with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr().cast::<u8>(), layout) };
    }
}

impl std::fmt::Debug for EntryRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryRef")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value_len", &self.value().len())
            .field("expires_at", &self.expires_at())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_key_value_and_expiry_and_frees_on_last_drop() {
        let e = EntryRef::new(b"key", b"value bytes", 0x1_0000_0005);
        assert_eq!(e.key(), b"key");
        assert_eq!(e.value(), b"value bytes");
        assert_eq!(e.expires_at(), 0x1_0000_0005);
        let at = |ms: u64| crate::ManualClock::new(ms);
        assert!(e.is_expired(&LazyNow::new(&*at(0x1_0000_0005))));
        assert!(!e.is_expired(&LazyNow::new(&*at(0x1_0000_0004))));
        let copies: Vec<EntryRef> = (0..100).map(|_| e.clone()).collect();
        drop(e);
        assert!(copies.iter().all(|c| c.value() == b"value bytes"));
    }

    #[test]
    fn empty_key_and_value_and_never_expiring() {
        let e = EntryRef::new(b"", b"", 0);
        assert_eq!((e.key(), e.value()), (&b""[..], &b""[..]));
        assert!(!e.is_expired(&LazyNow::new(&*crate::ManualClock::new(u64::MAX))));
    }

    #[test]
    fn frequency_saturates_at_three() {
        let e = EntryRef::new(b"k", b"v", 0);
        for _ in 0..10 {
            e.touch();
        }
        assert_eq!(e.freq(), 3);
    }

    #[test]
    fn references_cross_threads() {
        let e = EntryRef::new(b"k", &vec![7u8; 4096], 0);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let mine = e.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let c = mine.clone();
                        assert_eq!(c.value()[4095], 7);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("reader thread");
        }
    }
}
