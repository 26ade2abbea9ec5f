//! invalid.json: every entry is refused with the error kind the case names (spec/FORMAT.md §7), within the
//! case's `max_size`.

use std::path::Path;

use bytes::Bytes;
use larder_format::{decode_response, DecodeLimits, Entry, Kind};

use crate::{cases, each, str_field, Checked};

pub fn check(path: &Path) -> Checked {
    let doc = crate::load(path)?;
    Ok(each(cases(&doc)?, |case| {
        let name = str_field(case, "name");
        let bytes = hex::decode(str_field(case, "entry_hex")).expect("hex");
        let limits = DecodeLimits {
            max_size: case["max_size"].as_u64().map_or(DecodeLimits::default().max_size, |m| m as usize),
        };
        let result = Entry::parse(&bytes).and_then(|entry| match entry.header.kind {
            Kind::Response => decode_response(&Bytes::from(bytes.clone()), &limits).map(|_| ()),
            Kind::Value => entry.value::<AnyValue>(&limits).map(|_| ()),
        });
        let err = result.expect_err(&format!("{name}: must not decode"));
        assert_eq!(err.kind().as_str(), str_field(case, "error"), "{name}: {err}");
    }))
}

/// A value type that accepts anything a serializer can produce, so invalid-value cases fail only for the reason
/// the vector names.
struct AnyValue;

impl<'de> serde::Deserialize<'de> for AnyValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| AnyValue)
    }
}
