//! The memcached store against real memcached servers (larder-testkit): the shared behaviour suite, a pool of
//! three with one server failing and coming back, purge records seen by another process, and a server that
//! speaks nonsense.

use std::time::{Duration, Instant};

use larder_memcached::MemcachedStore;
use larder_store::{Store, StoreError, StoreUrl};
use larder_testkit::{behaviour, Memcached};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn open(url: &str) -> MemcachedStore {
    MemcachedStore::open(StoreUrl::parse(url).expect("url")).await.expect("opens")
}

fn url_of(servers: &[Memcached], options: &str) -> String {
    let hosts: Vec<String> = servers.iter().map(Memcached::address).collect();
    format!("memcached://{}{options}", hosts.join(","))
}

#[tokio::test]
async fn behaves_as_every_store_must_on_a_pool_of_three() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start().expect("memcached")).collect();
    let store = open(&url_of(&servers, "")).await;
    behaviour::check_all(&store).await;
    behaviour::purges_across(&store, &open(&url_of(&servers, "")).await).await;
    behaviour::expiry(&store).await;
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn keys_are_spread_over_the_servers_as_the_ring_says() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start().expect("memcached")).collect();
    let store = open(&url_of(&servers, "")).await;
    let mut used = std::collections::HashSet::new();
    for i in 0..60 {
        let key = format!("spread:{i}");
        store.set(&key, b"v", None).await.expect("set");
        let owner = store.server_of(&key).expect("a server");
        // The value is on that server, read with a plain meta get.
        let mut conn = tokio::net::TcpStream::connect(&owner).await.expect("connect");
        conn.write_all(format!("mg {key} v\r\n").as_bytes()).await.expect("write");
        let mut reply = [0u8; 64];
        let n = conn.read(&mut reply).await.expect("read");
        assert!(reply[..n].starts_with(b"VA 1"), "{key} is on {owner}");
        used.insert(owner);
    }
    assert_eq!(used.len(), 3, "every server holds some keys");
}

#[tokio::test]
async fn a_failing_server_is_ejected_its_keys_move_and_it_rejoins() {
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start().expect("memcached")).collect();
    let store = open(&url_of(&servers, "?timeout=200ms&connect_timeout=200ms&failures=2&retry_after=1s")).await;
    let dead = servers[1].address();
    let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
    let on_dead: Vec<&String> = keys.iter().filter(|k| store.server_of(k).as_deref() == Some(&dead)).collect();
    assert!(!on_dead.is_empty());
    servers[1].stop();
    // The first failure is an error naming the server; the second ejects it and is retried on the new owner.
    let first = store.set(on_dead[0], b"v", None).await.expect_err("the server is down");
    assert!(first.to_string().contains(&dead), "{first}");
    store.set(on_dead[0], b"v", None).await.expect("ejected, then written to the key's new server");
    let started = Instant::now();
    for key in &on_dead {
        store.set(key, b"moved", None).await.expect("no errors once ejected");
        assert_eq!(store.get(key).await.expect("get").as_deref(), Some(&b"moved"[..]));
        assert_ne!(store.server_of(key).as_deref(), Some(dead.as_str()));
    }
    assert!(started.elapsed() < Duration::from_secs(2), "no waiting on the dead server: {:?}", started.elapsed());
    let errors = store.server_errors();
    assert!(errors.iter().any(|(s, n)| *s == dead && *n >= 2), "{errors:?}");
    servers[1].restart().expect("restarts");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    store.set(on_dead[0], b"back", None).await.expect("set");
    assert_eq!(store.server_of(on_dead[0]).as_deref(), Some(dead.as_str()), "back on the ring");
    assert_eq!(store.get(on_dead[0]).await.expect("get").as_deref(), Some(&b"back"[..]));
}

