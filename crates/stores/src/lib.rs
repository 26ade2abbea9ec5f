//! Opens any larder store from its URL (spec/STORES.md §1). The one place that knows every backend, so a caller
//! (the proxy's `--store`, `larder store …`, tests) names a store by a string and gets a [`DynStore`].

use std::sync::Arc;
use std::time::Duration;

use larder_store::{DynStore, MemoryStore, OpenError, StoreUrl, TieredStore};

pub use larder_file::FileStore;
pub use larder_memcached::MemcachedStore;
pub use larder_redis::RedisStore;
pub use larder_sql::SqlStore;

/// The schemes [`open`] knows, for help texts and errors.
pub const SCHEMES: &[&str] = &["memory", "memcached", "redis", "redis+cluster", "sqlite", "postgres", "file"];

/// Opens the store `url` names. Remote stores do not need their servers up: they connect on first use.
pub async fn open(url: &str) -> Result<Arc<dyn DynStore>, OpenError> {
    let mut url = StoreUrl::parse(url)?;
    let store: Arc<dyn DynStore> = match url.scheme.as_str() {
        "memory" => Arc::new(open_memory(&mut url)?),
        "memcached" => Arc::new(MemcachedStore::open(url).await?),
        "redis" | "redis+cluster" => Arc::new(RedisStore::open(url).await?),
        "sqlite" | "postgres" | "postgresql" => Arc::new(SqlStore::open(url).await?),
        "file" => Arc::new(FileStore::open(url).await?),
        other => {
            return Err(url.error(format!("unknown store scheme {other:?} (known: {})", SCHEMES.join(", "))).into());
        }
    };
    Ok(store)
}

/// `memory://?capacity=256M&max_entries=N`: the process's own store.
fn open_memory(url: &mut StoreUrl) -> Result<MemoryStore, OpenError> {
    url.no_hosts()?;
    if !url.path.is_empty() && url.path != "/" {
        return Err(url.error("memory:// takes no path").into());
    }
    let capacity = url.take_size("capacity", 256 << 20)?;
    let max_entries = url.take_number("max_entries", 0, 0..=u64::from(u32::MAX))?;
    url.finish()?;
    let mut builder = MemoryStore::builder()
        .capacity_bytes(usize::try_from(capacity).map_err(|_| url.error("capacity is too large for this machine"))?);
    if max_entries > 0 {
        builder = builder.max_entries(max_entries as usize);
    }
    builder.build().map_err(|e| url.error(e.to_string()).into())
}

/// `url` with a memory L1 of `l1_bytes` in front (spec/STORES.md §9); `l1_bytes == 0` means no L1.
pub async fn open_tiered(url: &str, l1_bytes: usize, l1_ttl: Duration) -> Result<Arc<dyn DynStore>, OpenError> {
    let l2 = open(url).await?;
    if l1_bytes == 0 {
        return Ok(l2);
    }
    let l1 = MemoryStore::builder()
        .capacity_bytes(l1_bytes)
        .build()
        .map_err(|e| OpenError::Url(larder_store::UrlError { url: "--l1".into(), message: e.to_string() }))?;
    Ok(Arc::new(TieredStore::new(l1, l2, l1_ttl)))
}
