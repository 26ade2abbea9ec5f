//! `fetch`: read a value, or compute it once and store it.
//!
//! - A miss is computed by exactly one caller in this process; concurrent callers for the same key wait for its
//!   result (or its error) instead of running the loader again. Across processes, the one leader per process takes
//!   the key's store lock first (spec/STORES.md §3, one lock policy): a leader that finds it held polls the store
//!   for the other process's value instead of loading it too.
//! - Within an entry's stale window, one caller recomputes (under the same store lock) while everyone else, in
//!   every process, is served the stale value at once: Rails' `race_condition_ttl`.
//! - A loader that fails or panics caches nothing; its error reaches every waiter, and the cache stays usable.

use std::collections::HashMap;
use std::error::Error;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use larder_store::Store;

use crate::locks::LockState;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::cache::Outcome;
use crate::cache::{Cache, Lookup, WriteOptions};
use crate::coalesce::{Lead, Role};
use crate::error::CacheError;
use crate::stats::CacheCounters;

/// The bounds a fetched value needs: it is stored (serialized), read back (deserialized) and handed to every
/// waiting caller (cloned across tasks).
pub trait Cacheable: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {}

impl<T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static> Cacheable for T {}

type BoxError = Box<dyn Error + Send + Sync>;

impl<S: Store> Cache<S> {
    /// The value for `key`; on a miss, `loader` computes it and it is stored, fresh for `ttl`.
    pub async fn fetch<T, F, Fut, E>(&self, key: &str, ttl: std::time::Duration, loader: F) -> Result<T, CacheError>
    where
        T: Cacheable,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        self.fetch_with(key, &WriteOptions::ttl(ttl), loader).await
    }

    /// [`fetch`](Self::fetch) with every write option (stale window, version, tags).
    pub async fn fetch_with<T, F, Fut, E>(&self, key: &str, options: &WriteOptions, loader: F) -> Result<T, CacheError>
    where
        T: Cacheable,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let store_key = self.store_key(key);
        let version = options.version.as_deref();
        let mut loader = Some(loader);
        loop {
            match self.lookup::<T>(&store_key, version).await {
                Lookup::Fresh(value) => return Ok(value),
                Lookup::Stale(stale) => {
                    let Some(lead) = self.shared.inflight.try_lead(&store_key) else {
                        CacheCounters::bump(&self.shared.counters.stale_served);
                        return Ok(stale);
                    };
                    let lock = match self.try_lock(&store_key, self.shared.lock_ttl).await {
                        LockState::Held => {
                            // Another process is recomputing: serve stale like every other caller.
                            drop(lead);
                            CacheCounters::bump(&self.shared.counters.stale_served);
                            return Ok(stale);
                        }
                        LockState::Acquired(lock) => {
                            let held = self.hold(lock);
                            // A holder that released just before may have refreshed it (spec/STORES.md §3, step 3).
                            if let Lookup::Fresh(value) = self.lookup::<T>(&store_key, version).await {
                                held.release().await;
                                return hand_found(value, lead);
                            }
                            Some(held)
                        }
                        LockState::Unavailable => None,
                    };
                    let result = self.load_and_store(&store_key, options, take(&mut loader), lead).await;
                    if let Some(lock) = lock {
                        lock.release().await;
                    }
                    return result;
                }
                Lookup::Miss => match self.shared.inflight.join_or_lead(&store_key) {
                    Role::Lead(lead) => {
                        return self
                            .load_once_across_processes(&store_key, version, options, take(&mut loader), lead)
                            .await
                    }
                    Role::Wait(waiter) => {
                        CacheCounters::bump(&self.shared.counters.coalesced_waits);
                        match waiter.wait().await {
                            Some(Ok(shared)) => match shared.downcast_ref::<T>() {
                                Some(value) => return Ok(value.clone()),
                                // Another call site computed this key as another type: read it as ours.
                                None => continue,
                            },
                            Some(Err(error)) => return Err(error),
                            // The leader went away without a result: start over (perhaps as the leader).
                            None => continue,
                        }
                    }
                },
            }
        }
    }

    /// Values for `keys` in order; the misses are computed by one call of `loader` with the missing keys, which
    /// must return a value for each of them.
    pub async fn fetch_many<T, F, Fut, E>(
        &self,
        keys: &[&str],
        options: &WriteOptions,
        loader: F,
    ) -> Result<Vec<T>, CacheError>
    where
        T: Cacheable,
        F: FnOnce(Vec<String>) -> Fut,
        Fut: Future<Output = Result<HashMap<String, T>, E>>,
        E: Into<BoxError>,
    {
        let found: Vec<Option<T>> = self.read_many(keys).await?;
        let missing: Vec<String> =
            keys.iter().zip(&found).filter(|(_, v)| v.is_none()).map(|(k, _)| (*k).to_owned()).collect();
        if missing.is_empty() {
            return Ok(found.into_iter().flatten().collect());
        }
        CacheCounters::bump(&self.shared.counters.loads);
        let mut loaded = match AssertUnwindSafe(async { loader(missing.clone()).await }).catch_unwind().await {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(error)) => return Err(CacheError::Loader(Arc::from(error.into()))),
            Err(panic) => return Err(CacheError::LoaderPanicked(panic_message(panic.as_ref()))),
        };
        for key in &missing {
            let value = loaded.get(key).ok_or_else(|| {
                CacheError::Loader(Arc::from(BoxError::from(format!("the loader returned no value for key {key:?}"))))
            })?;
            self.store_quietly(&self.store_key(key), value, options).await?;
        }
        Ok(keys.iter().zip(found).filter_map(|(key, value)| value.or_else(|| loaded.remove(*key))).collect())
    }

    /// A cold miss's leader under the store lock (spec/STORES.md §3): takes the lock, reads once more, and loads;
    /// or, while another process holds it, waits for that process's value, taking the lock itself if it goes away
    /// without one, and loads without it once `lock_ttl` has passed.
    async fn load_once_across_processes<T, F, Fut, E>(
        &self,
        store_key: &str,
        version: Option<&str>,
        options: &WriteOptions,
        loader: F,
        lead: Lead<Outcome>,
    ) -> Result<T, CacheError>
    where
        T: Cacheable,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let deadline = tokio::time::Instant::now() + self.shared.lock_ttl;
        loop {
            match self.try_lock(store_key, self.shared.lock_ttl).await {
                LockState::Acquired(lock) => {
                    let held = self.hold(lock);
                    // A holder that released just before may have written the value.
                    if let Lookup::Fresh(value) = self.lookup::<T>(store_key, version).await {
                        held.release().await;
                        return hand_found(value, lead);
                    }
                    let result = self.load_and_store(store_key, options, loader, lead).await;
                    held.release().await;
                    return result;
                }
                LockState::Unavailable => return self.load_and_store(store_key, options, loader, lead).await,
                LockState::Held => match self.await_other_process::<T>(store_key, version, deadline).await {
                    Waited::Value(value) => {
                        CacheCounters::bump(&self.shared.counters.coalesced_across_processes);
                        return hand_found(value, lead);
                    }
                    Waited::Released => continue,
                    Waited::TimedOut => return self.load_and_store(store_key, options, loader, lead).await,
                },
            }
        }
    }

    /// Polls the store for the fresh value another process is computing under the lock (5 ms, doubling up to
    /// 50 ms), until it appears, the lock goes away without it, or `deadline`.
    async fn await_other_process<T: Cacheable>(
        &self,
        store_key: &str,
        version: Option<&str>,
        deadline: tokio::time::Instant,
    ) -> Waited<T> {
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
            if let Lookup::Fresh(value) = self.lookup::<T>(store_key, version).await {
                return Waited::Value(value);
            }
            if tokio::time::Instant::now() >= deadline {
                return Waited::TimedOut;
            }
            if !self.is_locked(store_key).await {
                // The holder may have written the value between the look above and its release.
                if let Lookup::Fresh(value) = self.lookup::<T>(store_key, version).await {
                    return Waited::Value(value);
                }
                return Waited::Released;
            }
        }
    }

    /// Runs the loader as the leader, stores a success, and hands the outcome to every waiter.
    async fn load_and_store<T, F, Fut, E>(
        &self,
        store_key: &str,
        options: &WriteOptions,
        loader: F,
        lead: Lead<Outcome>,
    ) -> Result<T, CacheError>
    where
        T: Cacheable,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        CacheCounters::bump(&self.shared.counters.loads);
        // The async block defers even the call of `loader` into the future, so a panic anywhere in it is caught.
        let result = match AssertUnwindSafe(async { loader().await }).catch_unwind().await {
            Ok(Ok(value)) => self.store_quietly(store_key, &value, options).await.map(|()| value),
            Ok(Err(error)) => Err(CacheError::Loader(Arc::from(error.into()))),
            Err(panic) => Err(CacheError::LoaderPanicked(panic_message(panic.as_ref()))),
        };
        lead.finish(match &result {
            Ok(value) => Ok(Arc::new(value.clone())),
            Err(error) => Err(error.clone()),
        });
        result
    }

    /// Stores a computed value. A value that cannot be encoded is the caller's error; a store that fails is
    /// absorbed (counted), because the value itself is good, and the value is kept in the outage memory.
    async fn store_quietly<T: Serialize>(
        &self,
        store_key: &str,
        value: &T,
        options: &WriteOptions,
    ) -> Result<(), CacheError> {
        let (bytes, store_ttl) = self.encode(value, options)?;
        let stored = self.shared.store.set(store_key, &bytes, store_ttl).await;
        if self.failed(&stored) {
            self.shared.outage.keep(store_key, &bytes, store_ttl);
        } else if stored.is_err() {
            CacheCounters::bump(&self.shared.counters.store_errors);
        }
        Ok(())
    }
}

/// What waiting for another process's value came to.
enum Waited<T> {
    Value(T),
    /// The lock went away without a value (its holder crashed, failed, or could not store).
    Released,
    TimedOut,
}

/// A value a leader found in the store (another process wrote it) rather than loaded: handed to the callers waiting on
/// this process's lead, and returned.
fn hand_found<T: Cacheable>(value: T, lead: Lead<Outcome>) -> Result<T, CacheError> {
    lead.finish(Ok(Arc::new(value.clone())));
    Ok(value)
}

/// The loader, which a caller uses at most once (every path that takes it returns).
fn take<F>(loader: &mut Option<F>) -> F {
    loader.take().expect("the loader is taken only by the single leading path, which returns")
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
