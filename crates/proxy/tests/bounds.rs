//! Connections and work stay bounded: idle and silent connections are closed, a second larder cannot start on a
//! port the first one serves, and big admin operations do not stall the requests being served.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use larder_proxy::{ProxyConfig, ServeError, Server};
use larder_store::{MemoryStore, SystemClock};
use support::raw::closed_within;
use support::{cacheable, get, send, Larder, Origin};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_send_nothing_or_idle_are_closed() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |c| {
        c.limits.header_read_timeout_secs = 1;
        c.limits.idle_timeout_secs = 2;
        c.limits.max_connections = 3;
    })
    .await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(larder.addr).await.expect("connect");
    let mut preface = TcpStream::connect(larder.addr).await.expect("connect");
    preface.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.expect("write");
    let mut idle = TcpStream::connect(larder.addr).await.expect("connect");
    idle.write_all(b"GET /x HTTP/1.1\r\nhost: a\r\n\r\n").await.expect("write");
    let (silent_closed, preface_closed) = tokio::join!(
        closed_within(&mut silent, Duration::from_secs(3)),
        closed_within(&mut preface, Duration::from_secs(3))
    );
    assert!(silent_closed, "a connection that never sends a byte is closed after the header timeout");
    assert!(preface_closed, "an HTTP/2 connection that only sends its preface is closed too");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(closed_within(&mut idle, Duration::from_secs(4)).await, "a keep-alive connection idle past its limit");
    // The slots they held are free again.
    let got = tokio::time::timeout(Duration::from_secs(2), get(&larder.url("/after"), &[])).await.expect("served");
    assert_eq!(got.status, StatusCode::OK);
}

#[tokio::test]
async fn a_second_larder_cannot_start_on_the_same_port() {
    let origin = Origin::start(cacheable(vec![])).await;
    let config = |listen: std::net::SocketAddr| ProxyConfig {
        upstream: origin.url(),
        listen,
        admin: None,
        ..support::test_defaults()
    };
    let store = || MemoryStore::builder().build().expect("store");
    let first = Server::bind(config("127.0.0.1:0".parse().expect("addr")), store(), std::sync::Arc::new(SystemClock))
        .expect("the first binds");
    let taken = first.local_addr().expect("address");
    match Server::bind(config(taken), store(), std::sync::Arc::new(SystemClock)) {
        Err(ServeError::InUse { addr }) => assert_eq!(addr, taken),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a second server started on {taken} and would split the cache"),
    }
    drop(first);
}

#[tokio::test]
async fn a_large_push_is_decoded_off_the_event_loop() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=600".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    get(&larder.url("/hit"), &[]).await;
    // A value entry whose validation takes a while: 60 MB of gzip to decompress and walk.
    let payload = rmp_serde::to_vec(&serde_bytes::ByteBuf::from(vec![7u8; 60 << 20])).expect("msgpack");
    let options = larder_format::EncodeOptions {
        compressor: larder_format::Compressor::Gzip,
        compress_threshold: 0,
        ..larder_format::EncodeOptions::default()
    };
    let entry = larder_format::encode_serialized(
        larder_format::Kind::Value,
        larder_format::Serializer::MsgPack,
        &payload,
        &larder_format::EntryMeta::with_ttl(larder_format::now_ms(), 60_000),
        &options,
    )
    .expect("encodes");
    let put_url = larder.admin_url("/entries/big");
    let push = tokio::spawn(async move {
        let answer = send("PUT", &put_url, &[], Bytes::from(entry)).await;
        (answer.status, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let hit = get(&larder.url("/hit"), &[]).await;
    let hit_done = Instant::now();
    let (status, push_done) = push.await.expect("task");
    assert_eq!((hit.cache(), status), ("HIT", StatusCode::CREATED));
    assert!(hit_done < push_done, "the hit was answered while the push was being decoded");
}
