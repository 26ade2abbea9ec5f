//! Bounded fuzzing of the decoder that runs in every `make test` (the long coverage-guided run is `make fuzz`).
//!
//! Inputs are random bytes, valid entries from spec/vectors with random mutations, and valid headers in front of
//! random payloads for every compressor. For each input, decoding must return (not panic), must respect
//! `max_size`, and must not allocate beyond a small multiple of `max_size` plus the input (measured by a counting
//! allocator, which is why this file holds a single test: other tests would share the counter).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use larder_format::{decode_response, DecodeLimits, Entry, Kind};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

struct CountingAllocator;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const MAX_SIZE: usize = 256 * 1024;
/// brotli allocates its window (up to 16 MiB) before it knows how much output there will be.
const CODEC_ALLOWANCE: usize = 17 << 20;

/// Decodes fully (header, payload, value or response) and checks the size and allocation bounds.
fn decode_checked(input: &[u8]) -> Result<(), TestCaseError> {
    let limits = DecodeLimits { max_size: MAX_SIZE };
    let baseline = CURRENT.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    if let Ok(entry) = Entry::parse(input) {
        if let Ok(payload) = entry.payload(&limits) {
            prop_assert!(payload.len() <= MAX_SIZE, "payload of {} bytes passed the limit", payload.len());
        }
        match entry.header.kind {
            Kind::Value => {
                let _ = entry.value::<serde::de::IgnoredAny>(&limits);
            }
            Kind::Response => {
                let _ = decode_response(&Bytes::copy_from_slice(input), &limits);
            }
        }
    }
    let used = PEAK.load(Ordering::Relaxed).saturating_sub(baseline);
    let bound = 4 * MAX_SIZE + 8 * input.len() + CODEC_ALLOWANCE;
    prop_assert!(used <= bound, "decoding {} bytes allocated {used} bytes (bound {bound})", input.len());
    Ok(())
}

fn vector_entries() -> Vec<Vec<u8>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/vectors/entries.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("vectors readable")).expect("vectors are JSON");
    doc["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| hex::decode(c["entry_hex"].as_str().expect("entry_hex")).expect("hex"))
        .collect()
}

/// A valid entry with up to eight random edits: byte overwrites, truncation, insertion, or a size field set huge.
fn mutated(entries: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let edit = (0u8..5, any::<prop::sample::Index>(), any::<u8>());
    (prop::sample::select(entries), prop::collection::vec(edit, 1..8)).prop_map(|(mut bytes, edits)| {
        for (op, at, byte) in edits {
            if bytes.is_empty() {
                bytes.push(byte);
                continue;
            }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => bytes[i] ^= 1 << (byte % 8),
                2 => bytes.truncate(i),
                3 => bytes.insert(i, byte),
                _ => {
                    // Aim at length fields: make four bytes 0xff.
                    for b in bytes.iter_mut().skip(i).take(4) {
                        *b = 0xff;
                    }
                }
            }
        }
        bytes
    })
}

/// A valid fixed header for a random kind, serializer and compressor, then random payload bytes.
fn header_then_noise() -> impl Strategy<Value = Vec<u8>> {
    (0u8..2, 0u8..4, 0u8..6, prop::collection::vec(any::<u8>(), 0..600)).prop_map(|(kind, ser, comp, noise)| {
        let mut bytes = vec![0xC1, 0x4C, 1, kind, if kind == 1 { 1 } else { ser }, comp, 0];
        bytes.extend_from_slice(&[0; 16]);
        bytes.extend_from_slice(&noise);
        bytes
    })
}

#[test]
fn decoding_arbitrary_bytes_returns_an_error_within_bounds() {
    // First make sure the counter sees allocations at all, or the bound below would check nothing.
    let baseline = CURRENT.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let big = std::hint::black_box(vec![1u8; 4 << 20]);
    assert!(PEAK.load(Ordering::Relaxed) - baseline >= 4 << 20, "the counting allocator is not counting");
    drop(big);

    let cases: u32 = std::env::var("LARDER_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let strategy =
        prop_oneof![prop::collection::vec(any::<u8>(), 0..300), mutated(vector_entries()), header_then_noise(),];
    runner.run(&strategy, |input| decode_checked(&input)).expect("every input decodes or fails cleanly");
}
