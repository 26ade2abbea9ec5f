//! The front when its shared store fails (spec/STORES.md §3 "When the store fails"; issue 33): a real memcached
//! behind `larder_testkit::faults::FaultProxy`, frozen (a stopped server: connections open, no replies) or refusing
//! (a killed one), with and without an L1. Forty clients ask for one cacheable page fifteen times each: the app must
//! see at most about one request, every client must be answered, and when the store comes back the outage memory
//! is dropped rather than written over what the store holds.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_proxy::{ProxyConfig, Server};
use larder_store::{DynStore, Store, SystemClock};
use larder_testkit::faults::{Fault, FaultProxy};
use larder_testkit::Memcached;
use support::{cacheable, get, test_defaults, Origin};

const HOST: &[(&str, &str)] = &[("host", "shop.example")];

/// A front over `store_url` (with an L1 of `l1` bytes, 0 for none); its address and the task serving it.
async fn front(origin: &Origin, store_url: &str, l1: usize) -> (String, tokio::task::JoinHandle<()>) {
    let store: Arc<dyn DynStore> =
        larder_stores::open_tiered(store_url, l1, Duration::from_secs(1)).await.expect("store opens");
    let config = ProxyConfig {
        upstream: origin.url(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        admin: None,
        ..test_defaults()
    };
    let server = Server::bind(config, store, Arc::new(SystemClock)).expect("binds");
    let addr = server.local_addr().expect("address");
    let task = tokio::spawn(server.run(std::future::pending()));
    (format!("http://{addr}"), task)
}

/// `clients` clients, each asking for `path` `rounds` times in a row; every answer must be a 200.
async fn load(base: &str, path: &str, clients: usize, rounds: usize) -> Duration {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let url = format!("{base}{path}");
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let got = get(&url, HOST).await;
                assert_eq!(got.status, 200, "every client is answered: {:?}", got.text());
            }
        }));
    }
    for task in tasks {
        task.await.expect("client");
    }
    started.elapsed()
}

