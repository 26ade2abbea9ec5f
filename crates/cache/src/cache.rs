//! The cache handle: options, keys with namespaces, and the plain operations (read, write, delete, exists, and
//! their batch forms). `fetch` lives in `fetch.rs`.

use std::sync::Arc;
use std::time::Duration;

use larder_format::key::namespaced_key;
use larder_format::{encode_value, Compressor, DecodeLimits, EncodeOptions, Entry, EntryMeta, Kind, Serializer};
use larder_store::{Clock, MemoryStore, Store, StoreError, SystemClock, Value};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::coalesce::InFlight;
use crate::outage::{OutageMemory, DEFAULT_OUTAGE_MEMORY};

/// What a `fetch` leader hands its waiters: the value (type-erased, since different keys hold different types) or
/// the error every waiter gets.
pub(crate) type Outcome = Result<Arc<dyn std::any::Any + Send + Sync>, CacheError>;
use crate::error::CacheError;
use crate::stats::{CacheCounters, CacheStats};

/// Per-call options for writes and fetches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// How long the value is fresh; `None` uses the cache's default (which may be "forever").
    pub ttl: Option<Duration>,
    /// How long past freshness a stale value may still be served while one caller recomputes (Rails'
    /// `race_condition_ttl`); `None` uses the cache's default.
    pub stale: Option<Duration>,
    /// Version of the value; a read asking for another version is a miss (Rails' recyclable cache keys).
    pub version: Option<String>,
    /// Tags, for purge by tag.
    pub tags: Vec<String>,
}

impl WriteOptions {
    pub fn ttl(ttl: Duration) -> Self {
        WriteOptions { ttl: Some(ttl), ..WriteOptions::default() }
    }

    pub fn with_stale(mut self, stale: Duration) -> Self {
        self.stale = Some(stale);
        self
    }

    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    pub fn with_tags(mut self, tags: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }
}

/// Builds a [`Cache`].
pub struct CacheBuilder<S> {
    store: S,
    namespace: String,
    encode: EncodeOptions,
    limits: DecodeLimits,
    default_ttl: Option<Duration>,
    default_stale: Duration,
    clock: Arc<dyn Clock>,
    lock_ttl: Duration,
    /// `None`: the default (the store's L1, else 16 MiB; none over the memory store).
    outage_memory: Option<usize>,
}

impl<S: Store> CacheBuilder<S> {
    /// Prefix for every key (see spec/FORMAT.md §5.2).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    pub fn serializer(mut self, serializer: Serializer) -> Self {
        self.encode.serializer = serializer;
        self
    }

    pub fn compressor(mut self, compressor: Compressor) -> Self {
        self.encode.compressor = compressor;
        self
    }

    /// Payloads shorter than this are stored uncompressed (default 1024).
    pub fn compress_threshold(mut self, bytes: usize) -> Self {
        self.encode.compress_threshold = bytes;
        self
    }

    /// Largest payload a read will decompress (default 64 MiB).
    pub fn max_value_size(mut self, bytes: usize) -> Self {
        self.limits.max_size = bytes;
        self
    }

    /// Freshness for writes that do not say (default: forever).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = Some(ttl);
        self
    }

    /// Stale window for writes that do not say (default: none).
    pub fn default_stale(mut self, stale: Duration) -> Self {
        self.default_stale = stale;
        self
    }

    /// How long a recompute lock in the store lives if its holder dies (default 10 s).
    pub fn recompute_lock_ttl(mut self, ttl: Duration) -> Self {
        self.lock_ttl = ttl;
        self
    }

    /// The clock for created-at and freshness; share it with the store in tests.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The outage memory's size in bytes (spec/STORES.md §3, "When the store fails"): what is loaded while the
    /// store fails is kept there until the store answers again. 0 turns it off. By default 16 MiB, or the store's
    /// own L1 when it has one (then this size is not used); none over the memory store, which cannot fail.
    pub fn outage_memory(mut self, bytes: usize) -> Self {
        self.outage_memory = Some(bytes);
        self
    }

    fn outage(&self) -> OutageMemory {
        if self.store.backend() == "memory" {
            return OutageMemory::default();
        }
        if let Some(l1) = self.store.local_copy() {
            return OutageMemory::new(Some(l1));
        }
        let bytes = self.outage_memory.unwrap_or(DEFAULT_OUTAGE_MEMORY);
        let memory =
            (bytes > 0).then(|| MemoryStore::builder().capacity_bytes(bytes).clock(self.clock.clone()).build());
        OutageMemory::new(memory.and_then(Result::ok))
    }

    pub fn build(self) -> Cache<S> {
        let outage = self.outage();
        Cache {
            shared: Arc::new(Shared {
                outage,
                store: self.store,
                encode: self.encode,
                limits: self.limits,
                default_ttl: self.default_ttl,
                default_stale: self.default_stale,
                clock: self.clock,
                lock_ttl: self.lock_ttl,
                inflight: InFlight::default(),
                counters: CacheCounters::default(),
            }),
            namespace: Arc::from(self.namespace),
        }
    }
}

