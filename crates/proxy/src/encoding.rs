//! Content codings: a response is stored once, in one coding, and served in a coding each client accepts. A
//! client that accepts the stored coding gets the stored bytes; one that does not gets them decoded to identity.
//! An encoded body never reaches a client that did not ask for it.

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, CONTENT_TYPE};
use http::HeaderMap;
use larder_format::compress::{compress, decompress};
use larder_format::{Compressor, ContentEncoding};

/// What a client's `Accept-Encoding` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    gzip: bool,
    br: bool,
    zstd: bool,
    identity: bool,
}

impl Accepted {
    /// Reads `Accept-Encoding` (RFC 9110 §12.5.3): q=0 refuses a coding, `*` covers those not named, and identity is
    /// acceptable unless refused. No header at all means identity only, which is what larder assumes.
    pub fn from_request(headers: &HeaderMap) -> Accepted {
        let mut named: Vec<(String, bool)> = Vec::new();
        for line in headers.get_all(ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()) {
            for item in line.split(',') {
                let mut parts = item.split(';');
                let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
                if coding.is_empty() {
                    continue;
                }
                let refused = parts.any(|p| {
                    let p = p.trim();
                    p.strip_prefix("q=")
                        .or_else(|| p.strip_prefix("Q="))
                        .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
                });
                named.push((coding, !refused));
            }
        }
        let lookup = |coding: &str| -> Option<bool> { named.iter().find(|(c, _)| c == coding).map(|(_, ok)| *ok) };
        let star = lookup("*");
        let allowed = |coding: &str| lookup(coding).or(star).unwrap_or(false);
        Accepted {
            gzip: allowed("gzip") || lookup("x-gzip").unwrap_or(false),
            br: allowed("br"),
            zstd: allowed("zstd"),
            identity: lookup("identity").or(star).unwrap_or(true),
        }
    }

    pub fn accepts(&self, coding: ContentEncoding) -> bool {
        match coding {
            ContentEncoding::Identity => self.identity,
            ContentEncoding::Gzip => self.gzip,
            ContentEncoding::Br => self.br,
            ContentEncoding::Zstd => self.zstd,
        }
    }
}

/// Decodes a stored body to identity, refusing to produce more than `max` bytes.
pub fn decode(body: &[u8], coding: ContentEncoding, max: usize) -> Result<Bytes, String> {
    let decoded = match coding {
        ContentEncoding::Identity => return Ok(Bytes::copy_from_slice(body)),
        ContentEncoding::Gzip => decompress(Compressor::Gzip, body, max),
        ContentEncoding::Br => decompress(Compressor::Brotli, body, max),
        // HTTP zstd frames need not record their size (our stored entries' do), so decode as a bounded stream.
        ContentEncoding::Zstd => return decode_zstd_stream(body, max),
    };
    decoded.map(Bytes::from).map_err(|e| e.to_string())
}

fn decode_zstd_stream(body: &[u8], max: usize) -> Result<Bytes, String> {
    use std::io::Read;
    let decoder = zstd::stream::read::Decoder::new(body).map_err(|e| format!("zstd: {e}"))?;
    let mut out = Vec::new();
    decoder.take(max as u64 + 1).read_to_end(&mut out).map_err(|e| format!("zstd: {e}"))?;
    if out.len() > max {
        return Err(format!("zstd body decodes to more than {max} bytes"));
    }
    Ok(Bytes::from(out))
}

/// The coding to compress new identity bodies in when storing ("off" = none).
pub fn store_coding(setting: &str) -> Option<ContentEncoding> {
    match setting {
        "gzip" => Some(ContentEncoding::Gzip),
        "br" => Some(ContentEncoding::Br),
        "zstd" => Some(ContentEncoding::Zstd),
        _ => None,
    }
}

/// Compresses a body for storage when its type compresses well and the result is smaller.
pub fn compress_for_store(body: &Bytes, headers: &HeaderMap, coding: ContentEncoding) -> Option<Bytes> {
    if body.len() < 1024 || !compressible(headers) {
        return None;
    }
    let compressor = match coding {
        ContentEncoding::Gzip => Compressor::Gzip,
        ContentEncoding::Br => Compressor::Brotli,
        ContentEncoding::Zstd => Compressor::Zstd,
        ContentEncoding::Identity => return None,
    };
    let compressed = compress(compressor, None, body).ok()?;
    (compressed.len() < body.len()).then(|| Bytes::from(compressed))
}

fn compressible(headers: &HeaderMap) -> bool {
    let Some(ct) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let ct = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    ct.starts_with("text/")
        || ct.ends_with("+json")
        || ct.ends_with("+xml")
        || matches!(ct.as_str(), "application/json" | "application/javascript" | "application/xml" | "image/svg+xml")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn accepted(value: &'static str) -> Accepted {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, HeaderValue::from_static(value));
        Accepted::from_request(&h)
    }

    #[test]
    fn q_values_stars_and_identity() {
        let a = accepted("gzip, br;q=0.5, zstd;q=0");
        assert!(a.accepts(ContentEncoding::Gzip) && a.accepts(ContentEncoding::Br));
        assert!(!a.accepts(ContentEncoding::Zstd));
        assert!(a.accepts(ContentEncoding::Identity));
        let star = accepted("*;q=0.1, gzip;q=0");
        assert!(star.accepts(ContentEncoding::Br) && !star.accepts(ContentEncoding::Gzip));
        assert!(!accepted("identity;q=0, gzip").accepts(ContentEncoding::Identity));
        let none = Accepted::from_request(&HeaderMap::new());
        assert!(none.accepts(ContentEncoding::Identity) && !none.accepts(ContentEncoding::Gzip));
    }

    #[test]
    fn stored_codings_decode_within_a_limit() {
        let text = Bytes::from("hello hello hello hello ".repeat(100));
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        for coding in [ContentEncoding::Gzip, ContentEncoding::Br, ContentEncoding::Zstd] {
            let packed = compress_for_store(&text, &headers, coding).expect("compressible");
            assert!(packed.len() < text.len());
            assert_eq!(decode(&packed, coding, 1 << 20).expect("decodes"), text);
            assert!(decode(&packed, coding, 100).is_err(), "{coding:?} stops at the limit");
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("image/png"));
        assert!(compress_for_store(&text, &headers, ContentEncoding::Gzip).is_none());
    }
}
