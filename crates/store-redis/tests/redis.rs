//! The Redis store against a real Redis server and a real three-master Cluster (larder-testkit): the shared
//! behaviour suite, native expiry, tag sets, purges spread over every master, and a server that stops and
//! comes back.

use std::time::{Duration, Instant};

use larder_redis::RedisStore;
use larder_store::{Store, StoreUrl};
use larder_testkit::{behaviour, Redis, RedisCluster};

async fn open(url: &str) -> RedisStore {
    RedisStore::open(StoreUrl::parse(url).expect("url")).await.expect("opens")
}

#[tokio::test]
async fn a_server_behaves_as_every_store_must() {
    let redis = Redis::start().expect("redis");
    let store = open(&redis.url()).await;
    behaviour::check_all(&store).await;
    behaviour::purges_across(&store, &open(&redis.url()).await).await;
    behaviour::expiry(&store).await;
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn a_cluster_behaves_as_every_store_must_with_keys_on_every_master() {
    let cluster = RedisCluster::start().expect("cluster");
    let store = open(&cluster.url()).await;
    assert_eq!(store.backend(), "redis-cluster");
    behaviour::check_all(&store).await;
    behaviour::purges_across(&store, &open(&cluster.url()).await).await;
    // A tag and a prefix whose keys live on all three masters.
    let keys: Vec<String> = (0..60).map(|i| format!("spread/{i}")).collect();
    for key in &keys {
        store.set(key, &behaviour::entry(key, Some(60_000), 0, &["everywhere"]), None).await.expect("set");
    }
    for node in cluster.nodes() {
        let count: u64 = node.cli(&["dbsize"]).expect("dbsize").trim().parse().expect("number");
        assert!(count > 0, "every master holds keys");
    }
    assert_eq!(store.purge_tag("everywhere").await.expect("purge"), larder_store::Purged::Removed(60));
    for key in &keys {
        assert_eq!(store.get(key).await.expect("get"), None);
    }
    for key in &keys {
        store.set(key, b"v", None).await.expect("set");
    }
    assert_eq!(store.purge_prefix("spread/").await.expect("purge"), larder_store::Purged::Removed(60));
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn entries_expire_natively_at_their_hard_expiry() {
    let redis = Redis::start().expect("redis");
    let store = open(&redis.url()).await;
    let entry = behaviour::entry("x", Some(30_000), 10_000, &["t"]);
    store.set("e", &entry, None).await.expect("set");
    let pttl: i64 = redis.cli(&["pttl", "e"]).expect("pttl").trim().parse().expect("ms");
    assert!((38_000..=40_000).contains(&pttl), "expires_at + stale window: {pttl}");
    let tag_ttl: i64 = redis
        .cli(&["pttl", &larder_store::keys::internal_key("", "tag", "t")])
        .expect("pttl")
        .trim()
        .parse()
        .expect("ms");
    assert!((38_000..=40_000).contains(&tag_ttl), "the tag set lives as long as its member: {tag_ttl}");
    store.set("forever", &behaviour::entry("f", None, 0, &["t"]), None).await.expect("set");
    let persisted = redis.cli(&["pttl", &larder_store::keys::internal_key("", "tag", "t")]).expect("pttl");
    assert_eq!(persisted.trim(), "-1", "a member that never expires keeps its tag set");
}

#[tokio::test]
async fn a_stopped_server_fails_fast_naming_itself_and_is_used_again_when_back() {
    let mut redis = Redis::start().expect("redis");
    let store = open(&format!("{}?timeout=200ms&connect_timeout=200ms", redis.url())).await;
    store.set("k", b"v", None).await.expect("set");
    redis.stop();
    let started = Instant::now();
    let error = store.get("k").await.expect_err("down");
    assert!(error.to_string().contains(&format!("127.0.0.1:{}", redis.port())), "{error}");
    assert!(started.elapsed() < Duration::from_millis(600), "{:?}", started.elapsed());
    redis.restart().expect("restarts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.set("k", b"again", None).await.is_err() {
        assert!(Instant::now() < deadline, "reconnects by itself");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(store.get("k").await.expect("get").as_deref(), Some(&b"again"[..]));
    assert!(store.server_errors()[0].1 >= 1);
}

#[tokio::test]
async fn a_store_opens_before_its_server_is_up() {
    let port = larder_testkit::free_port();
    let store = open(&format!("redis://127.0.0.1:{port}/0?connect_timeout=100ms")).await;
    assert!(store.get("k").await.is_err());
    let bad = RedisStore::open(StoreUrl::parse("redis://h:1/0?pool=0").expect("url")).await;
    assert!(bad.is_err_and(|e| e.to_string().contains("pool")));
}

#[tokio::test]
async fn reads_use_the_urls_password_and_database() {
    let redis = Redis::start().expect("redis");
    let base = format!("redis://:s3cret@127.0.0.1:{}", redis.port());
    redis.cli(&["CONFIG", "SET", "requirepass", "s3cret"]).expect("a password");
    let db3 = open(&format!("{base}/3")).await;
    db3.set("k", b"in three", None).await.expect("set");
    assert_eq!(db3.get("k").await.expect("get").as_deref(), Some(&b"in three"[..]));
    let many = db3.get_many(&["k", "missing", "k"]).await.expect("get_many");
    assert_eq!(
        many.iter().map(|v| v.as_deref()).collect::<Vec<_>>(),
        [Some(&b"in three"[..]), None, Some(&b"in three"[..])]
    );
    let db0 = open(&format!("{base}/0")).await;
    assert_eq!(db0.get("k").await.expect("get"), None, "another database");
    assert_eq!(db0.get_many(&["k"]).await.expect("get_many")[0], None);
    let wrong = open(&format!("redis://:nope@127.0.0.1:{}/3?failures=100", redis.port())).await;
    match wrong.get("k").await {
        Err(larder_store::StoreError::Server { message, .. }) => assert!(message.contains("refused"), "{message}"),
        other => panic!("a wrong password is the server's error, got {other:?}"),
    }
}

/// A server that answers every command it reads with `reply`, well formed but of the wrong shape for a write (the
/// commands are counted by their array headers: the tests' keys and values hold no `*`).
async fn answering_with(reply: &'static [u8]) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut connection, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = vec![0u8; 64 << 10];
                while let Ok(read @ 1..) = connection.read(&mut request).await {
                    let commands = request[..read].iter().filter(|&&b| b == b'*').count();
                    if connection.write_all(&reply.repeat(commands)).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    address
}

#[tokio::test]
async fn a_write_answered_with_the_wrong_shape_is_refused_naming_the_server() {
    // A SET must be answered +OK (or nil for an add that found the key): a value, a count, an array or another
    // status is a server out of step or lying, and the write must not be taken as done.
    for reply in [&b"$5\r\nhello\r\n"[..], b":1\r\n", b"+QUEUED\r\n", b"*1\r\n$1\r\na\r\n", b"$-1\r\n", b"*-1\r\n"] {
        let address = answering_with(reply).await;
        let store = open(&format!("redis://{address}/0?timeout=300ms&failures=100")).await;
        let shown = String::from_utf8_lossy(reply).into_owned();
        let error = store.set("k", b"v", Some(Duration::from_secs(60))).await.expect_err(&shown);
        assert!(error.to_string().contains(&address.to_string()), "{shown}: {error}");
        let error = store.set_many(&[("a", b"1"), ("b", b"2")], None).await.expect_err(&shown);
        assert!(error.to_string().contains(&address.to_string()), "{shown}: {error}");
        if reply != b"$-1\r\n" {
            assert!(store.add("k", b"v", None).await.is_err(), "{shown}: an add took it as an answer");
        }
    }
}
