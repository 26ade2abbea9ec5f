//! The proxy's storage seam, as pingora-cache keeps `storage.rs` apart from HTTP: `ResponseStore` owns the cache,
//! the `Vary` marker hints and the decoded-response memo, and is the only code of the proxy that calls larder-cache.
//! The request path (`path/*.rs`) deals in HTTP and asks it for whole stored responses by key; what an entry looks
//! like in a store (a response, a marker leading to variants, alternates in other codings, a lock) stays here and in
//! `stored.rs`, which turns responses into entries and back without I/O.
//!
//! Its verbs: `lookup` (a request's stored response, through a marker to its variant), `store` (a prepared
//! response, with its marker), `refresh` (a stored response rewritten after a 304), `alternate`/`store_alternate`
//! (a response kept in another coding), `remove` and `remove_url` (one key; a URL with every variant and coding),
//! `purge_prefix`, `purge_tag`, and the cross-process lock fills take (spec/STORES.md §3).

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use larder_cache::{Cache, CacheError, CacheStats, HeldLock, Lock, LockState};
use larder_format::{
    encode_response, encode_value, ContentEncoding, DecodeLimits, Entry, EntryMeta, HttpResponse, Kind,
};
use larder_store::{Purged, ServerReport, Store, StoreStats};

use crate::marker_hints::MarkerHints;
use larder_format::key::VaryMarker;

use crate::stored::{self, url_keys, variant_key, FoundMarker, Lookup, Stored, ToStore};

/// Stored responses, over any store.
pub struct ResponseStore<S> {
    cache: Cache<S>,
    /// On a shared store: the `Vary` marker last seen per URL, to read marker and variant in one round trip.
    marker_hints: Option<MarkerHints>,
}

impl<S: Store> ResponseStore<S> {
    pub fn new(cache: Cache<S>) -> ResponseStore<S> {
        // The memory store answers a second get as fast as a batch: hints pay off only over a network.
        let marker_hints = (cache.backend() != "memory").then(MarkerHints::default);
        ResponseStore { cache, marker_hints }
    }

