//! A real memory store seen through a hook, for the tests that need a store to act as a remote one does at one
//! moment: count the requests a server would get, fail writes as a server that is down, or let "another process"
//! act between two steps of a lock policy. One forwarding `Store` impl, so that each test writes only its hook.

use std::sync::Arc;
use std::time::Duration;

use larder_store::{MemoryStore, Purged, Store, StoreError, StoreStats, Value};

/// The operation about to be forwarded, with its key or keys.
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    Get(&'a str),
    GetMany(&'a [&'a str]),
    Set(&'a str),
    Add(&'a str),
    Incr(&'a str),
    DeleteIf(&'a str),
    Delete(&'a str),
    DeleteMany(&'a [&'a str]),
    Clear,
    PurgePrefix(&'a str),
    PurgeTag(&'a str),
    Stats,
}

type Hook = dyn Fn(Op<'_>) -> Result<(), StoreError> + Send + Sync;

/// A memory store whose every operation first goes through `hook`: an `Err` is the operation's answer (the memory
/// store is not asked), `Ok` forwards it.
#[derive(Clone)]
pub struct Intercepted {
    inner: MemoryStore,
    backend: &'static str,
    hook: Arc<Hook>,
}

impl Intercepted {
    /// `backend` is the name the store reports (a cache treats "memory" as in-process).
    pub fn new(
        inner: MemoryStore,
        backend: &'static str,
        hook: impl Fn(Op<'_>) -> Result<(), StoreError> + Send + Sync + 'static,
    ) -> Intercepted {
        Intercepted { inner, backend, hook: Arc::new(hook) }
    }

    /// The memory store behind the hook.
    pub fn inner(&self) -> &MemoryStore {
        &self.inner
    }
}

impl Store for Intercepted {
    fn backend(&self) -> &'static str {
        self.backend
    }
    async fn get(&self, key: &str) -> Result<Option<Value>, StoreError> {
        (self.hook)(Op::Get(key))?;
        self.inner.get(key).await
    }
    async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        (self.hook)(Op::GetMany(keys))?;
        self.inner.get_many(keys).await
    }
    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        (self.hook)(Op::Set(key))?;
        self.inner.set(key, value, ttl).await
    }
    async fn add(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        (self.hook)(Op::Add(key))?;
        self.inner.add(key, value, ttl).await
    }
    async fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        (self.hook)(Op::Incr(key))?;
        self.inner.incr(key, delta, ttl, create).await
    }
    async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool, StoreError> {
        (self.hook)(Op::DeleteIf(key))?;
        self.inner.delete_if(key, expected).await
    }
    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        (self.hook)(Op::Delete(key))?;
        self.inner.delete(key).await
    }
    async fn delete_many(&self, keys: &[&str]) -> Result<usize, StoreError> {
        (self.hook)(Op::DeleteMany(keys))?;
        self.inner.delete_many(keys).await
    }
    async fn clear(&self) -> Result<(), StoreError> {
        (self.hook)(Op::Clear)?;
        self.inner.clear().await
    }
    async fn purge_prefix(&self, prefix: &str) -> Result<Purged, StoreError> {
        (self.hook)(Op::PurgePrefix(prefix))?;
        self.inner.purge_prefix(prefix).await
    }
    async fn purge_tag(&self, tag: &str) -> Result<Purged, StoreError> {
        (self.hook)(Op::PurgeTag(tag))?;
        self.inner.purge_tag(tag).await
    }
    async fn stats(&self) -> Result<StoreStats, StoreError> {
        (self.hook)(Op::Stats)?;
        self.inner.stats().await
    }
}
