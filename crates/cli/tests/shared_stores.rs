//! `larder serve --store …` and `larder store …` against real servers (larder-testkit starts memcached, Redis and
//! PostgreSQL on loopback): proxies share pages and purges through the store, and a store that fails or restarts
//! is invisible to clients (the failure drills of spec/STORES.md §4.3 and issue 8).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_testkit::{Memcached, Postgres, Redis};

/// The admin API's token in these tests.
const TOKEN: &str = "shared-stores-test-token";

fn larder() -> Command {
    Command::new(env!("CARGO_BIN_EXE_larder"))
}

/// A loopback address no other test of this process is handed (testkit's `free_port`): two proxies started at
/// once must not both be given a port the OS freed a moment ago.
fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], larder_testkit::free_port()))
}

/// An app that counts its requests and answers `/<path>` with a page cacheable for a minute.
fn counting_app() -> (String, Arc<AtomicU64>) {
    counting_app_with(Duration::from_millis(5), 60)
}

/// An app on a thread of its own that answers every request after 300 ms with `max-age=1` the first time and
/// `max-age=60` after, and counts them.
fn aging_app() -> (String, Arc<AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let requests = Arc::new(AtomicU64::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                    std::thread::sleep(Duration::from_millis(300));
                    let max_age = if n == 1 { 1 } else { 60 };
                    let body = format!("page #{n}");
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncache-control: max-age={max_age}\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, requests)
}

/// An app that counts its requests, takes `delay` for each and says `max-age=max_age`.
fn counting_app_with(delay: Duration, max_age: u64) -> (String, Arc<AtomicU64>) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let origin = larder_proxy::origin::Origin::start(delay, 16, 2000, max_age).await.expect("app");
            tx.send((origin.url(), origin.requests.clone())).expect("send");
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("the app")
}

struct Proxy {
    child: Child,
    listen: SocketAddr,
    admin: SocketAddr,
    /// Where its log (standard error) goes.
    log: std::path::PathBuf,
}

impl Proxy {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn serve(upstream: &str, store: &str, extra: &[&str]) -> Proxy {
    let (listen, admin) = (free_addr(), free_addr());
    let log = std::env::temp_dir().join(format!("larder-shared-stores-{}-{}.log", std::process::id(), listen.port()));
    let child = larder()
        .args(["serve", "--upstream", upstream, "--store", store, "--workers", "1"])
        .args(["--listen", &listen.to_string(), "--admin", &admin.to_string()])
        .args(["--admin-token", TOKEN, "--purge-from", "127.0.0.1"])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("larder starts");
    let started = Instant::now();
    while TcpStream::connect(listen).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "larder did not listen on {listen}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Proxy { child, listen, admin, log }
}

/// One request; returns the status and the X-Cache value.
fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(stream, "{method} {path} HTTP/1.1\r\nhost: shop.example\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
        .expect("write");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let cache = answer.lines().find_map(|l| l.strip_prefix("x-cache: ")).unwrap_or_default().to_owned();
    (status, cache)
}

fn get(proxy: &Proxy, path: &str) -> (u16, String) {
    request(proxy.listen, "GET", path)
}

/// One request to the admin API, with the token; the status and the whole answer.
fn admin(proxy: &Proxy, method: &str, target: &str, body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(proxy.admin).expect("admin");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let head = format!(
        "{method} {target} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        proxy.admin,
        body.len()
    );
    stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body)).expect("write");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    (answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0), answer)
}

fn metric(proxy: &Proxy, name: &str) -> String {
    let (_, text) = admin(proxy, "GET", "/metrics", b"");
    text.lines().filter(|l| l.starts_with(name)).collect::<Vec<_>>().join("\n")
}

#[test]
fn two_proxies_on_a_memcached_pool_share_pages_and_purges() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start().expect("memcached")).collect();
    let url = format!("memcached://{}", servers.iter().map(Memcached::address).collect::<Vec<_>>().join(","));
    let (app, requests) = counting_app();
    let a = serve(&app, &url, &[]);
    let b = serve(&app, &url, &["--l1", "16M", "--l1-ttl", "300"]);
    for i in 0..30 {
        assert_eq!(get(&a, &format!("/page/{i}")), (200, "MISS".to_owned()));
    }
    for i in 0..30 {
        assert_eq!(get(&b, &format!("/page/{i}")), (200, "HIT".to_owned()), "b serves what a stored");
    }
    assert_eq!(requests.load(Ordering::SeqCst), 30);
    // A purge through a reaches b: its L2 at once, its L1 within --l1-ttl.
    assert_eq!(request(a.listen, "PURGE", "/page/3").0, 200);
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(get(&b, "/page/3").1, "MISS", "purged for every proxy");
    assert_eq!(get(&b, "/page/4").1, "HIT");
}

