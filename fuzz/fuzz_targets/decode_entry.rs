//! Coverage-guided fuzzing of the whole decode path: header, bounded decompression, value or response.
#![no_main]

use bytes::Bytes;
use larder_format::{decode_response, DecodeLimits, Entry, Kind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = DecodeLimits { max_size: 1 << 20 };
    if let Ok(entry) = Entry::parse(data) {
        if let Ok(payload) = entry.payload(&limits) {
            assert!(payload.len() <= limits.max_size);
        }
        match entry.header.kind {
            Kind::Value => {
                let _ = entry.value::<serde::de::IgnoredAny>(&limits);
            }
            Kind::Response => {
                let _ = decode_response(&Bytes::copy_from_slice(data), &limits);
            }
        }
    }
});
