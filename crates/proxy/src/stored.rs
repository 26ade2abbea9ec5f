//! Stored responses: turning an upstream response into an entry (spec/FORMAT.md §4), finding the entry for a
//! request (through a `Vary` marker to the right variant, spec/FORMAT.md §5.4), and reading one back.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AGE, CONTENT_ENCODING, CONTENT_LENGTH, DATE};
use http::{HeaderMap, StatusCode};
use larder_cache::Cache;
use larder_format::key::safe_key;
use larder_format::{
    decode_response, encode_response, encode_value, Compressor, ContentEncoding, DecodeLimits, EncodeOptions, Entry,
    EntryMeta, HttpResponse, Kind,
};
use larder_store::Store;
use serde::{Deserialize, Serialize};

use crate::rfc9111::headers::end_to_end;
use crate::rfc9111::{freshness, vary, StorePlan};

/// Fields that steer caches and are not passed on: they are for larder, not for browsers.
const CONSUMED: &[&str] = &["surrogate-control", "surrogate-key", "cache-tag"];

/// What a base key holds when responses vary: the header names, so the variant can be found.
#[derive(Debug, Serialize, Deserialize)]
pub struct VaryMarker {
    pub vary: Vec<String>,
}

/// A response read from the store.
#[derive(Debug, Clone)]
pub struct Stored {
    pub meta: EntryMeta,
    pub response: HttpResponse,
    /// The store key it was read from (the variant's, for varying responses).
    pub key: String,
    /// The headers in a map, for the caching rules.
    pub headers: HeaderMap,
}

impl Stored {
    pub fn from_entry(key: String, bytes: &Bytes) -> Option<Stored> {
        let (meta, response) = decode_response(bytes, &DecodeLimits::default()).ok()?;
        let headers = header_map(&response.headers);
        Some(Stored { meta, response, key, headers })
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.response.status).unwrap_or(StatusCode::OK)
    }

    pub fn is_fresh(&self, now_ms: u64) -> bool {
        self.meta.expires_at == 0 || now_ms < self.meta.expires_at
    }

    /// Milliseconds past freshness (0 while fresh).
    pub fn staleness_ms(&self, now_ms: u64) -> u64 {
        if self.meta.expires_at == 0 {
            0
        } else {
            now_ms.saturating_sub(self.meta.expires_at)
        }
    }

    /// The `Age` to send now: the age it had when stored plus the time since.
    pub fn age_seconds(&self, now_ms: u64) -> u64 {
        freshness::age_seconds(&self.headers) + now_ms.saturating_sub(self.meta.created_at) / 1000
    }
}

/// Stored header pairs as a map; values share the entry's memory instead of being copied.
pub fn header_map(pairs: &[(Bytes, Bytes)]) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(pairs.len());
    for (name, value) in pairs {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_maybe_shared(value.clone())) {
            headers.append(name, value);
        }
    }
    headers
}

/// Finds the stored response for a request: the base key holds either the response or a `Vary` marker naming the
/// headers that select the variant.
pub async fn lookup<S: Store>(cache: &Cache<S>, base_key: &str, request: &HeaderMap) -> Option<Stored> {
    let bytes = cache.get_entry(base_key).await?.to_bytes();
    let entry = Entry::parse(&bytes).ok()?;
    match entry.header.kind {
        Kind::Response => Stored::from_entry(base_key.to_owned(), &bytes),
        Kind::Value => {
            let marker: VaryMarker = entry.value(&DecodeLimits::default()).ok()?;
            let key = variant_key(base_key, &marker.vary, request);
            let bytes = cache.get_entry(&key).await?.to_bytes();
            Stored::from_entry(key, &bytes)
        }
    }
}

/// The key of the variant of `base_key` that `request` selects (spec/FORMAT.md §5.4).
pub fn variant_key(base_key: &str, names: &[String], request: &HeaderMap) -> String {
    safe_key(&format!("{base_key}\n{}", vary::selecting_values(names, request)))
}

/// An upstream response made ready to store: the entry's parts, before encoding.
pub struct ToStore {
    pub response: HttpResponse,
    pub meta: EntryMeta,
}

/// Builds what is stored for a storable response. `compress` re-encodes compressible identity bodies.
pub fn prepare(
    status: StatusCode,
    upstream: &HeaderMap,
    body: Bytes,
    plan: &StorePlan,
    response_time_ms: u64,
    compress: Option<ContentEncoding>,
) -> ToStore {
    let mut headers = end_to_end(upstream);
    let tags = tags_of(&headers);
    for name in CONSUMED {
        headers.remove(*name);
    }
    headers.remove(CONTENT_LENGTH);
    // A coding larder can transform is recorded in the entry; any other stays a header and is served as is.
    let mut content_encoding = ContentEncoding::Identity;
    if let Some(coding) = single_value(&headers, &CONTENT_ENCODING).and_then(|c| c.parse::<ContentEncoding>().ok()) {
        content_encoding = coding;
        headers.remove(CONTENT_ENCODING);
    }
    let mut body = body;
    if content_encoding == ContentEncoding::Identity && !headers.contains_key(CONTENT_ENCODING) {
        if let Some(coding) = compress {
            if let Some(packed) = crate::encoding::compress_for_store(&body, &headers, coding) {
                body = packed;
                content_encoding = coding;
            }
        }
    }
    headers.insert(AGE, HeaderValue::from(plan.initial_age_ms / 1000));
    if !headers.contains_key(DATE) {
        if let Ok(date) = HeaderValue::from_str(&freshness::format_http_date(response_time_ms)) {
            headers.insert(DATE, date);
        }
    }
    let pairs = headers
        .iter()
        .map(|(n, v)| (Bytes::copy_from_slice(n.as_str().as_bytes()), Bytes::copy_from_slice(v.as_bytes())))
        .collect();
    let meta = EntryMeta {
        created_at: response_time_ms,
        expires_at: response_time_ms.saturating_add(plan.fresh_ms).max(1),
        stale_ms: plan.keep_stale_ms,
        version: None,
        tags,
    };
    ToStore { response: HttpResponse { status: status.as_u16(), headers: pairs, body, content_encoding }, meta }
}