/// What programs call. Cloning is cheap and shares the store, the coalescing state and the counters.
pub struct Cache<S> {
    pub(crate) shared: Arc<Shared<S>>,
    namespace: Arc<str>,
}

impl<S> Clone for Cache<S> {
    fn clone(&self) -> Self {
        Cache { shared: self.shared.clone(), namespace: self.namespace.clone() }
    }
}

pub(crate) struct Shared<S> {
    pub(crate) store: S,
    pub(crate) encode: EncodeOptions,
    pub(crate) limits: DecodeLimits,
    pub(crate) default_ttl: Option<Duration>,
    pub(crate) default_stale: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) lock_ttl: Duration,
    pub(crate) inflight: InFlight<Outcome>,
    pub(crate) counters: CacheCounters,
    pub(crate) outage: OutageMemory,
}

/// What a lookup found.
pub(crate) enum Lookup<T> {
    Fresh(T),
    /// Past freshness but within its stale window.
    Stale(T),
    Miss,
}

impl<S: Store> Cache<S> {
    /// A builder over `store`. The compressor is lz4 (FORMAT.md §3) except on the memory store, whose bytes never
    /// leave the process: none there unless [`CacheBuilder::compressor`] names one (spec/STORES.md §8).
    pub fn builder(store: S) -> CacheBuilder<S> {
        let mut encode = EncodeOptions::default();
        if store.backend() == "memory" {
            encode.compressor = Compressor::None;
        }
        CacheBuilder {
            store,
            namespace: String::new(),
            encode,
            limits: DecodeLimits::default(),
            default_ttl: None,
            default_stale: Duration::ZERO,
            clock: Arc::new(SystemClock),
            lock_ttl: Duration::from_secs(10),
            outage_memory: None,
        }
    }

    /// A cache over `store` with default options.
    pub fn new(store: S) -> Cache<S> {
        Cache::builder(store).build()
    }

    /// The same cache under another namespace (nested: `outer:inner`).
    pub fn namespace(&self, namespace: &str) -> Cache<S> {
        let full =
            if self.namespace.is_empty() { namespace.to_owned() } else { format!("{}:{namespace}", self.namespace) };
        Cache { shared: self.shared.clone(), namespace: Arc::from(full) }
    }

    pub fn store(&self) -> &S {
        &self.shared.store
    }

    pub fn stats(&self) -> CacheStats {
        self.shared.counters.snapshot()
    }

    /// How many keys this process is computing right now.
    pub fn computing(&self) -> usize {
        self.shared.inflight.len()
    }

    /// The store key for `key` in this cache's namespace.
    pub fn store_key(&self, key: &str) -> String {
        namespaced_key(&self.namespace, key)
    }

    /// The fresh value for `key`, if any (a stale value is not returned; use `fetch` for stale-while-recompute).
    pub async fn read<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, CacheError> {
        self.read_version(key, None).await
    }

