//! The JSON parser reads documents from stdin and from stored json-serializer entries: it must never panic,
//! and what it accepts must write back and read back unchanged.
#![no_main]

use larder_format::json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(document) = json::parse(data) {
        let written = document.to_compact_vec();
        let again = json::parse(&written).expect("written JSON reads back");
        assert_eq!(again.to_compact_vec(), written);
        let mut packed = Vec::new();
        let _ = json::msgpack_from_json(&document, &mut packed);
    }
});
