//! `larder bench codecs`: the compressor, serializer and whole-envelope comparison of the source post (001), on
//! larder's own code paths, for the built-in samples and any file a user names.

use std::path::PathBuf;

use larder_format::compress::{compress, decompress};
use larder_format::json::msgpack_from_json;
use larder_format::{
    decode_value, deserialize, encode_serialized, encode_value, serialize_into, Compressor, DecodeLimits,
    EncodeOptions, EntryMeta, Kind, Serializer,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_bytes::ByteBuf;

use crate::data::{self, User};
use crate::measure::{mb_per_s, seconds_per_op, Budget};

/// One line of the report; `--json` prints each as an object.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `compressor`, `serializer` or `envelope`.
    pub kind: &'static str,
    pub name: String,
    /// Which sample the row measured.
    pub data: String,
    pub input_bytes: usize,
    pub output_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compress_mb_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decompress_mb_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encode_mb_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_mb_s: Option<f64>,
    /// Encode + decode of one whole entry, per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries_per_s: Option<f64>,
}

impl Row {
    fn new(kind: &'static str, name: impl Into<String>, data: &str, input_bytes: usize, output_bytes: usize) -> Self {
        Row {
            kind,
            name: name.into(),
            data: data.to_owned(),
            input_bytes,
            output_bytes,
            compress_mb_s: None,
            decompress_mb_s: None,
            encode_mb_s: None,
            decode_mb_s: None,
            entries_per_s: None,
        }
    }
}

/// What to measure.
#[derive(Debug, Clone, Default)]
pub struct CodecBench {
    /// Files to measure besides the built-in samples.
    pub inputs: Vec<PathBuf>,
    pub budget: Budget,
}

/// A sample: bytes to compress, and what serializers make sense for it.
struct Sample {
    name: String,
    bytes: Vec<u8>,
    shape: Shape,
}

enum Shape {
    Html(String),
    Records(Vec<User>),
    JsonDocument(serde_json::Value),
    Opaque,
}

/// The compressors and levels compared: every codec, and a fast, default and strong level where there are levels.
pub const COMPRESSORS: &[(Compressor, Option<i32>)] = &[
    (Compressor::None, None),
    (Compressor::Lz4, None),
    (Compressor::Snappy, None),
    (Compressor::Zstd, Some(1)),
    (Compressor::Zstd, Some(3)),
    (Compressor::Zstd, Some(9)),
    (Compressor::Brotli, Some(1)),
    (Compressor::Brotli, Some(4)),
    (Compressor::Brotli, Some(9)),
    (Compressor::Gzip, Some(1)),
    (Compressor::Gzip, Some(6)),
    (Compressor::Gzip, Some(9)),
];

/// Value sizes for the whole-envelope rows.
pub const ENVELOPE_SIZES: &[(usize, &str)] = &[(1024, "1KiB"), (64 * 1024, "64KiB"), (1024 * 1024, "1MiB")];

impl CodecBench {
    /// Number of measurements `run` will make, for a progress bar.
    pub fn steps(&self) -> u64 {
        let samples = 3 + self.inputs.len();
        (samples * (COMPRESSORS.len() + 1) + ENVELOPE_SIZES.len()) as u64
    }