/// Writes a prepared response under `base_key` (and its variant key plus a marker when it varies); returns the
/// key it lives under, or `None` if the store would not take it.
pub async fn store<S: Store>(
    cache: &Cache<S>,
    base_key: &str,
    request: &HeaderMap,
    vary: &[String],
    prepared: &ToStore,
) -> Option<String> {
    // Entries stay uncompressed in the store: a hit then serves the body without decompressing it.
    let options = EncodeOptions { compressor: Compressor::None, ..EncodeOptions::default() };
    let bytes = encode_response(&prepared.response, &prepared.meta, &options).ok()?;
    if vary.is_empty() {
        return cache.put_entry(base_key, &bytes, None).await.then(|| base_key.to_owned());
    }
    let marker = VaryMarker { vary: vary.to_vec() };
    let marker_meta = EntryMeta { tags: Vec::new(), ..prepared.meta.clone() };
    let marker_bytes = encode_value(&marker, &marker_meta, &options).ok()?;
    let key = variant_key(base_key, vary, request);
    if !cache.put_entry(&key, &bytes, None).await {
        return None;
    }
    cache.put_entry(base_key, &marker_bytes, None).await.then_some(key)
}

/// Re-encodes a stored response with updated headers and freshness (after a 304).
pub async fn restore<S: Store>(cache: &Cache<S>, key: &str, response: &HttpResponse, meta: &EntryMeta) -> bool {
    let options = EncodeOptions { compressor: Compressor::None, ..EncodeOptions::default() };
    match encode_response(response, meta, &options) {
        Ok(bytes) => cache.put_entry(key, &bytes, None).await,
        Err(_) => false,
    }
}

/// Tags from `Surrogate-Key` (space-separated) and `Cache-Tag` (comma-separated).
fn tags_of(headers: &HeaderMap) -> Vec<String> {
    let mut tags = Vec::new();
    for value in headers.get_all("surrogate-key").iter().filter_map(|v| v.to_str().ok()) {
        tags.extend(value.split_ascii_whitespace().map(str::to_owned));
    }
    for value in headers.get_all("cache-tag").iter().filter_map(|v| v.to_str().ok()) {
        tags.extend(value.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned));
    }
    tags.sort();
    tags.dedup();
    tags
}

fn single_value<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok().map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> StorePlan {
        StorePlan { fresh_ms: 60_000, initial_age_ms: 5_000, keep_stale_ms: 0, vary: vec![] }
    }

    #[test]
    fn prepare_keeps_end_to_end_headers_and_records_coding_tags_and_age() {
        let mut h = HeaderMap::new();
        for (n, v) in [
            ("content-type", "text/html"),
            ("content-length", "4"),
            ("content-encoding", "gzip"),
            ("connection", "x-private"),
            ("x-private", "1"),
            ("surrogate-key", "a b"),
            ("cache-tag", "b, c"),
            ("age", "99"),
        ] {
            h.append(n, HeaderValue::from_static(v));
        }
        let prepared = prepare(StatusCode::OK, &h, Bytes::from_static(b"\x1f\x8b.."), &plan(), 1_700_000_000_000, None);
        let names: Vec<&[u8]> = prepared.response.headers.iter().map(|(n, _)| &n[..]).collect();
        assert!(names.contains(&&b"content-type"[..]) && names.contains(&&b"date"[..]));
        for gone in
            [&b"content-length"[..], b"content-encoding", b"connection", b"x-private", b"surrogate-key", b"cache-tag"]
        {
            assert!(!names.contains(&gone), "{}", String::from_utf8_lossy(gone));
        }
        assert_eq!(prepared.response.content_encoding, ContentEncoding::Gzip);
        assert_eq!(prepared.meta.tags, ["a", "b", "c"]);
        assert_eq!(prepared.meta.expires_at, 1_700_000_060_000);
        assert!(prepared.response.headers.contains(&(Bytes::from_static(b"age"), Bytes::from_static(b"5"))));
    }

    #[test]
    fn an_unknown_coding_stays_a_header() {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_ENCODING, HeaderValue::from_static("x-custom"));
        let prepared = prepare(StatusCode::OK, &h, Bytes::from_static(b"xx"), &plan(), 1, Some(ContentEncoding::Gzip));
        assert_eq!(prepared.response.content_encoding, ContentEncoding::Identity);
        assert!(prepared.response.headers.iter().any(|(n, v)| &n[..] == b"content-encoding" && &v[..] == b"x-custom"));
    }
}
