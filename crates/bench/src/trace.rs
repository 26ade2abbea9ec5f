//! Readers for the standard cache traces (ARC, LIRS, cache2k, libCacheSim's oracleGeneral), compressed or not.
//! A trace becomes a list of requests: a key, and a size when the trace records one.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::str::FromStr;

/// One request of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub key: u64,
    /// Object size in bytes, for traces that carry it (oracleGeneral).
    pub size: Option<u32>,
}

/// The trace formats `larder bench hit-ratio` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// ARC paper traces: text lines `start_block n_blocks ignore req_no`; each of the n blocks is one request.
    Arc,
    /// LIRS paper traces: one integer key per line.
    Lirs,
    /// cache2k traces: big-endian 32-bit integer keys back to back.
    Cache2k,
    /// libCacheSim's oracleGeneral: 24-byte little-endian records `u32 time, u64 id, u32 size, i64 next`.
    OracleGeneral,
}

impl FromStr for TraceFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "arc" => Ok(TraceFormat::Arc),
            "lirs" => Ok(TraceFormat::Lirs),
            "cache2k" => Ok(TraceFormat::Cache2k),
            "oracle-general" => Ok(TraceFormat::OracleGeneral),
            other => Err(format!("unknown trace format {other:?} (expected arc, lirs, cache2k or oracle-general)")),
        }
    }
}

/// A synthetic trace for when no public one is at hand: `requests` requests over `keys` keys drawn from a Zipf
/// distribution with `exponent` (0.99 is the usual web-cache skew), from a fixed seed, so every run replays the same.
pub fn zipf(keys: usize, requests: usize, exponent: f64) -> Vec<Request> {
    crate::data::key_indices(keys.max(1), requests, 0x2197, Some(exponent))
        .into_iter()
        .map(|key| Request { key: u64::from(key), size: None })
        .collect()
}

/// Reads a whole trace. Files ending in `.zst`, `.gz` or `.xz` are decompressed first.
pub fn load(path: &Path, format: TraceFormat) -> Result<Vec<Request>, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let name = path.to_string_lossy();
    let mut bytes = Vec::new();
    let read = if name.ends_with(".zst") {
        zstd::stream::read::Decoder::new(file).and_then(|mut d| d.read_to_end(&mut bytes))
    } else if name.ends_with(".gz") {
        flate2::read::MultiGzDecoder::new(file).read_to_end(&mut bytes)
    } else if name.ends_with(".xz") {
        let mut reader = BufReader::new(file);
        lzma_rs::xz_decompress(&mut reader, &mut bytes).map(|_| 0).map_err(|e| std::io::Error::other(e.to_string()))
    } else {
        BufReader::new(file).read_to_end(&mut bytes)
    };
    read.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&bytes, format).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses decompressed trace bytes.
pub fn parse(bytes: &[u8], format: TraceFormat) -> Result<Vec<Request>, String> {
    match format {
        TraceFormat::Arc => parse_arc(bytes),
        TraceFormat::Lirs => parse_lines(bytes, |line| Ok(vec![line.parse::<u64>().map_err(|e| e.to_string())?])),
        TraceFormat::Cache2k => {
            if !bytes.len().is_multiple_of(4) {
                return Err(format!("cache2k trace of {} bytes is not a whole number of 4-byte keys", bytes.len()));
            }
            Ok(bytes
                .chunks_exact(4)
                .map(|c| Request { key: u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]])), size: None })
                .collect())
        }
        TraceFormat::OracleGeneral => {
            if !bytes.len().is_multiple_of(24) {
                return Err(format!(
                    "oracleGeneral trace of {} bytes is not a whole number of 24-byte records",
                    bytes.len()
                ));
            }
            Ok(bytes
                .chunks_exact(24)
                .map(|r| {
                    let mut id = [0u8; 8];
                    id.copy_from_slice(&r[4..12]);
                    Request {
                        key: u64::from_le_bytes(id),
                        size: Some(u32::from_le_bytes([r[12], r[13], r[14], r[15]])),
                    }
                })
                .collect())
        }
    }
}

fn parse_arc(bytes: &[u8]) -> Result<Vec<Request>, String> {
    parse_lines(bytes, |line| {
        let mut fields = line.split_ascii_whitespace();
        let start: u64 = fields.next().ok_or("empty line")?.parse().map_err(|e| format!("start block: {e}"))?;
        let count: u64 = fields.next().ok_or("no block count")?.parse().map_err(|e| format!("block count: {e}"))?;
        Ok((start..start + count).collect())
    })
}

/// Applies `keys_of` to every non-empty line, numbering errors by line.
fn parse_lines(bytes: &[u8], keys_of: impl Fn(&str) -> Result<Vec<u64>, String>) -> Result<Vec<Request>, String> {
    let mut requests = Vec::new();
    for (n, line) in bytes.lines().enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", n + 1))?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let keys = keys_of(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        requests.extend(keys.into_iter().map(|key| Request { key, size: None }));
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arc_lines_expand_to_one_request_per_block() {
        let reqs = parse(b"10 3 0 0\n\n7 1 0 1\n", TraceFormat::Arc).expect("parses");
        let keys: Vec<u64> = reqs.iter().map(|r| r.key).collect();
        assert_eq!(keys, [10, 11, 12, 7]);
    }

    #[test]
    fn binary_formats_decode_their_byte_orders() {
        let reqs = parse(&[0, 0, 1, 0, 0, 0, 0, 5], TraceFormat::Cache2k).expect("parses");
        assert_eq!(reqs.iter().map(|r| r.key).collect::<Vec<_>>(), [256, 5]);
        let mut record = vec![1, 0, 0, 0];
        record.extend_from_slice(&0x0102u64.to_le_bytes());
        record.extend_from_slice(&4096u32.to_le_bytes());
        record.extend_from_slice(&(-1i64).to_le_bytes());
        let reqs = parse(&record, TraceFormat::OracleGeneral).expect("parses");
        assert_eq!(reqs, [Request { key: 0x0102, size: Some(4096) }]);
        assert!(parse(&record[..23], TraceFormat::OracleGeneral).is_err());
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        let err = parse(b"1\nx\n", TraceFormat::Lirs).expect_err("refuses");
        assert!(err.starts_with("line 2:"), "{err}");
    }
}
