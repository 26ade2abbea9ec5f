//! Under load and failure: coalescing, stale serving, unreachable and slow upstreams, limits, slow clients,
//! memory bounds, and graceful shutdown. Real origin and proxy on loopback.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use larder_proxy::cache_status::Outcome;
use larder_store::ManualClock;
use support::{cacheable, get, send, Larder, Origin};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_hundred_concurrent_misses_send_one_request_upstream() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    origin.set_delay(Duration::from_millis(300));
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let url = larder.url("/hot");
    let requests: Vec<_> = (0..500).map(|_| tokio::spawn(get_owned(url.clone()))).collect();
    for request in requests {
        let got = request.await.expect("task");
        assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "/hot #1"));
    }
    assert_eq!(origin.count("/hot"), 1);
    let metrics = larder.proxy.metrics();
    assert_eq!(metrics.requests(Outcome::Miss), 1, "one request went upstream");
    assert_eq!(
        metrics.requests(Outcome::Hit) + metrics.requests(Outcome::Collapsed),
        499,
        "every other request was answered from the cache, most of them by waiting for the one fill"
    );
    assert!(metrics.requests(Outcome::Collapsed) > 0);
}

async fn get_owned(url: String) -> support::Got {
    get(&url, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_while_revalidate_answers_at_once_and_refreshes_in_the_background() {
    let clock = ManualClock::new(larder_format::now_ms());
    let origin = Origin::stamped(
        clock.clone(),
        cacheable(vec![("cache-control", "max-age=10, stale-while-revalidate=60".into())]),
    )
    .await;
    let larder = Larder::start_at(&origin.url(), clock.clone(), |_| {}).await;
    get(&larder.url("/swr"), &[]).await;
    clock.advance_ms(15_000);
    origin.set_delay(Duration::from_millis(500));
    let started = Instant::now();
    let stale = get(&larder.url("/swr"), &[]).await;
    assert_eq!((stale.cache(), stale.text().as_str()), ("STALE", "/swr #1"));
    assert!(started.elapsed() < Duration::from_millis(400), "served without waiting for the upstream");
    wait_until(|| origin.count("/swr") == 2).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let refreshed = get(&larder.url("/swr"), &[]).await;
    assert_eq!((refreshed.cache(), refreshed.text().as_str()), ("HIT", "/swr #2"));
}

#[tokio::test]
async fn stale_if_error_covers_upstream_failures_within_its_window() {
    let clock = ManualClock::new(larder_format::now_ms());
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = failing.clone();
    let origin = Origin::stamped(clock.clone(), move |_| {
        if flag.load(std::sync::atomic::Ordering::SeqCst) {
            (StatusCode::SERVICE_UNAVAILABLE, vec![], Bytes::from_static(b"down"))
        } else {
            (
                StatusCode::OK,
                vec![("cache-control", "max-age=10, stale-if-error=60".into())],
                Bytes::from_static(b"good"),
            )
        }
    })
    .await;
    let larder = Larder::start_at(&origin.url(), clock.clone(), |_| {}).await;
    get(&larder.url("/sie"), &[]).await;
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    clock.advance_ms(20_000);
    let stale = get(&larder.url("/sie"), &[]).await;
    assert_eq!((stale.status, stale.cache(), stale.text().as_str()), (StatusCode::OK, "STALE", "good"));
    clock.advance_ms(60_000);
    let past = get(&larder.url("/sie"), &[]).await;
    assert_eq!((past.status, past.text().as_str()), (StatusCode::SERVICE_UNAVAILABLE, "down"));
}

#[tokio::test]
async fn a_configured_stale_if_error_covers_an_unreachable_upstream() {
    let clock = ManualClock::new(larder_format::now_ms());
    let origin = Origin::stamped(clock.clone(), cacheable(vec![("cache-control", "max-age=10".into())])).await;
    let larder = Larder::start_at(&origin.url(), clock.clone(), |c| c.cache.stale_if_error_secs = 300).await;
    get(&larder.url("/down"), &[]).await;
    drop(origin);
    clock.advance_ms(30_000);
    let stale = get(&larder.url("/down"), &[]).await;
    assert_eq!((stale.cache(), stale.text().as_str()), ("STALE", "/down #1"));
    let never_cached = get(&larder.url("/never"), &[]).await;
    assert_eq!(never_cached.status, StatusCode::BAD_GATEWAY);
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_and_a_slow_one_a_504() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr");
    let larder = Larder::start(&format!("http://{unused}"), |_| {}).await;
    let refused = get(&larder.url("/x"), &[]).await;
    assert_eq!(refused.status, StatusCode::BAD_GATEWAY);
    assert_eq!(refused.text(), "upstream unreachable\n");

    let origin = Origin::start(cacheable(vec![])).await;
    origin.set_delay(Duration::from_secs(3));
    let larder = Larder::start(&origin.url(), |c| c.limits.upstream_timeout_secs = 1).await;
    let started = Instant::now();
    let slow = get(&larder.url("/slow"), &[]).await;
    assert_eq!(slow.status, StatusCode::GATEWAY_TIMEOUT);
    assert!(started.elapsed() < Duration::from_millis(2500));
}

#[tokio::test]
async fn oversized_heads_and_bodies_are_refused_and_big_responses_stream_uncached() {
    let big = Bytes::from(vec![b'x'; 300_000]);
    let origin = Origin::start(move |seen| {
        let body = if seen.path == "/big" { big.clone() } else { Bytes::from_static(b"ok") };
        (StatusCode::OK, vec![("cache-control", "max-age=60".into())], body)
    })
    .await;
    let larder = Larder::start(&origin.url(), |c| {
        c.limits.max_header_bytes = 8192;
        c.limits.max_request_body_bytes = 1000;
        c.cache.max_body_bytes = 100_000;
    })
    .await;
    let long = "a".repeat(20_000);
    let head = get(&larder.url("/ok"), &[("x-long", long.as_str())]).await;
    assert_eq!(head.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    let body = send("POST", &larder.url("/upload"), &[], vec![0u8; 5000]).await;
    assert_eq!(body.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(origin.count("/upload"), 0);

    // A chunked body has no Content-Length to check up front: it is cut off as it passes the limit.
    let mut stream = TcpStream::connect(larder.addr).await.expect("connect");
    let chunk = format!("{:x}\r\n{}\r\n", 2000, "y".repeat(2000));
    let request = format!("POST /upload HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n{chunk}0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut reply = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut reply)).await.expect("answer").expect("read");
    assert!(
        String::from_utf8_lossy(&reply[..n]).starts_with("HTTP/1.1 413"),
        "{}",
        String::from_utf8_lossy(&reply[..n])
    );

    let first = get(&larder.url("/big"), &[]).await;
    assert_eq!((first.status, first.body.len()), (StatusCode::OK, 300_000));
    assert_eq!(get(&larder.url("/big"), &[]).await.cache(), "MISS", "too large to cache, streamed through");
}

#[tokio::test]
async fn a_client_that_never_finishes_its_head_is_cut_off() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |c| c.limits.header_read_timeout_secs = 1).await;
    let mut stream = TcpStream::connect(larder.addr).await.expect("connect");
    stream.write_all(b"GET / HTTP/1.1\r\nhost: a\r\nx-slow: ").await.expect("write");
    let started = Instant::now();
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert_eq!(closed, Ok(true));
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn connections_past_the_limit_wait_for_a_free_slot() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |c| c.limits.max_connections = 1).await;
    let mut holder = TcpStream::connect(larder.addr).await.expect("connect");
    holder.write_all(b"GET /held HTTP/1.1\r\nhost: a\r\n").await.expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiting = tokio::spawn(get_owned(larder.url("/next")));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiting.is_finished(), "the second connection must wait while the first holds the only slot");
    drop(holder);
    let got =
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("served once the slot frees").expect("task");
    assert_eq!(got.status, StatusCode::OK);
}

#[tokio::test]
async fn memory_stays_within_the_store_bound_with_many_urls() {
    let origin = Origin::start(move |seen| {
        (
            StatusCode::OK,
            vec![("cache-control", "max-age=600".into())],
            Bytes::from(format!("{}{}", seen.path, "z".repeat(4000))),
        )
    })
    .await;
    let capacity = 1 << 20;
    let larder = Larder::start(&origin.url(), |c| c.cache.capacity_bytes = capacity).await;
    for i in 0..1500 {
        let got = get(&larder.url(&format!("/u/{i}")), &[]).await;
        assert_eq!(got.status, StatusCode::OK);
    }
    let stats = larder.proxy.storage().store_stats().await.expect("stats");
    assert!(stats.bytes as usize <= capacity, "{} > {capacity}", stats.bytes);
    assert!(stats.evictions > 0);
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_request_leaves_nothing_behind() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    origin.set_delay(Duration::from_millis(500));
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let mut stream = TcpStream::connect(larder.addr).await.expect("connect");
    stream.write_all(b"GET /gone HTTP/1.1\r\nhost: a\r\n\r\n").await.expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(stream);
    wait_until(|| larder.proxy.fills_under_way() == 0).await;
    let got = get(&larder.url("/gone"), &[]).await;
    assert_eq!(got.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_requests_and_stops_accepting() {
    let origin = Origin::start(cacheable(vec![])).await;
    origin.set_delay(Duration::from_millis(500));
    let mut larder = Larder::start(&origin.url(), |_| {}).await;
    let in_flight = tokio::spawn(get_owned(larder.url("/slow")));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let server = larder.shut_down();
    let got = tokio::time::timeout(Duration::from_secs(5), in_flight).await.expect("finishes").expect("task");
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "/slow #1"));
    tokio::time::timeout(Duration::from_secs(5), server).await.expect("server stops").expect("task");
    assert!(TcpStream::connect(larder.addr).await.is_err(), "no longer accepting");
}

async fn wait_until(mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(done(), "condition not reached within 4 s");
}
