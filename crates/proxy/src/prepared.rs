//! Decoded stored responses, kept per serving thread, so that a hit on a hot page neither decodes its entry nor
//! builds its header map again: about a fifth of a hit's work (measured with callgrind, docs/benchmarks.md).
//!
//! A decoded response is reused only for the very stored value the store just returned (`Value::same_entry`: the
//! same memory-store entry, which cannot be freed and reused while the cache holds it) or for the same bytes (a
//! remote store returns a fresh copy on every hit; equal bytes decode to the same response, and comparing 10 KB
//! costs about a thousand instructions where decoding them cost about 8,000: bench/hit-instructions.sh --store
//! memcached; up to `MAX_COMPARED_BYTES`), so a replaced, purged or refreshed entry (its creation time is in its bytes) is always decoded
//! afresh: the cache never answers for what the store no longer holds. Holding a
//! value does keep its memory alive after the store evicts it; that is bounded here, at `MAX_ENTRIES` responses and
//! `MAX_BYTES` of entry bytes per thread.

use std::cell::RefCell;
use std::collections::HashMap;

use larder_store::Value;

use crate::stored::Stored;

/// Responses kept per thread.
const MAX_ENTRIES: usize = 1024;
/// Entry bytes kept alive per thread.
const MAX_BYTES: usize = 32 << 20;
/// Larger entries are decoded every time (their decoding is small next to sending them).
const MAX_ENTRY_BYTES: usize = 1 << 20;
/// Equal bytes in other memory are recognised up to this size: comparing costs about one instruction per 8 bytes,
/// decoding a response a near-constant ~8,000 (the body is not copied), so past ~32 KiB comparing would cost more.
const MAX_COMPARED_BYTES: usize = 16 << 10;

#[derive(Default)]
struct Prepared {
    by_key: HashMap<String, (Value, Stored)>,
    bytes: usize,
}

thread_local! {
    static PREPARED: RefCell<Prepared> = RefCell::new(Prepared::default());
}

/// The response stored as `value` under `key`, decoded (or `None` if it is not a valid response entry).
pub fn stored(key: &str, value: Value) -> Option<Stored> {
    let cached = PREPARED.with(|prepared| {
        let prepared = prepared.borrow();
        prepared
            .by_key
            .get(key)
            .filter(|(held, _)| held.same_entry(&value) || (value.len() <= MAX_COMPARED_BYTES && held[..] == value[..]))
            .map(|(_, stored)| stored.clone())
    });
    if cached.is_some() {
        return cached;
    }
    let stored = Stored::from_entry(key.to_owned(), &value.to_bytes())?;
    if value.len() <= MAX_ENTRY_BYTES {
        PREPARED.with(|prepared| prepared.borrow_mut().keep(key, value, stored.clone()));
    }
    Some(stored)
}

impl Prepared {
    fn keep(&mut self, key: &str, value: Value, stored: Stored) {
        let size = value.len();
        if let Some((old, _)) = self.by_key.remove(key) {
            self.bytes -= old.len();
        }
        while !self.by_key.is_empty() && (self.by_key.len() >= MAX_ENTRIES || self.bytes + size > MAX_BYTES) {
            // Any entry will do: a hot page comes back at once, and one decode brings it in again.
            let Some(victim) = self.by_key.keys().next().cloned() else { break };
            if let Some((old, _)) = self.by_key.remove(&victim) {
                self.bytes -= old.len();
            }
        }
        self.bytes += size;
        self.by_key.insert(key.to_owned(), (value, stored));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use larder_format::{encode_response, ContentEncoding, EncodeOptions, EntryMeta, HttpResponse};

    fn entry(body: &'static [u8]) -> Value {
        let response = HttpResponse {
            status: 200,
            headers: vec![(Bytes::from_static(b"x-body"), Bytes::from_static(body))],
            body: Bytes::from_static(body),
            content_encoding: ContentEncoding::Identity,
        };
        Value::from(encode_response(&response, &EntryMeta::with_ttl(1, 0), &EncodeOptions::default()).expect("encodes"))
    }

    #[test]
    fn a_decoded_response_is_reused_only_for_the_same_stored_value() {
        let first = entry(b"one");
        let decoded = stored("k", first.clone()).expect("decodes");
        assert_eq!(decoded.body, Bytes::from_static(b"one"));
        assert_eq!(stored("k", first.clone()).map(|s| s.body), Some(Bytes::from_static(b"one")));
        // Equal bytes in other memory (a remote store's copy) decode to the same response.
        let copy = Value::from(first.to_vec());
        assert!(!copy.same_entry(&first));
        assert_eq!(stored("k", copy).map(|s| s.body), Some(Bytes::from_static(b"one")));
        // A replaced entry is decoded afresh, even when it is as long as the one held.
        let replaced = entry(b"two");
        assert_eq!(replaced.len(), first.len());
        assert_eq!(stored("k", replaced).map(|s| s.body), Some(Bytes::from_static(b"two")));
        assert!(stored("bad", Value::from(b"not an entry".to_vec())).is_none());
    }

    #[test]
    fn the_cache_stays_within_its_bounds() {
        for i in 0..(MAX_ENTRIES + 100) {
            stored(&format!("k{i}"), entry(b"x")).expect("decodes");
        }
        PREPARED.with(|p| {
            let p = p.borrow();
            assert!(p.by_key.len() <= MAX_ENTRIES);
            assert_eq!(p.bytes, p.by_key.values().map(|(v, _)| v.len()).sum::<usize>());
        });
    }
}
