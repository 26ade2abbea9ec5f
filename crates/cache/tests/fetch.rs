//! fetch and friends against the real memory store: coalescing, failures, staleness on a hand-moved clock,
//! versions, namespaces, batches, and corrupt or unreachable storage.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use larder_cache::{Cache, CacheError, WriteOptions};
use larder_store::{ManualClock, MemoryStore, Store, StoreError, StoreStats, Value};
use larder_testkit::intercepted::{Intercepted, Op};
use tokio::time::timeout;

const T0: u64 = 1_700_000_000_000;

fn cache_with_clock() -> (Cache<MemoryStore>, Arc<ManualClock>) {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder().clock(clock.clone()).maintenance_interval(None).build().expect("valid");
    (Cache::builder(store).clock(clock.clone()).build(), clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_fetches_of_one_missing_key_run_the_loader_once() {
    let (cache, _) = cache_with_clock();
    let runs = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..1000)
        .map(|_| {
            let (cache, runs) = (cache.clone(), runs.clone());
            tokio::spawn(async move {
                cache
                    .fetch("report", Duration::from_secs(60), || async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok::<_, std::io::Error>(vec![1u32, 2, 3])
                    })
                    .await
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.expect("task").expect("value"), vec![1, 2, 3]);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let stats = cache.stats();
    assert_eq!(stats.loads, 1);
    assert!(stats.coalesced_waits >= 900, "{stats:?}");
    assert_eq!(cache.computing(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_loader_error_reaches_every_waiter_and_caches_nothing() {
    let (cache, _) = cache_with_clock();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move {
                cache
                    .fetch("flaky", Duration::from_secs(60), || async {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        Err::<String, _>(std::io::Error::other("database is down"))
                    })
                    .await
            })
        })
        .collect();
    for task in tasks {
        let error = task.await.expect("task").expect_err("the error reaches every caller");
        assert!(error.to_string().contains("database is down"), "{error}");
    }
    assert_eq!(cache.stats().loads, 1);
    assert!(cache.read::<String>("flaky").await.expect("read").is_none(), "nothing was cached");
    let value = cache.fetch("flaky", Duration::from_secs(60), || async { Ok::<_, std::io::Error>("ok".to_owned()) });
    assert_eq!(value.await.expect("second try loads again"), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panicking_loader_neither_poisons_the_cache_nor_strands_waiters() {
    let (cache, _) = cache_with_clock();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move {
                cache
                    .fetch("boom", Duration::from_secs(60), || async {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        if true {
                            panic!("loader bug");
                        }
                        Ok::<u32, std::io::Error>(1)
                    })
                    .await
            })
        })
        .collect();
    for task in tasks {
        let result = timeout(Duration::from_secs(5), task).await.expect("no waiter hangs").expect("task");
        assert!(matches!(result, Err(CacheError::LoaderPanicked(ref m)) if m.contains("loader bug")), "{result:?}");
    }
    assert_eq!(cache.computing(), 0);
    let value = cache.fetch("boom", Duration::from_secs(60), || async { Ok::<_, std::io::Error>(7u32) });
    assert_eq!(value.await.expect("the cache still works"), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_take_over_when_the_leader_is_cancelled() {
    let (cache, _) = cache_with_clock();
    let leader = {
        let cache = cache.clone();
        tokio::spawn(async move {
            cache
                .fetch("slow", Duration::from_secs(60), || async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok::<_, std::io::Error>("never".to_owned())
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiter = {
        let cache = cache.clone();
        tokio::spawn(async move {
            cache.fetch("slow", Duration::from_secs(60), || async { Ok::<_, std::io::Error>("fast".to_owned()) }).await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    leader.abort();
    let value = timeout(Duration::from_secs(5), waiter).await.expect("the waiter does not hang").expect("task");
    assert_eq!(value.expect("the waiter computes it itself"), "fast");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn within_the_stale_window_one_caller_recomputes_and_the_rest_get_stale() {
    let (cache, clock) = cache_with_clock();
    let options = WriteOptions::ttl(Duration::from_secs(10)).with_stale(Duration::from_secs(60));
    cache.write("page", "old", &options).await.expect("written");
    clock.advance_ms(15_000);
    let runs = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(tokio::sync::Notify::new());
    let recompute = {
        let (cache, runs, release, options) = (cache.clone(), runs.clone(), release.clone(), options.clone());
        tokio::spawn(async move {
            cache
                .fetch_with("page", &options, || async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    release.notified().await;
                    Ok::<_, std::io::Error>("new".to_owned())
                })
                .await
        })
    };
    while cache.computing() == 0 {
        tokio::task::yield_now().await;
    }
    for _ in 0..20 {
        let value = cache
            .fetch_with("page", &options, || async { Ok::<_, std::io::Error>("should not run".to_owned()) })
            .await
            .expect("stale value");
        assert_eq!(value, "old");
    }
    release.notify_one();
    assert_eq!(recompute.await.expect("task").expect("recomputed"), "new");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(cache.stats().stale_served, 20);
    let fresh = cache.fetch_with("page", &options, || async { Ok::<_, std::io::Error>("unused".to_owned()) });
    assert_eq!(fresh.await.expect("fresh"), "new");
}

#[tokio::test]
async fn past_the_stale_window_a_value_is_a_miss() {
    let (cache, clock) = cache_with_clock();
    let options = WriteOptions::ttl(Duration::from_secs(10)).with_stale(Duration::from_secs(5));
    cache.write("k", &1u8, &options).await.expect("written");
    clock.advance_ms(9_999);
    assert_eq!(cache.read::<u8>("k").await.expect("read"), Some(1));
    clock.advance_ms(1);
    assert_eq!(cache.read::<u8>("k").await.expect("read"), None, "stale values are not plain reads");
    clock.advance_ms(5_000);
    let value = cache.fetch_with("k", &options, || async { Ok::<_, std::io::Error>(2u8) });
    assert_eq!(value.await.expect("reloaded"), 2);
}

#[tokio::test]
async fn another_version_is_a_miss() {
    let (cache, _) = cache_with_clock();
    cache.write("user:7", "Ada v1", &WriteOptions::default().with_version("1")).await.expect("written");
    assert_eq!(cache.read_version::<String>("user:7", Some("1")).await.expect("read"), Some("Ada v1".into()));
    assert_eq!(cache.read_version::<String>("user:7", Some("2")).await.expect("read"), None);
    assert!(cache.exists("user:7", Some("1")).await.expect("exists"));
    assert!(!cache.exists("user:7", Some("2")).await.expect("exists"));
    let options = WriteOptions::default().with_version("2");
    let value = cache.fetch_with("user:7", &options, || async { Ok::<_, std::io::Error>("Ada v2".to_owned()) });
    assert_eq!(value.await.expect("reloaded"), "Ada v2");
    assert_eq!(cache.read_version::<String>("user:7", Some("2")).await.expect("read"), Some("Ada v2".into()));
}

#[tokio::test]
async fn namespaces_keep_keys_apart_in_one_store() {
    let (cache, _) = cache_with_clock();
    let users = cache.namespace("users");
    let posts = cache.namespace("posts");
    users.write("1", "Ada", &WriteOptions::default()).await.expect("written");
    posts.write("1", "Hello", &WriteOptions::default()).await.expect("written");
    assert_eq!(users.read::<String>("1").await.expect("read"), Some("Ada".into()));
    assert_eq!(posts.read::<String>("1").await.expect("read"), Some("Hello".into()));
    assert_eq!(users.store_key("1"), "users:1");
    assert_eq!(users.namespace("admins").store_key("1"), "users:admins:1");
    assert!(cache.store().contains("users:1"));
    assert!(users.delete("1").await.expect("deleted"));
    assert!(!users.exists("1", None).await.expect("exists"));
    assert_eq!(posts.read::<String>("1").await.expect("read"), Some("Hello".into()));
}

#[tokio::test]
async fn batches_read_write_and_fetch_many_keys() {
    let (cache, _) = cache_with_clock();
    cache.write_many(&[("a", 1u32), ("b", 2)], &WriteOptions::default()).await.expect("written");
    assert_eq!(cache.read_many::<u32>(&["a", "x", "b"]).await.expect("read"), vec![Some(1), None, Some(2)]);
    let asked = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = asked.clone();
    let values = cache
        .fetch_many(&["a", "c", "b", "d"], &WriteOptions::default(), |missing| async move {
            seen.lock().extend(missing.clone());
            Ok::<_, std::io::Error>(
                missing.into_iter().map(|k| (k.clone(), k.len() as u32 * 10)).collect::<HashMap<_, _>>(),
            )
        })
        .await
        .expect("fetched");
    assert_eq!(values, vec![1, 10, 2, 10]);
    assert_eq!(*asked.lock(), vec!["c".to_owned(), "d".to_owned()]);
    assert_eq!(cache.read::<u32>("d").await.expect("read"), Some(10), "loaded values were stored");
    let incomplete = cache
        .fetch_many(&["e"], &WriteOptions::default(), |_| async {
            Ok::<_, std::io::Error>(HashMap::<String, u32>::new())
        })
        .await;
    assert!(matches!(incomplete, Err(CacheError::Loader(_))));
}

#[tokio::test]
async fn a_corrupt_entry_is_a_counted_miss_and_is_replaced() {
    let (cache, _) = cache_with_clock();
    cache.store().set_now("k", b"\xc1\x4c\x01\x00\x01\x00\x00garbage", None).expect("stored");
    assert_eq!(cache.read::<u32>("k").await.expect("read"), None);
    let value = cache.fetch("k", Duration::from_secs(60), || async { Ok::<_, std::io::Error>(5u32) });
    assert_eq!(value.await.expect("recomputed"), 5);
    // Read, the fetch's read, and its leader's second look once it holds the store lock (spec/STORES.md §3).
    assert_eq!(cache.stats().corrupt_entries, 3);
    assert_eq!(cache.read::<u32>("k").await.expect("read"), Some(5));
}

#[tokio::test]
async fn values_go_through_the_configured_serializer_and_compressor() {
    let store = MemoryStore::builder().maintenance_interval(None).build().expect("valid");
    let cache = Cache::builder(store)
        .serializer(larder_format::Serializer::Json)
        .compressor(larder_format::Compressor::Zstd)
        .compress_threshold(16)
        .build();
    let doc: Vec<String> = (0..100).map(|i| format!("row {i}")).collect();
    cache.write("doc", &doc, &WriteOptions::default()).await.expect("written");
    let raw = cache.store().get_now("doc").expect("stored");
    let entry = larder_format::Entry::parse(&raw).expect("an entry");
    assert_eq!(entry.header.serializer, larder_format::Serializer::Json);
    assert_eq!(entry.header.compressor, larder_format::Compressor::Zstd);
    assert_eq!(cache.read::<Vec<String>>("doc").await.expect("read"), Some(doc));
}

/// A store whose server cannot be reached: every operation fails the way a remote backend's would.
struct UnreachableStore;

impl Store for UnreachableStore {
    fn backend(&self) -> &'static str {
        "memcached"
    }
    async fn get(&self, _: &str) -> Result<Option<Value>, StoreError> {
        Err(down())
    }
    async fn get_many(&self, _: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        Err(down())
    }
    async fn set(&self, _: &str, _: &[u8], _: Option<Duration>) -> Result<(), StoreError> {
        Err(down())
    }
    async fn add(&self, _: &str, _: &[u8], _: Option<Duration>) -> Result<bool, StoreError> {
        Err(down())
    }
    async fn incr(&self, _: &str, _: i64, _: Option<Duration>, _: bool) -> Result<Option<i64>, StoreError> {
        Err(down())
    }
    async fn delete_if(&self, _: &str, _: &[u8]) -> Result<bool, StoreError> {
        Err(down())
    }
    async fn delete(&self, _: &str) -> Result<bool, StoreError> {
        Err(down())
    }
    async fn delete_many(&self, _: &[&str]) -> Result<usize, StoreError> {
        Err(down())
    }
    async fn clear(&self) -> Result<(), StoreError> {
        Err(down())
    }
    async fn purge_prefix(&self, _: &str) -> Result<larder_store::Purged, StoreError> {
        Err(down())
    }
    async fn purge_tag(&self, _: &str) -> Result<larder_store::Purged, StoreError> {
        Err(down())
    }
    async fn stats(&self) -> Result<StoreStats, StoreError> {
        Err(down())
    }
}

fn down() -> StoreError {
    StoreError::Server { backend: "memcached", server: "127.0.0.1:1".into(), message: "connection refused".into() }
}

/// spec/STORES.md §3, "When the store fails": the loader runs once and its value is kept in the outage memory, so
/// later fetches are answered from it while the store stays down.
#[tokio::test]
async fn an_unreachable_store_runs_the_loader_once_and_later_fetches_read_the_outage_memory() {
    let cache = Cache::new(UnreachableStore);
    for _ in 0..3 {
        let value = cache.fetch("k", Duration::from_secs(60), || async { Ok::<_, std::io::Error>(9u8) });
        assert_eq!(value.await.expect("the loader's value still arrives"), 9);
    }
    let stats = cache.stats();
    // The first fetch: the read, the store lock's add (computed without a lock) and the write; then one read each.
    assert_eq!((stats.loads, stats.store_errors), (1, 5));
    let write = cache.write("k", &1u8, &WriteOptions::default()).await.expect_err("explicit writes report");
    assert!(write.to_string().contains("memcached server 127.0.0.1:1: connection refused"), "{write}");
    assert_eq!(cache.read::<u8>("k").await.expect("read"), Some(1), "a failed write is kept in the outage memory too");
    cache.delete("k").await.expect_err("the store is down");
    assert_eq!(cache.read::<u8>("k").await.expect("read"), None, "a delete applies to the outage memory");
}

#[tokio::test]
async fn without_an_outage_memory_an_unreachable_store_computes_every_time() {
    let cache = Cache::builder(UnreachableStore).outage_memory(0).build();
    for _ in 0..3 {
        let value = cache.fetch("k", Duration::from_secs(60), || async { Ok::<_, std::io::Error>(9u8) });
        assert_eq!(value.await.expect("the loader's value still arrives"), 9);
    }
    let stats = cache.stats();
    assert_eq!((stats.loads, stats.store_errors), (3, 9));
}

/// A key and the bytes another process writes under it.
type Refresh = (String, Vec<u8>);

/// spec/STORES.md §3, step 3, on a refresh: the process that takes the lock looks once more, and a value another
/// process refreshed in the meantime is served, not computed again.
#[tokio::test]
async fn a_refresh_that_takes_the_lock_after_another_refreshed_serves_that_value() {
    let clock = ManualClock::new(T0);
    let memory = || MemoryStore::builder().clock(clock.clone()).maintenance_interval(None).build().expect("valid");
    let options = WriteOptions::ttl(Duration::from_secs(10)).with_stale(Duration::from_secs(60));
    // Another process refreshes the key at the worst moment for a stale read: after this process saw the entry
    // stale, just before it takes the lock (that process wrote and released in between).
    let refresh: Arc<Mutex<Option<Refresh>>> = Arc::default();
    let (store, pending) = (memory(), refresh.clone());
    let shared = store.clone();
    let store = Intercepted::new(store, "memory", move |op| {
        if let Op::Add(_) = op {
            if let Some((key, bytes)) = pending.lock().expect("not poisoned").take() {
                shared.set_now(&key, &bytes, None)?;
            }
        }
        Ok(())
    });
    let cache = Cache::builder(store).clock(clock.clone()).build();
    cache.write("page", "old", &options).await.expect("written");
    clock.advance_ms(15_000);
    // What the other process wrote: "theirs", fresh at the clock's time.
    let other = Cache::builder(memory()).clock(clock.clone()).build();
    other.write("page", "theirs", &options).await.expect("written");
    let refreshed = other.store().get_now(&other.store_key("page")).expect("stored").to_vec();
    *refresh.lock().expect("not poisoned") = Some((cache.store_key("page"), refreshed));
    let value = cache.fetch_with("page", &options, || async { Ok::<_, std::io::Error>("recomputed".to_owned()) });
    assert_eq!(value.await.expect("a value"), "theirs");
    assert_eq!(cache.stats().loads, 0, "the loader did not run again");
}

/// spec/STORES.md §8: a cache on the memory store does not try to compress unless a compressor is named.
#[tokio::test]
async fn a_cache_on_the_memory_store_stores_uncompressed_unless_a_compressor_is_named() {
    let text = "larder ".repeat(1000);
    let plain = Cache::new(MemoryStore::builder().build().expect("valid"));
    plain.write("page", &text, &WriteOptions::default()).await.expect("written");
    let raw = plain.store().get_now("page").expect("stored");
    assert_eq!(larder_format::Entry::parse(&raw).expect("an entry").header.compressor, larder_format::Compressor::None);
    let named = Cache::builder(MemoryStore::builder().build().expect("valid"))
        .compressor(larder_format::Compressor::Lz4)
        .build();
    named.write("page", &text, &WriteOptions::default()).await.expect("written");
    let raw = named.store().get_now("page").expect("stored");
    assert_eq!(larder_format::Entry::parse(&raw).expect("an entry").header.compressor, larder_format::Compressor::Lz4);
    assert_eq!(named.read::<String>("page").await.expect("read"), Some(text));
}
