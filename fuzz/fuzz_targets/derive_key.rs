//! Key derivation takes request text from the network: it must never panic, and must always yield a safe key.
#![no_main]

use larder_format::key::{url_key, KeyOptions, MAX_KEY_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (method, url) = text.split_once(' ').unwrap_or(("GET", text));
    if let Ok(key) = url_key(method, url, &KeyOptions::default()) {
        assert!(key.len() <= MAX_KEY_LEN);
        assert!(!key.bytes().any(|b| b <= 0x20 || b == 0x7f));
    }
});
