//! The fault proxy between plain TCP clients and real memcached and redis-server: every fault seen from the client's
//! side, the `larder-faults` binary driven through its standard input, and the Rust memcached store through a frozen
//! server. Margins are wide (a loaded two-core machine): "no answer within 300 ms" and "an answer within 5 s".

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use larder_memcached::MemcachedStore;
use larder_store::{Store, StoreUrl};
use larder_testkit::faults::{Fault, FaultProxy};
use larder_testkit::{Memcached, Redis};

const SILENCE: Duration = Duration::from_millis(300);
const PATIENCE: Duration = Duration::from_secs(5);

fn memcached_proxy() -> (Memcached, FaultProxy) {
    let memcached = Memcached::start().expect("memcached starts");
    let upstream: SocketAddr = memcached.address().parse().expect("address");
    let proxy = FaultProxy::start(upstream).expect("proxy starts");
    (memcached, proxy)
}

fn redis_proxy() -> (Redis, FaultProxy) {
    let redis = Redis::start().expect("redis starts");
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port()))).expect("proxy starts");
    (redis, proxy)
}

fn connect(proxy: &FaultProxy) -> TcpStream {
    let stream = TcpStream::connect(proxy.address()).expect("connects");
    stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
    stream
}

/// Reads until `wanted` bytes arrived, the end, an error or the timeout: the bytes, and how the read ended.
fn read_until(stream: &mut TcpStream, wanted: &[u8], timeout: Duration) -> (Vec<u8>, Option<std::io::Error>) {
    stream.set_read_timeout(Some(timeout)).expect("timeout");
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut buffer = [0u8; 4096];
    while !got.windows(wanted.len()).any(|w| w == wanted) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (got, Some(std::io::Error::from(ErrorKind::TimedOut)));
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        match stream.read(&mut buffer) {
            Ok(0) => return (got, None),
            Ok(n) => got.extend_from_slice(&buffer[..n]),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

fn ask(stream: &mut TcpStream, request: &[u8], ends_with: &[u8]) -> Vec<u8> {
    stream.write_all(request).expect("writes");
    let (got, error) = read_until(stream, ends_with, PATIENCE);
    assert!(error.is_none() && got.ends_with(ends_with), "asked {request:?}, got {got:?} ({error:?})");
    got
}

fn silent_for(stream: &mut TcpStream, duration: Duration) -> bool {
    stream.set_read_timeout(Some(duration)).expect("timeout");
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

fn set_value(stream: &mut TcpStream, key: &str, size: usize) {
    let value = vec![b'v'; size];
    let mut request = format!("set {key} 0 0 {size}\r\n").into_bytes();
    request.extend_from_slice(&value);
    request.extend_from_slice(b"\r\n");
    ask(stream, &request, b"STORED\r\n");
}

#[test]
fn pass_forwards_both_ways_and_counts() {
    let (_memcached, proxy) = memcached_proxy();
    let mut client = connect(&proxy);
    assert!(ask(&mut client, b"version\r\n", b"\r\n").starts_with(b"VERSION "));
    set_value(&mut client, "k", 10);
    assert_eq!(ask(&mut client, b"get k\r\n", b"END\r\n"), b"VALUE k 0 10\r\nvvvvvvvvvv\r\nEND\r\n");
    // The proxy counts a chunk after writing it, so the client may read the last reply before it is counted: wait
    // for the counters (every reply is 55 bytes down: VERSION, STORED, the value) rather than read them at once.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut stats = proxy.stats();
    while stats.bytes_down < 55 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        stats = proxy.stats();
    }
    assert_eq!(stats.connections, 1);
    assert_eq!(stats.open, 1);
    assert_eq!(stats.fault, "pass");
    assert!(stats.bytes_up >= 30 && stats.bytes_down >= 30, "{stats:?}");
    assert!(stats.to_json().starts_with("{\"fault\":\"pass\",\"connections\":1,"), "{}", stats.to_json());
}

#[test]
fn freeze_holds_everything_until_pass_on_open_and_new_connections() {
    let (_memcached, proxy) = memcached_proxy();
    let mut open = connect(&proxy);
    ask(&mut open, b"version\r\n", b"\r\n");
    proxy.set(Fault::Freeze).expect("freeze");
    open.write_all(b"version\r\n").expect("writes");
    assert!(silent_for(&mut open, SILENCE), "a frozen server does not answer");
    // A new connection is accepted (the kernel of a stopped server does that) and gets nothing either.
    let mut new = connect(&proxy);
    new.write_all(b"version\r\n").expect("writes");
    assert!(silent_for(&mut new, SILENCE), "nor on a new connection");
    proxy.set(Fault::Pass).expect("pass");
    for stream in [&mut open, &mut new] {
        let (got, error) = read_until(stream, b"\r\n", PATIENCE);
        assert!(error.is_none() && got.starts_with(b"VERSION "), "answered after pass: {got:?} {error:?}");
    }
}

#[test]
fn redis_freezes_and_thaws_too() {
    let (_redis, proxy) = redis_proxy();
    let mut client = connect(&proxy);
    assert_eq!(ask(&mut client, b"PING\r\n", b"\r\n"), b"+PONG\r\n");
    proxy.set(Fault::Freeze).expect("freeze");
    client.write_all(b"PING\r\n").expect("writes");
    assert!(silent_for(&mut client, SILENCE));
    proxy.set(Fault::Pass).expect("pass");
    assert_eq!(read_until(&mut client, b"\r\n", PATIENCE).0, b"+PONG\r\n");
}

#[test]
fn delay_holds_each_reply() {
    let (_redis, proxy) = redis_proxy();
    let mut client = connect(&proxy);
    proxy.set(Fault::Delay(Duration::from_millis(400))).expect("delay");
    let started = Instant::now();
    assert_eq!(ask(&mut client, b"PING\r\n", b"\r\n"), b"+PONG\r\n");
    assert!(started.elapsed() >= Duration::from_millis(390), "{:?}", started.elapsed());
    proxy.set(Fault::Pass).expect("pass");
    ask(&mut client, b"PING\r\n", b"\r\n");
}

#[test]
fn reset_gives_connection_reset_on_open_and_new_connections() {
    let (_memcached, proxy) = memcached_proxy();
    let mut open = connect(&proxy);
    ask(&mut open, b"version\r\n", b"\r\n");
    proxy.set(Fault::Reset).expect("reset");
    let (_, error) = read_until(&mut open, b"\r\n", PATIENCE);
    assert_eq!(error.map(|e| e.kind()), Some(ErrorKind::ConnectionReset), "an open connection is reset");
    let mut new = connect(&proxy);
    let _ = new.write_all(b"version\r\n");
    let (got, error) = read_until(&mut new, b"\r\n", PATIENCE);
    assert!(got.is_empty());
    assert_eq!(error.map(|e| e.kind()), Some(ErrorKind::ConnectionReset), "a new connection is reset");
    proxy.set(Fault::Pass).expect("pass");
    ask(&mut connect(&proxy), b"version\r\n", b"\r\n");
}

#[test]
fn blackhole_never_answers_new_connections_and_freezes_open_ones() {
    let (_memcached, proxy) = memcached_proxy();
    let mut open = connect(&proxy);
    ask(&mut open, b"version\r\n", b"\r\n");
    proxy.set(Fault::Blackhole).expect("blackhole");
    let mut new = connect(&proxy);
    new.write_all(b"version\r\n").expect("accepted, and the request is taken");
    open.write_all(b"version\r\n").expect("writes");
    assert!(silent_for(&mut new, SILENCE));
    assert!(silent_for(&mut open, SILENCE));
    proxy.set(Fault::Pass).expect("pass");
    assert!(read_until(&mut open, b"\r\n", PATIENCE).0.starts_with(b"VERSION "), "the open one thaws");
    assert!(silent_for(&mut new, SILENCE), "the black-holed one never answers");
    ask(&mut connect(&proxy), b"version\r\n", b"\r\n");
}

#[test]
fn half_close_ends_the_reply_stream() {
    let (_memcached, proxy) = memcached_proxy();
    let mut open = connect(&proxy);
    ask(&mut open, b"version\r\n", b"\r\n");
    proxy.set(Fault::HalfClose).expect("half-close");
    let (got, error) = read_until(&mut open, b"never", PATIENCE);
    assert!(got.is_empty() && error.is_none(), "end of file: {got:?} {error:?}");
    // The client can still write; its requests reach the server, the answers do not come back.
    let _ = open.write_all(b"version\r\n");
    let mut new = connect(&proxy);
    let (got, error) = read_until(&mut new, b"never", PATIENCE);
    assert!(got.is_empty() && error.is_none(), "a new connection reads end of file: {got:?} {error:?}");
}

#[test]
fn trickle_sends_the_reply_in_pieces_over_time() {
    let (_memcached, proxy) = memcached_proxy();
    let mut client = connect(&proxy);
    set_value(&mut client, "big", 2000);
    proxy.set(Fault::Trickle { bytes: 500, every: Duration::from_millis(100) }).expect("trickle");
    client.write_all(b"get big\r\n").expect("writes");
    let started = Instant::now();
    let mut pieces = 0;
    let mut got = Vec::new();
    let mut buffer = [0u8; 8192];
    client.set_read_timeout(Some(PATIENCE)).expect("timeout");
    while !got.ends_with(b"END\r\n") {
        let n = client.read(&mut buffer).expect("reads");
        assert!(n > 0 && n <= 500, "pieces of at most 500 bytes: {n}");
        got.extend_from_slice(&buffer[..n]);
        pieces += 1;
    }
    // 2,000 bytes of value plus its lines: five pieces, four pauses of 100 ms between them.
    assert_eq!(got.len(), 2000 + "VALUE big 0 2000\r\n\r\nEND\r\n".len());
    assert!(pieces >= 5, "{pieces} pieces");
    assert!(started.elapsed() >= Duration::from_millis(350), "{:?}", started.elapsed());
}

#[test]
fn cut_closes_the_connection_mid_value() {
    let (_memcached, proxy) = memcached_proxy();
    let mut client = connect(&proxy);
    set_value(&mut client, "big", 10_000);
    proxy.set(Fault::CutMidValue { after_bytes: 100 }).expect("cut");
    client.write_all(b"get big\r\n").expect("writes");
    let (got, error) = read_until(&mut client, b"END\r\n", PATIENCE);
    assert_eq!(got.len(), 100, "exactly the first 100 bytes");
    assert!(got.starts_with(b"VALUE big 0 10000\r\nvvv"));
    assert!(error.is_none(), "then end of file: {error:?}");
    // A new connection has a budget of its own, and Redis is cut the same way.
    let (_redis, redis_proxy) = redis_proxy();
    let mut redis = connect(&redis_proxy);
    let value = "x".repeat(5000);
    ask(&mut redis, format!("SET big {value}\r\n").as_bytes(), b"+OK\r\n");
    redis_proxy.set(Fault::CutMidValue { after_bytes: 1000 }).expect("cut");
    redis.write_all(b"GET big\r\n").expect("writes");
    let (got, error) = read_until(&mut redis, b"never", PATIENCE);
    assert!(got.len() == 1000 && got.starts_with(b"$5000\r\nxxx") && error.is_none(), "{} {error:?}", got.len());
}

#[test]
fn refuse_stops_listening_and_pass_listens_again_on_the_same_port() {
    let (_memcached, proxy) = memcached_proxy();
    let mut open = connect(&proxy);
    ask(&mut open, b"version\r\n", b"\r\n");
    proxy.set(Fault::Refuse).expect("refuse");
    let refused = TcpStream::connect_timeout(&proxy.address(), PATIENCE).expect_err("refused");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    let (got, _) = read_until(&mut open, b"\r\n", PATIENCE);
    assert!(got.is_empty(), "open connections are closed as by a killed server");
    proxy.set(Fault::Pass).expect("pass");
    ask(&mut connect(&proxy), b"version\r\n", b"\r\n");
}

/// The binary: first line the address, one answer per command, gone when its standard input closes.
#[test]
fn the_cli_is_driven_through_its_standard_input() {
    let memcached = Memcached::start().expect("memcached starts");
    let mut child = Command::new(env!("CARGO_BIN_EXE_larder-faults"))
        .arg(memcached.address())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("the address line");
    let address: SocketAddr = first.trim().parse().expect("127.0.0.1:PORT");
    assert!(address.ip().is_loopback());
    let mut say = |text: &str| -> String {
        writeln!(stdin, "{text}").expect("writes a command");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("reads an answer");
        line.trim_end().to_string()
    };
    let mut client = TcpStream::connect(address).expect("connects");
    assert!(ask(&mut client, b"version\r\n", b"\r\n").starts_with(b"VERSION "));
    assert_eq!(say("freeze"), "ok");
    client.write_all(b"version\r\n").expect("writes");
    assert!(silent_for(&mut client, SILENCE));
    assert_eq!(say("pass"), "ok");
    assert!(read_until(&mut client, b"\r\n", PATIENCE).0.starts_with(b"VERSION "));
    for good in ["delay 10", "trickle 100 5", "cut 1000", "half-close", "reset", "blackhole", "refuse", "pass"] {
        assert_eq!(say(good), "ok", "{good}");
    }
    let stats = say("stats");
    assert!(stats.starts_with("ok {\"fault\":\"pass\",\"connections\":1,"), "{stats}");
    for bad in ["explode", "delay", "delay soon", "trickle 0 10", "cut", "pass now", ""] {
        assert!(say(bad).starts_with("error "), "{bad:?} is an error");
    }
    drop(stdin);
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waits") {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(started.elapsed() < PATIENCE, "exits when its standard input closes");
        std::thread::sleep(Duration::from_millis(20));
    }
    let help = Command::new(env!("CARGO_BIN_EXE_larder-faults")).arg("--help").output().expect("runs");
    let text = String::from_utf8_lossy(&help.stdout);
    for word in ["pass", "delay", "freeze", "reset", "blackhole", "half-close", "trickle", "cut", "refuse", "stats"] {
        assert!(text.contains(&format!("\n  {word}")), "--help explains {word}");
    }
}

/// The Rust memcached store through a frozen server: a get fails within its timeout (plus margin), and works
/// again after `pass` (once `retry_after` has passed, if the failures ejected the server: spec/STORES.md §1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memcached_store_fails_in_time_on_a_frozen_server_and_recovers() {
    let (_memcached, proxy) = memcached_proxy();
    let url = format!("memcached://{}?timeout=250ms&retry_after=200ms", proxy.address());
    let store = MemcachedStore::open(StoreUrl::parse(&url).expect("url")).await.expect("opens");
    store.set("k", b"before", None).await.expect("set through the proxy");
    assert_eq!(store.get("k").await.expect("get").as_deref(), Some(&b"before"[..]));
    proxy.set(Fault::Freeze).expect("freeze");
    for _ in 0..3 {
        let started = Instant::now();
        let failed = store.get("k").await;
        assert!(failed.is_err(), "a frozen server is an error, not a value: {failed:?}");
        assert!(
            started.elapsed() < Duration::from_millis(250 + 1500),
            "bounded by the timeout: {:?}",
            started.elapsed()
        );
    }
    proxy.set(Fault::Pass).expect("pass");
    let started = Instant::now();
    loop {
        match store.get("k").await {
            Ok(value) => {
                assert_eq!(value.as_deref(), Some(&b"before"[..]));
                break;
            }
            Err(e) => {
                assert!(started.elapsed() < PATIENCE, "works again after pass: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
