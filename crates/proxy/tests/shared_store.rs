//! Several proxies on one store (spec/STORES.md §3, §9): a burst of misses for one key across proxies sends one
//! request upstream, because the proxy that fetches holds the key's store lock and the others wait for its
//! response in the store; and a purge through one proxy is seen by the others. The store here is one memory store
//! shared by two servers in this process; larder-stores' tests run the same through memcached and Redis.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use larder_proxy::{ProxyConfig, Server};
use larder_store::{ManualClock, MemoryStore, SystemClock};
use larder_testkit::intercepted::{Intercepted, Op};
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
    let purged =
        support::send("POST", &a.admin_url("/purge"), &[("content-type", "application/json")], r#"{"tag":"p1"}"#).await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    assert_eq!(get(&b.url("/p"), HOST).await.cache(), "MISS", "gone for b too");
    assert_eq!(origin.count("/p"), 2);
}

/// A memory store that says it is remote and counts the requests it gets, as a memcached or Redis server would.
fn remote(inner: MemoryStore, requests: Arc<AtomicUsize>) -> Intercepted {
    Intercepted::new(inner, "remote", move |op| {
        if matches!(op, Op::Get(_) | Op::GetMany(_)) {
            requests.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    })
}

#[tokio::test]
async fn on_a_remote_store_a_vary_hit_takes_one_round_trip_and_never_a_stale_marker() {
    let origin =
        Origin::start(cacheable(vec![("cache-control", "max-age=60".into()), ("vary", "accept-language".into())]))
            .await;
    let requests = Arc::new(AtomicUsize::new(0));
    let shared_store = shared();
    let store = remote(shared_store.clone(), requests.clone());
    let config = ProxyConfig {
        upstream: origin.url(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        admin: None,
        ..support::test_defaults()
    };
    let server = Server::bind(config, store, Arc::new(SystemClock)).expect("binds");
    let addr = server.local_addr().expect("addr");
    let task = tokio::spawn(server.run(std::future::pending()));
    let url = format!("http://{addr}/v");
    let de = [("host", "shop.example"), ("accept-language", "de")];
    let fr = [("host", "shop.example"), ("accept-language", "fr")];
    assert_eq!(get(&url, &de).await.cache(), "MISS");
    assert_eq!(get(&url, &de).await.cache(), "HIT");
    let before = requests.load(Ordering::SeqCst);
    let hit = get(&url, &de).await;
    assert_eq!((hit.cache(), hit.text()), ("HIT", "/v #1".to_owned()));
    assert_eq!(requests.load(Ordering::SeqCst) - before, 1, "marker and variant in one request to the store");
    // Another variant under the same marker: found with the marker's generation, one request too.
    assert_eq!(get(&url, &fr).await.cache(), "MISS");
    let before = requests.load(Ordering::SeqCst);
    assert_eq!(get(&url, &fr).await.cache(), "HIT");
    assert_eq!(requests.load(Ordering::SeqCst) - before, 1);
    // A purge removes the marker; the hint must not bring back the old variant.
    let purged = support::send("PURGE", &url, &[("host", "shop.example")], "").await;
    assert_eq!(purged.status, 200);
    let after = get(&url, &de).await;
    assert_eq!((after.cache(), after.text()), ("MISS", "/v #3".to_owned()), "not the purged variant");
    assert_eq!(get(&url, &de).await.text(), "/v #3");

    // Another proxy on the store purges and refills (a marker of a new generation) while this one still holds a
    // hint of the old: the old variant, still in the store, must not be served.
    let other = ProxyConfig {
        upstream: origin.url(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        admin: None,
        ..support::test_defaults()
    };
    let other =
        Server::bind(other, remote(shared_store, Arc::new(AtomicUsize::new(0))), Arc::new(SystemClock)).expect("binds");
    let other_url = format!("http://{}/v", other.local_addr().expect("addr"));
    let other_task = tokio::spawn(other.run(std::future::pending()));
    assert_eq!(support::send("PURGE", &other_url, &[("host", "shop.example")], "").await.status, 200);
    assert_eq!(get(&other_url, &fr).await.text(), "/v #4", "the other proxy stored a new marker");
    let fresh = get(&url, &de).await;
    assert_eq!(
        (fresh.cache(), fresh.text()),
        ("MISS", "/v #5".to_owned()),
        "the old generation's variant is not served"
    );
    task.abort();
    other_task.abort();
}

/// Twenty clients over two proxies for one page, at once; what each got.
async fn burst(a: &Larder, b: &Larder, path: &str) -> Vec<support::Got> {
    let mut requests = Vec::new();
    for i in 0..20 {
        let url = if i % 2 == 0 { a.url(path) } else { b.url(path) };
        requests.push(tokio::spawn(async move { get(&url, HOST).await }));
    }
    let mut answers = Vec::new();
    for request in requests {
        answers.push(request.await.expect("task"));
    }
    answers
}

/// The one lock policy (spec/STORES.md §3): a refresh takes the store lock like a cold miss, so a page gone stale
/// is fetched once across proxies, whether the refresh makes clients wait (past stale-while-revalidate) or runs
/// in the background while they get the stale copy.
#[tokio::test]
async fn a_stale_page_is_refreshed_once_across_proxies() {
    // One clock for the origin's Date and both proxies (in production they are all on real time).
    let clock = ManualClock::new(larder_format::now_ms());
    let origin = Origin::stamped(clock.clone(), cacheable(vec![("cache-control", "max-age=1".into())])).await;
    origin.set_delay(Duration::from_millis(300));
    let store = shared();
    let a = Larder::start_on_at(&origin.url(), store.clone(), clock.clone(), |_| {}).await;
    let b = Larder::start_on_at(&origin.url(), store.clone(), clock.clone(), |_| {}).await;
    assert_eq!(get(&a.url("/page"), HOST).await.text(), "/page #1");
    clock.advance_ms(5_000);
    let answers = burst(&a, &b, "/page").await;
    assert!(answers.iter().all(|g| g.status == 200), "every client answered");
    assert_eq!(origin.count("/page"), 2, "twenty clients of a stale page over two proxies: one refresh upstream");
    assert!(answers.iter().all(|g| g.text() == "/page #2"), "all got the refreshed page (it came within stale_wait)");

    let swr = |cfg: &mut ProxyConfig| cfg.cache.stale_while_revalidate_secs = 60;
    let c = Larder::start_on_at(&origin.url(), store.clone(), clock.clone(), swr).await;
    let d = Larder::start_on_at(&origin.url(), store, clock.clone(), swr).await;
    clock.advance_ms(10_000);
    let answers = burst(&c, &d, "/page").await;
    assert!(answers.iter().all(|g| g.text() == "/page #2"), "stale-while-revalidate: the stale copy at once");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(origin.count("/page"), 3, "one background refresh across proxies");
}
