//! Replies are hostile too (spec/STORES.md §2): the memcached and Redis stores against larder-testkit's hostile
//! server, which answers the handshake like the real one and every data command with a dripping, oversized,
//! deeply nested, endless-line or garbage reply. Every read and write fails with the store's own error within its
//! `timeout` (plus the connect allowance and a margin for a loaded machine), memory stays far below what the server
//! announced, and the store answers again once a real server is behind it (a refused reply drops its connection).

use std::time::{Duration, Instant};

use larder_store::{Store, StoreError};
use larder_testkit::hostile::{Behaviour, HostileServer, Protocol, Settings};

/// The store's `timeout` (250 ms) plus `connect_timeout` (500 ms), and a second for a busy machine.
const BOUND: Duration = Duration::from_millis(1_750);

/// The process's resident memory, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().split(' ').next()?.parse().ok());
    kb.unwrap_or(0u64) * 1024
}

async fn assert_refused<T: std::fmt::Debug>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) {
    let started = Instant::now();
    let result = call.await;
    let took = started.elapsed();
    match result {
        Err(StoreError::Server { .. } | StoreError::Timeout { .. }) => {}
        other => panic!("{what}: the store's error expected, got {other:?}"),
    }
    assert!(took < BOUND, "{what}: answered after {took:?}");
}

async fn every_operation_is_bounded(protocol: Protocol, scheme: &str, behaviour: Behaviour) {
    let server = HostileServer::start(protocol, behaviour, Settings::default()).expect("hostile server");
    // failures=100: ejection would answer at once and hide the bound under test.
    let url = format!("{scheme}://{}?timeout=250ms&failures=100", server.address());
    let store = larder_stores::open(&url).await.expect("opens");
    let before = rss();
    let what = |op: &str| format!("{scheme} {behaviour:?} {op}");
    assert_refused(&what("get"), store.get("k")).await;
    assert_refused(&what("get_many"), store.get_many(&["a", "b", "c"])).await;
    assert_refused(&what("set"), store.set("k", b"v", None)).await;
    assert_refused(&what("add"), store.add("k", b"v", None)).await;
    let grown = rss().saturating_sub(before);
    assert!(grown < 64 << 20, "{}: memory grew by {} MiB", what("all"), grown >> 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_replies_that_drip_overflow_nest_or_never_end_are_refused_in_time() {
    for behaviour in [
        Behaviour::Drip,
        Behaviour::Huge,
        Behaviour::Nested,
        Behaviour::EndlessLine,
        Behaviour::Garbage,
        Behaviour::Silent,
    ] {
        every_operation_is_bounded(Protocol::Redis, "redis", behaviour).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_replies_that_drip_overflow_or_never_end_are_refused_in_time() {
    for behaviour in [Behaviour::Drip, Behaviour::Huge, Behaviour::EndlessLine, Behaviour::Garbage, Behaviour::Silent] {
        every_operation_is_bounded(Protocol::Memcached, "memcached", behaviour).await;
    }
}

#[tokio::test]
async fn a_redis_value_past_max_value_is_refused_before_it_is_read_and_the_store_goes_on() {
    let server = larder_testkit::Redis::start().expect("redis");
    let big = larder_stores::open(&format!("redis://127.0.0.1:{}/0", server.port())).await.expect("opens");
    big.set("big", &vec![b'x'; 3 << 20], None).await.expect("a 3 MiB value");
    let small = larder_stores::open(&format!("redis://127.0.0.1:{}/0?max_value=1M&failures=100", server.port()))
        .await
        .expect("opens");
    assert_refused("get of a value past max_value", small.get("big")).await;
    assert!(small.set("other", &vec![b'y'; 2 << 20], None).await.is_err(), "nor written");
    small.set("fine", b"small", None).await.expect("the store goes on, on a new connection");
    assert_eq!(small.get("fine").await.expect("get").as_deref(), Some(&b"small"[..]));
}

/// A reply whose every part is within its bound but whose whole is not (spec/STORES.md §2, "Whole reply"): 1,000
/// values of 64 MiB each (Redis: one array of them; memcached: 1,000 `VA` blocks), to every command of every
/// operation. Each is refused at once, long before the store's 5 s `timeout` (so the deadline is not what stops it),
/// and the process grows by less than two values (the one-value bound, `max_value` = 64 MiB plus framing, is what
/// a `SCAN` page may take; 64 GB were sent): a counter's script can return one integer and an `MGET` of n keys n
/// values, so there the array's first line already breaks the bound.
async fn whole_replies_are_bounded(protocol: Protocol, scheme: &str, size: u64, count: u64) {
    let settings = Settings { size, count, ..Settings::default() };
    let server = HostileServer::start(protocol, Behaviour::Wide, settings).expect("hostile server");
    let url = format!("{scheme}://{}?timeout=5s&failures=1000", server.address());
    let store = larder_stores::open(&url).await.expect("opens");
    let before = rss();
    let at_once = Duration::from_millis(2_000);
    macro_rules! refused_at_once {
        ($op:expr, $call:expr) => {{
            let started = Instant::now();
            let result = $call.await;
            let took = started.elapsed();
            assert!(result.is_err(), "{scheme} wide {}: the store's error expected, got {result:?}", $op);
            assert!(took < at_once, "{scheme} wide {}: answered after {took:?}, not at once", $op);
            let grown = rss().saturating_sub(before);
            assert!(grown < 128 << 20, "{scheme} wide {}: memory grew by {} MiB", $op, grown >> 20);
        }};
    }
    refused_at_once!("get", store.get("k"));
    refused_at_once!("get_many", store.get_many(&["a", "b", "c"]));
    refused_at_once!("set", store.set("k", b"v", None));
    refused_at_once!("set_many", store.set_many(&[("a", b"v".as_slice()), ("b", b"w".as_slice())], None));
    refused_at_once!("add", store.add("k", b"v", None));
    refused_at_once!("incr", store.incr("counter", 1, None, true));
    refused_at_once!("delete_if", store.delete_if("k", b"token"));
    refused_at_once!("delete", store.delete("k"));
    refused_at_once!("delete_many", store.delete_many(&["a", "b"]));
    refused_at_once!("purge_prefix", store.purge_prefix("p/"));
    refused_at_once!("purge_tag", store.purge_tag("t"));
    refused_at_once!("stats", store.stats());
    refused_at_once!("clear", store.clear());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_reply_of_a_thousand_64_mib_values_is_refused_at_once() {
    whole_replies_are_bounded(Protocol::Redis, "redis", 64 << 20, 1_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memcached_reply_of_a_thousand_64_mib_values_is_refused_at_once() {
    whole_replies_are_bounded(Protocol::Memcached, "memcached", 64 << 20, 1_000).await;
}

/// memcached's values are bounded by `max_item` (1 MiB): 10,000 values of 512 KiB are each within it, and every write
/// of requests ends with an `mn` whose `MN` must follow their replies (spec/STORES.md §4.1), so the second value to a
/// one-key get (or the first one to a set) is a reply the requests did not ask for, refused at once; without the
/// `mn`, a get answered the first value as a hit and left the rest to be read as the answers to the next requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memcached_reply_of_ten_thousand_values_within_max_item_is_refused_at_once() {
    whole_replies_are_bounded(Protocol::Memcached, "memcached", 512 << 10, 10_000).await;
}