/// STORES.md §4.3: a batch whose failure ejects its server is retried once, each key on its own new server. The
/// keys of one ejected server move to several servers, so sending the whole batch to the first key's new server
/// would read false misses and leave writes and deletes where no reader looks.
#[tokio::test]
async fn a_batch_that_ejects_its_server_is_retried_on_each_keys_new_server() {
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start().expect("memcached")).collect();
    let url = url_of(&servers, "?timeout=300ms&connect_timeout=300ms&failures=1&retry_after=60s");
    let (writer, deleter, reader) = (open(&url).await, open(&url).await, open(&url).await);
    let dead = servers[1].address();
    let keys: Vec<String> = (0..300).map(|i| format!("batch:{i}")).collect();
    let moved: Vec<&str> =
        keys.iter().map(String::as_str).filter(|k| writer.server_of(k).as_deref() == Some(&dead)).collect();
    assert!(moved.len() >= 10, "enough keys on the server that will fail: {}", moved.len());
    servers[1].stop();

    // Each store ejects the server on the first failure of its own batch, then retries it. Every check reads one
    // key at a time, which routes by that key alone.
    let items: Vec<(&str, &[u8])> = moved.iter().map(|k| (*k, &b"written"[..])).collect();
    writer.set_many(&items, None).await.expect("ejected, then written on each key's new server");
    let owners: std::collections::HashSet<String> = moved.iter().filter_map(|k| writer.server_of(k)).collect();
    assert!(!owners.contains(&dead) && owners.len() == 2, "the moved keys now live on both survivors: {owners:?}");
    for key in &moved {
        assert_eq!(writer.get(key).await.expect("get").as_deref(), Some(&b"written"[..]), "{key} where readers look");
    }

    for key in &moved {
        writer.set(key, b"one by one", None).await.expect("set");
    }
    let values = reader.get_many(&moved).await.expect("ejected, then read from each key's new server");
    for (key, value) in moved.iter().zip(&values) {
        assert_eq!(value.as_deref(), Some(&b"one by one"[..]), "{key} read where it was written");
    }

    assert_eq!(deleter.delete_many(&moved).await.expect("ejected, then deleted on each key's new server"), moved.len());
    for key in &moved {
        assert_eq!(writer.get(key).await.expect("get"), None, "{key} deleted where readers look");
    }
}

#[tokio::test]
async fn with_every_server_down_requests_fail_at_once() {
    let mut server = Memcached::start().expect("memcached");
    let store = open(&url_of(std::slice::from_ref(&server), "?failures=1&retry_after=10s&connect_timeout=100ms")).await;
    server.stop();
    assert!(store.get("a").await.is_err());
    let started = Instant::now();
    let error = store.get("b").await.expect_err("all ejected");
    assert!(error.to_string().contains("ejected"), "{error}");
    assert!(started.elapsed() < Duration::from_millis(50));
}

#[tokio::test]
async fn purges_are_records_that_other_processes_honour() {
    let server = Memcached::start().expect("memcached");
    let url = url_of(std::slice::from_ref(&server), "?purge_skew=200ms");
    let (writer, purger) = (open(&url).await, open(&url).await);
    writer.set("page", &behaviour::entry("old", Some(60_000), 0, &["product:1"]), None).await.expect("set");
    purger.purge_tag("product:1").await.expect("purge");
    assert_eq!(writer.get("page").await.expect("get"), None, "the tag record hides it from the writer too");
    // An entry written after the purge (past the skew) is served again.
    tokio::time::sleep(Duration::from_millis(250)).await;
    writer.set("page", &behaviour::entry("new", Some(60_000), 0, &["product:1"]), None).await.expect("set");
    assert!(writer.get("page").await.expect("get").is_some(), "rewritten after the purge");
    // Concurrent prefix purges from two processes are both kept (compare-and-swap on the list).
    let (a, b) = tokio::join!(purger.purge_prefix("x/"), writer.purge_prefix("y/"));
    a.expect("purge");
    b.expect("purge");
    let old_x = behaviour::entry("x", Some(60_000), 0, &[]);
    let mut raw = tokio::net::TcpStream::connect(server.address()).await.expect("connect");
    let mut request = format!("ms x/1 {} T0\r\n", old_x.len()).into_bytes();
    request.extend_from_slice(&old_x);
    request.extend_from_slice(b"\r\n");
    raw.write_all(&request).await.expect("write");
    let mut reply = [0u8; 16];
    let _ = raw.read(&mut reply).await.expect("read");
    assert_eq!(writer.get("x/1").await.expect("get"), None, "created before the x/ purge");
    let unprefixed = open(&format!("memcached://{}?prefix_purge=false", server.address())).await;
    assert!(matches!(unprefixed.purge_prefix("x/").await, Err(StoreError::Unsupported { .. })));
}

