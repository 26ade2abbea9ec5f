//! Content codings: what a client's `Accept-Encoding` allows, and the transformations between a stored body's
//! coding and another (decoding to identity, compressing an identity body). Every decoder is bounded: it stops at
//! a size limit before it allocates past it, so a small compressed body cannot turn into gigabytes.

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, CONTENT_TYPE};
use http::HeaderMap;
use larder_format::compress::compress;
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

/// A reader of `body` decoded from `coding` (one decoder per coding, for both functions below, so that what the
/// fill-time check accepts is exactly what serving can decode: multi-member gzip, zstd frames without a size).
fn decoding(body: &[u8], coding: ContentEncoding) -> Result<Box<dyn std::io::Read + '_>, String> {
    Ok(match coding {
        ContentEncoding::Identity => Box::new(body),
        ContentEncoding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(body)),
        ContentEncoding::Br => Box::new(brotli::Decompressor::new(body, 64 << 10)),
        ContentEncoding::Zstd => Box::new(zstd::stream::read::Decoder::new(body).map_err(|e| format!("zstd: {e}"))?),
    })
}

/// Decodes a stored body to identity, refusing to produce more than `max` bytes.
pub fn decode(body: &[u8], coding: ContentEncoding, max: usize) -> Result<Bytes, String> {
    use std::io::Read;
    if body.is_empty() {
        // An empty body in any coding is empty content (a 204 that names its coding).
        return Ok(Bytes::new());
    }
    let mut out = Vec::new();
    decoding(body, coding)?
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{}: {e}", coding.name()))?;
    if out.len() > max {
        return Err(too_large(max));
    }
    Ok(Bytes::from(out))
}

/// The coding the `compress` setting offers ("off" = none); an unknown name is an error that says so.
pub fn offered_coding(setting: &str) -> Result<Option<ContentEncoding>, String> {
    match setting {
        "off" => Ok(None),
        "gzip" => Ok(Some(ContentEncoding::Gzip)),
        "br" => Ok(Some(ContentEncoding::Br)),
        "zstd" => Ok(Some(ContentEncoding::Zstd)),
        other => Err(format!("{other:?} is not one of off, gzip, br, zstd")),
    }
}

/// How many bytes `body` decodes to, if at most `max`, without keeping the decoded bytes (a fill checks this
/// before it stores a compressed body, so that no later request can be made to decode more than `max`).
pub fn decoded_len_within(body: &[u8], coding: ContentEncoding, max: usize) -> Result<usize, String> {
    if coding == ContentEncoding::Identity || body.is_empty() {
        return if body.len() <= max { Ok(body.len()) } else { Err(too_large(max)) };
    }
    let mut reader = decoding(body, coding)?;
    let mut scratch = vec![0u8; 64 << 10];
    let mut total = 0usize;
    loop {
        match reader.read(&mut scratch) {
            Ok(0) => return Ok(total),
            Ok(n) => {
                total += n;
                if total > max {
                    return Err(too_large(max));
                }
            }
            Err(e) => return Err(format!("{}: {e}", coding.name())),
        }
    }
}

fn too_large(max: usize) -> String {
    format!("the body decodes to more than {max} bytes")
}

/// Whether an identity body is worth compressing for clients: at least 1 KiB, of a type that compresses well.
pub fn worth_compressing(body: &[u8], headers: &HeaderMap) -> bool {
    body.len() >= 1024 && compressible(headers) && !headers.contains_key(http::header::CONTENT_ENCODING)
}

/// Compresses a body for clients that accept `coding`, when its type compresses well and the result is smaller.
pub fn compress_for_store(body: &Bytes, headers: &HeaderMap, coding: ContentEncoding) -> Option<Bytes> {
    if !worth_compressing(body, headers) {
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
    let ct = ct.split(';').next().unwrap_or("").trim();
    let is = |name: &str| ct.eq_ignore_ascii_case(name);
    let ends = |suffix: &str| ct.len() >= suffix.len() && ct[ct.len() - suffix.len()..].eq_ignore_ascii_case(suffix);
    (ct.len() >= 5 && ct[..5].eq_ignore_ascii_case("text/"))
        || ends("+json")
        || ends("+xml")
        || is("application/json")
        || is("application/javascript")
        || is("application/xml")
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
    fn an_empty_body_in_any_coding_is_empty_content() {
        for coding in ContentEncoding::ALL {
            assert_eq!(decode(b"", *coding, 10), Ok(Bytes::new()), "{coding:?}");
            assert_eq!(decoded_len_within(b"", *coding, 10), Ok(0), "{coding:?}");
        }
        assert!(decode(b"not gzip", ContentEncoding::Gzip, 100).is_err(), "a body that is not its coding still fails");
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

    #[test]
    fn decoded_sizes_are_measured_within_a_bound() {
        let zeros = vec![0u8; 10 << 20];
        for (coding, compressor) in [
            (ContentEncoding::Gzip, Compressor::Gzip),
            (ContentEncoding::Br, Compressor::Brotli),
            (ContentEncoding::Zstd, Compressor::Zstd),
        ] {
            let bomb = compress(compressor, None, &zeros).expect("compresses");
            assert!(bomb.len() < 64 << 10, "{coding:?} packs 10 MiB of zeros small");
            assert_eq!(decoded_len_within(&bomb, coding, 16 << 20), Ok(10 << 20));
            assert!(decoded_len_within(&bomb, coding, 1 << 20).is_err(), "{coding:?} stops at the bound");
        }
        assert!(decoded_len_within(b"not gzip", ContentEncoding::Gzip, 100).is_err());
    }
}
