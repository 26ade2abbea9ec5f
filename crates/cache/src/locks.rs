//! Cross-process locks in the store (spec/STORES.md §3): `add` of a random token under the key's lock key, released
//! with `delete_if` so a holder whose lock expired never releases the next holder's. Used by `fetch`'s
//! stale-while-recompute and by the proxy's fills, so that N processes missing one key send about one request to
//! the app, not N. A lock is an optimisation: a store that cannot answer never stops the work.

use std::time::Duration;

use larder_store::keys::lock_key;
use larder_store::Store;

use crate::cache::Cache;

/// How often a release the store failed is tried again.
const RELEASE_RETRY: Duration = Duration::from_millis(500);

/// A lock this process holds; give it back with [`Cache::unlock`].
#[derive(Debug)]
pub struct Lock {
    key: String,
    token: String,
    /// How long the store keeps it if it is never released.
    ttl: Duration,
}

/// What trying a lock found.
#[derive(Debug)]
pub enum LockState {
    /// This process holds it.
    Acquired(Lock),
    /// Another process holds it.
    Held,
    /// The store did not answer: go ahead without one.
    Unavailable,
}

impl<S: Store> Cache<S> {
    /// Tries to take the lock of `store_key` for at most `ttl`.
    pub async fn try_lock(&self, store_key: &str, ttl: Duration) -> LockState {
        let key = lock_key("", store_key);
        let token = format!("{:016x}", fastrand::u64(..));
        let taken = self.shared.store.add(&key, token.as_bytes(), Some(ttl)).await;
        if self.failed(&taken) {
            return LockState::Unavailable;
        }
        match taken {
            Ok(true) => LockState::Acquired(Lock { key, token, ttl }),
            Ok(false) => LockState::Held,
            Err(error) => {
                self.absorbed::<()>(Err(error));
                LockState::Unavailable
            }
        }
    }

    /// Whether some process holds the lock of `store_key` (a store failure reads as not held).
    pub async fn is_locked(&self, store_key: &str) -> bool {
        let found = self.shared.store.get(&lock_key("", store_key)).await;
        if self.failed(&found) {
            return false;
        }
        self.absorbed(found).flatten().is_some()
    }

    /// Releases a lock, unless it expired and another process took it since. A release the store fails (it froze
    /// or died while the lock was held) is retried every half second until the store takes it or the lock would
    /// have expired anyway: otherwise the lock outlives the outage, and every process that misses the key after
    /// the store is back waits out its TTL (spec/STORES.md §3).
    pub async fn unlock(&self, lock: Lock) {
        let released = self.shared.store.delete_if(&lock.key, lock.token.as_bytes()).await;
        if !self.failed(&released) {
            self.absorbed(released);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let cache = self.clone();
        let until = tokio::time::Instant::now() + lock.ttl;
        runtime.spawn(async move {
            while tokio::time::Instant::now() < until {
                tokio::time::sleep(RELEASE_RETRY).await;
                let released = cache.shared.store.delete_if(&lock.key, lock.token.as_bytes()).await;
                if !cache.failed(&released) {
                    return;
                }
            }
        });
    }

    /// Holds `lock` until [`HeldLock::release`], or until dropped: a holder cancelled mid-way (its caller went
    /// away) still gives the lock back, from a task of its own, instead of leaving other processes to wait out its
    /// TTL.
    pub fn hold(&self, lock: Lock) -> HeldLock<S> {
        HeldLock { cache: self.clone(), lock: Some(lock) }
    }
}

/// A lock that is released when dropped (see [`Cache::hold`]).
pub struct HeldLock<S: Store> {
    cache: Cache<S>,
    lock: Option<Lock>,
}

impl<S: Store> HeldLock<S> {
    pub async fn release(mut self) {
        if let Some(lock) = self.lock.take() {
            self.cache.unlock(lock).await;
        }
    }
}

impl<S: Store> Drop for HeldLock<S> {
    fn drop(&mut self) {
        if let (Some(lock), Ok(runtime)) = (self.lock.take(), tokio::runtime::Handle::try_current()) {
            let cache = self.cache.clone();
            runtime.spawn(async move { cache.unlock(lock).await });
        }
    }
}
