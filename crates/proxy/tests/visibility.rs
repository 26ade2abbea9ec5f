//! larder's decisions are visible: the RFC 9211 `Cache-Status` header says what happened and why a response was
//! not stored, the metrics count every request exactly once, an unreachable app is reported as such (never as a
//! bypass), `/health` and `/ready` report the app, store failures show in `/metrics`, and the access log has a
//! line per request.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use larder_proxy::cache_status::Outcome;
use larder_proxy::{ProxyConfig, Server};
use larder_store::{MemoryStore, StoreError, SystemClock};
use larder_testkit::intercepted::{Intercepted, Op};
use support::{cacheable, get, send, Larder, Origin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_status_says_what_happened_and_why() {
    let origin = Origin::start(|seen| {
        let headers: Vec<(&'static str, String)> = match seen.path.as_str() {
            "/private" => vec![("cache-control", "private, max-age=60".into())],
            "/cookie" => vec![("cache-control", "max-age=60".into()), ("set-cookie", "s=1".into())],
            "/nothing" => vec![],
            "/big" => vec![("cache-control", "max-age=60".into())],
            _ => vec![("cache-control", "max-age=60".into())],
        };
        let body = if seen.path == "/big" { Bytes::from(vec![b'b'; 200_000]) } else { Bytes::from_static(b"x") };
        (StatusCode::OK, headers, body)
    })
    .await;
    let larder = Larder::start(&origin.url(), |c| c.cache.max_body_bytes = 100_000).await;
    let status = |got: &support::Got| got.header("cache-status").unwrap_or("").to_owned();
    let first = get(&larder.url("/page"), &[]).await;
    assert_eq!(status(&first), "larder; fwd=uri-miss; fwd-status=200; stored; ttl=60");
    assert_eq!(first.cache(), "MISS");
    let hit = get(&larder.url("/page"), &[]).await;
    assert!(status(&hit).starts_with("larder; hit; ttl="), "{}", status(&hit));
    assert_eq!(hit.cache(), "HIT");
    for (path, detail) in [
        ("/private", "private"),
        ("/cookie", "set-cookie"),
        ("/nothing", "no-explicit-freshness"),
        ("/big", "too-large"),
    ] {
        let got = get(&larder.url(path), &[]).await;
        assert_eq!(status(&got), format!("larder; fwd=uri-miss; fwd-status=200; detail={detail}"), "{path}");
    }
    let post = send("POST", &larder.url("/form"), &[], "x").await;
    assert_eq!((post.cache(), status(&post).as_str()), ("BYPASS", "larder; fwd=method; fwd-status=200"));
    // The app's own Cache-Status member comes first (RFC 9211 §2).
    let disabled = Larder::start(&origin.url(), |c| c.cache_status = false).await;
    assert_eq!(get(&disabled.url("/page"), &[]).await.header("cache-status"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_every_request_exactly_once() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    origin.set_delay(Duration::from_millis(300));
    let url = larder.url("/hot");
    let waves: Vec<_> = (0..30)
        .map(|_| {
            tokio::spawn({
                let url = url.clone();
                async move { get(&url, &[]).await }
            })
        })
        .collect();
    let mut collapsed_headers = 0;
    for wave in waves {
        let got = wave.await.expect("task");
        assert_eq!(got.status, StatusCode::OK);
        if got.header("cache-status").is_some_and(|s| s.contains("collapsed")) {
            assert_eq!(got.cache(), "MISS", "a collapsed request was a miss here, answered by another's fill");
            collapsed_headers += 1;
        }
    }
    origin.set_delay(Duration::ZERO);
    get(&larder.url("/hot"), &[]).await;
    send("POST", &larder.url("/form"), &[], "x").await;
    send("GET", &larder.url("/x"), &[("host", "bad/host")], Bytes::new()).await;
    let metrics = larder.proxy.metrics();
    let total: u64 = Outcome::ALL.iter().map(|o| metrics.requests(*o)).sum();
    assert_eq!(total, 33, "every request once");
    assert_eq!(metrics.requests(Outcome::Miss), 1);
    assert_eq!(metrics.requests(Outcome::Collapsed), collapsed_headers);
    assert_eq!(metrics.requests(Outcome::Hit) + metrics.requests(Outcome::Collapsed), 30);
    assert_eq!((metrics.requests(Outcome::Bypass), metrics.requests(Outcome::Local)), (1, 1));
    let text = get(&larder.admin_url("/metrics"), &[]).await.text();
    assert!(text.contains(&format!("larder_requests_total{{cache=\"collapsed\"}} {collapsed_headers}\n")), "{text}");
}

#[tokio::test]
async fn an_unreachable_app_is_reported_not_bypassed() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr");
    let larder = Larder::start(&format!("http://{unused}"), |_| {}).await;
    let health = |larder: &Larder| {
        let url = larder.admin_url("/health");
        async move { serde_json::from_slice::<serde_json::Value>(&get(&url, &[]).await.body).expect("JSON") }
    };
    assert_eq!(health(&larder).await["upstream"]["state"], "unknown");
    let down = get(&larder.url("/page"), &[]).await;
    assert_eq!(down.status, StatusCode::BAD_GATEWAY);
    assert_eq!(down.cache(), "MISS", "a miss that found the app down, not a bypass");
    assert_eq!(down.header("cache-status"), Some("larder; fwd=uri-miss; detail=upstream-unreachable"));
    let report = health(&larder).await;
    assert_eq!(
        (report["upstream"]["state"].as_str(), report["upstream"]["consecutive_failures"].as_u64()),
        (Some("down"), Some(1))
    );
    assert!(report["upstream"]["last_error"]["error"].as_str().is_some_and(|e| e.contains("unreachable")));
    assert_eq!(get(&larder.admin_url("/ready"), &[]).await.status, StatusCode::SERVICE_UNAVAILABLE);
    let metrics = get(&larder.admin_url("/metrics"), &[]).await.text();
    assert!(metrics.contains("larder_upstream_up 0\n") && metrics.contains("larder_upstream_errors_total 1\n"));

    let origin = Origin::start(cacheable(vec![])).await;
    let up = Larder::start(&origin.url(), |_| {}).await;
    assert_eq!(get(&up.admin_url("/ready"), &[]).await.status, StatusCode::OK);
}

/// A real memory store whose writes fail, as a remote store's do when its server is down.
fn failing_writes() -> Intercepted {
    Intercepted::new(MemoryStore::builder().build().expect("store"), "failing", |op| match op {
        Op::Set(_) | Op::Add(_) | Op::Incr(_) => {
            Err(StoreError::Server { backend: "failing", server: "127.0.0.1:1".into(), message: "down".into() })
        }
        _ => Ok(()),
    })
}

#[tokio::test]
async fn store_failures_are_absorbed_and_counted() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    let config = ProxyConfig {
        upstream: origin.url(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        admin: Some("127.0.0.1:0".parse().expect("addr")),
        ..support::test_defaults()
    };
    let store = failing_writes();
    let server = Server::bind(config, store, Arc::new(SystemClock)).expect("binds");
    let (addr, admin) = (server.local_addr().expect("addr"), server.admin_addr().expect("admin"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    for n in 1..=2 {
        let got = get(&format!("http://{addr}/p"), &[]).await;
        assert_eq!((got.status, got.text()), (StatusCode::OK, format!("/p #{n}")), "served, though never stored");
        assert!(got.header("cache-status").is_some_and(|s| s.contains("detail=store-refused")));
    }
    let metrics = get(&format!("http://{admin}/metrics"), &[]).await.text();
    // Per request, two store operations failed: the fill's lock (an `add`) and the write.
    assert!(metrics.contains("larder_store_errors_total 4\n"), "{metrics}");
    let _ = stop.send(());
    let _ = task.await;
}

#[tokio::test]
async fn the_access_log_has_a_line_per_request() {
    let dir = std::env::temp_dir().join(format!("larder-access-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("access.log");
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    let larder = Larder::start(&origin.url(), |c| c.access_log = path.display().to_string()).await;
    get(&larder.url("/a?x=1"), &[("user-agent", "test \"agent\"")]).await;
    get(&larder.url("/a?x=1"), &[]).await;
    send("GET", &larder.url("/"), &[("host", "bad/host")], Bytes::new()).await;
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = std::fs::read_to_string(&path).unwrap_or_default().lines().map(str::to_owned).collect();
        if lines.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lines.len(), 3, "{lines:?}");
    let fields = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let miss = fields(&lines[0]);
    let url = format!("http://{}/a?x=1", larder.addr);
    assert_eq!(&miss[1..10], ["127.0.0.1", "GET", url.as_str(), "HTTP/1.1", "200", "9", "MISS", "miss", "-"]);
    assert!(lines[0].ends_with(" \"test \\x22agent\\x22\""), "{}", lines[0]);
    let hit = fields(&lines[1]);
    assert_eq!((hit[7].as_str(), hit[8].as_str(), hit[11].as_str()), ("HIT", "hit", "-"), "no upstream time for a hit");
    let refused = fields(&lines[2]);
    assert_eq!((refused[5].as_str(), refused[7].as_str(), refused[8].as_str()), ("400", "BYPASS", "local"));
    let _ = std::fs::remove_dir_all(&dir);
}
