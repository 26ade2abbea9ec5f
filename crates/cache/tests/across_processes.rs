//! The one lock policy (spec/STORES.md §3) across processes: several caches, each with its own connections to one
//! real memcached (as separate processes would have), see a burst of misses on one key, and a burst of reads of
//! one entry gone stale; each burst runs the loader once in all of them together.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use larder_cache::{Cache, WriteOptions};
use larder_memcached::MemcachedStore;
use larder_store::StoreUrl;
use larder_testkit::Memcached;

const PROCESSES: usize = 4;
const CALLERS: usize = 8;

type Shared = Cache<MemcachedStore>;

async fn caches(url: &str) -> Vec<Shared> {
    let mut caches = Vec::new();
    for _ in 0..PROCESSES {
        let store = MemcachedStore::open(StoreUrl::parse(url).expect("url")).await.expect("opens");
        caches.push(Cache::builder(store).recompute_lock_ttl(Duration::from_secs(5)).build());
    }
    caches
}

/// Every caller of every cache fetches `key` at once with a loader that takes 200 ms; what each got.
async fn burst(caches: &[Shared], key: &str, runs: &Arc<AtomicUsize>) -> Vec<String> {
    let options = WriteOptions::ttl(Duration::from_secs(2)).with_stale(Duration::from_secs(60));
    let mut tasks = Vec::new();
    for cache in caches {
        for _ in 0..CALLERS {
            let (cache, runs, key, options) = (cache.clone(), runs.clone(), key.to_owned(), options.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .fetch_with(&key, &options, || async move {
                        let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        Ok::<_, std::io::Error>(format!("computed #{n}"))
                    })
                    .await
                    .expect("a value")
            }));
        }
    }
    let mut values = Vec::new();
    for task in tasks {
        values.push(task.await.expect("task"));
    }
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_misses_across_processes_runs_the_loader_once() {
    let server = Memcached::start().expect("memcached");
    let caches = caches(&format!("memcached://{}", server.address())).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let values = burst(&caches, "cold", &runs).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "one loader run in all processes");
    assert!(values.iter().all(|v| v == "computed #1"), "{values:?}");
    let across: u64 = caches.iter().map(|c| c.stats().coalesced_across_processes).sum();
    assert_eq!(across, (PROCESSES - 1) as u64, "each other process's leader waited for the value");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_reads_of_a_stale_entry_across_processes_refreshes_it_once() {
    let server = Memcached::start().expect("memcached");
    let caches = caches(&format!("memcached://{}", server.address())).await;
    let runs = Arc::new(AtomicUsize::new(0));
    burst(&caches, "page", &runs).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // The entry is fresh for 2 s (long enough for every waiter of a loaded machine to find it fresh): past that,
    // well inside the stale window.
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    let values = burst(&caches, "page", &runs).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2, "one refresh in all processes");
    assert!(values.iter().all(|v| v == "computed #1" || v == "computed #2"), "{values:?}");
    assert!(values.iter().filter(|v| *v == "computed #1").count() >= PROCESSES * CALLERS - 1, "the rest got stale");
}

/// A holder that goes away without a value (crashed, failed, could not store) does not let every waiter load:
/// they try to take the lock in turn, and one loads while the others wait for its value.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_the_holder_leaves_without_a_value_one_waiter_loads() {
    let server = Memcached::start().expect("memcached");
    let caches = caches(&format!("memcached://{}", server.address())).await;
    let larder_cache::LockState::Acquired(lock) =
        caches[0].try_lock(&caches[0].store_key("orphan"), Duration::from_secs(5)).await
    else {
        panic!("the lock is free");
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let waiting = {
        let (others, runs) = (caches[1..].to_vec(), runs.clone());
        tokio::spawn(async move { burst(&others, "orphan", &runs).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nobody loads while the lock is held");
    caches[0].unlock(lock).await;
    let values = waiting.await.expect("task");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "one waiter took the lock and loaded");
    assert!(values.iter().all(|v| v == "computed #1"), "{values:?}");
}