#[tokio::test]
async fn a_server_speaking_nonsense_gives_errors_not_panics() {
    for answer in [&b"HTTP/1.1 400 Bad Request\r\n\r\n"[..], b"VA 18446744073709551615\r\n", b"VA 5\r\nab"] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let answer = answer.to_vec();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = conn.read(&mut buf).await;
                    let _ = conn.write_all(&answer).await;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                });
            }
        });
        let store = open(&format!("memcached://{addr}?timeout=300ms")).await;
        let error = store.get("k").await.expect_err("nonsense is an error");
        assert!(error.to_string().contains(&addr.to_string()), "{error}");
    }
}

/// Every write of requests ends with `mn`, and its callers are answered only once `MN` follows exactly their replies
/// (spec/STORES.md §4.1): a server that adds one value to each write's replies fails every caller of the write, and
/// none of them is answered with a value another request was sent, nor with the surplus.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surplus_reply_fails_every_caller_of_its_write_and_answers_none() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut pending = Vec::new();
                let mut buf = [0u8; 64 * 1024];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    pending.extend_from_slice(&buf[..n]);
                    // Answer each write once its `mn` has come: a value per `mg`, one value more, then MN.
                    while let Some(end) = pending.windows(4).position(|w| w == b"mn\r\n") {
                        let gets = pending[..end].windows(3).filter(|w| *w == b"mg ").count();
                        let answer = [b"VA 1\r\nX\r\n".repeat(gets), b"VA 1\r\nY\r\nMN\r\n".to_vec()].concat();
                        pending.drain(..end + 4);
                        if conn.write_all(&answer).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let store = open(&format!("memcached://{addr}?pool=1&timeout=1s&failures=1000")).await;
    let gets = (0..20).map(|i| {
        let store = store.clone();
        async move { store.get(&format!("k{i}")).await }
    });
    let errors: Vec<String> = futures_util::future::join_all(gets)
        .await
        .into_iter()
        .map(|result| result.expect_err("a write with a surplus reply fails its callers").to_string())
        .collect();
    // The first write's callers are told why; the connection then ends, and callers queued behind them see it close.
    assert!(errors[0].contains("where the MN"), "{errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_callers_on_one_connection_each_get_their_own_answer() {
    let server = Memcached::start().expect("memcached");
    let store = open(&url_of(std::slice::from_ref(&server), "?pool=1")).await;
    let items: Vec<(String, Vec<u8>)> =
        (0..300).map(|i| (format!("mux:{i}"), format!("value {i} ").repeat(1 + i % 40).into_bytes())).collect();
    let writes = items.iter().map(|(k, v)| {
        let store = store.clone();
        async move { store.set(k, v, None).await }
    });
    for result in futures_util::future::join_all(writes).await {
        result.expect("set");
    }
    // Gets, multi-gets and misses interleaved on the one connection, all in flight together.
    let reads = (0..600).map(|i| {
        let store = store.clone();
        let items = &items;
        async move {
            match i % 3 {
                0 => {
                    let (key, value) = &items[i % items.len()];
                    assert_eq!(store.get(key).await.expect("get").as_deref(), Some(&value[..]), "{key}");
                }
                1 => {
                    let keys: Vec<&str> = (0..7).map(|j| items[(i + j * 11) % items.len()].0.as_str()).collect();
                    let got = store.get_many(&keys).await.expect("get_many");
                    for (j, value) in got.iter().enumerate() {
                        let expected = &items[(i + j * 11) % items.len()].1;
                        assert_eq!(value.as_deref(), Some(&expected[..]), "batch {i} item {j}");
                    }
                }
                _ => assert_eq!(store.get(&format!("mux:absent:{i}")).await.expect("get"), None),
            }
        }
    });
    futures_util::future::join_all(reads).await;
}