async fn drill(fault: Fault, l1: usize) {
    let memcached = Memcached::start().expect("memcached");
    let faults = FaultProxy::start(memcached.address().parse().expect("addr")).expect("fault proxy");
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    origin.set_delay(Duration::from_millis(300));
    let (base, task) = front(&origin, &format!("memcached://{}", faults.address()), l1).await;
    assert_eq!(get(&format!("{base}/warm"), HOST).await.status, 200, "the store answers before the fault");
    faults.set(fault).expect("fault");
    let took = load(&base, "/page", 40, 15).await;
    let reached = origin.count("/page");
    assert!(
        reached <= 2,
        "store {} (l1 {l1}): 600 requests, {reached} reached the app in {took:?}; at most 2 should",
        fault.name()
    );
    assert!(took < Duration::from_secs(10), "600 requests took {took:?}");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_store_sends_the_app_one_request() {
    drill(Fault::Freeze, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_store_sends_the_app_one_request() {
    drill(Fault::Refuse, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_store_with_an_l1_sends_the_app_one_request() {
    drill(Fault::Freeze, 64 << 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_store_with_an_l1_sends_the_app_one_request() {
    drill(Fault::Refuse, 64 << 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_misses_share_one_request_while_the_store_refuses_and_nothing_is_kept_with_outage_memory_off() {
    let memcached = Memcached::start().expect("memcached");
    let faults = FaultProxy::start(memcached.address().parse().expect("addr")).expect("fault proxy");
    faults.set(Fault::Refuse).expect("fault");
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    origin.set_delay(Duration::from_millis(300));
    let store: Arc<dyn DynStore> =
        larder_stores::open(&format!("memcached://{}", faults.address())).await.expect("store opens");
    let config = ProxyConfig {
        upstream: origin.url(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        admin: None,
        cache: larder_proxy::config::CacheSection { outage_memory_bytes: 0, ..Default::default() },
        ..test_defaults()
    };
    let server = Server::bind(config, store, Arc::new(SystemClock)).expect("binds");
    let base = format!("http://{}", server.local_addr().expect("address"));
    let task = tokio::spawn(server.run(std::future::pending()));
    load(&base, "/page", 30, 1).await;
    assert_eq!(origin.count("/page"), 1, "thirty concurrent misses, one request: the leader hands its response over");
    load(&base, "/page", 5, 1).await;
    assert!(origin.count("/page") >= 2, "with the outage memory off, nothing is kept for the next burst");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_the_store_answers_again_its_entry_wins_over_the_outage_memory() {
    let memcached = Memcached::start().expect("memcached");
    let faults = FaultProxy::start(memcached.address().parse().expect("addr")).expect("fault proxy");
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    let url = format!("memcached://{}?retry_after=500ms", faults.address());
    let (base, task) = front(&origin, &url, 0).await;
    faults.set(Fault::Refuse).expect("fault");
    assert_eq!(get(&format!("{base}/p"), HOST).await.text(), "/p #1");
    assert_eq!(get(&format!("{base}/p"), HOST).await.text(), "/p #1", "served from the outage memory");
    assert_eq!(origin.count("/p"), 1);
    // Back, empty (a restarted server): the next requests fill it again, once, and the store keeps the new response.
    let direct = larder_stores::open(&format!("memcached://{}", memcached.address())).await.expect("direct");
    Store::clear(&direct).await.expect("flush");
    faults.set(Fault::Pass).expect("pass");
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let body = get(&format!("{base}/p"), HOST).await.text();
        if body == "/p #2" {
            break;
        }
        assert_eq!(body, "/p #1", "the outage copy until the store is seen answering");
        assert!(Instant::now() < deadline, "the store's recovery was not noticed within 8 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..5 {
        assert_eq!(get(&format!("{base}/p"), HOST).await.text(), "/p #2", "served from the store now");
    }
    assert_eq!(origin.count("/p"), 2, "one request after the recovery, none more");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_lock_held_when_the_store_went_away_is_released_once_it_is_back() {
    let memcached = Memcached::start().expect("memcached");
    let faults = FaultProxy::start(memcached.address().parse().expect("addr")).expect("fault proxy");
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    origin.set_delay(Duration::from_millis(800));
    let url = format!("memcached://{}?retry_after=300ms", faults.address());
    let (a, task_a) = front(&origin, &url, 0).await;
    let (b, task_b) = front(&origin, &url, 0).await;
    // A's fill takes the store lock, then the store goes away (refuse, not freeze: a frozen connection would deliver
    // the release once it thaws): A's write and its release fail.
    let slow = tokio::spawn({
        let url = format!("{a}/slow");
        async move { get(&url, HOST).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    faults.set(Fault::Refuse).expect("fault");
    assert_eq!(slow.await.expect("request").status, 200);
    faults.set(Fault::Pass).expect("pass");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Another process missing the page must not wait out the lock's TTL (the upstream timeout, 31 s).
    let started = Instant::now();
    assert_eq!(get(&format!("{b}/slow"), HOST).await.status, 200);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the second front waited {took:?} on a lock left over from the outage");
    task_a.abort();
    task_b.abort();
}

/// An origin whose pages carry `cache_control`, answering 500 once `failing` is set.
async fn origin_that_can_fail(cache_control: &'static str) -> (Origin, Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let failing = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let flag = failing.clone();
    let origin = Origin::start(move |seen| {
        if flag.load(Ordering::SeqCst) {
            return (http::StatusCode::INTERNAL_SERVER_ERROR, vec![], bytes::Bytes::from_static(b"down"));
        }
        let n = served.fetch_add(1, Ordering::SeqCst) + 1;
        (http::StatusCode::OK, vec![("cache-control", cache_control.to_owned())], format!("{} #{n}", seen.path).into())
    })
    .await;
    (origin, failing)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_if_error_and_stale_while_revalidate_work_from_the_outage_memory() {
    let memcached = Memcached::start().expect("memcached");
    let faults = FaultProxy::start(memcached.address().parse().expect("addr")).expect("fault proxy");
    faults.set(Fault::Refuse).expect("the store is down from the start");
    let url = format!("memcached://{}", faults.address());
    // stale-if-error: the app fails once the page is stale; the copy in the outage memory stands in.
    let (origin, failing) = origin_that_can_fail("max-age=1, stale-if-error=60").await;
    let (base, task) = front(&origin, &url, 0).await;
    assert_eq!(get(&format!("{base}/e"), HOST).await.text(), "/e #1");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let stale = get(&format!("{base}/e"), HOST).await;
    assert_eq!(
        (stale.status.as_u16(), stale.text()),
        (200, "/e #1".to_owned()),
        "the stale copy stands in for the 500"
    );
    assert!(stale.header("cache-status").is_some_and(|s| s.contains("stale")), "{:?}", stale.header("cache-status"));
    task.abort();
    // stale-while-revalidate: the stale copy is served at once and refreshed behind it, into the outage memory.
    let (origin, _) = origin_that_can_fail("max-age=1, stale-while-revalidate=60").await;
    let (base, task) = front(&origin, &url, 0).await;
    assert_eq!(get(&format!("{base}/r"), HOST).await.text(), "/r #1");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(get(&format!("{base}/r"), HOST).await.text(), "/r #1", "served stale while it is refreshed");
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(&format!("{base}/r"), HOST).await.text() != "/r #2" {
        assert!(Instant::now() < deadline, "the refresh reached the outage memory");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(origin.count("/r"), 2, "one refresh");
    task.abort();
}