    /// As [`read`](Self::read), but a value of another version is a miss.
    pub async fn read_version<T: DeserializeOwned>(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<T>, CacheError> {
        Ok(match self.lookup(&self.store_key(key), version).await {
            Lookup::Fresh(v) => Some(v),
            Lookup::Stale(_) | Lookup::Miss => None,
        })
    }

    /// Whether a fresh value (of `version`, if given) exists, without decoding it.
    pub async fn exists(&self, key: &str, version: Option<&str>) -> Result<bool, CacheError> {
        let found = self.get_raw(&self.store_key(key)).await;
        Ok(found.is_some_and(|bytes| {
            Entry::parse(&bytes).is_ok_and(|e| {
                e.header.kind == Kind::Value
                    && version.is_none_or(|v| e.header.version == Some(v))
                    && (e.header.expires_at == 0 || self.shared.clock.now_ms() < e.header.expires_at)
            })
        }))
    }

    /// Stores `value` under `key`.
    pub async fn write<T: Serialize + ?Sized>(
        &self,
        key: &str,
        value: &T,
        options: &WriteOptions,
    ) -> Result<(), CacheError> {
        let (bytes, store_ttl) = self.encode(value, options)?;
        let store_key = self.store_key(key);
        let written = self.shared.store.set(&store_key, &bytes, store_ttl).await;
        if self.failed(&written) {
            self.shared.outage.keep(&store_key, &bytes, store_ttl);
        }
        Ok(written?)
    }

    /// Removes `key`; true if it was there.
    pub async fn delete(&self, key: &str) -> Result<bool, CacheError> {
        let store_key = self.store_key(key);
        self.shared.outage.forget(&store_key);
        let deleted = self.shared.store.delete(&store_key).await;
        self.failed(&deleted);
        Ok(deleted?)
    }

    /// Fresh values for `keys`, in order (`None` for misses).
    pub async fn read_many<T: DeserializeOwned>(&self, keys: &[&str]) -> Result<Vec<Option<T>>, CacheError> {
        let store_keys: Vec<String> = keys.iter().map(|k| self.store_key(k)).collect();
        let refs: Vec<&str> = store_keys.iter().map(String::as_str).collect();
        let found = self.get_many_raw(&refs).await;
        Ok(found
            .into_iter()
            .map(|bytes| match bytes.map(|b| self.decode::<T>(&b, None)) {
                Some(Lookup::Fresh(v)) => {
                    CacheCounters::bump(&self.shared.counters.hits);
                    Some(v)
                }
                _ => {
                    CacheCounters::bump(&self.shared.counters.misses);
                    None
                }
            })
            .collect())
    }

    /// Stores several values with the same options.
    pub async fn write_many<T: Serialize>(
        &self,
        items: &[(&str, T)],
        options: &WriteOptions,
    ) -> Result<(), CacheError> {
        for (key, value) in items {
            self.write(key, value, options).await?;
        }
        Ok(())
    }

    /// Reads the store, absorbing store failures (counted): a cache that is down must not take the program down
    /// with it. A read the store fails is answered from the outage memory.
    pub(crate) async fn get_raw(&self, store_key: &str) -> Option<Value> {
        let found = self.shared.store.get(store_key).await;
        if self.failed(&found) {
            return self.shared.outage.get(store_key);
        }
        self.absorbed(found).flatten()
    }

    /// Several keys in one request to the store, as [`get_raw`](Self::get_raw) reads one.
    pub(crate) async fn get_many_raw(&self, store_keys: &[&str]) -> Vec<Option<Value>> {
        let found = self.shared.store.get_many(store_keys).await;
        if self.failed(&found) {
            return store_keys.iter().map(|key| self.shared.outage.get(key)).collect();
        }
        self.absorbed(found).unwrap_or_else(|| vec![None; store_keys.len()])
    }

    /// Notes a store call's outcome for the outage memory; `true` when it was a failure of the store (counted).
    pub(crate) fn failed<T>(&self, result: &Result<T, StoreError>) -> bool {
        let failed = self.shared.outage.observe(result, &self.shared.store, self.shared.clock.now_ms());
        if failed {
            CacheCounters::bump(&self.shared.counters.store_errors);
        }
        failed
    }

    pub(crate) async fn lookup<T: DeserializeOwned>(&self, store_key: &str, version: Option<&str>) -> Lookup<T> {
        let found = match self.get_raw(store_key).await {
            Some(bytes) => self.decode(&bytes, version),
            None => Lookup::Miss,
        };
        let counter = match found {
            Lookup::Fresh(_) => &self.shared.counters.hits,
            Lookup::Stale(_) | Lookup::Miss => &self.shared.counters.misses,
        };
        CacheCounters::bump(counter);
        found
    }

    /// Classifies stored bytes: fresh, stale (within its window) or a miss (wrong version, past its hard expiry,
    /// or corrupt, which is also counted).
    pub(crate) fn decode<T: DeserializeOwned>(&self, bytes: &[u8], version: Option<&str>) -> Lookup<T> {
        let entry = match Entry::parse(bytes) {
            Ok(entry) if entry.header.kind == Kind::Value => entry,
            _ => {
                CacheCounters::bump(&self.shared.counters.corrupt_entries);
                return Lookup::Miss;
            }
        };
        if version.is_some_and(|v| entry.header.version != Some(v)) {
            return Lookup::Miss;
        }
        let now = self.shared.clock.now_ms();
        let header = &entry.header;
        let fresh = header.expires_at == 0 || now < header.expires_at;
        let stale = !fresh && header.hard_expiry().is_some_and(|hard| now < hard);
        if !fresh && !stale {
            return Lookup::Miss;
        }
        match entry.value::<T>(&self.shared.limits) {
            Ok(value) if fresh => Lookup::Fresh(value),
            Ok(value) => Lookup::Stale(value),
            Err(_) => {
                CacheCounters::bump(&self.shared.counters.corrupt_entries);
                Lookup::Miss
            }
        }
    }

    /// Entry bytes for `value`, and the store-side TTL that matches its hard expiry (for stores that cannot read
    /// entry headers).
    pub(crate) fn encode<T: Serialize + ?Sized>(
        &self,
        value: &T,
        options: &WriteOptions,
    ) -> Result<(Vec<u8>, Option<Duration>), CacheError> {
        let shared = &self.shared;
        let ttl = options.ttl.or(shared.default_ttl).filter(|t| !t.is_zero());
        let stale = options.stale.unwrap_or(shared.default_stale);
        let now = shared.clock.now_ms();
        let mut meta = EntryMeta::with_ttl(now, ttl.map_or(0, |t| t.as_millis() as u64));
        if ttl.is_some() {
            meta.stale_ms = stale.as_millis() as u64;
        }
        meta.version = options.version.clone();
        meta.tags = options.tags.clone();
        let bytes = encode_value(value, &meta, &shared.encode)?;
        Ok((bytes, ttl.map(|t| t + stale)))
    }
}
