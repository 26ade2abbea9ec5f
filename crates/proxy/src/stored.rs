//! Stored responses without I/O: turning an upstream response into an entry (spec/FORMAT.md §4), the keys of its
//! variants and alternates (§5.4, §5.5), and reading one back. `storage.rs` does the reading and writing.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AGE, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, DATE};
use http::{HeaderMap, StatusCode};
use larder_format::key::{self, VaryMarker};
pub use larder_format::key::{alternate_key, url_keys};
use larder_format::{
    decode_response, Compressor, ContentEncoding, DecodeLimits, EncodeOptions, EntryMeta, HttpResponse,
};

use crate::respond::CONSUMED;
use crate::rfc9111::cache_control::Directives;
use crate::rfc9111::headers::end_to_end;
use crate::rfc9111::{freshness, StorePlan};

/// What a base key holds when responses vary: the header names, so the variant can be found, and the generation
/// the variant keys are made with. A URL purge removes the marker, so the variants stored before it can no longer
/// be reached; the next response gets a marker of a new generation (spec/FORMAT.md §5.4).
/// A new marker for `vary`, with a new generation (16 lowercase hex digits from a random 64-bit number).
pub(crate) fn new_marker(vary: &[String]) -> VaryMarker {
    VaryMarker { vary: vary.to_vec(), generation: Some(format!("{:016x}", fastrand::u64(..))) }
}

/// A marker read from the store, with its header (for its expiry).
#[derive(Debug, Clone)]
pub struct FoundMarker {
    pub marker: VaryMarker,
    pub meta: EntryMeta,
}

/// A response read from the store.
#[derive(Debug, Clone)]
pub struct Stored {
    pub meta: EntryMeta,
    pub status: u16,
    /// The body, in `content_encoding` (sharing the entry's memory).
    pub body: Bytes,
    pub content_encoding: ContentEncoding,
    /// The store key it was read from (the variant's, for varying responses).
    pub key: String,
    /// The headers, once, in a map: for the caching rules, and the start of every response served from it.
    pub headers: HeaderMap,
    /// Its Cache-Control says no-transform (RFC 9110 §7.7): read once when decoded, since a decoded response is
    /// served many times (prepared.rs); parsing it on every hit was a tenth of a hit's instructions.
    pub no_transform: bool,
}

/// What a lookup found.
pub enum Lookup {
    /// A stored response for the request, and the marker that led to it (for varying responses).
    Found(Box<Stored>, Option<FoundMarker>),
    /// Nothing for this request. `fill_key` is the key a fill would store under: the base key, or the variant key
    /// when a marker exists (so concurrent fills of different variants do not wait for one another).
    Missing { fill_key: String, marker: Option<FoundMarker> },
}

impl Stored {
    pub fn from_entry(key: String, bytes: &Bytes) -> Option<Stored> {
        let (meta, response) = decode_response(bytes, &DecodeLimits::default()).ok()?;
        Some(Stored::from_parts(key, meta, response))
    }

    pub(crate) fn from_parts(key: String, meta: EntryMeta, response: HttpResponse) -> Stored {
        let headers = header_map(&response.headers);
        let no_transform = Directives::parse(headers.get_all(CACHE_CONTROL)).no_transform;
        let HttpResponse { status, body, content_encoding, .. } = response;
        Stored { meta, status, body, content_encoding, key, headers, no_transform }
    }

    /// The response as an entry holds it (for writing it again, or in another coding).
    pub fn to_response(&self) -> HttpResponse {
        HttpResponse {
            status: self.status,
            headers: self.header_pairs(),
            body: self.body.clone(),
            content_encoding: self.content_encoding,
        }
    }

    /// The header pairs, as an entry holds them.
    pub fn header_pairs(&self) -> Vec<(Bytes, Bytes)> {
        self.headers
            .iter()
            .map(|(n, v)| (Bytes::copy_from_slice(n.as_str().as_bytes()), Bytes::copy_from_slice(v.as_bytes())))
            .collect()
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::OK)
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

/// Stored header pairs as a map; values share the entry's memory instead of being copied. The map has room for
/// the fields a response adds when it is served (it becomes the response's map).
pub fn header_map(pairs: &[(Bytes, Bytes)]) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(pairs.len() + 8);
    for (name, value) in pairs {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_maybe_shared(value.clone())) {
            headers.append(name, value);
        }
    }
    headers
}

/// The key of the variant of `base_key` that `request` selects (spec/FORMAT.md §5.4).
pub fn variant_key(base_key: &str, marker: &VaryMarker, request: &HeaderMap) -> String {
    key::variant_key(base_key, marker, &Lines(request))
}

/// A header map as `larder_format::key` reads request headers.
struct Lines<'a>(&'a HeaderMap);

impl key::RequestHeaders for Lines<'_> {
    fn lines(&self, name: &str) -> Vec<&[u8]> {
        self.0.get_all(name).iter().map(|v| v.as_bytes()).collect()
    }
}

/// A response just prepared for the store, read back as a stored one (so it is served exactly as a hit is).
pub fn served_form(key: String, prepared: ToStore) -> Stored {
    Stored::from_parts(key, prepared.meta, prepared.response)
}

/// An upstream response made ready to store: the entry's parts, before encoding.
pub struct ToStore {
    pub response: HttpResponse,
    pub meta: EntryMeta,
}

/// Builds what is stored for a storable response.
pub fn prepare(
    status: StatusCode,
    upstream: &HeaderMap,
    body: Bytes,
    plan: &StorePlan,
    response_time_ms: u64,
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

/// Entries stay uncompressed in the store: a hit then serves the body without decompressing it.
pub(crate) fn entry_options() -> EncodeOptions {
    EncodeOptions { compressor: Compressor::None, ..EncodeOptions::default() }
}

/// A marker must outlive every variant it leads to: it keeps the later of the two hard expiries.
pub(crate) fn later_expiry(marker: &EntryMeta, variant: &EntryMeta) -> EntryMeta {
    let hard = |m: &EntryMeta| larder_format::hard_expiry(m.expires_at, m.stale_ms).unwrap_or(u64::MAX);
    if hard(variant) > hard(marker) {
        variant.clone()
    } else {
        marker.clone()
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
        let prepared = prepare(StatusCode::OK, &h, Bytes::from_static(b"\x1f\x8b.."), &plan(), 1_700_000_000_000);
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
        let prepared = prepare(StatusCode::OK, &h, Bytes::from_static(b"xx"), &plan(), 1);
        assert_eq!(prepared.response.content_encoding, ContentEncoding::Identity);
        assert!(prepared.response.headers.iter().any(|(n, v)| &n[..] == b"content-encoding" && &v[..] == b"x-custom"));
    }
}
