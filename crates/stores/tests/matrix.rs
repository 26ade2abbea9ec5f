//! The store matrix: the one behaviour suite (larder-testkit's `behaviour`) against every store, each opened from
//! its URL as `larder serve --store` opens it, on real servers started on loopback. A second handle on the same
//! store plays another process: what one writes or purges, the other sees at once.

use larder_store::Store;
use larder_testkit::{behaviour, Memcached, Postgres, Redis, RedisCluster};
use std::sync::Arc;

async fn open(url: &str) -> Arc<dyn larder_store::DynStore> {
    larder_stores::open(url).await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// Everything, including the destructive `clear`, on a store of the test's own.
async fn full_suite(url: &str) {
    let store = open(url).await;
    let other = open(url).await;
    behaviour::check_all(&store).await;
    behaviour::purges_across(&store, &other).await;
    behaviour::purges_across(&other, &store).await;
    behaviour::expiry(&store).await;
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn memory() {
    // Each memory:// URL opens a private store (one process's memory), so there is no second handle to purge across.
    let store = open("memory://?capacity=64M").await;
    behaviour::check_all(&store).await;
    behaviour::expiry(&store).await;
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn memcached_pool_of_three() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start().expect("memcached")).collect();
    let hosts: Vec<String> = servers.iter().map(Memcached::address).collect();
    full_suite(&format!("memcached://{}", hosts.join(","))).await;
}

#[tokio::test]
async fn memcached_with_a_prefix_keeps_to_its_own_keys() {
    let server = Memcached::start().expect("memcached");
    let mine = open(&format!("memcached://{}?prefix=app1:", server.address())).await;
    let theirs = open(&format!("memcached://{}?prefix=app2:", server.address())).await;
    mine.set("k", b"mine", None).await.expect("set");
    theirs.set("k", b"theirs", None).await.expect("set");
    assert_eq!(mine.get("k").await.expect("get").as_deref(), Some(&b"mine"[..]));
    assert_eq!(theirs.get("k").await.expect("get").as_deref(), Some(&b"theirs"[..]));
    behaviour::check_all(&mine).await;
}

#[tokio::test]
async fn redis_standalone() {
    let redis = Redis::start().expect("redis");
    full_suite(&redis.url()).await;
}

#[tokio::test]
async fn redis_cluster_of_three_masters() {
    let cluster = RedisCluster::start().expect("cluster");
    full_suite(&cluster.url()).await;
}

#[tokio::test]
async fn sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    full_suite(&format!("sqlite://{}/cache.db", dir.path().display())).await;
}

#[tokio::test]
async fn postgres() {
    let postgres = Postgres::start().expect("postgres");
    full_suite(&postgres.url()).await;
}

#[tokio::test]
async fn files() {
    let dir = tempfile::tempdir().expect("dir");
    full_suite(&format!("file://{}/cache?capacity=64M", dir.path().display())).await;
}

#[tokio::test]
async fn an_l1_over_each_shared_store_keeps_its_promises() {
    let server = Memcached::start().expect("memcached");
    let url = format!("memcached://{}", server.address());
    let tiered = larder_stores::open_tiered(&url, 8 << 20, std::time::Duration::from_millis(200)).await.expect("open");
    behaviour::check_all(&tiered).await;
    behaviour::purges_across(&tiered, &open(&url).await).await;
}

#[tokio::test]
async fn urls_that_cannot_be_used_are_refused_with_the_reason() {
    for (url, says) in [
        ("memcached://127.0.0.1:11211?colour=blue", "unknown option colour"),
        ("redis://127.0.0.1:6379/0?pool=lots", "pool"),
        ("nosuch://x", "unknown store scheme"),
        ("memory://?capacity=12 parsecs", "capacity"),
        ("memory://?prefix=a", "unknown option prefix"),
        ("sqlite://host/path.db", "path"),
        ("127.0.0.1:11211", "scheme://"),
    ] {
        let error = match larder_stores::open(url).await {
            Ok(_) => panic!("{url} was accepted"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(says), "{url}: {error}");
    }
}