/// Issue 15's attack: a key carrying a memcached command through the admin API, which used to poison `/b` with an
/// injected page and leave the pooled connection out of step. Every form is refused with a 400 before it reaches
/// memcached; the front keeps answering from the app and the store, in step.
#[test]
fn keys_carrying_memcached_commands_never_reach_the_server() {
    let server = Memcached::start().expect("memcached");
    let (app, requests) = counting_app();
    let proxy = serve(&app, &format!("memcached://{}", server.address()), &[]);
    let b_key = "GET:http://shop.example/b";
    let injected = format!("z%0D%0Ams%20{b_key}%2010%20T0%0D%0AINJECTED!%0D%0Amg%20z%20v");
    for method in ["DELETE", "GET", "PUT"] {
        for key in [injected.as_str(), "z%0D%0Amg%20evil%20v", "a%20b", "a%00b"] {
            let (status, answer) = admin(&proxy, method, &format!("/entries/{key}"), b"x");
            assert_eq!(status, 400, "{method} {key}: {answer}");
        }
    }
    let (status, answer) = admin(&proxy, "POST", "/purge", br#"{"prefix":"x\n0 "}"#);
    assert_eq!(status, 400, "a prefix that would forge a purge record: {answer}");
    assert_eq!(get(&proxy, "/b"), (200, "MISS".to_owned()), "nothing was injected for /b");
    assert_eq!(get(&proxy, "/b"), (200, "HIT".to_owned()), "the store is in step");
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    let (status, answer) = admin(&proxy, "POST", "/purge", br#"{"tag":"t"}"#);
    assert_eq!(status, 200);
    assert!(answer.contains(r#"{"purged":null,"recorded":true}"#), "memcached records, not counts: {answer}");
}

/// The one lock policy across processes (spec/STORES.md §3): three `larder serve` processes on one memcached, a
/// burst of requests for a page gone stale: one refresh reaches the app, the clients wait for it (within
/// `stale_wait`) and get the refreshed page.
#[test]
fn three_proxy_processes_refresh_a_stale_page_once() {
    let server = Memcached::start().expect("memcached");
    // Fresh for 1 s the first time, so it goes stale soon; for a minute after, so that a process that finds the
    // refreshed page a little late (the machine may be loaded) still finds it fresh.
    let (app, requests) = aging_app();
    let url = format!("memcached://{}", server.address());
    let proxies: Vec<Proxy> = (0..3).map(|_| serve(&app, &url, &[])).collect();
    assert_eq!(get(&proxies[0], "/stale"), (200, "MISS".to_owned()));
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    std::thread::sleep(Duration::from_millis(2_100));
    let clients: Vec<_> = (0..12)
        .map(|i| {
            let addr = proxies[i % 3].listen;
            std::thread::spawn(move || request(addr, "GET", "/stale"))
        })
        .collect();
    for client in clients {
        assert_eq!(client.join().expect("client").0, 200);
    }
    assert_eq!(requests.load(Ordering::SeqCst), 2, "twelve clients over three processes, one refresh upstream");
}

#[test]
fn one_of_three_memcached_servers_dies_while_requests_flow_and_rejoins() {
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start().expect("memcached")).collect();
    let url = format!(
        "memcached://{}?timeout=100ms&retry_after=1s",
        servers.iter().map(Memcached::address).collect::<Vec<_>>().join(",")
    );
    let (app, _) = counting_app();
    let proxy = serve(&app, &url, &[]);
    let mut failures = Vec::new();
    let mut run = |round: usize| {
        for i in 0..60 {
            let (status, cache) = get(&proxy, &format!("/p/{i}"));
            if status != 200 {
                failures.push((round, i, status, cache));
            }
        }
    };
    run(0);
    servers[1].stop();
    run(1);
    run(2);
    let errors = metric(&proxy, "larder_store_server_errors_total");
    assert!(errors.contains(&servers[1].address()), "errors are counted per server: {errors}");
    servers[1].restart().expect("restarts");
    std::thread::sleep(Duration::from_millis(1200));
    run(3);
    run(4);
    assert!(failures.is_empty(), "clients never saw the failure: {failures:?}");
    // Back on the ring: it holds items again.
    let mut stream = TcpStream::connect(("127.0.0.1", servers[1].port())).expect("memcached");
    stream.write_all(b"stats\r\nquit\r\n").expect("write");
    let mut stats = String::new();
    let _ = stream.read_to_string(&mut stats);
    let items: u64 =
        stats.lines().find_map(|l| l.strip_prefix("STAT curr_items ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0);
    assert!(items > 0, "the restarted server is used again: {stats}");
}

#[test]
fn a_stopped_redis_is_invisible_to_clients_said_in_health_and_the_log_and_used_again_when_back() {
    let mut redis = Redis::start().expect("redis");
    let (app, requests) = counting_app();
    let proxy = serve(&app, &format!("{}?timeout=100ms", redis.url()), &[]);
    assert_eq!(get(&proxy, "/r"), (200, "MISS".to_owned()));
    assert_eq!(get(&proxy, "/r"), (200, "HIT".to_owned()));
    redis.stop();
    let started = Instant::now();
    for i in 0..20 {
        assert_eq!(get(&proxy, &format!("/down/{i}")).0, 200, "answered from the app while Redis is down");
    }
    assert!(started.elapsed() < Duration::from_secs(3), "no request waited long: {:?}", started.elapsed());
    // The outage is not silent: /health names the server and why, and the log says it once, not per request.
    let (_, health) = admin(&proxy, "GET", "/health", b"");
    let health: serde_json::Value =
        serde_json::from_str(health.split("\r\n\r\n").nth(1).unwrap_or("{}")).expect("JSON health");
    assert_eq!(health["status"], "degraded", "{health}");
    let server = &health["store"]["servers"][0];
    assert!(server["state"] == "ejected" || server["state"] == "failing", "{health}");
    assert!(server["last_error"]["error"].as_str().is_some_and(|e| !e.is_empty()), "{health}");
    let log = proxy.log();
    let named = format!("redis server 127.0.0.1:{}", redis.port());
    assert!(log.contains(&format!("{named}: ")) && log.contains("ejected"), "{log}");
    assert!(log.matches(&named).count() <= 4, "one line per change, not per request:\n{log}");
    // What was fetched during the outage is served from the outage memory (spec/STORES.md §3), not asked again.
    assert_eq!(get(&proxy, "/down/0"), (200, "HIT".to_owned()), "kept in the outage memory");
    redis.restart().expect("redis restarts");
    let deadline = Instant::now() + Duration::from_secs(10);
    // Requests go on; one of them is the probe that finds Redis back, and the recovery is logged.
    while !proxy.log().contains("answering again") {
        get(&proxy, "/probe");
        assert!(Instant::now() < deadline, "larder reconnected to Redis by itself: {}", proxy.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(&proxy, "/after"), (200, "MISS".to_owned()));
    assert_eq!(get(&proxy, "/after"), (200, "HIT".to_owned()), "stored in Redis again");
    assert_eq!(get(&proxy, "/down/1").1, "MISS", "the outage memory was dropped when Redis answered again");
    assert!(requests.load(Ordering::SeqCst) >= 22);
    let (_, health) = admin(&proxy, "GET", "/health", b"");
    assert!(health.contains(r#""status":"ok""#), "{health}");
}

#[test]
fn a_restarted_postgres_is_reconnected_to() {
    let mut postgres = Postgres::start().expect("postgres");
    let (app, _) = counting_app();
    let proxy = serve(&app, &postgres.url(), &[]);
    assert_eq!(get(&proxy, "/pg"), (200, "MISS".to_owned()));
    assert_eq!(get(&proxy, "/pg"), (200, "HIT".to_owned()));
    postgres.restart().expect("restarts");
    // A HIT alone no longer shows the store is back: what is fetched while it fails is served from the outage memory
    // (spec/STORES.md §3). The store's own state does.
    let deadline = Instant::now() + Duration::from_secs(15);
    for i in 0.. {
        assert_eq!(get(&proxy, &format!("/pg-after/{i}")).0, 200, "answered while PostgreSQL restarts");
        let (_, health) = admin(&proxy, "GET", "/health", b"");
        if health.contains(r#""status":"ok""#) {
            break;
        }
        assert!(Instant::now() < deadline, "larder reconnected to PostgreSQL by itself: {health}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(&proxy, "/pg").1, "HIT", "what was stored before the restart is still there");
}

/// `larder store` reads and writes entries as `encode` makes them and `inspect` reads them, in every store.
#[test]
fn larder_store_moves_entries_in_and_out_of_every_store() {
    let memcached = Memcached::start().expect("memcached");
    let redis = Redis::start().expect("redis");
    let dir = tempfile::tempdir().expect("dir");
    let urls = [
        format!("memcached://{}", memcached.address()),
        redis.url(),
        format!("sqlite://{}/cache.db", dir.path().display()),
        format!("file://{}/files", dir.path().display()),
    ];
    let entry = {
        let mut child = larder()
            .args(["encode", "--serializer", "text", "--ttl", "60", "--tag", "t1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("encode");
        child.stdin.take().expect("stdin").write_all(b"hello from the cli").expect("write");
        child.wait_with_output().expect("encode runs").stdout
    };
    for url in &urls {
        let run = |args: &[&str], input: Option<&[u8]>| {
            let mut child = larder()
                .arg("store")
                .args(args)
                .args(["--store", url])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("larder store");
            let mut stdin = child.stdin.take().expect("stdin");
            if let Some(input) = input {
                stdin.write_all(input).expect("write");
            }
            drop(stdin);
            child.wait_with_output().expect("runs")
        };
        let set = run(&["set", "greeting"], Some(&entry));
        assert!(set.status.success(), "{url}: {}", String::from_utf8_lossy(&set.stderr));
        let got = run(&["get", "greeting"], None);
        assert_eq!(got.stdout, entry, "{url}: the entry comes back byte for byte");
        let shown = run(&["get", "greeting", "--inspect", "--json"], None);
        let json: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("inspect's JSON");
        assert_eq!(json["value"], "hello from the cli", "{url}: {json}");
        assert_eq!(json["tags"], serde_json::json!(["t1"]));
        let refused = run(&["set", "junk"], Some(b"not an entry"));
        assert_eq!(refused.status.code(), Some(2), "{url}: bytes that are not an entry are refused");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("--raw"));
        let purged = run(&["purge", "--tag", "t1"], None);
        assert!(purged.status.success(), "{url}: {}", String::from_utf8_lossy(&purged.stderr));
        let missing = run(&["get", "greeting"], None);
        assert_eq!(missing.status.code(), Some(1), "{url}: purged by tag");
        assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
        let stats = run(&["stats", "--json"], None);
        let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("stats JSON");
        assert!(stats["backend"].is_string(), "{url}: {stats}");
    }
    let bad =
        larder().args(["store", "get", "k", "--store", "memcached://127.0.0.1:1?colour=blue"]).output().expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    let message = String::from_utf8_lossy(&bad.stderr);
    assert!(message.contains("unknown option colour"), "{message}");
}

/// The front on a hostile Redis (issue 15: a 1 GiB reply grew it from 25 MB to 642 MB, which it kept): every
/// request is answered from the app within the store's bounds, and the process stays small.
#[test]
fn the_front_on_a_hostile_redis_answers_from_the_app_and_stays_small() {
    use larder_testkit::hostile::{Behaviour, HostileServer, Protocol, Settings};
    let (app, requests) = counting_app();
    for behaviour in [Behaviour::Huge, Behaviour::Nested, Behaviour::Drip, Behaviour::Garbage] {
        let server = HostileServer::start(Protocol::Redis, behaviour, Settings::default()).expect("hostile");
        let proxy = serve(&app, &format!("redis://{}?timeout=250ms", server.address()), &[]);
        for i in 0..5 {
            let started = Instant::now();
            let (status, cache) = get(&proxy, &format!("/hostile/{behaviour:?}/{i}"));
            assert_eq!(status, 200, "{behaviour:?}: answered from the app ({cache})");
            assert!(started.elapsed() < Duration::from_secs(5), "{behaviour:?}: took {:?}", started.elapsed());
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", proxy.child.id())).unwrap_or_default();
        let rss_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().split(' ').next()?.parse().ok())
            .unwrap_or(0);
        assert!(rss_kb < 200 << 10, "{behaviour:?}: the front peaked at {} MiB", rss_kb >> 10);
    }
    assert!(requests.load(Ordering::SeqCst) >= 20);
}

/// A refused connection and a database that does not exist are reported as what they are, not as a timeout.
#[test]
fn larder_store_says_why_redis_cannot_be_used() {
    let redis = Redis::start().expect("redis");
    let closed = free_addr();
    let say = |url: &str| {
        let output = larder().args(["store", "get", "k", "--store", url]).output().expect("runs");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let refused = say(&format!("redis://{closed}/0"));
    assert!(refused.contains("connection refused"), "{refused}");
    let no_db = say(&format!("redis://127.0.0.1:{}/17", redis.port()));
    assert!(no_db.contains("database") && no_db.contains("does not exist"), "{no_db}");
}
