//! Several proxies on one store (spec/STORES.md §3, §9): a burst of misses for one key across proxies sends one
//! request upstream, because the proxy that fetches holds the key's store lock and the others wait for its
//! response in the store; and a purge through one proxy is seen by the others. The store here is one memory store
//! shared by two servers in this process; larder-stores' tests run the same through memcached and Redis.

mod support;

use std::time::Duration;

use larder_store::MemoryStore;
use support::{cacheable, get, Larder, Origin};

/// Proxies listen on different ports; clients name the site, which is what keys are made of.
const HOST: &[(&str, &str)] = &[("host", "shop.example")];

fn shared() -> MemoryStore {
    MemoryStore::builder().capacity_bytes(16 << 20).maintenance_interval(None).build().expect("store")
}

#[tokio::test]
async fn a_burst_of_misses_across_proxies_sends_one_request_upstream() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    origin.set_delay(Duration::from_millis(300));
    let store = shared();
    let a = Larder::start_on(&origin.url(), store.clone(), |_| {}).await;
    let b = Larder::start_on(&origin.url(), store, |_| {}).await;
    let mut requests = Vec::new();
    for i in 0..20 {
        let url = if i % 2 == 0 { a.url("/page") } else { b.url("/page") };
        requests.push(tokio::spawn(async move { get(&url, HOST).await }));
    }
    for request in requests {
        let got = request.await.expect("task");
        assert_eq!(got.status, 200);
        assert_eq!(got.text(), "/page #1", "every client got the one response");
    }
    assert_eq!(origin.count("/page"), 1, "twenty misses over two proxies, one upstream request");
    let metrics = get(&b.admin_url("/metrics"), &[]).await.text();
    let across = metrics
        .lines()
        .find_map(|l| l.strip_prefix("larder_coalesced_across_processes_total "))
        .and_then(|n| n.parse::<u64>().ok())
        .expect("metric");
    let metrics_a = get(&a.admin_url("/metrics"), &[]).await.text();
    let across_a = metrics_a
        .lines()
        .find_map(|l| l.strip_prefix("larder_coalesced_across_processes_total "))
        .and_then(|n| n.parse::<u64>().ok())
        .expect("metric");
    assert_eq!(across + across_a, 1, "one proxy waited on the other's lock");
}

#[tokio::test]
async fn when_the_lock_holder_cannot_store_the_others_go_upstream_without_waiting_out_the_limit() {
    let origin = Origin::start(cacheable(vec![("cache-control", "no-store".into())])).await;
    origin.set_delay(Duration::from_millis(200));
    let store = shared();
    let a = Larder::start_on(&origin.url(), store.clone(), |_| {}).await;
    let b = Larder::start_on(&origin.url(), store, |_| {}).await;
    let started = std::time::Instant::now();
    let (url_a, url_b) = (a.url("/private"), b.url("/private"));
    let (one, two) = tokio::join!(get(&url_a, HOST), get(&url_b, HOST));
    assert_eq!((one.status.as_u16(), two.status.as_u16()), (200, 200));
    assert_eq!(origin.count("/private"), 2, "nothing was stored, so both went upstream");
    assert!(started.elapsed() < Duration::from_secs(2), "the waiter saw the lock go: {:?}", started.elapsed());
}

#[tokio::test]
async fn a_purge_through_one_proxy_is_seen_by_the_other() {
    let origin =
        Origin::start(cacheable(vec![("cache-control", "max-age=60".into()), ("surrogate-key", "p1".into())])).await;
    let store = shared();
    let a = Larder::start_on(&origin.url(), store.clone(), |_| {}).await;
    let b = Larder::start_on(&origin.url(), store, |_| {}).await;
    assert_eq!(get(&a.url("/p"), HOST).await.cache(), "MISS");
    let second = get(&b.url("/p"), HOST).await;
    assert_eq!(second.cache(), "HIT", "b serves what a stored: {:?}", second.headers);
    let purged = support::send("POST", &a.admin_url("/purge"), &[], r#"{"tag":"p1"}"#).await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    assert_eq!(get(&b.url("/p"), HOST).await.cache(), "MISS", "gone for b too");
    assert_eq!(origin.count("/p"), 2);
}