    /// Finds the stored response for a request: the base key holds either the response or a `Vary` marker naming
    /// the headers that select the variant. `view` gives the request's value of a header as it was sent upstream.
    pub(crate) async fn lookup<'r>(&self, base_key: &str, view: impl Fn(&[String]) -> Cow<'r, HeaderMap>) -> Lookup {
        let hints = self.marker_hints.as_ref();
        let missing = |marker: Option<FoundMarker>, fill_key: String| Lookup::Missing { fill_key, marker };
        // With a hint, the marker and the variant it probably selects are read in one round trip.
        let guess = hints.and_then(|h| h.get(base_key)).map(|hint| {
            let key = variant_key(base_key, &hint, &view(&hint.vary));
            (hint, key)
        });
        let (value, guessed) = match &guess {
            Some((_, key)) => {
                let mut both = self.cache.get_entries(&[base_key, key]).await.into_iter();
                (both.next().flatten(), both.next().flatten())
            }
            None => (self.cache.get_entry(base_key).await, None),
        };
        let Some(value) = value else {
            if let Some(hints) = hints {
                hints.forget(base_key);
            }
            return missing(None, base_key.to_owned());
        };
        let Ok(entry) = Entry::parse(&value) else { return missing(None, base_key.to_owned()) };
        match entry.header.kind {
            Kind::Response => match crate::prepared::stored(base_key, value.clone()) {
                Some(stored) => Lookup::Found(Box::new(stored), None),
                None => missing(None, base_key.to_owned()),
            },
            Kind::Value => {
                let Ok(marker) = entry.value::<VaryMarker>(&DecodeLimits::default()) else {
                    return missing(None, base_key.to_owned());
                };
                let variant = match guess {
                    Some((hint, key)) if hint == marker => guessed.map(|value| (key, value)),
                    _ => None,
                };
                let (key, value) = match variant {
                    Some((key, value)) => (key, Some(value)),
                    None => {
                        let key = variant_key(base_key, &marker, &view(&marker.vary));
                        let value = self.cache.get_entry(&key).await;
                        (key, value)
                    }
                };
                if let Some(hints) = hints {
                    hints.remember(base_key, &marker);
                }
                let found = FoundMarker { marker, meta: entry.header.meta() };
                match value.and_then(|v| crate::prepared::stored(&key, v)) {
                    Some(stored) => Lookup::Found(Box::new(stored), Some(found)),
                    None => missing(Some(found), key),
                }
            }
        }
    }

    /// Writes a prepared response for a request. Without `vary` it goes under `base_key`; with it, under the
    /// variant key, and the base key gets a marker (the existing marker's generation when its names are the same,
    /// so the other variants stay reachable). Returns the key it lives under, or `None` if the store would not
    /// take it.
    pub(crate) async fn store<'r>(
        &self,
        base_key: &str,
        view: impl Fn(&[String]) -> Cow<'r, HeaderMap>,
        vary: &[String],
        existing: Option<&FoundMarker>,
        prepared: &ToStore,
    ) -> Option<String> {
        let bytes = encode_response(&prepared.response, &prepared.meta, &stored::entry_options()).ok()?;
        if vary.is_empty() {
            return self.cache.put_entry(base_key, &bytes, None).await.then(|| base_key.to_owned());
        }
        let (marker, marker_meta) = match existing.filter(|found| found.marker.vary == vary) {
            Some(found) => (found.marker.clone(), stored::later_expiry(&found.meta, &prepared.meta)),
            None => (stored::new_marker(vary), prepared.meta.clone()),
        };
        let marker_meta = EntryMeta { tags: Vec::new(), version: None, ..marker_meta };
        let marker_bytes = encode_value(&marker, &marker_meta, &stored::entry_options()).ok()?;
        let key = variant_key(base_key, &marker, &view(vary));
        if !self.cache.put_entry(&key, &bytes, None).await {
            return None;
        }
        self.cache.put_entry(base_key, &marker_bytes, None).await.then_some(key)
    }

    /// Rewrites the response under `key` with updated headers and freshness (after a 304); whether it was stored.
    pub(crate) async fn refresh(&self, key: &str, response: &HttpResponse, meta: &EntryMeta) -> bool {
        self.write(key, response, meta).await
    }

    /// The response kept under `key` in another coding, if it was made from this version of the response (a
    /// refreshed response gets new alternates: its `created_at` differs).
    pub(crate) async fn alternate(&self, key: &str, of: &Stored, coding: ContentEncoding) -> Option<Stored> {
        let value = self.cache.get_entry(key).await?;
        let found = Stored::from_entry(key.to_owned(), &value.to_bytes())?;
        (found.meta.created_at == of.meta.created_at && found.content_encoding == coding).then_some(found)
    }

    /// Keeps a response in another coding beside the original (spec/FORMAT.md §5.5); whether it was stored.
    pub(crate) async fn store_alternate(&self, key: &str, response: &HttpResponse, meta: &EntryMeta) -> bool {
        self.write(key, response, meta).await
    }

    async fn write(&self, key: &str, response: &HttpResponse, meta: &EntryMeta) -> bool {
        match encode_response(response, meta, &stored::entry_options()) {
            Ok(bytes) => self.cache.put_entry(key, &bytes, None).await,
            Err(_) => false,
        }
    }

    /// Removes what one key holds (a response a newer, unstorable one supersedes).
    pub(crate) async fn remove(&self, key: &str) {
        self.cache.remove_entry(key).await;
    }

    /// Removes a URL's stored responses (every variant, through its marker, and every coding); how many store
    /// entries went.
    pub(crate) async fn remove_url(&self, base_key: &str) -> usize {
        if let Some(hints) = &self.marker_hints {
            hints.forget(base_key);
        }
        let keys = url_keys(base_key);
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        self.cache.remove_entries(&keys).await
    }

    pub async fn purge_prefix(&self, prefix: &str) -> Result<Purged, CacheError> {
        self.cache.purge_prefix(prefix).await
    }

    pub async fn purge_tag(&self, tag: &str) -> Result<Purged, CacheError> {
        self.cache.purge_tag(tag).await
    }

    /// Tries to take the cross-process lock of `key` for at most `ttl` (spec/STORES.md §3).
    pub(crate) async fn try_lock(&self, key: &str, ttl: Duration) -> LockState {
        self.cache.try_lock(key, ttl).await
    }

    /// Holds a lock until released or dropped.
    pub(crate) fn hold(&self, lock: Lock) -> HeldLock<S> {
        self.cache.hold(lock)
    }

    /// Whether some process holds the lock of `key`.
    pub(crate) async fn is_locked(&self, key: &str) -> bool {
        self.cache.is_locked(key).await
    }

    /// Entry bytes (from the admin API), stored as given.
    pub async fn write_entry(&self, key: &str, bytes: &[u8]) -> Result<(), CacheError> {
        self.cache.write_entry(key, bytes, None).await
    }

    pub async fn read_entry(&self, key: &str) -> Result<Option<Bytes>, CacheError> {
        Ok(self.cache.read_entry(key).await?.map(|value| value.to_bytes()))
    }

    pub async fn delete_entry(&self, key: &str) -> Result<bool, CacheError> {
        self.cache.delete_entry(key).await
    }

    /// The largest entry the store takes under a short key.
    pub fn max_entry_bytes(&self) -> usize {
        self.cache.max_entry_bytes()
    }

    pub fn backend(&self) -> &'static str {
        self.cache.backend()
    }

    pub fn stats(&self) -> CacheStats {
        self.cache.stats()
    }

    pub async fn store_stats(&self) -> Result<StoreStats, CacheError> {
        self.cache.store_stats().await
    }

    pub fn server_errors(&self) -> Vec<(String, u64)> {
        self.cache.server_errors()
    }

    pub fn server_reports(&self) -> Vec<ServerReport> {
        self.cache.server_reports()
    }
}
