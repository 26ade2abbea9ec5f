//! Test harness: a real origin server on loopback whose answers each test scripts, the proxy in front of it on
//! loopback ports with a hand-moved clock, and a plain HTTP client.

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use larder_proxy::{Proxy, ProxyConfig, Server};
use larder_store::{ManualClock, MemoryStore};
use parking_lot::Mutex;
use tokio::net::TcpListener;

/// What the origin received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
}

type Handler = dyn Fn(&Seen) -> (StatusCode, Vec<(&'static str, String)>, Bytes) + Send + Sync;

pub struct Origin {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub delay: Arc<Mutex<Duration>>,
    /// TCP connections accepted, requests being answered now, and the most ever answered at once.
    pub load: Arc<Load>,
    task: tokio::task::JoinHandle<()>,
}

/// What an origin went through.
#[derive(Debug, Default)]
pub struct Load {
    pub connections: std::sync::atomic::AtomicUsize,
    pub in_flight: std::sync::atomic::AtomicUsize,
    pub max_in_flight: std::sync::atomic::AtomicUsize,
}

impl Load {
    fn enter(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.max_in_flight.fetch_max(now, SeqCst);
    }

    fn leave(&self) {
        self.in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Origin {
    /// An origin whose `Date` comes from `clock` (so tests that move time keep the origin's clock in step).
    pub async fn stamped(
        clock: Arc<ManualClock>,
        handler: impl Fn(&Seen) -> (StatusCode, Vec<(&'static str, String)>, Bytes) + Send + Sync + 'static,
    ) -> Origin {
        Origin::start(move |seen| {
            let (status, mut headers, body) = handler(seen);
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("date")) {
                let now = std::time::UNIX_EPOCH + Duration::from_millis(larder_store::Clock::now_ms(&*clock));
                headers.push(("date", httpdate::fmt_http_date(now)));
            }
            (status, headers, body)
        })
        .await
    }

    /// An origin answering every request with `handler`'s status, headers and body.
    pub async fn start(
        handler: impl Fn(&Seen) -> (StatusCode, Vec<(&'static str, String)>, Bytes) + Send + Sync + 'static,
    ) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("origin binds");
        let addr = listener.local_addr().expect("origin address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let delay = Arc::new(Mutex::new(Duration::ZERO));
        let load = Arc::new(Load::default());
        let handler: Arc<Handler> = Arc::new(handler);
        let (seen2, delay2, load2) = (seen.clone(), delay.clone(), load.clone());
        let task = tokio::spawn(async move {
            // Connections live in this set, so dropping the origin closes them too (as a crashed server would).
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                load2.connections.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (seen, delay, handler, load) = (seen2.clone(), delay2.clone(), handler.clone(), load2.clone());
                connections.spawn(async move {
                    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                        let (seen, delay, handler, load) = (seen.clone(), delay.clone(), handler.clone(), load.clone());
                        async move {
                            load.enter();
                            let _leave = scopeguard(move || load.leave());
                            let record = Seen {
                                method: request.method().to_string(),
                                path: request.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned(),
                                headers: request.headers().clone(),
                            };
                            let _ = request.into_body().collect().await;
                            seen.lock().push(record.clone());
                            let wait = *delay.lock();
                            if !wait.is_zero() {
                                tokio::time::sleep(wait).await;
                            }
                            let (status, headers, body) = handler(&record);
                            let mut response = Response::new(Full::new(body));
                            *response.status_mut() = status;
                            for (name, value) in headers {
                                response.headers_mut().append(name, value.parse().expect("header value"));
                            }
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ =
                        auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Origin { addr, seen, delay, load, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests the origin saw for `path`.
    pub fn count(&self, path: &str) -> usize {
        self.seen.lock().iter().filter(|s| s.path == path).count()
    }

    pub fn last(&self, path: &str) -> Option<Seen> {
        self.seen.lock().iter().rev().find(|s| s.path == path).cloned()
    }

    pub fn set_delay(&self, delay: Duration) {
        *self.delay.lock() = delay;
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs `f` when dropped (also when the future holding it is dropped mid-way).
pub fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

pub struct Larder {
    pub addr: SocketAddr,
    pub admin: Option<SocketAddr>,
    pub clock: Arc<ManualClock>,
    pub proxy: Arc<Proxy<MemoryStore>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: Option<tokio::task::JoinHandle<()>>,
}

/// The configuration tests start from: the defaults, but a loopback admin API without a token and `PURGE` from
/// loopback, so that tests about other things need not carry credentials (admin.rs tests the real defaults).
pub fn test_defaults() -> ProxyConfig {
    ProxyConfig { admin_no_token: true, purge_from: vec!["127.0.0.1".into(), "::1".into()], ..ProxyConfig::default() }
}

impl Larder {
    /// larder in front of `upstream`, on free loopback ports, with `tweak` applied to the default configuration.
    pub async fn start(upstream: &str, tweak: impl FnOnce(&mut ProxyConfig)) -> Larder {
        // Start at the real time: the origin stamps Date from the system clock, and age follows from it.
        Larder::start_at(upstream, ManualClock::new(larder_format::now_ms()), tweak).await
    }

    /// As `start`, on a given clock (shared with an origin made by `Origin::stamped`).
    pub async fn start_at(upstream: &str, clock: Arc<ManualClock>, tweak: impl FnOnce(&mut ProxyConfig)) -> Larder {
        let mut config = ProxyConfig {
            upstream: upstream.to_owned(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            admin: Some("127.0.0.1:0".parse().expect("addr")),
            ..test_defaults()
        };
        tweak(&mut config);
        let store = MemoryStore::builder()
            .capacity_bytes(config.cache.capacity_bytes)
            .clock(clock.clone())
            .maintenance_interval(None)
            .build()
            .expect("store");
        Larder::start_with(config, store, clock).await
    }

    /// larder on `store` and `clock` (proxies sharing a store, and an origin made by `Origin::stamped`, on one
    /// hand-moved clock).
    pub async fn start_on_at(
        upstream: &str,
        store: MemoryStore,
        clock: Arc<ManualClock>,
        tweak: impl FnOnce(&mut ProxyConfig),
    ) -> Larder {
        let mut config = ProxyConfig {
            upstream: upstream.to_owned(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            admin: Some("127.0.0.1:0".parse().expect("addr")),
            ..test_defaults()
        };
        tweak(&mut config);
        Larder::start_with(config, store, clock).await
    }

    /// larder on `store` (a clone of a memory store shares it, as proxies share a memcached or Redis store).
    pub async fn start_on(upstream: &str, store: MemoryStore, tweak: impl FnOnce(&mut ProxyConfig)) -> Larder {
        let mut config = ProxyConfig {
            upstream: upstream.to_owned(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            admin: Some("127.0.0.1:0".parse().expect("addr")),
            ..test_defaults()
        };
        tweak(&mut config);
        Larder::start_with(config, store, ManualClock::new(larder_format::now_ms())).await
    }

    async fn start_with(config: ProxyConfig, store: MemoryStore, clock: Arc<ManualClock>) -> Larder {
        let server = Server::bind(config, store, clock.clone()).expect("larder binds");
        let addr = server.local_addr().expect("address");
        let admin = server.admin_addr();
        let proxy = server.proxy().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        Larder { addr, admin, clock, proxy, stop: Some(stop), task: Some(task) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin.expect("admin listener"))
    }

    /// Signals shutdown and returns the server task (finishes once in-flight requests are done).
    pub fn shut_down(&mut self) -> tokio::task::JoinHandle<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.take().expect("running")
    }
}

/// A response as a test sees it.
#[derive(Debug)]
pub struct Got {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn cache(&self) -> &str {
        self.header("x-cache").unwrap_or("")
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request (no automatic decompression, no redirects).
pub async fn send(method: &str, url: &str, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Got {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(body.into())).expect("request");
    let response = tokio::time::timeout(Duration::from_secs(20), client.request(request))
        .await
        .expect("response within 20 s")
        .expect("response");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Got { status: parts.status, headers: parts.headers, body }
}

pub async fn get(url: &str, headers: &[(&str, &str)]) -> Got {
    send("GET", url, headers, Bytes::new()).await
}

/// A handler answering every path with the given headers and a body naming the path and a counter.
pub fn cacheable(
    headers: Vec<(&'static str, String)>,
) -> impl Fn(&Seen) -> (StatusCode, Vec<(&'static str, String)>, Bytes) {
    let counter = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    move |seen| {
        let mut counts = counter.lock();
        let n = counts.entry(seen.path.clone()).or_insert(0);
        *n += 1;
        (StatusCode::OK, headers.clone(), Bytes::from(format!("{} #{n}", seen.path)))
    }
}

pub mod raw;