    /// Runs every measurement, calling `progress` with a label before each.
    pub fn run(&self, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, String> {
        let mut rows = Vec::new();
        let samples = self.samples()?;
        for sample in &samples {
            for &(compressor, level) in COMPRESSORS {
                let name = match level {
                    Some(level) => format!("{compressor}-{level}"),
                    None => compressor.name().to_owned(),
                };
                progress(&format!("{name} on {}", sample.name));
                rows.push(self.compressor_row(sample, compressor, level, name)?);
            }
            progress(&format!("serializers on {}", sample.name));
            rows.extend(self.serializer_rows(sample)?);
        }
        let all_users = samples
            .iter()
            .find_map(|s| match &s.shape {
                Shape::Records(users) => Some(users.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let html = samples.iter().find_map(|s| match &s.shape {
            Shape::Html(html) => Some(html.clone()),
            _ => None,
        });
        for &(size, label) in ENVELOPE_SIZES {
            progress(&format!("envelope {label}"));
            rows.push(self.envelope_records(&all_users, size, label)?);
            if let Some(html) = &html {
                let bytes = &html.as_bytes()[..size.min(html.len())];
                rows.push(self.envelope_raw(bytes, Compressor::None, label)?);
                rows.push(self.envelope_raw(bytes, Compressor::Lz4, label)?);
            }
        }
        Ok(rows)
    }

    fn samples(&self) -> Result<Vec<Sample>, String> {
        let html = data::product_listing_html(1_000_000);
        let users = data::users(4000);
        let packed = rmp_serde::to_vec_named(&users).map_err(|e| e.to_string())?;
        // A 1 KiB slice shows the per-call cost that dominates small cache values.
        let small = html.as_bytes()[..1024].to_vec();
        let mut samples = vec![
            Sample { name: "html-1MB".into(), bytes: html.clone().into_bytes(), shape: Shape::Html(html) },
            Sample { name: "html-1KiB".into(), bytes: small, shape: Shape::Opaque },
            Sample { name: "users-4000.msgpack".into(), bytes: packed, shape: Shape::Records(users) },
        ];
        for path in &self.inputs {
            let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let shape = match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Ok(doc) => Shape::JsonDocument(doc),
                Err(_) => Shape::Opaque,
            };
            let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into());
            samples.push(Sample { name, bytes, shape });
        }
        Ok(samples)
    }

    fn compressor_row(
        &self,
        sample: &Sample,
        compressor: Compressor,
        level: Option<i32>,
        name: String,
    ) -> Result<Row, String> {
        let compressed = compress(compressor, level, &sample.bytes).map_err(|e| e.to_string())?;
        let max = sample.bytes.len();
        let roundtrip = decompress(compressor, &compressed, max).map_err(|e| format!("{name}: {e}"))?;
        if roundtrip != sample.bytes {
            return Err(format!("{name} did not round-trip {}", sample.name));
        }
        let mut row = Row::new("compressor", name, &sample.name, sample.bytes.len(), compressed.len());
        let c = seconds_per_op(self.budget, || compress(compressor, level, &sample.bytes));
        let d = seconds_per_op(self.budget, || decompress(compressor, &compressed, max));
        row.compress_mb_s = Some(mb_per_s(sample.bytes.len(), c));
        row.decompress_mb_s = Some(mb_per_s(sample.bytes.len(), d));
        Ok(row)
    }

    fn serializer_rows(&self, sample: &Sample) -> Result<Vec<Row>, String> {
        let mut rows = Vec::new();
        match &sample.shape {
            Shape::Records(users) => {
                for serializer in [Serializer::MsgPack, Serializer::Json] {
                    rows.push(self.typed_row::<Vec<User>>(users, serializer, &sample.name)?);
                }
            }
            Shape::Html(html) => {
                for serializer in [Serializer::Text, Serializer::MsgPack, Serializer::Json] {
                    rows.push(self.typed_row::<String>(html, serializer, &sample.name)?);
                }
                rows.push(self.typed_row::<ByteBuf>(
                    &ByteBuf::from(sample.bytes.clone()),
                    Serializer::Raw,
                    &sample.name,
                )?);
            }
            Shape::JsonDocument(doc) => {
                let mut packed = Vec::new();
                msgpack_from_json(doc, &mut packed).map_err(|e| e.to_string())?;
                let mut row = Row::new("serializer", "msgpack", &sample.name, sample.bytes.len(), packed.len());
                let e = seconds_per_op(self.budget, || {
                    let mut out = Vec::with_capacity(packed.len());
                    msgpack_from_json(doc, &mut out).map(|()| out)
                });
                let d = seconds_per_op(self.budget, || rmp_serde::from_slice::<serde_json::Value>(&packed));
                row.encode_mb_s = Some(mb_per_s(packed.len(), e));
                row.decode_mb_s = Some(mb_per_s(packed.len(), d));
                rows.push(row);
                rows.push(self.typed_row::<serde_json::Value>(doc, Serializer::Json, &sample.name)?);
            }
            Shape::Opaque => {
                rows.push(self.typed_row::<ByteBuf>(
                    &ByteBuf::from(sample.bytes.clone()),
                    Serializer::Raw,
                    &sample.name,
                )?);
            }
        }
        Ok(rows)
    }

    /// Serializes `value` and reads it back; MB/s are of the serialized form.
    fn typed_row<T: Serialize + DeserializeOwned>(
        &self,
        value: &T,
        serializer: Serializer,
        data: &str,
    ) -> Result<Row, String> {
        let mut bytes = Vec::new();
        serialize_into(serializer, value, &mut bytes).map_err(|e| e.to_string())?;
        deserialize::<T>(serializer, &bytes).map_err(|e| e.to_string())?;
        let mut row = Row::new("serializer", serializer.name(), data, bytes.len(), bytes.len());
        let e = seconds_per_op(self.budget, || {
            let mut out = Vec::with_capacity(bytes.len());
            serialize_into(serializer, value, &mut out).map(|()| out)
        });
        let d = seconds_per_op(self.budget, || deserialize::<T>(serializer, &bytes));
        row.encode_mb_s = Some(mb_per_s(bytes.len(), e));
        row.decode_mb_s = Some(mb_per_s(bytes.len(), d));
        Ok(row)
    }

    /// Default options (msgpack + lz4) on user records of about `size` bytes: encode_value + decode_value.
    fn envelope_records(&self, all: &[User], size: usize, label: &str) -> Result<Row, String> {
        let users = data::users_of_size(all, size);
        let meta = EntryMeta::with_ttl(1_700_000_000_000, 60_000);
        let options = EncodeOptions::default();
        let entry = encode_value(&users, &meta, &options).map_err(|e| e.to_string())?;
        let packed = rmp_serde::to_vec_named(&users).map_err(|e| e.to_string())?.len();
        let limits = DecodeLimits::default();
        let seconds = seconds_per_op(self.budget, || {
            let bytes = encode_value(&users, &meta, &options).ok()?;
            decode_value::<Vec<User>>(&bytes, &limits).ok()
        });
        let mut row = Row::new("envelope", "msgpack+lz4", &format!("users-{label}"), packed, entry.len());
        row.entries_per_s = Some(1.0 / seconds);
        Ok(row)
    }

    /// Raw bytes through the envelope: encode_serialized + decode into an owned buffer.
    fn envelope_raw(&self, bytes: &[u8], compressor: Compressor, label: &str) -> Result<Row, String> {
        let meta = EntryMeta::with_ttl(1_700_000_000_000, 60_000);
        let options = EncodeOptions { serializer: Serializer::Raw, compressor, ..EncodeOptions::default() };
        let limits = DecodeLimits::default();
        let encode = || encode_serialized(Kind::Value, Serializer::Raw, bytes, &meta, &options);
        let entry = encode().map_err(|e| e.to_string())?;
        let seconds = seconds_per_op(self.budget, || {
            let entry = encode().ok()?;
            decode_value::<ByteBuf>(&entry, &limits).ok()
        });
        let name = format!("raw+{}", compressor.name());
        let mut row = Row::new("envelope", name, &format!("html-{label}"), bytes.len(), entry.len());
        row.entries_per_s = Some(1.0 / seconds);
        Ok(row)
    }
}

/// The targets, checked against the rows: (description, measured text, met).
pub fn targets(rows: &[Row]) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    if let Some(lz4) = rows.iter().find(|r| r.kind == "compressor" && r.name == "lz4" && r.data == "html-1MB") {
        let gbs = lz4.decompress_mb_s.unwrap_or(0.0) / 1000.0;
        out.push(("LZ4 decompression on the HTML sample >= 1.5 GB/s".into(), format!("{gbs:.2} GB/s"), gbs >= 1.5));
    }
    let overhead = larder_format::FIXED_HEADER_LEN;
    out.push((
        "envelope overhead without version or tags <= 24 bytes".into(),
        format!("{overhead} bytes"),
        overhead <= 24,
    ));
    if let Some(raw) = rows.iter().find(|r| r.kind == "envelope" && r.name == "raw+none" && r.data == "html-1KiB") {
        let rate = raw.entries_per_s.unwrap_or(0.0);
        out.push((
            "encode + decode of an uncompressed 1 KiB entry >= 1,000,000 entries/s".into(),
            format!("{:.2} M entries/s", rate / 1e6),
            rate >= 1e6,
        ));
    }
    out
}
