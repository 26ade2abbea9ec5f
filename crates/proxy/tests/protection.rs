//! Protecting the app: no stampede when a hot page expires, one request (not hundreds) to an app that hangs while
//! a stale copy exists, uncacheable pages fetched in parallel rather than one after another, bodies that trickle
//! cut off, and HTTP/2 stream resets that cannot multiply the app's connections.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use larder_store::ManualClock;
use support::raw::{closed_within, response, RawOrigin, RawRequest, Reply};
use support::{cacheable, get, Larder, Origin};
use tokio::io::AsyncWriteExt;

async fn get_owned(url: String) -> support::Got {
    get(&url, &[]).await
}

async fn all(requests: Vec<tokio::task::JoinHandle<support::Got>>) -> Vec<support::Got> {
    let mut answers = Vec::with_capacity(requests.len());
    for request in requests {
        answers.push(request.await.expect("task"));
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refreshing_an_expired_page_sends_one_request_upstream() {
    let clock = ManualClock::new(larder_format::now_ms());
    let origin = Origin::stamped(clock.clone(), cacheable(vec![("cache-control", "max-age=10".into())])).await;
    let larder = Larder::start_at(&origin.url(), clock.clone(), |_| {}).await;
    assert_eq!(get(&larder.url("/hot"), &[]).await.text(), "/hot #1");
    clock.advance_ms(11_000);
    origin.set_delay(Duration::from_millis(300));
    let url = larder.url("/hot");
    let answers = all((0..50).map(|_| tokio::spawn(get_owned(url.clone()))).collect()).await;
    assert_eq!(origin.count("/hot"), 2, "one refresh for fifty requests");
    for answer in &answers {
        assert_eq!((answer.status, answer.text().as_str()), (StatusCode::OK, "/hot #2"));
    }
    assert!(answers.iter().filter(|a| a.header("cache-status").is_some_and(|s| s.contains("collapsed"))).count() >= 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_app_that_hangs_is_asked_once_while_the_stale_copy_answers() {
    let clock = ManualClock::new(larder_format::now_ms());
    let origin = Origin::stamped(clock.clone(), cacheable(vec![("cache-control", "max-age=10".into())])).await;
    let larder = Larder::start_at(&origin.url(), clock.clone(), |c| c.cache.stale_wait_ms = 200).await;
    get(&larder.url("/slow"), &[]).await;
    clock.advance_ms(20_000);
    origin.set_delay(Duration::from_secs(20));
    let started = Instant::now();
    let url = larder.url("/slow");
    let answers = all((0..50).map(|_| tokio::spawn(get_owned(url.clone()))).collect()).await;
    assert!(started.elapsed() < Duration::from_secs(3), "answered after the short wait: {:?}", started.elapsed());
    for answer in &answers {
        assert_eq!((answer.status, answer.cache(), answer.text().as_str()), (StatusCode::OK, "STALE", "/slow #1"));
    }
    assert_eq!(origin.count("/slow"), 2, "one request is hanging at the app, not fifty");
    let later = Instant::now();
    let again = get(&larder.url("/slow"), &[]).await;
    assert_eq!(again.cache(), "STALE");
    assert!(later.elapsed() < Duration::from_millis(150), "a refresh already under way for longer answers at once");
    assert_eq!(origin.count("/slow"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uncacheable_pages_are_fetched_in_parallel_not_one_after_another() {
    let origin = Origin::start(|seen| {
        (StatusCode::OK, vec![("cache-control", "private, max-age=60".into())], Bytes::from(seen.path.clone()))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let first = get(&larder.url("/account"), &[]).await;
    origin.set_delay(Duration::from_millis(500));
    let url = larder.url("/account");
    let answers = all((0..20).map(|_| tokio::spawn(get_owned(url.clone()))).collect()).await;
    assert!(answers.iter().all(|a| a.status == StatusCode::OK && a.text() == "/account"));
    assert_eq!(origin.count("/account"), 21);
    assert!(origin.load.max_in_flight() >= 15, "the app saw them at once, not queued: {}", origin.load.max_in_flight());
    assert_eq!(first.header("cache-status"), Some("larder; fwd=uri-miss; fwd-status=200; detail=private"));
    for answer in &answers {
        let status = answer.header("cache-status").unwrap_or("");
        assert!(status.starts_with("larder; fwd=bypass; fwd-status=200; detail=uncacheable"), "{status}");
    }
}

/// An origin whose cacheable body arrives a byte a second.
async fn trickling_origin(cacheable: bool) -> RawOrigin {
    RawOrigin::start(move |_: &RawRequest| {
        let cc = if cacheable { "max-age=60" } else { "no-store" };
        let head = format!("HTTP/1.1 200 OK\r\ncache-control: {cc}\r\ncontent-length: 100\r\n\r\n");
        Reply::Trickle { head: head.into_bytes(), body: vec![b'x'; 100], every: Duration::from_millis(400) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_body_that_trickles_in_is_cut_off() {
    let origin = trickling_origin(true).await;
    let larder = Larder::start(&origin.url(), |c| c.limits.upstream_timeout_secs = 2).await;
    let started = Instant::now();
    let url = larder.url("/trickle");
    let answers = all((0..5).map(|_| tokio::spawn(get_owned(url.clone()))).collect()).await;
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    for answer in answers {
        assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT, "the leader and every waiter");
    }
    // A body streamed through uncached is cut off when the upstream goes quiet for the idle timeout.
    let quiet = RawOrigin::start(|_: &RawRequest| Reply::Trickle {
        head: b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n".to_vec(),
        body: vec![b'x'; 10],
        every: Duration::from_secs(30),
    })
    .await;
    let larder = Larder::start(&quiet.url(), |c| c.limits.upstream_idle_timeout_secs = 1).await;
    let mut stream = tokio::net::TcpStream::connect(larder.addr).await.expect("connect");
    stream.write_all(b"GET /q HTTP/1.1\r\nhost: a\r\n\r\n").await.expect("write");
    assert!(closed_within(&mut stream, Duration::from_secs(4)).await, "the broken response ends the connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_trickled_after_the_app_answered_is_cut_off() {
    // The app answers as soon as it has the head, without reading the body.
    let origin = RawOrigin::start(|_: &RawRequest| Reply::Send(response(200, &[], b"early"))).await;
    let larder = Larder::start(&origin.url(), |c| c.limits.request_body_timeout_secs = 2).await;
    let mut stream = tokio::net::TcpStream::connect(larder.addr).await.expect("connect");
    stream
        .write_all(b"PUT /upload HTTP/1.1\r\nhost: a\r\ncontent-length: 1000\r\n\r\n0123456789")
        .await
        .expect("write");
    let started = Instant::now();
    let trickle = tokio::spawn(async move {
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if stream.write_all(b"x").await.is_err() {
                return started.elapsed();
            }
        }
        started.elapsed()
    });
    let cut_after = trickle.await.expect("task");
    assert!(cut_after < Duration::from_secs(6), "the connection was cut after {cut_after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http2_stream_resets_do_not_multiply_upstream_connections() {
    use http_body_util::Full;
    let origin = Origin::start(cacheable(vec![])).await;
    origin.set_delay(Duration::from_millis(300));
    let larder = Larder::start(&origin.url(), |c| c.limits.max_upstream_per_connection = 4).await;
    let client: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).http2_only(true).build_http();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        let mut batch = Vec::new();
        for i in 0..10 {
            let request =
                http::Request::get(larder.url(&format!("/reset/{i}"))).body(Full::new(Bytes::new())).expect("r");
            // Reset after 100 ms: the response future is dropped, which resets the stream.
            batch.push(tokio::time::timeout(Duration::from_millis(100), client.request(request)));
        }
        for reset in batch {
            let _ = reset.await;
        }
    }
    assert!(
        origin.load.max_in_flight() <= 4,
        "at most the connection's upstream slots at once: {}",
        origin.load.max_in_flight()
    );
    assert!(origin.load.connections() <= 8, "upstream connections are reused: {}", origin.load.connections());
    let served = origin.seen.lock().len();
    assert!(served > 0);
}
